# shellcheck shell=bash
# Plumbing shared by the lab's controller components (lab/components/{kueue,keda,kuberay}.sh), sourced by each:
# processes (start detached, liveness, stop, wait with the log's tail), a ServiceAccount-token kubeconfig, a serving
# certificate signed by the lab CA, and the collection's own install path run as the lab bootstrap.
#
# The sourcing script sets COMPONENT (its name: the log prefix) and has LAB_DIR, LAB_BIN, KUBECONFIG (its own
# cluster-admin identity, user lab:<component>) from lab/lab.sh. Process NAMEs are pid/log file names:
# $LAB_DIR/pids/NAME.pid, $LAB_DIR/logs/NAME.log.
LIB_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LIB_ROOT=$(cd "$LIB_HERE/../.." && pwd)
PY=${LAB_PYTHON:-$LIB_ROOT/.venv/bin/python}

log() { printf '[%s] %s\n' "${COMPONENT:?}" "$*" >&2; }
kubectl() { "${LAB_BIN:-$LAB_DIR/bin}/kubectl" "$@"; }

proc_pidfile() { echo "$LAB_DIR/pids/$1.pid"; }
proc_log() { echo "$LAB_DIR/logs/$1.log"; }
proc_alive() { local f; f=$(proc_pidfile "$1"); [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null; }

proc_start() { # NAME command... — detached (setsid execs: the pid recorded is the command's own); log appended
  local name=$1; shift
  mkdir -p "$LAB_DIR/logs" "$LAB_DIR/pids"
  setsid "$@" >>"$(proc_log "$name")" 2>&1 </dev/null &
  echo $! >"$(proc_pidfile "$name")"
}

proc_stop() { # NAME — TERM, up to 5 s to exit, then KILL
  local f; f=$(proc_pidfile "$1"); [ -f "$f" ] || return 0
  local pid; pid=$(cat "$f")
  kill -TERM "$pid" 2>/dev/null || true
  local _i; for _i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$f"
}

proc_stop_group() { # NAME — a session leader (a watcher loop) and its whole group, an in-flight child included
  local f; f=$(proc_pidfile "$1"); [ -f "$f" ] || return 0
  kill -TERM -- "-$(cat "$f")" 2>/dev/null || kill -TERM "$(cat "$f")" 2>/dev/null || true
  rm -f "$f"
}

proc_wait() { # NAME WHAT SECONDS command... — until the command succeeds; fails at once if NAME exits
  local name=$1 what=$2 end=$(( $(date +%s) + $3 )); shift 3
  until "$@" >/dev/null 2>&1; do
    if ! proc_alive "$name"; then log "$name exited while waiting for $what; last log lines:"; tail -5 "$(proc_log "$name")" >&2; return 1; fi
    [ "$(date +%s)" -lt "$end" ] || { log "timed out waiting for $what (log: $(proc_log "$name"))"; tail -20 "$(proc_log "$name")" >&2; return 1; }
    sleep 0.5
  done
}

sa_kubeconfig() { # NAMESPACE SERVICEACCOUNT OUT — a kubeconfig with a one-year token of that ServiceAccount
  local ns=$1 sa=$2 out=$3 token server ca
  token=$(kubectl -n "$ns" create token "$sa" --duration=8760h)
  server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  ca=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.certificate-authority}')
  (
    umask 077
    cat >"$out" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: lab, cluster: {server: '$server', certificate-authority: '$ca'}}]
users: [{name: $sa, user: {token: '$token'}}]
contexts: [{name: $sa, context: {cluster: lab, user: $sa}}]
current-context: $sa
EOF
  )
}

serving_cert() { # DIR CN SAN EXTENDED_KEY_USAGE — DIR/tls.{crt,key} signed by the lab CA
  local dir=$1 cn=$2 san=$3 eku=$4
  mkdir -p "$dir"
  # reuse the pair only while the lab CA that signed it is still the lab CA (a new $LAB_DIR/pki means a new CA)
  if [ -f "$dir/tls.crt" ] && openssl verify -CAfile "$LAB_PKI/ca.crt" "$dir/tls.crt" >/dev/null 2>&1; then return 0; fi
  local ext="$dir/ext.cnf"
  printf 'subjectAltName=%s\nauthorityKeyIdentifier=keyid,issuer\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=%s\n' "$san" "$eku" >"$ext"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$dir/tls.key" -subj "/CN=$cn" -out "$dir/tls.csr" 2>/dev/null
  openssl x509 -req -in "$dir/tls.csr" -CA "$LAB_PKI/ca.crt" -CAkey "$LAB_PKI/ca.key" -CAcreateserial \
    -CAserial "$dir/ca.srl" -days 3650 -extfile "$ext" -out "$dir/tls.crt" 2>/dev/null
  rm -f "$dir/tls.csr" "$ext"
}

