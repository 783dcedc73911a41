# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""OLM SIMULATOR for the gpuaas lab -- NOT Operator Lifecycle Manager.

The lab has the real OLM CRDs but no OLM controllers and no catalog. This simulator performs only the
status transitions the gpuaas.platform install roles wait for, nothing else:

1. A Subscription (operators.coreos.com/v1alpha1) without an InstallPlan gets one:
   InstallPlan ``sim-<subscription>-<n>`` in the same namespace listing the CSV to install
   (``spec.startingCSV`` when set, else the CSV of a bundle in --bundle-dir for that package, else
   ``<package>.v0.0.0-sim``), ``spec.approval`` copied from ``installPlanApproval``, ``spec.approved``
   true only for Automatic. The Subscription's status points at it (``installPlanRef``, ``state``).
2. An approved InstallPlan whose phase is not Complete yields its ClusterServiceVersion: the bundle's
   real CSV (with its ``alm-examples``) when --bundle-dir has one for the package, else a minimal CSV.
   The CSV is set to ``status.phase: Succeeded``, the InstallPlan to ``Complete`` and the Subscription
   to ``AtLatestKnown`` with ``installedCSV``.
3. Like OLM installing a bundle's CRDs, every CRD the CSV owns (``spec.customresourcedefinitions.owned``)
   is created with its real schema from lab/crds/ (``<crd name>@<major.minor>.yaml`` for the CSV's version
   when there is one, else ``<crd name>.yaml``; each file names the upstream file it follows), so the API
   server refuses what the real operator's CRD refuses. Labelled ``lab.gpuaas.io/simulated-by=olm-simulator``
   (told apart and removed by tests) and annotated with the file it came from; a labelled CRD from another
   file is replaced, as OLM upgrades a bundle's CRDs. A CRD the lab already serves unlabelled (e.g. the
   GPU Operator's ClusterPolicy, from its Go module) is never touched. Only a CRD with no file in lab/crds/
   falls back to a permissive one (any spec/status accepted, annotated ``permissive``).

4. Like OLM's resolver, a Subscription naming a package the SIMULATED catalog does not have (neither in
   KNOWN_PACKAGES nor a --bundle-dir bundle), or a channel that package does not have, gets no InstallPlan but
   ``status.conditions[type=ResolutionFailed,status=True,reason=ConstraintsNotSatisfiable]`` with OLM's message
   ("constraints not satisfiable: no operators found in channel C of package P in the catalog referenced by
   subscription S, subscription S exists"); the condition is removed once the Subscription resolves. (Real OLM
   sets it on every Subscription of the namespace; the simulator on the failing one.) The simulated catalog's
   channels: KNOWN_PACKAGES' ``channels`` (an entry without them accepts any channel); a bundle's package has
   ``stable`` and ``v<major>.<minor>`` of its CSV's version.

No operator Deployment is created or run: operands (ClusterPolicy, Kueue, KedaController, ...) get no
controller from this simulator (see gpu_operator_simulator.py for the ClusterPolicy status).

Usage:
  python lab/simulators/olm_simulator.py --kubeconfig .lab/kubeconfig [--bundle-dir DIR] [--once]
  --once   run one reconciliation pass over all Subscriptions/InstallPlans and exit (tests)
  default  loop forever, one pass every --interval seconds (lab.sh starts it like this)
