#!/usr/bin/env bash
# record.sh REPORT README: writes the summary of a make e2e-kind run (REPORT,
# written by e2e/kind.sh) into README between the markers
# <!-- e2e-kind:begin --> and <!-- e2e-kind:end -->. Generated: do not edit
# that block by hand.
set -euo pipefail
report=${1:?usage: record.sh REPORT README}
readme=${2:?usage: record.sh REPORT README}
grep -q '<!-- e2e-kind:begin -->' "$readme" || { echo "record.sh: no e2e-kind markers in $readme" >&2; exit 1; }
block=$(mktemp)
trap 'rm -f "$block"' EXIT
{
  echo '<!-- e2e-kind:begin -->'
  echo '<!-- Written by make e2e-kind (hack/kind/record.sh); do not edit. -->'
  echo '```'
  cat "$report"
  echo '```'
  echo '<!-- e2e-kind:end -->'
} >"$block"
awk -v block="$block" '
  /<!-- e2e-kind:begin -->/ { while ((getline line < block) > 0) print line; skip = 1; next }
  /<!-- e2e-kind:end -->/ { skip = 0; next }
  !skip { print }
' "$readme" >"$readme.tmp" && mv "$readme.tmp" "$readme"
echo "record.sh: wrote the run into $readme"
