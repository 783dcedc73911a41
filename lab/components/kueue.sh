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
# Identity: Kueue runs as system:serviceaccount:kueue-system:kueue-controller-manager (a token of that
# ServiceAccount; bound to cluster-admin in the lab), the identity Kueue has on a cluster installed by the chart,
# which the tenants' admission policy trusts to lift its admission gate.
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
#   token of ServiceAccount kueue-system/lab-prometheus (ClusterRole lab-metrics-reader: GET /metrics).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
: "${LAB_DIR:?}" "${LAB_CACHE:?}" "${LAB_PKI:?}" "${KUBECONFIG:?}" "${KUEUE_VERSION:?}"
LAB_BIN=${LAB_BIN:-$LAB_DIR/bin}
PY=${LAB_PYTHON:-$ROOT/.venv/bin/python}
BIN=$LAB_CACHE/kueue-$KUEUE_VERSION/bin/kueue
SHARE=$LAB_CACHE/kueue-$KUEUE_VERSION/share
STATE=$LAB_DIR/kueue
PIDFILE=$LAB_DIR/pids/kueue.pid
LOG=$LAB_DIR/logs/kueue.log
OFF=${LAB_PORT_OFFSET:-0}  # lab.sh moves every port by LAB_PORT_OFFSET (a second lab beside the first)
WEBHOOK_PORT=$((9443 + OFF)) METRICS_PORT=$((8080 + OFF)) HEALTH_PORT=$((8081 + OFF))
METRICS_CERT_DIR=/etc/kueue/metrics/certs
CONFIGMAP=${LAB_KUEUE_CONFIGMAP:-gpuaas-kueue/gpuaas-kueue-manager-config}
CM_NS=${CONFIGMAP%%/*} CM_NAME=${CONFIGMAP##*/}
WATCH_PIDFILE=$LAB_DIR/pids/kueue-config-watch.pid
KUEUE_SA=kueue-controller-manager
WEBHOOK_CONFIGS="mutatingwebhookconfiguration/kueue-mutating-webhook-configuration validatingwebhookconfiguration/kueue-validating-webhook-configuration"

log() { printf '[kueue] %s\n' "$*" >&2; }
kubectl() { "$LAB_BIN/kubectl" "$@"; }
alive() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }
ready() { curl -sf "http://127.0.0.1:$HEALTH_PORT/readyz" >/dev/null; }
wait_for() { # what seconds command...
  local what=$1 end=$(( $(date +%s) + $2 )); shift 2
  until "$@" >/dev/null 2>&1; do
    if ! alive; then log "Kueue exited while waiting for $what; last log lines:"; tail -5 "$LOG" >&2; return 1; fi
    [ "$(date +%s)" -lt "$end" ] || { log "timed out waiting for $what (log: $LOG)"; tail -20 "$LOG" >&2; return 1; }
    sleep 0.5
  done
}

v1beta1_variant() { [ "${LAB_KUEUE_API:-v1beta2}" = v1beta1 ]; }

make_certs() {
  mkdir -p "$STATE/certs"
  # reuse the pair only while the lab CA that signed it is still the lab CA (a new .lab/pki means a new CA)
  if [ -f "$STATE/certs/tls.crt" ] && openssl verify -CAfile "$LAB_PKI/ca.crt" "$STATE/certs/tls.crt" >/dev/null 2>&1; then return 0; fi
  local ext="$STATE/certs/ext.cnf"
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kueue-webhook-service.kueue-system.svc\nauthorityKeyIdentifier=keyid,issuer\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' >"$ext"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$STATE/certs/tls.key" -subj "/CN=kueue.lab" -out "$STATE/certs/tls.csr" 2>/dev/null
  openssl x509 -req -in "$STATE/certs/tls.csr" -CA "$LAB_PKI/ca.crt" -CAkey "$LAB_PKI/ca.key" -CAcreateserial \
    -CAserial "$STATE/certs/ca.srl" -days 3650 -extfile "$ext" -out "$STATE/certs/tls.crt" 2>/dev/null
  rm -f "$STATE/certs/tls.csr" "$ext"
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
metadata: {name: kueue-system}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: lab-prometheus, namespace: kueue-system}
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
- {kind: ServiceAccount, name: lab-prometheus, namespace: kueue-system}
EOF
}

