#!/usr/bin/env bash
# The real KEDA operator and metrics apiserver (built by lab/build/keda.sh), run out of cluster.
#
#   keda.sh up       start both (idempotent), register the external metrics APIService
#   keda.sh down     remove the APIService FIRST (an unavailable one breaks discovery and namespace
#                    deletion), then stop both processes
#   keda.sh status   one line "keda: healthy|unhealthy (...)"; non-zero exit when unhealthy
#   keda.sh sync     restart both now if the role's settings changed (the watcher does it every 2 s)
#
# The settings the collection's keda role controls come from the operator Deployment its Helm release wrote
# (LAB_KEDA_DEPLOYMENT, default gpuaas-keda/gpuaas-keda-operator: release, namespace and operator name of
# playbooks/inventory/lab): WATCH_NAMESPACE and the operator's namespace (where it reads ClusterTriggerAuthentication
# Secrets), read by lab/components/keda/settings.py (issue 11). When that Deployment is missing, `up` first runs the
# collection's install path for KEDA (lab/components/keda/install.yml with the lab inventory). A watcher
# (pid file keda-settings-watch.pid) restarts the operator when they change;
# $LAB_DIR/keda/settings.env holds what the running operator uses.
#
# Called by lab/lab.sh with LAB_DIR, LAB_CACHE, LAB_PKI, LAB_BIN, KUBECONFIG (this component's own
# cluster-admin identity, user lab:keda) and the *_VERSION variables.
#
# - One certificate signed by the lab CA (SANs 127.0.0.1, localhost and the in-cluster service names) serves
#   the operator's gRPC metrics service (127.0.0.1:9666, mutual TLS: ca.crt/tls.crt/tls.key in one
#   directory, as KEDA expects) and the metrics apiserver (127.0.0.1:6444); KEDA's own cert rotation is off.
# - The APIService v1beta1.external.metrics.k8s.io points at Service keda/keda-metrics-apiserver of type
#   ExternalName (localhost): the aggregator resolves it to https://localhost:6444 without kube-proxy, and
#   checks the serving certificate for keda-metrics-apiserver.keda.svc.
# - KEDA's admission webhooks are not run (they are optional); the CRDs are loaded by lab.sh.
#
# On the OpenShift-flavoured lab (LAB_FLAVOR=openshift: the variant lab) the collection installs KEDA the OpenShift way
# (issue 23): `up` runs the same install.yml on its OLM path (Subscription of Red Hat's Custom Metrics Autoscaler
# operator, then the operand KedaController `keda` in openshift-keda) while the OLM SIMULATOR
# (lab/simulators/olm_simulator.py, for that run only) answers the Subscription; the Custom Metrics Autoscaler
# operator SIMULATOR (lab/simulators/keda_operator_simulator.py, process keda-operator-simulator, running as long as
# KEDA) translates the operand into ServiceAccount and Deployment openshift-keda/keda-operator as the operator does,
# and this real KEDA runs with that Deployment's settings (LAB_KEDA_DEPLOYMENT's default on that flavour), as
# system:serviceaccount:openshift-keda:keda-operator, the identity the operator gives KEDA (a token of that
# ServiceAccount; bound to cluster-admin in the lab).
set -euo pipefail
: "${LAB_DIR:?}" "${LAB_CACHE:?}" "${LAB_PKI:?}" "${KUBECONFIG:?}" "${KEDA_VERSION:?}"
LAB_BIN=${LAB_BIN:-$LAB_DIR/bin}
BIN=$LAB_CACHE/keda-$KEDA_VERSION/bin
STATE=$LAB_DIR/keda
CERTS=$STATE/certs
OFF=${LAB_PORT_OFFSET:-0}  # lab.sh moves every port by LAB_PORT_OFFSET (a second lab beside the first)
OPERATOR_METRICS=127.0.0.1:$((8082 + OFF)) OPERATOR_HEALTH=127.0.0.1:$((8083 + OFF)) GRPC=127.0.0.1:$((9666 + OFF))
ADAPTER_PORT=$((6444 + OFF)) ADAPTER_METRICS_PORT=$((8084 + OFF))
APISERVICE=v1beta1.external.metrics.k8s.io
HERE=$(cd "$(dirname "$0")" && pwd)
COMPONENT=keda
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
source "$HERE/lib.sh"
openshift_flavour() { [ "${LAB_FLAVOR:-kubernetes}" = openshift ]; }
if openshift_flavour; then
  # what the Custom Metrics Autoscaler operator writes in its namespace (the keda role's namespace on OpenShift)
  DEPLOYMENT=${LAB_KEDA_DEPLOYMENT:-openshift-keda/keda-operator}
