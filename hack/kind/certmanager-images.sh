#!/usr/bin/env bash
# certmanager-images.sh: builds cert-manager's controller, cainjector and
# webhook images from the github.com/cert-manager/cert-manager Go module
# (module hack/kind/certmanager), and prints their names, one a line.
# Each is the static binary FROM scratch, as user 1000 like cert-manager's
# own images. Cached by version and sources.
. "$(dirname "$0")/lib.sh"
mod="$HACK_KIND/certmanager"
key=$(inputs_hash "$mod"/go.sum "$mod"/*/main.go "$mod"/internal/*/*.go "$HACK_KIND"/certmanager-images.sh)
tag="$CERT_MANAGER_VERSION-$key"
out="$CACHE/cert-manager-$tag"
for cmd in controller cainjector webhook; do
  img="$LOCAL_REGISTRY/cert-manager-$cmd:$tag"
  if ! image_exists "$img"; then
    if [ ! -x "$out/$cmd" ]; then
      log "building cert-manager $cmd $CERT_MANAGER_VERSION (first time takes a few minutes)"
      (cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/$cmd" "./$cmd")
    fi
    ctx=$(mktemp -d)
    cp "$out/$cmd" "$ctx/$cmd"
    printf 'FROM scratch\nCOPY %s /app/cmd/%s\nUSER 1000:1000\nENTRYPOINT ["/app/cmd/%s"]\n' "$cmd" "$cmd" "$cmd" >"$ctx/Dockerfile"
    log "image $img"
    docker build -q -t "$img" "$ctx" >/dev/null
    rm -rf "$ctx"
  fi
  echo "$img"
done
