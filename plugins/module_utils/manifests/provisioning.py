# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Node pools grown through Kueue's ProvisioningRequest admission check (issue 23, ``scale_by: provisioning_request``).

Per flavor fed by such pools:

* a ``ProvisioningRequestConfig`` ``gpuaas-provisioning-<flavor>`` (the cluster autoscaler's provisioning class, the
  resources it manages: the pool's GPU resource, the retry strategy);
* an ``AdmissionCheck`` of the same name, controller ``kueue.x-k8s.io/provisioning-request``, parameters → the config;
* on every ClusterQueue with quota on the flavor, ``admissionChecksStrategy.admissionChecks`` ``{name, onFlavors:
  [flavor]}``: a Workload assigned that flavor is admitted only once the autoscaler reports ``Provisioned=True`` on
  the ProvisioningRequest Kueue creates for it (Kueue v0.19.2 pkg/controller/admissionchecks/provisioning).

Kueue sets the provisioning controller up only when the ProvisioningRequest API (``autoscaling.x-k8s.io/v1``) is
served when it starts (cmd/kueue/main.go ``ServerSupportsProvisioningRequest``); v0.19.2 has no feature gate for it.
Otherwise the AdmissionCheck stays inactive and the ClusterQueues that carry it admit nothing.

Pure functions; callers pass the labels (ownership).
"""

from __future__ import annotations

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory import records
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import Tenant, TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.node_pools import provisioning_by_flavor

KUEUE_V = "kueue.x-k8s.io/v1beta2"
CONTROLLER_NAME = "kueue.x-k8s.io/provisioning-request"  # apis/kueue/v1beta2 ProvisioningRequestControllerName
CONFIG_KIND = "ProvisioningRequestConfig"
NAME_PREFIX = "gpuaas-provisioning-"
# The ProvisioningRequest API the admission check needs (k8s.io/autoscaler/cluster-autoscaler/apis).
PROVISIONING_REQUEST_V = "autoscaling.x-k8s.io/v1"


def check_name(flavor: str) -> str:
    """The AdmissionCheck and ProvisioningRequestConfig of a flavor."""
    return NAME_PREFIX + flavor


def provisioning_request_config(flavor: str, settings: records.Provisioning,
                                labels: t.Mapping[str, str]) -> t.Dict[str, t.Any]:
    spec: t.Dict[str, t.Any] = {
        "provisioningClassName": settings.provisioning_class,
        "managedResources": list(settings.managed_resources),
        "retryStrategy": {"backoffLimitCount": settings.backoff_limit_count,
                          "backoffBaseSeconds": settings.backoff_base_seconds,
                          "backoffMaxSeconds": settings.backoff_max_seconds},
    }
    if settings.parameters:
        spec["parameters"] = dict(settings.parameters)
    return {"apiVersion": KUEUE_V, "kind": CONFIG_KIND,
            "metadata": {"name": check_name(flavor), "labels": dict(labels)}, "spec": spec}


def admission_check(flavor: str, labels: t.Mapping[str, str]) -> t.Dict[str, t.Any]:
    return {"apiVersion": KUEUE_V, "kind": "AdmissionCheck",
            "metadata": {"name": check_name(flavor), "labels": dict(labels)},
            "spec": {"controllerName": CONTROLLER_NAME,
                     "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": CONFIG_KIND, "name": check_name(flavor)}}}


def desired_objects(model: TenantModel, labels: t.Mapping[str, str]) -> t.List[t.Dict[str, t.Any]]:
    """The config and the check of every flavor fed by ProvisioningRequest pools (empty without them)."""
    objs: t.List[t.Dict[str, t.Any]] = []
    for flavor, settings in sorted(provisioning_by_flavor(model.node_pools).items()):
        objs.append(provisioning_request_config(flavor, settings, labels))
        objs.append(admission_check(flavor, labels))
    return objs


def cluster_queue_checks(tenant: Tenant, model: TenantModel) -> t.List[records.AdmissionCheck]:
    """The admission checks of the tenant's ClusterQueue: one per flavor of its quotas fed by ProvisioningRequest
    pools, restricted to that flavor (a Workload on another flavor of the queue is not held)."""
    flavors = provisioning_by_flavor(model.node_pools)
    seen: t.List[str] = []
    for quota in tenant.quotas:
        if quota.flavor in flavors and quota.flavor not in seen:
            seen.append(quota.flavor)
    return [records.AdmissionCheck(check_name(f), [f]) for f in sorted(seen)]
