# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""MultiKueue's credential on each worker of a fleet run (reconcile/fleet_runner.py), and the manager's kubeconfig of
it: read a long-lived ServiceAccount token from its Secret on the worker, or keep / request a bound token
(``token_expiration_seconds``, TokenRequest), retire a long-lived token a bound worker no longer needs, and rotate the
credential (option ``rotate_workers``). ``WorkerCredentials`` is a part of ``FleetRunner`` kept in its own file: it
uses the run's options, clocks, secret sink and ``delete_owned``.
"""

from __future__ import annotations

import base64
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import Worker
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import ApiException, translate_api_exception
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import multikueue
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.tenancy_runner import Prepared

if t.TYPE_CHECKING:  # pragma: no cover
    from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.fleet_runner import ClusterRun

# What stands in for a worker's token until its ServiceAccount has one (check mode of a first run); base64, so a dry
# run accepts the Secret, and never a usable credential.
TOKEN_STAND_IN = "token-not-issued-yet"
# How long a run waits for the token controller to fill in a new ServiceAccount token Secret.
TOKEN_TIMEOUT = 60.0
# The ConfigMap kube-controller-manager publishes in every namespace with the cluster's CA (root-ca-cert-publisher):
# where a bound token's kubeconfig gets the worker's CA (there is no token Secret to carry ca.crt).
ROOT_CA_CONFIGMAP = "kube-root-ca.crt"


def stand_in_kubeconfig(worker: Worker) -> t.Dict[str, t.Any]:
    """A kubeconfig of the right shape without a credential (replaced before anything is written)."""
    server = worker.api_server or "https://stand-in.invalid"
    ca = base64.b64encode(b"stand-in").decode()
    return multikueue.worker_kubeconfig(worker, server, ca, TOKEN_STAND_IN)


def worker_server(run: "ClusterRun") -> str:
    """The API server URL the manager's Kueue reaches the worker at: the inventory's, else the connection's."""
    return t.cast(Worker, run.cluster).api_server or run.client.host


def record_deleted(out: t.Dict[str, t.Any], ref: t.Dict[str, str]) -> None:
    """Count one deleted object in a cluster's result."""
    out.setdefault("deleted", []).append(ref)
    out["changed"] = True
    summary = out.setdefault("summary", {})
    summary["deleted"] = summary.get("deleted", 0) + 1


