# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every credential a role takes is no_log in its argument spec.

The role's argument validation (the first task of a role run) reports the options it checked; an option that
holds a credential and is not no_log is printed with -v.
"""

from __future__ import annotations

import glob
import os
import re

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC_FILES = sorted(glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml")))

# Names of options whose value is a credential. ``token_file`` (a path), ``token_secret`` (a Secret's name and
# namespace) and ``*_credential`` (the name of an AAP credential) point at a credential without holding it.
CREDENTIAL_NAME = re.compile(r"^(?:.*_)?(?:token|password|passwd|api_key|client_secret|secret_key|private_key)$")


def options(spec, path=()):
    """(dotted path, option spec) for every option and suboption of an argument spec."""
    for name, option in (spec or {}).items():
        yield ".".join(path + (name,)), name, option or {}
        yield from options((option or {}).get("options"), path + (name,))


def credential_options():
    for spec_file in SPEC_FILES:
        role = spec_file.split(os.sep)[-3]
        specs = yaml.safe_load(open(spec_file, encoding="utf-8"))["argument_specs"]
        for entry, entry_spec in specs.items():
            for dotted, name, option in options(entry_spec.get("options")):
                if CREDENTIAL_NAME.match(name):
                    yield pytest.param(option, id="%s:%s:%s" % (role, entry, dotted))


def test_role_argument_specs_found():
    assert len(SPEC_FILES) >= 9


@pytest.mark.parametrize("option", list(credential_options()))
def test_credential_options_are_no_log(option):
    assert option.get("no_log") is True
