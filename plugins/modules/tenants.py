#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: tenants
short_description: Make the cluster's GPU tenancy equal to the inventory (Kueue queues, namespaces, RBAC, KEDA)
version_added: "0.1.0"
description:
  - One call validates the whole tenancy inventory, reads the GPU capacity the nodes offer per flavor, builds
    every desired object and reconciles them with the shared apply engine (server-side apply, bounded
    concurrency, one LIST per kind, no request for unchanged objects), then prunes objects this module owns
    that are no longer desired. Prune and delete only ever touch objects it owns (label
    C(app.kubernetes.io/managed-by=gpuaas.platform)).
  - "Ownership guard: when an object the inventory describes already exists without that label (a hand-made
    ClusterQueue, ResourceFlavor or Namespace with the same name), the run fails before its first write (also in
    check mode), listing every such object with its field managers (C(metadata.managedFields)), unless O(adopt)
    names it. A Namespace an admin labelled C(gpuaas.io/tenant=<tenant>) for the tenant that lists it counts as
    handed over. Adopted objects are labelled and from then on managed and pruned like the collection's own; they
    are reported in RV(adopted), and the existing GPU workloads of an adopted namespace that the admission policy
    would refuse on their next update in RV(adopted_namespace_workloads)."
  - "Per tenant: namespaces (label C(gpuaas.io/tenant), plus C(kueue.openshift.io/managed=true) on OpenShift),
    one ClusterQueue named like the tenant, a LocalQueue C(default) in every namespace (plus C(tenants[].queues)),
    RoleBindings (admins to C(admin), users to C(edit)), read access to the tenant's own ClusterQueue, and the
    KEDA ScaledObjects of C(tenants[].autoscaling)."
  - "Shared: ResourceFlavors, Cohorts, WorkloadPriorityClasses, a ClusterRole aggregated into C(admin)/C(edit)/C(view)
    that lets tenants read LocalQueues and Workloads (never ClusterQueues), and a ValidatingAdmissionPolicy that
    refuses GPU Pods, Jobs, Deployments and StatefulSets without the C(kueue.x-k8s.io/queue-name) label in tenant
    namespaces."
  - Every inventory problem is reported at once, with its path (for example C(gpuaas_tenants[3].quotas[0].flavor)),
    before anything is written.
  - "Offboarding (C(tenants[].state=absent), or, only with O(prune=true), a tenant whose objects exist but that the
    inventory no longer lists): the ClusterQueue gets C(stopPolicy: HoldAndDrain), the module waits (at most
    O(drain_timeout) seconds) until it holds no admitted or reserving workloads, then deletes the tenant's queues,
    bindings and ScaledObjects. Namespaces are deleted only with O(delete_namespaces=true)."
  - "Safe mode (the default, O(prune=false)): nothing is removed because it is missing from the inventory. Tenants
    on the cluster that the inventory does not list (for example onboarded from an AWX survey), and shared objects
    (flavors, cohorts, priorities) no longer listed, are left untouched and reported as drift (a warning and
    RV(drift)). An empty tenant list against a cluster that has tenants writes nothing at all (a forgotten C(-i));
    with O(prune=true) it is refused unless O(allow_empty=true)."
  - "Two runs never reconcile at once: a full run holds the C(coordination.k8s.io/v1) Lease O(lock_name) in
    O(lock_namespace) (holder identity, renewed in the background, released at the end, taken over when it was not
    renewed for O(lock_duration) seconds). Another run waits up to O(lock_wait) seconds, then fails with who holds
    the lock since when. Check mode takes no lock (it writes nothing) but warns when another run holds it."
  - "Transient API errors (connection refused/reset, timeouts, 429, 5xx) are retried with a bounded exponential
    backoff. When the API server stays unreachable the run stops scheduling requests and fails with one message:
    what was applied, what was not, and that a re-run converges."
  - A LocalQueue whose ClusterQueue changed (a namespace moved to another tenant) is deleted and created again,
    because C(spec.clusterQueue) is immutable.
author:
  - gpuaas.platform contributors (@gpuaas)
extends_documentation_fragment:
  - gpuaas.platform.k8s_auth
