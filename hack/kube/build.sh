#!/usr/bin/env bash
# build.sh VERSION OUTDIR: builds etcd, kube-apiserver and kube-controller-manager
# for Kubernetes VERSION (1.37.2 or 1.29.15) into OUTDIR, from the Go module proxy.
# Skips the build when the binaries are already there (the cache key is the version).
set -euo pipefail
version=${1:?usage: build.sh VERSION OUTDIR}
out=${2:?usage: build.sh VERSION OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
minor=${version#*.}; minor=${minor%%.*}
mod="$here/v1.$minor"
[ -d "$mod" ] || { echo "build.sh: unsupported Kubernetes version $version (have: $(ls -d "$here"/v1.* | xargs -n1 basename | tr '\n' ' '))" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
tags=""
[ "$minor" -lt 30 ] && tags="-tags=providerless"
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=v$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
cd "$mod"
for cmd in kube-apiserver kube-controller-manager; do
  if [ ! -x "$out/$cmd" ]; then
    echo "building $cmd v$version (first time takes a few minutes)..." >&2
    CGO_ENABLED=0 go build $tags -trimpath -ldflags "$ldflags" -o "$out/$cmd.tmp" "./$cmd"
    mv "$out/$cmd.tmp" "$out/$cmd"
  fi
done
# etcd comes from the newest module only and serves every supported version.
etcd_out="$(dirname "$out")/etcd"
if [ ! -x "$etcd_out" ]; then
  echo "building etcd..." >&2
  (cd "$here/v1.37" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$etcd_out.tmp" ./etcd && mv "$etcd_out.tmp" "$etcd_out")
fi
