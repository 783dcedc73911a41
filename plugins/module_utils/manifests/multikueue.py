# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Pure functions: a validated ``TenantModel`` with a fleet (``gpuaas_clusters``) -> the desired objects of each
cluster of a MultiKueue fleet (Kueue v1beta2, checked against Kueue v0.19.2's CRDs).

* the **manager** (``manager_objects``): the tenancy of ``manifests/tenancy.py`` with each tenant's ClusterQueue
  carrying the MultiKueue admission check, one ``AdmissionCheck`` (controller ``kueue.x-k8s.io/multikueue``), one
  ``MultiKueueConfig`` listing every worker, and per worker a ``MultiKueueCluster`` whose kubeconfig is a Secret in
  the manager's Kueue namespace (built from the worker's ServiceAccount token by ``worker_kubeconfig``);
* each **worker** (``worker_objects``): the same tenancy with each tenant's ClusterQueue sized to the worker's share
  (``inventory.clusters.worker_quotas``), and the least-privilege identity MultiKueue uses there
  (``worker_credentials``).

The quota model is argued in docs/multicluster.md. No I/O.
"""

from __future__ import annotations

import base64
import copy
import ipaddress
import json
import re
import typing as t
from urllib.parse import urlparse

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import Fleet, TenantModel, Worker, worker_quotas
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.ownership import add_ownership
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import tenancy
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests.kueue_integrations import BY_FRAMEWORK

KUEUE_V = "kueue.x-k8s.io/v1beta2"
KUEUE_GROUP = "kueue.x-k8s.io"
RBAC_V = "rbac.authorization.k8s.io/v1"
COMPONENT_VALUE = "multikueue"
# Kueue's MultiKueue admission check controller (v0.19.2 apis/kueue/v1beta2: MultiKueueControllerName).
CONTROLLER_NAME = "kueue.x-k8s.io/multikueue"
# One check and one config for the fleet: every worker serves every tenant (the inventory checks the flavors).
# The config name is referenced from AdmissionCheck.spec.parameters.name: a DNS-1123 label of at most 63 characters.
ADMISSION_CHECK_NAME = "gpuaas-multikueue"
CONFIG_NAME = "gpuaas-multikueue"
# MultiKueue reads the kubeconfig from this key of the Secret (v0.19.2 MultiKueueConfigSecretKey).
KUBECONFIG_KEY = "kubeconfig"
KUBECONFIG_SECRET_PREFIX = "gpuaas-multikueue-"
# The identity MultiKueue uses on a worker, in the worker's Kueue namespace.
WORKER_SERVICE_ACCOUNT = "gpuaas-multikueue"
WORKER_TOKEN_SECRET = "gpuaas-multikueue-token"
WORKER_READER_ROLE = "gpuaas-multikueue-reader"
WORKER_WRITER_ROLE = "gpuaas-multikueue-writer"
# The frameworks MultiKueue has an adapter for in v0.19.2 (pkg/controller/jobs/*/*_multikueue_adapter.go; the Kubeflow
# jobs share one); Deployments are not dispatched by MultiKueue.
MULTIKUEUE_FRAMEWORKS: t.Tuple[str, ...] = (
    "batch/job", "pod", "statefulset", "leaderworkerset.x-k8s.io/leaderworkerset", "jobset.x-k8s.io/jobset",
    "trainer.kubeflow.org/trainjob", "kubeflow.org/pytorchjob", "kubeflow.org/tfjob", "kubeflow.org/xgboostjob",
    "kubeflow.org/paddlejob", "kubeflow.org/jaxjob", "kubeflow.org/mpijob", "ray.io/rayjob", "ray.io/raycluster",
    "ray.io/rayservice", "workload.codeflare.dev/appwrapper")
DEFAULT_FRAMEWORKS: t.Tuple[str, ...] = ("batch/job",)
# Upstream's worker role (site/static/examples/multikueue/create-multikueue-kubeconfig.sh at v0.19.2) also updates
# and patches RayClusters (the RayJob/RayCluster adapters scale them on the worker).
EXTRA_WRITE_VERBS: t.Dict[str, t.Tuple[str, ...]] = {"ray.io/raycluster": ("update", "patch")}
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def labels_for(tenant: t.Optional[str] = None) -> t.Dict[str, str]:
    """Ownership labels of the fleet objects built here (tenant objects keep the tenancy labels)."""
    return tenancy.labels_for(tenant) if tenant else add_ownership({}, component=COMPONENT_VALUE)


def _meta(name: str, namespace: t.Optional[str] = None) -> t.Dict[str, t.Any]:
    meta: t.Dict[str, t.Any] = {"name": name, "labels": labels_for()}
    if namespace:
        meta["namespace"] = namespace
    return meta


# -- the manager -------------------------------------------------------------------------------------------

def admission_check() -> t.Dict[str, t.Any]:
    return {"apiVersion": KUEUE_V, "kind": "AdmissionCheck", "metadata": _meta(ADMISSION_CHECK_NAME),
            "spec": {"controllerName": CONTROLLER_NAME,
                     "parameters": {"apiGroup": KUEUE_GROUP, "kind": "MultiKueueConfig", "name": CONFIG_NAME}}}


def multikueue_config(fleet: Fleet) -> t.Dict[str, t.Any]:
    """The workers in inventory order (the Incremental dispatcher nominates them in this order)."""
    return {"apiVersion": KUEUE_V, "kind": "MultiKueueConfig", "metadata": _meta(CONFIG_NAME),
            "spec": {"clusters": [w.name for w in fleet.workers]}}


def kubeconfig_secret_name(worker: Worker) -> str:
    return KUBECONFIG_SECRET_PREFIX + worker.name


def multikueue_cluster(worker: Worker) -> t.Dict[str, t.Any]:
    return {"apiVersion": KUEUE_V, "kind": "MultiKueueCluster", "metadata": _meta(worker.name),
            "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret",
                                                      "location": kubeconfig_secret_name(worker)}}}}


def worker_kubeconfig(worker: Worker, server: str, ca_data: str, token: str) -> t.Dict[str, t.Any]:
    """The kubeconfig MultiKueue uses to reach ``worker``: the ServiceAccount token inline and the CA inline.

    Kueue v0.19.2 refuses (MultiKueueCluster ``InsecureKubeConfig``) a kubeconfig with a token file, a CA file path,
    ``insecure-skip-tls-verify``, basic auth, exec or auth-provider plugins, or a server whose host is neither an IP
    nor a DNS-1123 subdomain; the same rules are checked here so the run fails before writing it.
    """
    problems = []
    parsed = urlparse(server or "")
    if parsed.scheme != "https" or not parsed.hostname:
        problems.append("server %r is not an https:// URL" % (server,))
    elif not _valid_host(parsed.hostname.lower()):
        problems.append("server host %r is neither an IP address nor a DNS-1123 subdomain" % parsed.hostname)
    if not ca_data:
        problems.append("no CA data: MultiKueue needs certificate-authority-data inline (no file path, no "
                        "insecure-skip-tls-verify)")
    else:
        try:
            base64.b64decode(ca_data, validate=True)
        except ValueError:
            problems.append("the CA data is not base64")
    if not token:
        problems.append("no ServiceAccount token")
    if problems:
        raise GpuaasError("cannot build the MultiKueue kubeconfig of worker %r: %s" % (worker.name, "; ".join(problems)),
                          hint="set gpuaas_clusters.workers[].api_server to the https URL the manager's Kueue reaches "
                               "the worker at, and check that the worker's token Secret %s/%s has token and ca.crt"
                               % (worker.kueue_namespace, WORKER_TOKEN_SECRET))
    user = "%s-%s" % (worker.name, WORKER_SERVICE_ACCOUNT)
    return {"apiVersion": "v1", "kind": "Config", "current-context": worker.name, "preferences": {},
            "clusters": [{"name": worker.name, "cluster": {"server": server, "certificate-authority-data": ca_data}}],
            "contexts": [{"name": worker.name, "context": {"cluster": worker.name, "user": user}}],
            "users": [{"name": user, "user": {"token": token}}]}


def token_claims(token: str) -> t.Dict[str, t.Any]:
    """The claims of a ServiceAccount JWT, read without verifying it ({} when it is not one): only to decide whether
    the bound token the manager holds was issued for the live ServiceAccount and how long it has left; the worker's
    API server is what verifies it."""
    parts = (token or "").split(".")
    if len(parts) != 3:
        return {}
    try:
        payload = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        claims = json.loads(payload.decode())
    except (ValueError, UnicodeDecodeError):
        return {}
    return claims if isinstance(claims, dict) else {}


def bound_token_reusable(token: str, service_account_uid: t.Optional[str], lifetime: int, now: float) -> bool:
    """Whether a bound token is kept by a run: issued for the ServiceAccount that exists now (a recreated one has a
    new UID, as after playbooks/rotate_fleet_credentials.yml) and with at least half of ``lifetime`` left (a run
    renews it after that, so one scheduled every quarter of the lifetime never lets it lapse)."""
    claims = token_claims(token)
    account = ((claims.get("kubernetes.io") or {}).get("serviceaccount") or {}) if claims else {}
    expires = claims.get("exp")
    if not service_account_uid or account.get("uid") != service_account_uid or not isinstance(expires, (int, float)):
        return False
    return expires - now >= lifetime / 2.0


def kubeconfig_token(secret: t.Optional[t.Mapping[str, t.Any]]) -> t.Optional[str]:
    """The token inside a kubeconfig Secret this collection wrote (kubeconfig_secret), None when there is none."""
    encoded = ((secret or {}).get("data") or {}).get(KUBECONFIG_KEY)
    if not encoded:
        return None
    try:
        kubeconfig = json.loads(base64.b64decode(encoded).decode())
        token = kubeconfig["users"][0]["user"]["token"]
    except (ValueError, UnicodeDecodeError, KeyError, IndexError, TypeError):
        return None
    return token if isinstance(token, str) else None


def _valid_host(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return len(host) <= 253 and bool(_DNS_SUBDOMAIN.match(host))


def kubeconfig_secret(worker: Worker, namespace: str, kubeconfig: t.Mapping[str, t.Any]) -> t.Dict[str, t.Any]:
    """The Secret a MultiKueueCluster names, in the manager's Kueue namespace. The kubeconfig is JSON with sorted keys
    (YAML's subset Kueue parses), so the same token gives the same bytes and a second run changes nothing."""
    text = json.dumps(kubeconfig, sort_keys=True, separators=(",", ":"))
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": _meta(kubeconfig_secret_name(worker), namespace),
            "data": {KUBECONFIG_KEY: base64.b64encode(text.encode()).decode()}}