options:
  flavors:
    description: Kueue ResourceFlavors (inventory C(gpuaas_flavors)).
    type: list
    elements: dict
    default: []
  cohorts:
    description: Kueue Cohorts, may nest with C(parent) (inventory C(gpuaas_cohorts)).
    type: list
    elements: dict
    default: []
  priorities:
    description: WorkloadPriorityClasses C({name, value, description}) (inventory C(gpuaas_priorities)).
    type: list
    elements: dict
    default: []
  tenants:
    description:
      - The tenants (inventory C(gpuaas_tenants)). See C(docs/tenants.md) and the C(gpuaas.platform.tenants)
        role's argument spec for every key (name, namespaces, cohort, fair_sharing_weight, quotas, preemption,
        access, queues, autoscaling, queueing_strategy, labels, state).
    type: list
    elements: dict
    default: []
  prometheus:
    description:
      - "The shared Prometheus setting C({url, token | token_file | token_secret: {name, namespace, key}, ca_file,
        validate_certs, timeout}) (inventory C(gpuaas_prometheus), also read by the validation role), used by the
        idle scale-to-zero triggers of C(tenants[].autoscaling)."
      - A token or CA is stored in a Secret in O(keda_namespace) and referenced through a
        C(ClusterTriggerAuthentication) named C(gpuaas-prometheus), so it never lands in a tenant namespace.
    type: dict
  allow_overcommit:
    description: Accept quotas above the GPU capacity of the flavor's nodes (a warning instead of an error).
    type: bool
    default: false
  check_capacity:
    description: Read the nodes (one LIST) and compare the sum of GPU quotas per flavor with their allocatable GPUs.
    type: bool
    default: true
  delete_namespaces:
    description: Delete the namespaces of offboarded tenants (and namespaces removed from a tenant).
    type: bool
    default: false
  drain_timeout:
    description: Seconds to wait for an offboarded tenant's ClusterQueue to hold no admitted workloads.
    type: int
    default: 600
  limit_tenants:
    description:
      - Reconcile (and prune) only these tenants' objects; shared objects (flavors, cohorts, priorities, policy)
        are neither applied nor pruned. Used by the onboard and offboard playbooks.
      - The whole O(tenants) list is still validated, with the checks across tenants (namespace claims, GPU
        capacity of each flavor), but the cluster is read only for these tenants (LISTs with the label selector
        C(gpuaas.io/tenant in (...))), so the run costs what these tenants have, not what the cluster has.
    type: list
    elements: str
  platform:
    description: C(auto) detects OpenShift by API discovery; C(openshift) adds the C(kueue.openshift.io/managed) label.
    type: str
    choices: [auto, kubernetes, openshift]
    default: auto
  admission:
    description:
      - What the admission policy C(gpuaas-require-kueue-queue) trusts (docs/security.md). Each key replaces its
        default list when given.
    type: dict
    default: {}
    suboptions:
      platform_namespaces:
        description: Namespaces the policy does not apply to (GPU Operator, monitoring, Kueue, KEDA, C(kube-system) ...).
        type: list
        elements: str
      workload_controllers:
        description:
          - Usernames (C(request.userInfo.username)) whose Pods and child workloads are admitted on the strength of
            their parent (the Job controller, the operators of Kueue's CRD frameworks). Never ownerReferences.
        type: list
        elements: str
      kueue_users:
        description: Kueue's own usernames, the only ones that may lift its admission gate or change a Pod's queue label.
        type: list
        elements: str
      automation_users:
        description: Usernames that may write ScaledObject triggers using the platform's Prometheus credential.
        type: list
        elements: str
      automation_groups:
        description: Groups that may do the same (default C(system:masters)).
        type: list
        elements: str
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
  allow_empty:
    description: With O(prune=true), accept an empty O(tenants) list (which removes every tenant). Refused otherwise.
    type: bool
    default: false
  lock:
    description: Hold the cluster-side Lease lock during a run that writes (see the description).
    type: bool
    default: true
  lock_namespace:
    description: Namespace of the lock Lease (it must exist; C(kube-system) always does).
    type: str
    default: kube-system
  lock_name:
    description: Name of the lock Lease.
    type: str
    default: gpuaas-tenants
  lock_wait:
    description: Seconds to wait for another run's lock before failing.
    type: int
    default: 60
  lock_duration:
    description: Seconds after its last renewal that a lock of a run that died is taken over (renewed every third).
    type: int
    default: 60
  concurrency:
    description: How many objects are applied in parallel.
    type: int
    default: 8
  adopt:
    description:
      - Existing objects not managed by this collection that the run may take over (see the ownership guard in the
        description), each as C(Kind/name) (cluster-scoped, for example C(ClusterQueue/nlp)) or
        C(Kind/namespace/name) (for example C(LocalQueue/nlp-train/default)); the kind is case-insensitive.
      - C(*) adopts every such object. Names that match nothing are ignored.
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    description: Server-side dry run (C(dryRun=All)); nothing is written, no drain wait happens.
    support: full
  diff_mode:
    description: Per-object diffs of the fields this collection manages (Secret data is redacted).
    support: full
notes:
  - Requires the C(kubernetes) Python library and Kueue (C(v1beta2), or C(v1beta1) on older clusters).
  - KEDA is needed only when a tenant has C(tenants[].autoscaling).
"""

EXAMPLES = r"""
- name: Converge the whole GPU tenancy from group_vars
  gpuaas.platform.tenants:
    flavors: "{{ gpuaas_flavors }}"
    cohorts: "{{ gpuaas_cohorts }}"
    priorities: "{{ gpuaas_priorities }}"
    tenants: "{{ gpuaas_tenants }}"
    prometheus: "{{ gpuaas_prometheus }}"

- name: Remove every tenant the inventory no longer lists (opt-in; safe mode only reports them)
  gpuaas.platform.tenants:
    flavors: "{{ gpuaas_flavors }}"
    cohorts: "{{ gpuaas_cohorts }}"
    tenants: "{{ gpuaas_tenants }}"
    prune: true

- name: Take over a hand-made ClusterQueue and namespace of the same names as the inventory's (brownfield)
  gpuaas.platform.tenants:
    flavors: "{{ gpuaas_flavors }}"
    cohorts: "{{ gpuaas_cohorts }}"
    tenants: "{{ gpuaas_tenants }}"
    adopt: [ClusterQueue/nlp, Namespace/nlp-train]

- name: Offboard one tenant and delete its namespaces
  gpuaas.platform.tenants:
    flavors: "{{ gpuaas_flavors }}"
    cohorts: "{{ gpuaas_cohorts }}"
    tenants: [{name: vision, state: absent}]
    limit_tenants: [vision]
    delete_namespaces: true
"""

RETURN = r"""
changed:
  description: Whether any object was created, updated or deleted (or would be, in check mode).
  returned: always
  type: bool
summary:
  description: Object counts per action.
  returned: always
  type: dict
  sample: {"created": 0, "updated": 1, "unchanged": 41, "deleted": 0}
created:
  description: References of created objects.
  returned: always
  type: list
  elements: dict
updated:
  description: References of updated objects.
  returned: always
  type: list
  elements: dict
deleted:
  description: References of deleted (pruned or offboarded) objects.
  returned: always
  type: list
  elements: dict
tenants:
  description: Present tenants with their namespaces.
  returned: always
  type: dict
  sample: {"nlp": ["nlp-train", "nlp-serve"]}
offboarded:
  description: Tenants drained and removed in this run.
  returned: always
  type: list
  elements: str
recreated_local_queues:
  description: LocalQueues deleted and created again because their ClusterQueue changed (C(namespace/name)).
  returned: always
  type: list
  elements: str
kept_namespaces:
  description: Namespaces this module created that no tenant claims any more, kept because O(delete_namespaces=false).
  returned: always
  type: list
  elements: str
capacity:
  description: GPU capacity per flavor and resource read from the nodes.
  returned: when O(check_capacity=true)
  type: dict
  sample: {"h100": {"nvidia.com/gpu": "16"}}
objects:
  description: Number of desired objects.
  returned: always
  type: int
requests:
  description: API requests made by the engine per verb (list, get, apply, delete).
  returned: always
  type: dict
api_versions:
  description: API versions used (for example the Kueue version served).
  returned: always
  type: dict
drift:
  description:
    - What exists on the cluster (owned by this module) but is not in the inventory, and was left untouched because
      O(prune=false). With O(prune=true) both lists are empty (those objects are in RV(deleted) instead).
    - C(unmanaged_tenants) are tenant names, C(unmanaged_objects) references of the objects prune would delete,
      C(skipped_writes) is true when an empty tenant list made the run write nothing at all.
  returned: always
  type: dict
  sample: {"prune": false, "unmanaged_tenants": ["survey-team"], "skipped_writes": false,
           "unmanaged_objects": [{"kind": "ClusterQueue", "name": "survey-team", "apiVersion": "kueue.x-k8s.io/v1beta2"}]}
adopted:
  description:
    - Existing objects this collection did not manage that the run took over (in check mode, would take over), with
      their field managers and why (C(adopt list) or the tenant label an admin set).
  returned: always
  type: list
  elements: dict
  sample: [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "name": "nlp",
            "managers": ["kubectl-client-side-apply (Update)"], "reason": "adopt list"}]
