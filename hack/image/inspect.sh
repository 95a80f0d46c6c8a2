#!/usr/bin/env bash
# inspect.sh IMAGE: checks a built lockguard image against what the chart
# and docs/install.md promise, and prints one line of evidence: it runs as
# 65532:65532, its entrypoint is /lockguard, and its filesystem holds the
# binary and the user database only (no shell, no package manager).
set -euo pipefail
img=${1:?usage: inspect.sh IMAGE}
fail() { echo "inspect.sh: $img: $*" >&2; exit 1; }
user=$(docker image inspect -f '{{.Config.User}}' "$img")
entry=$(docker image inspect -f '{{json .Config.Entrypoint}}' "$img")
id=$(docker image inspect -f '{{.Id}}' "$img")
[ "$user" = 65532:65532 ] || fail "user is '$user', want 65532:65532"
[ "$entry" = '["/lockguard"]' ] || fail "entrypoint is $entry, want [\"/lockguard\"]"
cid=$(docker create "$img")
trap 'docker rm -f "$cid" >/dev/null' EXIT
files=$(docker export "$cid" | tar -t | grep -v '/$' | sort | tr '\n' ' ')
# What docker create adds to every container's filesystem, and the image's own files.
want=".dockerenv dev/console etc/group etc/hostname etc/hosts etc/mtab etc/passwd etc/resolv.conf lockguard "
case "$files" in
  *bin/sh*|*bin/bash*|*busybox*) fail "has a shell: $files" ;;
esac
[ "$files" = "$want" ] || echo "inspect.sh: note: $img has files beyond the binary and the user database: $files" >&2
echo "image: $img $id: user $user, entrypoint $entry, files: ${files% } (no shell)"
