# gpuaas.platform — every entry point a newcomer needs.
#   make demo   set up the local lab and run the demo (install operators, converge tenants, validate)
#   make test   the whole suite: sanity, lint, unit, integration (against the lab), molecule
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV        ?= .venv
PY          := $(VENV)/bin/python
# ansible-core >= 2.20 needs Python >= 3.12: prefer 3.12 (what the suite is developed on), else any newer one.
PYTHON_BOOT ?= $(shell for p in python3.12 $$HOME/.pyenv/versions/3.12*/bin/python3 python3.13 $$HOME/.pyenv/versions/3.13*/bin/python3 python3; do command -v $$p >/dev/null 2>&1 && { $$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null && { echo $$p; break; }; }; done)
COLL_ROOT   := $(CURDIR)/.build
COLL_DIR    := $(COLL_ROOT)/ansible_collections/gpuaas/platform
# The lab `make demo`, `make lab-up`, `make integration` and `make molecule` use (override: make LAB_DIR=… lab-up).
LAB_DIR     ?= $(CURDIR)/.lab
LAB_ENV      = $(LAB_DIR)/env
LAB_VARIANT_DIR ?= $(CURDIR)/.lab-variant
LAB_WORKER_DIR ?= $(CURDIR)/.lab-worker
LAB_WORKER2_DIR ?= $(CURDIR)/.lab-worker2
LAB_V1BETA1_DIR ?= $(CURDIR)/.lab-v1beta1
# The lab make integration-phases brings up for the second stream of its second phase (and stops after it).
LAB_SECOND_DIR ?= $(CURDIR)/.lab-second
LAB_SECOND_OFFSET ?= 150
export ANSIBLE_COLLECTIONS_PATH := $(COLL_ROOT):$(CURDIR)/$(VENV)/lib/python3.12/site-packages:$(CURDIR)/$(VENV)/lib/python3.13/site-packages
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg

.PHONY: help prereqs venv collection lab-build lab-up lab-down lab-status lab-variant-up lab-variant-down lab-worker-up lab-worker-down lab-worker2-up lab-worker2-down lab-v1beta1-up lab-v1beta1-down demo test sanity lint unit integration molecule bench bench-fairness clean test-matrix

help:
	@sed -n 's/^#   //p' Makefile

# One-off system packages (Debian): rsync (collection copy), shellcheck (sanity), prometheus + promtool, openssl
# and curl (the lab). Installed when missing and we are root; otherwise the command to run is printed.
DEB_PACKAGES := rsync shellcheck prometheus openssl curl
prereqs:
	@missing=""; for p in rsync shellcheck prometheus promtool openssl curl; do command -v $$p >/dev/null || missing="$$missing $$p"; done; \
	  if [ -n "$$missing" ]; then \
	    if [ "$$(id -u)" = 0 ]; then echo "installing Debian packages: $(DEB_PACKAGES)"; \
	      apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(DEB_PACKAGES) >/dev/null; \
	    else echo "missing:$$missing — run: sudo apt-get install -y $(DEB_PACKAGES)"; exit 1; fi; fi

$(VENV)/.installed: requirements.txt requirements-dev.txt
	@$(MAKE) --no-print-directory prereqs
	@test -n "$(PYTHON_BOOT)" || { echo "Python >= 3.12 is needed (ansible-core >= 2.20); install one (e.g. pyenv install 3.12)"; exit 1; }
	$(PYTHON_BOOT) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt -r requirements-dev.txt
	touch $@

venv: $(VENV)/.installed

# ansible-test and ansible-playbook need the collection at ansible_collections/gpuaas/platform.
collection: venv
	@mkdir -p $(COLL_DIR)
# Only what git would track is copied: everything .gitignore names (labs, venv, reports a run wrote into the
# project root, caches) stays out, so nothing a run writes can break the build (issue 20).
	@rsync -a --delete --delete-excluded --filter=':- .gitignore' --exclude /.git --exclude /.venv --exclude '/.lab*' --exclude /build --exclude /.build --exclude /.lead-requests.md --exclude /.ansible --exclude tests/output --exclude __pycache__ --exclude .pytest_cache --exclude '/gpuaas-validation-report*' ./ $(COLL_DIR)/

lab-build: venv
	@bash lab/lab.sh build

lab-up: venv
	@LAB_DIR=$(LAB_DIR) bash lab/lab.sh up

lab-down:
	@LAB_DIR=$(LAB_DIR) bash lab/lab.sh down

lab-status:
	@LAB_DIR=$(LAB_DIR) bash lab/lab.sh status

