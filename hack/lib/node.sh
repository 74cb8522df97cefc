# shellcheck shell=bash
# A real node beside the simulated ones: containerd, kubelet and kube-proxy
# from bin/, runc and the CNI plugins from Debian, joined to a local cluster of
# hack/lib/cluster.sh. Sourced through cluster.sh by hack/dev.sh, the e2e suite
# (hack/cluster.sh) and the bench; docs/real-node.md explains the design.
#
# Everything of a node is its own and goes away with it:
# - a network namespace (trellis-node-ID) joined to the host by a veth pair on
#   a /30 of 10.213.0.0/16; the node has no default route, so it and its pods
#   reach the host end of the veth and nothing else. Its iptables rules
#   (kubelet, kube-proxy, the CNI bridge) live and die in that namespace;
# - a mount namespace whose /run and /var/lib/cni are private tmpfs, so every
#   mount the kubelet and containerd make (the kubelet's root dir, volumes,
#   container root filesystems, sockets) vanishes when its last process ends;
# - cgroups under /trellis-node-ID; state under $STATE/NAME-node.
# The host end of the veth (HOST_IP) is where the node reaches the API server:
# a socat relay listens there and forwards to the API server on 127.0.0.1.

NODE_NAME=real-node
NODE_POD_CIDR=10.88.0.0/24
NODE_IMAGES=(trellis-pause trellis-manager trellis-viewer)

# node_id NAME: 8 hex digits naming NAME's netns, veth and cgroups, from the
# state dir and NAME (two checkouts may both run a cluster "trellis").
node_id() { printf '%s' "$STATE/$1" | sha256sum | cut -c1-8; }

# node_net NAME: print "HOST_IP NODE_IP NETNS" of NAME's node network.
node_net() { cat "$STATE/$1-node-net"; }