else
  DEPLOYMENT=${LAB_KEDA_DEPLOYMENT:-gpuaas-keda/gpuaas-keda-operator}
fi
DEP_NS=${DEPLOYMENT%%/*} DEP_NAME=${DEPLOYMENT##*/}
KEDA_SA=keda-operator  # the ServiceAccount every KEDA Deployment of the operator runs as (resources/keda.yaml)

identity() { if openshift_flavour; then echo "system:serviceaccount:$DEP_NS:$KEDA_SA"; else echo "lab:keda"; fi; }
operator_ready() { curl -sf "http://$OPERATOR_HEALTH/readyz" >/dev/null; }
adapter_serving() { curl -s -o /dev/null --cacert "$LAB_PKI/ca.crt" "https://127.0.0.1:$ADAPTER_PORT/healthz"; }
apiservice_available() {
  [ "$(kubectl get apiservice "$APISERVICE" -o jsonpath='{.status.conditions[?(@.type=="Available")].status}' 2>/dev/null)" = True ]
}

make_certs() {
  mkdir -p "$CERTS"
  cp "$LAB_PKI/ca.crt" "$CERTS/ca.crt"  # KEDA wants ca.crt beside tls.{crt,key} (mutual TLS of its gRPC service)
  local san="IP:127.0.0.1,DNS:localhost" s
  for s in keda-operator keda-metrics-apiserver; do san="$san,DNS:$s,DNS:$s.keda,DNS:$s.keda.svc,DNS:$s.keda.svc.cluster.local"; done
  serving_cert "$CERTS" keda.lab "$san" serverAuth,clientAuth
}

register_apiservice() {
  kubectl apply --server-side --force-conflicts --field-manager=lab-keda -f - >/dev/null <<EOF
apiVersion: v1
kind: Service
metadata: {name: keda-metrics-apiserver, namespace: keda, labels: {lab.gpuaas.io/component: keda}}
spec:
  type: ExternalName
  externalName: localhost
  ports: [{name: https, port: $ADAPTER_PORT, targetPort: $ADAPTER_PORT, protocol: TCP}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: $APISERVICE, labels: {lab.gpuaas.io/component: keda}}
spec:
  group: external.metrics.k8s.io
  version: v1beta1
  service: {name: keda-metrics-apiserver, namespace: keda, port: $ADAPTER_PORT}
  caBundle: $(base64 -w0 <"$LAB_PKI/ca.crt")
  groupPriorityMinimum: 100
  versionPriority: 100
EOF
}

register_prometheus() {
  mkdir -p "$LAB_DIR/prometheus/targets"
  printf '[{"targets": ["%s"], "labels": {"job": "keda-operator"}}, {"targets": ["127.0.0.1:%s"], "labels": {"job": "keda-metrics-apiserver"}}]\n' \
    "$OPERATOR_METRICS" "$ADAPTER_METRICS_PORT" >"$LAB_DIR/prometheus/targets/keda.json"
}

bootstrap_install() {
  if openshift_flavour; then bootstrap_openshift; return; fi
  log "no Deployment $DEPLOYMENT yet: installing KEDA with the collection (role gpuaas.platform.keda, lab inventory)"
  run_collection_playbook "$HERE/keda/install.yml" keda-bootstrap
}

bootstrap_openshift() {
  # The Custom Metrics Autoscaler operator SIMULATOR (already running) turns the KedaController into the Deployment.
  log "no Deployment $DEPLOYMENT yet: installing KEDA with the collection's OLM path (role gpuaas.platform.keda, lab inventory, OLM SIMULATOR)"
  run_olm_bootstrap keda "$HERE/keda/install.yml" keda-operator-simulator \
    "the Custom Metrics Autoscaler operator SIMULATOR to write Deployment $DEPLOYMENT" \
    kubectl -n "$DEP_NS" get deployment "$DEP_NAME" -o name
}

