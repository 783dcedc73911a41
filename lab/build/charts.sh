#!/usr/bin/env bash
# Upstream Helm charts for the install roles' Helm path, taken from the upstream Go modules
# (no Helm repository is reachable here). Output: $OUT/share/charts/<name>/ (plain chart dirs),
# usable as a local chart source for a disconnected install (gpuaas_*_chart_path).
#   kueue         sigs.k8s.io/kueue@$KUEUE_VERSION                      charts/kueue
#   gpu-operator  github.com/NVIDIA/gpu-operator@$GPU_OPERATOR_VERSION  deployments/gpu-operator
#                 (release tags v2x.y.z are not valid Go module versions for this module, so the
#                 proxy serves only pseudo-versions of the default branch and the old v1.x tags)
#   keda          github.com/kedacore/charts@$KEDA_VERSION+incompatible keda
#                 (the kedacore/charts repository has no go.mod: the proxy serves it as +incompatible)
set -euo pipefail
: "${OUT:?}" "${KUEUE_VERSION:?}" "${KEDA_VERSION:?}"
: "${GPU_OPERATOR_VERSION:?}"
export GOFLAGS=-mod=mod

moddir() {  # module@version -> extracted module directory in the module cache
  go mod download -json "$1" | python3 -c '
import json, sys
info = json.load(sys.stdin)
if info.get("Error"):
    sys.exit("go mod download %s: %s" % (sys.argv[1], info["Error"]))
print(info["Dir"])' "$1"
}

copy_chart() {  # name module@version subdir
  local src
  src="$(moddir "$2")/$3"
  test -f "$src/Chart.yaml" || { echo "no Chart.yaml in $2:$3" >&2; exit 1; }
  rm -rf "$OUT/share/charts/$1"
  mkdir -p "$OUT/share/charts"
  cp -r "$src" "$OUT/share/charts/$1"
  chmod -R u+w "$OUT/share/charts/$1"   # the module cache is read-only
  echo "$2 $3" > "$OUT/share/charts/$1/.gpuaas-source"
}

copy_chart kueue "sigs.k8s.io/kueue@${KUEUE_VERSION}" charts/kueue
copy_chart gpu-operator "github.com/NVIDIA/gpu-operator@${GPU_OPERATOR_VERSION}" deployments/gpu-operator
copy_chart keda "github.com/kedacore/charts@${KEDA_VERSION}+incompatible" keda

# The GPU Operator's OLM bundle (the real ClusterServiceVersion with its alm-examples) for the lab's
# OLM simulator (lab/simulators/olm_simulator.py --bundle-dir $OUT/share/olm-bundles).
gpu_mod=$(moddir "github.com/NVIDIA/gpu-operator@${GPU_OPERATOR_VERSION}")
bundle=$(printf '%s\n' "$gpu_mod"/bundle/v*/ | sort -V | tail -1)
rm -rf "$OUT/share/olm-bundles/gpu-operator-certified"
mkdir -p "$OUT/share/olm-bundles/gpu-operator-certified"
cp "$bundle"manifests/gpu-operator-certified.clusterserviceversion.yaml "$OUT/share/olm-bundles/gpu-operator-certified/"
chmod -R u+w "$OUT/share/olm-bundles"
ls "$OUT/share/charts" "$OUT/share/olm-bundles"
