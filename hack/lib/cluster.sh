# shellcheck shell=bash
# Functions to run a local KWOK cluster, its real node (lib/node.sh) and an S3
# server from the binaries in bin/. Sourced by hack/dev.sh and, through
# hack/cluster.sh, by the e2e suite and the bench. Nothing here downloads
# anything: kwokctl gets a local path for every component.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=$ROOT/bin
STATE=${TRELLIS_STATE_DIR:-$ROOT/.dev}

export KWOK_WORKDIR=$STATE/kwok
export KWOK_KUBE_VERSION
KWOK_KUBE_VERSION=$(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3}' "$ROOT/hack/kube/go.mod")
export KWOK_KUBECTL_BINARY=$BIN/kubectl

# shellcheck source=node.sh
. "$ROOT/hack/lib/node.sh"

# cluster_up NAME [NODES] [real-node]: create (or reuse) cluster NAME with
# NODES simulated nodes (110 pods each) and write its kubeconfig to
# $STATE/NAME.kubeconfig. With real-node, the cluster is made ready for
# node_up NAME: its node network exists and the API server advertises the
# host end of it. A cluster made with other settings is made anew.
cluster_up() {
  local name=$1 nodes=${2:-2} real=${3:-} host_ip=127.0.0.1
  local kubeconfig=$STATE/$name.kubeconfig log=$STATE/$name-kwokctl.log config=$STATE/$name-kwokctl.yaml
  mkdir -p "$STATE"
  if [ "$real" = real-node ]; then
    node_net_up "$name"
    read -r host_ip _ < "$STATE/$name-node-net"
  fi
  node_render "$ROOT/hack/kwokctl-config.yaml" "$config.new" HOST_IP="$host_ip" PKI="$KWOK_WORKDIR/clusters/$name/pki"
  if [ "$real" != real-node ]; then sed -i '/# real node only$/d' "$config.new"; fi
  if "$BIN/kwokctl" get clusters 2>/dev/null | grep -qx "$name" && ! cmp -s "$config" "$config.new"; then
    echo "cluster $name was made with other settings: making it anew" >&2
    "$BIN/kwokctl" --name "$name" delete cluster >"$log" 2>&1 || true
  fi
  mv "$config.new" "$config"
  if "$BIN/kwokctl" get clusters 2>/dev/null | grep -qx "$name"; then
    "$BIN/kwokctl" --name "$name" start cluster --wait 3m >"$log" 2>&1 || { cat "$log" >&2; return 1; }
  else
    # TRELLIS_KWOK_DISABLE_QPS_LIMITS=1 (the bench): the cluster's own
    # components get no client-side rate limit, so a floor measured on the
    # cluster does not wait on kube-controller-manager's throttled client.
    "$BIN/kwokctl" --name "$name" -c "$config" create cluster \
      --runtime binary \
      ${TRELLIS_KWOK_DISABLE_QPS_LIMITS:+--disable-qps-limits} \
      --kubeconfig "$kubeconfig" \
      --kube-apiserver-binary "$BIN/kube-apiserver" \
      --kube-controller-manager-binary "$BIN/kube-controller-manager" \
      --kube-scheduler-binary "$BIN/kube-scheduler" \
      --kwok-controller-binary "$BIN/kwok" \
      --etcd-binary "$BIN/etcd" \
      --wait 3m >"$log" 2>&1 || {
        # Not half a cluster left running (e.g. a port another cluster took meanwhile).
        cat "$log" >&2; "$BIN/kwokctl" --name "$name" delete cluster >/dev/null 2>&1; return 1; }
  fi
  "$BIN/kwokctl" --name "$name" get kubeconfig > "$kubeconfig"
  "$BIN/kwokctl" --name "$name" scale node --replicas "$nodes" >>"$log" 2>&1 || { cat "$log" >&2; return 1; }
  echo "$kubeconfig"
}

# cluster_down NAME: delete cluster NAME, its real node and its state.
cluster_down() {
  local name=$1
  node_down "$name"
  "$BIN/kwokctl" --name "$name" delete cluster >/dev/null 2>&1 || true
  node_net_down "$name"
  rm -rf "$STATE/$name.kubeconfig" "$STATE/$name-kwokctl.yaml" "$STATE/$name-node-net" "$STATE/$name-node"
}

# steer_to_real_node NAME NAMESPACE: pods created in NAMESPACE of cluster NAME from now on get the
# real node's node selector and toleration (the PodNodeSelector and
# PodTolerationRestriction admission plugins read these annotations); pods
# elsewhere stay on the simulated nodes, which the real node's taint keeps
# them off.
steer_to_real_node() {
  local k=(--kubeconfig "$STATE/$1.kubeconfig")
  "$BIN/kubectl" "${k[@]}" create namespace "$2" --dry-run=client -o yaml | "$BIN/kubectl" "${k[@]}" apply --server-side -f - >/dev/null
  "$BIN/kubectl" "${k[@]}" annotate --overwrite namespace "$2" \
    scheduler.alpha.kubernetes.io/node-selector=trellis.dev/real-node=true \
    'scheduler.alpha.kubernetes.io/defaultTolerations=[{"key":"trellis.dev/real-node","operator":"Equal","value":"true","effect":"NoSchedule"}]' >/dev/null
}

# s3_credentials NAME: generate (once) the S3 keys and the bucket-event token
# of NAME into $STATE/NAME-s3/credentials (mode 0600).
s3_credentials() {
  local dir=$STATE/$1-s3
  mkdir -p "$dir/data"
  if [ ! -f "$dir/credentials" ]; then
    (umask 077; printf 'AWS_ACCESS_KEY_ID=%s\nAWS_SECRET_ACCESS_KEY=%s\nEVENTS_TOKEN=%s\n' \
      "trellis$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')" \
      "$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')" \
      "$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')" > "$dir/credentials")
  fi
  grep -q '^EVENTS_TOKEN=' "$dir/credentials" ||
    printf 'EVENTS_TOKEN=%s\n' "$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')" >> "$dir/credentials"
}

# s3_up NAME [ADDR:]PORT [WEBHOOK_URL]: start versitygw on ADDR:PORT
# (127.0.0.1 by default; a real node's pods reach HOST_IP) with the
# credentials of s3_credentials and data under $STATE/NAME-s3/data. Reuses a
# running one.
s3_up() {
  local name=$1 addr=127.0.0.1 port=$2 webhook=${3:-}
  local dir=$STATE/$name-s3
  if [[ $port == *:* ]]; then addr=${port%:*} port=${port##*:}; fi
  s3_credentials "$name"
  if [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
    return 0
  fi
  # shellcheck disable=SC1091
  . "$dir/credentials"
  # Credentials and the webhook URL (it carries the token) go through the
  # environment, not argv, so `ps` does not show them.
  ROOT_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID ROOT_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY VGW_EVENT_WEBHOOK_URL=$webhook \
    nohup "$BIN/versitygw" --port "$addr:$port" --region us-east-1 \
    posix "$dir/data" > "$dir/log" 2>&1 &
  echo $! > "$dir/pid"
  for _ in $(seq 50); do
    if (exec 3<>"/dev/tcp/$addr/$port") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "versitygw did not start; see $dir/log" >&2
  return 1
}

# s3_down NAME: stop the S3 server of NAME (its data stays in $STATE/NAME-s3/data).
s3_down() {
  local dir=$STATE/$1-s3
  if [ -f "$dir/pid" ]; then
    kill "$(cat "$dir/pid")" 2>/dev/null || true
    rm -f "$dir/pid"
  fi
}