start_operator_simulator() {
  # SIMULATOR of the Custom Metrics Autoscaler operator's translation (KedaController -> Deployment); runs as long as KEDA
  proc_alive keda-operator-simulator && return 0
  : >"$(proc_log keda-operator-simulator)"
  proc_start keda-operator-simulator "$PY" "$LIB_ROOT/lab/simulators/keda_operator_simulator.py" \
    --kubeconfig "$KUBECONFIG" --namespace "$DEP_NS" --keda-version "$KEDA_VERSION" --interval 1
}

keda_identity() { # -> $STATE/keda.kubeconfig: the operator's ServiceAccount (lab plumbing: bound to cluster-admin)
  kubectl apply --server-side --force-conflicts --field-manager=lab-keda -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: lab-keda-operator}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects:
- {kind: ServiceAccount, name: $KEDA_SA, namespace: $DEP_NS}
EOF
  sa_kubeconfig "$DEP_NS" "$KEDA_SA" "$STATE/keda.kubeconfig"
}

run_kubeconfig() { # the identity KEDA runs as: the operator's ServiceAccount on OpenShift, else lab:keda
  if openshift_flavour; then echo "$STATE/keda.kubeconfig"; else echo "$KUBECONFIG"; fi
}

read_settings() { # -> $STATE/settings.env.next
  kubectl -n "$DEP_NS" get deployment "$DEP_NAME" -o json >"$STATE/deployment.json" 2>/dev/null || return 1
  "$PY" "$HERE/keda/settings.py" "$STATE/deployment.json" >"$STATE/settings.env.next"
}

start_operator() {
  # shellcheck disable=SC1091
  source "$STATE/settings.env.next"
  kubectl create namespace "$KEDA_NAMESPACE" >/dev/null 2>&1 || true
  # WATCH_NAMESPACE "" = all namespaces; ClusterTriggerAuthentication Secrets are read in KEDA's namespace.
  ( export WATCH_NAMESPACE KEDA_CLUSTER_OBJECT_NAMESPACE=$KEDA_NAMESPACE POD_NAMESPACE=$KEDA_NAMESPACE
    KUBECONFIG=$(run_kubeconfig) proc_start keda-operator "$BIN/keda" --leader-elect=false --zap-log-level=info --zap-encoder=console \
      --metrics-bind-address="$OPERATOR_METRICS" --health-probe-bind-address="$OPERATOR_HEALTH" \
      --metrics-service-bind-address="$GRPC" --cert-dir="$CERTS" --enable-cert-rotation=false \
      --ca-dir="$CERTS" --enable-webhook-patching=false --enable-apiservice-patching=false )
  proc_wait keda-operator "the operator's readyz on $OPERATOR_HEALTH" 90 operator_ready || return 1
  mv "$STATE/settings.env.next" "$STATE/settings.env"
}

start_adapter() { # the metrics apiserver, with the same settings as the operator
  # shellcheck disable=SC1091
  source "$STATE/settings.env"
  ( export WATCH_NAMESPACE KEDA_CLUSTER_OBJECT_NAMESPACE=$KEDA_NAMESPACE POD_NAMESPACE=$KEDA_NAMESPACE
    local kubeconfig; kubeconfig=$(run_kubeconfig)
    KUBECONFIG=$kubeconfig proc_start keda-metrics-apiserver "$BIN/keda-adapter" --secure-port="$ADAPTER_PORT" --bind-address=127.0.0.1 \
      --cert-dir="$CERTS" --tls-cert-file="$CERTS/tls.crt" --tls-private-key-file="$CERTS/tls.key" \
      --metrics-service-address="$GRPC" --port="$ADAPTER_METRICS_PORT" \
      --lister-kubeconfig="$kubeconfig" --authentication-kubeconfig="$kubeconfig" --authorization-kubeconfig="$kubeconfig" \
      --zap-log-level=info --zap-encoder=console )
  proc_wait keda-metrics-apiserver "the metrics apiserver on 127.0.0.1:$ADAPTER_PORT" 90 adapter_serving
}