# A second lab beside the first, every port +100: OpenShift flavour (ClusterVersion, Infrastructure, MachineSet CRDs,
# OpenShift AI's HardwareProfile) with the real Kueue and KEDA, installed the OpenShift way — the collection's OLM path
# against the OLM SIMULATOR, the Red Hat Kueue operand translated by the Kueue operator SIMULATOR, the KedaController
# by the Custom Metrics Autoscaler operator SIMULATOR (docs/lab.md; issue 23).
LAB_VARIANT_ENV = LAB_DIR=$(LAB_VARIANT_DIR) LAB_PORT_OFFSET=$$(( $${LAB_PORT_OFFSET:-0} + 100 )) LAB_COMPONENTS="kueue keda" LAB_FLAVOR=openshift
lab-variant-up: venv
	@$(LAB_VARIANT_ENV) bash lab/lab.sh up

lab-variant-down:
	@LAB_DIR=$(LAB_VARIANT_DIR) bash lab/lab.sh down

# A MultiKueue worker beside the first lab (the manager): Kubernetes-flavoured, Kueue only, every port +200
# (docs/multicluster.md; tests/integration/test_multicluster.py).
LAB_WORKER_ENV = LAB_DIR=$(LAB_WORKER_DIR) LAB_PORT_OFFSET=$$(( $${LAB_PORT_OFFSET:-0} + 200 )) LAB_COMPONENTS=kueue
lab-worker-up: venv
	@$(LAB_WORKER_ENV) bash lab/lab.sh up

lab-worker-down:
	@LAB_DIR=$(LAB_WORKER_DIR) bash lab/lab.sh down

# A second MultiKueue worker (issue 27: one worker full -> the next, one stopped -> the other): the same lab, every
# port +250 (no port of it meets one of the labs at +0, +50, +100, +200; lab/lab.sh lists the ports).
LAB_WORKER2_ENV = LAB_DIR=$(LAB_WORKER2_DIR) LAB_PORT_OFFSET=$$(( $${LAB_PORT_OFFSET:-0} + 250 )) LAB_COMPONENTS=kueue
lab-worker2-up: venv
	@$(LAB_WORKER2_ENV) bash lab/lab.sh up

lab-worker2-down:
	@LAB_DIR=$(LAB_WORKER2_DIR) bash lab/lab.sh down

# The Kueue-v1beta1 path (clusters in the field still run Kueue <= v0.15, which serves only v1beta1): a core-only lab
# whose Kueue CRDs are a release's that serves only v1beta1, no controllers, every port +50
# (tests/integration/test_kueue_modules.py). No Kueue binary of that API exists in the lab cache, so no controller.
LAB_V1BETA1_ENV = LAB_DIR=$(LAB_V1BETA1_DIR) LAB_PORT_OFFSET=$$(( $${LAB_PORT_OFFSET:-0} + 50 )) LAB_COMPONENTS= LAB_KUEUE_API=v1beta1
lab-v1beta1-up: venv
	@$(LAB_V1BETA1_ENV) bash lab/lab.sh up

lab-v1beta1-down:
	@LAB_DIR=$(LAB_V1BETA1_DIR) bash lab/lab.sh down