class WorkerCredentials:
    """The credential steps of a fleet run (mixed into FleetRunner, which sets these attributes)."""

    params: t.Mapping[str, t.Any]
    check_mode: bool
    sleep: t.Callable[[float], None]
    clock: t.Callable[[], float]
    wall_clock: t.Callable[[], float]
    secret_sink: t.Callable[[str], None]
    delete_owned: t.Callable[..., None]  # FleetRunner.delete_owned: an object deleted only if the collection owns it

    # -- rotating MultiKueue's credential on workers (option rotate_workers) -----------------------------
    def workers_to_rotate(self, fleet: t.Any, skipped: t.Sequence[str]) -> t.List[str]:
        """The present workers whose credential this run rotates (``*``: all), in inventory order; a name that is
        not a present worker, an unreachable one, or a run limited to some tenants stops it before any write."""
        names = list(self.params.get("rotate_workers") or [])
        if not names:
            return []
        present = [w.name for w in fleet.workers]
        wanted = present if "*" in names else names
        problems = []
        unknown = [n for n in names if n != "*" and n not in present]
        if unknown:
            problems.append("rotate_workers names %s, not a present worker of gpuaas_clusters (present: %s)"
                            % (", ".join(unknown), ", ".join(present)))
        down = [n for n in wanted if n in skipped]
        if down:
            problems.append("rotate_workers: %s cannot be reached (skipped by reachable_only)" % ", ".join(down))
        if self.params.get("limit_tenants") is not None:
            problems.append("rotate_workers rotates a worker's credential for the whole fleet: not with limit_tenants")
        if problems:
            raise GpuaasError("rotate_workers: the run stopped before writing on any cluster",
                              hint="name present workers of gpuaas_clusters (or *), reachable, in a run over every "
                                   "tenant", problems=problems, details={"reason": "RotationRefused"})
        return [n for n in present if n in wanted]

    def revoke_credential(self, run: "ClusterRun", prepared: Prepared) -> t.Dict[str, t.Any]:
        """Delete MultiKueue's token Secret and ServiceAccount on ``run``'s worker (its lock held): the ServiceAccount
        written again by this run has a new UID, so every token of the old one is refused. The worker's state is
        read again, so its write creates both anew (check mode: dry-run deletes, reported)."""
        worker = t.cast(Worker, run.cluster)
        out: t.Dict[str, t.Any] = {"changed": False, "deleted": [], "summary": {"deleted": 0}}
        run.run_lock.confirm("before revoking MultiKueue's credential on worker %r" % worker.name)
        for kind, name in (("Secret", multikueue.WORKER_TOKEN_SECRET),
                           ("ServiceAccount", multikueue.WORKER_SERVICE_ACCOUNT)):
            self.delete_owned(run.client, "v1", kind, name, worker.kueue_namespace, out)
        if not self.check_mode:
            # read whole again (recheck would keep the state: the ClusterQueues did not change)
            prepared.state = prepared.engine.read(prepared.desired, prune=prepared.scope, also=prepared.also)
            prepared.engine.guard(prepared.state)
        return out

    def written_kubeconfig(self, run: "ClusterRun", kept: t.Optional[t.Dict[str, t.Any]]) -> t.Dict[str, t.Any]:
        """The kubeconfig the manager gets for ``run``'s worker once the worker is written: a long-lived token read
        again from its Secret (waiting for the token controller), a bound token ``kept`` (existing_kubeconfigs), or a
        new one requested now (none kept: first issue, renewal, rotation)."""
        if t.cast(Worker, run.cluster).token_expiration_seconds is None:
            return t.cast(t.Dict[str, t.Any], self.kubeconfig(run, wait=True))
        return kept if kept is not None else self.bound_kubeconfig(run)

    def retire_long_lived_token(self, run: "ClusterRun", out: t.Dict[str, t.Any]) -> None:
        """On a bound worker, delete a long-lived token Secret of the runs before token_expiration_seconds — after
        the manager holds the bound token (deleting the Secret invalidates its token), so MultiKueue is never left
        without one."""
        worker = t.cast(Worker, run.cluster)
        if worker.token_expiration_seconds is not None:
            self.delete_owned(run.client, "v1", "Secret", multikueue.WORKER_TOKEN_SECRET, worker.kueue_namespace, out)

    def existing_kubeconfigs(self, manager: "ClusterRun",
                             workers: t.Sequence["ClusterRun"]) -> t.Dict[str, t.Dict[str, t.Any]]:
        """The kubeconfig of every worker whose token exists already and is kept (a stand-in for the others until
        written): a long-lived token from its Secret on the worker, a bound token from the manager's kubeconfig
        Secret while it is still good (kept_bound_kubeconfig)."""
        out = {}
        for run in workers:
            if t.cast(Worker, run.cluster).token_expiration_seconds is None:
                kubeconfig = self.kubeconfig(run, wait=False)
            else:
                kubeconfig = self.kept_bound_kubeconfig(manager, run)
            if kubeconfig is not None:
                out[run.cluster.name] = kubeconfig
        return out

    def worker_ca(self, run: "ClusterRun") -> str:
        """The worker's cluster CA (base64, as a kubeconfig's certificate-authority-data) from ConfigMap
        kube-root-ca.crt in its Kueue namespace."""
        worker = t.cast(Worker, run.cluster)
        try:
            configmap = run.client.resource("v1", "ConfigMap").get(ROOT_CA_CONFIGMAP, worker.kueue_namespace)
        except ApiException as exc:
            raise translate_api_exception(exc, "read", "ConfigMap %s/%s on worker %r"
                                          % (worker.kueue_namespace, ROOT_CA_CONFIGMAP, worker.name))
        pem = ((configmap or {}).get("data") or {}).get("ca.crt")
        if not pem:
            raise GpuaasError(
                "worker %r: ConfigMap %s/%s has no ca.crt, so the bound token's kubeconfig would have no CA"
                % (worker.name, worker.kueue_namespace, ROOT_CA_CONFIGMAP),
                hint="kube-controller-manager publishes it in every namespace (root-ca-cert-publisher); check that it "
                     "runs on the worker, then run again")
        return base64.b64encode(pem.encode()).decode()

    def kept_bound_kubeconfig(self, manager: "ClusterRun", run: "ClusterRun") -> t.Optional[t.Dict[str, t.Any]]:
        """The bound token the manager's kubeconfig Secret holds for ``run``'s worker, in a kubeconfig built again
        (server and CA as they are now), when it is kept: issued for the worker's live ServiceAccount with at least
        half its lifetime left (multikueue.bound_token_reusable). None: the run requests a new one after writing
        the worker (check mode reports the Secret as changing)."""
        worker = t.cast(Worker, run.cluster)
        try:
            secret = manager.client.resource("v1", "Secret").get(multikueue.kubeconfig_secret_name(worker),
                                                                 manager.cluster.kueue_namespace)
            account = run.client.resource("v1", "ServiceAccount").get(multikueue.WORKER_SERVICE_ACCOUNT,
                                                                      worker.kueue_namespace)
        except ApiException as exc:
            raise translate_api_exception(exc, "read", "MultiKueue's credential of worker %r" % worker.name)
        token = multikueue.kubeconfig_token(secret)
        if not token:
            return None
        self.secret_sink(token)  # still a credential, kept or not
        uid = ((account or {}).get("metadata") or {}).get("uid")
        if not multikueue.bound_token_reusable(token, uid, int(worker.token_expiration_seconds or 0),
                                               self.wall_clock()):
            return None
        return multikueue.worker_kubeconfig(worker, worker_server(run), self.worker_ca(run), token)

    def bound_kubeconfig(self, run: "ClusterRun") -> t.Dict[str, t.Any]:
        """A new bound token for MultiKueue's ServiceAccount on ``run``'s worker (TokenRequest with the worker's
        token_expiration_seconds; registered as a secret the moment it arrives) in a kubeconfig."""
        worker = t.cast(Worker, run.cluster)
        path = "/api/v1/namespaces/%s/serviceaccounts/%s/token" % (
            worker.kueue_namespace, multikueue.WORKER_SERVICE_ACCOUNT)
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"expirationSeconds": worker.token_expiration_seconds}}
        try:
            answer = run.client.request("POST", path, body=body)
        except ApiException as exc:
            raise translate_api_exception(exc, "create", "a MultiKueue token on worker %r" % worker.name)
        token = ((answer or {}).get("status") or {}).get("token")
        if not token:
            raise GpuaasError("worker %r: the TokenRequest for %s/%s returned no token; the workers are written, the "
                              "manager is not" % (worker.name, worker.kueue_namespace,
                                                  multikueue.WORKER_SERVICE_ACCOUNT),
                              hint="check that the worker's API server issues ServiceAccount tokens "
                                   "(--service-account-issuer, --service-account-signing-key-file), then run again")
        self.secret_sink(token)
        return multikueue.worker_kubeconfig(worker, worker_server(run), self.worker_ca(run), token)

    def kubeconfig(self, run: "ClusterRun", wait: bool) -> t.Optional[t.Dict[str, t.Any]]:
        """The kubeconfig MultiKueue uses for ``run``'s worker, from its ServiceAccount token Secret (registered as a
        secret the moment it is read); None when there is none (yet) and ``wait`` is false."""
        worker = t.cast(Worker, run.cluster)
        deadline = self.clock() + TOKEN_TIMEOUT
        while True:
            try:
                secrets = run.client.resource("v1", "Secret")
                secret = secrets.get(multikueue.WORKER_TOKEN_SECRET, worker.kueue_namespace)
            except ApiException as exc:
                raise translate_api_exception(exc, "read", "the MultiKueue token Secret on worker %r" % worker.name)
            data = (secret or {}).get("data") or {}
            if data.get("token") and data.get("ca.crt"):
                token = base64.b64decode(data["token"]).decode()
                self.secret_sink(token)
                self.secret_sink(data["token"])
                return multikueue.worker_kubeconfig(worker, worker_server(run), data["ca.crt"], token)
            if not wait:
                return None
            if self.clock() >= deadline:
                raise GpuaasError(
                    "worker %r: the token Secret %s/%s has no token after %ds; the workers are written, the manager "
                    "is not" % (worker.name, worker.kueue_namespace, multikueue.WORKER_TOKEN_SECRET, TOKEN_TIMEOUT),
                    hint="the worker's token controller (kube-controller-manager) fills it in; check that it runs, "
                         "then run again (it converges)")
            self.sleep(0.5)
