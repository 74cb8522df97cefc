#!/usr/bin/env bash
# make dev / make dev-local / make dev-down.
#   up:    a local KWOK cluster with a real node, the manager deployed in it
#          from its image through config/default (as `make deploy` does), an
#          S3 server and the samples, whose viewer pods run on the real node.
#   local: the fast inner loop: a cluster (NAME-local) without a real node,
#          the manager as a local process, the viewer as a local preview.
#   down:  delete both clusters and the node.
# Ctrl-C stops the processes, the node and the cluster (kept for reuse).
set -euo pipefail
# shellcheck source=lib/cluster.sh
. "$(dirname "$0")/lib/cluster.sh"

NAME=${TRELLIS_DEV_CLUSTER:-trellis}
NODES=${TRELLIS_DEV_NODES:-2}
S3_PORT=${TRELLIS_DEV_S3_PORT:-7070}
PREVIEW_ADDR=${TRELLIS_DEV_PREVIEW_ADDR:-127.0.0.1:8090}
EVENTS_ADDR=${TRELLIS_DEV_EVENTS_ADDR:-127.0.0.1:9444}
if [ "${1:-up}" = local ]; then NAME=$NAME-local; fi
KUBECONFIG=$STATE/$NAME.kubeconfig
export KUBECONFIG
pids=()

stop() {
  trap - INT TERM EXIT
  echo
  echo "stopping the manager, the node, the S3 server and the cluster (state kept in $STATE)"
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  # Only ours: the node's daemons are children too, and node_down stops them.
  wait "${pids[@]}" 2>/dev/null || true
  node_down "$NAME"
  s3_down "$NAME"
  "$BIN/kwokctl" --name "$NAME" stop cluster >/dev/null 2>&1 || true
  node_net_down "$NAME"
}

# crds_and_secrets: the CRDs, the manager's namespace and the Secrets it reads
# (generated S3 keys and the bucket-event token).
crds_and_secrets() {
  echo "==> CRDs"
  "$BIN/kustomize" build "$ROOT/config/crd" | kubectl apply --server-side -f - >/dev/null
  # The Gateway API's CRDs (make gateway-api-crds), so spec.expose.httpRoute works.
  kubectl apply --server-side -f "$BIN/gateway-api-crds/" >/dev/null  # the slash: a link to a directory
  kubectl wait --for=condition=Established crd --all --timeout=60s >/dev/null
  kubectl create namespace trellis-system --dry-run=client -o yaml | kubectl apply --server-side -f - >/dev/null

  s3_credentials "$NAME"
  # shellcheck disable=SC1090
  . "$STATE/$NAME-s3/credentials"
  kubectl -n trellis-system create secret generic local-s3-credentials \
    --from-literal=accessKeyID="$AWS_ACCESS_KEY_ID" --from-literal=secretAccessKey="$AWS_SECRET_ACCESS_KEY" \
    --dry-run=client -o yaml | kubectl apply --server-side -f - >/dev/null
  kubectl -n trellis-system create secret generic trellis-bucket-events --from-literal=token="$EVENTS_TOKEN" \
    --dry-run=client -o yaml | kubectl apply --server-side -f - >/dev/null
}

# samples S3_ENDPOINT: apply config/samples with the ObjectStore pointed at
# S3_ENDPOINT, and wait for them.
samples() {
  echo "==> samples"
  "$BIN/kustomize" build "$ROOT/config/samples" | sed "s|http://127.0.0.1:7070|$1|" |
    kubectl apply --server-side -f - >/dev/null
  kubectl wait --for=condition=Ready markdownview/markdownview-sample --timeout=120s >/dev/null || true
  kubectl rollout status deployment/viewer-markdownview-sample --timeout=120s >/dev/null 2>&1 || true
  kubectl wait --for=condition=Ready tenant/team-a storagebucket/assets --timeout=60s >/dev/null || true
}

