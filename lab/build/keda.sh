#!/usr/bin/env bash
# Build the KEDA operator (keda) and metrics apiserver (keda-adapter) from github.com/kedacore/keda/v2.
# KEDA's go.mod pins k8s.io/*, controller-runtime and the Prometheus libraries with a replace block,
# which only applies to KEDA's own main module; a wrapper module therefore copies KEDA's go.mod
# (requirements + replace block) and go.sum, adds a requirement on KEDA itself and builds both
# commands in one `go build` so they share compilation. The admission webhooks binary is not built:
# the lab runs without KEDA's (optional) validating webhooks.
set -euo pipefail
: "${KEDA_VERSION:?}" "${OUT:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GOFLAGS=-mod=mod CGO_ENABLED=0
info=$(go mod download -json "github.com/kedacore/keda/v2@${KEDA_VERSION}")
mod=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["Dir"])' "$info")
{
  echo "module gpuaas.lab/keda"
  sed -e '/^module /d' "$mod/go.mod"
  echo "require github.com/kedacore/keda/v2 ${KEDA_VERSION}"
} > "$work/go.mod"
cp "$mod/go.sum" "$work/go.sum"
chmod u+w "$work/go.mod" "$work/go.sum"
cd "$work"
# KEDA's go.mod lists `tool` dependencies; they are not needed here.
sed -i -e '/^tool /d' -e '/^tool (/,/^)/d' go.mod
ld="-s -w -X github.com/kedacore/keda/v2/version.Version=${KEDA_VERSION#v} -X github.com/kedacore/keda/v2/version.GitCommit=${KEDA_VERSION}"
mkdir -p "$OUT/bin" "$OUT/share/crd"
mkdir -p "$work/bin"
go build -trimpath -ldflags "$ld" -o "$work/bin/" github.com/kedacore/keda/v2/cmd/operator github.com/kedacore/keda/v2/cmd/adapter
mv "$work/bin/operator" "$OUT/bin/keda"
mv "$work/bin/adapter" "$OUT/bin/keda-adapter"
cp "$mod"/config/crd/bases/*.yaml "$OUT/share/crd/"
chmod -R u+w "$OUT/share"
