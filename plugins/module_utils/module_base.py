# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The module base every module of the collection constructs (in the manner of amazon.aws's AnsibleAWSModule).

``GpuaasModule`` adds the Kubernetes connection options to the argument spec, registers every credential it can
know of before Ansible writes the invocation to syslog/journald, and ends a run the same way everywhere (a
``GpuaasError`` becomes ``fail_json`` with its message, hint and problems).

Credentials registered before the invocation is logged:

- the secret values inside a ``kubeconfig`` given as a dict (``KubeAnsibleModule``);
- for modules with a ``prometheus`` option, the Prometheus bearer token given inline (``prometheus.token``), in a
  file (``prometheus.token_file``, E(GPUAAS_PROMETHEUS_TOKEN_FILE)) or by the AWX credential's environment
  (E(GPUAAS_PROMETHEUS_TOKEN)), as given, stripped and base64-encoded (the form a Secret's data holds).

A token read from a Secret (``prometheus.token_secret``) is only known after a request, which is after the
invocation log; but the invocation never holds it, and the one Prometheus resolver (``prometheus_credential.py``,
which ``prometheus_client`` and the tenants/node pools runs use) registers every value it reads before it is used,
so that no result, warning or error can show it.
"""

from __future__ import annotations

import base64
import copy
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError, fail_module
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import K8S_AUTH_ARG_SPEC, KubeAnsibleModule
from ansible_collections.gpuaas.platform.plugins.module_utils.observe.prometheus import PrometheusClient, client_from_params
from ansible_collections.gpuaas.platform.plugins.module_utils.prometheus_credential import (
    Environment,
    knowable_tokens,
    kube_secret_reader,
)


def secret_forms(value: t.Any) -> t.Set[str]:
    """The forms in which a credential can reach output: as given, stripped, and base64-encoded (Secret data)."""
    raw = "" if value is None else str(value)
    if not raw.strip():  # masking blanks would garble every result, and hides nothing
        return set()
    forms: t.Set[str] = set()
    for text in (raw, raw.strip()):
        forms.add(text)
        forms.add(base64.b64encode(text.encode("utf-8")).decode("ascii"))
    return forms


def prometheus_tokens(settings: t.Optional[t.Mapping[str, t.Any]],
                      environ: t.Optional[Environment] = None, read_files: bool = True) -> t.List[str]:
    """Every Prometheus bearer token knowable without a request (``prometheus_credential.knowable_tokens``)."""
    return knowable_tokens(settings, environ, read_files)


class GpuaasModule(KubeAnsibleModule):
    """AnsibleModule with the Kubernetes connection options, credentials registered before logging, uniform errors.

    ``argument_spec`` holds the module's own options; the connection options (doc fragment
    ``gpuaas.platform.k8s_auth``) are added unless the spec already has them.
    """

    def __init__(self, argument_spec: t.Mapping[str, t.Any], **kwargs: t.Any) -> None:
        spec = copy.deepcopy(K8S_AUTH_ARG_SPEC)
        spec.update(argument_spec)
        super().__init__(argument_spec=spec, **kwargs)
        # _log_invocation (which registers) is skipped under no_log; the results must still be masked then.
        self.register_secrets()

    # Whether token files are read when the module starts (to mask their content from the first output on). A
    # module that reads its credential later, under a lock, sets this False: a slow or blocking token file must not
    # hold the run before it takes its lock, and the logged invocation carries only the file's path anyway; what
    # it reads later it registers then (``register_secret``).
    read_token_files_at_start = True

    def register_secrets(self) -> None:
        super().register_secrets()
        if "prometheus" in self.argument_spec:
            for token in prometheus_tokens(self.params.get("prometheus"), read_files=self.read_token_files_at_start):
                self.register_secret(token)

    def register_secret(self, value: t.Any) -> None:
        """Mask ``value`` (as given, stripped and base64-encoded) in every log line and result of this run."""
        self.no_log_values.update(secret_forms(value))

    def prometheus_client(self) -> PrometheusClient:
        """A client for the ``prometheus`` option; a token read from a Secret is registered before it is used."""
        return client_from_params(self.params.get("prometheus"), kube_secret_reader(self), self.register_secret)

    def run(self, work: t.Callable[["GpuaasModule"], t.Dict[str, t.Any]], **fail_extra: t.Any) -> None:
        """Exit with what ``work(self)`` returns; a GpuaasError fails the module with its message, hint and problems.

        ``fail_extra`` are added to a failure's result (for example ``changed=False``).
        """
        try:
            result = work(self)
        except GpuaasError as err:
            fail_module(self, err, **fail_extra)
            return
        self.exit_json(**result)
