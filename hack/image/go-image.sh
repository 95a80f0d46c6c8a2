#!/usr/bin/env bash
# go-image.sh: builds the Dockerfile's default GO_IMAGE without an image
# registry, and prints its name: a Debian rootfs (debootstrap, cached as a
# local image) with ca-certificates and the Go toolchain of
# hack/kind/versions.sh from the Go module proxy (module golang.org/toolchain,
# the same files as the release archive), trusting the certificate
# authorities this machine trusts (its bundle as SSL_CERT_FILE: here, TLS to
# the module proxy goes through an intercepting proxy with a CA of its own).
# Cached: a second run is instant.
. "$(dirname "$0")/../kind/lib.sh"
ca_bundle=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
img="$LOCAL_REGISTRY/golang:$GO_TOOLCHAIN-$(inputs_hash "$ca_bundle" "$0" "$HACK_KIND/versions.sh")"
if ! image_exists "$img"; then
  debian=$(debian_image)
  goroot=$(go_mod_dir "golang.org/toolchain@v0.0.1-go$GO_TOOLCHAIN.linux-amd64")
  [ -f "$goroot/bin/go" ] || { log "no Go toolchain $GO_TOOLCHAIN in $goroot"; exit 1; }
  ctx=$(mktemp -d)
  trap 'rm -rf "$ctx"' EXIT
  cp -r "$goroot" "$ctx/go"
  # The module cache keeps no execute bits; the toolchain's go command sets
  # them when it switches toolchains, as here.
  chmod -R u+w "$ctx/go"
  chmod +x "$ctx"/go/bin/* "$ctx"/go/pkg/tool/*/*
  cp "$ca_bundle" "$ctx/host-ca-certificates.crt"
  cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM $debian
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ca-certificates git >/dev/null \
    && rm -rf /var/lib/apt/lists/*
COPY go /usr/local/go
COPY host-ca-certificates.crt /etc/ssl/host-ca-certificates.crt
ENV PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin GOPATH=/go GOTOOLCHAIN=local \
    SSL_CERT_FILE=/etc/ssl/host-ca-certificates.crt
RUN go version
DOCKERFILE
  log "image $img (Debian $DEBIAN_SUITE, Go $GO_TOOLCHAIN)"
  docker build -q -t "$img" "$ctx" >/dev/null
fi
# The Dockerfile's default GO_IMAGE names the latest one.
docker tag "$img" "$LOCAL_REGISTRY/golang:$GO_TOOLCHAIN"
echo "$img"