register_prometheus() {
  kubectl -n kueue-system create token lab-prometheus --duration=8760h >"$STATE/prometheus.token"
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
metadata: {name: $KUEUE_SA, namespace: kueue-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: lab-kueue-controller-manager}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects:
- {kind: ServiceAccount, name: $KUEUE_SA, namespace: kueue-system}
EOF
  local token server ca
  token=$(kubectl -n kueue-system create token "$KUEUE_SA" --duration=8760h)
  server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  ca=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.certificate-authority}')
  (
    umask 077
    cat >"$STATE/kueue.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: lab, cluster: {server: '$server', certificate-authority: '$ca'}}]
users: [{name: kueue, user: {token: '$token'}}]
contexts: [{name: kueue, context: {cluster: lab, user: kueue}}]
current-context: kueue
EOF
  )
}

bootstrap_install() {
  # The collection's install path for Kueue, with the lab inventory (no network: local charts, lab post-renderer).
  local coll="$LAB_DIR/collections/ansible_collections/gpuaas"
  mkdir -p "$coll"; ln -sfn "$ROOT" "$coll/platform"
  # The lab has no OLM catalog: on the OpenShift-flavoured lab the collection's Helm path installs it (the OLM path
  # is tested against the OLM SIMULATOR, tests/integration/test_install.py). docs/lab.md lists this overlay.
  local platform_args=()
  [ "${LAB_FLAVOR:-kubernetes}" = openshift ] && platform_args=(-e gpuaas_platform=kubernetes)
  log "no ConfigMap $CONFIGMAP yet: installing Kueue with the collection (role gpuaas.platform.kueue, lab inventory)"
  ( cd "$ROOT" && PATH="$LAB_BIN:$(dirname "$PY"):$PATH" ANSIBLE_COLLECTIONS_PATH="$LAB_DIR/collections" \
      LAB_DIR="$LAB_DIR" KUBECONFIG="$LAB_DIR/kubeconfig" K8S_AUTH_KUBECONFIG="$LAB_DIR/kubeconfig" \
      "$(dirname "$PY")/ansible-playbook" -i "$ROOT/playbooks/inventory/lab" "$HERE/kueue/install.yml" \
      -e gpuaas_helm_post_renderer="$ROOT/tests/integration/files/install/lab_post_renderer.sh" \
      "${platform_args[@]}" \
      >"$LAB_DIR/logs/kueue-bootstrap.log" 2>&1 ) \
    || { log "bootstrap install failed (log: $LAB_DIR/logs/kueue-bootstrap.log)"; tail -20 "$LAB_DIR/logs/kueue-bootstrap.log" >&2; return 1; }
}

render_config() { # writes $STATE/config.yaml and $STATE/config.sha256.next
  kubectl -n "$CM_NS" get configmap "$CM_NAME" -o json >"$STATE/configmap.json" 2>/dev/null || return 1
  "$PY" "$HERE/kueue/config.py" "$STATE/configmap.json" "$STATE/config.yaml" "$HEALTH_PORT" "$METRICS_PORT" \
    "$WEBHOOK_PORT" "$STATE/certs" >"$STATE/config.sha256.next"
}

start_kueue() {
  # setsid, unshare and sh all exec: the pid recorded is Kueue's own.
  # shellcheck disable=SC2016
  KUBECONFIG="$STATE/kueue.kubeconfig" setsid unshare --mount --propagation private -- sh -c 'mount --bind "$1" "$2" && exec "$3" --config="$4" --zap-log-level=info' \
    sh "$STATE/certs" "$METRICS_CERT_DIR" "$BIN" "$STATE/config.yaml" >>"$LOG" 2>&1 </dev/null &
  echo $! >"$PIDFILE"
  wait_for "readyz on 127.0.0.1:$HEALTH_PORT" 90 ready || return 1
  wait_for "the webhook server on 127.0.0.1:$WEBHOOK_PORT" 30 \
    curl -s -o /dev/null --cacert "$LAB_PKI/ca.crt" "https://127.0.0.1:$WEBHOOK_PORT/" || return 1
  mv "$STATE/config.sha256.next" "$STATE/config.sha256"
}

stop_kueue() {
  if [ -f "$PIDFILE" ]; then
    local pid; pid=$(cat "$PIDFILE")
    kill -TERM "$pid" 2>/dev/null || true
    local _i; for _i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$PIDFILE"
  fi
}

cmd_sync() { # restart Kueue when the role's ConfigMap changed; no-op otherwise
  render_config || { log "ConfigMap $CONFIGMAP is gone: Kueue keeps its last Configuration"; return 0; }
  if cmp -s "$STATE/config.sha256.next" "$STATE/config.sha256" 2>/dev/null && alive; then return 0; fi
  log "ConfigMap $CONFIGMAP changed ($(cut -c1-12 "$STATE/config.sha256.next")): restarting Kueue"
  stop_kueue
  start_kueue || { log "Kueue did not come back with the new Configuration (log: $LOG)"; return 1; }
  log "Kueue restarted (pid $(cat "$PIDFILE"))"
}

