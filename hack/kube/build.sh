#!/usr/bin/env bash
# build.sh VERSION OUTDIR [BINARY...]: builds BINARY (default kube-apiserver
# and kube-controller-manager; kubectl too on request, from v1.37) for Kubernetes
# VERSION (1.37.2 or 1.29.15) into OUTDIR, and etcd next to OUTDIR, from the
# Go module proxy, saying what it builds and for how long.
# Skips a binary that is already there (the cache key is the version).
# KUBE_ETCD=0 skips etcd (make test builds it with the first version only,
# while another version builds beside it).
set -euo pipefail
version=${1:?usage: build.sh VERSION OUTDIR [BINARY...]}
out=${2:?usage: build.sh VERSION OUTDIR [BINARY...]}
shift 2
binaries=("$@")
[ ${#binaries[@]} -gt 0 ] || binaries=(kube-apiserver kube-controller-manager)
here=$(cd "$(dirname "$0")" && pwd)
progress="$here/../with-progress.sh"
minor=${version#*.}; minor=${minor%%.*}
mod="$here/v1.$minor"
[ -d "$mod" ] || { echo "build.sh: unsupported Kubernetes version $version (have: $(ls -d "$here"/v1.* | xargs -n1 basename | tr '\n' ' '))" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
tags=""
[ "$minor" -lt 30 ] && tags="-tags=providerless"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags="$ldflags -X $pkg.gitVersion=v$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
cd "$mod"
for cmd in "${binaries[@]}"; do
  if [ ! -x "$out/$cmd" ]; then
    echo "$cmd v$version is built once from the Go module proxy (minutes on a small machine) and cached in $out" >&2
    "$progress" "$cmd v$version" env CGO_ENABLED=0 go build $tags -trimpath -ldflags "$ldflags" -o "$out/$cmd.tmp" "./$cmd"
    mv "$out/$cmd.tmp" "$out/$cmd"
  fi
done
# etcd comes from the newest module only and serves every supported version.
etcd_out="$(dirname "$out")/etcd"
if [ "${KUBE_ETCD:-1}" != 0 ] && [ ! -x "$etcd_out" ]; then
  echo "etcd is built once from the Go module proxy and cached in $etcd_out" >&2
  (cd "$here/v1.37" && "$progress" etcd env CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$etcd_out.tmp" ./etcd && mv "$etcd_out.tmp" "$etcd_out")
fi
