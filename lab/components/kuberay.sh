#!/usr/bin/env bash
# The real KubeRay operator (github.com/ray-project/kuberay/ray-operator, built by lab/build/kuberay.sh), run out of
# cluster against the lab (issue 25).
#
#   kuberay.sh up       start (idempotent): identity, operator, Prometheus target
#   kuberay.sh down     stop the operator (its RBAC objects stay, like a chart's after a scale-down)
#   kuberay.sh status   one line "kuberay: healthy|unhealthy (...)"; non-zero exit when unhealthy
#
# Identity: the operator runs as system:serviceaccount:ray-system:kuberay-operator (a token of that ServiceAccount),
# the identity KubeRay has on a cluster installed by its chart in namespace ray-system, and the one the tenants'
# admission policy trusts to create the pods of RayClusters/RayJobs when Kueue manages a ray.io framework
# (admission.workload_controllers default, plugins/module_utils/manifests/kueue_integrations.py
# CONTROLLER_FRAMEWORKS). Its permissions are upstream's own ClusterRole (config/rbac/role.yaml of the same module
# version), not cluster-admin: a permission KubeRay lacks fails here as it would on a real cluster.
#
# What the lab cannot give KubeRay (docs/lab-controllers.md): the pods it creates are run by KWOK (Running/Ready,
# no container, no Ray processes), so nothing answers on the head's dashboard (8265) or GCS; RayJob submission,
# which talks to the dashboard, cannot succeed. Leader election and KubeRay's webhook are off.
#
# Called by lab/lab.sh with LAB_DIR, LAB_CACHE, LAB_BIN, KUBECONFIG (this component's own cluster-admin identity,
# user lab:kuberay, which only sets the lab up) and the *_VERSION variables.
set -euo pipefail
: "${LAB_DIR:?}" "${LAB_CACHE:?}" "${KUBECONFIG:?}" "${KUBERAY_VERSION:?}"
LAB_BIN=${LAB_BIN:-$LAB_DIR/bin}
COMPONENT=kuberay
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
BIN=$LAB_CACHE/kuberay-$KUBERAY_VERSION/bin/ray-operator
SHARE=$LAB_CACHE/kuberay-$KUBERAY_VERSION/share
STATE=$LAB_DIR/kuberay
OFF=${LAB_PORT_OFFSET:-0}  # lab.sh moves every port by LAB_PORT_OFFSET (a second lab beside the first)
METRICS_PORT=$((8088 + OFF)) HEALTH_PORT=$((8089 + OFF))
NS=ray-system SA=kuberay-operator

identity() {
  # Upstream's ClusterRole, bound to the chart's ServiceAccount name in the chart's usual namespace.
  kubectl apply --server-side --force-conflicts --field-manager=lab-kuberay -f "$SHARE/rbac/role.yaml" >/dev/null
  kubectl apply --server-side --force-conflicts --field-manager=lab-kuberay -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: $NS}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: $SA, namespace: $NS}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: kuberay-operator}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: kuberay-operator}
subjects:
- {kind: ServiceAccount, name: $SA, namespace: $NS}
EOF
  sa_kubeconfig "$NS" "$SA" "$STATE/kuberay.kubeconfig"
}

register_prometheus() {
  mkdir -p "$LAB_DIR/prometheus/targets"
  printf '[{"targets": ["127.0.0.1:%s"], "labels": {"job": "kuberay-operator"}}]\n' "$METRICS_PORT" \
    >"$LAB_DIR/prometheus/targets/kuberay.json"
}

cmd_up() {
  if v1beta1_variant; then
    # The v1beta1 variant runs no Kueue, so nothing would gate a RayCluster: KubeRay stays off there too.
    log "skipped: LAB_KUEUE_API=v1beta1 runs no Kueue controller"
    return 0
  fi
  [ -x "$BIN" ] || { log "not built: $BIN missing (run: bash lab/lab.sh build kuberay)"; return 1; }
  if proc_alive kuberay && ready; then log "already running (pid $(cat "$(proc_pidfile kuberay)"))"; register_prometheus; return 0; fi
  cmd_down
  mkdir -p "$STATE"
  identity
  : >"$(proc_log kuberay)"
  KUBECONFIG="$STATE/kuberay.kubeconfig" proc_start kuberay "$BIN" --metrics-addr="127.0.0.1:$METRICS_PORT" \
    --health-probe-bind-address="127.0.0.1:$HEALTH_PORT" --enable-leader-election=false --enable-metrics \
    --log-stdout-encoder=console
  proc_wait kuberay "readyz on 127.0.0.1:$HEALTH_PORT" 90 ready || { cmd_down; return 1; }
  register_prometheus
  log "KubeRay $KUBERAY_VERSION up (pid $(cat "$(proc_pidfile kuberay)"), as system:serviceaccount:$NS:$SA, metrics 127.0.0.1:$METRICS_PORT)"
}

cmd_down() { operator_down kuberay; }
cmd_status() { job_operator_status kuberay "$KUBERAY_VERSION"; }

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
