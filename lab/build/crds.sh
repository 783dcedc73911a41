#!/usr/bin/env bash
# Upstream CRDs, copied verbatim from the upstream Go modules (never hand-written):
#   share/crds/base/       loaded on every lab (with the cluster autoscaler's ProvisioningRequest: Kueue sets its
#                          ProvisioningRequest admission check controller up only when that API is served at start)
#   share/crds/openshift/  loaded only with LAB_FLAVOR=openshift
#   share/crds/capi/       Cluster API machine CRDs, loaded only with LAB_FLAVOR=kubernetes (the default)
#   share/crds/kueue-v1beta1/  an older Kueue release's CRDs that serve only v1beta1 (for the v1beta1 lab variant)
#   share/crds/workloads/  the workload kinds Kueue gates (Ray, Kubeflow Trainer/Training, JobSet, LeaderWorkerSet,
#                          AppWrapper) and KServe's InferenceService, loaded on every lab (issue 11): the versions are
#                          the ones Kueue's own go.mod requires (WORKLOAD_CRDS in versions.env)
set -euo pipefail
: "${OUT:?}" "${KUEUE_VERSION:?}" "${KEDA_VERSION:?}" "${GPU_OPERATOR_VERSION:?}" "${NFD_VERSION:?}"
: "${PROMETHEUS_OPERATOR_VERSION:?}" "${OLM_API_VERSION:?}" "${OPENSHIFT_API_VERSION:?}" "${KUEUE_V1BETA1_VERSION:?}"
: "${OPENSHIFT_MACHINE_API_VERSION:?}" "${CLUSTER_API_VERSION:?}" "${AUTOSCALER_APIS_VERSION:?}"
source "$(dirname "$0")/gomodule.sh"
base=$OUT/share/crds/base; osh=$OUT/share/crds/openshift; old=$OUT/share/crds/kueue-v1beta1; capi=$OUT/share/crds/capi
wl=$OUT/share/crds/workloads
mkdir -p "$base" "$osh" "$old" "$wl" "$capi"
d=$(go_module_dir sigs.k8s.io/kueue "$KUEUE_VERSION");            cp "$d"/config/components/crd/bases/*.yaml "$base/"
d=$(go_module_dir github.com/kedacore/keda/v2 "$KEDA_VERSION");   cp "$d"/config/crd/bases/*.yaml "$base/"
d=$(go_module_dir github.com/NVIDIA/gpu-operator "$GPU_OPERATOR_VERSION"); cp "$d"/config/crd/bases/*.yaml "$base/"
d=$(go_module_dir sigs.k8s.io/node-feature-discovery "$NFD_VERSION"); cp "$d"/deployment/base/nfd-crds/nfd-api-crds.yaml "$base/nfd.k8s-sigs.io_crds.yaml"
d=$(go_module_dir github.com/prometheus-operator/prometheus-operator "$PROMETHEUS_OPERATOR_VERSION")
for k in servicemonitors podmonitors prometheusrules probes; do cp "$d/example/prometheus-operator-crd/monitoring.coreos.com_$k.yaml" "$base/"; done
d=$(go_module_dir github.com/operator-framework/api "$OLM_API_VERSION")
for k in catalogsources clusterserviceversions installplans operatorgroups subscriptions operatorconditions olmconfigs; do cp "$d/crds/operators.coreos.com_$k.yaml" "$base/"; done
d=$(go_module_dir github.com/openshift/api "$OPENSHIFT_API_VERSION")
cp "$d"/config/v1/zz_generated.crd-manifests/0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml "$osh/"
cp "$d"/config/v1/zz_generated.crd-manifests/0000_10_config-operator_01_infrastructures-Default.crd.yaml "$osh/"
# MachineSet (with status.labelSelector for /scale) and Machine from a newer openshift/api (see versions.env)
d=$(go_module_dir github.com/openshift/api "$OPENSHIFT_MACHINE_API_VERSION")
for k in machinesets machines; do cp "$d/machine/v1beta1/zz_generated.crd-manifests/0000_10_machine-api_01_$k-Default.crd.yaml" "$osh/"; done
d=$(go_module_dir sigs.k8s.io/cluster-api "$CLUSTER_API_VERSION")
for k in machinedeployments machinesets machines; do cp "$d/config/crd/bases/cluster.x-k8s.io_$k.yaml" "$capi/"; done
d=$(go_module_dir k8s.io/autoscaler/cluster-autoscaler/apis "$AUTOSCALER_APIS_VERSION")
cp "$d/config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml" "$base/"
d=$(go_module_dir sigs.k8s.io/kueue "$KUEUE_V1BETA1_VERSION");    cp "$d"/config/components/crd/bases/*.yaml "$old/"
# module@version:path-glob, one per line (lab/versions.env)
while read -r spec; do
  [ -n "$spec" ] || continue
  mv_=${spec%%:*} glob=${spec#*:}
  d=$(go_module_dir "${mv_%@*}" "${mv_##*@}")
  for f in $(eval "echo $d/$glob"); do cp "$f" "$wl/"; done
done <<<"$(printf '%s\n' $WORKLOAD_CRDS)"
chmod -R u+w "$OUT/share"
