# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``ansible.module_utils.testing.patch_module_args`` for ansible-core < 2.19 (test harness only).

ansible-core 2.19 added this helper; the unit tests use it. tests/matrix/matrix.sh copies this file into
the matrix venvs of older ansible-core as ``ansible/module_utils/testing.py``: the same contract, done the way
those releases expect module arguments (``basic._ANSIBLE_ARGS`` as JSON bytes). Nothing of the collection uses it.
"""

from __future__ import annotations

import contextlib
import json
import typing as t
from unittest import mock

from ansible.module_utils import basic


@contextlib.contextmanager
def patch_module_args(args: t.Optional[t.Dict[str, t.Any]] = None) -> t.Iterator[None]:
    """Expose the given module args to ``AnsibleModule`` instances created within this context."""
    if not isinstance(args, (dict, type(None))):
        raise TypeError("The `args` arg must be a dict or None.")
    data = json.dumps({"ANSIBLE_MODULE_ARGS": args or {}}).encode()
    with mock.patch.object(basic, "_ANSIBLE_ARGS", data):
        yield
