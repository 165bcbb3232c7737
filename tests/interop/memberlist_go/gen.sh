#!/usr/bin/env bash
# Build main.go against memberlist >= 0.3 offline and regenerate vectors.json.
#
#   MEMBERLIST_SRC=DIR tests/interop/memberlist_go/gen.sh            # build, write vectors.json
#   MEMBERLIST_SRC=DIR tests/interop/memberlist_go/gen.sh build OUT  # only build the program to OUT
#
# DIR: memberlist's source at a tag >= v0.3.0 (a checkout or an export of
# github.com/hashicorp/memberlist); its other imports come from Debian's
# /usr/share/gocode (GOPATH mode, GO111MODULE=off, no network), sean-/seed
# from the copy vendored inside Debian's memberlist.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
gocode="${GOCODE:-/usr/share/gocode}"
src="${MEMBERLIST_SRC:?set MEMBERLIST_SRC to memberlist >= 0.3 source (a checkout or export of a tag)}"
if [ ! -f "$src/label.go" ]; then
    echo "$src has no label.go: not memberlist >= 0.3" >&2
    exit 1
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
pkg="$work/src/github.com/hashicorp/memberlist"
mkdir -p "$pkg" "$work/src/github.com/sean-"
cp "$src"/*.go "$pkg"/
rm -f "$pkg"/*_test.go
seed="$(find "$gocode/src/github.com/hashicorp/memberlist" "$gocode/src/github.com/sean-" -type d -path '*sean-/seed' \
        2>/dev/null | head -n 1 || true)"
if [ -z "$seed" ]; then
    echo "github.com/sean-/seed not found under $gocode (apt-get install golang-github-hashicorp-memberlist-dev)" >&2
    exit 1
fi
cp -r "$seed" "$work/src/github.com/sean-/seed"
binary="$work/memberlist_go"
if [ "${1:-}" = build ]; then
    binary="${2:?build needs the output path}"
fi
(cd "$here" && GO111MODULE=off GOFLAGS= GOPATH="$work:$gocode" GOCACHE="${GOCACHE:-$work/cache}" \
    go build -o "$binary" main.go)
if [ "${1:-}" != build ]; then
    "$binary" vectors -label dc1 > "$here/vectors.json.new"
    mv "$here/vectors.json.new" "$here/vectors.json"
fi
