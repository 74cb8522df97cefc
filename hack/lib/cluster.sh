# shellcheck shell=bash
# Functions to run a local KWOK cluster and an S3 server from the binaries in
# bin/. Sourced by hack/dev.sh, the e2e suite (through hack/cluster.sh) and
# hack/bench.sh. Nothing here downloads anything: kwokctl gets a local path for
# every component.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=$ROOT/bin
STATE=${TRELLIS_STATE_DIR:-$ROOT/.dev}

export KWOK_WORKDIR=$STATE/kwok
export KWOK_KUBE_VERSION
KWOK_KUBE_VERSION=$(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3}' "$ROOT/hack/kube/go.mod")
export KWOK_KUBECTL_BINARY=$BIN/kubectl

# cluster_up NAME [NODES]: create (or reuse) cluster NAME with NODES simulated
# nodes (110 pods each) and write its kubeconfig to $STATE/NAME.kubeconfig.
cluster_up() {
  local name=$1 nodes=${2:-2}
  local kubeconfig=$STATE/$name.kubeconfig log=$STATE/$name-kwokctl.log
  mkdir -p "$STATE"
  if "$BIN/kwokctl" get clusters 2>/dev/null | grep -qx "$name"; then
    "$BIN/kwokctl" --name "$name" start cluster --wait 3m >"$log" 2>&1 || { cat "$log" >&2; return 1; }
  else
    "$BIN/kwokctl" --name "$name" -c "$ROOT/hack/kwokctl-config.yaml" create cluster \
      --runtime binary \
      --kubeconfig "$kubeconfig" \
      --kube-apiserver-binary "$BIN/kube-apiserver" \
      --kube-controller-manager-binary "$BIN/kube-controller-manager" \
      --kube-scheduler-binary "$BIN/kube-scheduler" \
      --kwok-controller-binary "$BIN/kwok" \
      --etcd-binary "$BIN/etcd" \
      --extra-args kube-apiserver=service-cluster-ip-range=10.96.0.0/16 \
      --extra-args kube-controller-manager=service-cluster-ip-range=10.96.0.0/16 \
      --wait 3m >"$log" 2>&1 || { cat "$log" >&2; return 1; }
  fi
  "$BIN/kwokctl" --name "$name" get kubeconfig > "$kubeconfig"
  "$BIN/kwokctl" --name "$name" scale node --replicas "$nodes" >>"$log" 2>&1 || { cat "$log" >&2; return 1; }
  echo "$kubeconfig"
}

# cluster_down NAME: delete cluster NAME and its state.
cluster_down() {
  local name=$1
  "$BIN/kwokctl" --name "$name" delete cluster >/dev/null 2>&1 || true
  rm -f "$STATE/$name.kubeconfig"
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

# s3_up NAME PORT [WEBHOOK_URL]: start versitygw on 127.0.0.1:PORT with the
# credentials of s3_credentials and data under $STATE/NAME-s3/data. Reuses a
# running one.
s3_up() {
  local name=$1 port=$2 webhook=${3:-}
  local dir=$STATE/$name-s3
  s3_credentials "$name"
  if [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
    return 0
  fi
  # shellcheck disable=SC1091
  . "$dir/credentials"
  # Credentials and the webhook URL (it carries the token) go through the
  # environment, not argv, so `ps` does not show them. Internal IAM (the
  # accounts BucketAccesses get) and versioning keep their state beside the data.
  mkdir -p "$dir/iam" "$dir/versions"
  ROOT_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID ROOT_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY VGW_EVENT_WEBHOOK_URL=$webhook \
    nohup "$BIN/versitygw" --port "127.0.0.1:$port" --region us-east-1 --iam-dir "$dir/iam" \
    posix --versioning-dir "$dir/versions" "$dir/data" > "$dir/log" 2>&1 &
  echo $! > "$dir/pid"
  for _ in $(seq 50); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
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
