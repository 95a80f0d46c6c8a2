#!/usr/bin/env bash
# e2e/kind.sh: lockguard's e2e suite in cluster mode on a throwaway kind
# cluster (`make e2e-kind`). Needs docker, kind, kubectl and helm; cannot run
# where there is no container engine. See e2e/README.md.
#
# Environment:
#   IMG                  image to build and load (default ghcr.io/navique/lockguard:e2e)
#   VERSION              version stamped into the binary (default dev)
#   HELM                 helm binary (default: helm on PATH); without one,
#                        deploy/lockguard.yaml (the rendered chart) is applied
#   KIND_CLUSTER         cluster name (default lockguard-e2e)
#   KIND_NODE_IMAGE      node image, e.g. kindest/node:v1.29.14 for the oldest
#                        supported Kubernetes (default: kind's own)
#   CERT_MANAGER_VERSION cert-manager release (default v1.16.2)
#   KEEP_CLUSTER=1       keep the cluster afterwards (for debugging)
set -euo pipefail
cd "$(dirname "$0")/.."

IMG=${IMG:-ghcr.io/navique/lockguard:e2e}
VERSION=${VERSION:-dev}
CLUSTER=${KIND_CLUSTER:-lockguard-e2e}
CERT_MANAGER_VERSION=${CERT_MANAGER_VERSION:-v1.16.2}
HELM=${HELM:-helm}
[ -x "$HELM" ] || HELM=$(command -v helm || true)

for tool in docker kind kubectl go; do
  command -v "$tool" >/dev/null || { echo "e2e/kind.sh: $tool is required" >&2; exit 2; }
done

kubeconfig=$(mktemp)
cleanup() {
  if [ -z "${KEEP_CLUSTER:-}" ]; then
    kind delete cluster --name "$CLUSTER" || true
    rm -f "$kubeconfig"
  else
    echo "e2e/kind.sh: kept cluster $CLUSTER; KUBECONFIG=$kubeconfig"
  fi
}
trap cleanup EXIT

# wait_for DESCRIPTION SECONDS COMMAND...: polls COMMAND every 2s until it
# succeeds, or fails after SECONDS.
wait_for() {
  local what=$1 timeout=$2; shift 2
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$deadline" ]; then echo "e2e/kind.sh: timed out waiting for $what" >&2; return 1; fi
    sleep 2
  done
}

echo "--- kind cluster $CLUSTER"
kind create cluster --name "$CLUSTER" ${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"} --kubeconfig "$kubeconfig" --wait 180s
export KUBECONFIG=$kubeconfig
kubectl version

echo "--- cert-manager $CERT_MANAGER_VERSION"
kubectl apply -f "https://github.com/cert-manager/cert-manager/releases/download/$CERT_MANAGER_VERSION/cert-manager.yaml"
for d in cert-manager cert-manager-cainjector cert-manager-webhook; do
  kubectl -n cert-manager rollout status "deployment/$d" --timeout=300s
done

echo "--- image $IMG"
docker build --build-arg VERSION="$VERSION" -t "$IMG" .
kind load docker-image "$IMG" --name "$CLUSTER"

# The sample CRDs the scenarios use, installed before lockguard so that its
# kind discovery and the garbage collector know them from the start (the
# suites install them too: framework.InstallSampleCRDs).
kubectl apply -f e2e/testdata/crds/
kubectl wait --for=condition=Established --timeout=60s -f e2e/testdata/crds/

echo "--- lockguard"
if [ -n "$HELM" ] && [ -d deploy/chart/lockguard ]; then
  # cert-manager's webhook may refuse Certificates for a few seconds after
  # it reports ready: retry the install.
  wait_for "helm install" 120 "$HELM" upgrade --install lockguard deploy/chart/lockguard \
    --namespace lockguard-system --create-namespace \
    --set image.repository="${IMG%:*}" --set image.tag="${IMG##*:}" --set image.pullPolicy=Never
else
  echo "no helm: applying deploy/lockguard.yaml (the chart rendered with its defaults)"
  wait_for "kubectl apply" 120 kubectl apply -f deploy/lockguard.yaml
  kubectl -n lockguard-system set image deployment/lockguard lockguard="$IMG"
  kubectl -n lockguard-system patch deployment lockguard --type=json \
    -p '[{"op":"replace","path":"/spec/template/spec/containers/0/imagePullPolicy","value":"Never"}]'
fi
kubectl -n lockguard-system rollout status deployment/lockguard --timeout=300s
# cert-manager's cainjector fills in the webhook's caBundle.
wait_for "the webhook's caBundle" 180 bash -c \
  "[ -n \"\$(kubectl get validatingwebhookconfigurations -o jsonpath='{.items[*].webhooks[?(@.name==\"delete.lockguard.core.navique.com\")].clientConfig.caBundle}')\" ]"

echo "--- e2e and contract suites (cluster mode)"
LOCKGUARD_E2E_MODE=cluster go test -tags e2e -p 1 -count=1 -timeout 20m -v ./e2e/ ./e2e/contract/