# node_net_up NAME: create NAME's network namespace and veth (idempotent) and
# record its addresses. The /30 is chosen once per cluster name and kept,
# since the API server advertises HOST_IP for the cluster's whole life.
node_net_up() {
  local name=$1 id ns veth f=$STATE/$1-node-net n host_ip node_ip
  id=$(node_id "$name") ns=trellis-node-$id veth=trn$id
  mkdir -p "$STATE"
  if [ ! -f "$f" ]; then
    n=$((0x${id:0:4} % 16384))
    for _ in $(seq 16384); do
      host_ip=10.213.$((n / 64)).$((n % 64 * 4 + 1))
      ip -4 addr show | grep -q "inet $host_ip/" || break
      n=$(((n + 1) % 16384))
    done
    node_ip=${host_ip%.*}.$((${host_ip##*.} + 1))
    echo "$host_ip $node_ip $ns" > "$f"
  fi
  read -r host_ip node_ip ns < "$f"
  if ! ip netns list | grep -q "^$ns\b"; then
    ip netns add "$ns"
  fi
  if ! ip link show "$veth" >/dev/null 2>&1; then
    ip link add "$veth" type veth peer name eth0 netns "$ns"
    ip addr add "$host_ip/30" dev "$veth"
    ip link set "$veth" up
    ip -n "$ns" addr add "$node_ip/30" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
  fi
}

# node_net_down NAME: delete NAME's network namespace and veth (as recorded
# by node_net_up, else as node_id names them).
node_net_down() {
  local ns=trellis-node-$(node_id "$1")
  [ -f "$STATE/$1-node-net" ] && read -r _ _ ns < "$STATE/$1-node-net"
  ip link del "trn${ns#trellis-node-}" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
  # `ip netns add` bind-mounts /run/netns onto itself; the last one out takes
  # that mount away (it fails, harmlessly, while any namespace is mounted there).
  if [ -z "$(ip netns list)" ] && mountpoint -q /run/netns; then
    umount /run/netns 2>/dev/null && rmdir /run/netns 2>/dev/null || true
  fi
  return 0
}

# node_kubeconfig FILE SERVER USER: a kubeconfig for SERVER with the client
# certificate $dir/USER.{crt,key}, trusting the cluster CA.
node_kubeconfig() {
  local file=$1 server=$2 user=$3 pki=$4 dir
  dir=$(dirname "$file")
  cat > "$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: cluster
  cluster: {server: "$server", certificate-authority: "$pki/ca.crt"}
users:
- name: $user
  user: {client-certificate: "$dir/$user.crt", client-key: "$dir/$user.key"}
contexts:
- name: default
  context: {cluster: cluster, user: $user}
current-context: default
EOF
}

# node_cert DIR NAME CN O PKI: a client certificate DIR/NAME.{crt,key} signed by the cluster CA.
node_cert() {
  local dir=$1 name=$2 cn=$3 o=$4 pki=$5
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$dir/$name.key" -subj "/O=$o/CN=$cn" -out "$dir/$name.csr" 2>/dev/null
  openssl x509 -req -in "$dir/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -set_serial "0x$(openssl rand -hex 8)" \
    -days 30 -out "$dir/$name.crt" 2>/dev/null
  rm -f "$dir/$name.csr"
  chmod 600 "$dir/$name.key"
}

# node_render TEMPLATE OUT VAR=VALUE...: copy TEMPLATE with @VAR@ replaced.
node_render() {
  local in=$1 out=$2 kv args=()
  shift 2
  for kv in "$@"; do args+=(-e "s|@${kv%%=*}@|${kv#*=}|g"); done
  sed "${args[@]}" "$in" > "$out"
}

# node_in NAME CMD...: run CMD in the node's network and mount namespaces.
node_in() {
  local dir=$STATE/$1-node
  shift
  nsenter --target "$(cat "$dir/holder.pid")" --mount --net -- "$@"
}

# node_ready KUBECONFIG: wait (2 minutes at most) until the real node is Ready.
node_ready() {
  local status
  for _ in $(seq 240); do
    status=$("$BIN/kubectl" --kubeconfig "$1" get "node/$NODE_NAME" \
      -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) || true
    [ "$status" = True ] && return 0
    sleep 0.5
  done
  return 1
}

# node_up NAME: start NAME's real node (its cluster is up: cluster_up NAME N
# real-node) with the images of `make images` imported, and wait until it is
# Ready. A node left running is stopped first.
node_up() {
  local name=$1 dir=$STATE/$1-node id host_ip node_ip ns pki port kubeconfig=$STATE/$1.kubeconfig d
  id=$(node_id "$name")
  node_down "$name"
  node_net_up "$name"
  read -r host_ip node_ip ns < "$STATE/$name-node-net"
  pki=$KWOK_WORKDIR/clusters/$name/pki
  port=$(sed -n 's|^ *server: https://127.0.0.1:\([0-9]*\).*|\1|p' "$kubeconfig")
  [ -n "$port" ] || { echo "no API server port in $kubeconfig" >&2; return 1; }
  for t in "${NODE_IMAGES[@]}"; do
    [ -f "$ROOT/bin/images/$t.tar" ] || { echo "bin/images/$t.tar missing: run 'make images'" >&2; return 1; }
  done

  rm -rf "$dir"
  mkdir -p "$dir/cni" "$dir/sysctl" "$dir/pod-logs"
  echo "trellis-node-$id" > "$dir/cgroup" # node_down removes what this names

  # The API server, through the host end of the veth: a relay to 127.0.0.1.
  nohup socat "TCP-LISTEN:$port,bind=$host_ip,reuseaddr,fork" "TCP:127.0.0.1:$port" > "$dir/relay.log" 2>&1 &
  echo $! > "$dir/relay.pid"
  disown # node_down stops it; the shell neither waits for it nor reports its end

  # Identities: the kubelet as system:node:real-node (the Node authorizer),
  # kube-proxy as system:kube-proxy (the system:node-proxier role).
  node_cert "$dir" kubelet "system:node:$NODE_NAME" system:nodes "$pki"
  node_cert "$dir" kube-proxy system:kube-proxy system:node-proxier "$pki"
  node_kubeconfig "$dir/kubelet.kubeconfig" "https://$host_ip:$port" kubelet "$pki"
  node_kubeconfig "$dir/kube-proxy.kubeconfig" "https://$host_ip:$port" kube-proxy "$pki"

  local vars=(DIR="$dir" NODE_IP="$node_ip" POD_CIDR="$NODE_POD_CIDR" PKI="$pki" CGROUP="trellis-node-$id" NODE_NAME="$NODE_NAME")
  node_render "$ROOT/hack/node/containerd.toml" "$dir/containerd.toml" "${vars[@]}"
  node_render "$ROOT/hack/node/cni.conflist" "$dir/cni/10-trellis.conflist" "${vars[@]}"
  node_render "$ROOT/hack/node/kubelet.yaml" "$dir/kubelet.yaml" "${vars[@]}"
  node_render "$ROOT/hack/node/kube-proxy.yaml" "$dir/kube-proxy.yaml" "${vars[@]}"

  # The kernel settings the kubelet insists on (protectKernelDefaults), shown
  # to it in its own mount namespace; the host's stay as they are.
  printf '1\n' > "$dir/sysctl/vm.overcommit_memory"
  printf '0\n' > "$dir/sysctl/vm.panic_on_oom"
  printf '10\n' > "$dir/sysctl/kernel.panic"
  printf '1\n' > "$dir/sysctl/kernel.panic_on_oops"

  for d in /sys/fs/cgroup/*/; do
    mountpoint -q "$d" && mkdir -p "$d/trellis-node-$id"
  done
  # The mount point of the node's private /var/lib/cni: made (and later
  # removed) by us if the host has none.
  if [ ! -d /var/lib/cni ]; then mkdir -p /var/lib/cni && touch "$dir/made-var-lib-cni"; fi

  # The holder: a process that owns the node's mount namespace (a slave of
  # the host's, so nothing mounted inside shows outside) in its netns.
  # shellcheck disable=SC2016
  nohup nsenter --net="/run/netns/$ns" -- unshare --mount --propagation slave -- bash -c '
    set -e
    mount -t tmpfs -o mode=0755,size=256m trellis-node-run /run
    mount -t tmpfs -o mode=0755,size=16m trellis-node-cni /var/lib/cni
    for f in "$1"/sysctl/*; do
      k=$(basename "$f"); mount --bind "$f" "/proc/sys/${k//.//}"
    done
    exec sleep infinity' holder "$dir" > "$dir/holder.log" 2>&1 &
  echo $! > "$dir/holder.pid"
  disown
  for _ in $(seq 50); do
    node_in "$name" test -d /proc/sys 2>/dev/null && node_in "$name" mountpoint -q /var/lib/cni 2>/dev/null && break
    sleep 0.1
  done

  # Started directly (not through a function) so that $! is the daemon itself.
  local in=(nsenter --target "$(cat "$dir/holder.pid")" --mount --net -- env PATH="$BIN:$PATH")
  "${in[@]}" "$BIN/containerd" --config "$dir/containerd.toml" > "$dir/containerd.log" 2>&1 &
  echo $! > "$dir/containerd.pid"
  disown
  for _ in $(seq 100); do
    node_in "$name" "$BIN/ctr" version >/dev/null 2>&1 && break
    sleep 0.2
  done
  for t in "${NODE_IMAGES[@]}"; do
    node_in "$name" "$BIN/ctr" -n k8s.io images import --local "$ROOT/bin/images/$t.tar" >> "$dir/import.log" 2>&1 ||
      { echo "importing $t failed; see $dir/import.log" >&2; return 1; }
  done

  # An earlier life of the node (it starts empty) leaves a Node whose status
  # still says Ready and pods whose containers are gone: delete both, so the
  # kubelet registers anew, the pods' controllers make new ones, and nothing
  # reports Ready before it runs again.
  "$BIN/kubectl" --kubeconfig "$kubeconfig" delete pods -A --field-selector "spec.nodeName=$NODE_NAME" \
    --force --grace-period=0 --wait=false >/dev/null 2>&1 || true
  "$BIN/kubectl" --kubeconfig "$kubeconfig" delete node "$NODE_NAME" --ignore-not-found >/dev/null
  "${in[@]}" "$BIN/kubelet" --config "$dir/kubelet.yaml" --kubeconfig "$dir/kubelet.kubeconfig" \
    --root-dir "$dir/kubelet" --cert-dir "$dir/kubelet-pki" --hostname-override "$NODE_NAME" --node-ip "$node_ip" \
    --node-labels "trellis.dev/real-node=true" > "$dir/kubelet.log" 2>&1 &
  echo $! > "$dir/kubelet.pid"
  disown
  "${in[@]}" "$BIN/kube-proxy" --config "$dir/kube-proxy.yaml" > "$dir/kube-proxy.log" 2>&1 &
  echo $! > "$dir/kube-proxy.pid"
  disown

  node_ready "$kubeconfig" || {
    echo "the real node did not become Ready; logs in $dir" >&2; tail -20 "$dir/kubelet.log" >&2; return 1; }
}

# node_down NAME: stop NAME's real node: every process in its mount namespace
# (containerd, kubelet, kube-proxy, the shims) and in its pods' cgroups, the
# relay; then remove its cgroups. Its mounts vanish with the last process.
# The network namespace stays for the cluster (node_net_down removes it).
node_down() {
  local name=$1 dir=$STATE/$1-node cgroup mntns pid p d
  [ -d "$dir" ] || return 0
  cgroup=trellis-node-$(node_id "$name")
  [ -f "$dir/cgroup" ] && cgroup=$(cat "$dir/cgroup")
  for p in kube-proxy kubelet containerd; do
    [ -f "$dir/$p.pid" ] && kill "$(cat "$dir/$p.pid")" 2>/dev/null || true
  done
  for _ in $(seq 50); do
    local alive=0
    for p in kube-proxy kubelet containerd; do
      [ -f "$dir/$p.pid" ] && kill -0 "$(cat "$dir/$p.pid")" 2>/dev/null && alive=1
    done
    [ $alive = 0 ] && break
    sleep 0.2
  done
  if [ -f "$dir/holder.pid" ] && mntns=$(readlink "/proc/$(cat "$dir/holder.pid")/ns/mnt" 2>/dev/null); then
    # The shims (and anything else left) share the holder's mount namespace.
    for p in /proc/[0-9]*; do
      if [ "$(readlink "$p/ns/mnt" 2>/dev/null)" = "$mntns" ]; then kill -9 "${p#/proc/}" 2>/dev/null || true; fi
    done
  fi
  # The containers: every process in the node's pod cgroups.
  for _ in 1 2 3; do
    for d in /sys/fs/cgroup/*/"$cgroup"; do
      [ -d "$d" ] || continue
      find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null | while read -r pid; do kill -9 "$pid" 2>/dev/null || true; done
    done
    sleep 0.2
  done
  if [ -f "$dir/relay.pid" ]; then
    # The relay and the children it forked for open connections.
    pid=$(cat "$dir/relay.pid")
    pkill -P "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
  fi
  for _ in $(seq 25); do
    for d in /sys/fs/cgroup/*/"$cgroup"; do
      if [ -d "$d" ]; then find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true; fi
    done
    compgen -G "/sys/fs/cgroup/*/$cgroup" >/dev/null || break
    sleep 0.2
  done
  if [ -f "$dir/made-var-lib-cni" ]; then
    rmdir /var/lib/cni 2>/dev/null || true # busy while another node uses it
    rm -f "$dir/made-var-lib-cni"
  fi
  rm -f "$dir"/*.pid
  return 0
}
