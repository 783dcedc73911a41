# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """Connection options shared by every module (same names and K8S_AUTH_* variables as kubernetes.core)."""

    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - Path to a kubeconfig file, several paths separated by C(:), or the kubeconfig content as a dictionary.
      - Without it (and without O(host)), the in-cluster service account is used when available, else
        E(KUBECONFIG) or C(~/.kube/config).
      - Can also be set with the E(K8S_AUTH_KUBECONFIG) environment variable.
    type: raw
  context:
    description:
      - The kubeconfig context to use. Can also be set with E(K8S_AUTH_CONTEXT).
    type: str
  host:
    description:
      - URL of the Kubernetes API server. Can also be set with E(K8S_AUTH_HOST).
    type: str
  api_key:
    description:
      - Bearer token to authenticate with. Can also be set with E(K8S_AUTH_API_KEY).
    type: str
  username:
    description:
      - User name for an OpenShift OAuth login (together with O(password) and O(host)); the token obtained is
        used for the requests. Needs the C(openshift) Python package.
      - Plain Kubernetes has no password login; use O(api_key), client certificates or a kubeconfig there.
      - Can also be set with E(K8S_AUTH_USERNAME).
    type: str
  password:
    description:
      - Password for the OpenShift OAuth login, see O(username). Can also be set with E(K8S_AUTH_PASSWORD).
    type: str
  validate_certs:
    description:
      - Whether to verify the API server's TLS certificate. When not set, the kubeconfig decides (verification
        is on unless it sets C(insecure-skip-tls-verify)).
      - Can also be set with E(K8S_AUTH_VERIFY_SSL) or E(K8S_AUTH_VALIDATE_CERTS).
    type: bool
    aliases: [verify_ssl]
  ca_cert:
    description:
      - Path to the CA bundle that signed the API server's certificate (the full chain).
      - Can also be set with E(K8S_AUTH_SSL_CA_CERT) or E(K8S_AUTH_CA_CERT).
    type: path
    aliases: [ssl_ca_cert]
  client_cert:
    description:
      - Path to a client certificate. Can also be set with E(K8S_AUTH_CERT_FILE) or E(K8S_AUTH_CLIENT_CERT).
    type: path
    aliases: [cert_file]
  client_key:
    description:
      - Path to the key of O(client_cert). Can also be set with E(K8S_AUTH_KEY_FILE) or E(K8S_AUTH_CLIENT_KEY).
    type: path
    aliases: [key_file]
  proxy:
    description:
      - URL of an HTTP proxy for the API connection. Can also be set with E(K8S_AUTH_PROXY).
      - E(HTTP_PROXY) and friends are not used.
    type: str
  no_proxy:
    description:
      - Comma-separated hosts, domains and CIDRs reached without O(proxy). Can also be set with E(K8S_AUTH_NO_PROXY).
    type: str
  proxy_headers:
    description:
      - Headers for the proxy connection.
    type: dict
    suboptions:
      proxy_basic_auth:
        description:
          - C(user:password) for proxy basic authentication. Can also be set with
            E(K8S_AUTH_PROXY_HEADERS_PROXY_BASIC_AUTH).
        type: str
      basic_auth:
        description:
          - C(user:password) for a basic authentication header. Can also be set with
            E(K8S_AUTH_PROXY_HEADERS_BASIC_AUTH).
        type: str
      user_agent:
        description:
          - User agent string. Can also be set with E(K8S_AUTH_PROXY_HEADERS_USER_AGENT).
        type: str
  persist_config:
    description:
      - Whether refreshed kubeconfig tokens are written back to the kubeconfig file.
      - Can also be set with E(K8S_AUTH_PERSIST_CONFIG).
    type: bool
  impersonate_user:
    description:
      - User to impersonate for every request. Can also be set with E(K8S_AUTH_IMPERSONATE_USER).
    type: str
  impersonate_groups:
    description:
      - Groups to impersonate for every request.
      - Can also be set with E(K8S_AUTH_IMPERSONATE_GROUPS) as a comma-separated list.
    type: list
    elements: str
requirements:
  - kubernetes >= 29.0.0 (Python)
  - openshift >= 0.13.2 (Python, only for the O(username)/O(password) OpenShift login)
notes:
  - Set the connection options once for every module of the collection with
    C(module_defaults) and the C(group/gpuaas.platform.k8s) action group.
"""
