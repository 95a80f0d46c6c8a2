#!/usr/bin/env bash
# dockerd.sh: makes sure a Docker engine answers: installs Debian's docker.io
# when there is no dockerd (needs root and apt), and starts dockerd in the
# background when it is not running (log: bin/kind-cache/dockerd.log). The
# dockerd it starts keeps running after make e2e-kind, for the next run's
# cached images.
#
# Where root lacks a capability in its bounding set (this machine withholds
# CAP_SYS_RESOURCE), Docker 20.10 cannot start --privileged containers such
# as kind's nodes; the dockerd started here then runs containers through
# hack/kind/runc-bounded, which drops what cannot be held.
. "$(dirname "$0")/lib.sh"
bounded=""
[ "$(awk '/^CapBnd:/ {print $2}' /proc/self/status)" = "$(printf '%016x' $(( (1 << ($(cat /proc/sys/kernel/cap_last_cap) + 1)) - 1 )))" ] || bounded=1

if docker info >/dev/null 2>&1; then
  if [ -n "$bounded" ] && ! docker info -f '{{.DefaultRuntime}}' | grep -qx runc-bounded; then
    log "dockerd runs privileged containers with every capability, which this machine withholds from root"
    log "(kind's nodes would fail with 'unable to apply caps'): stop it and run $0 to start one with hack/kind/runc-bounded"
    exit 2
  fi
  exit 0
fi
if ! command -v dockerd >/dev/null; then
  [ "$(id -u)" = 0 ] || { log "no dockerd, and installing docker.io needs root"; exit 2; }
  apt_install docker.io
fi
command -v jq >/dev/null || apt_install jq
args=()
if [ -n "$bounded" ]; then
  install -m 0755 "$HACK_KIND/runc-bounded" "$CACHE/runc-bounded"
  args+=(--add-runtime "runc-bounded=$CACHE/runc-bounded" --default-runtime runc-bounded)
fi
if ! pgrep -x dockerd >/dev/null; then
  log "starting dockerd ${args[*]} (log: $CACHE/dockerd.log)"
  setsid nohup dockerd "${args[@]}" >"$CACHE/dockerd.log" 2>&1 </dev/null &
fi
deadline=$((SECONDS + 60))
until docker info >/dev/null 2>&1; do
  [ "$SECONDS" -lt "$deadline" ] || { log "dockerd did not answer within 60s"; tail -20 "$CACHE/dockerd.log" >&2; exit 1; }
  sleep 1
done
