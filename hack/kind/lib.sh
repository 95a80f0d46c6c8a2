# Helpers of hack/kind/*.sh (sourced).
set -euo pipefail
HACK_KIND=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HACK_KIND/../.." && pwd)
# shellcheck source=versions.sh
. "$HACK_KIND/versions.sh"
CACHE=${KIND_CACHE:-$ROOT/bin/kind-cache}
mkdir -p "$CACHE"

log() { echo "hack/kind: $*" >&2; }

# image_exists IMAGE: whether the local docker has IMAGE.
image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

# inputs_hash FILE...: a short hash of the files' contents (a cache key).
inputs_hash() { cat "$@" | sha256sum | cut -c1-12; }

# go_mod_dir MODULE@VERSION: downloads a module through the Go module proxy
# and prints its directory in the module cache.
go_mod_dir() {
  (cd / && go mod download -json "$1" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
}

# debian_image: prints the name of a Debian $DEBIAN_SUITE rootfs image,
# built with debootstrap (minbase) and docker import the first time.
debian_image() {
  local img="$LOCAL_REGISTRY/debian:$DEBIAN_SUITE"
  if ! image_exists "$img"; then
    command -v debootstrap >/dev/null || apt_install debootstrap
    local dir="$CACHE/rootfs-$DEBIAN_SUITE"
    rm -rf "$dir"
    log "debootstrap $DEBIAN_SUITE (once)"
    debootstrap --variant=minbase "$DEBIAN_SUITE" "$dir" "$DEBIAN_MIRROR" >"$CACHE/debootstrap.log" 2>&1 ||
      { tail -20 "$CACHE/debootstrap.log" >&2; return 1; }
    rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
    tar -C "$dir" -c . | docker import --change 'CMD ["bash"]' - "$img" >/dev/null
    rm -rf "$dir"
  fi
  echo "$img"
}

# apt_install PACKAGE...: installs Debian packages on this machine.
apt_install() {
  log "apt-get install $*"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}
