#!/usr/bin/env bash
# The real Kubeflow training operator (github.com/kubeflow/training-operator, built by lab/build/training_operator.sh),
# run out of cluster against the lab (issue 25).
#
#   training_operator.sh up       start (idempotent): identity, webhook-certificate Secret, operator, Prometheus target
#   training_operator.sh down     stop the operator (its RBAC objects stay, like a manifest install after a scale-down)
#   training_operator.sh status   one line "training_operator: healthy|unhealthy (...)"; non-zero exit when unhealthy
#
# Identity: the operator runs as system:serviceaccount:kubeflow:training-operator (a token of that ServiceAccount),
# the identity upstream's standalone install (manifests/overlays/standalone, namespace kubeflow) gives it, and the one
# the tenants' admission policy trusts to create the pods of PyTorchJobs/TFJobs/... when Kueue manages a kubeflow.org
# framework (admission.workload_controllers default, plugins/module_utils/manifests/kueue_integrations.py
# CONTROLLER_FRAMEWORKS). Its permissions are upstream's own ClusterRole (manifests/base/rbac/role.yaml of the same
# module version), not cluster-admin: a permission the operator lacks fails here as it would on a real cluster.
#
# Enabled: the controllers of the kinds whose CRDs the lab serves (PyTorchJob, TFJob, XGBoostJob, PaddleJob,
# JAXJob; not the v1 MPIJob, whose CRD is not loaded). No gang scheduler (none runs here: Kueue admits jobs whole).
#
# The webhook certificate, as upstream does it: the operator's own cert rotator (open-policy-agent/cert-controller)
# writes a self-signed CA and serving certificate into the Secret kubeflow/training-operator-webhook-cert (created
# empty here, as the standalone overlay's secretGenerator does) and waits for the kubelet to mount that Secret at the
# fixed path /tmp/k8s-webhook-server/serving-certs. There is no kubelet for a host process, so this script plays its
# part: the operator runs in a private mount namespace where $STATE/certs is bind-mounted over that path (no other
# process, and no second lab, sees or shares it), and the Secret's tls.crt/tls.key are copied there once written.
# Until then the operator starts no controller (upstream's order). Its ValidatingWebhookConfiguration is NOT
# registered: the certificate names the in-cluster Service training-operator.kubeflow.svc, which the lab's apiserver
# cannot reach (the rotator logs "Webhook not found" and goes on); PyTorchJob specs are validated by the CRD schema
# (and Kueue's webhook) only.
#
# What the lab cannot give the operator (docs/lab-controllers.md): the pods it creates are run by KWOK (Running/Ready,
# no container, no PyTorch processes); a job's pods end only when KWOK completes them
# (pod-complete.stage.kwok.x-k8s.io/delay on the pod template), and then the operator marks the job Succeeded.
#
# Called by lab/lab.sh with LAB_DIR, LAB_CACHE, LAB_BIN, KUBECONFIG (this component's own cluster-admin identity,
# user lab:training_operator, which only sets the lab up) and the *_VERSION variables.
set -euo pipefail
: "${LAB_DIR:?}" "${LAB_CACHE:?}" "${KUBECONFIG:?}" "${TRAINING_OPERATOR_VERSION:?}"
LAB_BIN=${LAB_BIN:-$LAB_DIR/bin}
COMPONENT=training_operator
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
BIN=$LAB_CACHE/training_operator-$TRAINING_OPERATOR_VERSION/bin/training-operator.v1
SHARE=$LAB_CACHE/training_operator-$TRAINING_OPERATOR_VERSION/share
STATE=$LAB_DIR/training_operator
OFF=${LAB_PORT_OFFSET:-0}  # lab.sh moves every port by LAB_PORT_OFFSET (a second lab beside the first)
METRICS_PORT=$((8092 + OFF)) HEALTH_PORT=$((8093 + OFF)) WEBHOOK_PORT=$((9447 + OFF))
NS=kubeflow SA=training-operator SECRET=training-operator-webhook-cert
CERT_PATH=/tmp/k8s-webhook-server/serving-certs  # pkg/cert certDir of the operator, a constant upstream
SCHEMES="pytorchjob tfjob xgboostjob paddlejob jaxjob"

