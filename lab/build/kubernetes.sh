#!/usr/bin/env bash
# Build kube-apiserver, kube-controller-manager, kube-scheduler and kubectl from the
# k8s.io/kubernetes Go module. Its go.mod replaces every staging module (k8s.io/api, ...) with a
# local ./staging path that a module download does not have, so a tiny wrapper module requires
# k8s.io/kubernetes and points each staging module at its published v0.Y.Z instead.
# One `go build` for all four binaries so they share compilation.
set -euo pipefail
: "${KUBERNETES_VERSION:?}" "${OUT:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GOFLAGS=-mod=mod
gomod=$(go mod download -json "k8s.io/kubernetes@${KUBERNETES_VERSION}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
staging_version="v0.${KUBERNETES_VERSION#v1.}"
minor=$(echo "$KUBERNETES_VERSION" | cut -d. -f2)
{
  echo "module gpuaas.lab/kubernetes"
  echo "go 1.25.0"
  echo "require k8s.io/kubernetes ${KUBERNETES_VERSION}"
  echo "replace ("
  grep -E '^\s*k8s.io/[a-z0-9-]+ => \./staging/' "$gomod" | awk -v v="$staging_version" '{print "\t" $1 " => " $1 " " v}'
  echo ")"
} > "$work/go.mod"
cd "$work"
pkgs="k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl"
# shellcheck disable=SC2086
go get $(for p in $pkgs; do printf "%s@%s " "$p" "$KUBERNETES_VERSION"; done) 2>&1 | grep -v "^go: downloading" || true
ld="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld="$ld -X $p.gitVersion=${KUBERNETES_VERSION} -X $p.gitMajor=1 -X $p.gitMinor=${minor} -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done
mkdir -p "$OUT/bin"
# shellcheck disable=SC2086
CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$OUT/bin/" $pkgs