# ---- the controller-runtime operators the lab runs out of cluster (kueue, kuberay, training operator) ----
# Each component script sets HEALTH_PORT, METRICS_PORT, NS and SA before calling these.
ready() { curl -sf "http://127.0.0.1:${HEALTH_PORT:?}/readyz" >/dev/null; }
v1beta1_variant() { [ "${LAB_KUEUE_API:-v1beta2}" = v1beta1 ]; }  # the lab variant that serves Kueue's v1beta1 only

operator_down() { # PROCESS — stop it and drop its Prometheus scrape target
  proc_stop "$1"
  rm -f "$LAB_DIR/prometheus/targets/$1.json"
}

job_operator_status() { # PROCESS VERSION — one status line; exit 1 unless healthy (off on the v1beta1 variant)
  local name=$1 version=$2
  if v1beta1_variant; then echo "$name: disabled (LAB_KUEUE_API=v1beta1 runs no Kueue)"; return 0; fi
  if ! proc_alive "$name"; then echo "$name: unhealthy (not running)"; return 1; fi
  if ! ready; then echo "$name: unhealthy (readyz on 127.0.0.1:$HEALTH_PORT fails)"; return 1; fi
  echo "$name: healthy ($version, pid $(cat "$(proc_pidfile "$name")"), as system:serviceaccount:$NS:$SA, metrics 127.0.0.1:$METRICS_PORT)"
}

run_collection_playbook() { # PLAYBOOK LOGNAME [ansible-playbook args...] — the collection with the lab inventory
  # No network: local charts, the lab post-renderer (Helm path); the admin kubeconfig, as a user's install run.
  # LAB_DIR is exported by lab.sh (the lab inventory reads it).
  local playbook=$1 logname=$2; shift 2
  local coll="$LAB_DIR/collections/ansible_collections/gpuaas"
  mkdir -p "$coll"; ln -sfn "$LIB_ROOT" "$coll/platform"
  ( cd "$LIB_ROOT" && PATH="$LAB_BIN:$(dirname "$PY"):$PATH" ANSIBLE_COLLECTIONS_PATH="$LAB_DIR/collections" \
      KUBECONFIG="$LAB_DIR/kubeconfig" K8S_AUTH_KUBECONFIG="$LAB_DIR/kubeconfig" \
      "$(dirname "$PY")/ansible-playbook" -i "$LIB_ROOT/playbooks/inventory/lab" "$playbook" \
      -e gpuaas_helm_post_renderer="$LIB_ROOT/tests/integration/files/install/lab_post_renderer.sh" "$@" \
      >"$LAB_DIR/logs/$logname.log" 2>&1 ) \
    || { log "bootstrap install failed (log: $LAB_DIR/logs/$logname.log)"; tail -20 "$LAB_DIR/logs/$logname.log" >&2; return 1; }
}

run_olm_bootstrap() { # COMPONENT PLAYBOOK OPERATOR_SIMULATOR WHAT check-command... — the collection's OLM path
  # As on OpenShift: the OLM SIMULATOR answers the Subscriptions during this playbook run only (the OLM-path tests
  # start their own); the operator SIMULATOR (already running) then turns the operand into what WHAT names.
  local component=$1 playbook=$2 operator_simulator=$3 what=$4; shift 4
  : >"$(proc_log "$component-olm-simulator")"
  proc_start "$component-olm-simulator" "$PY" "$LIB_ROOT/lab/simulators/olm_simulator.py" --kubeconfig "$KUBECONFIG" \
    --interval 1 --bundle-dir "$LAB_DIR/olm-bundles"
  local rc=0
  run_collection_playbook "$playbook" "$component-bootstrap" -e gpuaas_platform=openshift || rc=1
  proc_stop "$component-olm-simulator"
  [ "$rc" = 0 ] || return 1
  proc_wait "$operator_simulator" "$what" 30 "$@"
}
