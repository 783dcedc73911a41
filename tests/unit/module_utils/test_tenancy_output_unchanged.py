# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Guard for behaviour-preserving refactors of the tenancy builders (issue 21).

The digests were taken at 1f12208, before the admission policy moved to ``manifests/admission.py``: every
example inventory must still build byte-identical objects, in the same order. A change that is meant to alter the
objects updates a digest here, and its commit says why. Updated once since: issue 22 item 2 (the admission policy
pins the node pools' credential too and names the credential used in its refusals).
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
    ("lab", "kubernetes", False): (41, "268d80ac5cf8075b"),
    ("lab", "kubernetes", True): (43, "73cb143cf9d37a47"),
    ("lab", "openshift", False): (41, "171651b8660372ff"),
    ("lab", "openshift", True): (43, "bcd4366a261f8988"),
    ("examples/kubernetes", "kubernetes", False): (29, "8a4d59a6c0a4107b"),
    ("examples/kubernetes", "kubernetes", True): (31, "ea73ca4e5d850c94"),
    ("examples/kubernetes", "openshift", False): (29, "aa8e7d251f37c7b8"),
    ("examples/kubernetes", "openshift", True): (31, "38b3e590c2dfe42d"),
    ("examples/openshift", "kubernetes", False): (27, "cdef16591b57bbc9"),
    ("examples/openshift", "kubernetes", True): (29, "4ea4413d47dbf1b3"),
    ("examples/openshift", "openshift", False): (27, "5e1e8d55a3c9e938"),
    ("examples/openshift", "openshift", True): (29, "cb374191b659d0e0"),
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
