# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The optional ``kubernetes`` Python library, imported once for every ``kube/`` module.

Modules import without it (``ansible-test sanity --test import``, ``ansible-doc``); ``check_requirements`` turns
its absence into one readable error when a module first needs the API. ``ApiException`` is the library's, or a
placeholder so that ``except ApiException`` works without it.
"""

from __future__ import annotations

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError

# Both names are used by the kube/ modules that import them from here.
try:
    import kubernetes  # pylint: disable=unused-import
    from kubernetes.client.rest import ApiException  # pylint: disable=unused-import
    HAS_KUBERNETES = True
    KUBERNETES_IMPORT_ERROR = None
except ImportError as _imp_err:  # pragma: no cover - reported by check_requirements()
    kubernetes = None  # type: ignore[assignment]
    HAS_KUBERNETES = False
    KUBERNETES_IMPORT_ERROR = _imp_err

    class ApiException(Exception):  # type: ignore[no-redef]
        """Placeholder so that ``except ApiException`` works without the library."""

        status = 0
        reason = ""
        body = ""

try:
    import urllib3
except ImportError:  # pragma: no cover
    urllib3 = None  # type: ignore[assignment]


def silence_insecure_request_warnings() -> None:
    """Silence urllib3's per-request InsecureRequestWarning — called only when this run's connection asked for
    ``validate_certs: false`` (issue 22 item 9: never for the whole process by import, never for a verified one)."""
    if urllib3 is not None:
        import warnings

        warnings.filterwarnings("ignore", category=urllib3.exceptions.InsecureRequestWarning)


def check_requirements() -> None:
    """Raise a GpuaasError when the ``kubernetes`` Python library is missing."""
    if not HAS_KUBERNETES:
        raise GpuaasError(
            "the 'kubernetes' Python library is required (%s)" % KUBERNETES_IMPORT_ERROR,
            hint="pip install -r requirements.txt of the gpuaas.platform collection on the Ansible controller",
        )
