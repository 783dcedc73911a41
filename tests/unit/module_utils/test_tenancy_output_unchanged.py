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
object built before is byte-identical: the output without the two hashes to the previous digests).
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
    ("lab", "kubernetes", False): (43, "d1d03991270ee5c0"),
    ("lab", "kubernetes", True): (45, "22478cbf41e366f7"),
    ("lab", "openshift", False): (43, "4bacc96d078c2e63"),
    ("lab", "openshift", True): (45, "7542d948cc3358dd"),
    ("examples/kubernetes", "kubernetes", False): (31, "81ae40c8521c0782"),
    ("examples/kubernetes", "kubernetes", True): (33, "bd981095387fcbec"),
    ("examples/kubernetes", "openshift", False): (31, "528bc45419347565"),
    ("examples/kubernetes", "openshift", True): (33, "84b3ab611eb070db"),
    ("examples/openshift", "kubernetes", False): (29, "d9a723595144920d"),
    ("examples/openshift", "kubernetes", True): (31, "ad54e2e89755ac13"),
    ("examples/openshift", "openshift", False): (29, "88030f328f4346cd"),
    ("examples/openshift", "openshift", True): (31, "1a1211d6c394db75"),
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
