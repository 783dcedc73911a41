# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Guard for behaviour-preserving refactors of the tenancy builders (issue 21).

The digests were taken at 1f12208, before the admission policy moved to ``manifests/admission.py``: every
example inventory must still build byte-identical objects, in the same order. A change that is meant to alter the
objects updates a digest here, and its commit says why. Updated since: issue 22 item 2 (the admission policy
pins the node pools' credential too and names the credential used in its refusals); issue 22 item 7 (the safe
priority default: the allowed-priorities annotation of the tenants without ``allowed_priorities`` is now the class
marked ``open_to_tenants`` (batch) instead of every class — checked equal to the old digests with only that
annotation set back to every class; the serving tenants name production explicitly).
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
    ("lab", "kubernetes", False): (41, "437fe7e5602703b3"),
    ("lab", "kubernetes", True): (43, "bb34619659c4a3f5"),
    ("lab", "openshift", False): (41, "52dbddc97071808b"),
    ("lab", "openshift", True): (43, "6c24016e87855581"),
    ("examples/kubernetes", "kubernetes", False): (29, "7ba86e6f9f9a816a"),
    ("examples/kubernetes", "kubernetes", True): (31, "2a0e514eb7ce7a28"),
    ("examples/kubernetes", "openshift", False): (29, "34046d00b01f6b3b"),
    ("examples/kubernetes", "openshift", True): (31, "39ea46c78c117655"),
    ("examples/openshift", "kubernetes", False): (27, "15769d2ba766565a"),
    ("examples/openshift", "kubernetes", True): (29, "02b3a2bca0d2449a"),
    ("examples/openshift", "openshift", False): (27, "a0e577d5afc1340b"),
    ("examples/openshift", "openshift", True): (29, "9bc428a6041dc7b1"),
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
