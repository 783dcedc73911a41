# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab's OLM SIMULATOR resolves Subscriptions against its simulated catalog as OLM's resolver does: an unknown
package or channel gets ResolutionFailed=True (ConstraintsNotSatisfiable, OLM's message) and no InstallPlan; the
condition goes once the Subscription is fixed. (The lab run of this is tests/integration/test_install.py.)"""
from __future__ import annotations

import importlib.util
from pathlib import Path

SIM_PATH = Path(__file__).resolve().parents[2] / "lab" / "simulators" / "olm_simulator.py"
SPEC = importlib.util.spec_from_file_location("olm_simulator", SIM_PATH)
olm_simulator = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(olm_simulator)  # type: ignore[union-attr]


class StatusRecorder:
    def __init__(self):
        self.patches = []

    def patch(self, body, name, namespace, content_type):
        self.patches.append((namespace, name, body))


def simulator(bundles=None):
    sim = olm_simulator.Simulator.__new__(olm_simulator.Simulator)
    sim.bundles = bundles or {}
    sim.subs = type("Subs", (), {"status": StatusRecorder()})()
    return sim


def sub(package, channel=None, conditions=None):
    return {"metadata": {"name": package, "namespace": "ns"},
            "spec": {"name": package, "channel": channel, "source": "redhat-operators"},
            "status": {"conditions": conditions} if conditions is not None else {}}


def test_unknown_package_and_channel_fail_as_olm_words_them():
    sim = simulator({"gpu-operator-certified": {"spec": {"version": "25.10.0"}}})
    assert sim.resolution_failure(sub("gpu-operator-certified", "stable")) is None
    assert sim.resolution_failure(sub("gpu-operator-certified", "v25.10")) is None
    assert sim.resolution_failure(sub("gpu-operator-certified")) is None  # the default channel
    assert sim.resolution_failure(sub("gpu-operator-certified", "v25.3")) == (
        "constraints not satisfiable: no operators found in channel v25.3 of package gpu-operator-certified in the "
        "catalog referenced by subscription gpu-operator-certified, subscription gpu-operator-certified exists")
    assert sim.resolution_failure(sub("nfd", "stable")) is None
    assert sim.resolution_failure(sub("nfd", "4.99")) is not None
    assert sim.resolution_failure(sub("no-such-operator")) == (
        "constraints not satisfiable: no operators found in package no-such-operator in the catalog referenced by "
        "subscription no-such-operator, subscription no-such-operator exists")


def test_condition_set_once_then_removed_when_resolved():
    sim = simulator()
    bad = sub("nfd", "4.99", [{"type": "CatalogSourcesUnhealthy", "status": "False"}])
    failure = sim.resolution_failure(bad)
    assert sim.set_resolution_condition(bad, failure) == 1
    conditions = sim.subs.status.patches[-1][2]["status"]["conditions"]
    assert conditions[0] == {"type": "CatalogSourcesUnhealthy", "status": "False"}
    assert {k: conditions[1][k] for k in ("type", "status", "reason", "message")} == {
        "type": "ResolutionFailed", "status": "True", "reason": "ConstraintsNotSatisfiable", "message": failure}
    bad["status"]["conditions"] = conditions
    assert sim.set_resolution_condition(bad, failure) == 0  # unchanged: no write
    fixed = sub("nfd", "stable", conditions)
    assert sim.set_resolution_condition(fixed, sim.resolution_failure(fixed)) == 1
    assert sim.subs.status.patches[-1][2]["status"]["conditions"] == [
        {"type": "CatalogSourcesUnhealthy", "status": "False"}]
