#!/usr/bin/env bash
# Build the helm CLI (helm.sh/helm/v3 or /v4, chosen by HELM_VERSION's major) from the Go module proxy.
# Helm's go.mod has no replace directives, so `go install pkg@version` builds it with Helm's own pins.
set -euo pipefail
: "${HELM_VERSION:?}" "${OUT:?}"
export GOFLAGS=-mod=mod CGO_ENABLED=0
major=${HELM_VERSION%%.*}   # v3 or v4
ld="-s -w -X helm.sh/helm/${major}/internal/version.version=${HELM_VERSION} -X helm.sh/helm/${major}/internal/version.gitTreeState=clean"
mkdir -p "$OUT/bin"
GOBIN="$OUT/bin" go install -trimpath -ldflags "$ld" "helm.sh/helm/${major}/cmd/helm@${HELM_VERSION}"
