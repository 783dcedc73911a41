# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Guard for behaviour-preserving refactors of the tenancy builders (issue 21).

The digests were taken at 1f12208, before the admission policy moved to ``manifests/admission.py``: every
example inventory must still build byte-identical objects, in the same order. A change that is meant to alter the
objects updates a digest here, and its commit says why.
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
    ("lab", "kubernetes", False): (41, "db130a5713a97c30"),
    ("lab", "kubernetes", True): (43, "fa6581d0eac3a5fd"),
    ("lab", "openshift", False): (41, "20affb95de1d9073"),
    ("lab", "openshift", True): (43, "546bd5b50fae497b"),
    ("examples/kubernetes", "kubernetes", False): (29, "0e85723ebc2d7672"),
    ("examples/kubernetes", "kubernetes", True): (31, "49151bfd25a7d34f"),
    ("examples/kubernetes", "openshift", False): (29, "ba9c055bc2d48050"),
    ("examples/kubernetes", "openshift", True): (31, "394b47922ca685ad"),
    ("examples/openshift", "kubernetes", False): (27, "fa789e480aaf4337"),
    ("examples/openshift", "kubernetes", True): (29, "27b251766225b631"),
    ("examples/openshift", "openshift", False): (27, "23a1b94cfcda7f21"),
    ("examples/openshift", "openshift", True): (29, "424a2add7dc851be"),
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
