# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Shared plumbing of the single-object modules (resource_flavor, cohort, cluster_queue, ...)."""

from __future__ import annotations

import copy
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.kube.engine import ApplyEngine
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.results import ObjectRef
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import K8S_AUTH_ARG_SPEC, get_client
from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError, fail_module
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.kueue_versions import convert_from_version

APPLY_ARG_SPEC: t.Dict[str, t.Dict[str, t.Any]] = {
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    "force_conflicts": {"type": "bool", "default": True},
    "labels": {"type": "dict"},
    "annotations": {"type": "dict"},
    "wait": {"type": "bool", "default": False},
    "wait_timeout": {"type": "int", "default": 120},
}


def argument_spec(extra: t.Mapping[str, t.Any], with_apply: bool = True) -> t.Dict[str, t.Any]:
    """Connection options (+ apply options) + the module's own options."""
    spec = copy.deepcopy(K8S_AUTH_ARG_SPEC)
    if with_apply:
        spec.update(copy.deepcopy(APPLY_ARG_SPEC))
    spec.update(copy.deepcopy(dict(extra)))
    return spec


def clean_object(obj: t.Optional[t.Mapping[str, t.Any]]) -> t.Optional[t.Dict[str, t.Any]]:
    """A live object for module output: v1beta2 words, without managedFields."""
    if obj is None:
        return None
    out = convert_from_version(obj)
    (out.get("metadata") or {}).pop("managedFields", None)
    return out


def run_object_module(module: t.Any, build: t.Callable[[t.Mapping[str, t.Any]], t.Dict[str, t.Any]],
                      ref: t.Callable[[t.Mapping[str, t.Any]], ObjectRef],
                      before_apply: t.Optional[t.Callable[[ApplyEngine, t.Dict[str, t.Any]], t.Any]] = None) -> None:
    """Apply (state=present) or delete (state=absent) the single object the module describes."""
    params = module.params
    try:
        client = get_client(module)
        engine = ApplyEngine(client, check_mode=module.check_mode, force_conflicts=params.get("force_conflicts", True))
        if params.get("state", "present") == "present":
            desired = build(params)
            prelude: t.Dict[str, t.Any] = {}
            if before_apply is not None:
                prelude = before_apply(engine, desired) or {}
            result = engine.reconcile([desired], wait=params.get("wait", False),
                                      wait_timeout=params.get("wait_timeout", 120))
            out = result.to_module_result(diff=module._diff)
            if prelude.get("deleted"):
                out["deleted"] = prelude["deleted"] + out["deleted"]
                out["changed"] = True
                if module._diff and prelude.get("diff"):
                    out["diff"] = prelude["diff"] + out.get("diff", [])
            obj = result.results[0].object if result.results else None
            out["result"] = clean_object(obj) or {}
        else:
            target = ref(params)
            result = engine.delete([target], wait=params.get("wait", False),
                                   wait_timeout=params.get("wait_timeout", 120))
            out = result.to_module_result(diff=module._diff)
            out["result"] = {}
        module.exit_json(**out)
    except GpuaasError as err:
        fail_module(module, err)
