#!/usr/bin/env bash
# Build the Kubeflow training operator (github.com/kubeflow/training-operator, main package cmd/training-operator.v1)
# from the Go module proxy and copy the data the lab needs next to it: the operator's own ClusterRole
# (manifests/base/rbac/role.yaml, bound to its ServiceAccount by lab/components/training_operator.sh, so the operator
# runs with exactly upstream's permissions). The PyTorchJob/TFJob/XGBoostJob/PaddleJob/JAXJob CRDs are not copied:
# the lab serves them already (lab/build/crds.sh, WORKLOAD_CRDS in lab/versions.env, the same
# TRAINING_OPERATOR_VERSION). The training-operator go.mod has no replace directives, so a plain
# `go install pkg@version` builds it with exactly the dependency versions (and go.sum) upstream pins.
set -euo pipefail
: "${TRAINING_OPERATOR_VERSION:?}" "${OUT:?}"
# shellcheck source=gomodule.sh
source "$(dirname "$0")/gomodule.sh"
export GOFLAGS=-mod=mod CGO_ENABLED=0
module=github.com/kubeflow/training-operator
mod=$(go_module_dir "$module" "$TRAINING_OPERATOR_VERSION")
mkdir -p "$OUT/bin" "$OUT/share/rbac"
GOBIN="$OUT/bin" go install -trimpath -ldflags "-s -w" "$module/cmd/training-operator.v1@${TRAINING_OPERATOR_VERSION}"
cp "$mod/manifests/base/rbac/role.yaml" "$OUT/share/rbac/role.yaml"
chmod -R u+w "$OUT/share"
