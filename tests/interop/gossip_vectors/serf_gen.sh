#!/usr/bin/env bash
# Regenerate serf_vectors.json from Serf's own Go code, offline
# (`serf_gen.sh coord`: coord_vectors.json from coord_gen.go instead).
#
# Needs: apt-get install golang-go golang-github-hashicorp-serf-dev
# golang-github-hashicorp-memberlist-dev (the Debian source under
# /usr/share/gocode, GOPATH mode, no network). serf_gen.go is compiled inside a
# temporary copy of Serf's serf package (its non-test files only) so that it
# can call Serf's unexported encoders and handlers.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
case "${1:-serf}" in
    serf) gen=serf_gen.go test=TestSerfVectors out=serf_vectors.json ;;
    coord) gen=coord_gen.go test=TestCoordVectors out=coord_vectors.json ;;
    *) echo "usage: $0 [serf|coord]" >&2; exit 2 ;;
esac
gocode="${GOCODE:-/usr/share/gocode}"
src="$gocode/src/github.com/hashicorp/serf/serf"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
pkg="$work/src/github.com/hashicorp/serf/serf"
mkdir -p "$pkg"
cp "$src"/*.go "$pkg"/
rm -f "$pkg"/*_test.go
cp "$here/$gen" "$pkg/zz_vectors_test.go"
cd "$pkg"
GO111MODULE=off GOFLAGS= GOPATH="$work:$gocode" GOCACHE="${GOCACHE_DIR:-$work/cache}" \
    go test -count=1 -run "$test" . -args -out "$here/$out"
