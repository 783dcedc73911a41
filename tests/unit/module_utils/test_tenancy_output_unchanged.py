# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Guard for behaviour-preserving refactors of the tenancy builders (issue 21).

The digests were taken at 1f12208, before the admission policy moved to ``manifests/admission.py``: every
example inventory must still build byte-identical objects, in the same order. A change that is meant to alter the
objects updates a digest here, and its commit says why. Updated since: issue 22 item 2 (the admission policy
pins the node pools' credential too and names the credential used in its refusals); issue 22 item 7 (the safe
priority default: the allowed-priorities annotation of the tenants without ``allowed_priorities`` is now the class
marked ``open_to_tenants`` (batch) instead of every class — checked equal to the old digests with only that
annotation set back to every class; the serving tenants name production explicitly); issue 22 item 1 (two objects
more, the ValidatingAdmissionPolicy and Binding gpuaas-namespace-labels, appended after the first policy; every
object built before is byte-identical: the output without the two hashes to the previous digests); issue 25 (rule 6 of
gpuaas-require-kueue-queue also keeps Kueue's elastic-job scheduling gate: only that policy changed, every other
object byte-identical).
"""

from __future__ import annotations

import hashlib
import json
import os

import pytest
import yaml

from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import tenancy
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import TenantModel

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

# (inventory, platform, with credentials and custom admission settings) -> (object count, sha256 prefix)
DIGESTS = {
    ("lab", "kubernetes", False): (43, "d8300297f7c79c41"),
    ("lab", "kubernetes", True): (45, "7fbd5b1f4aa3c3e5"),
    ("lab", "openshift", False): (43, "6c62aa01d761a2ef"),
    ("lab", "openshift", True): (45, "054a99e4ac1acdd3"),
    ("examples/kubernetes", "kubernetes", False): (31, "8c402935020c3375"),
    ("examples/kubernetes", "kubernetes", True): (33, "181493927fd8af6c"),
    ("examples/kubernetes", "openshift", False): (31, "d9e5bd6f1d5499bb"),
    ("examples/kubernetes", "openshift", True): (33, "09478d6cd3bce93e"),
    ("examples/openshift", "kubernetes", False): (29, "f3def129287202b0"),
    ("examples/openshift", "kubernetes", True): (31, "81a076b19526d0ba"),
    ("examples/openshift", "openshift", False): (29, "3f089f4373ecda97"),
    ("examples/openshift", "openshift", True): (31, "107625b8e106b07a"),
}


@pytest.mark.parametrize("inventory,platform,customised", sorted(DIGESTS))
def test_example_inventories_build_the_same_objects(inventory, platform, customised):
    path = os.path.join(ROOT, "playbooks", "inventory", inventory, "group_vars", "all", "tenants.yml")
    with open(path) as handle:
        model = TenantModel.from_inventory(yaml.safe_load(handle))
    options = {}
    if customised:  # every input of the admission policy away from its default, a quote included (CEL escaping)
        admission = tenancy.AdmissionSettings.from_options({
            "automation_users": ["system:serviceaccount:aap:gpuaas-tenants"],
            "platform_namespaces": ["gpu-operator", "x'y"]})
        options = {"prometheus_token": "tok", "prometheus_ca": "ca", "keda_namespace": "openshift-keda",
                   "admission": admission}
    objs = tenancy.desired_objects(model, platform, **options)
    digest = hashlib.sha256(json.dumps(objs).encode()).hexdigest()[:16]
    assert (len(objs), digest) == DIGESTS[(inventory, platform, customised)]
