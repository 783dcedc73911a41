# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures for integration tests against the running local lab (`make lab-up`; never a mocked API).

`lab`            where the lab is (kubeconfig, apiserver, CA, Prometheus URL, audit log)
`kube`           a kubernetes.dynamic.DynamicClient as the lab admin
`run_playbook`   runs ansible-playbook with the installed collection and returns a PlaybookRun
`audit_writes`   context manager: which write requests reached the apiserver inside the block

Plain helpers (``from conftest import ...``): ``wait_until``, ``local_play`` (the playbook header), ``kube_get``,
``kube_items``, ``kube_resource`` (the dynamic client), ``create_namespace`` (and wait until Kueue's pod webhook
sees it), ``promql`` (the lab's Prometheus), ``site_inventory`` (an inventory directory), ``kwok_job`` (a one-pod
Job KWOK runs for an hour), ``expect_steady`` (reach a state and hold it) and ``active_cluster_queues``. For the
idle-reclaim suites (RayClusters, Notebooks): ``lender_borrower_inventory`` (their two-tenant cohort),
``limited_tenancy`` (made for a block, removed after it), ``grant_tenant_users`` (a workload kind's Role for alice's
group), ``idle_reclaim_run`` (one scheduled run) and ``idle_reclaim_account`` (the schedule's account and a token).

The variant lab (`make lab-variant-up`: LAB_FLAVOR=openshift with the real Kueue installed through the collection's
OLM path and run from the Red Hat operand by the Kueue operator SIMULATOR, ports +100, LAB_DIR=.lab-variant) runs
beside the main lab; `variant_lab`, `variant_kube`, `variant_run_playbook` and `variant_audit_writes` are the same
fixtures against it — for the OpenShift paths (platform detection, OLM, the Red Hat operands, OpenShift AI). The
Kueue-v1beta1 path has a core-only lab of its own (`make lab-v1beta1-up`, GPUAAS_V1BETA1_LAB_DIR, ports +50).
MultiKueue (issue 27): the main lab is the manager, `worker_lab`/`worker_kube` worker A (`make lab-worker-up`,
GPUAAS_WORKER_LAB_DIR, ports +200), `worker2_lab`/`worker2_kube` worker B (`make lab-worker2-up`,
GPUAAS_WORKER2_LAB_DIR, ports +250); ``apiserver_cmdline``/``start_apiserver`` stop and restart a lab's API server.
"""
from __future__ import annotations

import contextlib
import json
import os
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = REPO / ".venv" / "bin"
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}
# Writers that belong to the lab itself or to Kubernetes' own controllers, not to the code under test.
LAB_USERS_PREFIXES = ("system:", "lab:")


@dataclass
class Lab:
    dir: Path
    kubeconfig: str
    apiserver: str
    ca: str
    prometheus_url: str
    audit_log: str
    flavor: str
    kueue_api: str
    tenant_context: str = "lab-tenant"
    admin_context: str = "lab-admin"


def wait_until(predicate, timeout: float, what: str, interval: float = 0.5):
    """Poll ``predicate`` until it returns something truthy (returned) or ``timeout`` seconds pass (AssertionError
    naming ``what`` and the last value). The one wait helper of the integration suite: ``from conftest import
    wait_until``."""
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError("timed out after %ss waiting for %s (last: %r)" % (timeout, what, last))


# The play every playbook of the suite starts with: the collection's modules run on the controller, no facts.
LOCAL_PLAY = "- hosts: localhost\n  connection: local\n  gather_facts: false\n"


def local_play(section: str) -> str:
    """A one-play playbook on localhost: ``section`` is the play's ``tasks:`` or ``roles:`` block, indented by two
    spaces as under ``- hosts:``. The one playbook header of the suite: ``from conftest import local_play``."""
    return LOCAL_PLAY + section.lstrip("\n")


# The first flavor of an inventory, then only its tenants (limit_tenants: the other suites' tenants on the shared lab
# stay): the idle-reclaim suites' tenancy (RayClusters, Notebooks), given the inventory as extra vars.
LIMITED_TENANTS_PLAY = local_play("""
  tasks:
    - gpuaas.platform.resource_flavor:
        name: "{{ gpuaas_flavors[0].name }}"
        node_labels: "{{ gpuaas_flavors[0].node_labels }}"
        tolerations: "{{ gpuaas_flavors[0].tolerations }}"
    - gpuaas.platform.tenants:
        flavors: "{{ gpuaas_flavors }}"
        cohorts: "{{ gpuaas_cohorts }}"
        tenants: "{{ gpuaas_tenants }}"
        prometheus: "{{ gpuaas_prometheus }}"
        limit_tenants: "{{ gpuaas_tenants | map(attribute='name') | list }}"
""")


def lender_borrower_inventory(flavor: str, cohort: str, lender: str, borrower: str, lender_quota: dict[str, Any],
                              lender_entries: list[dict], borrower_entries: list[dict]) -> dict[str, Any]:
    """The idle-reclaim suites' tenancy (for LIMITED_TENANTS_PLAY): one flavor of the lab's H100 nodes (their GPU
    taint tolerated), one cohort, two tenants of one namespace each, named after the tenant. ``lender``: its users the
    group nlp-team (alice), ``lender_quota`` of its own, reclaiming Any; ``borrower``: 0 GPUs, 4 CPUs and 8Gi of its
    own, so its GPU work runs on borrowed quota. Each opts in its autoscaling entries."""
    return {
        "gpuaas_flavors": [{"name": flavor, "node_labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}],
        "gpuaas_cohorts": [{"name": cohort}],
        "gpuaas_tenants": [
            {"name": lender, "namespaces": [lender], "cohort": cohort, "access": {"users": ["nlp-team"]},
             "quotas": [{"flavor": flavor, "resources": dict(lender_quota)}],
             "preemption": {"reclaim_within_cohort": "Any"}, "autoscaling": list(lender_entries)},
            {"name": borrower, "namespaces": [borrower], "cohort": cohort,
             "quotas": [{"flavor": flavor, "resources": {"nvidia.com/gpu": 0, "cpu": 4, "memory": "8Gi"}}],
             "autoscaling": list(borrower_entries)},
        ],
    }


def lab_kubectl(lab, *args: str, context: str = "lab-admin", stdin: str | None = None) -> subprocess.CompletedProcess:
    """The lab's kubectl as ``context`` (a tenant user's context to act as that user); never raises on failure."""
    cmd = [str(lab.dir / "bin" / "kubectl"), "--kubeconfig", lab.kubeconfig, "--context", context]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=60, input=stdin, check=False)


def condition(obj: dict | None, ctype: str) -> dict:
    """The status condition ``ctype`` of ``obj`` ({} when absent)."""
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions") or [] if c["type"] == ctype), {})


def true_since(obj: dict | None, ctype: str) -> float | None:
    """When the status condition ``ctype`` of ``obj`` became True (epoch seconds); None unless it is True."""
    import datetime as dt

    found = condition(obj, ctype)
    if found.get("status") != "True":
        return None
    return dt.datetime.strptime(found["lastTransitionTime"], "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=dt.timezone.utc).timestamp()


def cq_gpu_usage(kube, kueue_api_version: str, cq: str) -> int:
    """nvidia.com/gpu in use in ClusterQueue ``cq`` (its status.flavorsUsage, every flavor)."""
    status = (kube_get(kube, kueue_api_version, "ClusterQueue", cq) or {}).get("status") or {}
    return sum(int(r["total"]) for fu in status.get("flavorsUsage") or [] for r in fu["resources"]
               if r["name"] == "nvidia.com/gpu")


def idle_reclaim_run(run_playbook, lab, inventory: dict[str, Any], scrape: int, tenants: list[str]) -> dict:
    """One scheduled run of playbooks/ray_idle_reclaim.yml (RayClusters and Notebooks) for ``tenants``: the
    module's per-object result by name."""
    run = run_playbook(os.path.join(REPO, "playbooks", "ray_idle_reclaim.yml"),
                       extra_vars=dict(inventory, gpuaas_prometheus={"url": lab.prometheus_url},
                                       gpuaas_ray_reclaim_scrape_interval=scrape, gpuaas_ray_reclaim_tenants=tenants))
    assert run.rc == 0, run.explain()
    [task] = run.task_results("Reclaim or wake")
    return {c["name"]: c for c in task["clusters"]}


