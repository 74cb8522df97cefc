#!/usr/bin/env bash
# Command-line face of hack/lib/cluster.sh, for the Go e2e suite and the bench:
#   hack/cluster.sh up NAME [NODES] [real-node]  create/reuse a KWOK cluster, print its kubeconfig path
#   hack/cluster.sh down NAME             delete it (and its real node)
#   hack/cluster.sh node-up NAME          start its real node (images from `make images`)
#   hack/cluster.sh node-down NAME        stop it
#   hack/cluster.sh node-net NAME         print HOST_IP NODE_IP NETNS of its node network
#   hack/cluster.sh steer NAME NAMESPACE  send NAMESPACE's new pods to the real node
#   hack/cluster.sh node-import NAME TAR [REPO]  import an image archive (make images' format) into its real
#                                         node; with REPO, also name it REPO@DIGEST, as a pull by digest would
#                                         (install.yaml names its images so)
#   hack/cluster.sh s3-credentials NAME   generate its S3 keys and event token (once)
#   hack/cluster.sh s3-up NAME PORT [URL] start versitygw (URL: bucket-event webhook)
#   hack/cluster.sh s3-down NAME          stop it
set -euo pipefail
# shellcheck source=lib/cluster.sh
. "$(dirname "$0")/lib/cluster.sh"
cmd=${1:-}; shift || true
case $cmd in
  up) cluster_up "$@" ;;
  down) cluster_down "$@" ;;
  node-up) node_up "$@" ;;
  node-down) node_down "$@" ;;
  node-net) node_net "$@" ;;
  steer) steer_to_real_node "$@" ;;
  node-import) node_in "$1" "$BIN/ctr" -n k8s.io images import --local ${3:+--base-name "$3" --digests} "$(realpath "$2")" >/dev/null ;;
  s3-credentials) s3_credentials "$@" ;;
  s3-up) s3_up "$@" ;;
  s3-down) s3_down "$@" ;;
  *) echo "usage: $0 up|down|node-up|node-down|node-net|steer|node-import|s3-credentials|s3-up|s3-down ..." >&2; exit 2 ;;
esac