cmd_sync() { # restart the operator when the role's settings changed
  read_settings || { log "Deployment $DEPLOYMENT is gone: KEDA keeps its last settings"; return 0; }
  if cmp -s "$STATE/settings.env.next" "$STATE/settings.env" 2>/dev/null && proc_alive keda-operator; then return 0; fi
  log "KEDA settings of $DEPLOYMENT changed ($(tr '\n' ' ' <"$STATE/settings.env.next")): restarting the operator and the metrics apiserver"
  proc_stop keda-metrics-apiserver
  proc_stop keda-operator
  start_operator || { log "the KEDA operator did not come back (log: $LAB_DIR/logs/keda-operator.log)"; return 1; }
  start_adapter || { log "the KEDA metrics apiserver did not come back (log: $LAB_DIR/logs/keda-metrics-apiserver.log)"; return 1; }
}

cmd_watch() {
  while true; do
    sleep 2
    cmd_sync >>"$LAB_DIR/logs/keda-settings-watch.log" 2>&1 || true
  done
}

cmd_up() {
  if [ ! -x "$BIN/keda" ] || [ ! -x "$BIN/keda-adapter" ]; then
    log "not built: $BIN/keda{,-adapter} missing (run: bash lab/lab.sh build)"; return 1
  fi
  if proc_alive keda-operator && proc_alive keda-metrics-apiserver && operator_ready && apiservice_available \
      && { ! openshift_flavour || proc_alive keda-operator-simulator; }; then
    log "already running"; register_prometheus; return 0
  fi
  cmd_down
  mkdir -p "$STATE" "$LAB_DIR/pids"
  make_certs
  kubectl apply --server-side --field-manager=lab-keda -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Namespace
metadata: {name: keda}
EOF
  if openshift_flavour; then start_operator_simulator; fi
  if ! kubectl -n "$DEP_NS" get deployment "$DEP_NAME" -o name >/dev/null 2>&1; then bootstrap_install || { cmd_down; return 1; }; fi
  read_settings || { log "cannot read Deployment $DEPLOYMENT after the install"; cmd_down; return 1; }
  if openshift_flavour; then keda_identity; fi
  start_operator || { cmd_down; return 1; }
  start_adapter || { cmd_down; return 1; }
  register_apiservice
  proc_wait keda-metrics-apiserver "APIService $APISERVICE to be Available" 60 apiservice_available || { cmd_down; return 1; }
  register_prometheus
  setsid bash "$HERE/keda.sh" watch >/dev/null 2>&1 </dev/null &
  echo $! >"$(proc_pidfile keda-settings-watch)"
  log "KEDA $KEDA_VERSION up (operator pid $(cat "$(proc_pidfile keda-operator)"), as $(identity), settings of $DEPLOYMENT: $(tr '\n' ' ' <"$STATE/settings.env"), metrics apiserver pid $(cat "$(proc_pidfile keda-metrics-apiserver)"), APIService $APISERVICE Available)"
}

cmd_down() {
  proc_stop_group keda-settings-watch
  if [ -f "$KUBECONFIG" ]; then
    kubectl delete --ignore-not-found --wait=false apiservice "$APISERVICE" >/dev/null 2>&1 || true
  fi
  proc_stop keda-metrics-apiserver
  proc_stop keda-operator
  proc_stop keda-operator-simulator
  proc_stop keda-olm-simulator
  rm -f "$LAB_DIR/prometheus/targets/keda.json"
}

cmd_status() {
  local bad=""
  proc_alive keda-operator || bad="$bad operator not running;"
  proc_alive keda-metrics-apiserver || bad="$bad metrics apiserver not running;"
  if openshift_flavour && ! proc_alive keda-operator-simulator; then bad="$bad the Custom Metrics Autoscaler operator SIMULATOR is not running;"; fi
  [ -n "$bad" ] || operator_ready || bad="$bad operator readyz fails;"
  [ -n "$bad" ] || apiservice_available || bad="$bad APIService $APISERVICE not Available;"
  if [ -n "$bad" ]; then bad=${bad# }; echo "keda: unhealthy (${bad%;})"; return 1; fi
  echo "keda: healthy ($KEDA_VERSION, as $(identity), operator gRPC $GRPC, metrics apiserver 127.0.0.1:$ADAPTER_PORT, APIService Available)"
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  sync) cmd_sync ;;
  watch) cmd_watch ;;
  *) echo "usage: $0 up|down|status|sync" >&2; exit 2 ;;
esac
