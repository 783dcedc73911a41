# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NOTEBOOK CONTROLLER SIMULATOR for the gpuaas lab -- NOT the Kubeflow / OpenShift AI notebook controller.

No notebook-controller module is served by the Go module proxy (docs/lab.md), so this does only the controller's
StatefulSet part, as upstream does it: opendatahub-io/kubeflow (OpenShift AI's fork; kubeflow/kubeflow up to commit
6dbe5161 differs where noted) components/notebook-controller/controllers/notebook_controller.go, ``Reconcile`` and
``generateStatefulSet``, and components/common/reconcilehelper/util.go ``CopyStatefulSetFields``:

- for every Notebook (``kubeflow.org/v1``; not while it is being deleted) the desired StatefulSet is named after the
  Notebook, with a controller ownerReference to it, ``spec.replicas`` 1, or **0 while the Notebook has the
  annotation ``kubeflow-resource-stopped``** (its presence, not its value), selector ``statefulset: <name>``, and the
  Notebook's pod template spec with upstream's defaults on the first container (workingDir ``/home/jovyan``, port
  8888 ``notebook-port``, env ``NB_PREFIX=/notebook/<namespace>/<name>``, pod ``fsGroup: 100`` when no
  securityContext);
- labels: the Notebook's labels on the StatefulSet (OpenShift AI's fork; upstream Kubeflow leaves the StatefulSet's
  own labels empty) and on the pod template, beside ``statefulset``, ``notebook-name`` and
  ``opendatahub.io/workbenches: "true"``; the Notebook's annotations on the pod template, except keys containing
  ``kubectl`` or ``notebook`` -- so Kueue's queue label reaches the StatefulSet and its pods;
- a missing StatefulSet is created; an existing one gets **upstream's copy on every reconcile**: its labels and
  annotations replaced by the desired ones, ``spec.replicas`` set to the desired count, its pod template spec replaced;
  when the replica count differs the pod template's labels are replaced too (OpenShift AI's fork). So a StatefulSet
  scaled by anyone else (KEDA) is set back at the next reconcile.

Left out: the Service, the VirtualService/Route, the Notebook status, events, the culler, generateName for names
over 52 characters. Deviation: upstream compares the pod template spec with reflect.DeepEqual against the API
server's defaulted copy (always different, so it updates on every reconcile); this SIMULATOR updates only when a
field it sets differs (no no-op writes). It reconciles every ``--interval`` seconds instead of on watch events.

Usage:
  python lab/simulators/notebook_controller_simulator.py --kubeconfig .lab/lab-tools.kubeconfig [--once] [--interval 1]
"""

from __future__ import annotations

import copy
import logging
import os
import sys
import typing as t

from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # sim_loop sits beside it, also when loaded by path
import sim_loop  # noqa: E402  pylint: disable=wrong-import-position

LOG = logging.getLogger("notebook-controller-simulator")
NOTEBOOK_API = ("kubeflow.org/v1", "Notebook")
STOP_ANNOTATION = "kubeflow-resource-stopped"
WORKBENCH_LABEL = "opendatahub.io/workbenches"
DEFAULT_CONTAINER_PORT = 8888
DEFAULT_FS_GROUP = 100
Obj = t.Dict[str, t.Any]


def desired_statefulset(notebook: Obj) -> Obj:
    """generateStatefulSet (opendatahub-io/kubeflow), field for field as described in the module docstring."""
    meta = notebook["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    labels = dict(meta.get("labels") or {})
    annotations = meta.get("annotations") or {}
    replicas = 0 if STOP_ANNOTATION in annotations else 1
    template_labels = {"statefulset": name, "notebook-name": name, WORKBENCH_LABEL: "true"}
    template_labels.update(labels)
    template_annotations = {k: v for k, v in annotations.items() if "kubectl" not in k and "notebook" not in k}
    pod_spec = copy.deepcopy(((notebook.get("spec") or {}).get("template") or {}).get("spec") or {})
    container = pod_spec["containers"][0]
    if not container.get("workingDir"):
        container["workingDir"] = "/home/jovyan"
    if container.get("ports") is None:
        container["ports"] = [{"containerPort": DEFAULT_CONTAINER_PORT, "name": "notebook-port", "protocol": "TCP"}]
    prefix = "/notebook/%s/%s" % (namespace, name)
    # upstream's setPrefixEnvVar sets the value on a loop copy, so an NB_PREFIX the user gave stays as she gave it
    if not any(e.get("name") == "NB_PREFIX" for e in container.get("env") or []):
        container["env"] = list(container.get("env") or []) + [{"name": "NB_PREFIX", "value": prefix}]
    if pod_spec.get("securityContext") is None:
        pod_spec["securityContext"] = {"fsGroup": DEFAULT_FS_GROUP}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": namespace, "labels": labels,
                         "ownerReferences": [{"apiVersion": notebook.get("apiVersion", NOTEBOOK_API[0]),
                                              "kind": "Notebook", "name": name, "uid": meta["uid"],
                                              "controller": True, "blockOwnerDeletion": True}]},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"statefulset": name}},
                     "template": {"metadata": {"labels": template_labels, "annotations": template_annotations},
                                  "spec": pod_spec}}}


def _contains(live: t.Any, want: t.Any) -> bool:
    """Every field of ``want`` has the same value in ``live`` (the API server adds defaults, never removes)."""
    if isinstance(want, dict):
        return isinstance(live, dict) and all(k in live and _contains(live[k], v) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(live, list) and len(live) == len(want) and all(_contains(a, b) for a, b in zip(live, want))
    return live == want


def copy_statefulset_fields(desired: Obj, live: Obj) -> bool:
    """The controller's update of an existing StatefulSet; True when it must be written. ``live`` is changed."""
    require = False
    dmeta, lmeta = desired["metadata"], live["metadata"]
    dspec, lspec = desired["spec"], live["spec"]
    # opendatahub-io/kubeflow Reconcile: on a replica change, the pod template's labels are copied too
    if dspec["replicas"] != lspec.get("replicas"):
        if (lspec["template"]["metadata"].get("labels") or {}) != dspec["template"]["metadata"]["labels"]:
            lspec["template"]["metadata"]["labels"] = dspec["template"]["metadata"]["labels"]
    # CopyStatefulSetFields: labels and annotations checked over the live keys, then replaced
    for field in ("labels", "annotations"):
        want = dmeta.get(field) or {}
        if any(want.get(k) != v for k, v in (lmeta.get(field) or {}).items()):
            require = True
        lmeta[field] = want
    if dspec["replicas"] != lspec.get("replicas"):
        lspec["replicas"] = dspec["replicas"]
        require = True
    if not _contains(lspec["template"]["spec"], dspec["template"]["spec"]):
        require = True
    lspec["template"]["spec"] = dspec["template"]["spec"]
    return require


