#!/usr/bin/env bash
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# The supported ansible-core x Python matrix (make test-matrix). For every entry "<python>:<ansible-core>":
#   1. a venv in $MATRIX_HOME (cached; rebuilt when this file's requirements change) with that ansible-core,
#      the collection's requirements.txt and the test tools;
#   2. unit tests (tests/unit);
#   3. sanity-lite: every Python file compiles with that Python, every module and module_util imports with that
#      ansible-core, ansible-doc renders every module and role argument spec, every playbook passes --syntax-check;
#   4. with a lab (LAB_DIR/env exists): tests/integration/test_awx_runner.py, the AWX-shaped ansible-runner
#      job (onboard -> validate -> offboard) with that ansible-core.
# Results: one line per entry and stage in $MATRIX_HOME/results.txt; exit status non-zero if anything failed.
#   MATRIX="3.11:2.16 3.13:2.21" bash tests/matrix/matrix.sh
#   MATRIX_STAGES="unit sanity" bash tests/matrix/matrix.sh          # without the lab stage
#   MATRIX_REF=HEAD bash tests/matrix/matrix.sh       # test a committed tree (git archive), not the work tree's copy
# Every stage runs inside a copy of the collection (COLL_ROOT/ansible_collections/gpuaas/platform, `make collection`).
set -uo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
MATRIX=${MATRIX:-"3.10:2.16 3.11:2.16 3.11:2.18 3.12:2.18 3.12:2.21 3.13:2.21"}
MATRIX_STAGES=${MATRIX_STAGES-"unit sanity lab"}
MATRIX_HOME=${MATRIX_HOME:-$HOME/.cache/gpuaas-matrix}
COLL_ROOT=${COLL_ROOT:-$REPO/.build}
if [ -n "${MATRIX_REF:-}" ]; then
    COLL_ROOT="$MATRIX_HOME/src"
    rm -rf "$COLL_ROOT" && mkdir -p "$COLL_ROOT/ansible_collections/gpuaas/platform"
    git -C "$REPO" archive "$MATRIX_REF" | tar -x -C "$COLL_ROOT/ansible_collections/gpuaas/platform" || exit 1
    echo "testing $(git -C "$REPO" rev-parse --short "$MATRIX_REF") ($MATRIX_REF)"
fi
COLL="$COLL_ROOT/ansible_collections/gpuaas/platform"
[ -d "$COLL/plugins" ] || { echo "no collection at $COLL: run make collection first"; exit 1; }
export LAB_DIR=${LAB_DIR:-$REPO/.lab}
# kubernetes.core and ansible.posix come from the main venv's `ansible` package (collections are Python-agnostic)
MAIN_COLLECTIONS=""
for d in "$REPO"/.venv/lib/python3*/site-packages; do [ -d "$d" ] && MAIN_COLLECTIONS="${MAIN_COLLECTIONS:+$MAIN_COLLECTIONS:}$d"; done
TEST_REQS=(pytest "prometheus-client>=0.20.0" 'grafana-foundation-sdk>=10.1.0; python_version >= "3.11"' "ansible-runner>=2.4" "ansible-builder>=3.1")

find_python() {  # find_python 3.11 -> path of a python3.11
    local v=$1 p
    for p in "$HOME"/.pyenv/versions/"$v".*/bin/python3 "python$v"; do
        # pyenv shims exist for every version but only run the selected ones: check it really starts
        if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import sys' >/dev/null 2>&1; then command -v "$p"; return 0; fi
    done
    return 1
}

mkdir -p "$MATRIX_HOME"
results="$MATRIX_HOME/results.txt"
: > "$results"
failed=0
record() {  # record <entry> <stage> <status> <seconds> [detail]
    printf '%-10s %-7s %-5s %4ss %s\n' "$1" "$2" "$3" "$4" "${5:-}" | tee -a "$results"
    [ "$3" = PASS ] || [ "$3" = SKIP ] || failed=1
}

