#!/usr/bin/env bash
# build-kube.sh VERSION OUTDIR: builds kubelet, kubeadm, kubectl, kube-scheduler
# and kube-proxy for Kubernetes VERSION into OUTDIR from the Go module proxy
# (module hack/kind/v1.MINOR), with the version stamped as release builds do
# (kubeadm picks its image tags and helm its capabilities from it). Skips a
# binary that is already there: the cache key is the version.
set -euo pipefail
version=${1:?usage: build-kube.sh VERSION OUTDIR}
out=${2:?usage: build-kube.sh VERSION OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
minor=${version#*.}; minor=${minor%%.*}
mod="$here/v1.$minor"
[ -d "$mod" ] || { echo "build-kube.sh: unsupported Kubernetes version $version" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
tags=""
[ "$minor" -lt 30 ] && tags="-tags=providerless"
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=v$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
cd "$mod"
for cmd in kubeadm kubectl kubelet kube-scheduler kube-proxy; do
  if [ ! -x "$out/$cmd" ]; then
    echo "hack/kind: building $cmd v$version (first time takes a few minutes)..." >&2
    CGO_ENABLED=0 go build $tags -trimpath -ldflags "$ldflags" -o "$out/$cmd.tmp" "./$cmd"
    mv "$out/$cmd.tmp" "$out/$cmd"
  fi
done
