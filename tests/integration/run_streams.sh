#!/usr/bin/env bash
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# The integration suite as `make test` runs it: two pytest sessions side by side, each on its own set of labs, so
# that no test of one can see an object of the other (a tenants reconcile prunes what the collection owns on its
# cluster; two sessions on one lab would prune each other's objects).
#
#   stream "kubernetes": main lab STREAM_A_LAB_DIR + the MultiKueue workers + the Kueue-v1beta1 lab
#   stream "openshift":  main lab STREAM_B_LAB_DIR + the OpenShift-flavoured variant lab
#
# Why: one session kept the 2-core CI machine about 80 % busy for 64 min (the tests mostly wait on controllers),
# which with the stages before it no longer fitted CI's 90 min (stop 35's CI timed out in the integration stage).
# Two sessions use the idle time.
#
# Which file runs where: a file that uses the variant lab's fixtures runs in "openshift", one that uses the workers or
# the v1beta1 lab in "kubernetes" (read from the file, so a new test lands in the right stream); the main-lab-only
# files named in OPENSHIFT_BALANCE join "openshift" to even out the wall time (measured per file, single session:
# openshift-bound files 853 s, the rest 2,981 s); every other file runs in "kubernetes".
# docs/lab.md ("make demo, then make test") has the measured times.
# A file in the wrong stream does not pass silently: the other stream's lab variables point nowhere, so its fixtures
# fail (GPUAAS_INTEGRATION_NO_SKIP=1 turns a skip into a failure).
#
# Usage: run_streams.sh  (environment: STREAM_A_LAB_DIR, STREAM_B_LAB_DIR, LAB_VARIANT_DIR, GPUAAS_WORKER_LAB_DIR,
#        GPUAAS_WORKER2_LAB_DIR, GPUAAS_V1BETA1_LAB_DIR, COLL_ROOT, PY; PYTEST_ARGS is passed to both sessions)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
: "${STREAM_A_LAB_DIR:?}" "${STREAM_B_LAB_DIR:?}" "${LAB_VARIANT_DIR:?}" "${GPUAAS_WORKER_LAB_DIR:?}" \
  "${GPUAAS_WORKER2_LAB_DIR:?}" "${GPUAAS_V1BETA1_LAB_DIR:?}" "${COLL_ROOT:?}" "${PY:?}"
NOWHERE=/nonexistent/lab-of-the-other-stream

# main-lab-only files that run in the openshift stream (their per-file seconds in the single-session run that set
# this list: ray_workloads 238, ray_idle_reclaim 201, training_workloads 74, node_pools 188, node_pools_provisioning
# 32, awx_runner 140, safe_operation 154)
OPENSHIFT_BALANCE=(test_ray_workloads.py test_ray_idle_reclaim.py test_training_workloads.py test_node_pools.py
                   test_node_pools_provisioning.py test_awx_runner.py test_safe_operation.py)

stream_a=() stream_b=()
for f in "$HERE"/test_*.py; do
  name=$(basename "$f")
  uses_openshift=0 uses_kubernetes_labs=0
  grep -qE 'variant_(lab|kube|run_playbook|audit)' "$f" && uses_openshift=1
  grep -qE 'worker_lab|worker2_lab|worker_kube|worker2_kube|GPUAAS_V1BETA1_LAB_DIR' "$f" && uses_kubernetes_labs=1
  if [ $uses_openshift = 1 ] && [ $uses_kubernetes_labs = 1 ]; then
    echo "run_streams.sh: $name uses the variant lab and a worker/v1beta1 lab; no stream has both" \
         "(give it one lab set, or move a lab between the streams here)" >&2
    exit 2
  fi
  if [ $uses_openshift = 1 ] || [[ " ${OPENSHIFT_BALANCE[*]} " == *" $name "* ]]; then
    stream_b+=("$f")
  else
    stream_a+=("$f")
  fi
done
for name in "${OPENSHIFT_BALANCE[@]}"; do
  [ -f "$HERE/$name" ] || { echo "run_streams.sh: OPENSHIFT_BALANCE names $name, which is not in $HERE" >&2; exit 2; }
done

run_stream() { # NAME LAB_DIR VARIANT WORKER WORKER2 V1BETA1 FILES...
  local name=$1 lab=$2 variant=$3 worker=$4 worker2=$5 v1beta1=$6; shift 6
  (
    # shellcheck disable=SC1091
    source "$lab/env" || exit 2
    cd "$REPO" || exit 2
    # own basetemp (pytest removes old numbered temp dirs), no shared .pytest_cache
    # shellcheck disable=SC2086
    env PATH="$REPO/.venv/bin:$PATH" PYTHONPATH="$COLL_ROOT" GPUAAS_INTEGRATION_NO_SKIP=1 LAB_VARIANT_DIR="$variant" \
      GPUAAS_WORKER_LAB_DIR="$worker" GPUAAS_WORKER2_LAB_DIR="$worker2" GPUAAS_V1BETA1_LAB_DIR="$v1beta1" \
      "$PY" -m pytest -q -p no:cacheprovider --basetemp="$REPO/.pytest-tmp-$name" --durations=15 "$@" ${PYTEST_ARGS:-}
  ) 2>&1 | sed -u "s/^/[$name] /"
}

start=$(date +%s)
echo "[streams] kubernetes: ${#stream_a[@]} files on $STREAM_A_LAB_DIR (+ workers, v1beta1); openshift: ${#stream_b[@]} files on $STREAM_B_LAB_DIR (+ variant)"
( run_stream kubernetes "$STREAM_A_LAB_DIR" "$NOWHERE" "$GPUAAS_WORKER_LAB_DIR" "$GPUAAS_WORKER2_LAB_DIR" \
    "$GPUAAS_V1BETA1_LAB_DIR" "${stream_a[@]}"
  rc=$?; echo "[streams] kubernetes finished: rc $rc after $(( $(date +%s) - start ))s"; exit $rc ) &
pid_a=$!
( run_stream openshift "$STREAM_B_LAB_DIR" "$LAB_VARIANT_DIR" "$NOWHERE" "$NOWHERE" "$NOWHERE" "${stream_b[@]}"
  rc=$?; echo "[streams] openshift finished: rc $rc after $(( $(date +%s) - start ))s"; exit $rc ) &
pid_b=$!
wait $pid_a; rc_a=$?
wait $pid_b; rc_b=$?
[ $rc_a = 0 ] && [ $rc_b = 0 ]
