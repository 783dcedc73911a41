#!/usr/bin/env bash
# The KWOK controller: fakes kubelets for the lab's GPU and CPU nodes and drives pod phases.
set -euo pipefail
: "${KWOK_VERSION:?}" "${OUT:?}"
source "$(dirname "$0")/gomodule.sh"
GO_LDFLAGS="-X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION}" go_build_main sigs.k8s.io/kwok "$KWOK_VERSION" sigs.k8s.io/kwok/cmd/kwok
# KWOK's own stage definitions (pod/node lifecycles), used as the base of lab/kwok/stages.yaml.
mkdir -p "$OUT/share"
cp -r "$(go_module_dir sigs.k8s.io/kwok "$KWOK_VERSION")/kustomize/stage" "$OUT/share/stage"
chmod -R u+w "$OUT/share"