def manager_cluster_queue(tenant: t.Any) -> t.Dict[str, t.Any]:
    """The tenant's ClusterQueue as declared (the fleet quota) with the MultiKueue admission check."""
    obj = tenancy.cluster_queue(tenant)
    obj["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": ADMISSION_CHECK_NAME}]}
    return obj


def manager_objects(model: TenantModel, kubeconfigs: t.Optional[t.Mapping[str, t.Mapping[str, t.Any]]] = None,
                    platform: str = "kubernetes", **tenancy_options: t.Any) -> t.List[t.Dict[str, t.Any]]:
    """Every object of the manager. ``kubeconfigs`` (``{worker: kubeconfig}``, from ``worker_kubeconfig``) adds the
    Secrets; a worker without one gets its MultiKueueCluster only (inactive until the Secret exists)."""
    fleet = _fleet(model)
    objs = _with_cluster_queues(tenancy.desired_objects(model, platform, **tenancy_options),
                                {x.name: manager_cluster_queue(x) for x in model.present_tenants})
    objs.append(admission_check())
    objs.append(multikueue_config(fleet))
    for worker in fleet.workers:
        objs.append(multikueue_cluster(worker))
        if kubeconfigs and worker.name in kubeconfigs:
            objs.append(kubeconfig_secret(worker, fleet.manager.kueue_namespace, kubeconfigs[worker.name]))
    return objs


