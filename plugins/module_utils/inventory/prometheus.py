# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""``gpuaas_prometheus``: where the autoscalers and node pools read GPU metrics, and the token they use."""

from __future__ import annotations

import re
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.records import PrometheusSettings
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.validator import Validator

PROMETHEUS_KEYS = ("url", "token", "token_file", "token_secret", "ca_file", "validate_certs", "timeout")
TOKEN_SECRET_KEYS = ("name", "namespace", "key")
TOKEN_SOURCES = ("token", "token_file", "token_secret")


def parse_prometheus(check: Validator, value: t.Any) -> PrometheusSettings:
    data = check.mapping("gpuaas_prometheus", value, PROMETHEUS_KEYS)
    if not data:
        return PrometheusSettings()
    url = data.get("url")
    if url is not None and (not isinstance(url, str) or not re.match(r"^https?://", url)):
        check.err("gpuaas_prometheus.url", "%r is not an http(s) URL" % (url,))
    sources = [k for k in TOKEN_SOURCES if data.get(k)]
    if len(sources) > 1:
        check.err("gpuaas_prometheus", "set only one of token, token_file, token_secret (got %s)" % ", ".join(sources))
    secret = None
    if data.get("token_secret") is not None:
        secret = _token_secret(check, data.get("token_secret"))
    timeout = check.optional_integer("gpuaas_prometheus.timeout", data.get("timeout"), 1)
    return PrometheusSettings(url=url, token=data.get("token"), token_file=data.get("token_file"),
                              token_secret=secret, ca_file=data.get("ca_file"),
                              validate_certs=bool(data.get("validate_certs", True)), timeout=timeout)


def _token_secret(check: Validator, value: t.Any) -> t.Optional[t.Dict[str, str]]:
    """The Secret holding the token, ``{name, namespace, key}`` (key defaults to ``token``)."""
    data = check.mapping("gpuaas_prometheus.token_secret", value, TOKEN_SECRET_KEYS)
    if data is None:
        return None
    name = check.name("gpuaas_prometheus.token_secret.name", data.get("name"))
    namespace = check.label_name("gpuaas_prometheus.token_secret.namespace", data.get("namespace"))
    if name and namespace:
        return {"name": name, "namespace": namespace, "key": str(data.get("key") or "token")}
    return None
