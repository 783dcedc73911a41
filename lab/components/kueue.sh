#!/usr/bin/env bash
# The real Kueue controller manager (built by lab/build/kueue.sh), run out of cluster against the lab.
#
#   kueue.sh up       start (idempotent), register the webhooks, the Prometheus scrape job
#   kueue.sh down     remove the webhook configurations FIRST (they fail closed), then stop Kueue
#   kueue.sh status   one line "kueue: healthy|unhealthy (...)"; non-zero exit when unhealthy
#   kueue.sh sync     restart Kueue now if the role's ConfigMap changed (the watcher does it every 2 s)
#
# The Configuration is the COLLECTION'S (issue 11): the lab's Kueue runs controller_manager_config.yaml from the
# ConfigMap that the kueue role's Helm release wrote (LAB_KUEUE_CONFIGMAP, default gpuaas-kueue/
# gpuaas-kueue-manager-config: release and namespace of playbooks/inventory/lab). When it is missing, `up` first runs
# the collection's install path for Kueue (lab/components/kueue/install.yml = role gpuaas.platform.kueue with the lab
# inventory). lab/components/kueue/config.py overlays only lab plumbing (ports, certificate, webhook host, no
# leader election, no internal cert management, no visibility API server: docs/lab.md lists them). A watcher
# process (pid file kueue-config-watch.pid) restarts Kueue when the ConfigMap changes; $LAB_DIR/kueue/config.sha256
# holds the sha256 of the role's config Kueue runs now (tests wait on it).
#
# On the OpenShift-flavoured lab (LAB_FLAVOR=openshift: the variant lab) the collection installs Kueue the OpenShift
# way (issue 23): `up` runs the same install.yml on its OLM path (Subscriptions of the cert-manager and Red Hat Kueue
# operators, then the operand kueue.openshift.io/v1 Kueue `cluster`) while the OLM SIMULATOR
# (lab/simulators/olm_simulator.py, for that run only) answers the Subscriptions; the Kueue operator SIMULATOR
# (lab/simulators/kueue_operator_simulator.py, process kueue-operator-simulator, running as long as Kueue) translates
# the operand into ConfigMap openshift-kueue-operator/kueue-manager-config as the operator does, and this real Kueue
# runs that ConfigMap like any other (LAB_KUEUE_CONFIGMAP's default on that flavour).
#
# Identity: Kueue runs as system:serviceaccount:kueue-system:kueue-controller-manager (a token of that
# ServiceAccount; bound to cluster-admin in the lab), the identity Kueue has on a cluster installed by the chart,
# which the tenants' admission policy trusts to lift its admission gate; on the OpenShift flavour as
# system:serviceaccount:openshift-kueue-operator:kueue-controller-manager, the Red Hat operator's operand identity.
# A new Configuration Kueue does not start with is logged and the last good one runs again (config.sha256 keeps
# naming it), so an operand a test writes cannot leave the lab behind Kueue's fail-closed webhooks.
#
# Called by lab/lab.sh with LAB_DIR, LAB_CACHE, LAB_PKI, LAB_BIN, KUBECONFIG (this component's own
# cluster-admin identity, user lab:kueue) and the *_VERSION variables.
#
# Out-of-cluster set-up (the way controller-runtime's envtest does it):
# - the serving certificate for 127.0.0.1 is signed by the lab CA; Kueue's internal cert management is off;
# - the webhook configurations from the Kueue module are rewritten to `url: https://127.0.0.1:9443/...`
#   (lab/components/kueue/webhooks.py) and deleted again before Kueue stops;
# - Kueue hard-codes /etc/kueue/metrics/certs for its metrics certificate when internal cert management is
#   off: Kueue runs in a private mount namespace (unshare -m, we are root) where this lab's certificate
#   directory is bind-mounted on that path, so two labs side by side (LAB_PORT_OFFSET) each serve their own
#   certificate and nothing on the host changes but an empty mount-point directory;
# - Kueue's metrics endpoint is always HTTPS with TokenReview authorization: Prometheus scrapes it with the
#   token of ServiceAccount <Kueue's namespace>/lab-prometheus (ClusterRole lab-metrics-reader: GET /metrics).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
: "${LAB_DIR:?}" "${LAB_CACHE:?}" "${LAB_PKI:?}" "${KUBECONFIG:?}" "${KUEUE_VERSION:?}"
LAB_BIN=${LAB_BIN:-$LAB_DIR/bin}
COMPONENT=kueue
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
source "$HERE/lib.sh"
BIN=$LAB_CACHE/kueue-$KUEUE_VERSION/bin/kueue
SHARE=$LAB_CACHE/kueue-$KUEUE_VERSION/share
STATE=$LAB_DIR/kueue
OFF=${LAB_PORT_OFFSET:-0}  # lab.sh moves every port by LAB_PORT_OFFSET (a second lab beside the first)
WEBHOOK_PORT=$((9443 + OFF)) METRICS_PORT=$((8080 + OFF)) HEALTH_PORT=$((8081 + OFF))
METRICS_CERT_DIR=/etc/kueue/metrics/certs
if [ "${LAB_FLAVOR:-kubernetes}" = openshift ]; then
  # where the Red Hat operator runs Kueue and writes its ConfigMap (the kueue role's namespace on OpenShift)
  KUEUE_NS=openshift-kueue-operator
  CONFIGMAP=${LAB_KUEUE_CONFIGMAP:-$KUEUE_NS/kueue-manager-config}
