#!/usr/bin/env bash
# render.sh HELM CHART: prints deploy/lockguard.yaml, the chart rendered with
# its default values into namespace lockguard-system, for `kubectl apply`
# users (without the helm test Pod: they have no `helm test`). `make chart`
# runs it; `make verify-generated` fails when the committed file is stale.
# make release runs it on the packaged chart (CHART is then its .tgz).
set -euo pipefail
helm=${1:?usage: render.sh HELM CHART}
chart=${2:?usage: render.sh HELM CHART}
file=deploy/lockguard.yaml
if [[ $chart == *.tgz ]]; then
  file=lockguard.yaml
  echo "# lockguard, rendered from the packaged chart $(basename "$chart") with its default values"
  echo "# by \`make release\`. Needs cert-manager (it issues the webhook's"
else
  echo "# lockguard, rendered from deploy/chart/lockguard with its default values by"
  echo "# \`make chart\`: do not edit. Needs cert-manager (it issues the webhook's"
fi
cat <<HEADER
# serving certificate and injects its CA). Install with
#   kubectl apply --server-side -f $file
# and use the Helm chart to change any setting.
---
apiVersion: v1
kind: Namespace
metadata:
  name: lockguard-system
  labels:
    app.kubernetes.io/part-of: lockguard
    pod-security.kubernetes.io/enforce: restricted
HEADER
# helm's own home directories stay out of the way (no repositories needed).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
HELM_CACHE_HOME=$tmp/cache HELM_CONFIG_HOME=$tmp/config HELM_DATA_HOME=$tmp/data \
  "$helm" template lockguard "$chart" --namespace lockguard-system --include-crds --skip-tests
