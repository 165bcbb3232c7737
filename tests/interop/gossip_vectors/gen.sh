#!/usr/bin/env bash
# Regenerate vectors.json from memberlist's own Go code, offline.
#
# Needs: apt-get install golang-go golang-github-hashicorp-memberlist-dev
# (the Debian source under /usr/share/gocode, GOPATH mode, no network).
# gen.go is compiled inside a temporary copy of memberlist's package (its
# non-test files only) so that it can call memberlist's unexported encoders.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
gocode="${GOCODE:-/usr/share/gocode}"
src="$gocode/src/github.com/hashicorp/memberlist"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
pkg="$work/src/github.com/hashicorp/memberlist"
mkdir -p "$pkg"
cp "$src"/*.go "$pkg"/
rm -f "$pkg"/*_test.go
cp -r "$src/vendor" "$pkg"/
cp "$here/gen.go" "$pkg/zz_gossip_vectors_test.go"
cd "$pkg"
GO111MODULE=off GOFLAGS= GOPATH="$work:$gocode" GOCACHE="$work/cache" \
    go test -count=1 -run TestGossipVectors . -args -out "$here/vectors.json"
