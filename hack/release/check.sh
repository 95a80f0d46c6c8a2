#!/usr/bin/env bash
# check.sh VERSION WORK: make release-check. Builds the release VERSION
# (a test version) into WORK/dist as make release does, then checks it the
# way users get it:
#   - SHA256SUMS verifies (sha256sum -c) and lists every file;
#   - a second build from scratch (fresh binaries, WORK/dist2) gives the
#     same bytes for every file: archives, images, chart, manifests, SBOMs,
#     and no binary holds a path of this machine (-trimpath);
#   - krew (KREW, built from its Go module) installs both plugins from
#     their manifests and the host's archive into a temporary KREW_ROOT
#     with the README's krew commands, as they stand there, and kubectl
#     runs them (kubectl lock --help, --version);
#   - where a Docker engine answers (RELEASE_CHECK_ENGINE=1 requires one):
#     docker load, inspect and run of the image archive, and containerd's
#     import of every image archive, as kind load image-archive runs it;
#   - e2e/release (go test -tags release): versions agree everywhere,
#     the images' layouts, the README's chart commands (helm install of the
#     packaged chart) on a local control plane give the chart directory's
#     objects, and every SBOM
#     lists the module's direct dependencies that its binary links, with
#     their versions.
# Needs HELM, CYCLONEDX_GOMOD, KREW and KUBECTL (the Makefile's pinned builds).
set -euo pipefail
version=${1:?usage: check.sh VERSION WORK}
work=${2:?usage: check.sh VERSION WORK}
: "${KREW:?KREW: the pinned krew}" "${KUBECTL:?KUBECTL: the pinned kubectl}" "${HELM:?}" "${CYCLONEDX_GOMOD:?}"
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
start=$SECONDS
step() { echo "release-check: $* ($((SECONDS - start))s)"; }
fail() { echo "release-check: FAIL: $*" >&2; exit 1; }

rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)
dist=$work/dist
goos=$(go env GOOS) goarch=$(go env GOARCH)

step "make release VERSION=$version DIST=$dist"
hack/release/release.sh "$version" "$dist"
# The README's install commands, as users copy them (the release notes
# repeat them): run below, the krew block here and the chart block in
# e2e/release.
for block in krew chart; do
  bin/release/release-tool readme -block $block >"$work/readme-$block.sh" || fail "README.md: no $block commands"
done

step "SHA256SUMS"
(cd "$dist" && sha256sum --quiet --strict -c SHA256SUMS) || fail "sha256sum -c SHA256SUMS"
listed=$(awk '{print $2}' "$dist/SHA256SUMS" | sort)
present=$(cd "$dist" && ls | grep -vx SHA256SUMS | sort)
[ "$listed" = "$present" ] || fail "SHA256SUMS does not list exactly the files of $dist: $(diff <(echo "$listed") <(echo "$present") || true)"

step "a second build, binaries relinked from scratch"
RELEASE_BUILD=$work/build2 hack/release/release.sh "$version" "$work/dist2" >"$work/release2.log"
same=0
while read -r sum name; do
  other=$(awk -v n="$name" '$2 == n {print $1}' "$work/dist2/SHA256SUMS")
  if [ "$sum" = "$other" ]; then
    same=$((same + 1))
    continue
  fi
  fail "$name differs between two builds of the same commit: sha256 $sum, then ${other:-missing}"
done <"$dist/SHA256SUMS"
step "$same files byte-identical in both builds"
for b in "bin/release/$version"/*/* "$work/build2"/*/*; do
  case $b in */release-tool) continue ;; esac
  for p in "$root" "$(go env GOMODCACHE)" "$(go env GOROOT)"; do
    ! grep -qF "$p" "$b" || fail "$b holds the path $p of this machine"
  done
done

