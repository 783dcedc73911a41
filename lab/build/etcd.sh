#!/usr/bin/env bash
# etcd server from go.etcd.io/etcd/server/v3 (Debian's 3.4 is too old for kube-apiserver 1.35's watch-progress requests).
set -euo pipefail
: "${ETCD_VERSION:?}" "${OUT:?}"
source "$(dirname "$0")/gomodule.sh"
go_build_main go.etcd.io/etcd/server/v3 "$ETCD_VERSION" go.etcd.io/etcd/server/v3
# the main package is .../server/v3, so go names the binary "server"
mv "$OUT/bin/server" "$OUT/bin/etcd"
test -x "$OUT/bin/etcd"