for entry in $MATRIX; do
    py=${entry%%:*}
    core=${entry##*:}
    venv="$MATRIX_HOME/py$py-core$core"
    stamp=$(printf '%s\n' "$core" "${TEST_REQS[@]}" | cat - "$REPO/requirements.txt" | md5sum | cut -c1-12)
    t0=$SECONDS
    if [ "$(cat "$venv/.stamp" 2>/dev/null)" != "$stamp" ]; then
        python=$(find_python "$py") || { record "$entry" venv FAIL 0 "no python$py (pyenv install $py)"; continue; }
        rm -rf "$venv"
        if ! { "$python" -m venv "$venv" && "$venv/bin/python" -m pip install -q --upgrade pip &&
               "$venv/bin/python" -m pip install -q "ansible-core==$core.*" -r "$REPO/requirements.txt" "${TEST_REQS[@]}"; } \
               > "$MATRIX_HOME/py$py-core$core.install.log" 2>&1; then
            record "$entry" venv FAIL $((SECONDS - t0)) "see $MATRIX_HOME/py$py-core$core.install.log"
            continue
        fi
        echo "$stamp" > "$venv/.stamp"
    fi
    # ansible-core < 2.19 has no ansible.module_utils.testing (the unit tests' patch_module_args)
    "$venv/bin/python" - "$REPO/tests/matrix/compat/ansible_module_utils_testing.py" <<'PY' || { record "$entry" venv FAIL $((SECONDS - t0)) "compat shim"; continue; }
import os, shutil, sys
import ansible.module_utils as mu
target = os.path.join(os.path.dirname(mu.__file__), "testing.py")
if not os.path.exists(target):
    shutil.copy(sys.argv[1], target)
PY
    version=$("$venv/bin/python" -c 'from ansible.release import __version__; import sys; print("%s/py%d.%d.%d" % ((__version__,) + sys.version_info[:3]))')
    record "$entry" venv PASS $((SECONDS - t0)) "ansible-core $version"
    export ANSIBLE_COLLECTIONS_PATH="$COLL_ROOT:$MAIN_COLLECTIONS"
    export ANSIBLE_CONFIG="$REPO/ansible.cfg"
    export ANSIBLE_PYTHON_INTERPRETER="$venv/bin/python"
    log="$MATRIX_HOME/py$py-core$core"

    for stage in $MATRIX_STAGES; do
        t0=$SECONDS
        case $stage in
        unit)
            deselect=()
            # grafana-foundation-sdk (a test-only dependency) needs Python >= 3.11
            [ "$py" = 3.10 ] && deselect=(--deselect tests/unit/test_dashboard.py::test_dashboard_loads_in_grafana_schema)
            if (cd "$COLL" && PYTHONPATH="$COLL_ROOT" PATH="$venv/bin:$PATH" "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/unit "${deselect[@]}") > "$log.unit.log" 2>&1; then
                record "$entry" unit PASS $((SECONDS - t0)) "$(tail -1 "$log.unit.log")"
            else
                record "$entry" unit FAIL $((SECONDS - t0)) "$(tail -1 "$log.unit.log") (see $log.unit.log)"
            fi ;;
        sanity)
            if PATH="$venv/bin:$PATH" "$venv/bin/python" "$COLL/tests/matrix/sanity_lite.py" "$COLL" > "$log.sanity.log" 2>&1; then
                record "$entry" sanity PASS $((SECONDS - t0)) "$(tail -1 "$log.sanity.log")"
            else
                record "$entry" sanity FAIL $((SECONDS - t0)) "$(tail -1 "$log.sanity.log") (see $log.sanity.log)"
            fi ;;
        lab)
            if [ ! -f "$LAB_DIR/env" ]; then
                record "$entry" lab SKIP 0 "no lab at $LAB_DIR (make lab-up)"
                continue
            fi
            if (cd "$COLL" && GPUAAS_COLLECTIONS_PATH="$ANSIBLE_COLLECTIONS_PATH" PATH="$venv/bin:$LAB_DIR/bin:$PATH" "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/integration/test_awx_runner.py) > "$log.lab.log" 2>&1; then
                record "$entry" lab PASS $((SECONDS - t0)) "$(tail -1 "$log.lab.log")"
            else
                record "$entry" lab FAIL $((SECONDS - t0)) "$(tail -1 "$log.lab.log") (see $log.lab.log)"
            fi ;;
        *) record "$entry" "$stage" FAIL 0 "unknown stage" ;;
        esac
    done
done
echo "--- results ($results)"
cat "$results"
exit $failed