else
  KUEUE_NS=kueue-system
  CONFIGMAP=${LAB_KUEUE_CONFIGMAP:-gpuaas-kueue/gpuaas-kueue-manager-config}
fi
CM_NS=${CONFIGMAP%%/*} CM_NAME=${CONFIGMAP##*/}
KUEUE_SA=kueue-controller-manager
WEBHOOK_CONFIGS="mutatingwebhookconfiguration/kueue-mutating-webhook-configuration validatingwebhookconfiguration/kueue-validating-webhook-configuration"

openshift_flavour() { [ "${LAB_FLAVOR:-kubernetes}" = openshift ]; }

make_certs() {
  serving_cert "$STATE/certs" kueue.lab "IP:127.0.0.1,DNS:localhost,DNS:kueue-webhook-service.$KUEUE_NS.svc" serverAuth
}

metrics_cert_mountpoint() {
  # An older lab version left a symlink here; the mount point must be a real (empty) directory.
  if [ -L "$METRICS_CERT_DIR" ]; then rm -f "$METRICS_CERT_DIR"; fi
  mkdir -p "$METRICS_CERT_DIR"
}

apply_cluster_objects() {
  kubectl apply --server-side --force-conflicts --field-manager=lab-kueue -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: $KUEUE_NS}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: lab-prometheus, namespace: $KUEUE_NS}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: lab-metrics-reader}
rules:
- nonResourceURLs: [/metrics]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: lab-prometheus-metrics-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: lab-metrics-reader}
subjects:
- {kind: ServiceAccount, name: lab-prometheus, namespace: $KUEUE_NS}
EOF
}

register_prometheus() {
  kubectl -n "$KUEUE_NS" create token lab-prometheus --duration=8760h >"$STATE/prometheus.token"
  mkdir -p "$LAB_DIR/prometheus/scrape.d"
  cat >"$LAB_DIR/prometheus/scrape.d/kueue.yml" <<EOF
- job_name: kueue
  scheme: https
  tls_config: {ca_file: '$LAB_PKI/ca.crt'}
  authorization: {type: Bearer, credentials_file: '$STATE/prometheus.token'}
  static_configs: [{targets: ['127.0.0.1:$METRICS_PORT']}]
EOF
}

remove_webhooks() {
  # shellcheck disable=SC2086
  kubectl delete --ignore-not-found --wait=false $WEBHOOK_CONFIGS >/dev/null 2>&1 || true
}

kueue_identity() {
  # Kueue's own ServiceAccount (lab plumbing: bound to cluster-admin; a real cluster uses the chart's ClusterRoles)
  kubectl apply --server-side --force-conflicts --field-manager=lab-kueue -f - >/dev/null <<EOF
apiVersion: v1
kind: ServiceAccount
metadata: {name: $KUEUE_SA, namespace: $KUEUE_NS}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: lab-kueue-controller-manager}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects:
- {kind: ServiceAccount, name: $KUEUE_SA, namespace: $KUEUE_NS}
EOF
  sa_kubeconfig "$KUEUE_NS" "$KUEUE_SA" "$STATE/kueue.kubeconfig"
}

bootstrap_install() {
  if openshift_flavour; then bootstrap_openshift; return; fi
  log "no ConfigMap $CONFIGMAP yet: installing Kueue with the collection (role gpuaas.platform.kueue, lab inventory)"
  run_collection_playbook "$HERE/kueue/install.yml" kueue-bootstrap
}