def grant_tenant_users(lab, namespace: str, role: str, api_group: str, resource: str, field_manager: str,
                       group: str = "nlp-team") -> None:
    """As the cluster admin: a Role ``role`` in ``namespace`` with every verb on ``resource`` of ``api_group``, bound
    to the user group ``group`` (the lab's tenant user alice is in nlp-team). What a platform grants through
    aggregated roles the lab does not install (Kubeflow / OpenShift AI for Notebooks; KubeRay ships none for
    ray.io)."""
    rbac = "rbac.authorization.k8s.io"
    role_obj = {"apiVersion": rbac + "/v1", "kind": "Role", "metadata": {"name": role, "namespace": namespace},
                "rules": [{"apiGroups": [api_group], "resources": [resource],
                           "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}]}
    binding = {"apiVersion": rbac + "/v1", "kind": "RoleBinding", "metadata": {"name": role, "namespace": namespace},
               "roleRef": {"apiGroup": rbac, "kind": "Role", "name": role},
               "subjects": [{"apiGroup": rbac, "kind": "Group", "name": group}]}
    for obj in (role_obj, binding):
        out = lab_kubectl(lab, "apply", "--server-side", "--field-manager=" + field_manager, "-f", "-",
                          stdin=json.dumps(obj))
        assert out.returncode == 0, out.stderr


@contextlib.contextmanager
def limited_tenancy(lab, kube, run_playbook, inventory: dict[str, Any]) -> Iterator[None]:
    """For the body of the block: ``inventory``'s tenants made by LIMITED_TENANTS_PLAY (with the lab's Prometheus).
    Afterwards, also when the play or the body failed: the tenants' namespaces deleted and waited for until gone (180
    s), then their ClusterQueues, the cohorts and the flavors (one already gone is fine)."""
    from kubernetes.dynamic.exceptions import NotFoundError

    kueue = "kueue.x-k8s.io/" + lab.kueue_api
    tenants = inventory["gpuaas_tenants"]
    namespaces = [ns for tenant in tenants for ns in tenant["namespaces"]]
    try:
        run = run_playbook(LIMITED_TENANTS_PLAY, extra_vars=dict(inventory, gpuaas_prometheus={"url": lab.prometheus_url}))
        assert run.rc == 0, run.explain()
        yield
    finally:
        for ns in namespaces:
            try:
                kube_resource(kube, "v1", "Namespace").delete(name=ns)
            except NotFoundError:
                pass
        wait_until(lambda: all(kube_get(kube, "v1", "Namespace", n) is None for n in namespaces), 180,
                   "the test namespaces to be gone")
        for kind, name in ([("ClusterQueue", t["name"]) for t in tenants]
                           + [("Cohort", c["name"]) for c in inventory.get("gpuaas_cohorts") or []]
                           + [("ResourceFlavor", f["name"]) for f in inventory["gpuaas_flavors"]]):
            try:
                kube_resource(kube, kueue, kind).delete(name=name)
            except NotFoundError:
                pass


@contextlib.contextmanager
def idle_reclaim_account(lab, run_playbook, inventory: dict[str, Any], name: str, namespace: str) -> Iterator[str]:
    """The least-privilege account of the ray_idle_reclaim schedule (RayClusters and Notebooks), made by
    playbooks/automation_rbac.yml from ``inventory`` as the admin; the block gets a one-hour token of it. Afterwards
    what the role made is deleted by its label (the role's own state=absent path is test_least_privilege's
    teardown), and the account's namespace."""
    setup = run_playbook(os.path.join(REPO, "playbooks", "automation_rbac.yml"), extra_vars=dict(
        inventory, gpuaas_automation_rbac_accounts=[{"name": name, "namespace": namespace,
                                                     "playbooks": ["ray_idle_reclaim"]}]))
    try:
        assert setup.rc == 0, setup.explain()
        out = lab_kubectl(lab, "-n", namespace, "create", "token", name, "--duration=1h")
        assert out.returncode == 0, out.stderr
        yield out.stdout.strip()
    finally:
        for kinds in ("clusterroles,clusterrolebindings,validatingadmissionpolicies,validatingadmissionpolicybindings",
                      "rolebindings"):
            lab_kubectl(lab, "delete", kinds, "-A", "-l", "app.kubernetes.io/component=automation-rbac", "--wait=false")
        lab_kubectl(lab, "delete", "namespace", namespace, "--ignore-not-found", "--wait=false")


def request_as_token(lab, token: str, method: str, path: str, body: dict | None = None,
                     content_type: str = "application/apply-patch+yaml") -> tuple[int, str]:
    """One request as ``token`` (status, body): exactly the verb the account holds, no GET first."""
    request = urllib.request.Request(lab.apiserver + path, data=json.dumps(body).encode() if body else None,
                                     method=method, headers={"Authorization": "Bearer " + token,
                                                             "Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, context=ssl.create_default_context(cafile=lab.ca), timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def h100_tenant_play(flavor: str, tenant: str, namespace: str, resources: dict[str, Any],
                     access: dict[str, Any] | None = None) -> str:
    """A playbook that makes the ResourceFlavor ``flavor`` for the lab's H100 nodes (their GPU taint tolerated) and
    reconciles only ``tenant``: one namespace, a quota of ``resources`` in that flavor, and ``access`` if given."""
    entry: dict[str, Any] = {"name": tenant, "namespaces": [namespace],
                             "quotas": [{"flavor": flavor, "resources": resources}]}
    if access is not None:
        entry["access"] = access
    return local_play("""
  tasks:
    - gpuaas.platform.resource_flavor:
        name: %s
        node_labels: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
        tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
    - gpuaas.platform.tenants:
        flavors: [{name: %s}]
        tenants: [%s]
        limit_tenants: [%s]
""" % (json.dumps(flavor), json.dumps(flavor), json.dumps(entry), json.dumps(tenant)))


def kube_resource(kube, api_version: str, kind: str):
    """The dynamic client's resource for a served kind (ResourceNotFoundError when the cluster does not serve it)."""
    return kube.resources.get(api_version=api_version, kind=kind)


def kube_get(kube, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict | None:
    """One object as a dict, None when it does not exist (a kind that is not served still raises)."""
    from kubernetes.dynamic.exceptions import NotFoundError

    try:
        return kube_resource(kube, api_version, kind).get(name=name, namespace=namespace).to_dict()
    except NotFoundError:
        return None


def create_namespace(kube, name: str, labels: dict[str, str] | None = None, timeout: float = 60) -> None:
    """Create a Namespace and return once Kueue's pod webhook sees it.

    Kueue's mutating pod webhook (mpod.kb.io) reads every new pod's Namespace from its informer cache
    (kueue pkg/controller/jobs/pod/pod_webhook.go), so a pod created right after its namespace is refused with
    'Namespace "x" not found' until that cache catches up: on a real cluster too, and in CI (five labs on two
    cores) the lag outlasted the tests' first pod. A server-side dry run of a pod goes through the same webhook and
    writes nothing; any answer but that NotFound means Kueue has seen the namespace (or does not run)."""
    from kubernetes.dynamic.exceptions import NotFoundError

    kube_resource(kube, "v1", "Namespace").create(body={"metadata": {"name": name, "labels": dict(labels or {})}})
    pods = kube_resource(kube, "v1", "Pod")
    probe = {"metadata": {"name": "kueue-cache-probe"},
             "spec": {"containers": [{"name": "probe", "image": "registry.invalid/probe:1"}]}}

    def seen() -> bool:
        try:
            pods.create(namespace=name, body=probe, dry_run="All")
        except NotFoundError as err:
            if "Namespace" not in str(err.body):
                raise
            return False
        except Exception:  # refused by an admission policy etc.: the webhook ran past its namespace read
            return True
        return True

    wait_until(seen, timeout, "Kueue's pod webhook to see namespace %s" % name)


def kube_items(kube, api_version: str, kind: str, namespace: str | None = None,
               label_selector: str | None = None) -> list[dict]:
    """The objects of a kind (in ``namespace``, matching ``label_selector``) as dicts."""
    found = kube_resource(kube, api_version, kind).get(namespace=namespace, label_selector=label_selector)
    return [item.to_dict() for item in found.items]


def site_inventory(directory: Path, group_vars: dict[str, Any]) -> Path:
    """An inventory directory as a site keeps it (``group_vars/all/tenants.yml`` plus a localhost ``hosts.yml``);
    returns the hosts file to pass as ``inventory=``."""
    import yaml

    group_vars_dir = directory / "group_vars" / "all"
    group_vars_dir.mkdir(parents=True, exist_ok=True)
    (group_vars_dir / "tenants.yml").write_text(yaml.safe_dump(group_vars, sort_keys=False))
    (directory / "hosts.yml").write_text("all:\n  hosts:\n    localhost:\n      ansible_connection: local\n")
    return directory / "hosts.yml"


def kwok_job(requests: dict[str, str], name: str | None = None, generate_name: str | None = None,
             queue: str = "default", labels: dict[str, str] | None = None,
             annotations: dict[str, str] | None = None, image: str = "registry.invalid/work:1",
             tolerations: list[dict] | None = None, grace_seconds: int = 1) -> dict[str, Any]:
    """A one-pod Job in LocalQueue ``queue`` whose pod runs for an hour on a KWOK node (KWOK's completion stage);
    ``annotations`` go to the pod template (e.g. ``lab.gpuaas.io/gpu-util`` for the SIMULATED DCGM exporter);
    ``grace_seconds`` is the pod's terminationGracePeriodSeconds."""
    metadata: dict[str, Any] = {"labels": {"kueue.x-k8s.io/queue-name": queue, **(labels or {})}}
    if name:
        metadata["name"] = name
    if generate_name:
        metadata["generateName"] = generate_name
    pod_spec: dict[str, Any] = {"restartPolicy": "Never", "terminationGracePeriodSeconds": grace_seconds,
                                "containers": [{"name": "work", "image": image,
                                                "resources": {"requests": dict(requests), "limits": dict(requests)}}]}
    if tolerations:
        pod_spec["tolerations"] = tolerations
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
            "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0, "template": {
                "metadata": {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "1h", **(annotations or {})}},
                "spec": pod_spec}}}


def expect_steady(count: Any, expected: Any, what: str, timeout: float, settle: float) -> None:
    """Wait until ``count()`` equals ``expected``, then require it to hold for ``settle`` seconds: a scheduler that
    reaches the right state and then moves past it (a late admission, an extra preemption) fails."""
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        last = count()
        if last == expected:
            held = time.monotonic() + settle
            while time.monotonic() < held:
                time.sleep(1)
                now = count()
                assert now == expected, "%s: reached %s but then moved to %s" % (what, expected, now)
            return
        time.sleep(1)
    raise AssertionError("%s: expected %s, last seen %s after %ss" % (what, expected, last, timeout))


def active_cluster_queues(kube, api_version: str, queues: list[str]) -> int:
    """How many of ``queues`` exist with condition Active=True."""
    active = 0
    for queue in queues:
        cluster_queue = kube_get(kube, api_version, "ClusterQueue", queue)
        conditions = {c["type"]: c["status"] for c in ((cluster_queue or {}).get("status") or {}).get("conditions") or []}
        active += conditions.get("Active") == "True"
    return active


def component_enabled(lab: Lab, name: str) -> bool:
    """False only when the lab was brought up without this component on purpose (and it was not started
    by hand with `bash lab/components/<name>.sh up`)."""
    listed = lab.dir / "components"
    if not listed.exists() or name in listed.read_text().split():
        return True
    pidfiles = list((lab.dir / "pids").glob("%s*.pid" % name))  # kueue.pid, keda-operator.pid, ...
    return any(os.path.exists("/proc/%s" % p.read_text().strip()) for p in pidfiles)


def require_component(lab: Lab, name: str) -> None:
    if not component_enabled(lab, name):
        pytest.skip("the lab runs without %s (LAB_COMPONENTS=%s)" % (name, (lab.dir / "components").read_text().strip()))


def lab_port_offset(lab: Lab) -> int:
    for line in (lab.dir / "env").read_text().splitlines():
        if line.startswith("export LAB_PORT_OFFSET="):
            return int(line.split("=", 1)[1])
    return 0


def lab_component(lab: Lab, name: str, action: str) -> subprocess.CompletedProcess:
    """``lab.sh component NAME up|down|status`` on this lab."""
    env = dict(os.environ, LAB_DIR=str(lab.dir), LAB_PORT_OFFSET=str(lab_port_offset(lab)))
    return subprocess.run(["bash", str(REPO / "lab" / "lab.sh"), "component", name, action], env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def suite_component(lab: Lab, name: str, what: str) -> Iterator[None]:
    """For a module-scoped fixture (``yield from suite_component(...)``): the real controller ``name`` started on the
    lab for the suite when the lab does not run it (make test's labs start only Kueue and KEDA; other suites' objects
    of its kinds are Kueue-only objects), stopped again afterwards. A controller that cannot start is a failure here,
    not a skip."""
    started = False
    if not component_enabled(lab, name):
        out = lab_component(lab, name, "up")
        assert out.returncode == 0, "%s did not start on the lab: %s%s" % (what, out.stdout, out.stderr)
        started = True
    require_component(lab, name)
    yield
    if started:
        out = lab_component(lab, name, "down")
        assert out.returncode == 0, out.stdout + out.stderr


def promql(lab: Lab, query: str) -> list[dict]:
    """The result vector of an instant query to the lab's Prometheus (AssertionError unless it succeeded)."""
    import urllib.parse
    import urllib.request

    url = "%s/api/v1/query?%s" % (lab.prometheus_url, urllib.parse.urlencode({"query": query}))
    with urllib.request.urlopen(url, timeout=10) as response:
        body = json.load(response)
    assert body["status"] == "success", body
    return body["data"]["result"]


def _lab_from_env(lab_dir: Path | None = None) -> Lab:
    lab_dir = lab_dir or Path(os.environ.get("LAB_DIR", REPO / ".lab"))
    env_file = lab_dir / "env"
    if not env_file.exists():
        pytest.exit("The lab is not up (%s missing): run `make lab-up` (and `make lab-variant-up` for the "
                    "variant lab) first." % env_file, returncode=3)
    values: dict[str, str] = {}
    for line in env_file.read_text().splitlines():
        if line.startswith("export ") and "=" in line:
            k, v = line[len("export "):].split("=", 1)
            values[k] = v
    return Lab(
        dir=lab_dir,
        kubeconfig=values["KUBECONFIG"],
        apiserver=values["LAB_APISERVER"],
        ca=values["LAB_CA"],
        prometheus_url=values["GPUAAS_PROMETHEUS_URL"],
        audit_log=values["LAB_AUDIT_LOG"],
        flavor=values.get("LAB_FLAVOR", "kubernetes"),
        kueue_api=values.get("LAB_KUEUE_API", "v1beta2"),
    )


@pytest.fixture(scope="session")
def lab() -> Lab:
    return _lab_from_env()


def variant_lab_dir() -> Path:
    """The variant lab's directory: LAB_VARIANT_DIR (make test: .lab-test-variant), else .lab-variant."""
    return Path(os.environ.get("LAB_VARIANT_DIR") or REPO / ".lab-variant")


@pytest.fixture(scope="session")
def variant_lab() -> Lab:
    return _lab_from_env(variant_lab_dir())


def _dynamic_client(lab: Lab):
    from kubernetes import config, dynamic

    return dynamic.DynamicClient(config.new_client_from_config(config_file=lab.kubeconfig, context=lab.admin_context))


@pytest.fixture(scope="session")
def kube(lab: Lab):
    return _dynamic_client(lab)


@pytest.fixture(scope="session")
def variant_kube(variant_lab: Lab):
    return _dynamic_client(variant_lab)


def _worker_lab_from_env(variable: str, make_target: str) -> Lab:
    lab_dir = os.environ.get(variable)
    if not lab_dir:
        pytest.skip("needs a MultiKueue worker lab beside the manager lab: `make %s`, then %s=<its LAB_DIR> "
                    "(docs/multicluster.md)" % (make_target, variable))
    return _lab_from_env(Path(lab_dir))


@pytest.fixture(scope="session")
def worker_lab() -> Lab:
    """MultiKueue worker A (`make lab-worker-up`, ports +200): GPUAAS_WORKER_LAB_DIR."""
    return _worker_lab_from_env("GPUAAS_WORKER_LAB_DIR", "lab-worker-up")


@pytest.fixture(scope="session")
def worker_kube(worker_lab: Lab):
    return _dynamic_client(worker_lab)


@pytest.fixture(scope="session")
def worker2_lab() -> Lab:
    """MultiKueue worker B (`make lab-worker2-up`, ports +250): GPUAAS_WORKER2_LAB_DIR."""
    return _worker_lab_from_env("GPUAAS_WORKER2_LAB_DIR", "lab-worker2-up")


@pytest.fixture(scope="session")
def worker2_kube(worker2_lab: Lab):
    return _dynamic_client(worker2_lab)


def apiserver_cmdline(lab: Lab) -> tuple[int, list[str]]:
    """The pid and command line of the lab's running kube-apiserver (to start the same one again)."""
    pid = int((lab.dir / "pids" / "kube-apiserver.pid").read_text().strip())
    cmdline = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
    return pid, [c.decode() for c in cmdline if c]


def process_gone(pid: int) -> bool:
    try:
        return "zombie" in Path("/proc/%d/status" % pid).read_text()
    except OSError:
        return True


def start_apiserver(lab: Lab, cmdline: list[str]) -> None:
    """Start the lab's kube-apiserver again with ``cmdline`` (pidfile updated: lab.sh down/up still work) and wait for
    /readyz."""
    log = open(lab.dir / "logs" / "kube-apiserver.log", "ab")  # noqa: SIM115 - handed to the process
    proc = subprocess.Popen(cmdline, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    (lab.dir / "pids" / "kube-apiserver.pid").write_text("%d\n" % proc.pid)
    kubectl = [str(lab.dir / "bin" / "kubectl"), "--kubeconfig", lab.kubeconfig, "--context", lab.admin_context]
    wait_until(lambda: subprocess.run(kubectl + ["get", "--raw", "/readyz"], capture_output=True, timeout=30,
                                      check=False).returncode == 0, 120, "kube-apiserver /readyz", 1.0)


@dataclass
class PlaybookRun:
    rc: int
    stdout: str
    stderr: str
    report: dict[str, Any] = field(default_factory=dict)

    @property
    def stats(self) -> dict[str, dict[str, int]]:
        return self.report.get("stats", {})

    @property
    def changed(self) -> int:
        return sum(h.get("changed", 0) for h in self.stats.values())

    @property
    def failed(self) -> int:
        return sum(h.get("failures", 0) + h.get("unreachable", 0) for h in self.stats.values())

    def task_results(self, name_substring: str) -> list[dict[str, Any]]:
        """Module results (one per host) of every task whose name contains name_substring."""
        out = []
        for play in self.report.get("plays", []):
            for task in play.get("tasks", []):
                if name_substring in task.get("task", {}).get("name", ""):
                    out.extend(task.get("hosts", {}).values())
        return out

    def explain(self) -> str:
        return "rc=%s\n--- stdout ---\n%s\n--- stderr ---\n%s" % (self.rc, self.stdout[-6000:], self.stderr[-3000:])


LAB_INVENTORY = (REPO / "playbooks" / "inventory" / "lab").resolve()


def _playbook_runner(lab: Lab):
    collections_path = "%s:%s" % (REPO / ".build", ":".join(str(p) for p in (REPO / ".venv" / "lib").glob("python3*/site-packages")))

    def _run(playbook: str | Path, extra_vars: dict | None = None, check: bool = False, diff: bool = False,
             inventory: str | Path | None = None, env: dict | None = None, limit: str | None = None,
             timeout: int = 600) -> PlaybookRun:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(playbook) if not str(playbook).lstrip().startswith(("-", "#")) and "\n" not in str(playbook) else None
            if path is None:
                path = Path(tmp) / "playbook.yml"
                path.write_text(str(playbook))
            cmd = [str(VENV_BIN / "ansible-playbook"), str(path)]
            cmd += ["-i", str(inventory) if inventory else "localhost,"]
            if inventory and Path(inventory).resolve() == LAB_INVENTORY and "gpuaas_prometheus" not in (extra_vars or {}):
                # the lab inventory names the Prometheus of a lab at offset 0; this lab's ports may be moved
                # (make test: +300), and its KEDA triggers must never read another lab's Prometheus
                extra_vars = dict(extra_vars or {}, gpuaas_prometheus={"url": lab.prometheus_url})
            if extra_vars:
                vars_file = Path(tmp) / "extra_vars.json"
                vars_file.write_text(json.dumps(extra_vars))
                cmd += ["-e", "@%s" % vars_file]
            if check:
                cmd.append("--check")
            if diff:
                cmd.append("--diff")
            if limit:
                cmd += ["--limit", limit]
            run_env = dict(os.environ)
            run_env.update({
                "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
                "ANSIBLE_COLLECTIONS_PATH": collections_path,
                "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
                "ANSIBLE_CALLBACK_RESULT_FORMAT": "json",
                "ANSIBLE_LOCALHOST_WARNING": "false",
                "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false",
                "ANSIBLE_PYTHON_INTERPRETER": str(VENV_BIN / "python"),
                "KUBECONFIG": lab.kubeconfig,
                "K8S_AUTH_KUBECONFIG": lab.kubeconfig,
                # what sourcing this lab's env file sets: the lab inventory's lab-only names follow its flavour
                "LAB_FLAVOR": lab.flavor,
                "GPUAAS_PROMETHEUS_URL": lab.prometheus_url,
                "PATH": "%s:%s:%s" % (lab.dir / "bin", VENV_BIN, os.environ.get("PATH", "")),
            })
            run_env.update(env or {})
            proc = subprocess.run(cmd, capture_output=True, text=True, env=run_env, timeout=timeout, cwd=str(REPO), check=False)
            report: dict[str, Any] = {}
            start = proc.stdout.find("{")
            if start >= 0:
                try:
                    report = json.loads(proc.stdout[start:])
                except ValueError:
                    report = {}
            return PlaybookRun(proc.returncode, proc.stdout, proc.stderr, report)

    return _run


@pytest.fixture(scope="session")
def run_playbook(lab: Lab):
    return _playbook_runner(lab)


@pytest.fixture(scope="session")
def variant_run_playbook(variant_lab: Lab):
    return _playbook_runner(variant_lab)


def audit_events_after(audit_log: str, offset: int) -> list[dict[str, Any]]:
    """Every event the API server wrote to ``audit_log`` after byte ``offset`` (a line that is not JSON is skipped).
    The one reader of the lab's audit log: ``from conftest import audit_events_after``."""
    # the apiserver writes the audit log in blocking mode, but give a slow machine a moment
    time.sleep(0.5)
    events = []
    with open(audit_log, encoding="utf-8") as f:
        f.seek(offset)
        for line in f:
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
    return events


def completed_write(event: dict[str, Any]) -> bool:
    """A write request (WRITE_VERBS) as it completed (an event logged without a stage counts as completed)."""
    return event.get("verb") in WRITE_VERBS and event.get("stage") in (None, "ResponseComplete")


class AuditWindow:
    """Write requests in the audit log during a block. ``events`` / ``dry_run_events``: those of the code under test
    (every user but Kubernetes' own identities and the lab's); ``all_events``: every non-dry-run write, whoever made
    it - ServiceAccounts are ``system:serviceaccount:...`` users, so a test of an automation account reads these
    (``by_user``)."""

    def __init__(self, audit_log: str):
        self.audit_log = audit_log
        self.offset = 0
        self.events: list[dict[str, Any]] = []
        self.dry_run_events: list[dict[str, Any]] = []
        self.all_events: list[dict[str, Any]] = []

    def __enter__(self) -> "AuditWindow":
        self.offset = os.path.getsize(self.audit_log)
        return self

    def __exit__(self, *exc) -> None:
        for ev in audit_events_after(self.audit_log, self.offset):
            if ev.get("verb") not in WRITE_VERBS:
                continue
            user = ev.get("user", {}).get("username", "")
            if "dryRun=All" not in ev.get("requestURI", ""):
                self.all_events.append(ev)
            if user.startswith(LAB_USERS_PREFIXES):
                continue
            if "dryRun=All" in ev.get("requestURI", ""):
                self.dry_run_events.append(ev)
            else:
                self.events.append(ev)

    def by_user(self) -> dict[str, list[str]]:
        """Every non-dry-run write of the window as ``"verb URI -> status code"``, by user name."""
        out: dict[str, list[str]] = {}
        for ev in self.all_events:
            out.setdefault(ev.get("user", {}).get("username", ""), []).append("%s %s -> %s" % (
                ev["verb"], ev["requestURI"], ev.get("responseStatus", {}).get("code")))
        return out

    def describe(self) -> str:
        lines = ["%s %s by %s -> %s" % (e["verb"], e["requestURI"], e["user"].get("username"),
                                        e.get("responseStatus", {}).get("code")) for e in self.events]
        return "\n".join(lines)


def _audit_window_factory(lab: Lab):
    @contextlib.contextmanager
    def _window() -> Iterator[AuditWindow]:
        w = AuditWindow(lab.audit_log)
        with w:
            yield w

    return _window


@pytest.fixture
def audit_writes(lab: Lab):
    return _audit_window_factory(lab)


@pytest.fixture
def variant_audit_writes(variant_lab: Lab):
    return _audit_window_factory(variant_lab)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # pylint: disable=unused-argument
    """In `make test` (GPUAAS_INTEGRATION_NO_SKIP=1) every lab and controller is up: a test that skips because one is
    missing or crashed is a failure, not a skip. Run by hand on a reduced lab (LAB_COMPONENTS), the skips stay."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail") and os.environ.get("GPUAAS_INTEGRATION_NO_SKIP") == "1":
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = "skipped in make test, where every lab component must run: %s" % reason
