#!/usr/bin/env bash
# Shared helper for the lab build scripts.
#   go_module_dir MODULE VERSION        -> prints the module's source directory (downloads it once)
#   go_build_main MODULE VERSION PKG... -> builds main packages of MODULE@VERSION into $OUT/bin
# A module whose go.mod replaces its sibling modules with relative paths (etcd, for example) cannot be
# built with `go install m@v`; a throw-away wrapper module requires it and points every such sibling
# at the same published VERSION instead.
set -euo pipefail

go_module_dir() {
  go mod download -json "$1@$2" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("Dir") or sys.exit("go mod download %s: %s" % (d.get("Path"), d.get("Error"))))'
}

go_build_main() {
  local module=$1 version=$2; shift 2
  local work gomod
  work=$(mktemp -d)
  gomod=$(go mod download -json "$module@$version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  {
    echo "module gpuaas.lab/wrapper"
    echo "go $(awk '/^go /{print $2; exit}' "$gomod")"
    echo "require $module $version"
    # relative-path replaces of sibling modules -> the same published version
    awk -v v="$version" '
      /^replace \(/ {blk=1; next} blk && /^\)/ {blk=0; next}
      { line=$0; sub(/^replace /, "", line) }
      (blk || /^replace /) && line ~ /=> \.\.?\// && line !~ /FORBIDDEN/ { split(line, f, " "); print "replace " f[1] " => " f[1] " " v }
    ' "$gomod"
  } > "$work/go.mod"
  local args=()
  for p in "$@"; do args+=("$p@$version"); done
  (cd "$work" && GOFLAGS=-mod=mod go get "${args[@]}" 2>&1 | grep -v '^go: downloading' || true)
  mkdir -p "$OUT/bin"
  (cd "$work" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "-s -w ${GO_LDFLAGS:-}" -o "$OUT/bin/" "$@")
  rm -rf "$work"
}
