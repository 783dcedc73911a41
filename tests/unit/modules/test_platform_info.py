# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import os
import sys

from ansible_collections.gpuaas.platform.plugins.modules import platform_info

sys.path.insert(0, os.path.dirname(__file__))
from fake_kube import FakeKube  # noqa: E402  pylint: disable=wrong-import-position


def test_plain_kubernetes():
    kube = FakeKube([("kueue.x-k8s.io/v1beta1", "ClusterQueue"), ("keda.sh/v1alpha1", "ScaledObject")])
    info = platform_info.detect(kube)
    assert info["platform"] == info["detected_platform"] == "kubernetes"
    assert info["kubernetes_version"] == "v1.35.4"
    assert info["openshift_version"] is None
    assert info["olm"] is False and info["prometheus_operator"] is False and info["cert_manager"] is False
    assert info["kueue_api_version"] == "v1beta1" and info["keda"] is True and info["gpu_operator"] is False
    assert info["openshift_ai"] == {"present": False, "api_version": None, "datascienceclusters": []}


def test_openshift_with_ai_and_olm():
    kube = FakeKube([("config.openshift.io/v1", "ClusterVersion"), ("operators.coreos.com/v1alpha1", "Subscription"),
                     ("monitoring.coreos.com/v1", "ServiceMonitor"), ("cert-manager.io/v1", "Certificate"),
                     ("kueue.x-k8s.io/v1beta2", "ClusterQueue"), ("kueue.x-k8s.io/v1beta1", "ClusterQueue"),
                     ("datasciencecluster.opendatahub.io/v1", "DataScienceCluster")])
    kube.add({"kind": "ClusterVersion", "metadata": {"name": "version"},
              "status": {"history": [{"state": "Completed", "version": "4.20.3"}]}})
    kube.add({"kind": "DataScienceCluster", "metadata": {"name": "default-dsc"}})
    info = platform_info.detect(kube)
    assert info["platform"] == "openshift" and info["openshift_version"] == "4.20.3"
    assert info["olm"] and info["prometheus_operator"] and info["cert_manager"]
    assert info["kueue_api_version"] == "v1beta2"
    assert info["openshift_ai"] == {"present": True, "api_version": "datasciencecluster.opendatahub.io/v1",
                                    "datascienceclusters": ["default-dsc"]}


def test_forced_platform_keeps_detected():
    info = platform_info.detect(FakeKube([("operators.coreos.com/v1alpha1", "Subscription")]), "openshift")
    assert info["platform"] == "openshift" and info["detected_platform"] == "kubernetes"


def test_openshift_version_prefers_desired():
    assert platform_info.openshift_version({"status": {"desired": {"version": "4.21.0"},
                                                       "history": [{"state": "Completed", "version": "4.20.3"}]}}) == "4.21.0"
    assert platform_info.openshift_version({"status": {"history": [{"state": "Partial", "version": "4.21.0"},
                                                                   {"state": "Completed", "version": "4.20.3"}]}}) == "4.20.3"
    assert platform_info.openshift_version(None) is None


def test_an_openshift_older_than_the_supported_one_is_reported():
    kube = FakeKube([("config.openshift.io/v1", "ClusterVersion"), ("operators.coreos.com/v1alpha1", "Subscription")])
    kube.add({"kind": "ClusterVersion", "metadata": {"name": "version"},
              "status": {"history": [{"state": "Completed", "version": "4.16.9"}]}})
    problems = platform_info.unsupported(platform_info.detect(kube))
    assert len(problems) == 1 and problems[0].startswith("OpenShift 4.16.9 is not supported"), problems


def test_operators_outside_the_supported_versions_are_reported_together():
    info = {"kubernetes_version": "v1.33.5", "openshift_version": "4.20.3"}
    problems = platform_info.unsupported(info, [
        {"name": "gpu_operator", "channel": "v23.6", "starting_csv": None},
        {"name": "nfd", "channel": "stable", "starting_csv": None},
        {"name": "custom_metrics_autoscaler", "channel": "stable", "starting_csv": "custom-metrics-autoscaler.v2.13.1-427"}])
    assert [p.split()[0] for p in problems] == ["gpuaas_gpu_operator_olm_channel", "gpuaas_keda_olm_starting_csv"], problems
