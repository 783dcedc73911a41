# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every pass-based lab SIMULATOR shares: its command line, its client and its loop.

A simulator (lab/simulators/*_simulator.py) does one controller's status transitions in passes. The pass is its own;
how it is started (``--kubeconfig``, ``--interval``, ``--once``), how it logs and how a failed pass is survived are
the same for all of them, so they are written here once. The machine and cluster-autoscaler simulators keep their own
class loops: they round over several kinds and report per round.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
import typing as t

from kubernetes import config
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

LOG = logging.getLogger("simulator")


def parser(doc: str, *, interval: float, kubeconfig_required: bool = False,
           once_help: str = "one pass, then exit") -> argparse.ArgumentParser:
    """The simulator's parser with the flags every simulator takes; the caller adds its own."""
    found = argparse.ArgumentParser(description=doc.splitlines()[0])
    if kubeconfig_required:
        found.add_argument("--kubeconfig", required=True)
    else:
        found.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    found.add_argument("--once", action="store_true", help=once_help)
    found.add_argument("--interval", type=float, default=interval)
    return found


def connect(name: str, kubeconfig: t.Optional[str]) -> DynamicClient:
    """Log lines as ``<time> <name> <message>`` (the lab's process logs are read by people) and a dynamic client."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s " + name + " %(message)s")
    return DynamicClient(config.new_client_from_config(config_file=kubeconfig))


def describe(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        return "%s %s" % (exc.status, exc.reason)
    return str(exc)


def run(pass_once: t.Callable[[], object], *, interval: float, once: bool = False,
        survive: t.Tuple[t.Type[BaseException], ...] = (Exception,)) -> int:
    """One pass every ``interval`` seconds until killed; with ``once`` one pass whose error is raised.

    A failed pass is logged and retried at the next one: the API server restarting or a namespace being deleted
    must not end the lab's controller. ``survive`` narrows what is retried (the operator simulators retry API
    errors only, so a bug in their translation stops them where a test sees it).
    """
    while True:
        try:
            pass_once()
        except survive as exc:  # keep the loop alive; a transient API error is retried next pass
            if once:
                raise
            LOG.warning("pass failed: %s", describe(exc))
        if once:
            return 0
        time.sleep(interval)
