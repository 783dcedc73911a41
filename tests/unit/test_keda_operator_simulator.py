# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab's Custom Metrics Autoscaler operator SIMULATOR translates the ``KedaController`` as
openshift/custom-metrics-autoscaler-operator does (expected values written from that repository @ 3d37f650:
internal/controller/keda/kedacontroller_controller.go, internal/controller/keda/transform/transform.go,
resources/keda.yaml, api/keda/v1alpha1/kedacontroller_types.go); the lab run is
tests/integration/test_openshift_keda.py."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SIM_PATH = Path(__file__).resolve().parents[2] / "lab" / "simulators" / "keda_operator_simulator.py"
SPEC = importlib.util.spec_from_file_location("keda_operator_simulator", SIM_PATH)
sim = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(sim)  # type: ignore[union-attr]


def operand(spec: dict, name: str = "keda", namespace: str = "openshift-keda") -> dict:
    return {"apiVersion": "keda.sh/v1alpha1", "kind": "KedaController",
            "metadata": {"name": name, "namespace": namespace, "uid": "0b6f-uid", "generation": 1}, "spec": spec}


def by_kind(objects: list) -> dict:
    return {o["kind"]: o for o in objects}


def test_the_collections_keda_controller_becomes_the_operators_keda_operator_deployment():
    # the keda role's spec on the lab inventory: watch every namespace
    objects = by_kind(sim.translate(operand({"watchNamespace": ""}), "2.20.2"))
    assert set(objects) == {"ServiceAccount", "Deployment"}
    sa, deploy = objects["ServiceAccount"], objects["Deployment"]
    assert (sa["metadata"]["name"], sa["metadata"]["namespace"]) == ("keda-operator", "openshift-keda")
    assert (deploy["metadata"]["name"], deploy["metadata"]["namespace"]) == ("keda-operator", "openshift-keda")
    pod = deploy["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "keda-operator"  # resources/keda.yaml: every KEDA Deployment runs as it
    (container,) = pod["containers"]
    assert container["name"] == "keda-operator" and container["command"] == ["/keda"]
    # resources/keda.yaml's args, with KEDA's own cert rotation off on OpenShift (SetOperatorCertRotation(false))
    assert container["args"] == ["--leader-elect", "--zap-log-level=info", "--zap-encoder=console",
                                 "--zap-time-encoding=rfc3339", "--enable-cert-rotation=false"]
    env = {e["name"]: e for e in container["env"]}
    assert env["WATCH_NAMESPACE"]["value"] == ""
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert "KEDA_CLUSTER_OBJECT_NAMESPACE" not in env  # KEDA falls back to its pod's namespace: openshift-keda
    # InjectOwner: the KedaController owns what the operator writes
    for obj in (sa, deploy):
        assert obj["metadata"]["ownerReferences"] == [{
            "apiVersion": "keda.sh/v1alpha1", "kind": "KedaController", "name": "keda", "uid": "0b6f-uid",
            "controller": True, "blockOwnerDeletion": True}]


def test_watch_namespace_goes_to_the_operator_container():
    deploy = by_kind(sim.translate(operand({"watchNamespace": "team-a,team-b"}), "2.20.2"))["Deployment"]
    env = {e["name"]: e.get("value") for e in deploy["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["WATCH_NAMESPACE"] == "team-a,team-b"


@pytest.mark.parametrize("operator, expected", [
    ({"logLevel": "debug"}, "--zap-log-level=debug"),
    ({"logLevel": "5"}, "--zap-log-level=5"),               # an unsigned integer is accepted
    ({"logLevel": "verbose"}, "--zap-log-level=info"),      # not in debug/info/error: ignored
    ({"logEncoder": "json"}, "--zap-encoder=json"),
    ({"logEncoder": "yaml"}, "--zap-encoder=console"),      # not in json/console: ignored
    ({"logTimeEncoding": "epoch"}, "--zap-time-encoding=epoch"),
    ({"logTimeEncoding": "unix"}, "--zap-time-encoding=rfc3339"),
])
def test_operator_log_settings_replace_the_args_as_transform_go_does(operator, expected):
    args = sim.operator_args(operator)
    assert expected in args
    assert len(args) == 5  # replaced in place, never appended twice


def test_replace_arg_appends_a_missing_prefix():
    assert sim.replace_arg(["--leader-elect"], "--zap-encoder=", "json") == ["--leader-elect", "--zap-encoder=json"]


def test_status_words_are_the_operators():
    assert sim.PHASE_SUCCEEDED == "Installation Succeeded" and sim.PHASE_IGNORED == "Installation Ignored"
    assert sim.installed_reason("2.20.2", "openshift-keda") == "KEDA v2.20.2 is installed in namespace 'openshift-keda'"
    assert sim.ignored_reason("openshift-keda") == (
        "The KedaController resource needs to be created in namespace openshift-keda with name keda, otherwise it "
        "will be ignored")


class _Resource:
    def __init__(self, store: dict, kind: str):
        self.store, self.kind = store, kind
        self.status = self

    def get(self, name=None, namespace=None):
        if name is None:
            return _Dict({"items": [o for key, o in self.store.items() if isinstance(key, tuple) and key[0] == self.kind]})
        found = self.store.get((self.kind, namespace, name))
        if found is None:
            raise sim.NotFoundError(_Err())
        return _Dict(found)

    def server_side_apply(self, body, name, namespace, field_manager, force_conflicts):
        assert field_manager == sim.FIELD_MANAGER and force_conflicts
        self.store[(self.kind, namespace, name)] = body
        self.store.setdefault("writes", []).append((self.kind, name))

    def patch(self, name, namespace, body, content_type):
        self.store[("KedaController", namespace, name)].setdefault("status", {}).update(body["status"])
        self.store.setdefault("writes", []).append(("status", name))


class _Err:
    status, reason, body, headers = 404, "Not Found", "", {}


class _Dict(dict):
    def to_dict(self):
        return dict(self)


class _Client:
    def __init__(self, store):
        self.store = store
        self.resources = self

    def get(self, api_version, kind):  # noqa: ARG002 - the fake serves every kind from one store
        return _Resource(self.store, kind)


def test_only_keda_in_the_operators_namespace_is_installed_others_are_ignored():
    store = {("KedaController", "openshift-keda", "keda"): operand({"watchNamespace": ""}),
             ("KedaController", "elsewhere", "keda"): operand({}, namespace="elsewhere"),
             ("KedaController", "openshift-keda", "other"): operand({}, name="other")}
    assert sim.reconcile(_Client(store), "openshift-keda", "2.20.2") is True
    assert ("Deployment", "openshift-keda", "keda-operator") in store
    assert ("Deployment", "elsewhere", "keda-operator") not in store
    assert store[("KedaController", "openshift-keda", "keda")]["status"] == {
        "phase": "Installation Succeeded", "reason": "KEDA v2.20.2 is installed in namespace 'openshift-keda'",
        "version": "2.20.2"}
    for key in (("KedaController", "elsewhere", "keda"), ("KedaController", "openshift-keda", "other")):
        assert store[key]["status"]["phase"] == "Installation Ignored"
    # a second pass over unchanged objects writes nothing (no audit-log noise every second)
    writes = len(store["writes"])
    sim.reconcile(_Client(store), "openshift-keda", "2.20.2")
    assert len(store["writes"]) == writes


def test_an_object_the_api_server_stored_without_its_empty_fields_is_not_rewritten():
    desired = {"env": [{"name": "WATCH_NAMESPACE", "value": ""}], "args": ["--leader-elect"]}
    stored = {"env": [{"name": "WATCH_NAMESPACE"}], "args": ["--leader-elect"], "terminationMessagePath": "/dev/x"}
    assert sim.contains(stored, desired)
    assert not sim.contains({"env": [{"name": "WATCH_NAMESPACE", "value": "a"}], "args": ["--leader-elect"]},
                            {"env": [{"name": "WATCH_NAMESPACE", "value": "b"}], "args": ["--leader-elect"]})
    assert not sim.contains({"args": []}, {"args": ["--leader-elect"]})
