#!/usr/bin/env bash
# record.sh REPORT README NAME: writes the summary of a run (REPORT) into
# README between the markers <!-- NAME:begin --> and <!-- NAME:end -->
# (make e2e-kind writes e2e-kind-v<version>; make
# e2e-record writes the block e2e-record). Generated: do not edit that block
# by hand.
set -euo pipefail
report=${1:?usage: record.sh REPORT README NAME}
readme=${2:?usage: record.sh REPORT README NAME}
name=${3:?usage: record.sh REPORT README NAME}
grep -q "<!-- $name:begin -->" "$readme" || { echo "record.sh: no $name markers in $readme" >&2; exit 1; }
block=$(mktemp)
trap 'rm -f "$block"' EXIT
{
  echo "<!-- $name:begin -->"
  echo "<!-- Written by hack/kind/record.sh ($name); do not edit. -->"
  echo '```'
  cat "$report"
  echo '```'
  echo "<!-- $name:end -->"
} >"$block"
awk -v block="$block" -v begin="<!-- $name:begin -->" -v end="<!-- $name:end -->" '
  $0 == begin { while ((getline line < block) > 0) print line; skip = 1; next }
  $0 == end { skip = 0; next }
  !skip { print }
' "$readme" >"$readme.tmp" && mv "$readme.tmp" "$readme"
echo "record.sh: wrote the run into $readme"
