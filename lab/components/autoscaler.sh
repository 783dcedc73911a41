#!/usr/bin/env bash
# The cluster-autoscaler SIMULATOR (lab/simulators/autoscaler_simulator.py, issue 23): the ProvisioningRequest side of
# the cluster autoscaler, which Kueue's ProvisioningRequest admission check talks to. A SIMULATOR, not the real
# autoscaler (which needs a cloud): it answers ProvisioningRequests from the nodes and the node groups (MachineSets /
# MachineDeployments with the autoscaler's size annotations) and raises a group's replicas; the machine SIMULATOR
# (lab/simulators/machine_simulator.py, started by the tests) makes the Machines and KWOK Nodes. docs/node-pools.md
# says what it does and does not do.
#
#   autoscaler.sh up       start (idempotent)
#   autoscaler.sh down     stop
#   autoscaler.sh status   one line "autoscaler: healthy|unhealthy (...)"; non-zero exit when unhealthy
#
# Called by lab/lab.sh with LAB_DIR, KUBECONFIG (this component's own cluster-admin identity, user lab:autoscaler).
# The ProvisioningRequest CRD is loaded with the lab's CRDs (lab/build/crds.sh), before Kueue starts: Kueue sets its
# ProvisioningRequest controller up only when the API is served at its start.
set -euo pipefail
: "${LAB_DIR:?}" "${KUBECONFIG:?}"
COMPONENT=autoscaler
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
SIM=$LIB_ROOT/lab/simulators/autoscaler_simulator.py
STATE=$LAB_DIR/autoscaler

started() { grep -q " started " "$(proc_log autoscaler-simulator)" 2>/dev/null; }

cmd_up() {
  if proc_alive autoscaler-simulator; then log "already running (pid $(cat "$(proc_pidfile autoscaler-simulator)"))"; return 0; fi
  mkdir -p "$STATE"
  # a stable copy of this component's identity (lab.sh rewrites the component kubeconfig on every call)
  cp "$KUBECONFIG" "$STATE/autoscaler.kubeconfig"
  : >"$(proc_log autoscaler-simulator)"
  proc_start autoscaler-simulator "$PY" "$SIM" --kubeconfig "$STATE/autoscaler.kubeconfig" \
    --booking-seconds "${LAB_AUTOSCALER_BOOKING_SECONDS:-600}" --interval "${LAB_AUTOSCALER_INTERVAL:-1}"
  proc_wait autoscaler-simulator "its first line" 30 started || { cmd_down; return 1; }
  log "cluster-autoscaler SIMULATOR up (pid $(cat "$(proc_pidfile autoscaler-simulator)"), as lab:autoscaler, log $(proc_log autoscaler-simulator))"
}

cmd_down() {
  proc_stop autoscaler-simulator
}

cmd_status() {
  if ! proc_alive autoscaler-simulator; then echo "autoscaler: unhealthy (SIMULATOR not running)"; return 1; fi
  echo "autoscaler: healthy (cluster-autoscaler SIMULATOR, pid $(cat "$(proc_pidfile autoscaler-simulator)"), as lab:autoscaler)"
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