# -- a worker ----------------------------------------------------------------------------------------------

def worker_model(model: TenantModel, worker: Worker) -> TenantModel:
    """The model as the worker sees it: each present tenant's quotas replaced by its share on this worker."""
    fleet = _fleet(model)
    out = copy.deepcopy(model)
    for tenant in out.present_tenants:
        tenant.quotas = worker_quotas(fleet, tenant)[worker.name]
    return out


def worker_credentials(worker: Worker, tenant_namespaces: t.Union[t.Sequence[str], t.Mapping[str, str]],
                       frameworks: t.Sequence[str] = DEFAULT_FRAMEWORKS) -> t.List[t.Dict[str, t.Any]]:
    """The identity MultiKueue's manager uses on ``worker``, with exactly what it does there (v0.19.2:
    pkg/controller/admissionchecks/multikueue and the jobs' MultiKueue adapters; the verbs are upstream's
    create-multikueue-kubeconfig.sh, restricted to ``frameworks``):

    * cluster-wide **read** (ClusterRole ``gpuaas-multikueue-reader``): MultiKueue watches the remote Workloads and
      jobs of every namespace by its origin label, so get/list/watch cannot be namespaced;
    * **write** only in the tenants' namespaces (ClusterRole ``gpuaas-multikueue-writer`` bound by a RoleBinding in
      each): create/delete Workloads and jobs, update Workloads (finalizer, priority), patch/update their status.
      Upstream binds the writes cluster-wide; here a leaked worker kubeconfig cannot create a Job in kube-system.
      ``tenant_namespaces`` as ``{namespace: tenant}`` gives each RoleBinding the tenant's ownership labels, so it
      goes with the tenant (offboarding prunes it with the tenant's other RoleBindings).

    ClusterQueues/LocalQueues are not read: only the alpha MultiKueueManagerQuotaAutomation gate caches them.

    ``frameworks`` must be every framework the MANAGER's Kueue integrates (that has a MultiKueue adapter), not only
    those tenants use: MultiKueue watches each of them on every worker and the MultiKueueCluster stays
    ``ClientConnectionFailed`` when one watch is forbidden (measured on the lab, docs/multicluster.md).
    """
    unknown = [f for f in frameworks if f not in MULTIKUEUE_FRAMEWORKS]
    if unknown:
        raise GpuaasError("MultiKueue cannot dispatch %s" % ", ".join(unknown),
                          hint="MultiKueue has adapters for: %s" % ", ".join(MULTIKUEUE_FRAMEWORKS))
    ns = worker.kueue_namespace
    read = [{"apiGroups": [KUEUE_GROUP], "resources": ["workloads"], "verbs": ["get", "list", "watch"]}]
    write = [{"apiGroups": [KUEUE_GROUP], "resources": ["workloads"], "verbs": ["create", "delete", "update", "patch"]},
             {"apiGroups": [KUEUE_GROUP], "resources": ["workloads/status"], "verbs": ["get", "patch", "update"]}]
    for framework in frameworks:
        integration = BY_FRAMEWORK[framework]
        read.append({"apiGroups": [integration.group], "resources": [integration.resource],
                     "verbs": ["get", "list", "watch"]})
        read.append({"apiGroups": [integration.group], "resources": [integration.resource + "/status"],
                     "verbs": ["get"]})
        write.append({"apiGroups": [integration.group], "resources": [integration.resource],
                      "verbs": ["create", "delete"] + list(EXTRA_WRITE_VERBS.get(framework, ()))})
    subject = [{"kind": "ServiceAccount", "name": WORKER_SERVICE_ACCOUNT, "namespace": ns}]
    objs: t.List[t.Dict[str, t.Any]] = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(WORKER_SERVICE_ACCOUNT, ns)}]
    if worker.token_expiration_seconds is None:
        # A long-lived token the token controller fills in (token, ca.crt); rotated by deleting the Secret. With a
        # bound token (token_expiration_seconds) there is no such Secret: the fleet run deletes one left by an
        # earlier run once the manager holds the bound token (reconcile/fleet_credentials.py), which revokes it.
        objs.append({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
                     "metadata": dict(_meta(WORKER_TOKEN_SECRET, ns),
                                      annotations={"kubernetes.io/service-account.name": WORKER_SERVICE_ACCOUNT})})
    objs += [
        {"apiVersion": RBAC_V, "kind": "ClusterRole", "metadata": _meta(WORKER_READER_ROLE), "rules": read},
        {"apiVersion": RBAC_V, "kind": "ClusterRoleBinding", "metadata": _meta(WORKER_READER_ROLE),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": WORKER_READER_ROLE},
         "subjects": subject},
        {"apiVersion": RBAC_V, "kind": "ClusterRole", "metadata": _meta(WORKER_WRITER_ROLE), "rules": write},
    ]
    owners = tenant_namespaces if isinstance(tenant_namespaces, t.Mapping) else {}
    for namespace in tenant_namespaces:
        meta = _meta(WORKER_WRITER_ROLE, namespace)
        if owners.get(namespace):
            meta["labels"] = labels_for(owners[namespace])
        objs.append({"apiVersion": RBAC_V, "kind": "RoleBinding", "metadata": meta,
                     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                 "name": WORKER_WRITER_ROLE},
                     "subjects": subject})
    return objs


