#!/usr/bin/env bash
# Build the Kueue controller manager (sigs.k8s.io/kueue/cmd/kueue) from the Go module proxy and copy
# the data the lab needs next to it: CRDs and the webhook configurations (rewritten to a 127.0.0.1 URL
# by lab/components/kueue.sh at start-up). Kueue's go.mod has no replace directives, so a plain
# `go install pkg@version` builds it with exactly the dependency versions (and go.sum) Kueue pins.
set -euo pipefail
: "${KUEUE_VERSION:?}" "${OUT:?}"
export GOFLAGS=-mod=mod CGO_ENABLED=0
mod=$(go mod download -json "sigs.k8s.io/kueue@${KUEUE_VERSION}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
mkdir -p "$OUT/bin" "$OUT/share/crd" "$OUT/share/webhook"
ld="-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=${KUEUE_VERSION} -X sigs.k8s.io/kueue/pkg/version.BuildDate=1970-01-01T00:00:00Z"
GOBIN="$OUT/bin" go install -trimpath -ldflags "$ld" "sigs.k8s.io/kueue/cmd/kueue@${KUEUE_VERSION}"
cp "$mod"/config/components/crd/bases/*.yaml "$OUT/share/crd/"
cp "$mod"/config/components/webhook/manifests.yaml "$OUT/share/webhook/manifests.yaml"
chmod -R u+w "$OUT/share"
