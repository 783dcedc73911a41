# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The typed records of the inventory sections, as the section parsers return them after validation.

Builders and reconcilers read these; none of them validates again. ``TenantModel`` (``model.py``) holds them all.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field


@dataclass
class Flavor:
    name: str
    node_labels: t.Dict[str, str] = field(default_factory=dict)
    node_taints: t.List[t.Dict[str, t.Any]] = field(default_factory=list)
    tolerations: t.List[t.Dict[str, t.Any]] = field(default_factory=list)
    topology_name: t.Optional[str] = None


@dataclass
class Cohort:
    name: str
    parent: t.Optional[str] = None
    fair_sharing_weight: t.Optional[str] = None
    # shared quota of the cohort (spec.resourceGroups), on top of its members' nominal quotas
    quotas: t.List["Quota"] = field(default_factory=list)


@dataclass
class Priority:
    name: str
    value: int
    description: t.Optional[str] = None
    # a tenant without allowed_priorities may use it (priorities.default_priorities, issue 22 item 7)
    open_to_tenants: bool = False


@dataclass
class Quota:
    flavor: str
    resources: t.Dict[str, str]
    borrowing_limit: t.Dict[str, str] = field(default_factory=dict)
    lending_limit: t.Dict[str, str] = field(default_factory=dict)


@dataclass
class Preemption:
    reclaim_within_cohort: t.Optional[str] = None
    within_cluster_queue: t.Optional[str] = None
    borrow_policy: t.Optional[str] = None
    borrow_max_priority_threshold: t.Optional[int] = None
    # the cluster_queue module's borrow_within_cohort was written, even empty: the object carries it as written
    borrow_within_cohort_set: bool = False


@dataclass
class Access:
    admin_groups: t.List[str] = field(default_factory=list)
    admin_users: t.List[str] = field(default_factory=list)
    user_groups: t.List[str] = field(default_factory=list)
    user_users: t.List[str] = field(default_factory=list)


@dataclass
class ExtraQueue:
    name: str
    namespaces: t.List[str]


