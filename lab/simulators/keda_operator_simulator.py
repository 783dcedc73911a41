# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Custom Metrics Autoscaler operator SIMULATOR for the OpenShift-flavoured lab -- NOT
openshift/custom-metrics-autoscaler-operator.

On OpenShift the collection does not install KEDA itself: the keda role subscribes to Red Hat's Custom Metrics
Autoscaler operator (OLM package ``openshift-custom-metrics-autoscaler-operator``) and writes its operand, the
``keda.sh/v1alpha1`` ``KedaController`` named ``keda`` in ``openshift-keda`` (roles/keda/tasks/openshift.yml). The
operator translates that operand into KEDA's own objects in its namespace and KEDA runs from them. No operator can
run here (its image, its manifests of container images), so this simulator does only that translation, nothing
else; the REAL KEDA operator and metrics apiserver (lab/components/keda.sh) then run with the settings of the
Deployment it wrote, exactly as on the Kubernetes-flavoured lab they run with those of the keda role's Helm release.

The facts follow openshift/custom-metrics-autoscaler-operator @ 3d37f650 (fetched 2026-12-02):

- ``internal/controller/keda/kedacontroller_controller.go``: only the KedaController named ``keda`` in the
  operator's own namespace is installed (``isInteresting``); any other gets ``status.phase: Installation Ignored``
  with the reason "The KedaController resource needs to be created in namespace <ns> with name keda, otherwise it
  will be ignored". A translated one gets ``Installation Succeeded``, "KEDA v<version> is installed in namespace
  '<ns>'" and ``status.version``. Every object carries the KedaController as its controller owner (``InjectOwner``)
  in the KedaController's namespace (``ReplaceAllNamespaces``). On OpenShift the operator turns KEDA's own cert
  rotation off (``SetOperatorCertRotation(false)``: the service CA serves the certificates).