bootstrap_openshift() {
  # The Kueue operator SIMULATOR (already running) turns the operand into the ConfigMap.
  log "no ConfigMap $CONFIGMAP yet: installing Kueue with the collection's OLM path (role gpuaas.platform.kueue, lab inventory, OLM SIMULATOR)"
  run_olm_bootstrap kueue "$HERE/kueue/install.yml" kueue-operator-simulator \
    "the Kueue operator SIMULATOR to write ConfigMap $CONFIGMAP" \
    kubectl -n "$CM_NS" get configmap "$CM_NAME" -o name
}

start_operator_simulator() {
  # SIMULATOR of the Red Hat Kueue operator's translation (operand -> ConfigMap); runs as long as Kueue does
  proc_alive kueue-operator-simulator && return 0
  : >"$(proc_log kueue-operator-simulator)"
  proc_start kueue-operator-simulator "$PY" "$LIB_ROOT/lab/simulators/kueue_operator_simulator.py" \
    --kubeconfig "$KUBECONFIG" --namespace "$KUEUE_NS" --interval 1
}

render_config() { # writes $STATE/config.yaml and $STATE/config.sha256.next
  kubectl -n "$CM_NS" get configmap "$CM_NAME" -o json >"$STATE/configmap.json" 2>/dev/null || return 1
  "$PY" "$HERE/kueue/config.py" "$STATE/configmap.json" "$STATE/config.yaml" "$HEALTH_PORT" "$METRICS_PORT" \
    "$WEBHOOK_PORT" "$STATE/certs" >"$STATE/config.sha256.next"
}

start_kueue() {
  # setsid, unshare and sh all exec: the pid recorded is Kueue's own.
  # shellcheck disable=SC2016
  KUBECONFIG="$STATE/kueue.kubeconfig" proc_start kueue unshare --mount --propagation private -- \
    sh -c 'mount --bind "$1" "$2" && exec "$3" --config="$4" --zap-log-level=info' \
    sh "$STATE/certs" "$METRICS_CERT_DIR" "$BIN" "$STATE/config.yaml"
  proc_wait kueue "readyz on 127.0.0.1:$HEALTH_PORT" 90 ready || return 1
  proc_wait kueue "the webhook server on 127.0.0.1:$WEBHOOK_PORT" 30 \
    curl -s -o /dev/null --cacert "$LAB_PKI/ca.crt" "https://127.0.0.1:$WEBHOOK_PORT/" || return 1
  mv "$STATE/config.sha256.next" "$STATE/config.sha256"
  cp "$STATE/config.yaml" "$STATE/config.good.yaml"
}

cmd_sync() { # restart Kueue when the role's ConfigMap changed; no-op otherwise
  # cheap first look (one kubectl, no Python every 2 s on a shared machine): the ConfigMap's resourceVersion
  local rv; rv=$(kubectl -n "$CM_NS" get configmap "$CM_NAME" -o jsonpath='{.metadata.resourceVersion}' 2>/dev/null || true)
  if [ -n "$rv" ] && [ "$rv" = "$(cat "$STATE/configmap.rv" 2>/dev/null)" ] && proc_alive kueue; then return 0; fi
  render_config || { log "ConfigMap $CONFIGMAP is gone: Kueue keeps its last Configuration"; return 0; }
  echo "$rv" >"$STATE/configmap.rv"
  if cmp -s "$STATE/config.sha256.next" "$STATE/config.sha256" 2>/dev/null && proc_alive kueue; then return 0; fi
  log "ConfigMap $CONFIGMAP changed ($(cut -c1-12 "$STATE/config.sha256.next")): restarting Kueue"
  proc_stop kueue
  if ! start_kueue; then
    # A Configuration this Kueue refuses (e.g. an operand test's framework it does not know) would leave the lab
    # without Kueue behind its fail-closed webhooks: the last good one runs again, config.sha256 still names it.
    log "Kueue did not start with the new Configuration (log: $(proc_log kueue)): back to the last good one"
    proc_stop kueue
    if [ -f "$STATE/config.good.yaml" ]; then
      cp "$STATE/config.good.yaml" "$STATE/config.yaml"; cp "$STATE/config.sha256" "$STATE/config.sha256.next"
      start_kueue || log "Kueue did not come back with the last good Configuration either"
    fi
    return 1
  fi
  log "Kueue restarted (pid $(cat "$(proc_pidfile kueue)"))"
}

cmd_watch() { # the watcher loop (started by up, stopped by down)
  while true; do
    sleep 2
    cmd_sync >>"$LAB_DIR/logs/kueue-config-watch.log" 2>&1 || true
  done
}

