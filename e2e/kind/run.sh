#!/usr/bin/env bash
# End to end on a real kind cluster (needs docker, kind >= 0.30, kubectl, helm >= 3.8, git):
#   create a Kubernetes 1.34 cluster with DRA, install kubernetes-sigs/dra-example-driver,
#   build and install gpuclaim (webhook, extender, second scheduler), run legacy GPU pods
#   through it and check what happened to them. Exits non-zero on the first failed check.
#
#   e2e/kind/run.sh            # create, install, test (keeps the cluster for inspection)
#   KEEP_CLUSTER=0 e2e/kind/run.sh   # delete the cluster afterwards
#   e2e/kind/down.sh           # delete the cluster
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "${HERE}/../.." && pwd)"
CLUSTER="${CLUSTER:-gpuclaim-e2e}"
NODE_IMAGE="${NODE_IMAGE:-kindest/node:v1.34.0}"
DRIVER_REPO="${DRIVER_REPO:-https://github.com/kubernetes-sigs/dra-example-driver.git}"
DRIVER_REF="${DRIVER_REF:-v0.2.1}"
NS="gpuclaim-system"
APP_NS="gpuclaim-e2e"
RELEASE="gpuclaim"
KEEP_CLUSTER="${KEEP_CLUSTER:-1}"
WORK="$(mktemp -d)"

