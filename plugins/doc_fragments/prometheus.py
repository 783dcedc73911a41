# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """The ``prometheus`` option of modules that query Prometheus (the ``gpuaas_prometheus`` inventory setting)."""

    DOCUMENTATION = r"""
options:
  prometheus:
    description:
      - Where and how to query Prometheus, the OpenShift Thanos querier or any server speaking the Prometheus
        HTTP API v1. Pass the inventory setting C(gpuaas_prometheus) here; it is shared with the tenants role
        (KEDA triggers).
      - Queries are sent with HTTP POST to C(<url>/api/v1/query) and C(<url>/api/v1/query_range).
    type: dict
    default: {}
    suboptions:
      url:
        description:
          - Base URL, for example V(http://prometheus-k8s.monitoring.svc:9090) or, on OpenShift,
            V(https://thanos-querier.openshift-monitoring.svc:9091) (needs a token of an identity with the
            C(cluster-monitoring-view) ClusterRole).
          - Defaults to the E(GPUAAS_PROMETHEUS_URL) environment variable.
        type: str
      token:
        description:
          - Bearer token sent in the C(Authorization) header.
          - Defaults to the E(GPUAAS_PROMETHEUS_TOKEN) environment variable.
          - Mutually exclusive with O(prometheus.token_file) and O(prometheus.token_secret).
        type: str
      token_file:
        description:
          - File holding the bearer token, for example V(/var/run/secrets/kubernetes.io/serviceaccount/token)
            when Ansible runs in a pod. Defaults to the E(GPUAAS_PROMETHEUS_TOKEN_FILE) environment variable.
        type: path
      token_secret:
        description:
          - Read the bearer token from a Secret in the cluster, for example the C(kubernetes.io/service-account-token)
            Secret of a ServiceAccount bound to C(cluster-monitoring-view). Uses the Kubernetes connection options.
        type: dict
        suboptions:
          name:
            description: Name of the Secret.
            type: str
            required: true
          namespace:
            description: Namespace of the Secret.
            type: str
            required: true
          key:
            description: Key of the token in the Secret's data.
            type: str
            default: token
      ca_file:
        description:
          - PEM bundle of the CA that signed the server certificate (on OpenShift the service CA).
          - Defaults to the E(GPUAAS_PROMETHEUS_CA_FILE) environment variable, else the system trust store.
        type: path
      validate_certs:
        description:
          - Verify the server's TLS certificate. Turn off only for a throw-away lab.
        type: bool
        default: true
      timeout:
        description: Seconds to wait for an answer.
        type: int
        default: 30
"""