def worker_objects(model: TenantModel, worker: Worker, frameworks: t.Sequence[str] = DEFAULT_FRAMEWORKS,
                   platform: str = "kubernetes", **tenancy_options: t.Any) -> t.List[t.Dict[str, t.Any]]:
    """Every object of ``worker``: the tenancy with the worker's shares, and MultiKueue's identity there."""
    local = worker_model(model, worker)
    objs = tenancy.desired_objects(local, platform, **tenancy_options)
    namespaces = {ns: x.name for x in local.present_tenants for ns in x.namespaces}
    objs.extend(worker_credentials(worker, namespaces, frameworks))
    return objs


def _with_cluster_queues(objs: t.List[t.Dict[str, t.Any]],
                         queues: t.Mapping[str, t.Dict[str, t.Any]]) -> t.List[t.Dict[str, t.Any]]:
    """``objs`` with each tenant's ClusterQueue replaced by the one in ``queues`` (same name, same place)."""
    return [queues.get(o["metadata"]["name"], o) if o.get("kind") == "ClusterQueue" else o for o in objs]


def _fleet(model: TenantModel) -> Fleet:
    if model.fleet is None:
        raise GpuaasError("the inventory has no gpuaas_clusters", hint="declare the manager and the workers in "
                                                                       "gpuaas_clusters (docs/multicluster.md)")
    return model.fleet
