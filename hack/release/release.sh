#!/usr/bin/env bash
# release.sh VERSION DIST: writes lockguard's release VERSION (vX.Y.Z or
# vX.Y.Z-PRE; empty: a dev release vX.Y.Z-dev.gCOMMIT, X.Y.Z the chart's
# version) into DIST, emptied first (make release):
#   lockguard_VERSION_OS_ARCH.tar.gz              linux, darwin; amd64, arm64
#   kubectl-lock_VERSION_OS_ARCH.tar.gz|.zip      the same and windows/amd64: kubectl-lock and kubectl-unlock
#   lock.yaml, unlock.yaml                        krew manifests of the two plugins (same archives)
#   lockguard-X.Y.Z.tgz, lockguard.yaml           the chart, and the plain manifest rendered from it
#   lockguard-image_VERSION_linux_ARCH.tar        the image per architecture (docker load, kind load image-archive)
#   lockguard-image_VERSION.oci.tar               both behind one image index (OCI layout)
#   *.cdx.json                                    a CycloneDX SBOM per binary and image
#   RELEASE_NOTES.md, SHA256SUMS
# VERSION is the one source of the version: the binaries' --version, the
# chart's version and appVersion (so the image tag, X.Y.Z), the image's
# tag and labels and the krew manifests all take it from here. Every file
# (archives, images, the chart) is the same bytes on every run of a commit:
# -trimpath, no VCS stamp, and the commit's time on every file.
# Needs HELM and CYCLONEDX_GOMOD (the Makefile's pinned builds) and
# GO_GCFLAGS (the Makefile's compiler flags; it may be empty). The
# binaries are kept in RELEASE_BUILD (default bin/release/VERSION), so a
# second run relinks nothing.
#
# release.sh check VERSION (make release, first) resolves and checks the
# version (hack/release version: vX.Y.Z must be the chart's version and
# have its changelog entry) in seconds, before the tools are built.
#
# release.sh compile (make release-compile) compiles every platform's
# packages into the Go build cache with the same flags, linking and writing
# nothing, so that a later release or release-check only links: make test
# does it in its background lane, at the lowest priority.
set -euo pipefail
: "${GO_GCFLAGS?GO_GCFLAGS: the compiler flags of the Makefile}"
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

# The platforms of a release, and the packages built for each.
platforms=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64)
packages() {
  case $1 in
    windows/*) echo ./cmd/kubectl-lock ./cmd/kubectl-unlock ;;
    *) echo ./cmd/lockguard ./cmd/kubectl-lock ./cmd/kubectl-unlock ;;
  esac
}
# go_release OS/ARCH GO-SUBCOMMAND ARGS...: the go command with the release's
# settings. GOFLAGS fixed, whatever else the environment says: the compiler
# flags of make's builds (GO_GCFLAGS: no DWARF, the binaries are stripped
# anyway; the output does not depend on -c), so that linux/amd64 reuses the
# packages make build and make test compiled.
go_release() {
  local platform=$1 cmd=$2
  shift 2
  CGO_ENABLED=0 GOOS=${platform%/*} GOARCH=${platform#*/} GOFLAGS=$GO_GCFLAGS go "$cmd" -trimpath -buildvcs=false "$@"
}

if [ "${1:-}" = compile ]; then
  for platform in "${platforms[@]}"; do
    start=$SECONDS
    # go list -export compiles each package as go build does (the same
    # cache entries) and links nothing.
    # shellcheck disable=SC2046 # packages() is a list of words
    go_release "$platform" list -export -deps -f '' $(packages "$platform") >/dev/null
    echo "release compile: $platform in $((SECONDS - start))s"
  done
  exit 0
fi

