#!/usr/bin/env bash
# peers.sh: waits until every lockguard pod of the cluster of $KUBECONFIG
# says in its log that it is warm (internal/peers: subscribed to every other
# replica that renews an identity Lease, its hold-off over, all
# Locks listed once), then prints each pod's peer log lines, one fact a
# line. Exits non-zero when a pod is still cold after PEERS_TIMEOUT seconds
# (default 240: a replica's hold-off, --pending-ttl, is 2 minutes).
set -euo pipefail
ns=lockguard-system
timeout=${PEERS_TIMEOUT:-240}
start=$SECONDS
deadline=$((SECONDS + timeout))
warm() { kubectl -n "$ns" logs "$1" | grep 'Replica state changed' | tail -1 | grep -Eq '"warm": ?true'; }
while :; do
  pods=$(kubectl -n "$ns" get pods -l app.kubernetes.io/name=lockguard -o jsonpath='{.items[*].metadata.name}')
  cold=()
  for p in $pods; do warm "$p" || cold+=("$p"); done
  [ "${#cold[@]}" -eq 0 ] && [ -n "$pods" ] && break
  [ "$SECONDS" -lt "$deadline" ] || break
  sleep 5
done
for p in $pods; do
  echo "peers: $p:"
  kubectl -n "$ns" logs "$p" | grep -E 'Replica state changed|Subscribed to a replica|Could not subscribe' | tail -6 | sed 's/^/  /' || true
done
if [ -z "$pods" ] || [ "${#cold[@]}" -gt 0 ]; then
  echo "peers: NOT OK: still cold after ${timeout}s: ${cold[*]:-no lockguard pod}"
  exit 1
fi
echo "peers: ok: $(wc -w <<<"$pods") replica(s) warm, each subscribed to the others found by their identity Leases (waited $((SECONDS - start))s after the suite)"
