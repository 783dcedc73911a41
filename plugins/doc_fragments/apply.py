# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """State, apply and wait options of the modules that write objects through the apply engine.

    Their results (created, updated, deleted, summary, ...) stay in each module's RETURN block: ansible-doc of
    ansible-core 2.19 and older cannot render RETURN fragments (ansible/ansible#85644), and the collection
    supports 2.16.
    """

    DOCUMENTATION = r"""
options:
  state:
    description:
      - V(present) creates or updates the object with server-side apply; V(absent) deletes it.
    type: str
    choices: [present, absent]
    default: present
  force_conflicts:
    description:
      - Take over fields that another field manager (for example C(kubectl)) set, instead of failing
        with a conflict.
    type: bool
    default: true
  labels:
    description:
      - Extra labels for the object. C(app.kubernetes.io/managed-by=gpuaas.platform) is always added.
    type: dict
  annotations:
    description:
      - Annotations for the object.
    type: dict
  wait:
    description:
      - Wait until the object is ready (its readiness condition, for queues C(Active=True)) after applying,
        or gone after deleting.
    type: bool
    default: false
  wait_timeout:
    description:
      - How many seconds to wait with O(wait).
    type: int
    default: 120
attributes:
  check_mode:
    description: Runs a server-side dry run (C(dryRun=All)) so that the API server still validates; nothing is written.
    support: full
  diff_mode:
    description: Shows the fields this collection manages, before and after.
    support: full
"""