adopted_namespace_workloads:
  description:
    - GPU Pods, Deployments, StatefulSets and Jobs in adopted namespaces without the C(kueue.x-k8s.io/queue-name)
      label, which the admission policy refuses on their next update (also a warning).
  returned: always
  type: list
  elements: dict
  sample: [{"kind": "Deployment", "namespace": "nlp-serve", "name": "vllm", "resources": ["nvidia.com/gpu"]}]
lock:
  description: The lock this run held (Lease, holder identity, seconds waited, the expired holder taken over).
  returned: when a lock was taken
  type: dict
diff:
  description: Per-object before/after of the managed fields (with C(--diff)).
  returned: when diff mode is on
  type: list
  elements: dict
problems:
  description:
    - Every inventory problem, with its path, when validation failed.
    - Every existing object not managed by this collection, with its field managers, when the ownership guard
      refused the run (C(error_details.not_owned) has them as references).
  returned: on failure
  type: list
  elements: str
"""

import base64
import time
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import tenancy as builders
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import keda
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.engine import ApplyEngine
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.results import ObjectRef, PruneScope
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import (
    K8S_AUTH_ARG_SPEC,
    ApiException,
    ApiUnreachable,
    KubeAnsibleModule,
    get_client,
    register_secrets,
    translate_api_exception,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.lease import LeaseLock, read_holder
from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError, fail_module
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.ownership import (
    COMPONENT_LABEL,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    TENANT_LABEL,
    adoption_name,
    tenant_of,
)

OWNED_SELECTOR = "%s=%s,%s=%s" % (MANAGED_BY_LABEL, MANAGED_BY_VALUE,
                                  COMPONENT_LABEL, builders.COMPONENT_VALUE)


# A limited run reads the LocalQueues of at most this many desired namespaces one by one (else one LIST of all).
LIMITED_NAMESPACE_LISTS = 8

# Shared (not per tenant) kinds: neither applied nor pruned with limit_tenants.
SHARED_KINDS = ("ResourceFlavor", "Cohort", "WorkloadPriorityClass", "ValidatingAdmissionPolicy",
                "ValidatingAdmissionPolicyBinding", "ClusterTriggerAuthentication", "Secret")


class TenantsScope(PruneScope):
    """Prune scope: objects of the tenants component, optionally only those of some tenants.

    Where each namespaced kind is looked for: the one Secret this module writes (gpuaas-prometheus) lives in the
    KEDA namespace, so Secrets are read there only (``keda_namespace``), never cluster-wide: the shipped
    least-privilege account may read Secrets only there, and no run should pull every Secret of the cluster to
    prune one. A Secret left in a former KEDA namespace is then no longer pruned (that account could not delete it
    there either). LocalQueues, RoleBindings and ScaledObjects stay one label-selected LIST across namespaces: the
    shipped role may list them cluster-wide (tenant namespace names come from the inventory, they cannot be pinned),
    one request per kind instead of one per namespace, and a removed tenant's objects are found wherever they are,
    also in a namespace that lost its tenant label or is no longer listed anywhere.
    """

    def __init__(self, kinds: t.Sequence[t.Tuple[str, str]], tenants: t.Optional[t.Sequence[str]] = None,
                 declared: t.Optional[t.Iterable[str]] = None, keda_namespace: t.Optional[str] = None) -> None:
        """``declared``: safe mode — only objects of these tenants may be pruned; the others are ``kept``."""
        super().__init__(kinds, labels={COMPONENT_LABEL: builders.COMPONENT_VALUE},
                         require_tenant_label=False,
                         kind_namespaces={"Secret": [keda_namespace] if keda_namespace else []})
        self.only = set(tenants) if tenants is not None else None
        self.declared = set(declared) if declared is not None else None
        self.kept: t.List[t.Mapping[str, t.Any]] = []

    def matches(self, obj: t.Mapping[str, t.Any]) -> bool:
        if not super().matches(obj):
            return False
        tenant = ((obj.get("metadata") or {}).get("labels") or {}).get(TENANT_LABEL)
        if self.only is not None:
            return tenant in self.only
        if self.declared is not None and tenant not in self.declared:
            self.kept.append(obj)  # not the inventory's to remove (safe mode): reported as drift if not desired
            return False
        return True


def read_nodes(client: t.Any) -> t.List[t.Dict[str, t.Any]]:
    """Name, labels and allocatable of every node (one LIST)."""
    try:
        items = client.resource("v1", "Node").list()
    except ApiException as exc:
        raise translate_api_exception(exc, "list", "nodes")
    return [{"name": (n.get("metadata") or {}).get("name"), "labels": (n.get("metadata") or {}).get("labels") or {},
             "allocatable": (n.get("status") or {}).get("allocatable") or {}} for n in items]


def _list(client: t.Any, api_version: str, kind: str, selector: str,
          namespace: t.Optional[str] = None) -> t.List[t.Dict[str, t.Any]]:
    try:
        return client.resource(api_version, kind).list(namespace=namespace, label_selector=selector)
    except ApiException as exc:
        raise translate_api_exception(exc, "list", kind)


def tenants_selector(limit: t.Optional[t.Sequence[str]]) -> str:
    """The LIST selector of a run: what the collection owns, only the named tenants' objects with limit_tenants.

    A limited run (onboard/offboard one tenant) then reads what that tenant has, not the whole tenancy; the
    cross-tenant checks (namespace claims, capacity) work on the inventory and the nodes, not on these LISTs.
    """
    if limit is None:
        return OWNED_SELECTOR
    return "%s,%s in (%s)" % (OWNED_SELECTOR, TENANT_LABEL, ",".join(sorted(set(limit))))


def _read_file(path: t.Optional[str], what: str) -> t.Optional[str]:
    if not path:
        return None
    try:
        with open(path) as handle:
            return handle.read()
    except OSError as exc:
        raise GpuaasError("cannot read %s %s: %s" % (what, path, exc),
                          hint="gpuaas_prometheus.%s must be a readable file on the Ansible controller" % what)


def _redact(diffs: t.List[t.Dict[str, t.Any]]) -> None:
    for entry in diffs:
        for side in ("before", "after"):
            obj = entry.get(side)
            if isinstance(obj, dict) and obj.get("kind") == "Secret":
                for key in ("data", "stringData"):
                    if isinstance(obj.get(key), dict):
                        obj[key] = {k: "<redacted>" for k in obj[key]}


class TenantsReconciler:
    """The module's work, separate from AnsibleModule so unit tests can drive it with a fake client."""

    def __init__(self, client: t.Any, params: t.Mapping[str, t.Any], check_mode: bool = False,
                 diff: bool = False, sleep: t.Callable[[float], None] = time.sleep,
                 clock: t.Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.params = params
        self.check_mode = check_mode
        self.diff = diff
        self.sleep = sleep
        self.clock = clock
        self.warnings: t.List[str] = []
        # Called with every secret value read at run time (token_file, token_secret), so the module can register
        # it with no_log_values before anything that could contain it is returned or logged.
        self.secret_sink: t.Callable[[str], None] = lambda _value: None
        self.lock: t.Optional[LeaseLock] = None

    def inventory(self) -> t.Dict[str, t.Any]:
        p = self.params
        return {
            "gpuaas_flavors": p.get("flavors") or [],
            "gpuaas_cohorts": p.get("cohorts") or [],
            "gpuaas_priorities": p.get("priorities") or [],
            "gpuaas_tenants": p.get("tenants") or [],
            "gpuaas_prometheus": p.get("prometheus") or {},
            "gpuaas_allow_overcommit": bool(p.get("allow_overcommit")),
        }

    def secret_token(self, ref: t.Optional[t.Mapping[str, str]]) -> t.Optional[str]:
        """The bearer token stored in gpuaas_prometheus.token_secret (one GET)."""
        if not ref:
            return None
        try:
            secret = self.client.resource("v1", "Secret").get(ref["name"], ref["namespace"])
        except ApiException as exc:
            raise translate_api_exception(exc, "read", "Secret %s/%s" % (ref["namespace"], ref["name"]))
        value = ((secret or {}).get("data") or {}).get(ref["key"])
        if not value:
            raise GpuaasError("gpuaas_prometheus.token_secret: Secret %s/%s has no key %r"
                              % (ref["namespace"], ref["name"], ref["key"]),
                              hint="point token_secret at a Secret holding the Prometheus bearer token (key: token)")
        self.secret_sink(value)
        token = base64.b64decode(value).decode()
        self._register(token)
        return token

    def _register(self, value: t.Optional[str]) -> None:
        if value:
            self.secret_sink(value)
            if value.strip() and value.strip() != value:
                self.secret_sink(value.strip())

    def prometheus_token(self, prom: t.Any) -> t.Optional[str]:
        """The Prometheus token from the inventory, token_file or token_secret — registered no_log first."""
        if prom.token:
            self._register(prom.token)
            return prom.token
        from_file = _read_file(prom.token_file, "token_file")
        if from_file:
            self._register(from_file)
            return from_file
        return self.secret_token(prom.token_secret)

    def keda_namespace(self, platform: str) -> str:
        """The KEDA namespace: the option, else the platform's default (as the keda role's)."""
        return self.params.get("keda_namespace") or keda.default_namespace(platform)

    def live_tenants(self, kueue_av: str, live_cqs: t.Sequence[t.Mapping[str, t.Any]]) -> t.Set[str]:
        """Tenants with objects on the cluster: owned ClusterQueues and owned (labelled) namespaces."""
        names = {tenant_of(cq) for cq in live_cqs}
        for ns in _list(self.client, "v1", "Namespace", OWNED_SELECTOR):
            if not (ns.get("metadata") or {}).get("deletionTimestamp"):
                names.add(tenant_of(ns))
        names.discard(None)
        return {n for n in names if n}

    def owned_objects(self, kinds: t.Sequence[t.Tuple[str, str]], scope: "TenantsScope") -> t.List[t.Mapping[str, t.Any]]:
        """Owned objects of ``kinds`` that ``scope`` would prune or keep (read only; pinned kinds in their namespaces)."""
        out: t.List[t.Mapping[str, t.Any]] = []
        for av, kind in kinds:
            where = scope.namespaces_of(kind) if scope.pinned(kind) else [None]
            for ns in where or []:
                for obj in _list(self.client, av, kind, OWNED_SELECTOR, namespace=ns):
                    obj.setdefault("kind", kind)
                    if scope.matches(obj):
                        out.append(obj)
        return out + list(scope.kept)

    def platform(self) -> str:
        wanted = self.params.get("platform") or "auto"
        if wanted != "auto":
            return wanted
        return "openshift" if self.client.served("config.openshift.io/v1") else "kubernetes"

    def run(self) -> t.Dict[str, t.Any]:
        try:
            return self._run()
        except ApiUnreachable as err:
            if "stage" not in err.details:
                err = ApiUnreachable(
                    "%s. The run stopped there; objects already written stay as they are (each is applied whole), "
                    "and re-running the same playbook once the API server is back converges."
                    % err.message.rstrip("."), hint=err.hint, details=err.details)
            err.details.pop("partial_result", None)
            raise err
        finally:
            if self.lock is not None:
                unreachable = getattr(self.client, "unreachable", None) is not None
                warning = self.lock.release()
                if warning and not unreachable:
                    self.warnings.append(warning)

    def served_kinds(self, kueue_av: str, limit: t.Optional[t.Sequence[str]]) -> t.List[t.Tuple[str, str]]:
        p = self.params
        served_kinds = []
        for av, kind in builders.MANAGED_KINDS:
            if kind == "Namespace" and not p.get("delete_namespaces"):
                continue
            if av.startswith("kueue.x-k8s.io/"):
                av = kueue_av
            elif not self.client.served(av):
                continue
            if limit is not None and kind in SHARED_KINDS:
                continue
            served_kinds.append((av, kind))
        return served_kinds

    def _run(self) -> t.Dict[str, t.Any]:
        p = self.params
        nodes = None
        if p.get("check_capacity", True):
            try:
                nodes = read_nodes(self.client)
            except GpuaasError as err:
                if err.details.get("status") != 403:
                    raise
                self.warnings.append("cannot list nodes (forbidden): the GPU capacity check was skipped")
        model = TenantModel.from_inventory(self.inventory(), nodes)
        self.warnings.extend(model.warnings)
        limit = p.get("limit_tenants")
        if limit is not None:
            unknown = [n for n in limit if model.tenant(n) is None]
            if unknown:
                raise GpuaasError("limit_tenants names %s, which the tenants list does not define" % ", ".join(unknown),
                                  hint="pass the tenant (with state present or absent) in tenants as well")
        prune = bool(p.get("prune"))
        declared = {x.name for x in model.tenants}
        present = {x.name for x in model.present_tenants}
        platform = self.platform()

        selector = tenants_selector(limit)
        engine = ApplyEngine(self.client, check_mode=self.check_mode, concurrency=p.get("concurrency") or 8,
                             guard_ownership=True, adopt=p.get("adopt") or [],
                             list_selector=selector if limit is not None else None)
        kueue_version = engine.kueue_version()
        kueue_av = "kueue.x-k8s.io/%s" % kueue_version

        # Safe mode decisions need reads only, so a refused or empty run writes nothing (not even the lock).
        live_cqs = _list(self.client, kueue_av, "ClusterQueue", selector)
        if limit is None and not declared:
            live = self.live_tenants(kueue_av, live_cqs)
            if prune and not p.get("allow_empty"):
                raise GpuaasError(
                    "refusing to prune with an empty tenant list: it would drain and remove every tenant on the "
                    "cluster (%d: %s)" % (len(live), ", ".join(sorted(live)) or "none yet"),
                    hint="is the inventory missing (-i) or gpuaas_tenants misspelled? To really remove every tenant set "
                         "gpuaas_tenants_allow_empty: true as well (or offboard them one by one with state: absent)",
                    details={"reason": "EmptyInventory", "tenants": sorted(live)})
            if not prune and live:
                return self.empty_inventory_result(model, kueue_av, kueue_version, live, nodes)

        prom = model.prometheus
        # Before the first write (the lock, a drain): an object of a desired name that the collection does not own
        # fails the run now, so a refused run writes nothing at all; reconcile checks again under the lock. Which
        # objects are desired does not depend on the Prometheus credential's value, so it is read (a token file, a
        # Secret) under the lock as before, and a placeholder stands in for it here.
        placeholder = "ownership-preflight"
        has_token = bool(prom.token or prom.token_file or prom.token_secret)
        engine.check_ownership(self.desired_objects(model, platform, placeholder if has_token else None,
                                                    placeholder if prom.ca_file else None, limit))

        if not self.check_mode and p.get("lock", True):
            self.lock = LeaseLock(self.client, p.get("lock_name") or "gpuaas-tenants",
                                  p.get("lock_namespace") or "kube-system", wait=float(p.get("lock_wait", 60)),
                                  duration=int(p.get("lock_duration") or 60), sleep=self.sleep, clock=self.clock)
            try:
                self.lock.acquire()
            except GpuaasError as err:
                if err.details.get("status") != 403:
                    raise
                # Credentials without rights on the lock Lease: run unguarded, but say so loudly.
                self.warnings.append(
                    "the lock %s could not be taken (forbidden): this run is not guarded against a concurrent run. "
                    "Grant get, create, update and delete on leases.coordination.k8s.io in %s to the automation "
                    "account, or set gpuaas_tenants_lock: false to silence this" % (self.lock.ref, self.lock.namespace))
                self.lock = None
        if self.lock is not None:
            self.lock.start_renewal()
            if self.lock.took_over:
                self.warnings.append("took over the lock %s from %s, which had not renewed it for %ss (a run that "
                                     "died?)" % (self.lock.ref, self.lock.took_over, self.lock.duration))
            live_cqs = _list(self.client, kueue_av, "ClusterQueue", selector)  # as of holding the lock
        elif self.check_mode and p.get("lock", True):
            holder = read_holder(self.client, p.get("lock_name") or "gpuaas-tenants",
                                 p.get("lock_namespace") or "kube-system")
            if holder:
                self.warnings.append("another run (holder %s) holds the lock since %s: a real run would wait for it"
                                     % (holder.get("holderIdentity"), holder.get("acquireTime")))

        token = self.prometheus_token(prom)
        ca_data = _read_file(prom.ca_file, "ca_file")
        desired = self.desired_objects(model, platform, token, ca_data, limit)

        live_tenant_names = {tenant_of(cq) for cq in live_cqs} - {None}
        removable = declared - present
        if prune:
            removable |= live_tenant_names - declared
        offboard = sorted(live_tenant_names & removable)
        if limit is not None:
            offboard = [x for x in offboard if x in limit]
        engine.drain(kueue_av, "ClusterQueue", [cq for cq in live_cqs if tenant_of(cq) in offboard],
                     float(p.get("drain_timeout", 600)), self.sleep, self.clock)
        engine.undrain(kueue_av, "ClusterQueue",
                       [cq for cq in live_cqs if tenant_of(cq) in present and (limit is None or tenant_of(cq) in limit)])
        recreated = self.recreate_moved_local_queues(desired, kueue_av, engine, limited=limit is not None)
        if self.lock is not None and self.lock.lost:
            raise GpuaasError("this run lost the lock %s to another run before pruning; nothing was pruned"
                              % self.lock.ref, hint="re-run when the other run has finished")

        served_kinds = self.served_kinds(kueue_av, limit)
        scope = TenantsScope(served_kinds, limit, declared=None if (prune or limit is not None) else declared,
                             keda_namespace=self.keda_namespace(platform))
        result = engine.reconcile(desired, prune=scope)

        out = result.to_module_result(diff=self.diff)
        if "diff" in out:
            _redact(out["diff"])
        if recreated:
            out["changed"] = True
        desired_keys = {(o["kind"], o["metadata"].get("namespace") or "", o["metadata"]["name"]) for o in desired}
        drift_objects = [o for o in scope.kept if ObjectRef.from_object(o).key not in desired_keys]
        unmanaged = sorted({tenant_of(o) for o in drift_objects} - {None})
        if limit is None and not prune:
            unmanaged = sorted(set(unmanaged) | (live_tenant_names - declared))
        desired_ns = {o["metadata"]["name"] for o in desired if o["kind"] == "Namespace"}
        kept = []
        if not p.get("delete_namespaces"):
            for ns in _list(self.client, "v1", "Namespace", selector):
                name = ns["metadata"]["name"]
                owner = (ns["metadata"].get("labels") or {}).get(TENANT_LABEL)
                if ns["metadata"].get("deletionTimestamp"):
                    continue  # already being deleted (e.g. an earlier offboarding with delete_namespaces): not kept
                if owner in unmanaged:
                    continue  # an unmanaged tenant's namespace: drift, not a kept namespace
                if name not in desired_ns and (limit is None or owner in limit):
                    kept.append(name)
        adopted = out.get("adopted") or []
        out.update({
            "adopted": adopted,
            "adopted_namespace_workloads": self.report_adoption(adopted),
            "tenants": {x.name: list(x.namespaces) for x in model.present_tenants
                        if limit is None or x.name in limit},
            "offboarded": offboard,
            "recreated_local_queues": recreated,
            "kept_namespaces": sorted(kept),
            "objects": len(desired),
            "requests": dict(result.requests),
            "drift": self.drift(unmanaged, drift_objects, prune, skipped=False),
        })
        out.setdefault("api_versions", {})["kueue.x-k8s.io"] = kueue_version
        if nodes is not None:
            out["capacity"] = model.capacity
        if self.lock is not None:
            out["lock"] = {"lease": self.lock.ref, "holder": self.lock.identity, "waited": round(self.lock.waited, 1),
                           "took_over": self.lock.took_over}
        return out

    def desired_objects(self, model: TenantModel, platform: str, token: t.Optional[str], ca_data: t.Optional[str],
                        limit: t.Optional[t.Sequence[str]]) -> t.List[t.Dict[str, t.Any]]:
        """The desired objects of this run (only the limited tenants' with limit_tenants)."""
        desired = builders.desired_objects(model, platform, token, ca_data, self.keda_namespace(platform),
                                           builders.AdmissionSettings.from_options(self.params.get("admission")))
        if limit is not None:
            desired = [o for o in desired if (o["metadata"].get("labels") or {}).get(TENANT_LABEL) in limit]
        return desired

    def report_adoption(self, adopted: t.Sequence[t.Mapping[str, t.Any]]) -> t.List[t.Dict[str, t.Any]]:
        """Warn about adopted objects; return the GPU workloads of adopted namespaces the policy would refuse."""
        if not adopted:
            return []
        verb = "would adopt" if self.check_mode else "adopted"
        self.warnings.append("%s %d object%s that gpuaas.platform did not manage (labelled, then managed and pruned "
                             "like its own): %s" % (verb, len(adopted), "" if len(adopted) == 1 else "s", ", ".join(
                                 "%s (%s; managers: %s)" % (adoption_name(a["kind"], a["name"], a.get("namespace")),
                                                            a.get("reason"), ", ".join(a.get("managers") or []) or "none")
                                 for a in adopted)))
        namespaces = sorted(a["name"] for a in adopted if a["kind"] == "Namespace")
        objects: t.List[t.Dict[str, t.Any]] = []
        unreadable: t.List[str] = []
        for api_version, kind in builders.ADOPTION_WORKLOAD_KINDS:
            for ns in namespaces:
                try:
                    items = self.client.resource(api_version, kind).list(namespace=ns)
                except ApiException as exc:
                    err = translate_api_exception(exc, "list", "%s in namespace %s" % (kind, ns))
                    if err.details.get("status") != 403:
                        raise err
                    unreadable.append("%s in %s" % (kind, ns))  # a least-privilege account: say so, do not fail
                    continue
                for item in items:
                    item.setdefault("kind", kind)
                    objects.append(item)
        if unreadable:
            self.warnings.append("cannot list %s (forbidden): the GPU workloads of the adopted namespaces that the "
                                 "admission policy would refuse were not checked there; grant list on them or check "
                                 "by hand" % ", ".join(unreadable))
        refused = builders.workloads_refused_on_update(objects)
        if refused:
            self.warnings.append(
                "%d existing GPU workload%s in adopted namespaces carr%s no label %s: the admission policy %s refuses "
                "%s next update (add the label, pointing at a LocalQueue of the tenant, to submit %s through Kueue): %s"
                % (len(refused), "" if len(refused) == 1 else "s", "ies" if len(refused) == 1 else "y",
                   builders.QUEUE_LABEL, builders.POLICY_NAME, "its" if len(refused) == 1 else "their",
                   "it" if len(refused) == 1 else "them",
                   ", ".join("%s %s/%s (%s)" % (w["kind"], w["namespace"], w["name"], ", ".join(w["resources"]))
                             for w in refused)))
        return refused

    def drift(self, unmanaged: t.Sequence[str], objects: t.Sequence[t.Mapping[str, t.Any]], prune: bool,
              skipped: bool) -> t.Dict[str, t.Any]:
        refs = sorted((ObjectRef.from_object(o) for o in objects), key=lambda r: r.key)
        shared = [r for r, o in zip(refs, objects) if not tenant_of(o)]
        if unmanaged:
            self.warnings.append(
                "%d tenant%s on the cluster %s not in the inventory and %s left untouched (gpuaas_tenants_prune is "
                "false): %s. Add %s to gpuaas_tenants, offboard with state: absent, or set gpuaas_tenants_prune: true "
                "to remove every tenant missing from the inventory."
                % (len(unmanaged), "" if len(unmanaged) == 1 else "s", "is" if len(unmanaged) == 1 else "are",
                   "was" if len(unmanaged) == 1 else "were", ", ".join(unmanaged),
                   "it" if len(unmanaged) == 1 else "them"))
        if shared:
            self.warnings.append(
                "%d shared object%s no longer in the inventory kept (gpuaas_tenants_prune is false): %s"
                % (len(shared), "" if len(shared) == 1 else "s", ", ".join(str(r) for r in shared[:10])
                   + (" …" if len(shared) > 10 else "")))
        return {"prune": prune, "unmanaged_tenants": list(unmanaged), "skipped_writes": skipped,
                "unmanaged_objects": [r.to_dict() for r in refs]}

    def empty_inventory_result(self, model: TenantModel, kueue_av: str, kueue_version: str, live: t.Set[str],
                               nodes: t.Any) -> t.Dict[str, t.Any]:
        """An empty tenant list against a cluster with tenants, prune off: read only, report, write nothing."""
        scope = TenantsScope(self.served_kinds(kueue_av, None), None, declared=set(),
                             keda_namespace=self.keda_namespace(self.platform()))
        objects = self.owned_objects(scope.kinds, scope)
        self.warnings.append(
            "the tenant list is empty but the cluster has %d tenant%s: nothing was written (a forgotten -i or a "
            "misspelled gpuaas_tenants?)" % (len(live), "" if len(live) == 1 else "s"))
        out: t.Dict[str, t.Any] = {
            "changed": False, "summary": {"created": 0, "updated": 0, "unchanged": 0, "deleted": 0},
            "created": [], "updated": [], "deleted": [], "tenants": {}, "offboarded": [],
            "recreated_local_queues": [], "kept_namespaces": [], "objects": 0, "requests": {},
            "adopted": [], "adopted_namespace_workloads": [],
            "api_versions": {"kueue.x-k8s.io": kueue_version},
            "drift": self.drift(sorted(live), objects, False, skipped=True),
        }
        if self.diff:
            out["diff"] = []
        if nodes is not None:
            out["capacity"] = model.capacity
        return out

    def recreate_moved_local_queues(self, desired: t.Sequence[t.Mapping[str, t.Any]], kueue_av: str,
                                    engine: ApplyEngine, limited: bool = False) -> t.List[str]:
        """Delete owned LocalQueues whose (immutable) clusterQueue differs from the desired one.

        ``limited`` (limit_tenants): the desired namespaces are read one by one — whoever's tenant label their
        LocalQueues carry (a namespace moved from another tenant) — instead of every owned LocalQueue.
        """
        wanted = {(o["metadata"]["namespace"], o["metadata"]["name"]): o["spec"]["clusterQueue"]
                  for o in desired if o["kind"] == "LocalQueue"}
        if not wanted:
            return []
        namespaces = sorted({ns for ns, _name in wanted})
        if limited and len(namespaces) <= LIMITED_NAMESPACE_LISTS:
            live = [lq for ns in namespaces for lq in _list(self.client, kueue_av, "LocalQueue", OWNED_SELECTOR, namespace=ns)]
        else:
            live = _list(self.client, kueue_av, "LocalQueue", OWNED_SELECTOR)
        stale = []
        for lq in live:
            meta = lq.get("metadata") or {}
            key = (meta.get("namespace"), meta.get("name"))
            if key in wanted and (lq.get("spec") or {}).get("clusterQueue") != wanted[key]:
                stale.append(ObjectRef(kueue_av, "LocalQueue", key[1], key[0]))
        if stale:
            engine.recreate(stale, wait_timeout=60)
        return ["%s/%s" % (r.namespace, r.name) for r in stale]


class TenantsModule(KubeAnsibleModule):
    """KubeAnsibleModule that also registers ``prometheus.token`` before the invocation is logged.

    ``prometheus`` and a kubeconfig given as a dict are not ``no_log`` options (dicts with other, harmless keys);
    their secret values go to ``no_log_values`` before ``_log_invocation`` writes the parameters to
    syslog/journald, and so are masked there and in every result.
    """

    def register_secrets(self) -> None:
        register_module_secrets(self)


def register_module_secrets(module: t.Any) -> None:
    register_secrets(module)
    token = (module.params.get("prometheus") or {}).get("token")
    if token:
        module.no_log_values.add(str(token))


def main() -> None:
    argument_spec: t.Dict[str, t.Any] = dict(
        flavors=dict(type="list", elements="dict", default=[]),
        cohorts=dict(type="list", elements="dict", default=[]),
        priorities=dict(type="list", elements="dict", default=[]),
        tenants=dict(type="list", elements="dict", default=[]),
        prometheus=dict(type="dict", no_log=False),
        allow_overcommit=dict(type="bool", default=False),
        check_capacity=dict(type="bool", default=True),
        delete_namespaces=dict(type="bool", default=False),
        drain_timeout=dict(type="int", default=600),
        limit_tenants=dict(type="list", elements="str"),
        platform=dict(type="str", choices=["auto", "kubernetes", "openshift"], default="auto"),
        keda_namespace=dict(type="str"),
        admission=dict(type="dict", default={}, options=dict(
            platform_namespaces=dict(type="list", elements="str"),
            workload_controllers=dict(type="list", elements="str"),
            kueue_users=dict(type="list", elements="str"),
            automation_users=dict(type="list", elements="str"),
            automation_groups=dict(type="list", elements="str"),
        )),
        concurrency=dict(type="int", default=8),
        prune=dict(type="bool", default=False),
        allow_empty=dict(type="bool", default=False),
        lock=dict(type="bool", default=True),
        lock_namespace=dict(type="str", default="kube-system"),
        lock_name=dict(type="str", default="gpuaas-tenants"),
        lock_wait=dict(type="int", default=60),
        lock_duration=dict(type="int", default=60),
        adopt=dict(type="list", elements="str", default=[]),
    )
    argument_spec.update(K8S_AUTH_ARG_SPEC)
    module = TenantsModule(argument_spec=argument_spec, supports_check_mode=True)
    reconciler = TenantsReconciler(None, module.params, module.check_mode, module._diff)
    reconciler.secret_sink = module.no_log_values.add
    register_module_secrets(module)  # also when invocation logging is off (no_log, ANSIBLE_NO_LOG)
    try:
        reconciler.client = get_client(module)
        result = reconciler.run()
    except GpuaasError as err:
        for warning in reconciler.warnings:
            module.warn(warning)
        fail_module(module, err, changed=False)
        return
    for warning in reconciler.warnings:
        module.warn(warning)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
