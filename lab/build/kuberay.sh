#!/usr/bin/env bash
# Build the KubeRay operator (github.com/ray-project/kuberay/ray-operator, main package at the module root) from the
# Go module proxy and copy the data the lab needs next to it: the operator's own ClusterRole (config/rbac/role.yaml,
# bound to its ServiceAccount by lab/components/kuberay.sh, so the operator runs with exactly upstream's permissions).
# The RayCluster/RayJob/RayService CRDs are not copied: the lab serves them already (lab/build/crds.sh,
# WORKLOAD_CRDS in lab/versions.env, same KUBERAY_VERSION). The ray-operator go.mod has no replace directives, so a
# plain `go install pkg@version` builds it with exactly the dependency versions (and go.sum) KubeRay pins.
set -euo pipefail
: "${KUBERAY_VERSION:?}" "${OUT:?}"
# shellcheck source=gomodule.sh
source "$(dirname "$0")/gomodule.sh"
export GOFLAGS=-mod=mod CGO_ENABLED=0
module=github.com/ray-project/kuberay/ray-operator
mod=$(go_module_dir "$module" "$KUBERAY_VERSION")
mkdir -p "$OUT/bin" "$OUT/share/rbac"
GOBIN="$OUT/bin" go install -trimpath -ldflags "-s -w" "$module@${KUBERAY_VERSION}"
cp "$mod/config/rbac/role.yaml" "$OUT/share/rbac/role.yaml"
chmod -R u+w "$OUT/share"