cmd_watch() { # the watcher loop (started by up, stopped by down)
  while true; do
    sleep 2
    cmd_sync >>"$LAB_DIR/logs/kueue-config-watch.log" 2>&1 || true
  done
}

stop_watcher() {
  # the watcher is a session leader (setsid): end its whole group, an in-flight sync included
  if [ -f "$WATCH_PIDFILE" ]; then kill -TERM -- "-$(cat "$WATCH_PIDFILE")" 2>/dev/null || kill -TERM "$(cat "$WATCH_PIDFILE")" 2>/dev/null || true; rm -f "$WATCH_PIDFILE"; fi
}

cmd_up() {
  if v1beta1_variant; then
    log "skipped: Kueue $KUEUE_VERSION needs its own v1beta2 CRDs, but LAB_KUEUE_API=v1beta1 loads v1beta1-only CRDs"
    return 0
  fi
  [ -x "$BIN" ] || { log "not built: $BIN missing (run: bash lab/lab.sh build)"; return 1; }
  if alive && ready; then log "already running (pid $(cat "$PIDFILE"))"; register_prometheus; return 0; fi
  cmd_down
  mkdir -p "$STATE" "$LAB_DIR/logs" "$LAB_DIR/pids"
  : >"$LOG"
  make_certs
  metrics_cert_mountpoint
  apply_cluster_objects
  kueue_identity
  if ! kubectl -n "$CM_NS" get configmap "$CM_NAME" -o name >/dev/null 2>&1; then bootstrap_install || return 1; fi
  render_config || { log "cannot read ConfigMap $CONFIGMAP after the install"; return 1; }
  start_kueue || { cmd_down; return 1; }
  "$PY" "$HERE/kueue/webhooks.py" "$SHARE/webhook/manifests.yaml" "$LAB_PKI/ca.crt" "$WEBHOOK_PORT" >"$STATE/webhooks.yaml"
  kubectl apply --server-side --force-conflicts --field-manager=lab-kueue -f "$STATE/webhooks.yaml" >/dev/null
  # Prove the webhooks answer through the apiserver: a server-side dry run goes through Kueue's
  # mutating and validating webhooks for ResourceFlavor.
  wait_for "a dry-run ResourceFlavor through Kueue's webhooks" 30 webhook_roundtrip || { cmd_down; return 1; }
  register_prometheus
  setsid bash "$HERE/kueue.sh" watch >/dev/null 2>&1 </dev/null &
  echo $! >"$WATCH_PIDFILE"
  log "Kueue $KUEUE_VERSION up (pid $(cat "$PIDFILE"), Configuration of ConfigMap $CONFIGMAP, webhooks https://127.0.0.1:$WEBHOOK_PORT)"
}

webhook_roundtrip() {
  kubectl create --dry-run=server -o name -f - <<'EOF'
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: lab-kueue-webhook-probe}
EOF
}

cmd_down() {
  stop_watcher
  # Webhooks first: they fail closed, so with Kueue gone every Job/Pod creation would be refused.
  if [ -f "$KUBECONFIG" ]; then remove_webhooks; fi
  stop_kueue
  rm -f "$LAB_DIR/prometheus/scrape.d/kueue.yml"
}

cmd_status() {
  if v1beta1_variant; then echo "kueue: disabled (LAB_KUEUE_API=v1beta1: Kueue $KUEUE_VERSION needs v1beta2 CRDs)"; return 0; fi
  if ! alive; then echo "kueue: unhealthy (not running)"; return 1; fi
  if ! ready; then echo "kueue: unhealthy (readyz on 127.0.0.1:$HEALTH_PORT fails)"; return 1; fi
  local n; n=$(kubectl get mutatingwebhookconfiguration kueue-mutating-webhook-configuration -o name 2>/dev/null | wc -l)
  if [ "$n" != 1 ]; then echo "kueue: unhealthy (webhook configurations missing)"; return 1; fi
  echo "kueue: healthy ($KUEUE_VERSION, pid $(cat "$PIDFILE"), config of $CONFIGMAP sha256 $(cut -c1-12 "$STATE/config.sha256" 2>/dev/null), webhooks 127.0.0.1:$WEBHOOK_PORT, metrics 127.0.0.1:$METRICS_PORT)"
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  sync) cmd_sync ;;
  watch) cmd_watch ;;
  *) echo "usage: $0 up|down|status|sync" >&2; exit 2 ;;
esac
