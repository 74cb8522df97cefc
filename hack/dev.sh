#!/usr/bin/env bash
# make dev / make dev-down: a local KWOK cluster, an S3 server, the CRDs, the
# manager as a local process and the samples. Ctrl-C stops the processes and the
# cluster (kept for reuse); `make dev-down` deletes the cluster too.
set -euo pipefail
# shellcheck source=lib/cluster.sh
. "$(dirname "$0")/lib/cluster.sh"

NAME=${TRELLIS_DEV_CLUSTER:-trellis}
NODES=${TRELLIS_DEV_NODES:-2}
S3_PORT=${TRELLIS_DEV_S3_PORT:-7070}
PREVIEW_ADDR=${TRELLIS_DEV_PREVIEW_ADDR:-127.0.0.1:8090}
EVENTS_ADDR=${TRELLIS_DEV_EVENTS_ADDR:-127.0.0.1:9444}
KUBECONFIG=$STATE/$NAME.kubeconfig
export KUBECONFIG
pids=()

stop() {
  trap - INT TERM EXIT
  echo
  echo "stopping the manager, the preview, the S3 server and the cluster (state kept in $STATE)"
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  s3_down "$NAME"
  "$BIN/kwokctl" --name "$NAME" stop cluster >/dev/null 2>&1 || true
}

up() {
  echo "==> cluster $NAME ($NODES simulated nodes), kubeconfig $KUBECONFIG"
  cluster_up "$NAME" "$NODES" >/dev/null
  trap stop INT TERM EXIT

  echo "==> CRDs"
  "$BIN/kustomize" build "$ROOT/config/crd" | kubectl apply --server-side -f - >/dev/null
  # The Gateway API's CRDs (make gateway-api-crds), so spec.expose.httpRoute works.
  kubectl apply --server-side -f "$BIN/gateway-api-crds" >/dev/null
  kubectl wait --for=condition=Established crd --all --timeout=60s >/dev/null
  kubectl create namespace trellis-system --dry-run=client -o yaml | kubectl apply --server-side -f - >/dev/null

  # Generated S3 keys and the bucket-event token, as Secrets in the manager's namespace.
  s3_credentials "$NAME"
  # shellcheck disable=SC1090
  . "$STATE/$NAME-s3/credentials"
  kubectl -n trellis-system create secret generic local-s3-credentials \
    --from-literal=accessKeyID="$AWS_ACCESS_KEY_ID" --from-literal=secretAccessKey="$AWS_SECRET_ACCESS_KEY" \
    --dry-run=client -o yaml | kubectl apply --server-side -f - >/dev/null
  kubectl -n trellis-system create secret generic trellis-bucket-events --from-literal=token="$EVENTS_TOKEN" \
    --dry-run=client -o yaml | kubectl apply --server-side -f - >/dev/null

  echo "==> manager (logs below; Ctrl-C stops everything)"
  "$BIN/manager" --kubeconfig "$KUBECONFIG" --namespace trellis-system \
    --metrics-bind-address 127.0.0.1:8443 --health-probe-bind-address 127.0.0.1:8081 \
    --bucket-events-bind-address "$EVENTS_ADDR" --bucket-events-token-secret trellis-bucket-events \
    --zap-log-level info > >(tee "$STATE/$NAME-manager.log") 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do
    curl -fs http://127.0.0.1:8081/readyz >/dev/null 2>&1 && break
    sleep 0.2
  done

  # versitygw checks its webhook when it starts, so it comes after the manager.
  echo "==> S3 server (versitygw) on http://127.0.0.1:$S3_PORT, data in $STATE/$NAME-s3/data"
  s3_up "$NAME" "$S3_PORT" "http://$EVENTS_ADDR/bucket-events?token=$EVENTS_TOKEN"

  echo "==> samples"
  kubectl apply --server-side -k "$ROOT/config/samples" >/dev/null
  "$BIN/viewer" --kubeconfig "$KUBECONFIG" --markdownview default/markdownview-sample --addr "$PREVIEW_ADDR" \
    > "$STATE/$NAME-preview.log" 2>&1 &
  pids+=($!)
  kubectl wait --for=condition=Ready markdownview/markdownview-sample --timeout=120s >/dev/null || true
  kubectl wait --for=condition=Ready tenant/team-a storagebucket/assets --timeout=60s >/dev/null || true

  cat <<MSG

Trellis is running on a local KWOK cluster.
  export KUBECONFIG=$KUBECONFIG
  kubectl get markdownviews          # REPLICAS AVAILABLE READY URL
  kubectl get tenants                # ADMIN PREFIX NAMESPACES READY
  kubectl get objectstores,storagebuckets -A
  kubectl get deploy,svc,cm -l app.kubernetes.io/managed-by=trellis
  open http://$PREVIEW_ADDR          # the sample site, rendered by the viewer (KWOK pods serve nothing)
  curl -s http://127.0.0.1:8081/readyz
  S3: http://127.0.0.1:$S3_PORT, credentials in $STATE/$NAME-s3/credentials

MSG
  kubectl get markdownviews,tenants,storagebuckets -A
  wait "${pids[0]}"
}

down() {
  s3_down "$NAME"
  cluster_down "$NAME"
  echo "deleted cluster $NAME; S3 data is kept in $STATE/$NAME-s3/data (remove it by hand if you want it gone)"
}

case ${1:-up} in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