# ansible-test lists files through git when it finds a repository above the collection, and .build/ is
# git-ignored: so sanity runs on a copy outside the work tree, of what galaxy.yml ships (no lab/, bench/). Its per-test venvs bootstrap pip from a host
# this network cannot reach; tests/sanity/get_pip_offline.py stands in for that download.
SANITY_ROOT := /tmp/gpuaas-sanity-$(shell echo $(CURDIR) | md5sum | cut -c1-8)
sanity: collection
	@pipv=$$($(PY) -c 'import re,ansible_test,os; p=os.path.join(os.path.dirname(ansible_test.__file__),"_internal","python_requirements.py"); print(re.search(r"pip=.([0-9.]+).", open(p).read()).group(1))'); \
	  mkdir -p $$HOME/.ansible/test/cache; \
	  sed "s|VENV_SITE_PACKAGES|$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')|" tests/sanity/get_pip_offline.py \
	    > $$HOME/.ansible/test/cache/get_pip_$${pipv//./_}.py
	@mkdir -p $(SANITY_ROOT)/ansible_collections/gpuaas/platform
	@rsync -a --delete --delete-excluded --exclude /lab --exclude /bench $(COLL_DIR)/ $(SANITY_ROOT)/ansible_collections/gpuaas/platform/
	cd $(SANITY_ROOT)/ansible_collections/gpuaas/platform && $(CURDIR)/$(VENV)/bin/ansible-test sanity --local --python $$($(CURDIR)/$(PY) -c 'import sys; print("%d.%d" % sys.version_info[:2])') $(SANITY_ARGS)

lint: venv
	$(VENV)/bin/ansible-lint --profile production

unit: collection
	PYTHONPATH=$(COLL_ROOT) $(PY) -m pytest -q tests/unit

# INTEGRATION_TESTS: the files or directories to run (tests/integration/run_phases.sh names its phases' files).
INTEGRATION_TESTS ?= tests/integration
integration: collection
	source $(LAB_ENV) && export PATH=$(CURDIR)/$(VENV)/bin:$$PATH LAB_VARIANT_DIR=$(LAB_VARIANT_DIR) GPUAAS_WORKER_LAB_DIR=$(LAB_WORKER_DIR) GPUAAS_WORKER2_LAB_DIR=$(LAB_WORKER2_DIR) GPUAAS_V1BETA1_LAB_DIR=$(LAB_V1BETA1_DIR) PYTHONPATH=$(COLL_ROOT) && GPUAAS_INTEGRATION_NO_SKIP=1 $(PY) -m pytest -q --durations=30 $(INTEGRATION_TESTS) $(PYTEST_ARGS)

molecule: collection
	@source $(LAB_ENV) && export PATH=$(CURDIR)/$(VENV)/bin:$$PATH && failed=""; \
	  for s in molecule/*/molecule.yml; do s=$$(basename $$(dirname $$s)); echo "--- molecule test -s $$s"; \
	    molecule test -s $$s || failed="$$failed $$s"; done; \
	  if [ -n "$$failed" ]; then echo "molecule scenarios failed:$$failed"; exit 1; fi

# The whole suite. Every stage runs even when an earlier one failed (CI shows all problems at once); the exit
# status is non-zero if any stage failed.
# It runs on labs of its own (.lab-test ports +300, .lab-test-variant +400, .lab-test-worker +500,
# .lab-test-worker2 +550, .lab-test-v1beta1 +350, .lab-test-second +450, .lab-test-demo +600), started fresh
# and torn down at the end: the lab `make demo` / `make lab-up` started (.lab) is never touched, whatever state
# you left it in, and no state of yours can fail a test (issue 20). Its first stage is the newcomer's first
# command: `make demo` on its own lab, in this checkout; sanity and lint run after it has finished, in a checkout the
# demo has written to, exactly as after `make demo` (the demo's files breaking sanity cannot come back unnoticed).
# The 2-core CI machine has 90 min and one integration session takes about an hour, so (docs/lab.md): the demo runs
# beside the unit tests, the five labs come up beside sanity and lint (two chains), and the integration suite runs in
# two phases (tests/integration/run_phases.sh) so that the labs only a few files use are stopped for the rest, the
# rest in two streams on the main lab and a second lab. Lines of a stage running in the background carry its name in
# brackets.
TEST_LAB_DIR     := $(CURDIR)/.lab-test
TEST_VARIANT_DIR := $(CURDIR)/.lab-test-variant
TEST_WORKER_DIR  := $(CURDIR)/.lab-test-worker
TEST_WORKER2_DIR := $(CURDIR)/.lab-test-worker2
TEST_V1BETA1_DIR := $(CURDIR)/.lab-test-v1beta1
TEST_DEMO_DIR    := $(CURDIR)/.lab-test-demo
TEST_SECOND_DIR  := $(CURDIR)/.lab-test-second
TEST_LAB_OFFSET  := 300
TEST_DEMO_OFFSET := 600
TEST_SECOND_OFFSET := 450
TEST_LAB_VARS := LAB_DIR=$(TEST_LAB_DIR) LAB_PORT_OFFSET=$(TEST_LAB_OFFSET) LAB_VARIANT_DIR=$(TEST_VARIANT_DIR) LAB_WORKER_DIR=$(TEST_WORKER_DIR) LAB_WORKER2_DIR=$(TEST_WORKER2_DIR) LAB_V1BETA1_DIR=$(TEST_V1BETA1_DIR) LAB_SECOND_DIR=$(TEST_SECOND_DIR) LAB_SECOND_OFFSET=$(TEST_SECOND_OFFSET)
# Controllers that integration suites start on the running lab themselves (lab.sh component NAME up), so `lab-up`
# does not build them; on a fresh machine `make test` builds them once here (KubeRay 3.5 min, the training operator
# 37 min wall measured at load 15-31, 4 min CPU), later runs find them in the cache.
SUITE_COMPONENTS := kuberay training_operator
# The integration suite on the labs you name (LAB_DIR, LAB_VARIANT_DIR, LAB_WORKER_DIR, LAB_WORKER2_DIR,
# LAB_V1BETA1_DIR) in two phases: the files that use the labs beside the main one, group by group, each lab stopped
# after the last group that uses it; then the other files in two streams, on the main lab and on a second lab it
# starts (LAB_SECOND_DIR, ports +LAB_SECOND_OFFSET) and stops.
integration-phases: collection
	@LAB_DIR=$(LAB_DIR) LAB_VARIANT_DIR=$(LAB_VARIANT_DIR) LAB_WORKER_DIR=$(LAB_WORKER_DIR) \
	  LAB_WORKER2_DIR=$(LAB_WORKER2_DIR) LAB_V1BETA1_DIR=$(LAB_V1BETA1_DIR) LAB_SECOND_DIR=$(LAB_SECOND_DIR) \
	  LAB_SECOND_OFFSET=$(LAB_SECOND_OFFSET) PYTEST_ARGS="$(PYTEST_ARGS)" bash tests/integration/run_phases.sh

TEST_LABS_DOWN := lab-v1beta1-down lab-worker2-down lab-worker-down lab-variant-down lab-down
test: venv
	@failed=""; t0=$$(date +%s); stage() { echo "=== $$1 (at $$(( $$(date +%s) - t0 ))s)"; }; \
	  $(MAKE) --no-print-directory collection || failed="$$failed collection"; \
	  stage "make demo (on $(TEST_DEMO_DIR), ports +$(TEST_DEMO_OFFSET)), beside it make unit"; \
	  LAB_DIR=$(TEST_DEMO_DIR) bash lab/lab.sh down >/dev/null 2>&1; \
	  ( set -o pipefail; $(MAKE) --no-print-directory -o collection demo LAB_DIR=$(TEST_DEMO_DIR) LAB_PORT_OFFSET=$(TEST_DEMO_OFFSET) 2>&1 | sed -u 's/^/[demo] /' ) & demo_pid=$$!; \
	  $(MAKE) --no-print-directory -o collection unit || failed="$$failed unit"; \
	  wait $$demo_pid || failed="$$failed demo"; \
	  LAB_DIR=$(TEST_DEMO_DIR) bash lab/lab.sh down || failed="$$failed demo-lab-down"; \
	  stage "lab/lab.sh build $(SUITE_COMPONENTS) (controllers the integration suites start themselves; cached after the first build)"; \
	  bash lab/lab.sh build $(SUITE_COMPONENTS) || failed="$$failed lab-build-suite-components"; \
	  $(MAKE) --no-print-directory $(TEST_LABS_DOWN) $(TEST_LAB_VARS) >/dev/null 2>&1; \
	  stage "labs (fresh: $(TEST_VARIANT_DIR) +$$(( $(TEST_LAB_OFFSET) + 100 )), $(TEST_V1BETA1_DIR) +$$(( $(TEST_LAB_OFFSET) + 50 )), $(TEST_LAB_DIR) +$(TEST_LAB_OFFSET); $(TEST_WORKER_DIR) +$$(( $(TEST_LAB_OFFSET) + 200 )), $(TEST_WORKER2_DIR) +$$(( $(TEST_LAB_OFFSET) + 250 ))) beside make sanity, make lint"; \
	  ( set -o pipefail; { $(MAKE) --no-print-directory lab-variant-up $(TEST_LAB_VARS) && $(MAKE) --no-print-directory lab-v1beta1-up $(TEST_LAB_VARS) && $(MAKE) --no-print-directory lab-up $(TEST_LAB_VARS); } 2>&1 | sed -u 's/^/[labs] /' ) & labs_pid=$$!; \
	  ( set -o pipefail; { $(MAKE) --no-print-directory lab-worker-up $(TEST_LAB_VARS) && $(MAKE) --no-print-directory lab-worker2-up $(TEST_LAB_VARS); } 2>&1 | sed -u 's/^/[workers] /' ) & workers_pid=$$!; \
	  for s in sanity lint; do stage "make $$s"; $(MAKE) --no-print-directory $$s || failed="$$failed $$s"; done; \
	  stage "waiting for the labs"; \
	  labs_ok=1; \
	  wait $$labs_pid || labs_ok=0; \
	  wait $$workers_pid || labs_ok=0; \
	  if [ $$labs_ok = 1 ]; then \
	    stage "make integration-phases"; $(MAKE) --no-print-directory -o collection integration-phases $(TEST_LAB_VARS) || failed="$$failed integration"; \
	    stage "make molecule"; $(MAKE) --no-print-directory -o collection molecule $(TEST_LAB_VARS) || failed="$$failed molecule"; \
	  else failed="$$failed lab-up"; fi; \
	  stage "labs down"; \
	  for t in $(TEST_LABS_DOWN); do $(MAKE) --no-print-directory $$t $(TEST_LAB_VARS) || failed="$$failed $$t"; done; \
	  LAB_DIR=$(TEST_SECOND_DIR) bash lab/lab.sh down || failed="$$failed second-lab-down"; \
	  stage "done"; \
	  if [ -n "$$failed" ]; then echo "=== FAILED stages:$$failed"; exit 1; fi; echo "=== all stages passed"

# The main job against the lab: install the operators, converge the example tenants, monitoring, a demo workload,
# validate (report + per-tenant table). playbooks/site.yml is the same without the demo workload.
# The lab inventory names the Prometheus of a lab at offset 0; -e gives it this lab's (ports move with LAB_PORT_OFFSET).
demo: lab-up collection
	source $(LAB_ENV) && export PATH=$(CURDIR)/$(VENV)/bin:$$PATH && \
	  ansible-playbook -i playbooks/inventory/lab playbooks/demo.yml -e "{\"gpuaas_prometheus\": {\"url\": \"$$GPUAAS_PROMETHEUS_URL\"}}"

# The supported ansible-core x Python matrix (docs/awx.md): per entry a cached venv in ~/.cache/gpuaas-matrix, then
# units, sanity-lite (compile, import, ansible-doc, syntax-check) and, when the lab is up, the AWX-shaped
# ansible-runner job (tests/integration/test_awx_runner.py). MATRIX="3.11:2.16 3.13:2.21", MATRIX_STAGES, MATRIX_REF=HEAD.
test-matrix: collection
	LAB_DIR=$${LAB_DIR:-$(CURDIR)/.lab} bash tests/matrix/matrix.sh

bench: lab-up collection
	source $(LAB_ENV) && $(PY) bench/tenants_bench.py $(BENCH_ARGS)

# Fair-sharing proof (issue 14): its own lab (.lab-fair, ports +500, Kueue only; the variants are full tenancy
# reconciles), the seeded trace replayed per variant, offline ideal/static, summary + SVGs in the output directory.
# A reduced run: make bench-fairness FAIRNESS_ARGS="--jobs 120 --horizon 160 --out bench/fairness/results/reduced"
bench-fairness: collection
	@LAB_DIR=$(CURDIR)/.lab-fair LAB_PORT_OFFSET=500 LAB_COMPONENTS=kueue bash lab/lab.sh up
	@source $(CURDIR)/.lab-fair/env && $(PY) bench/fairness/run.py $(FAIRNESS_ARGS); rc=$$?; \
	  LAB_DIR=$(CURDIR)/.lab-fair bash lab/lab.sh down; exit $$rc

# Issue 12: idle -> zero -> borrowed -> wake -> reclaimed, >= 5 cycles on the real KEDA, Kueue and Prometheus of its own
# lab (.lab-autoscaling, ports +900); results in bench/autoscaling/results/summary.json and docs/benchmarks.md.
.PHONY: bench-autoscaling
bench-autoscaling: collection
	@LAB_DIR=$(CURDIR)/.lab-autoscaling LAB_PORT_OFFSET=900 LAB_COMPONENTS="kueue keda" bash lab/lab.sh up
	@source $(CURDIR)/.lab-autoscaling/env && $(PY) bench/autoscaling/run.py $(AUTOSCALING_ARGS); rc=$$?; \
	  LAB_DIR=$(CURDIR)/.lab-autoscaling bash lab/lab.sh down; exit $$rc

# Issue 25: idle RayCluster reclaimed -> borrowed -> wake -> workers re-admitted, >= 5 cycles on the real KubeRay (started
# by the bench), Kueue and Prometheus of its own lab (.lab-ray-wake, ports +1050); results in bench/results/ray-wake.json.
.PHONY: bench-ray-wake
bench-ray-wake: collection
	@LAB_DIR=$(CURDIR)/.lab-ray-wake LAB_PORT_OFFSET=1050 LAB_COMPONENTS=kueue bash lab/lab.sh up
	@source $(CURDIR)/.lab-ray-wake/env && $(PY) bench/ray_wake/run.py $(RAY_WAKE_ARGS); rc=$$?; \
	  LAB_DIR=$(CURDIR)/.lab-ray-wake bash lab/lab.sh down; exit $$rc

clean: lab-down
	rm -rf .build $(VENV)
