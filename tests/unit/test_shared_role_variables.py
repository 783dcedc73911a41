# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A gpuaas_* variable that several roles default is one fact: the same default in every role's defaults/main.yml
and argument spec (issue 21: automation_rbac defaulted gpuaas_keda_namespace to 'keda' where the other roles are
platform-aware, so on OpenShift the tenants account was bound to the wrong namespace)."""

from __future__ import annotations

import collections
import glob
import os

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# The one deliberate difference, and why: the tenants role can run without the platform role (its module detects the
# platform by API discovery), so its default is empty when no platform fact exists; with the fact it equals the keda
# role's.
DIFFERENT_ON_PURPOSE = {("gpuaas_keda_namespace", "tenants")}


def _defaults():
    found = collections.defaultdict(dict)
    for path in glob.glob(os.path.join(ROOT, "roles", "*", "defaults", "main.yml")):
        role = path.split(os.sep)[-3]
        for key, value in (yaml.safe_load(open(path, encoding="utf-8")) or {}).items():
            found[key][role] = value
    return found


def _spec_defaults(role):
    path = os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml")
    if not os.path.exists(path):
        return {}
    spec = yaml.safe_load(open(path, encoding="utf-8"))["argument_specs"]["main"]["options"]
    return {k: v.get("default") for k, v in spec.items() if "default" in v}


def test_shared_variables_have_one_default():
    problems = []
    for key, by_role in sorted(_defaults().items()):
        roles = {r: v for r, v in by_role.items() if (key, r) not in DIFFERENT_ON_PURPOSE}
        if len({repr(v) for v in roles.values()}) > 1:
            problems.append("%s: %s" % (key, roles))
    assert problems == []


def test_each_roles_argument_spec_says_its_defaults():
    problems = []
    for key, by_role in sorted(_defaults().items()):
        if len(by_role) < 2:
            continue
        for role, value in by_role.items():
            spec = _spec_defaults(role)
            if key in spec and spec[key] != value and not isinstance(value, (dict, list)):
                problems.append("%s in role %s: defaults %r, argument spec %r" % (key, role, value, spec[key]))
    assert problems == []
