#!/usr/bin/env bash
# Runs the Dockerfile's build stage without a container engine: the same
# RUN commands, on a copy of the files the Docker build context holds
# (.dockerignore applied), for each platform the image is built for. A
# .dockerignore that drops a file the build needs, or a build line that no
# longer compiles, fails here rather than in `make docker-build`. It also
# checks the final stage's promises as written (no registry by default, user
# 65532, no shell to rely on); hack/image/inspect.sh checks a built image.
#   hack/image/check.sh [GOARCH...]   (default: amd64 arm64)
set -euo pipefail
cd "$(dirname "$0")/../.."
arches=("$@")
[ ${#arches[@]} -gt 0 ] || arches=(amd64 arm64)

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
# The context: the repository's files (tracked and new, not ignored by git),
# minus .dockerignore's entries (simple names and globs, as tar matches them).
excludes=()
while IFS= read -r line; do
  line=${line%%#*}; line=${line%"${line##*[![:space:]]}"}
  [ -n "$line" ] && excludes+=("--exclude=./${line%/}")
done < .dockerignore
git ls-files -co --exclude-standard -z | sed -z 's|^|./|' |
  tar "${excludes[@]}" --null -T - -cf - | tar -xf - -C "$ctx"

fail() { echo "check.sh: Dockerfile: $*" >&2; exit 1; }
grep -qx 'ARG BASE_IMAGE=scratch' Dockerfile || fail "the default base must be scratch (no registry)"
grep -qx 'ARG GO_IMAGE=lockguard.local/.*' Dockerfile || fail "the default GO_IMAGE must be the local one (no registry)"
[ "$(grep -c '^FROM ' Dockerfile)" = 2 ] || fail "want two stages"
[ "$(sed -n '/^FROM \${BASE_IMAGE}/,$p' Dockerfile | grep -c '^RUN')" = 0 ] || fail "the final stage may not RUN: it has no shell"
grep -qx 'USER 65532:65532' Dockerfile || fail "the image must run as 65532:65532"
grep -qx 'ENTRYPOINT \["/lockguard"\]' Dockerfile || fail "the entrypoint must be [\"/lockguard\"]"

# The build stage's RUN lines, with the Dockerfile's continuation lines joined.
mapfile -t runs < <(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' Dockerfile | sed -n 's/^RUN //p')
[ ${#runs[@]} -ge 2 ] || { echo "check.sh: no RUN lines found in the Dockerfile" >&2; exit 1; }
for arch in "${arches[@]}"; do
  echo "image: the Dockerfile's build stage for linux/$arch"
  for run in "${runs[@]}"; do
    (cd "$ctx" && VERSION=check TARGETOS=linux TARGETARCH="$arch" \
      bash -euo pipefail -c "${run//\/out\//$ctx/out-$arch/}")
  done
  file "$ctx/out-$arch/lockguard" 2>/dev/null || ls -l "$ctx/out-$arch/lockguard"
  grep -qx 'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' "$ctx/out-$arch/etc/passwd" || fail "no user 65532 in /etc/passwd"
done
