# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Red Hat build of Kueue operator SIMULATOR for the OpenShift-flavoured lab -- NOT openshift/kueue-operator.

On OpenShift the collection does not write Kueue's Configuration: it writes the operator's operand, the
``kueue.openshift.io/v1`` ``Kueue`` named ``cluster`` (roles/kueue/tasks/openshift.yml), and the operator translates
it into the ConfigMap ``kueue-manager-config`` (key ``controller_manager_config.yaml``, a
``config.kueue.x-k8s.io/v1beta1`` Configuration) in its own namespace, then runs Kueue with it. No operator can run
here (its image, its Deployment), so this simulator does only that translation, nothing else; the REAL Kueue
controller (lab/components/kueue.sh) then runs the ConfigMap it wrote, exactly as on the Kubernetes-flavoured lab it
runs the ConfigMap of the kueue role's Helm release.

The translation follows openshift/kueue-operator ``pkg/configmap/configmap.go`` (BuildConfigMap,
defaultKueueConfigurationTemplate @ 0217a188): the operator's fixed defaults (metrics with
``enableClusterQueueResources: true``, client QPS 50 / burst 100, group-kind concurrency, no internal cert
management, ``managedJobsNamespaceSelector`` = namespaces labelled ``kueue.openshift.io/managed=true``) and from the
operand: ``integrations.frameworks`` (the operator's names mapped to Kueue's), ``externalFrameworks``
(``resource.version.group``), ``labelKeysToCopy``, ``workloadManagement.labelPolicy: None`` →
``manageJobsWithoutQueueName``, ``gangScheduling`` → ``waitForPodsReady``, ``preemption.preemptionPolicy:
FairSharing`` → ``fairSharing``. Leader-election durations are the operator's; the lab's Kueue overlays its own
plumbing on top (lab/components/kueue/config.py, docs/lab.md). Not simulated: ``admissionFairSharing``,
``multiKueue``, ``resources``, log levels, the operand's status conditions, cert-manager, the operator's own
Deployment/Service/webhook objects (the lab registers Kueue's webhooks itself), and ``managementState: Removed``.
When the ``Kueue`` is deleted the real operator removes Kueue; this simulator leaves the last ConfigMap (and so the
running Kueue) in place, so the suites after an operand test still have a Kueue.

Usage:
  python lab/simulators/kueue_operator_simulator.py --kubeconfig K --namespace openshift-kueue-operator [--once]
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import typing as t

import yaml
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # sim_loop sits beside it, also when loaded by path
import sim_loop  # noqa: E402  pylint: disable=wrong-import-position

LOG = logging.getLogger("kueue-operator-simulator")
OPERAND_API = "kueue.openshift.io/v1"
CONFIGMAP = "kueue-manager-config"
CONFIG_KEY = "controller_manager_config.yaml"
FIELD_MANAGER = "lab-kueue-operator-simulator"
MANAGED_NAMESPACES_LABEL = "kueue.openshift.io/managed"

# The operator's framework names → Kueue's (configmap.go buildFrameworkList; RayService and SparkApplication are in
# the release-1.4 enum, lab/crds/kueues.kueue.openshift.io.yaml).
FRAMEWORKS: t.Dict[str, str] = {
    "BatchJob": "batch/job",
    "MPIJob": "kubeflow.org/mpijob",
    "RayJob": "ray.io/rayjob",
    "RayCluster": "ray.io/raycluster",
    "RayService": "ray.io/rayservice",
    "JobSet": "jobset.x-k8s.io/jobset",
    "PaddleJob": "kubeflow.org/paddlejob",
    "PyTorchJob": "kubeflow.org/pytorchjob",
    "TFJob": "kubeflow.org/tfjob",
    "XGBoostJob": "kubeflow.org/xgboostjob",
    "JaxJob": "kubeflow.org/jaxjob",
    "AppWrapper": "workload.codeflare.dev/appwrapper",
    "Pod": "pod",
    "Deployment": "deployment",
    "LeaderWorkerSet": "leaderworkerset.x-k8s.io/leaderworkerset",
    "StatefulSet": "statefulset",
    "TrainJob": "trainer.kubeflow.org/trainjob",
    "SparkApplication": "sparkoperator.k8s.io/sparkapplication",
}


def wait_for_pods_ready(gang: t.Mapping[str, t.Any]) -> t.Dict[str, t.Any]:
    """configmap.go buildWaitForPodsReady: only policy ByWorkload enables it; Sequential admission blocks."""
    if gang.get("policy") != "ByWorkload":
        return {"enable": False}
    by_workload = gang.get("byWorkload")
    return {"enable": True, "blockAdmission": bool(by_workload) and by_workload.get("admission") == "Sequential"}


def fair_sharing(preemption: t.Mapping[str, t.Any]) -> t.Dict[str, t.Any]:
    """configmap.go buildFairSharing: FairSharing enables it with the operator's two preemption strategies."""
    if preemption.get("preemptionPolicy") == "FairSharing":
        return {"enable": True, "preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}
    return {"enable": False}


def configuration(namespace: str, spec: t.Mapping[str, t.Any]) -> t.Dict[str, t.Any]:
    """The Kueue Configuration the operator builds from the operand's ``spec`` (configmap.go)."""
    cfg = spec.get("config") or {}
    integrations = cfg.get("integrations") or {}
    unknown = [f for f in integrations.get("frameworks") or [] if f not in FRAMEWORKS]
    if unknown:  # the operand's CRD enum refuses these; a simulator must not invent a mapping
        raise ValueError("frameworks the operator cannot map: %s" % ", ".join(unknown))
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta1",
        "kind": "Configuration",
        "namespace": namespace,
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443", "enableClusterQueueResources": True},
        "webhook": {"port": 9443},
        "controller": {"groupKindConcurrency": {
            "Job.batch": 5, "Pod": 5, "Workload.kueue.x-k8s.io": 5, "LocalQueue.kueue.x-k8s.io": 1,
            "ClusterQueue.kueue.x-k8s.io": 1, "ResourceFlavor.kueue.x-k8s.io": 1}},
        "leaderElection": {"leaderElect": True, "leaseDuration": "2m17s", "renewDeadline": "1m47s",
                           "retryPeriod": "26s"},
        "clientConnection": {"qps": 50, "burst": 100},
        "integrations": {
            "frameworks": [FRAMEWORKS[f] for f in integrations.get("frameworks") or []],
            "externalFrameworks": ["%s.%s.%s" % (e.get("resource"), e.get("version"), e.get("group"))
                                   for e in integrations.get("externalFrameworks") or []],
            "labelKeysToCopy": [k.get("key") for k in integrations.get("labelKeysToCopy") or []],
        },
        "internalCertManagement": {"enable": False},
        "managedJobsNamespaceSelector": {"matchLabels": {MANAGED_NAMESPACES_LABEL: "true"}},
        "manageJobsWithoutQueueName": (cfg.get("workloadManagement") or {}).get("labelPolicy") == "None",
        "waitForPodsReady": wait_for_pods_ready(cfg.get("gangScheduling") or {}),
        "fairSharing": fair_sharing(cfg.get("preemption") or {}),
    }


def reconcile(client: DynamicClient, namespace: str) -> t.Optional[str]:
    """One pass: the ConfigMap for the operand ``cluster``; returns the sha256 of what it wrote, None if no operand."""
    try:
        operand = client.resources.get(api_version=OPERAND_API, kind="Kueue").get(name="cluster").to_dict()
    except (NotFoundError, ResourceNotFoundError):
        return None  # no operand (or no operator CRD yet): the last Configuration stays
    if (operand.get("spec") or {}).get("managementState", "Managed") not in ("Managed", ""):
        LOG.info("Kueue cluster is %s: not simulated, ConfigMap left as it is", operand["spec"]["managementState"])
        return None
    try:
        text = yaml.safe_dump(configuration(namespace, operand.get("spec") or {}), sort_keys=False)
    except ValueError as exc:
        LOG.warning("Kueue cluster not translated: %s", exc)
        return None
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CONFIGMAP, "namespace": namespace},
            "data": {CONFIG_KEY: text}}
    cms = client.resources.get(api_version="v1", kind="ConfigMap")
    try:
        current = cms.get(name=CONFIGMAP, namespace=namespace).to_dict()
    except NotFoundError:
        current = None
    if current is None or (current.get("data") or {}).get(CONFIG_KEY) != text:
        cms.server_side_apply(body=body, field_manager=FIELD_MANAGER, force_conflicts=True)
        LOG.info("ConfigMap %s/%s written from Kueue cluster (generation %s)", namespace, CONFIGMAP,
                 operand["metadata"].get("generation"))
    return hashlib.sha256(text.encode()).hexdigest()


def main(argv: t.Optional[t.List[str]] = None) -> int:
    parser = sim_loop.parser(__doc__, interval=1.0, kubeconfig_required=True,
                             once_help="one pass, then exit (0 if a ConfigMap was written)")
    parser.add_argument("--namespace", default="openshift-kueue-operator",
                        help="the operator's namespace, where it writes kueue-manager-config")
    args = parser.parse_args(argv)
    client = sim_loop.connect("kueue-operator-simulator", args.kubeconfig)
    if args.once:
        return 0 if reconcile(client, args.namespace) else 1
    return sim_loop.run(lambda: reconcile(client, args.namespace), interval=args.interval, survive=(ApiException,))


if __name__ == "__main__":
    sys.exit(main())
