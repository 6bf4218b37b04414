# Sourced by bench/karma.sh and bench/karma-congestion.sh: starts the eight-DC cluster of Karma's experiments
# (bench/wan/aws-8dc.toml, one node per DC, 12 partitions, the `bench` bucket in Karma's three rings: the US and
# Europe, Asia and Australia, Brazil) with one of the variants, in a new directory whose path it prints.
#   full:     every DC holds every object (full replication, "COPS-Ideal");
#   cops-pr:  one copy per ring, reads from the own ring's holder (static ring binding: `read_from = "own"`);
#   karma-nc: one copy per ring, reads from the holder measured fastest (`read_from = "nearest"`), no cache;
#   karma:    karma-nc with each DC's lease cache on (leases of `lease_ms`).
# DC_CPU_SHARE=0.22 caps each DC's processes at that share of one core (bench/cap-dcs.py; needs root).
# KARMA_NODE_CONFIG="worker_threads = 1" adds that to every node's configuration, in every variant.
# Usage: dir=$(karma_cluster BIN VARIANT LEASE_MS)
karma_cluster() {
  local bin=$1 variant=$2 lease_ms=$3 dir config
  local rings='rings = [[0, 1, 2, 3], [4, 5, 6], [7]], buckets = ["bench"]'
  case $variant in
    full) config=() ;;
    cops-pr) config=(--node-config "placement = { $rings, read_from = \"own\" }") ;;
    karma-nc) config=(--node-config "placement = { $rings }") ;;
    karma) config=(--node-config "placement = { $rings }" --node-config "cache = { enabled = true, lease_ms = $lease_ms }") ;;
    *) echo "unknown variant $variant" >&2; return 2 ;;
  esac
  if [ -n "${KARMA_NODE_CONFIG:-}" ]; then
    config+=(--node-config "$KARMA_NODE_CONFIG")
  fi
  dir=$(mktemp -d /tmp/causet-karma-XXXXXX)
  "$bin" cluster start --dcs 8 --wan-matrix aws-8dc --partitions 12 --sync periodic --no-tls --base-port 0 \
    --dir "$dir" "${config[@]}" > /dev/null
  if [ -n "${DC_CPU_SHARE:-}" ]; then
    python3 bench/cap-dcs.py "$dir/cluster.json" "$DC_CPU_SHARE"
  fi
  echo "$dir"
}