up() {
  local host_ip
  echo "==> cluster $NAME ($NODES simulated nodes and a real one), kubeconfig $KUBECONFIG"
  cluster_up "$NAME" "$NODES" real-node >/dev/null
  trap stop INT TERM EXIT
  read -r host_ip _ < "$STATE/$NAME-node-net"
  echo "==> real node (containerd, kubelet, kube-proxy; logs in $STATE/$NAME-node)"
  node_up "$NAME"
  # The manager and the samples' viewers go to the real node; pods of any
  # other namespace stay on the simulated nodes.
  steer_to_real_node "$NAME" trellis-system
  steer_to_real_node "$NAME" default
  crds_and_secrets

  # Pods reach the host at host_ip only, so the S3 server listens there.
  echo "==> S3 server (versitygw) on http://$host_ip:$S3_PORT, data in $STATE/$NAME-s3/data"
  s3_up "$NAME" "$host_ip:$S3_PORT"

  echo "==> manager: config/default with trellis-manager:dev, as 'make deploy' applies it"
  "$BIN/kustomize" build "$ROOT/config/default" | kubectl apply --server-side -f - >/dev/null
  kubectl -n trellis-system rollout status deployment/trellis-controller-manager --timeout=180s >/dev/null
  samples "http://$host_ip:$S3_PORT"

  cat <<MSG

Trellis is running in a local KWOK cluster: the manager as two pods on the
real node (one leads), the samples' viewers on it too.
  export KUBECONFIG=$KUBECONFIG PATH=$BIN:\$PATH
  kubectl port-forward svc/viewer-markdownview-sample 3000:80   # then open http://localhost:3000
  kubectl edit markdownview markdownview-sample                   # and reload the page
  kubectl get nodes                  # two simulated nodes and real-node
  kubectl -n trellis-system get pods -o wide
  kubectl get markdownviews          # REPLICAS AVAILABLE READY URL
  kubectl get tenants                # ADMINS PREFIX NAMESPACES READY
  kubectl get objectstores,storagebuckets -A
  S3: http://$host_ip:$S3_PORT, credentials in $STATE/$NAME-s3/credentials
Manager logs follow; Ctrl-C stops everything.

MSG
  kubectl get markdownviews,tenants,storagebuckets -A
  follow_manager_logs &
  pids+=($!)
  wait "${pids[0]}"
}

# follow_manager_logs: the manager pods' logs until stopped (again after a
# pod restarts); SIGTERM stops the kubectl it runs too.
follow_manager_logs() {
  local child=
  trap 'kill "$child" 2>/dev/null; exit 0' TERM
  while true; do
    kubectl -n trellis-system logs -f --prefix --max-log-requests 2 -l app.kubernetes.io/component=manager --tail=20 &
    child=$!
    wait "$child" || true
    sleep 2
  done
}

local_manager() {
  echo "==> cluster $NAME ($NODES simulated nodes), kubeconfig $KUBECONFIG"
  cluster_up "$NAME" "$NODES" >/dev/null
  trap stop INT TERM EXIT
  crds_and_secrets

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
  # shellcheck disable=SC1090
  . "$STATE/$NAME-s3/credentials"
  s3_up "$NAME" "$S3_PORT" "http://$EVENTS_ADDR/bucket-events?token=$EVENTS_TOKEN"

  samples "http://127.0.0.1:$S3_PORT"
  # The preview follows the sample, so it starts once the sample exists.
  "$BIN/viewer" --kubeconfig "$KUBECONFIG" --markdownview default/markdownview-sample --addr "$PREVIEW_ADDR" \
    > "$STATE/$NAME-preview.log" 2>&1 &
  pids+=($!)

  cat <<MSG

Trellis is running on a local KWOK cluster (simulated nodes: pods "run" but
serve nothing), with the manager as a local process.
  export KUBECONFIG=$KUBECONFIG PATH=$BIN:\$PATH
  kubectl get markdownviews          # REPLICAS AVAILABLE READY URL
  kubectl get tenants                # ADMINS PREFIX NAMESPACES READY
  kubectl get objectstores,storagebuckets -A
  kubectl get deploy,svc,cm -l app.kubernetes.io/managed-by=trellis
  open http://$PREVIEW_ADDR          # the sample site, rendered by a local viewer
  curl -s http://127.0.0.1:8081/readyz
  S3: http://127.0.0.1:$S3_PORT, credentials in $STATE/$NAME-s3/credentials

MSG
  kubectl get markdownviews,tenants,storagebuckets -A
  wait "${pids[0]}"
}

down() {
  local name
  for name in "$NAME" "$NAME-local"; do
    s3_down "$name"
    cluster_down "$name"
  done
  echo "deleted clusters $NAME and $NAME-local and the node; S3 data is kept in $STATE/$NAME{,-local}-s3/data (remove it by hand if you want it gone)"
}

case ${1:-up} in
  up) up ;;
  local) local_manager ;;
  down) down ;;
  *) echo "usage: $0 up|local|down" >&2; exit 2 ;;
esac
