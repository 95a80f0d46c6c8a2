#!/usr/bin/env bash
# with-progress.sh WHAT COMMAND...: runs COMMAND (a long build) and says so:
# "building WHAT...", then "still building WHAT: 1m15s so far" every
# PROGRESS_INTERVAL seconds (15), then how long it took, so that a first run
# never looks hung. Exits with COMMAND's status.
set -euo pipefail
what=${1:?usage: with-progress.sh WHAT COMMAND...}
shift
start=$(date +%s)
elapsed() { local s=$(($(date +%s) - start)); if ((s >= 60)); then echo "$((s / 60))m$((s % 60))s"; else echo "${s}s"; fi; }
echo "building $what..." >&2
(
  trap 'kill "$nap" 2>/dev/null; exit 0' TERM
  while :; do
    sleep "${PROGRESS_INTERVAL:-15}" & nap=$!
    wait "$nap"
    echo "  still building $what: $(elapsed) so far" >&2
  done
) &
ticker=$!
trap 'kill "$ticker" 2>/dev/null || true' EXIT
rc=0
"$@" || rc=$?
kill "$ticker" 2>/dev/null || true
wait "$ticker" 2>/dev/null || true
if ((rc == 0)); then echo "built $what in $(elapsed)" >&2; fi
exit "$rc"