step "krew $("$KREW" version 2>/dev/null | awk '$1 == "GitTag" {print $2}') installs the plugins into a temporary KREW_ROOT"
export KREW_ROOT=$work/krew KREW_NO_UPGRADE_CHECK=1
mkdir -p "$work/path"
ln -s "$KREW" "$work/path/kubectl-krew"
ln -s "$KUBECTL" "$work/path/kubectl"
(
  # Only krew's bin and kubectl: no other kubectl-lock on PATH. The
  # README's commands, in the release's directory, with the variables it
  # asks for.
  export PATH=$KREW_ROOT/bin:$work/path:/usr/bin:/bin
  echo "release-check: the README's krew commands:"
  cat "$work/readme-krew.sh"
  (cd "$dist" && VERSION=$version OS=$goos ARCH=$goarch bash -euo pipefail "$work/readme-krew.sh" </dev/null) ||
    fail "the README's krew commands"
  # (kubectl krew list wants the default index, which needs the network.)
  for plugin in lock unlock; do
    [ -f "$KREW_ROOT/receipts/$plugin.yaml" ] || fail "krew has no receipt of $plugin"
  done
  [ "$(command -v kubectl-lock)" = "$KREW_ROOT/bin/kubectl-lock" ] || fail "kubectl-lock is not krew's"
  help=$(kubectl lock --help)
  # kubectl's plugin help: invoked as "kubectl lock", with its subcommands.
  grep -q '^  kubectl lock \[command\]$' <<<"$help" && grep -q '^  list  ' <<<"$help" && grep -q '^  why  ' <<<"$help" ||
    { echo "$help"; fail "kubectl lock --help: want the usage 'kubectl lock [command]' and the subcommands list and why"; }
  for plugin in lock unlock; do
    got=$(kubectl $plugin --version)
    [ "$got" = "kubectl-$plugin $version" ] || fail "kubectl $plugin --version printed '$got'; want 'kubectl-$plugin $version'"
    echo "release-check: kubectl $plugin --version: $got"
  done
)

# The image archives in a real engine, where one answers (make
# release-check-engine starts one: hack/kind/dockerd.sh): docker load, and
# containerd's import of every platform as kind load image-archive runs
# it in a node. CI has no engine; e2e/release checks the layouts there.
if [ -n "${RELEASE_CHECK_ENGINE:-}" ] || docker info >/dev/null 2>&1; then
  docker info >/dev/null 2>&1 || fail "RELEASE_CHECK_ENGINE is set and no Docker engine answers"
  # The image the release's manifest runs.
  ref=$(awk '$1 == "image:" {print $2; exit}' "$dist/lockguard.yaml" | tr -d '"')
  [ -n "$ref" ] || fail "lockguard.yaml names no image"
  step "docker load and containerd import of the image archives ($ref)"
  docker image rm -f "$ref" >/dev/null 2>&1 || true
  loaded=$(docker load -i "$dist/lockguard-image_${version}_linux_$goarch.tar")
  [ "$loaded" = "Loaded image: $ref" ] || fail "docker load printed '$loaded'; want 'Loaded image: $ref'"
  got=$(docker image inspect -f '{{.Os}}/{{.Architecture}} {{.Config.User}} {{json .Config.Entrypoint}}' "$ref")
  [ "$got" = "linux/$goarch 65532:65532 [\"/lockguard\"]" ] || fail "docker image inspect $ref: $got"
  got=$(docker run --rm --network none "$ref" --version)
  [ "$got" = "lockguard $version" ] || fail "docker run $ref --version printed '$got'; want 'lockguard $version'"
  echo "release-check: docker load, inspect, run --version: $got"
  docker image rm "$ref" >/dev/null
  # kind load image-archive: ctr images import --all-platforms --digests
  # into the node's containerd (kind's nodeutils.LoadImageArchive).
  sock=/run/containerd/containerd.sock
  [ -S $sock ] || sock=/var/run/docker/containerd/containerd.sock
  for archive in "lockguard-image_${version}_linux_amd64.tar" "lockguard-image_${version}_linux_arm64.tar" "lockguard-image_$version.oci.tar"; do
    ctr --address $sock -n release-check images import --all-platforms --digests "$dist/$archive" >/dev/null ||
      fail "ctr images import $archive (what kind load image-archive runs)"
    names=$(ctr --address $sock -n release-check images ls -q)
    grep -qxF "$ref" <<<"$names" || fail "ctr images import $archive: no image $ref, only: $names"
    echo "release-check: containerd imported $archive as $ref"
    ctr --address $sock -n release-check images rm $names >/dev/null
  done
else
  echo "release-check: no Docker engine answers: docker load and containerd's import (kind load) not run; make release-check-engine runs them"
fi

step "e2e/release: versions, images, helm install on a control plane, SBOMs"
go vet -tags e2e,chaos,release ./e2e/release/
rc=0
LOCKGUARD_RELEASE_DIST=$dist LOCKGUARD_RELEASE_VERSION=$version LOCKGUARD_RELEASE_INSTALL=$work/readme-chart.sh LOCKGUARD_REQUIRE_KUBE=1 \
  go test -tags release -count=1 -v ./e2e/release/ >"$work/e2e-release.log" 2>&1 || rc=$?
grep -vE '^=== (RUN|PAUSE|CONT)' "$work/e2e-release.log" || true
[ $rc = 0 ] || fail "e2e/release (log: $work/e2e-release.log)"
step "PASS"
