#!/usr/bin/env bash
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# The integration suite as `make test` runs it: in two phases, so that a lab is stopped as soon as the last file that
# uses it has run, and the second phase in two streams on two labs.
#
#   phase 1, one pytest session per group of files, each group read from the files' fixtures:
#     "workers": the files that use a MultiKueue worker lab (every lab up), then the two workers are stopped;
#     "v1beta1": the files that use the Kueue-v1beta1 lab, then it is stopped;
#     "variant": the files that use the OpenShift-flavoured variant lab, then it is stopped;
#   phase 2, "main-labs": every other file, in two pytest sessions side by side: stream "main-lab" on the main lab,
#     stream "second-lab" (the files named in SECOND_LAB_FILES) on a second lab like the main one (LAB_SECOND_DIR),
#     started when phase 1 ends and stopped after its stream.
#
# Why: CI has 90 min on 2 cores. One pytest session over all files took 64 min on a quiet machine. Measured in stop
# 37 (a fresh clone's `.ci/run`, on a machine about 1.45 times slower than stop 36's CI): phase 1 with every lab up
# for all of it took 2,278 s at 91 % CPU; an idle lab costs about 0.09 of a core, so the labs a group no longer needs
# are stopped after it. Phase 2 with only the main lab up left the CPU about 40 % idle (its tests mostly wait on
# Kueue, KEDA, the scheduler and Prometheus windows), so a second session on its own lab fills that time: two
# streams took 1,577 s and 1,511 s side by side at 92 % CPU. At most five labs run at any time (two sessions beside
# all five labs were measured slower, stop 36).
# A file in the wrong group does not pass silently: a stopped lab's variables point to a directory that does not
# exist, so its fixtures fail (GPUAAS_INTEGRATION_NO_SKIP=1 turns a skip into a failure).
#
# Usage: run_phases.sh  (environment: LAB_DIR (the main lab), LAB_VARIANT_DIR, LAB_WORKER_DIR, LAB_WORKER2_DIR,
#        LAB_V1BETA1_DIR, LAB_SECOND_DIR and LAB_SECOND_OFFSET (its ports); PYTEST_ARGS is passed to every session).
#        Each session is `make integration` on its files; a stream's lines carry its name in brackets, and the
#        FAILED/ERROR lines of both streams are repeated together at the end.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
: "${LAB_DIR:?}" "${LAB_VARIANT_DIR:?}" "${LAB_WORKER_DIR:?}" "${LAB_WORKER2_DIR:?}" "${LAB_V1BETA1_DIR:?}"
: "${LAB_SECOND_DIR:?}" "${LAB_SECOND_OFFSET:?}"
NOWHERE=/nonexistent/lab-stopped-before-this-phase

# The second lab's share of the second phase, chosen from the per-file times of one whole session (stop 36, junit
# on a quiet machine) so both streams take about 20 min of that session's time: a file not named here runs in the
# main-lab stream.
SECOND_LAB_FILES=" test_ray_idle_reclaim.py test_node_pools.py test_safe_operation.py test_fair_sharing_scenarios.py
  test_notebook_idle_reclaim.py test_lab_controllers.py test_isolation.py test_training_workloads.py test_brownfield.py
  test_department_budgets.py test_secrets_never_logged.py test_run_lock_clock_skew.py test_workload_kinds.py "

workers_files=() v1beta1_files=() variant_files=() main=() second=()
for f in "$HERE"/test_*.py; do  # the first lab a file needs, in the order of the groups, chooses its group
  if grep -qE 'worker_lab|worker2_lab|worker_kube|worker2_kube' "$f"; then
    workers_files+=("$f")
  elif grep -qE 'GPUAAS_V1BETA1_LAB_DIR' "$f"; then
    v1beta1_files+=("$f")
  elif grep -qE 'variant_(lab|kube|run_playbook|audit)' "$f"; then
    variant_files+=("$f")
  elif [[ "$SECOND_LAB_FILES" == *" $(basename "$f")"[[:space:]]* ]]; then
    second+=("$f")
  else
    main+=("$f")
  fi
done