usage="usage: release.sh VERSION DIST (VERSION empty: a dev release), release.sh check VERSION, or release.sh compile"
[ $# = 2 ] || { echo "$usage" >&2; exit 2; }
chart=deploy/chart/lockguard
# The release tool (hack/release, standard library only: seconds to build)
# resolves the version first, so that a VERSION that cannot be released
# fails before anything else is built.
tool=bin/release/release-tool
mkdir -p bin/release
go build -o "$tool" ./hack/release
if [ "$1" = check ]; then
  "$tool" version ${2:+-version "$2"} -chart $chart/Chart.yaml -changelog CHANGELOG.md >/dev/null
  exit 0
fi
version=$("$tool" version ${1:+-version "$1"} -chart $chart/Chart.yaml -changelog CHANGELOG.md)
dist=$2
: "${HELM:?HELM: the pinned helm}" "${CYCLONEDX_GOMOD:?CYCLONEDX_GOMOD: the pinned cyclonedx-gomod}"
chart_version=${version#v}
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
build=${RELEASE_BUILD:-bin/release/$version}
url=https://github.com/navique/lockguard/releases/download/$version
image_repo=$(awk '/^image:/ {in_image=1} in_image && $1 == "repository:" {print $2; exit}' $chart/values.yaml)
[ -n "$image_repo" ] || { echo "release.sh: no image.repository in $chart/values.yaml" >&2; exit 1; }

start=$SECONDS
step() { echo "release: $* ($((SECONDS - start))s)"; }

rm -rf "$dist"
mkdir -p "$dist" "$build"
dist=$(cd "$dist" && pwd)

# The binaries, cross-built (the Go build cache keeps each platform's
# packages), their archives and SBOMs.
for platform in "${platforms[@]}"; do
  os=${platform%/*} arch=${platform#*/}
  out=$build/${os}_$arch
  read -r -a pkgs <<<"$(packages "$platform")"
  ext=.tar.gz exe=
  if [ "$os" = windows ]; then ext=.zip exe=.exe; fi
  step "building ${pkgs[*]} for $platform"
  mkdir -p "$out"
  go_release "$platform" build -ldflags "-s -w -X main.version=$version" -o "$out/" "${pkgs[@]}"
  if [ "$os" != windows ]; then
    "$tool" archive -mtime "$epoch" -o "$dist/lockguard_${version}_${os}_$arch$ext" "$out/lockguard"
  fi
  "$tool" archive -mtime "$epoch" -o "$dist/kubectl-lock_${version}_${os}_$arch$ext" "$out/kubectl-lock$exe" "$out/kubectl-unlock$exe"
  for pkg in "${pkgs[@]}"; do
    bin=${pkg##*/}
    "$CYCLONEDX_GOMOD" bin -json -noserial -notimestamp -std -version "$version" \
      -output "$dist/${bin}_${version}_${os}_$arch.cdx.json" "$out/$bin$exe"
  done
done

step "krew manifests"
for plugin in lock unlock; do
  "$tool" krew -name $plugin -bin kubectl-$plugin -version "$version" -url "$url" -o "$dist/$plugin.yaml" \
    "$dist"/kubectl-lock_"$version"_*.tar.gz "$dist"/kubectl-lock_"$version"_*.zip
done

step "images $image_repo:$chart_version"
"$tool" image -repo "$image_repo" -tag "$chart_version" -version "$version" -mtime "$epoch" \
  -o "$dist/lockguard-image_$version" amd64="$build/linux_amd64/lockguard" arm64="$build/linux_arm64/lockguard"
# An image holds the linux binary and two text files: its SBOM is the binary's.
for arch in amd64 arm64; do
  cp "$dist/lockguard_${version}_linux_$arch.cdx.json" "$dist/lockguard-image_${version}_linux_$arch.cdx.json"
done

step "chart lockguard-$chart_version"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r $chart "$tmp/lockguard"
# Artifact Hub's list of images names the tag too; helm package sets
# version and appVersion.
sed -i "s|image: $image_repo:.*|image: $image_repo:$chart_version|" "$tmp/lockguard/Chart.yaml"
HELM_CACHE_HOME=$tmp/cache HELM_CONFIG_HOME=$tmp/config HELM_DATA_HOME=$tmp/data \
  "$HELM" package "$tmp/lockguard" --version "$chart_version" --app-version "$chart_version" -d "$dist" >/dev/null
# helm package stamps the time of packaging on every file: the commit's
# time instead, so the chart is the same bytes on every run too.
"$tool" retime -mtime "$epoch" "$dist/lockguard-$chart_version.tgz"
packaged=$("$HELM" show chart "$dist/lockguard-$chart_version.tgz")
for want in "version: $chart_version" "appVersion: $chart_version" "image: $image_repo:$chart_version"; do
  grep -qF -- "$want" <<<"$packaged" || { echo "release.sh: the packaged Chart.yaml lacks '$want'" >&2; exit 1; }
done
hack/chart/render.sh "$HELM" "$dist/lockguard-$chart_version.tgz" >"$dist/lockguard.yaml"

step "release notes"
"$tool" notes -version "$version" -image "$image_repo" -changelog CHANGELOG.md -readme README.md -o "$dist/RELEASE_NOTES.md"
"$tool" sums -dir "$dist"
step "$version in $dist: $(ls "$dist" | wc -l) files, $(du -sh "$dist" | cut -f1)"
case $version in *-dev.*) echo "release: $version is a dev release (make release VERSION=vX.Y.Z builds a release)" ;; esac
