# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """The options both inventory runs take besides the inventory sections and the run lock (tenants, node_pools;
    ``INVENTORY_RUN_ARGUMENT_SPEC`` in module_utils/reconcile/inventory_run.py). The text is the tenants module's;
    node_pools overrides the descriptions where its run differs."""

    DOCUMENTATION = r"""
options:
  prometheus:
    description:
      - "The shared Prometheus setting C({url, token | token_file | token_secret: {name, namespace, key}, ca_file,
        validate_certs, timeout}) (inventory C(gpuaas_prometheus), also read by the validation role), used by the
        idle scale-to-zero triggers of C(tenants[].autoscaling)."
      - A token or CA is stored in a Secret in O(keda_namespace) and referenced through a
        C(ClusterTriggerAuthentication) named C(gpuaas-prometheus), so it never lands in a tenant namespace.
    type: dict
  openshift_ai:
    description:
      - "OpenShift AI coexistence (inventory C(gpuaas_openshift_ai), docs/openshift-ai.md): C({hardware_profiles,
        profiles_scope, applications_namespace, trusted_controllers, cpu: {min, default}, memory: {min, default}})."
      - C(hardware_profiles=true) writes one OpenShift AI C(HardwareProfile) (C(infrastructure.opendatahub.io/v1))
        per tenant, GPU flavor and allowed priority class, with C(scheduling.type=Queue) on the tenant's LocalQueue
        and the GPU count capped by the tenant's quota; owned and pruned with the tenant. C(hardware_profiles) on a
        tenant overrides it for that tenant.
      - C(profiles_scope=project) (default) puts them in each tenant namespace, C(global) in
        C(applications_namespace) (default C(redhat-ods-applications)).
      - C(trusted_controllers) (default true; applied on OpenShift or when this option is set) trusts OpenShift AI's
        controllers in C(applications_namespace) in the admission policy, each only for the frameworks Kueue manages.
    type: dict
  allow_overcommit:
    description: Accept quotas above the GPU capacity of the flavor's nodes (a warning instead of an error).
    type: bool
    default: false
  check_capacity:
    description: Read the nodes (one LIST) and compare the sum of GPU quotas per flavor with their allocatable GPUs.
    type: bool
    default: true
  keda_namespace:
    description:
      - Namespace of the KEDA operator (where the Prometheus credentials Secret goes).
      - Default C(openshift-keda) on OpenShift (the Custom Metrics Autoscaler operator), C(keda) elsewhere — the
        same platform-aware default as the C(gpuaas.platform.keda) role's C(gpuaas_keda_namespace).
    type: str
  prune:
    description:
      - Remove tenants (and shared flavors, cohorts, priorities) that exist on the cluster but are missing from the
        inventory. Off by default (safe mode), so such objects are kept and reported in RV(drift).
      - A tenant with C(state=absent) is removed either way. Ignored with O(limit_tenants) (only the named tenants,
        which must be in O(tenants), are reconciled).
    type: bool
    default: false
"""
