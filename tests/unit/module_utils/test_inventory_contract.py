# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The role argument specs and the inventory model describe one contract: they must not drift apart.

The model (plugins/module_utils/inventory/model.py) is the source of truth; every role that takes a
``gpuaas_*`` inventory variable documents the same keys in its meta/argument_specs.yml.
"""

from __future__ import annotations

import glob
import os

import pytest
import yaml

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory import clusters, model

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

# role option path -> the model's allowed keys at that path
CONTRACT = {
    ("gpuaas_flavors",): model.FLAVOR_KEYS,
    ("gpuaas_cohorts",): model.COHORT_KEYS,
    ("gpuaas_cohorts", "quotas"): model.QUOTA_KEYS,
    ("gpuaas_priorities",): model.PRIORITY_KEYS,
    ("gpuaas_prometheus",): model.PROMETHEUS_KEYS,
    ("gpuaas_prometheus", "token_secret"): model.TOKEN_SECRET_KEYS,
    ("gpuaas_tenants",): model.TENANT_KEYS,
    ("gpuaas_tenants", "quotas"): model.QUOTA_KEYS,
    ("gpuaas_tenants", "preemption"): model.PREEMPTION_KEYS,
    ("gpuaas_tenants", "preemption", "borrow_within_cohort"): model.BORROW_KEYS,
    ("gpuaas_tenants", "access"): model.ACCESS_KEYS,
    ("gpuaas_tenants", "queues"): model.QUEUE_KEYS,
    ("gpuaas_tenants", "autoscaling"): model.AUTOSCALING_KEYS,
    ("gpuaas_tenants", "autoscaling", "target"): model.TARGET_KEYS,
    ("gpuaas_tenants", "autoscaling", "idle_scale_to_zero"): model.IDLE_KEYS,
    ("gpuaas_tenants", "autoscaling", "load"): model.LOAD_KEYS,
    ("gpuaas_openshift_ai",): model.OPENSHIFT_AI_KEYS,
    ("gpuaas_openshift_ai", "cpu"): model.COUNT_KEYS,
    ("gpuaas_openshift_ai", "memory"): model.COUNT_KEYS,
    ("gpuaas_clusters",): clusters.CLUSTERS_KEYS,
    ("gpuaas_clusters", "manager"): clusters.MANAGER_KEYS,
    ("gpuaas_clusters", "workers"): clusters.WORKER_KEYS,
    ("gpuaas_clusters", "workers", "flavors"): clusters.WORKER_FLAVOR_KEYS,
}


def _specs():
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml"))):
        with open(path) as handle:
            doc = yaml.safe_load(handle) or {}
        role = path.split(os.sep)[-3]
        for entry, spec in (doc.get("argument_specs") or {}).items():
            yield role, entry, spec.get("options") or {}


def _at(options, keys):
    node = None
    for key in keys:
        node = options.get(key) if isinstance(options, dict) else None
        if node is None:
            return None
        options = node.get("options") or {}
    return node


def test_the_tenants_role_documents_the_whole_model():
    """The tenants role is the contract's main entry point: every mapping is spelled out, key for key."""
    options = dict(next(o for role, entry, o in _specs() if role == "tenants" and entry == "main"))
    missing, different = [], []
    for path, keys in CONTRACT.items():
        node = _at(options, path)
        documented = sorted((node or {}).get("options") or {})
        if node is not None and node.get("elements") == "raw":
            # entries may also be a shorthand string (queues: [name]): the description must name every key
            undocumented = [k for k in keys if k not in (node.get("description") or "")]
            if undocumented:
                different.append("%s: description does not mention %s" % (".".join(path), undocumented))
        elif not documented:
            missing.append(".".join(path))
        elif documented != sorted(keys):
            different.append("%s: spec %s, model %s" % (".".join(path), documented, sorted(keys)))
    assert not different, different
    # Mappings the role spec leaves open are listed here so that documenting them later is noticed.
    assert missing == [], missing


@pytest.mark.parametrize("role,entry,options", list(_specs()))
def test_no_role_documents_a_key_the_model_rejects(role, entry, options):
    for path, keys in CONTRACT.items():
        node = _at(options, path)
        documented = set((node or {}).get("options") or {})
        extra = documented - set(keys)
        assert not extra, "roles/%s (%s) documents %s.%s, which the inventory model rejects" % (
            role, entry, ".".join(path), sorted(extra))