cmd_up() {
  if v1beta1_variant; then
    log "skipped: Kueue $KUEUE_VERSION needs its own v1beta2 CRDs, but LAB_KUEUE_API=v1beta1 loads v1beta1-only CRDs"
    return 0
  fi
  [ -x "$BIN" ] || { log "not built: $BIN missing (run: bash lab/lab.sh build)"; return 1; }
  if proc_alive kueue && ready && { ! openshift_flavour || proc_alive kueue-operator-simulator; }; then
    log "already running (pid $(cat "$(proc_pidfile kueue)"))"; register_prometheus; return 0
  fi
  cmd_down
  mkdir -p "$STATE" "$LAB_DIR/logs" "$LAB_DIR/pids"
  : >"$(proc_log kueue)"
  make_certs
  metrics_cert_mountpoint
  apply_cluster_objects
  kueue_identity
  if openshift_flavour; then start_operator_simulator; fi
  if ! kubectl -n "$CM_NS" get configmap "$CM_NAME" -o name >/dev/null 2>&1; then bootstrap_install || { cmd_down; return 1; }; fi
  render_config || { log "cannot read ConfigMap $CONFIGMAP after the install"; cmd_down; return 1; }
  start_kueue || { cmd_down; return 1; }
  "$PY" "$HERE/kueue/webhooks.py" "$SHARE/webhook/manifests.yaml" "$LAB_PKI/ca.crt" "$WEBHOOK_PORT" >"$STATE/webhooks.yaml"
  kubectl apply --server-side --force-conflicts --field-manager=lab-kueue -f "$STATE/webhooks.yaml" >/dev/null
  # Prove the webhooks answer through the apiserver: a server-side dry run goes through Kueue's
  # mutating and validating webhooks for ResourceFlavor.
  proc_wait kueue "a dry-run ResourceFlavor through Kueue's webhooks" 30 webhook_roundtrip || { cmd_down; return 1; }
  register_prometheus
  setsid bash "$HERE/kueue.sh" watch >/dev/null 2>&1 </dev/null &
  echo $! >"$(proc_pidfile kueue-config-watch)"
  log "Kueue $KUEUE_VERSION up (pid $(cat "$(proc_pidfile kueue)"), as system:serviceaccount:$KUEUE_NS:$KUEUE_SA, Configuration of ConfigMap $CONFIGMAP, webhooks https://127.0.0.1:$WEBHOOK_PORT)"
}

webhook_roundtrip() {
  kubectl create --dry-run=server -o name -f - <<'EOF'
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: lab-kueue-webhook-probe}
EOF
}

cmd_down() {
  proc_stop_group kueue-config-watch
  # Webhooks first: they fail closed, so with Kueue gone every Job/Pod creation would be refused.
  if [ -f "$KUBECONFIG" ]; then remove_webhooks; fi
  proc_stop kueue
  proc_stop kueue-operator-simulator
  proc_stop kueue-olm-simulator
  rm -f "$LAB_DIR/prometheus/scrape.d/kueue.yml"
}

cmd_status() {
  if v1beta1_variant; then echo "kueue: disabled (LAB_KUEUE_API=v1beta1: Kueue $KUEUE_VERSION needs v1beta2 CRDs)"; return 0; fi
  if ! proc_alive kueue; then echo "kueue: unhealthy (not running)"; return 1; fi
  if ! ready; then echo "kueue: unhealthy (readyz on 127.0.0.1:$HEALTH_PORT fails)"; return 1; fi
  if openshift_flavour && ! proc_alive kueue-operator-simulator; then echo "kueue: unhealthy (the Kueue operator SIMULATOR is not running)"; return 1; fi
  local n; n=$(kubectl get mutatingwebhookconfiguration kueue-mutating-webhook-configuration -o name 2>/dev/null | wc -l)
  if [ "$n" != 1 ]; then echo "kueue: unhealthy (webhook configurations missing)"; return 1; fi
  echo "kueue: healthy ($KUEUE_VERSION, pid $(cat "$(proc_pidfile kueue)"), as system:serviceaccount:$KUEUE_NS:$KUEUE_SA, config of $CONFIGMAP sha256 $(cut -c1-12 "$STATE/config.sha256" 2>/dev/null), webhooks 127.0.0.1:$WEBHOOK_PORT, metrics 127.0.0.1:$METRICS_PORT)"
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  sync) cmd_sync ;;
  watch) cmd_watch ;;
  *) echo "usage: $0 up|down|status|sync" >&2; exit 2 ;;
esac