log() { printf '\n== %s\n' "$*" >&2; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
cleanup() {
  rm -rf "${WORK}"
  if [[ "${KEEP_CLUSTER}" == "0" ]]; then
    kind delete cluster --name "${CLUSTER}" || true
  fi
}
trap cleanup EXIT

for tool in docker kind kubectl helm git; do
  command -v "${tool}" >/dev/null 2>&1 || fail "${tool} is not on PATH"
done

# Poll until a command succeeds (kubectl wait cannot wait for an object to appear).
retry() {
  local tries="$1"; shift
  local i
  for ((i = 0; i < tries; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 2
  done
  return 1
}

log "kind cluster ${CLUSTER} (${NODE_IMAGE})"
if ! kind get clusters 2>/dev/null | grep -qx "${CLUSTER}"; then
  kind create cluster --name "${CLUSTER}" --image "${NODE_IMAGE}" --config "${HERE}/cluster.yaml" --wait 120s
fi
kubectl config use-context "kind-${CLUSTER}" >/dev/null
kubectl api-resources --api-group=resource.k8s.io -o name | grep -qx 'resourceslices.resource.k8s.io' \
  || fail "resource.k8s.io is not served: DRA is not enabled"

log "dra-example-driver ${DRIVER_REF}"
git clone --quiet --depth 1 --branch "${DRIVER_REF}" "${DRIVER_REPO}" "${WORK}/dra-example-driver"
helm upgrade --install dra-example-driver "${WORK}/dra-example-driver/deployments/helm/dra-example-driver" \
  --namespace dra-example-driver --create-namespace --wait --timeout 5m
retry 60 bash -c "kubectl get resourceslices -o name | grep -q ." || fail "the driver published no ResourceSlice"
kubectl get deviceclass gpu.example.com >/dev/null || fail "DeviceClass gpu.example.com missing"

log "gpuclaim image"
docker build --tag gpuclaim:e2e "${REPO}"
kind load docker-image gpuclaim:e2e --name "${CLUSTER}"

log "gpuclaim chart"
helm upgrade --install "${RELEASE}" "${REPO}/charts/gpuclaim" --namespace "${NS}" --create-namespace \
  --values "${HERE}/values.yaml" --wait --timeout 5m
kubectl -n "${NS}" wait --for=condition=complete "job/${RELEASE}-certs-1" --timeout=180s
for kind in mutatingwebhookconfiguration validatingwebhookconfiguration; do
  bundle="$(kubectl get "${kind}" "${RELEASE}-webhook" -o jsonpath='{.webhooks[0].clientConfig.caBundle}')"
  [[ -n "${bundle}" ]] || fail "${kind} has no caBundle: gpuclaim certs did not inject it"
done
kubectl -n "${NS}" rollout status deployment "${RELEASE}-webhook" --timeout=180s
kubectl -n "${NS}" rollout status deployment "${RELEASE}-extender" --timeout=180s
kubectl -n "${NS}" rollout status deployment "${RELEASE}-scheduler" --timeout=180s

log "server-side dry run creates nothing (sideEffects: NoneOnDryRun)"
kubectl create namespace "${APP_NS}" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl apply -f "${HERE}/pods.yaml" --dry-run=server -o name >/dev/null
templates="$(kubectl -n "${APP_NS}" get resourceclaimtemplates -o name | wc -l)"
[[ "${templates}" -eq 0 ]] || fail "a dry-run created ${templates} ResourceClaimTemplate(s)"

log "legacy GPU pods"
kubectl apply -f "${HERE}/pods.yaml"
kubectl -n "${APP_NS}" wait --for=condition=Ready pod --all --timeout=300s

log "checks"
for pod in $(kubectl -n "${APP_NS}" get pods -l gpu=yes -o name); do
  claims="$(kubectl -n "${APP_NS}" get "${pod}" -o jsonpath='{.spec.resourceClaims[*].resourceClaimTemplateName}')"
  [[ "${claims}" == gpuclaim-* ]] || fail "${pod} was not converted (resourceClaims: '${claims}')"
  legacy="$(kubectl -n "${APP_NS}" get "${pod}" -o jsonpath='{.spec.containers[*].resources.limits.gpu\.example\.com/gpu}')"
  [[ -z "${legacy}" ]] || fail "${pod} still carries the legacy limit (${legacy})"
  scheduler="$(kubectl -n "${APP_NS}" get "${pod}" -o jsonpath='{.spec.schedulerName}')"
  [[ "${scheduler}" == "gpuclaim-scheduler" ]] || fail "${pod} scheduled by '${scheduler}', not the second scheduler"
  # The example driver exposes the allocated devices as GPU_DEVICE_* variables.
  kubectl -n "${APP_NS}" logs "${pod}" | grep -qE 'GPU_DEVICE_[0-9]+=' || fail "${pod} got no device from the driver"
done
gpus="$(kubectl -n "${APP_NS}" logs pod/two-gpus | grep -cE 'declare -x GPU_DEVICE_[0-9]+="')"
[[ "${gpus}" -eq 2 ]] || fail "two-gpus sees ${gpus} devices, expected 2"
allocated="$(kubectl -n "${APP_NS}" get resourceclaims -o jsonpath='{range .items[*]}{.status.allocation.devices.results[*].device}{"\n"}{end}' | grep -c .)"
[[ "${allocated}" -eq 4 ]] || fail "expected 4 allocated claims (one per GPU pod), found ${allocated}"
owners="$(kubectl -n "${APP_NS}" get resourceclaims -o jsonpath='{.items[*].metadata.ownerReferences[0].kind}')"
[[ "${owners}" == "Pod Pod Pod Pod" ]] || fail "claims are not owned by their pods: '${owners}'"
plain="$(kubectl -n "${APP_NS}" get pod no-gpu -o jsonpath='{.spec.resourceClaims}{.spec.schedulerName}')"
[[ "${plain}" == "default-scheduler" ]] || fail "the pod without GPUs was touched: '${plain}'"

log "uninstall leaves no webhook behind"
kubectl delete -f "${HERE}/pods.yaml" --wait=true --timeout=120s
helm uninstall "${RELEASE}" --namespace "${NS}" --wait
if kubectl get mutatingwebhookconfiguration "${RELEASE}-webhook" >/dev/null 2>&1; then
  fail "the MutatingWebhookConfiguration survived helm uninstall"
fi
kubectl -n "${NS}" delete secret "${RELEASE}-tls" --ignore-not-found

printf '\nPASS: legacy GPU pods were converted to DRA claims, allocated by the example driver and scheduled with the extender.\n'
