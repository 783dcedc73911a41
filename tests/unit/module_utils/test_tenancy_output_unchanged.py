# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Guard for behaviour-preserving refactors of the tenancy builders (issue 21).

The digests were taken at 1f12208, before the admission policy moved to ``manifests/admission.py``: every
example inventory must still build byte-identical objects, in the same order. A change that is meant to alter the
objects updates a digest here, and its commit says why. Updated once since: issue 22 item 2 (the admission policy
pins the node pools' credential too and names the credential used in its refusals); issue 25 (rule 6 also keeps
Kueue's elastic-job scheduling gate, which only Kueue may lift).
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
    ("lab", "kubernetes", False): (41, "131e3f8c855a6fc7"),
    ("lab", "kubernetes", True): (43, "72972b02699b7e2f"),
    ("lab", "openshift", False): (41, "8494e6c2489c9c09"),
    ("lab", "openshift", True): (43, "7ecaa8e1cee01423"),
    ("examples/kubernetes", "kubernetes", False): (29, "ff3e0fce951896c1"),
    ("examples/kubernetes", "kubernetes", True): (31, "b4b8dc10bf405d85"),
    ("examples/kubernetes", "openshift", False): (29, "c0f9304f30b9319a"),
    ("examples/kubernetes", "openshift", True): (31, "946fe03b765ef0c2"),
    ("examples/openshift", "kubernetes", False): (27, "2a9e6df8897d6f46"),
    ("examples/openshift", "kubernetes", True): (29, "1edd42b90260b070"),
    ("examples/openshift", "openshift", False): (27, "b0f42935bb5630b3"),
    ("examples/openshift", "openshift", True): (29, "7cab1effbb73d667"),
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