@dataclass
class Autoscaling:
    name: str
    namespace: str
    target_kind: str
    target_name: str
    target_api_version: str
    min_replicas: int = 0
    max_replicas: int = 1
    polling_interval: t.Optional[int] = None
    cooldown_period: t.Optional[int] = None
    # idle scale-to-zero: the window (seconds) over which every GPU of the target's pods stayed at or below
    # the utilization threshold; None = no idle trigger
    idle_window_seconds: t.Optional[int] = None
    idle_utilization_threshold: str = "1"
    pod_regex: t.Optional[str] = None
    wake_query: t.Optional[str] = None
    wake_threshold: str = "0"
    # load-based scaling 1..max (KEDA metricType AverageValue: replicas = ceil(value / target_per_replica))
    load_query: t.Optional[str] = None
    load_target: t.Optional[str] = None
    load_activation: t.Optional[str] = None
    source_kind: t.Optional[str] = None  # the kind the user named when it differs (InferenceService)
    triggers: t.List[t.Dict[str, t.Any]] = field(default_factory=list)
    # RayCluster idle reclaim (target_kind RayCluster): the worker groups to bring to 0; None = every group whose
    # pods ask for GPUs (read from the live cluster by ray_idle_reclaim)
    worker_groups: t.Optional[t.List[str]] = None

    @property
    def idle_after_minutes(self) -> t.Optional[int]:
        """The idle window in whole minutes (rounded up); kept for callers of the minutes-only model."""
        if self.idle_window_seconds is None:
            return None
        return -(-self.idle_window_seconds // 60)


@dataclass
class Tenant:
    name: str
    namespaces: t.List[str]
    state: str = "present"
    cohort: t.Optional[str] = None
    fair_sharing_weight: t.Optional[str] = None
    quotas: t.List[Quota] = field(default_factory=list)
    preemption: Preemption = field(default_factory=Preemption)
    access: Access = field(default_factory=Access)
    autoscaling: t.List[Autoscaling] = field(default_factory=list)  # KEDA ScaledObjects
    # RayClusters and Notebooks opted in to idle reclaim (autoscaling entries with target.kind RayCluster or Notebook,
    # inventory/autoscaling.IDLE_RECLAIM_KINDS; module ray_idle_reclaim)
    ray_reclaim: t.List[Autoscaling] = field(default_factory=list)
    queues: t.List[ExtraQueue] = field(default_factory=list)
    queueing_strategy: t.Optional[str] = None
    labels: t.Dict[str, str] = field(default_factory=dict)
    default_queue: bool = True
    # WorkloadPriorityClass names the tenant may use (Kueue label and pod priorityClassName), as its entry names
    # them; None = the default (priorities.tenant_priorities: the classes open to tenants, else the lowest)
    allowed_priorities: t.Optional[t.List[str]] = None
    # OpenShift AI HardwareProfiles for this tenant; None = gpuaas_openshift_ai.hardware_profiles (issue 23)
    hardware_profiles: t.Optional[bool] = None

    @property
    def present(self) -> bool:
        return self.state == "present"

    def suggested_queue(self, namespace: str) -> t.Optional[str]:
        """The LocalQueue to name in the admission policy's message for ``namespace``."""
        if self.default_queue:
            return "default"
        for queue in self.queues:
            if namespace in queue.namespaces:
                return queue.name
        return None


@dataclass
class Provisioning:
    """A pool's Kueue ProvisioningRequest settings (``scale_by: provisioning_request``): one
    ProvisioningRequestConfig and AdmissionCheck per pool, in Kueue's and the cluster autoscaler's words."""
    provisioning_class: str = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    managed_resources: t.List[str] = field(default_factory=list)
    parameters: t.Dict[str, str] = field(default_factory=dict)
    backoff_limit_count: int = 3
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 1800


@dataclass
class NodePool:
    """One ``gpuaas_node_pools`` entry: a MachineSet/MachineDeployment that feeds ``flavor`` with nodes."""
    name: str
    flavor: str
    target_kind: str
    target_name: str
    target_namespace: str
    target_api_version: str
    min_nodes: int = 0
    max_nodes: int = 1
    gpus_per_node: int = 8
    gpu_resource: str = "nvidia.com/gpu"
    node_labels: t.Dict[str, str] = field(default_factory=dict)
    provisioning_seconds: int = 600
    idle_seconds: int = 600
    polling_interval: int = 15
    include_pending: bool = False
    # "keda" (a ScaledObject from Kueue's reserved quota) or "provisioning_request" (Kueue's admission check asks
    # the cluster autoscaler for the nodes before admitting; ``provisioning`` is then set)
    scale_by: str = "keda"
    provisioning: t.Optional[Provisioning] = None


@dataclass
class PrometheusSettings:
    url: t.Optional[str] = None
    token: t.Optional[str] = None
    token_file: t.Optional[str] = None
    token_secret: t.Optional[t.Dict[str, str]] = None
    ca_file: t.Optional[str] = None
    validate_certs: bool = True
    timeout: t.Optional[int] = None


@dataclass
class OpenShiftAI:
    """``gpuaas_openshift_ai`` (inventory/openshift_ai.py); ``configured``: the inventory has the section."""
    configured: bool = False
    hardware_profiles: bool = False
    profiles_scope: str = "project"
    applications_namespace: str = "redhat-ods-applications"
    trusted_controllers: bool = True
    cpu: t.Dict[str, str] = field(default_factory=lambda: {"min": "1", "default": "2"})
    memory: t.Dict[str, str] = field(default_factory=lambda: {"min": "2Gi", "default": "4Gi"})


@dataclass
class ProfileIdentifier:
    """One ``spec.identifiers[]`` entry of a HardwareProfile (counts as the int-or-string fields take them)."""
    identifier: str
    display_name: str
    resource_type: t.Optional[str]
    min_count: t.Union[int, str]
    default_count: t.Union[int, str]
    max_count: t.Union[int, str]


@dataclass
class HardwareProfilePlan:
    """One OpenShift AI HardwareProfile the inventory asks for, checked; manifests/openshift_ai.py renders it."""
    name: str
    namespace: str
    tenant: str
    flavor: str
    local_queue: str
    priority_class: t.Optional[str]
    identifiers: t.List[ProfileIdentifier]
    display_name: str


# -- the single-object Kueue modules (inventory/kueue_objects.py parses their options into these) ----------

@dataclass
class ObjectMeta:
    """Name, namespace and the caller's labels and annotations of one object (annotations as text)."""
    name: str
    namespace: t.Optional[str] = None
    labels: t.Dict[str, str] = field(default_factory=dict)
    annotations: t.Dict[str, str] = field(default_factory=dict)


@dataclass
class ResourceQuota:
    """One resource of a flavor in a resource group; quantities in their canonical text."""
    name: str
    nominal_quota: str
    borrowing_limit: t.Optional[str] = None
    lending_limit: t.Optional[str] = None


@dataclass
class FlavorQuotas:
    name: str
    resources: t.List[ResourceQuota]  # in the order of the group's covered_resources


@dataclass
class ResourceGroup:
    """One ``spec.resourceGroups`` entry of a ClusterQueue or Cohort, checked against Kueue's rules."""
    covered_resources: t.List[str]
    flavors: t.List[FlavorQuotas]


@dataclass
class FlavorFungibility:
    when_can_borrow: t.Optional[str] = None
    when_can_preempt: t.Optional[str] = None
    preference: t.Optional[str] = None


@dataclass
class AdmissionCheck:
    name: str
    on_flavors: t.List[str] = field(default_factory=list)


@dataclass
class ResourceFlavorSpec:
    meta: ObjectMeta
    flavor: Flavor  # taints and tolerations as given (Kubernetes keys; toleration_seconds or tolerationSeconds)


@dataclass
class CohortSpec:
    meta: ObjectMeta
    parent: t.Optional[str] = None
    resource_groups: t.List[ResourceGroup] = field(default_factory=list)
    fair_sharing_weight: t.Optional[str] = None


@dataclass
class ClusterQueueSpec:
    meta: ObjectMeta
    resource_groups: t.List[ResourceGroup] = field(default_factory=list)
    cohort: t.Optional[str] = None
    # a label selector in the API's words (matchLabels, matchExpressions); None leaves it unset: no namespace submits
    namespace_selector: t.Optional[t.Dict[str, t.Any]] = None
    queueing_strategy: t.Optional[str] = None
    preemption: t.Optional[Preemption] = None
    fair_sharing_weight: t.Optional[str] = None
    stop_policy: t.Optional[str] = None
    flavor_fungibility: t.Optional[FlavorFungibility] = None
    admission_checks: t.List[AdmissionCheck] = field(default_factory=list)


@dataclass
class LocalQueueSpec:
    meta: ObjectMeta
    cluster_queue: str
    stop_policy: t.Optional[str] = None
    fair_sharing_weight: t.Optional[str] = None


@dataclass
class PriorityClassSpec:
    meta: ObjectMeta
    priority: Priority