- ``resources/keda.yaml``: ServiceAccount ``keda-operator`` (every KEDA Deployment runs as it); Deployment
  ``keda-operator`` (container ``keda-operator``, ``command: [/keda]``, args ``--leader-elect
  --zap-log-level=info --zap-encoder=console --zap-time-encoding=rfc3339 --enable-cert-rotation=true``, env
  ``POD_NAMESPACE`` from the pod's namespace, ``WATCH_NAMESPACE: ""``, ``KEDA_HTTP_DEFAULT_TIMEOUT: ""``).
- ``internal/controller/keda/transform/transform.go``: ``ReplaceWatchNamespace(spec.watchNamespace,
  "keda-operator")`` sets WATCH_NAMESPACE of the operator container only (the metrics apiserver keeps ``""``);
  ``spec.operator.logLevel`` (``debug``, ``info``, ``error`` or an unsigned integer), ``logEncoder`` (``json``,
  ``console``) and ``logTimeEncoding`` (``epoch``, ``millis``, ``nano``, ``iso8601``, ``rfc3339``,
  ``rfc3339nano``) replace the ``--zap-*`` args (``replaceContainerArg``); any other value is ignored (logged).

KEDA reads ClusterTriggerAuthentication Secrets in its pod's namespace (no KEDA_CLUSTER_OBJECT_NAMESPACE is set), so
the running KEDA takes the Deployment's namespace, as lab/components/keda/settings.py reads it.

Not simulated: the metrics apiserver and admission webhooks Deployments (the lab runs the metrics apiserver itself,
with the operator Deployment's settings; no webhooks), the RBAC, Services, APIService and NetworkPolicies of
``resources/keda.yaml``, the service-CA certificates, the TLS-profile env vars, ``spec.operator`` fields other than
the log settings (resources, tolerations, node selector, args, volumes ...), ``spec.metricsServer``,
``spec.admissionWebhooks``, ``spec.serviceAccount`` labels/annotations, the HTTP add-on, the operator's finalizer
and its default KedaController (the keda role always writes one). When the KedaController is deleted the objects
it owns go with it (the lab's garbage collector), as on a cluster.

Usage:
  python lab/simulators/keda_operator_simulator.py --kubeconfig K --namespace openshift-keda [--once]
"""

from __future__ import annotations

import logging
import os
import sys
import typing as t

from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # sim_loop sits beside it, also when loaded by path
import sim_loop  # noqa: E402  pylint: disable=wrong-import-position

LOG = logging.getLogger("keda-operator-simulator")
OPERAND_API = "keda.sh/v1alpha1"
OPERAND_KIND = "KedaController"
OPERAND_NAME = "keda"  # kedaControllerResourceName
FIELD_MANAGER = "lab-keda-operator-simulator"
OPERATOR = "keda-operator"  # Deployment, container and ServiceAccount name in resources/keda.yaml
PHASE_SUCCEEDED = "Installation Succeeded"
PHASE_IGNORED = "Installation Ignored"
LOG_LEVELS = ("debug", "info", "error")
LOG_ENCODERS = ("json", "console")
LOG_TIME_ENCODINGS = ("epoch", "millis", "nano", "iso8601", "rfc3339", "rfc3339nano")
# resources/keda.yaml's keda-operator args, then SetOperatorCertRotation(false) on OpenShift
DEFAULT_ARGS = ["--leader-elect", "--zap-log-level=info", "--zap-encoder=console", "--zap-time-encoding=rfc3339",
                "--enable-cert-rotation=false"]


def ignored_reason(namespace: str) -> str:
    return ("The KedaController resource needs to be created in namespace %s with name %s, otherwise it will be "
            "ignored" % (namespace, OPERAND_NAME))


def installed_reason(version: str, namespace: str) -> str:
    return "KEDA v%s is installed in namespace '%s'" % (version, namespace)


def _valid_log_level(level: str) -> bool:
    return level in LOG_LEVELS or level.isdigit()


def replace_arg(args: t.List[str], prefix: str, value: str) -> t.List[str]:
    """transform.go replaceContainerArg: the arg with ``prefix`` gets ``value``; appended when there is none."""
    out = list(args)
    for i, arg in enumerate(out):
        if arg.startswith(prefix):
            out[i] = prefix + value
            return out
    return out + [prefix + value]


def operator_args(operator: t.Mapping[str, t.Any]) -> t.List[str]:
    """The keda-operator container's args from ``spec.operator`` (values outside the operator's lists ignored)."""
    args = list(DEFAULT_ARGS)
    level, encoder, time_encoding = (str(operator.get(k) or "") for k in ("logLevel", "logEncoder", "logTimeEncoding"))
    if level and _valid_log_level(level):
        args = replace_arg(args, "--zap-log-level=", level)
    if encoder in LOG_ENCODERS:
        args = replace_arg(args, "--zap-encoder=", encoder)
    if time_encoding in LOG_TIME_ENCODINGS:
        args = replace_arg(args, "--zap-time-encoding=", time_encoding)
    return args


def owner_reference(operand: t.Mapping[str, t.Any]) -> t.Dict[str, t.Any]:
    meta = operand["metadata"]
    return {"apiVersion": OPERAND_API, "kind": OPERAND_KIND, "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


def translate(operand: t.Mapping[str, t.Any], keda_version: str) -> t.List[t.Dict[str, t.Any]]:
    """The objects the operator writes for the KedaController ``keda`` in its namespace (see the module doc)."""
    namespace = operand["metadata"]["namespace"]
    spec = operand.get("spec") or {}
    labels = {"app.kubernetes.io/name": OPERATOR, "app.kubernetes.io/part-of": OPERATOR}
    owner = [owner_reference(operand)] if operand["metadata"].get("uid") else []
    meta = {"namespace": namespace, "labels": labels, "ownerReferences": owner}
    service_account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": dict(meta, name=OPERATOR)}
    container = {
        "name": OPERATOR, "image": "ghcr.io/kedacore/keda:%s" % keda_version, "command": ["/keda"],
        "args": operator_args(spec.get("operator") or {}),
        "env": [{"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "WATCH_NAMESPACE", "value": spec.get("watchNamespace") or ""},
                {"name": "KEDA_HTTP_DEFAULT_TIMEOUT", "value": ""}],
    }
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": dict(meta, name=OPERATOR, labels=dict(labels, app=OPERATOR,
                                                          **{"app.kubernetes.io/component": "operator"})),
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": OPERATOR}},
                 "template": {"metadata": {"labels": {"app": OPERATOR, "name": OPERATOR}},
                              "spec": {"serviceAccountName": OPERATOR, "containers": [container],
                                       "nodeSelector": {"kubernetes.io/os": "linux"}}}},
    }
    return [service_account, deployment]


def contains(current: t.Any, desired: t.Any) -> bool:
    """Whether ``current`` already holds every field of ``desired`` (the API server adds defaults beside them, and
    drops empty omitempty fields such as an env var's ``value: ""``)."""
    if current is None and desired in ("", {}, []):
        return True
    if isinstance(desired, dict):
        return isinstance(current, dict) and all(contains(current.get(k), v) for k, v in desired.items())
    if isinstance(desired, list):
        return isinstance(current, list) and len(current) == len(desired) and all(
            contains(c, d) for c, d in zip(current, desired))
    return current == desired


def _set_status(client: DynamicClient, operand: t.Dict[str, t.Any], status: t.Dict[str, str]) -> None:
    current = operand.get("status") or {}
    if all(current.get(k) == v for k, v in status.items()):
        return
    meta = operand["metadata"]
    client.resources.get(api_version=OPERAND_API, kind=OPERAND_KIND).status.patch(
        name=meta["name"], namespace=meta["namespace"], body={"status": status},
        content_type="application/merge-patch+json")


def reconcile(client: DynamicClient, namespace: str, keda_version: str) -> bool:
    """One pass over every KedaController; True when the one the operator installs was translated."""
    try:
        operands = client.resources.get(api_version=OPERAND_API, kind=OPERAND_KIND).get().to_dict()["items"]
    except (NotFoundError, ResourceNotFoundError):
        return False  # no operator CRD yet (the OLM SIMULATOR creates it with the CSV)
    translated = False
    for operand in operands:
        meta = operand["metadata"]
        if meta.get("deletionTimestamp"):
            continue
        if meta["name"] != OPERAND_NAME or meta["namespace"] != namespace:
            _set_status(client, operand, {"phase": PHASE_IGNORED, "reason": ignored_reason(namespace)})
            continue
        for body in translate(operand, keda_version):
            resource = client.resources.get(api_version=body["apiVersion"], kind=body["kind"])
            try:
                current = resource.get(name=body["metadata"]["name"], namespace=namespace).to_dict()
            except NotFoundError:
                current = None
            if current is not None and contains(current, body):
                continue  # written already: no write every pass (the audit log is the tests' evidence)
            LOG.info("%s %s/%s written from KedaController %s/%s (generation %s)", body["kind"], namespace,
                     body["metadata"]["name"], namespace, OPERAND_NAME, meta.get("generation"))
            resource.server_side_apply(body=body, name=body["metadata"]["name"], namespace=namespace,
                                       field_manager=FIELD_MANAGER, force_conflicts=True)
        _set_status(client, operand, {"phase": PHASE_SUCCEEDED, "reason": installed_reason(keda_version, namespace),
                                      "version": keda_version})
        translated = True
    return translated


def main(argv: t.Optional[t.List[str]] = None) -> int:
    parser = sim_loop.parser(__doc__, interval=1.0, kubeconfig_required=True,
                             once_help="one pass, then exit (0 if the operand was translated)")
    parser.add_argument("--namespace", default="openshift-keda",
                        help="the operator's namespace (where OLM installed it): the only KedaController it installs")
    parser.add_argument("--keda-version", default="2.20.2", help="the KEDA the lab runs (status.version, image tag)")
    args = parser.parse_args(argv)
    client = sim_loop.connect("keda-operator-simulator", args.kubeconfig)
    version = args.keda_version.lstrip("v")
    if args.once:
        return 0 if reconcile(client, args.namespace, version) else 1
    return sim_loop.run(lambda: reconcile(client, args.namespace, version), interval=args.interval,
                        survive=(ApiException,))


if __name__ == "__main__":
    sys.exit(main())
