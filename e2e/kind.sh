#!/usr/bin/env bash
# e2e/kind.sh: lockguard's e2e suite in cluster mode on a throwaway kind
# cluster (`make e2e-kind`), with no image registry: every image is built
# here (hack/kind, e2e/README.md). Needs root (it installs and starts
# dockerd when missing), Go and the Debian and Go module mirrors.
#
# Environment:
#   KIND_KUBE_VERSION    Kubernetes version of the node (default 1.37.2)
#   IMG                  lockguard's image, built from ./Dockerfile (default ghcr.io/navique/lockguard:e2e)
#   VERSION              version stamped into the binary (default: the last
#                        commit that changed the image's build context, so
#                        that commits to e2e/, hack/ or docs reuse the image)
#   HELM                 helm binary (make passes its pinned one)
#   KIND_CLUSTER         cluster name (default lockguard-e2e)
#   KEEP_CLUSTER=1       keep the cluster afterwards (for debugging)
#   E2E_KIND_REPORT      the run's report (default bin/e2e-kind-report.txt)
#   E2E_KIND_RECORD=0    do not write the run into e2e/README.md
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/kind/lib.sh

KUBE_VERSION=${KIND_KUBE_VERSION:-1.37.2}
IMG=${IMG:-ghcr.io/navique/lockguard:e2e}
# The build context is the tree less .dockerignore's entries.
context_paths=(. ':!e2e' ':!hack' ':!deploy' ':!docs' ':!*.md' ':!Makefile' ':!.dockerignore')
if [ -z "${VERSION:-}" ]; then
  VERSION=$(git log -1 --format=%h -- "${context_paths[@]}")
  git diff --quiet HEAD -- "${context_paths[@]}" || VERSION="$VERSION-dirty"
fi
CLUSTER=${KIND_CLUSTER:-lockguard-e2e}
HELM=${HELM:-$(command -v helm || true)}
REPORT=${E2E_KIND_REPORT:-$ROOT/bin/e2e-kind-report.txt}
[ -n "$HELM" ] && [ -x "$HELM" ] || { log "helm is required (make e2e-kind builds it)"; exit 2; }
command -v go >/dev/null || { log "go is required"; exit 2; }

start=$SECONDS
commit=$(git rev-parse --short HEAD)
[ -z "$(git status --porcelain)" ] || commit="$commit (with uncommitted changes)"
phases=()
# phase NAME: ends the previous phase (recording its time) and starts NAME.
phase_name="" phase_start=$SECONDS
phase() {
  [ -n "$phase_name" ] && phases+=("$(printf '%-44s %5ds' "$phase_name" $((SECONDS - phase_start)))")
  phase_name=$1 phase_start=$SECONDS
  echo "--- $1"
}
result=FAIL
mkdir -p "$(dirname "$REPORT")"
evidence="$CACHE/evidence.txt"
suite_report="$CACHE/suite-report.txt"
: >"$evidence"; rm -f "$suite_report"

kubeconfig="$CACHE/kubeconfig-$CLUSTER"
finish() {
  local rc=$?
  phase "delete the cluster"
  if [ -z "${KEEP_CLUSTER:-}" ]; then
    "$KIND" delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
  else
    echo "e2e/kind.sh: kept cluster $CLUSTER; KUBECONFIG=$kubeconfig"
  fi
  phase ""
  # PASS only for a run that ended well and whose suite reported.
  [ "$rc" = 0 ] && [ -s "$suite_report" ] && result=PASS
  write_report
  exit "$rc"
}

write_report() {
  local total=$((SECONDS - start))
  {
    echo "make e2e-kind: $result in $((total / 60))m$((total % 60))s on commit $commit, $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "Kubernetes $KUBE_VERSION on kind $KIND_VERSION ($node_image_state), $(nproc) cores, load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    echo "phases:"
    printf '  %s\n' "${phases[@]}"
    echo
    echo "evidence:"
    sed 's/^/  /' "$evidence"
    echo
    if [ -s "$suite_report" ]; then cat "$suite_report"; else echo "the e2e suite did not report (it did not run or did not finish)"; fi
  } >"$REPORT"
  echo "=== $REPORT"
  cat "$REPORT"
  if [ "${E2E_KIND_RECORD:-1}" = 1 ]; then
    # One block per Kubernetes version: e2e-kind-v<version>.
    hack/kind/record.sh "$REPORT" e2e/README.md "e2e-kind-v$KUBE_VERSION"
  fi
}

node_image_state="node image not built"
phase "dockerd"
hack/kind/dockerd.sh

phase "kind $KIND_VERSION"
KIND="$ROOT/bin/kind-$KIND_VERSION"
if [ ! -x "$KIND" ]; then
  GOBIN="$CACHE/kind-gobin" CGO_ENABLED=0 go install "sigs.k8s.io/kind@$KIND_VERSION"
  mv "$CACHE/kind-gobin/kind" "$KIND"
fi
trap finish EXIT
# A signal ends the run as a failure (without these, the EXIT trap saw the
# status of the last command, and a run killed mid-build was written as a PASS).
trap 'exit 143' TERM
trap 'exit 130' INT

phase "node image (Kubernetes $KUBE_VERSION)"
cached_before=$(docker images -q "$LOCAL_REGISTRY/kind-node" | wc -l)
node_image=$(hack/kind/node-image.sh "$KUBE_VERSION")
if [ "$(docker images -q "$LOCAL_REGISTRY/kind-node" | wc -l)" -gt "$cached_before" ]; then
  node_image_state="node image built in this run"
