#!/usr/bin/env bash
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# The integration suite as `make test` runs it: in two phases, so that the labs only a few files use are not left
# running through the whole suite.
#
#   phase "beside-labs": every file that uses the OpenShift-flavoured variant lab, a MultiKueue worker or the
#                        Kueue-v1beta1 lab (read from the file), with every lab up;
#   then those four labs are stopped;
#   phase "main-lab":    every other file, with only the main lab up.
#
# Why: CI has 90 min on 2 cores and one pytest session over all files took 64 min on a quiet machine, the CPU 70-97 %
# busy; the five labs idle use 47 % of one core (docs/lab.md). Two sessions side by side on two lab sets were
# measured too and were slower (the cores were already busy), so the suite stays one session at a time and the
# labs nobody uses are stopped instead.
# A file in the wrong phase does not pass silently: in the main-lab phase the other labs' variables point to a
# directory that does not exist, so their fixtures fail (GPUAAS_INTEGRATION_NO_SKIP=1 turns a skip into a failure).
#
# Usage: run_phases.sh  (environment: LAB_DIR (the main lab), LAB_VARIANT_DIR, LAB_WORKER_DIR, LAB_WORKER2_DIR,
#        LAB_V1BETA1_DIR; PYTEST_ARGS is passed to both phases). Each phase is `make integration` on its files.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
: "${LAB_DIR:?}" "${LAB_VARIANT_DIR:?}" "${LAB_WORKER_DIR:?}" "${LAB_WORKER2_DIR:?}" "${LAB_V1BETA1_DIR:?}"
NOWHERE=/nonexistent/lab-stopped-before-this-phase

beside=() main=()
for f in "$HERE"/test_*.py; do
  if grep -qE 'variant_(lab|kube|run_playbook|audit)|worker_lab|worker2_lab|worker_kube|worker2_kube|GPUAAS_V1BETA1_LAB_DIR' "$f"; then
    beside+=("$f")
  else
    main+=("$f")
  fi
done

run_phase() { # NAME VARIANT WORKER WORKER2 V1BETA1 FILES...
  local name=$1 variant=$2 worker=$3 worker2=$4 v1beta1=$5 start rc; shift 5
  start=$(date +%s)
  echo "=== integration phase $name: $# files"
  make -C "$REPO" --no-print-directory -o collection integration LAB_DIR="$LAB_DIR" LAB_VARIANT_DIR="$variant" \
    LAB_WORKER_DIR="$worker" LAB_WORKER2_DIR="$worker2" LAB_V1BETA1_DIR="$v1beta1" INTEGRATION_TESTS="$*" \
    PYTEST_ARGS="${PYTEST_ARGS:-}"
  rc=$?
  echo "=== integration phase $name: rc $rc after $(( $(date +%s) - start ))s"
  return $rc
}

rc=0
run_phase beside-labs "$LAB_VARIANT_DIR" "$LAB_WORKER_DIR" "$LAB_WORKER2_DIR" "$LAB_V1BETA1_DIR" \
  "${beside[@]}" || rc=1
for d in "$LAB_VARIANT_DIR" "$LAB_WORKER_DIR" "$LAB_WORKER2_DIR" "$LAB_V1BETA1_DIR"; do
  LAB_DIR=$d bash "$REPO/lab/lab.sh" down >/dev/null || { echo "run_phases.sh: could not stop the lab in $d" >&2; rc=1; }
done
run_phase main-lab "$NOWHERE" "$NOWHERE" "$NOWHERE" "$NOWHERE" "${main[@]}" || rc=1
exit $rc
