#!/usr/bin/env bash
# evidence.sh IMAGE: what ran in the kind cluster of $KUBECONFIG, checked
# and printed one fact a line; exits non-zero when a fact is not so:
#   - every lockguard pod runs IMAGE (the image ID docker built from
#     ./Dockerfile), as UID 65532, on a read-only root filesystem, with the
#     chart's default security context;
#   - the webhook's serving certificate was issued by cert-manager from the
#     chart's CA Issuer, and the webhook configuration's caBundle is that CA,
#     written by cert-manager's cainjector (its field manager).
. "$(dirname "$0")/lib.sh"
img=${1:?usage: evidence.sh IMAGE}
ns=lockguard-system
rc=0
no() { echo "NOT OK: $*"; rc=1; }

id=$(docker image inspect -f '{{.Id}}' "$img")
pods=$(kubectl -n "$ns" get pods -l app.kubernetes.io/name=lockguard -o json)
n=$(jq '.items | length' <<<"$pods")
[ "$n" -ge 1 ] || no "no lockguard pod"
ids=$(jq -r '[.items[].status.containerStatuses[] | select(.name=="lockguard") | .imageID] | unique | join(" ")' <<<"$pods")
images=$(jq -r '[.items[].spec.containers[] | select(.name=="lockguard") | .image] | unique | join(" ")' <<<"$pods")
# The pods' imageID is the digest of the manifest kind load wrote into the
# node's containerd; that manifest's config is the image docker built (its
# ID is the config's digest).
node="$(kubectl get nodes -o jsonpath='{.items[0].metadata.name}')"
manifest=$(docker exec "$node" ctr -n k8s.io images ls "name==$(docker image inspect -f '{{index .RepoTags 0}}' "$img" | sed 's|^\([^/]*\)$|docker.io/library/\1|; s|^\([^/.:]*/[^/]*\)$|docker.io/\1|')" | awk 'NR==2 {print $3}')
config=$(docker exec "$node" ctr -n k8s.io content get "$manifest" | jq -r .config.digest)
if [ -n "$manifest" ] && [ "${ids##*@}" = "$manifest" ] && [[ "$ids" != *" "* ]] && [ "$config" = "$id" ]; then
  echo "image: ok: $n lockguard pod(s) run $images, manifest $manifest, whose config $config is the image docker built from ./Dockerfile"
else
  no "lockguard pods run '$ids'; $img in the node is manifest '$manifest' with config '$config'; docker built $id"
fi
sc=$(jq -c '[.items[].spec.containers[] | select(.name=="lockguard") | .securityContext] | unique' <<<"$pods")
# The chart's default, rendered by helm and read back by kubectl.
want=$("${HELM:-helm}" template lockguard "$ROOT/deploy/chart/lockguard" --namespace "$ns" --show-only templates/deployment.yaml |
  kubectl create --dry-run=client -o json -f - | jq -c '[.spec.template.spec.containers[] | select(.name=="lockguard") | .securityContext]')
if [ "$(jq -S . <<<"$sc")" = "$(jq -S . <<<"$want")" ]; then
  echo "securityContext (container): the chart's default: $sc"
else
  no "securityContext (container) $sc is not the chart's default $want"
fi
echo "securityContext (pod): $(jq -c '[.items[].spec.securityContext] | unique' <<<"$pods")"
# The processes as the node's kernel sees them.
for pid in $(docker exec "$node" pgrep -x lockguard); do
  uid=$(docker exec "$node" awk '/^Uid:/ {print $2}' "/proc/$pid/status")
  root=$(docker exec "$node" awk '$2 == "/" {print $4}' "/proc/$pid/mounts" | cut -d, -f1)
  shell=$(docker exec "$node" sh -c "ls /proc/$pid/root/bin/sh /proc/$pid/root/bin/bash 2>/dev/null | wc -l")
  if [ "$uid" = 65532 ] && [ "$root" = ro ] && [ "$shell" = 0 ]; then
    echo "process $pid (/lockguard): uid $uid, root filesystem $root, no shell"
  else
    no "process $pid: uid $uid, root filesystem $root, $shell shell(s)"
  fi
done

cert=$(kubectl -n "$ns" get certificates.cert-manager.io -o json)
jq -r '.items[] | "certificate \(.metadata.name): Ready=\([.status.conditions[]? | select(.type=="Ready") | .status] | first), issuer \(.spec.issuerRef.kind)/\(.spec.issuerRef.name), secret \(.spec.secretName), revision \(.status.revision)"' <<<"$cert"
[ "$(jq '[.items[] | select([.status.conditions[]? | select(.type=="Ready" and .status=="True")] | length == 1)] | length' <<<"$cert")" = "$(jq '.items | length' <<<"$cert")" ] ||
  no "a Certificate is not Ready"
vwc=$(kubectl get validatingwebhookconfigurations -o json --show-managed-fields | jq '.items[] | select(any((.webhooks // [])[]; .name=="delete.lockguard.core.navique.com"))')
inject=$(jq -r '.metadata.annotations["cert-manager.io/inject-ca-from"] // ""' <<<"$vwc")
managers=$(jq -r '[.metadata.managedFields[] | select(.fieldsV1 | tostring | contains("caBundle")) | .manager] | unique | join(",")' <<<"$vwc")
bundle=$(jq -r '[.webhooks[].clientConfig.caBundle] | unique | .[0]' <<<"$vwc" | base64 -d)
serving=$(jq -r '.items[] | select(.metadata.name == "'"${inject#*/}"'") | .spec.secretName' <<<"$cert")
ca=$(kubectl -n "$ns" get secret "$serving" -o jsonpath='{.data.ca\.crt}' | base64 -d)
leaf=$(kubectl -n "$ns" get secret "$serving" -o jsonpath='{.data.tls\.crt}' | base64 -d)
echo "webhook configuration: cert-manager.io/inject-ca-from=$inject, caBundle written by field manager(s) '$managers'"
echo "caBundle: $(openssl x509 -noout -subject -issuer -enddate <<<"$bundle" | tr '\n' ' ')"
echo "serving certificate ($serving): $(openssl x509 -noout -subject -issuer -enddate <<<"$leaf" | tr '\n' ' ')"
[ "$bundle" = "$ca" ] || no "the caBundle is not the ca.crt of $serving"
[[ "$managers" == *cainjector* ]] || no "the caBundle was not written by cainjector (managers: $managers)"
openssl verify -CAfile <(echo "$bundle") <(echo "$leaf") >/dev/null && echo "the serving certificate verifies against the caBundle" ||
  no "the serving certificate does not verify against the caBundle"
exit "$rc"