identity() {
  # Upstream's ClusterRole, bound to upstream's ServiceAccount in the standalone overlay's namespace, and the empty
  # Secret the cert rotator fills (the ClusterRole may get/update Secrets, not create them).
  kubectl apply --server-side --force-conflicts --field-manager=lab-training-operator -f "$SHARE/rbac/role.yaml" >/dev/null
  kubectl apply --server-side --force-conflicts --field-manager=lab-training-operator -f - >/dev/null <<EOF
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
metadata: {name: training-operator}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: training-operator}
subjects:
- {kind: ServiceAccount, name: $SA, namespace: $NS}
EOF
  kubectl -n "$NS" get secret "$SECRET" >/dev/null 2>&1 || kubectl -n "$NS" create secret generic "$SECRET" >/dev/null
  sa_kubeconfig "$NS" "$SA" "$STATE/training-operator.kubeconfig"
}

private_cert_dir() { # command... — run it with $STATE/certs mounted at the operator's fixed certDir, for it alone
  local as_root=(); [ "$(id -u)" = 0 ] || as_root=(--map-root-user)
  mkdir -p "$CERT_PATH" "$STATE/certs"
  # shellcheck disable=SC2016 # expanded by the inner shell
  exec unshare --mount --propagation private "${as_root[@]}" sh -c 'mount --bind "$0" "$1" && shift && exec "$@"' \
    "$STATE/certs" "$CERT_PATH" "$@"
}

mount_secret() { # the kubelet's part: the Secret's keys as files, once the operator's rotator has written them
  local crt key
  crt=$(kubectl -n "$NS" get secret "$SECRET" -o jsonpath='{.data.tls\.crt}') && [ -n "$crt" ] || return 1
  key=$(kubectl -n "$NS" get secret "$SECRET" -o jsonpath='{.data.tls\.key}') && [ -n "$key" ] || return 1
  (umask 077; printf '%s' "$crt" | base64 -d >"$STATE/certs/tls.crt.new" && printf '%s' "$key" | base64 -d >"$STATE/certs/tls.key.new")
  mv "$STATE/certs/tls.key.new" "$STATE/certs/tls.key"; mv "$STATE/certs/tls.crt.new" "$STATE/certs/tls.crt"
}

register_prometheus() {
  mkdir -p "$LAB_DIR/prometheus/targets"
  printf '[{"targets": ["127.0.0.1:%s"], "labels": {"job": "training-operator"}}]\n' "$METRICS_PORT" \
    >"$LAB_DIR/prometheus/targets/training_operator.json"
}

cmd_up() {
  if v1beta1_variant; then
    # The v1beta1 variant runs no Kueue, so nothing would gate a PyTorchJob: the operator stays off there too.
    log "skipped: LAB_KUEUE_API=v1beta1 runs no Kueue controller"
    return 0
  fi
  [ -x "$BIN" ] || { log "not built: $BIN missing (run: bash lab/lab.sh build training_operator)"; return 1; }
  if proc_alive training_operator && ready; then
    log "already running (pid $(cat "$(proc_pidfile training_operator)"))"; register_prometheus; return 0
  fi
  cmd_down
  rm -rf "$STATE/certs"; mkdir -p "$STATE/certs"
  identity
  : >"$(proc_log training_operator)"
  local schemes=() s; for s in $SCHEMES; do schemes+=("--enable-scheme=$s"); done
  ( export KUBECONFIG="$STATE/training-operator.kubeconfig" MY_POD_NAMESPACE=$NS
    proc_start training_operator bash "$0" _exec "$BIN" --metrics-bind-address="127.0.0.1:$METRICS_PORT" \
      --health-probe-bind-address="127.0.0.1:$HEALTH_PORT" --webhook-server-port="$WEBHOOK_PORT" \
      --leader-elect=false "${schemes[@]}" )
  proc_wait training_operator "its certificate in Secret $NS/$SECRET" 60 mount_secret || { cmd_down; return 1; }
  proc_wait training_operator "readyz on 127.0.0.1:$HEALTH_PORT" 90 ready || { cmd_down; return 1; }
  register_prometheus
  log "training operator $TRAINING_OPERATOR_VERSION up (pid $(cat "$(proc_pidfile training_operator)"), as system:serviceaccount:$NS:$SA, metrics 127.0.0.1:$METRICS_PORT)"
}

cmd_down() { operator_down training_operator; }
cmd_status() { job_operator_status training_operator "$TRAINING_OPERATOR_VERSION"; }

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  _exec) shift; private_cert_dir "$@" ;;  # internal: the detached process itself (started by proc_start)
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