else
  node_image_state="node image cached"
fi
# The node's kubectl, for the version the suite talks to.
KUBECTL="$CACHE/v$KUBE_VERSION/bin/kubectl"
export PATH="$(dirname "$KUBECTL"):$PATH"

phase "lockguard image (./Dockerfile)"
go_image=$(hack/image/go-image.sh)
docker build -q --build-arg GO_IMAGE="$go_image" --build-arg VERSION="$VERSION" \
  --build-arg GOPROXY="$(go env GOPROXY)" -t "$IMG" . >/dev/null
hack/image/inspect.sh "$IMG" | tee -a "$evidence"

phase "cert-manager images"
mapfile -t cm_images < <(hack/kind/certmanager-images.sh)

phase "kind create cluster"
config="$CACHE/kind-config.yaml"
minor=${KUBE_VERSION#*.}; minor=${minor%%.*}
{
  cat <<EOF
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  # The node image's CNI bridge configuration replaces kindnetd: one node.
  disableDefaultCNI: true
nodes:
- role: control-plane
EOF
  # Kubelets from 1.31 refuse cgroup v1 hosts unless told otherwise.
  if [ ! -f /sys/fs/cgroup/cgroup.controllers ] && [ "$minor" -ge 31 ]; then
    cat <<EOF
kubeadmConfigPatches:
- |
  kind: KubeletConfiguration
  failCgroupV1: false
EOF
  fi
} >"$config"
"$KIND" delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
"$KIND" create cluster --name "$CLUSTER" --image "$node_image" --config "$config" \
  --kubeconfig "$kubeconfig" --wait 300s
export KUBECONFIG=$kubeconfig
kubectl version

phase "load images into the node"
"$KIND" load docker-image --name "$CLUSTER" "$IMG" "${cm_images[@]}"

phase "cert-manager $CERT_MANAGER_VERSION (its Helm chart)"
cm_chart="$(go_mod_dir "github.com/cert-manager/cert-manager@$CERT_MANAGER_VERSION")/deploy/charts/cert-manager"
cm_args=(--set crds.enabled=true --set startupapicheck.enabled=false)
for img in "${cm_images[@]}"; do
  repo=${img%:*}; tag=${img##*:}
  case "$repo" in
    *-controller) key=image ;;
    *-cainjector) key=cainjector.image ;;
    *-webhook) key=webhook.image ;;
  esac
  cm_args+=(--set "$key.repository=$repo" --set "$key.tag=$tag" --set "$key.pullPolicy=Never")
done
"$HELM" install cert-manager "$cm_chart" --namespace cert-manager --create-namespace "${cm_args[@]}" --wait --timeout 5m

# The sample CRDs the scenarios use, installed before lockguard so that its
# kind discovery and the garbage collector know them from the start (the
# suite installs them too when they are missing).
kubectl apply -f e2e/testdata/crds/
kubectl wait --for=condition=Established --timeout=60s -f e2e/testdata/crds/

phase "lockguard (deploy/chart/lockguard)"
# cert-manager's webhook may refuse Certificates for a few seconds after it
# reports ready: retry the install.
deadline=$((SECONDS + 120))
until "$HELM" upgrade --install lockguard deploy/chart/lockguard --namespace lockguard-system --create-namespace \
  --set image.repository="${IMG%:*}" --set image.tag="${IMG##*:}" --set image.pullPolicy=Never; do
  [ "$SECONDS" -lt "$deadline" ] || { log "helm install of lockguard failed for 120s"; exit 1; }
  sleep 3
done
kubectl -n lockguard-system rollout status deployment/lockguard --timeout=300s
# cert-manager's cainjector fills in the webhook's caBundle.
deadline=$((SECONDS + 180))
until [ -n "$(kubectl get validatingwebhookconfigurations -o jsonpath='{.items[*].webhooks[?(@.name=="delete.lockguard.core.navique.com")].clientConfig.caBundle}')" ]; do
  [ "$SECONDS" -lt "$deadline" ] || { log "no caBundle in lockguard's webhook configuration after 180s"; exit 1; }
  sleep 2
done
hack/kind/evidence.sh "$IMG" | tee -a "$evidence"

phase "helm test (lockguard check-webhook through the webhook Service)"
# No --logs: the chart deletes the test Pod once it succeeds
# (hook-succeeded), and helm then fails to fetch its logs. A failed Pod is
# kept: print its logs.
"$HELM" test lockguard --namespace lockguard-system --timeout 2m || {
  kubectl -n lockguard-system logs lockguard-test-webhook || true
  exit 1
}

phase "e2e suite (cluster mode)"
LOCKGUARD_E2E_MODE=cluster LOCKGUARD_E2E_REPORT="$suite_report" \
  go test -tags e2e -p 1 -count=1 -timeout 30m -v ./e2e/ ./e2e/contract/ 2>&1 | tee "$CACHE/suite.log"
# The pods after the suite (it scaled, restarted and killed them): still
# this image, still behind cert-manager's certificate.
hack/kind/evidence.sh "$IMG" >"$CACHE/evidence-after.txt"
grep -q '^image: ok' "$CACHE/evidence-after.txt" || { cat "$CACHE/evidence-after.txt"; exit 1; }

phase "peers (every replica warm: issue 13's read-free decisions in cluster mode)"
hack/kind/peers.sh | tee -a "$evidence"
