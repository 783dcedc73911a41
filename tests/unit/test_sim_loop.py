# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The loop the lab SIMULATORs share (lab/simulators/sim_loop.py): a failed pass is retried, not fatal, unless it is
a --once run or an error the simulator does not retry."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException

SIM_PATH = Path(__file__).resolve().parents[2] / "lab" / "simulators" / "sim_loop.py"
SPEC = importlib.util.spec_from_file_location("sim_loop", SIM_PATH)
sim_loop = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(sim_loop)


class Stop(BaseException):
    """Ends the endless loop from inside a pass (as the lab's SIGTERM would)."""


def passes(*outcomes):
    calls = []

    def one_pass():
        calls.append(len(calls))
        outcome = outcomes[len(calls) - 1]
        if outcome is not None:
            raise outcome
    return one_pass, calls


def test_a_failed_pass_is_retried_at_the_next_one():
    one_pass, calls = passes(ApiException(status=503, reason="apiserver restarting"), ValueError("odd object"), None,
                             Stop())
    with pytest.raises(Stop):
        sim_loop.run(one_pass, interval=0)
    assert len(calls) == 4


def test_once_runs_one_pass_and_raises_its_error():
    one_pass, calls = passes(None)
    assert sim_loop.run(one_pass, interval=0, once=True) == 0 and len(calls) == 1
    failing = passes(ApiException(status=500, reason="boom"))[0]
    with pytest.raises(ApiException):
        sim_loop.run(failing, interval=0, once=True)


def test_an_operator_simulator_retries_api_errors_only():
    one_pass, calls = passes(ApiException(status=409, reason="Conflict"), KeyError("spec"))
    with pytest.raises(KeyError):
        sim_loop.run(one_pass, interval=0, survive=(ApiException,))
    assert len(calls) == 2


def test_the_common_flags():
    args = sim_loop.parser("A simulator.\nmore", interval=2.0).parse_args(["--once"])
    assert (args.once, args.interval) == (True, 2.0)
    with pytest.raises(SystemExit):
        sim_loop.parser("A simulator.", interval=1.0, kubeconfig_required=True).parse_args([])