for name in $SECOND_LAB_FILES; do  # a renamed file must not leave the streams unbalanced unnoticed
  [ -f "$HERE/$name" ] || { echo "run_phases.sh: SECOND_LAB_FILES names $name, which does not exist" >&2; exit 2; }
done

run_session() { # NAME MAIN_LAB VARIANT WORKER WORKER2 V1BETA1 FILES...
  local name=$1 lab=$2 variant=$3 worker=$4 worker2=$5 v1beta1=$6 start rc; shift 6
  start=$(date +%s)
  if [ $# = 0 ]; then echo "=== integration $name: no files"; return 0; fi  # (no path: pytest would take every test)
  echo "=== integration $name: $# files on $lab"
  make -C "$REPO" --no-print-directory -o collection integration LAB_DIR="$lab" LAB_VARIANT_DIR="$variant" \
    LAB_WORKER_DIR="$worker" LAB_WORKER2_DIR="$worker2" LAB_V1BETA1_DIR="$v1beta1" INTEGRATION_TESTS="$*" \
    PYTEST_ARGS="${PYTEST_ARGS:-}"
  rc=$?
  echo "=== integration $name: rc $rc after $(( $(date +%s) - start ))s"
  return $rc
}

# A stream of the second phase: live lines prefixed with its name, the whole output kept for the summary (pipefail:
# the stream's status is the session's, not sed's).
run_stream() { # NAME LOG MAIN_LAB FILES...
  local name=$1 log=$2 lab=$3; shift 3
  run_session "$name" "$lab" "$NOWHERE" "$NOWHERE" "$NOWHERE" "$NOWHERE" "$@" 2>&1 | tee "$log" | sed -u "s/^/[$name] /"
}

stop_labs() { # DIR...: stop labs a later session does not use
  local d
  for d in "$@"; do
    LAB_DIR=$d bash "$REPO/lab/lab.sh" down >/dev/null || { echo "run_phases.sh: could not stop the lab in $d" >&2; rc=1; }
  done
}

rc=0
run_session workers "$LAB_DIR" "$LAB_VARIANT_DIR" "$LAB_WORKER_DIR" "$LAB_WORKER2_DIR" "$LAB_V1BETA1_DIR" \
  "${workers_files[@]}" || rc=1
stop_labs "$LAB_WORKER_DIR" "$LAB_WORKER2_DIR"
run_session v1beta1 "$LAB_DIR" "$LAB_VARIANT_DIR" "$NOWHERE" "$NOWHERE" "$LAB_V1BETA1_DIR" "${v1beta1_files[@]}" || rc=1
stop_labs "$LAB_V1BETA1_DIR"
run_session variant "$LAB_DIR" "$LAB_VARIANT_DIR" "$NOWHERE" "$NOWHERE" "$NOWHERE" "${variant_files[@]}" || rc=1
stop_labs "$LAB_VARIANT_DIR"

logs=$(mktemp -d)
echo "=== integration phase main-labs: ${#main[@]} files on $LAB_DIR, ${#second[@]} on $LAB_SECOND_DIR"
run_stream main-lab "$logs/main-lab" "$LAB_DIR" "${main[@]}" & main_pid=$!
# the second lab comes up while the main-lab stream already runs (a lab start is mostly waiting for its components)
if { LAB_DIR=$LAB_SECOND_DIR bash "$REPO/lab/lab.sh" down >/dev/null 2>&1
     LAB_DIR=$LAB_SECOND_DIR LAB_PORT_OFFSET=$LAB_SECOND_OFFSET bash "$REPO/lab/lab.sh" up; } 2>&1 |
     sed -u "s/^/[second-lab] /"; then
  run_stream second-lab "$logs/second-lab" "$LAB_SECOND_DIR" "${second[@]}" || rc=1
else
  echo "run_phases.sh: the second lab ($LAB_SECOND_DIR) did not come up: its ${#second[@]} files did not run" >&2
  rc=1
fi
wait $main_pid || rc=1
stop_labs "$LAB_SECOND_DIR"
echo "=== integration phase main-labs: failures of both streams"
grep -hE '^(FAILED|ERROR) ' "$logs"/* 2>/dev/null || echo "(none)"
rm -rf "$logs"
exit $rc