def controlled_by(obj: Obj, owner: Obj) -> bool:
    return any(ref.get("controller") and ref.get("uid") == owner["metadata"]["uid"]
               for ref in obj["metadata"].get("ownerReferences") or [])


def reconcile(statefulsets: t.Any, notebook: Obj) -> str:
    """One Notebook's StatefulSet: ``created``, ``updated``, ``unchanged`` or ``skipped``."""
    meta = notebook["metadata"]
    if meta.get("deletionTimestamp"):
        return "skipped"  # upstream: nothing while the Notebook is terminating
    desired = desired_statefulset(notebook)
    try:
        live = statefulsets.get(name=meta["name"], namespace=meta["namespace"]).to_dict()
    except ApiException as exc:
        if exc.status != 404:
            raise
        statefulsets.create(body=desired, namespace=meta["namespace"])
        LOG.info("StatefulSet %s/%s created (replicas %d)", meta["namespace"], meta["name"], desired["spec"]["replicas"])
        return "created"
    if not controlled_by(live, notebook):
        LOG.warning("StatefulSet %s/%s is not controlled by the Notebook; left alone", meta["namespace"], meta["name"])
        return "skipped"
    before = live["spec"].get("replicas")
    if not copy_statefulset_fields(desired, live):
        return "unchanged"
    statefulsets.replace(body=live, namespace=meta["namespace"])
    LOG.info("StatefulSet %s/%s updated (replicas %s -> %d)", meta["namespace"], meta["name"], before,
             desired["spec"]["replicas"])
    return "updated"


def pass_once(client: DynamicClient) -> t.Dict[str, int]:
    counts: t.Dict[str, int] = {}
    try:
        notebooks = client.resources.get(api_version=NOTEBOOK_API[0], kind=NOTEBOOK_API[1])
    except ResourceNotFoundError:
        client.resources.invalidate_cache()
        return counts
    statefulsets = client.resources.get(api_version="apps/v1", kind="StatefulSet")
    for notebook in notebooks.get().to_dict()["items"]:
        try:
            outcome = reconcile(statefulsets, notebook)
        except ApiException as exc:  # one Notebook's failure (namespace terminating, a webhook) must not stop the rest
            LOG.warning("Notebook %s/%s: %s %s", notebook["metadata"]["namespace"], notebook["metadata"]["name"],
                        exc.status, (exc.body or exc.reason or "")[:300])
            outcome = "failed"
        counts[outcome] = counts.get(outcome, 0) + 1
    return counts


def main(argv: t.Optional[t.List[str]] = None) -> int:
    args = sim_loop.parser(__doc__, interval=1.0).parse_args(argv)
    client = sim_loop.connect("notebook-controller-simulator", args.kubeconfig)
    return sim_loop.run(lambda: pass_once(client), interval=args.interval, once=args.once)


if __name__ == "__main__":
    sys.exit(main())