"""

from __future__ import annotations

import datetime
import glob
import json
import logging
import os
import sys
import time
import typing as t

import yaml
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # sim_loop sits beside it, also when loaded by path
import sim_loop  # noqa: E402  pylint: disable=wrong-import-position

LOG = logging.getLogger("olm-simulator")
OLM = "operators.coreos.com/v1alpha1"
SIM_LABEL = "lab.gpuaas.io/simulated-by"
SIM_VALUE = "olm-simulator"
# operator-framework/api pkg/operators/v1alpha1/subscription_types.go; the reason and message words are those of
# operator-lifecycle-manager's catalog operator (syncResolvingNamespace) and resolver (no operators found ...).
RESOLUTION_FAILED = "ResolutionFailed"
UNSATISFIABLE = "ConstraintsNotSatisfiable"
# The operand CRDs with their upstream schemas (one file per CRD, see each file's header).
CRD_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "crds")
CRD_SOURCE = "lab.gpuaas.io/crd-source"

# Minimal CSVs for packages the lab has no real bundle for: the kinds each operator owns (what the
# gpuaas install roles create as operands after the CSV has succeeded) and an alm-examples entry.
KNOWN_PACKAGES: t.Dict[str, t.Dict[str, t.Any]] = {
    "nfd": {
        "channels": ["stable"],
        "owned": [("nodefeaturediscoveries.nfd.openshift.io", "nfd.openshift.io", "v1", "NodeFeatureDiscovery",
                   "nodefeaturediscoveries", "Namespaced")],
        # alm-examples of openshift/cluster-nfd-operator release-4.20 nfd.v4.20.0 (configData strings shortened);
        # its customConfig is not in the CRD's schema (the API server drops it, as on a real cluster)
        "example": {"apiVersion": "nfd.openshift.io/v1", "kind": "NodeFeatureDiscovery",
                    "metadata": {"name": "nfd-instance", "namespace": "openshift-nfd"},
                    "spec": {"customConfig": {"configData": "#    - name: \"more.kernel.features\"\n"},
                             "operand": {"imagePullPolicy": "IfNotPresent", "servicePort": 12000},
                             "workerConfig": {"configData": "core:\n  sleepInterval: 60s\nsources:\n  pci:\n"
                                                            "    deviceClassWhitelist:\n      - \"0200\"\n"
                                                            "      - \"03\"\n      - \"12\"\n"
                                                            "    deviceLabelFields:\n      - \"vendor\"\n"}}},
    },
    "kueue-operator": {
        "channels": ["stable-v1.3", "stable-v1.4"],  # the operand CRD follows the CSV's version (lab/crds/)
        "owned": [("kueues.kueue.openshift.io", "kueue.openshift.io", "v1", "Kueue", "kueues", "Cluster")],
        # alm-examples of openshift/kueue-operator release-1.4 kueue-operator.v1.4.1 (labels left out)
        "example": {"apiVersion": "kueue.openshift.io/v1", "kind": "Kueue", "metadata": {"name": "cluster"},
                    "spec": {"managementState": "Managed",
                             "config": {"integrations": {"frameworks": ["BatchJob"]}}}},
    },
    "openshift-custom-metrics-autoscaler-operator": {
        "channels": ["stable"],
        "owned": [("kedacontrollers.keda.sh", "keda.sh", "v1alpha1", "KedaController", "kedacontrollers",
                   "Namespaced")],
        # alm-examples of kedacore/keda-olm-operator v2.20.1 (keda.v2.20.1)
        "example": {"apiVersion": "keda.sh/v1alpha1", "kind": "KedaController",
                    "metadata": {"name": "keda", "namespace": "keda"},
                    "spec": {"admissionWebhooks": {"logEncoder": "console", "logLevel": "info"},
                             "httpAddon": {"enabled": False},
                             "metricsServer": {"logLevel": "0", "networkEgressAllowAll": "true"},
                             "operator": {"logEncoder": "console", "logLevel": "info", "networkEgressAllowAll": "true"},
                             "serviceAccount": None, "watchNamespace": ""}},
    },
    "openshift-cert-manager-operator": {"channels": ["stable-v1"], "owned": [], "example": None},
}


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Simulator:
    def __init__(self, client: DynamicClient, bundle_dir: t.Optional[str]) -> None:
        self.client = client
        self.bundles = self._load_bundles(bundle_dir)
        self.subs = client.resources.get(api_version=OLM, kind="Subscription")
        self.plans = client.resources.get(api_version=OLM, kind="InstallPlan")
        self.csvs = client.resources.get(api_version=OLM, kind="ClusterServiceVersion")
        self.crds = client.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")

    @staticmethod
    def _load_bundles(bundle_dir: t.Optional[str]) -> t.Dict[str, t.Dict[str, t.Any]]:
        bundles: t.Dict[str, t.Dict[str, t.Any]] = {}
        if not bundle_dir:
            return bundles
        for path in sorted(glob.glob(os.path.join(bundle_dir, "*", "*.clusterserviceversion.yaml"))):
            with open(path, encoding="utf-8") as handle:
                bundles[os.path.basename(os.path.dirname(path))] = yaml.safe_load(handle)
        return bundles

    # ---- CSV content -------------------------------------------------------------------------
    def csv_name_for(self, sub: t.Dict[str, t.Any]) -> str:
        spec = sub["spec"]
        if spec.get("startingCSV"):
            return spec["startingCSV"]
        bundle = self.bundles.get(spec["name"])
        if bundle:
            return bundle["metadata"]["name"]
        return "%s.v0.0.0-sim" % spec["name"]

    def csv_manifest(self, package: str, name: str, namespace: str) -> t.Dict[str, t.Any]:
        bundle = self.bundles.get(package)
        if bundle:
            csv = json.loads(json.dumps(bundle))
            csv["metadata"] = {"name": name, "namespace": namespace,
                               "annotations": dict(bundle["metadata"].get("annotations") or {})}
        else:
            known = KNOWN_PACKAGES.get(package, {"owned": [], "example": None})
            owned = [{"name": o[0], "version": o[2], "kind": o[3], "displayName": o[3]} for o in known["owned"]]
            csv = {
                "apiVersion": OLM, "kind": "ClusterServiceVersion",
                "metadata": {"name": name, "namespace": namespace, "annotations": {
                    "alm-examples": json.dumps([known["example"]] if known["example"] else [])}},
                "spec": {"displayName": package, "version": name.split(".v", 1)[-1] if ".v" in name else "0.0.0",
                         "install": {"strategy": "deployment", "spec": {"deployments": []}},
                         "customresourcedefinitions": {"owned": owned}},
            }
        csv["metadata"].setdefault("labels", {})[SIM_LABEL] = SIM_VALUE
        csv["metadata"]["annotations"]["lab.gpuaas.io/simulated"] = "true"
        csv.pop("status", None)
        return csv

    @staticmethod
    def real_crd(name: str, csv_version: str) -> t.Optional[t.Tuple[str, t.Dict[str, t.Any]]]:
        """(file name, CRD) from CRD_DIR for CRD ``name`` as the bundle of ``csv_version`` ships it, or None."""
        minor = ".".join(csv_version.split(".")[:2])
        for candidate in ("%s@%s.yaml" % (name, minor), "%s.yaml" % name):
            path = os.path.join(CRD_DIR, candidate)
            if os.path.exists(path):
                with open(path, encoding="utf-8") as handle:
                    return candidate, yaml.safe_load(handle)
        return None

    @staticmethod
    def permissive_crd(name: str, owned: t.Dict[str, t.Any], scope: str) -> t.Dict[str, t.Any]:
        plural, group = name.split(".", 1)
        return {
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
            "spec": {"group": group, "scope": scope,
                     "names": {"plural": plural, "singular": owned["kind"].lower(), "kind": owned["kind"],
                               "listKind": owned["kind"] + "List"},
                     "versions": [{"name": owned["version"], "served": True, "storage": True,
                                   "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
        }

    def ensure_owned_crds(self, package: str, csv: t.Dict[str, t.Any]) -> None:
        known = {o[0]: o for o in KNOWN_PACKAGES.get(package, {}).get("owned", [])}
        csv_version = str(csv.get("spec", {}).get("version") or "")
        for owned in (csv.get("spec", {}).get("customresourcedefinitions", {}) or {}).get("owned", []) or []:
            name = owned["name"]
            real = self.real_crd(name, csv_version)
            if real:
                source, crd = real
            else:
                source = "permissive"
                crd = self.permissive_crd(name, owned, known[name][5] if name in known else "Namespaced")
            crd["metadata"].setdefault("labels", {})[SIM_LABEL] = SIM_VALUE
            crd["metadata"].setdefault("annotations", {})[CRD_SOURCE] = source
            try:
                live = self.crds.get(name=name).to_dict()
            except NotFoundError:
                live = None
            if live is not None:
                meta = live["metadata"]
                if (meta.get("labels") or {}).get(SIM_LABEL) != SIM_VALUE:
                    continue  # served by the lab itself (a real CRD from a Go module): never ours to change
                if (meta.get("annotations") or {}).get(CRD_SOURCE) == source:
                    continue
                LOG.info("replacing CRD %s (from %s) with lab/crds/%s for CSV %s", name,
                         (meta.get("annotations") or {}).get(CRD_SOURCE, "an older simulator"), source,
                         csv["metadata"]["name"])
                crd["metadata"]["resourceVersion"] = meta["resourceVersion"]
                self.crds.replace(body=crd)
            else:
                LOG.info("creating CRD %s (%s) owned by CSV %s", name,
                         "permissive: no schema in lab/crds" if source == "permissive" else "lab/crds/" + source,
                         csv["metadata"]["name"])
                self.crds.create(body=crd)
            self.wait_established(name)

    def wait_established(self, name: str, timeout: float = 30.0) -> None:
        """Like OLM, the CSV succeeds only once its CRDs are served (a CR written right after must not get a 404)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            conditions = (self.crds.get(name=name).to_dict().get("status") or {}).get("conditions") or []
            if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                return
            time.sleep(0.2)
        LOG.warning("CRD %s not Established after %.0fs", name, timeout)

    # ---- one pass ----------------------------------------------------------------------------
    def pass_once(self) -> int:
        actions = 0
        for sub in self.subs.get().to_dict()["items"]:
            actions += self.guarded(self.reconcile_subscription, sub)
        for plan in self.plans.get().to_dict()["items"]:
            actions += self.guarded(self.reconcile_plan, plan)
        return actions

    @staticmethod
    def guarded(func: t.Callable[[t.Dict[str, t.Any]], int], obj: t.Dict[str, t.Any]) -> int:
        """One object's failure (e.g. its namespace is terminating) must not stop the others."""
        try:
            return func(obj)
        except ApiException as exc:
            LOG.warning("%s %s/%s: %s %s", obj.get("kind"), obj["metadata"].get("namespace"), obj["metadata"]["name"],
                        exc.status, exc.reason)
            return 0

    # ---- resolution (the simulated catalog) ---------------------------------------------------------
    def channels_of(self, package: str) -> t.Optional[t.List[str]]:
        """The simulated catalog's channels of ``package``; None when any channel resolves."""
        bundle = self.bundles.get(package)
        if bundle:
            version = str((bundle.get("spec") or {}).get("version") or "")
            parts = version.split(".")
            return ["stable"] + (["v%s.%s" % (parts[0], parts[1])] if len(parts) >= 2 else [])
        return KNOWN_PACKAGES[package].get("channels")

    def resolution_failure(self, sub: t.Dict[str, t.Any]) -> t.Optional[str]:
        """OLM's ResolutionFailed message for ``sub``, or None when the simulated catalog resolves it."""
        spec = sub["spec"]
        package, name, channel = spec["name"], sub["metadata"]["name"], spec.get("channel")
        if package not in KNOWN_PACKAGES and package not in self.bundles:
            what = "no operators found in package %s in the catalog referenced by subscription %s" % (package, name)
        else:
            channels = self.channels_of(package)
            if not channel or channels is None or channel in channels:
                return None
            what = ("no operators found in channel %s of package %s in the catalog referenced by subscription %s"
                    % (channel, package, name))
        return "constraints not satisfiable: %s, subscription %s exists" % (what, name)

    def set_resolution_condition(self, sub: t.Dict[str, t.Any], failure: t.Optional[str]) -> int:
        """Set (failure) or remove (None) the ResolutionFailed condition; 1 when the status was written."""
        conditions = list((sub.get("status") or {}).get("conditions") or [])
        others = [c for c in conditions if c.get("type") != RESOLUTION_FAILED]
        current = next((c for c in conditions if c.get("type") == RESOLUTION_FAILED), None)
        if failure is None:
            if current is None:
                return 0
            wanted = others
        else:
            if current and current.get("status") == "True" and current.get("message") == failure:
                return 0
            wanted = others + [{"type": RESOLUTION_FAILED, "status": "True", "reason": UNSATISFIABLE,
                                "message": failure, "lastTransitionTime": now()}]
        meta = sub["metadata"]
        LOG.info("subscription %s/%s: %s", meta["namespace"], meta["name"], failure or "resolved, condition removed")
        self.subs.status.patch(body={"status": {"lastUpdated": now(), "conditions": wanted}}, name=meta["name"],
                               namespace=meta["namespace"], content_type="application/merge-patch+json")
        return 1

    def reconcile_subscription(self, sub: t.Dict[str, t.Any]) -> int:
        status = sub.get("status") or {}
        meta = sub["metadata"]
        failure = self.resolution_failure(sub)
        written = self.set_resolution_condition(sub, failure)
        if failure:
            return written
        if status.get("installPlanRef"):
            try:
                self.plans.get(name=status["installPlanRef"]["name"], namespace=meta["namespace"])
                return written
            except NotFoundError:
                pass  # plan removed: make a new one, as OLM would
        approval = sub["spec"].get("installPlanApproval") or "Automatic"
        csv_name = self.csv_name_for(sub)
        existing = [p for p in self.plans.get(namespace=meta["namespace"]).to_dict()["items"]
                    if p["metadata"]["name"].startswith("sim-%s-" % meta["name"])]
        plan_name = "sim-%s-%d" % (meta["name"], len(existing) + 1)
        plan = {
            "apiVersion": OLM, "kind": "InstallPlan",
            "metadata": {"name": plan_name, "namespace": meta["namespace"],
                         "labels": {SIM_LABEL: SIM_VALUE},
                         "ownerReferences": [{"apiVersion": OLM, "kind": "Subscription", "name": meta["name"],
                                              "uid": meta["uid"]}]},
            "spec": {"approval": approval, "approved": approval == "Automatic",
                     "clusterServiceVersionNames": [csv_name], "generation": 1},
        }
        LOG.info("subscription %s/%s: creating InstallPlan %s for %s (%s)",
                 meta["namespace"], meta["name"], plan_name, csv_name, approval)
        created = self.plans.create(body=plan).to_dict()
        created["status"] = {"phase": "RequiresApproval" if approval == "Manual" else "Installing",
                             "catalogSources": [sub["spec"]["source"]]}
        self.plans.status.replace(body=created)
        sub_status = {
            "lastUpdated": now(),
            "state": "UpgradePending",
            "currentCSV": csv_name,
            "installPlanApproval": approval,
            "installPlanRef": {"apiVersion": OLM, "kind": "InstallPlan", "name": plan_name,
                               "namespace": meta["namespace"], "uid": created["metadata"]["uid"]},
            "installplan": {"apiVersion": OLM, "kind": "InstallPlan", "name": plan_name, "uuid": created["metadata"]["uid"]},
        }
        self.subs.status.patch(body={"status": sub_status}, name=meta["name"], namespace=meta["namespace"],
                               content_type="application/merge-patch+json")
        return 1

    def reconcile_plan(self, plan: t.Dict[str, t.Any]) -> int:
        meta = plan["metadata"]
        if (meta.get("labels") or {}).get(SIM_LABEL) != SIM_VALUE:
            return 0
        if not plan["spec"].get("approved") or (plan.get("status") or {}).get("phase") == "Complete":
            return 0
        owner = next((o for o in meta.get("ownerReferences") or [] if o["kind"] == "Subscription"), None)
        try:
            sub = self.subs.get(name=owner["name"], namespace=meta["namespace"]).to_dict() if owner else None
        except NotFoundError:
            sub = None
        package = sub["spec"]["name"] if sub else ""
        for csv_name in plan["spec"]["clusterServiceVersionNames"]:
            manifest = self.csv_manifest(package, csv_name, meta["namespace"])
            self.ensure_owned_crds(package, manifest)
            try:
                live = self.csvs.get(name=csv_name, namespace=meta["namespace"]).to_dict()
            except NotFoundError:
                LOG.info("InstallPlan %s/%s approved: creating CSV %s", meta["namespace"], meta["name"], csv_name)
                live = self.csvs.create(body=manifest).to_dict()
            live["status"] = {"phase": "Succeeded", "reason": "InstallSucceeded",
                              "message": "simulated by the gpuaas lab OLM simulator",
                              "lastUpdateTime": now(), "lastTransitionTime": now(),
                              "conditions": [{"phase": "Succeeded", "reason": "InstallSucceeded",
                                              "lastUpdateTime": now(), "lastTransitionTime": now()}]}
            self.csvs.status.replace(body=live)
        plan["status"] = dict(plan.get("status") or {}, phase="Complete",
                              catalogSources=(plan.get("status") or {}).get("catalogSources") or [])
        self.plans.status.replace(body=plan)
        if sub:
            self.subs.status.patch(
                body={"status": {"lastUpdated": now(), "state": "AtLatestKnown",
                                 "installedCSV": plan["spec"]["clusterServiceVersionNames"][-1]}},
                name=sub["metadata"]["name"], namespace=meta["namespace"],
                content_type="application/merge-patch+json")
        return 1


def main(argv: t.Optional[t.List[str]] = None) -> int:
    parser = sim_loop.parser(__doc__, interval=2.0)
    parser.add_argument("--bundle-dir", help="directory of <package>/<name>.clusterserviceversion.yaml bundles")
    args = parser.parse_args(argv)
    client = sim_loop.connect("olm-simulator", args.kubeconfig)
    try:
        sim = Simulator(client, args.bundle_dir)
    except ResourceNotFoundError as exc:
        LOG.error("the OLM CRDs are not served: %s", exc)
        return 1

    def settle() -> None:
        # A pass can create an InstallPlan that the next pass completes: repeat until quiet.
        for _attempt in range(5):
            if not sim.pass_once():
                break

    return sim_loop.run(settle, interval=args.interval, once=args.once)


if __name__ == "__main__":
    sys.exit(main())
