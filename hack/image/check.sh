#!/usr/bin/env bash
# Runs the Dockerfile's build stage without a container engine: the same
# RUN commands, on a copy of the files the Docker build context holds
# (.dockerignore applied), for each platform the image is built for. A
# .dockerignore that drops a file the build needs, or a build line that no
# longer compiles, fails here rather than in `make docker-build`.
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
done
