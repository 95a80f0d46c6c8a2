#!/usr/bin/env bash
# node-image.sh VERSION: builds lockguard's kind node image for Kubernetes
# VERSION (1.37.2) without an image registry, and prints its name. Cached:
# a second run with the same inputs prints the name at once.
#
# What it holds, each built here:
#   - the node: kind's base image files (from the sigs.k8s.io/kind module) on
#     a Debian rootfs (debootstrap), with Debian's systemd, containerd, runc,
#     iptables and CNI plugins; the CNI bridge plugin with a static
#     configuration (node/cni) replaces kindnetd, so the cluster has one node;
#   - kubelet, kubeadm, kubectl (hack/kind/v1.MINOR, hack/kind/build-kube.sh);
#   - preloaded in the node's containerd, with the names kubeadm asks for:
#     kube-apiserver, kube-controller-manager (hack/kube), kube-scheduler,
#     kube-proxy (on Debian, with iptables), etcd (hack/kube's, or
#     hack/kind/etcd-v<version> where kubeadm wants another), CoreDNS
#     (github.com/coredns/coredns at kubeadm's version), pause (kubernetes'
#     own build/pause/linux/pause.c, compiled static with gcc).
# kind create cluster then pulls nothing.
. "$(dirname "$0")/lib.sh"
version=${1:?usage: node-image.sh VERSION}
minor=${version#*.}; minor=${minor%%.*}
mod="$HACK_KIND/v1.$minor"
[ -d "$mod" ] || { log "unsupported Kubernetes version $version"; exit 2; }

key=$(inputs_hash "$HACK_KIND"/node/Dockerfile "$HACK_KIND"/node/cni/* "$HACK_KIND"/versions.sh \
  "$HACK_KIND"/lib.sh "$HACK_KIND"/node-image.sh "$HACK_KIND"/build-kube.sh "$mod"/go.sum "$ROOT"/hack/kube/build.sh \
  "$HACK_KIND"/etcd-v*/go.sum)
node_image="$LOCAL_REGISTRY/kind-node:v$version-$key"
if image_exists "$node_image"; then
  log "node image $node_image is cached"
  echo "$node_image"
  exit 0
fi

bin="$CACHE/v$version/bin"
kube="$ROOT/bin/k8s/v$version"
"$ROOT/hack/kube/build.sh" "$version" "$kube"
"$HACK_KIND/build-kube.sh" "$version" "$bin"
debian=$(debian_image)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# static_image IMAGE BINARY PATH [USER]: an image FROM scratch holding one
# static binary at PATH, its entrypoint.
static_image() {
  local img=$1 binary=$2 path=$3 user=${4:-}
  image_exists "$img" && return 0
  log "image $img"
  local ctx="$work/img-$RANDOM"
  mkdir -p "$ctx"
  cp "$binary" "$ctx/binary"
  {
    echo "FROM scratch"
    echo "COPY binary $path"
    [ -n "$user" ] && echo "USER $user"
    echo "ENTRYPOINT [\"$path\"]"
  } >"$ctx/Dockerfile"
  docker build -q -t "$img" "$ctx" >/dev/null
}

mapfile -t images < <("$bin/kubeadm" config images list --kubernetes-version "v$version")
[ ${#images[@]} -ge 6 ] || { log "kubeadm config images list: ${images[*]}"; exit 1; }
pause_image=""
for i in "${!images[@]}"; do
  img=${images[$i]}
  name=${img%:*}; tag=${img##*:}
  case "$name" in
    */kube-apiserver|*/kube-controller-manager|*/kube-scheduler)
      cmd=${name##*/}
      src="$kube/$cmd"; [ -x "$src" ] || src="$bin/$cmd"
      static_image "$img" "$src" "/usr/local/bin/$cmd" ;;
    */kube-proxy)
      if ! image_exists "$img"; then
        log "image $img"
        mkdir -p "$work/kube-proxy" && cp "$bin/kube-proxy" "$work/kube-proxy/"
        cat >"$work/kube-proxy/Dockerfile" <<DOCKERFILE
FROM $debian
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      iptables nftables conntrack ipset kmod >/dev/null && rm -rf /var/lib/apt/lists/*
COPY kube-proxy /usr/local/bin/kube-proxy
DOCKERFILE
        docker build -q -t "$img" "$work/kube-proxy" >/dev/null
      fi ;;
    */etcd)
      # kubeadm's etcd version: hack/kube's etcd when it is that version,
      # else the module hack/kind/etcd-v<version> (1.29's kubeadm passes
      # flags that etcd 3.6 removed).
      want=${tag%-*}
      etcd="$ROOT/bin/k8s/etcd"
      if [ "$("$etcd" --version | sed -n 's/^etcd Version: //p')" != "$want" ]; then
        [ -d "$HACK_KIND/etcd-v$want" ] || { log "kubeadm wants etcd $want: no module hack/kind/etcd-v$want"; exit 1; }
        etcd="$CACHE/etcd-$want/etcd"
        if [ ! -x "$etcd" ]; then
          log "building etcd $want"
          (cd "$HACK_KIND/etcd-v$want" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$etcd.tmp" . && mv "$etcd.tmp" "$etcd")
        fi
        [ "$("$etcd" --version | sed -n 's/^etcd Version: //p')" = "$want" ] || { log "hack/kind/etcd-v$want does not build etcd $want"; exit 1; }
      fi
      static_image "$img" "$etcd" /usr/local/bin/etcd ;;
    */coredns)
      coredns="$CACHE/coredns-$tag/coredns"
      if [ ! -x "$coredns" ]; then
        log "building CoreDNS $tag (first time takes a few minutes)"
        (cd / && GOBIN="$CACHE/coredns-$tag" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@$tag")
      fi
      static_image "$img" "$coredns" /coredns ;;
    */pause)
      pause_image=$img
      pause="$CACHE/pause-$tag/pause"
      if [ ! -x "$pause" ]; then
        command -v gcc >/dev/null || apt_install gcc libc6-dev
        src="$(go_mod_dir "k8s.io/kubernetes@v$version")/build/pause/linux/pause.c"
        mkdir -p "$(dirname "$pause")"
        # As kubernetes' build/pause/Makefile compiles it.
        gcc -Os -Wall -Werror -static -DVERSION="v$tag" -o "$pause.tmp" "$src" && strip "$pause.tmp" && mv "$pause.tmp" "$pause"
      fi
      static_image "$img" "$pause" /pause 65535:65535 ;;
    *) log "no recipe for image $img"; exit 1 ;;
  esac
done

# The base: kind's base image files on Debian.
kind_dir=$(go_mod_dir "sigs.k8s.io/kind@$KIND_VERSION")
base_image="$LOCAL_REGISTRY/kind-base:$(inputs_hash "$HACK_KIND"/node/Dockerfile "$HACK_KIND"/node/cni/* "$HACK_KIND"/versions.sh)"
if ! image_exists "$base_image"; then
  log "image $base_image (Debian packages, kind $KIND_VERSION's base files)"
  mkdir -p "$work/base"
  cp -r "$HACK_KIND/node/Dockerfile" "$HACK_KIND/node/cni" "$work/base/"
  cp -r "$kind_dir/images/base/files" "$work/base/files"
  chmod -R u+w "$work/base"
  docker build --build-arg DEBIAN_IMAGE="$debian" -t "$base_image" "$work/base" >"$CACHE/base-build.log" 2>&1 ||
    { tail -30 "$CACHE/base-build.log" >&2; exit 1; }
fi

# The node: the base, the binaries, the images in containerd. As kind's
# own node-image builder does it: a container kept alive with sleep, a
# containerd started in it to import the images, then docker commit.
log "node image $node_image"
cid=$(docker run -d --entrypoint=sleep --security-opt seccomp=unconfined "$base_image" infinity)
trap 'docker rm -f -v "$cid" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
for b in kubeadm kubelet kubectl; do
  docker cp "$bin/$b" "$cid:/usr/bin/$b"
done
docker exec "$cid" bash -c "echo v$version > /kind/version && \
  sed -i 's|sandbox_image = .*|sandbox_image = \"$pause_image\"|' /etc/containerd/config.toml && \
  grep -q '$pause_image' /etc/containerd/config.toml"
docker exec -d "$cid" bash -c 'containerd >/var/log/containerd-build.log 2>&1'
deadline=$((SECONDS + 60))
until docker exec "$cid" ctr version >/dev/null 2>&1; do
  [ "$SECONDS" -lt "$deadline" ] || { docker exec "$cid" cat /var/log/containerd-build.log >&2; exit 1; }
  sleep 1
done
for img in "${images[@]}"; do
  docker save "$img" | docker exec -i "$cid" ctr --namespace=k8s.io images import \
    --label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests - >/dev/null
done
imported=$(docker exec "$cid" ctr --namespace=k8s.io images list -q)
for img in "${images[@]}"; do
  grep -qx "$img" <<<"$imported" || { log "$img missing in the node's containerd: $imported"; exit 1; }
done
docker exec "$cid" pkill containerd
until ! docker exec "$cid" pgrep -x containerd >/dev/null; do sleep 1; done
docker commit \
  --change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' \
  --change 'CMD []' \
  "$cid" "$node_image" >/dev/null
echo "$node_image"
