# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Guard for behaviour-preserving refactors of the tenancy builders (issue 21).

The digests were taken at 1f12208, before the admission policy moved to ``manifests/admission.py``: every
example inventory must still build byte-identical objects, in the same order. A change that is meant to alter the
objects updates a digest here, and its commit says why. Updated once since: issue 22 item 2 (the admission policy
pins the node pools' credential too and names the credential used in its refusals); issue 22 item 1 (two objects
more, the ValidatingAdmissionPolicy and Binding gpuaas-namespace-labels, appended after the first policy; every
object built before is byte-identical, checked by hashing the output without the two).
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
    ("lab", "kubernetes", False): (43, "2f18ccde6ba5ec21"),
    ("lab", "kubernetes", True): (45, "f97bd16583b8b2e6"),
    ("lab", "openshift", False): (43, "a2c5723796f1fc05"),
    ("lab", "openshift", True): (45, "77f42e9232faa17a"),
    ("examples/kubernetes", "kubernetes", False): (31, "33b12963db27e25c"),
    ("examples/kubernetes", "kubernetes", True): (33, "751a3ec36fa04d39"),
    ("examples/kubernetes", "openshift", False): (31, "a4f4c94ec7a56cb1"),
    ("examples/kubernetes", "openshift", True): (33, "5acb962c9c9a3892"),
    ("examples/openshift", "kubernetes", False): (29, "cd1353560b1698af"),
    ("examples/openshift", "kubernetes", True): (31, "81b023be9f00b55c"),
    ("examples/openshift", "openshift", False): (29, "e4d424535d7422fa"),
    ("examples/openshift", "openshift", True): (31, "02e61520eff789c9"),
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
