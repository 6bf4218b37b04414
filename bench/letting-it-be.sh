#!/usr/bin/env bash
# The Letting-It-Be paper's experiment, side by side on this machine: two emulated DCs 50 ms apart, YCSB-like
# zipfian single-key operations on 1 KiB values (bench/workloads/letting-it-be.toml), write-heavy (50% updates)
# and read-heavy (5%), on four targets:
#
#   cassandra             Cassandra alone (two real nodes, one per DC), through `causet middleware --plain`
#   lib-cassandra         the causal middleware over the same Cassandra (exclusive writers: one instance per
#                         DC holding a writer lease, plain writes; the default)
#   lib-cassandra-uncached  the same without the read cache (--read-cache-ms 0)
#   lib-cassandra-shared  the same with shared writers (a lightweight transaction per write, the paper's design)
#   lib-cassandra-1worker  lib-cassandra with each proxy on one tokio worker thread (TOKIO_WORKER_THREADS=1)
#   lib-cassandra-base    lib-cassandra run by the binary in BASE_BIN (an earlier build: a change side by side)
#   lib-causet            the causal middleware over Causet run with protocol = "eventual"
#   causet          Causet's own Transactional Causal+ Consistency (Cure)
#
# Each repetition runs every target in turn (a fresh keyspace or a fresh cluster each time), odd repetitions in the
# order of --targets and even ones in the reverse order: the target that runs first after the JVMs' warm-up runs
# slower than it would later (measured 2026-12-02 with each DC capped: both Cassandra alone and the middleware ran
# about 1.3x faster in second place than in first), so use an even --repeat (the default, 2) to give every target
# each place equally. Before each target on Cassandra (and after the warm-up), the nodes flush their memtables and
# finish every compaction (`scripts/cassandra quiesce`), so that no target pays for compacting what an earlier one
# wrote; and again before each point (`causet bench --before-point`), once the preload is written and the proxies
# have settled, so that no point is measured while the nodes compact the preload or the point before (until
# 2026-12-03 only before each target: the middleware's points then often compacted what its preload wrote in the
# measured window, Cassandra alone's rarely; run 22 of bench/RESULTS-letting-it-be.md). --no-quiesce
# skips both (as before 2026-12-02), --no-quiesce-points the second (as until 2026-12-03). The summary gives
# medians over repetitions and, per repetition, ratios to Cassandra alone. Each point (update ratio) is measured
# once the proxies say they have settled (`/settled` on their --admin address: every write resolved in the other
# DC, every follower at its feed's end), so a measured window does not start with the backlog of the preload or of
# the point before; --no-settle measures at once, as before 2026-11-30. Before the first repetition, the JVMs are
# warmed up for --jvm-warmup-s (default 120) unrecorded, with what the targets will ask of Cassandra: Cassandra
# alone's statements, then the middleware's (when a lib-cassandra target is measured), at every update ratio. With
# less (until 2026-12-03: 30 s of Cassandra alone at 50% updates) the capped JVMs were still compiling when the
# first target ran, and Cassandra alone in first place ran at 3,765 txn/s against 5,818-6,422 later.
#
#   bench/letting-it-be.sh [--repeat 2] [--duration-s 20] [--warmup-s 5] [--jvm-warmup-s 120] [--out DIR]
#                          [--targets a,b,...] [--lib-flags "--retain 4 ..."] [--no-settle] [--no-quiesce]
#                          [--no-quiesce-points] [--dc-cpu-share S]
#
# --lib-flags passes extra `causet middleware` options to the middleware targets (lib-*).
# --dc-cpu-share S caps each emulated DC at S of one core (bench/cap-dcs.py; cgroups, needs root): DC 1's
# Cassandra node (or Causet node) and proxy share one group, DC 2's another, as if each DC had a machine of its
# own as in the paper; the load generator and the WAN delay proxy stay uncapped. Each group's CPU is then
# sampled by kind of process (bench/cpu-sample.sh) and split per point in cpu.md (bench/cpu-split.py). Without
# it every process shares the whole machine, and the DC that falls behind leaves its CPU to the other.
#
# Needs a release build (BIN, default target/release/causet; BASE_BIN for lib-cassandra-base), Java 17 and Maven
# (scripts/cassandra).
set -euo pipefail
cd "$(dirname "$0")/.."

REPEAT=2
DURATION=20
WARMUP=5
OUT="bench-results/letting-it-be-$(date +%s)"
JVM_WARMUP=120
LIB_FLAGS=""
SETTLE=1
QUIESCE=1
QUIESCE_POINTS=1
TARGETS="cassandra,lib-cassandra,lib-cassandra-uncached,lib-cassandra-shared,lib-causet,causet"
RATIOS="0.50,0.05"
DC_SHARE=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --repeat) REPEAT="$2"; shift 2 ;;
    --duration-s) DURATION="$2"; shift 2 ;;
    --warmup-s) WARMUP="$2"; shift 2 ;;
    --jvm-warmup-s) JVM_WARMUP="$2"; shift 2 ;;
    --lib-flags) LIB_FLAGS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --targets) TARGETS="$2"; shift 2 ;;
    --update-ratio) RATIOS="$2"; shift 2 ;;
    --no-settle) SETTLE=0; shift ;;
    --no-quiesce) QUIESCE=0; shift ;;
    --no-quiesce-points) QUIESCE_POINTS=0; shift ;;
    --dc-cpu-share) DC_SHARE="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
BIN="${BIN:-target/release/causet}"
[[ -x "$BIN" ]] || { echo "no $BIN: run cargo build --release -p causet first (or set BIN)" >&2; exit 1; }
if [[ ",$TARGETS," == *",lib-cassandra-base,"* ]]; then
  [[ -x "${BASE_BIN:-}" ]] || { echo "lib-cassandra-base needs BASE_BIN, an executable causet" >&2; exit 1; }
fi
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

CQL_PORT=29042
PROXY0=127.0.0.1:28087
PROXY1=127.0.0.1:28088
ADMIN0=127.0.0.1:28187
ADMIN1=127.0.0.1:28188
CAUSET_BASE=30087            # node i listens on base+3i: DC 0 on 30087, DC 1 on 30090
CASS_DIR="$OUT/cassandra"
PROXY_PIDS=()

log() { printf '[letting-it-be] %s\n' "$*" >&2; }

# Puts process $1 in DC $2's CPU group, when DCs are capped (--dc-cpu-share).
cap() {
  [[ -z "$DC_SHARE" ]] || python3 bench/cap-dcs.py --pid "$1" --dc "$2" "$DC_SHARE"
}

stop_proxies() {
  local name="$1"
  for pid in "${PROXY_PIDS[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
  for pid in "${PROXY_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  PROXY_PIDS=()
  [[ -n "$name" ]] && grep -h "^local set" "$OUT/$name".proxy*.log >"$OUT/$name.proxy-report.txt" 2>/dev/null || true
}

# With capped DCs, each DC's CPU is sampled by kind of process for the whole run (bench/cpu-sample.sh), and the
# summary gives it per point (bench/cpu-split.py, cpu.md): Cassandra's and the proxies' CPU per transaction.
SAMPLER_PID=""
if [[ -n "$DC_SHARE" ]]; then
  bench/cpu-sample.sh >"$OUT/cpu.samples" 2>/dev/null &
  SAMPLER_PID=$!
fi

cleanup() {
  [[ -z "$SAMPLER_PID" ]] || kill "$SAMPLER_PID" 2>/dev/null || true
  stop_proxies ""
  for d in "$OUT"/causet-*; do [[ -d "$d" ]] && "$BIN" cluster stop --dir "$d" >/dev/null 2>&1 || true; done
  scripts/cassandra stop --dir "$CASS_DIR" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# Starts one proxy per DC: $1 run name, $2 store of DC 0, $3 store of DC 1, then extra flags for both; both run
# PROXY_BIN with the environment variables in PROXY_ENV (NAME=VALUE words).
PROXY_ENV=()
PROXY_BIN="$BIN"
start_proxies() {
  local name="$1" s0="$2" s1="$3"; shift 3
  env "${PROXY_ENV[@]}" "$PROXY_BIN" middleware --store "$s0" --local-set 0 --listen "$PROXY0" --admin "$ADMIN0" "$@" >"$OUT/$name.proxy0.log" 2>&1 &
  PROXY_PIDS+=($!)
  cap $! 0
  # The first proxy creates the schema; give it a moment before the second connects.
  for _ in $(seq 1 100); do grep -q serving "$OUT/$name.proxy0.log" && break; sleep 0.2; done
  grep -q serving "$OUT/$name.proxy0.log" || { cat "$OUT/$name.proxy0.log" >&2; exit 1; }
  local extra=()
  for a in "$@"; do [[ "$a" != --create-schema ]] && extra+=("$a"); done
  env "${PROXY_ENV[@]}" "$PROXY_BIN" middleware --store "$s1" --local-set 1 --listen "$PROXY1" --admin "$ADMIN1" "${extra[@]}" \
    >"$OUT/$name.proxy1.log" 2>&1 &
  PROXY_PIDS+=($!)
  cap $! 1
  for _ in $(seq 1 100); do grep -q serving "$OUT/$name.proxy1.log" && break; sleep 0.2; done
  grep -q serving "$OUT/$name.proxy1.log" || { cat "$OUT/$name.proxy1.log" >&2; exit 1; }
}

# Starts the proxies of Cassandra target $2 (cassandra, lib-cassandra, lib-cassandra-uncached, ...) for run $1 on
# a fresh keyspace $3; the target may set PROXY_ENV or PROXY_BIN (reset by the caller).
start_cassandra_target() {
  local name="$1" target="$2" keyspace="$3" mode=()
  case "$target" in
    cassandra) mode=(--plain) ;;
    lib-cassandra) mode=(--writers exclusive $LIB_FLAGS) ;;
    lib-cassandra-uncached) mode=(--writers exclusive --read-cache-ms 0 $LIB_FLAGS) ;;
    lib-cassandra-shared) mode=(--writers shared $LIB_FLAGS) ;;
    lib-cassandra-1worker) mode=(--writers exclusive $LIB_FLAGS); PROXY_ENV=(TOKIO_WORKER_THREADS=1) ;;
    lib-cassandra-base) mode=(--writers exclusive $LIB_FLAGS); PROXY_BIN="$BASE_BIN" ;;
    *) echo "unknown Cassandra target $target" >&2; exit 2 ;;
  esac
  start_proxies "$name" "cassandra://127.0.0.1:$CQL_PORT" "cassandra://127.0.0.2:$CQL_PORT" \
    --keyspace "$keyspace" --create-schema "${mode[@]}"
}

SETTLE_ARGS=()
[[ "$SETTLE" == 1 ]] && SETTLE_ARGS=(--admin "$ADMIN0,$ADMIN1")
# Cassandra targets quiesce the nodes before each point too (see the header); its output goes to quiesce.log. As
# before a target, nodes that do not quiesce are measured anyway (said in quiesce.log).
POINT_ARGS=()
[[ "$QUIESCE" == 1 && "$QUIESCE_POINTS" == 1 ]] && POINT_ARGS=(--before-point "scripts/cassandra quiesce --dir \
'$CASS_DIR' --timeout 600 >>'$OUT/quiesce.log' 2>&1 || echo 'the nodes did not quiesce: measuring anyway' >>'$OUT/quiesce.log'")

bench() {
  local name="$1"; shift
  log "$name: causet bench"
  "$BIN" bench -w letting-it-be --update-ratio "$RATIOS" --duration-s "$DURATION" --warmup-s "$WARMUP" \
    --out "$OUT/$name" "$@" 2>&1 | grep -v '\[measuring\]\|\[warm-up\]\|waiting' | tail -10 >&2
}

causet_cluster() {
  local dir="$1" protocol="$2"
  "$BIN" cluster start --dcs 2 --nodes-per-dc 1 --partitions 8 --wan-delay-ms 50 --sync periodic --no-tls \
    --protocol "$protocol" --base-port "$CAUSET_BASE" --dir "$dir" >"$dir.log" 2>&1
  [[ -z "$DC_SHARE" ]] || python3 bench/cap-dcs.py "$dir/cluster.json" "$DC_SHARE"
}

if [[ ",$TARGETS," == *",cassandra"* || ",$TARGETS," == *",lib-cassandra"* ]]; then
  log "starting two Cassandra nodes (dc1, dc2) with a 50 ms WAN between them"
  scripts/cassandra start --dir "$CASS_DIR" --nodes 2 --fresh --wan-delay-ms 50 --port "$CQL_PORT" \
    --storage-port 27000 --jmx-port 27199 >"$OUT/cassandra.log" 2>&1
  cap "$(cat "$CASS_DIR/node1/pid")" 0
  cap "$(cat "$CASS_DIR/node2/pid")" 1
  [[ -z "$DC_SHARE" ]] || log "each DC capped at $DC_SHARE of a core"
  if [[ "$JVM_WARMUP" -gt 0 ]]; then
    # Cassandra alone, then the middleware when one of its targets is measured (see the header).
    phases=(cassandra)
    [[ ",$TARGETS," == *",lib-cassandra"* ]] && phases+=(lib-cassandra)
    IFS=, read -ra ratio_list <<<"$RATIOS"
    per_point=$(( JVM_WARMUP / (${#phases[@]} * ${#ratio_list[@]}) ))
    (( per_point > 0 )) || per_point=1
    for phase in "${phases[@]}"; do
      log "warming Cassandra's JVMs up: $phase, ${per_point} s per update ratio (not recorded)"
      start_cassandra_target "jvm-warmup-$phase" "$phase" "lib_warmup_${phase//-/_}"
      "$BIN" bench -w letting-it-be --update-ratio "$RATIOS" --duration-s "$per_point" --warmup-s 0 \
        --addr "$PROXY0,$PROXY1" --out "$OUT/jvm-warmup-$phase" >/dev/null 2>&1 || true
      stop_proxies ""
    done
  fi
fi

# Lets the Cassandra nodes finish what earlier targets left them (flushes, compactions) before the next target.
quiesce() {
  [[ "$QUIESCE" == 1 ]] || return 0
  if ! scripts/cassandra quiesce --dir "$CASS_DIR" --timeout 600 2>&1 |
    sed 's/^\[cassandra\] /[letting-it-be] cassandra: /' >&2; then
    log "the Cassandra nodes did not quiesce: measuring anyway"
  fi
}

# What each target's keyspace cost the nodes (tables' sizes, sstables, flushes, local reads and writes), in
# $OUT/<run>.tablestats.txt; at the end every node's compaction history (bytes in and out by keyspace and table)
# is in $OUT/compaction-history.txt.
# nodetool with the remaining arguments on both nodes, into file $1.
nodetool_both() {
  local file="$1" i; shift
  for i in 1 2; do
    echo "## node$i"
    scripts/cassandra nodetool --dir "$CASS_DIR" --node "$i" -- "$@" || echo "(nodetool failed)"
  done >"$file" 2>&1
}

for rep in $(seq 1 "$REPEAT"); do
  IFS=, read -ra list <<<"$TARGETS"
  if (( rep % 2 == 0 )); then
    reversed=(); for ((i = ${#list[@]} - 1; i >= 0; i--)); do reversed+=("${list[i]}"); done
    list=("${reversed[@]}")
  fi
  log "repetition $rep: $(IFS=,; echo "${list[*]}")"
  for target in "${list[@]}"; do
    name="r$rep-$target"
    PROXY_ENV=()
    PROXY_BIN="$BIN"
    case "$target" in
      cassandra|lib-cassandra|lib-cassandra-uncached|lib-cassandra-shared|lib-cassandra-1worker|lib-cassandra-base)
        quiesce
        start_cassandra_target "$name" "$target" "lib_r${rep}_${target//-/_}"
        bench "$name" --addr "$PROXY0,$PROXY1" "${SETTLE_ARGS[@]}" "${POINT_ARGS[@]}"
        stop_proxies "$name"
        nodetool_both "$OUT/$name.tablestats.txt" tablestats "lib_r${rep}_${target//-/_}"
        ;;
      lib-causet)
        causet_cluster "$OUT/causet-$name" eventual
        # shellcheck disable=SC2086
        start_proxies "$name" "causet://127.0.0.1:$CAUSET_BASE" "causet://127.0.0.1:$((CAUSET_BASE + 3))" $LIB_FLAGS
        bench "$name" --addr "$PROXY0,$PROXY1" "${SETTLE_ARGS[@]}"
        stop_proxies "$name"
        "$BIN" cluster stop --dir "$OUT/causet-$name" >/dev/null
        ;;
      causet)
        causet_cluster "$OUT/causet-$name" cure
        bench "$name" --cluster-dir "$OUT/causet-$name"
        "$BIN" cluster stop --dir "$OUT/causet-$name" >/dev/null
        ;;
      *) echo "unknown target $target" >&2; exit 2 ;;
    esac
    [[ -f "$OUT/$name.proxy-report.txt" ]] && sed 's/^/    /' "$OUT/$name.proxy-report.txt" >&2
  done
done

if [[ -d "$CASS_DIR/node1" ]]; then
  quiesce
  nodetool_both "$OUT/compaction-history.txt" compactionhistory
fi

python3 - "$OUT" "$REPEAT" "$TARGETS" <<'EOF'
import json, os, statistics, sys
out, repeat, targets = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
runs = {}  # (target, ratio) -> [per-rep dict]
for rep in range(1, repeat + 1):
    for t in targets:
        path = os.path.join(out, f"r{rep}-{t}", "report.json")
        if not os.path.exists(path):
            continue
        for r in json.load(open(path))["runs"]:
            k = r["latency_by_kind"]
            runs.setdefault((t, r["point"]["update_ratio"]), []).append({
                "rep": rep, "tput": r["throughput_per_s"], "errors": r["errors"],
                "read_p50": k["read"]["p50_us"] / 1000 if "read" in k else None,
                "read_p99": k["read"]["p99_us"] / 1000 if "read" in k else None,
                "upd_p50": k["update"]["p50_us"] / 1000 if "update" in k else None,
                "upd_p99": k["update"]["p99_us"] / 1000 if "update" in k else None,
            })
def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")
lines = ["| updates | target | throughput (txn/s) | ÷ Cassandra alone | read p50 / p99 (ms) | update p50 / p99 (ms) | errors |",
         "|---|---|---|---|---|---|---|"]
for ratio in sorted({r for (_, r) in runs}, reverse=True):
    base = {x["rep"]: x["tput"] for x in runs.get(("cassandra", ratio), [])}
    for t in targets:
        xs = runs.get((t, ratio), [])
        if not xs:
            continue
        ratios = [x["tput"] / base[x["rep"]] for x in xs if x["rep"] in base]
        rs = " / ".join(f"{x['tput']:.0f}" for x in xs)
        lines.append(
            f"| {ratio:.0%} | {t} | {med([x['tput'] for x in xs]):.0f} ({rs}) | "
            f"{med(ratios):.2f} ({' / '.join(f'{r:.2f}' for r in ratios)}) | "
            f"{med([x['read_p50'] for x in xs]):.1f} / {med([x['read_p99'] for x in xs]):.1f} | "
            f"{med([x['upd_p50'] for x in xs]):.1f} / {med([x['upd_p99'] for x in xs]):.1f} | "
            f"{sum(x['errors'] for x in xs)} |")
summary = "\n".join(lines)
open(os.path.join(out, "summary.md"), "w").write(summary + "\n")
print(summary)
EOF
if [[ -n "$SAMPLER_PID" ]]; then
  python3 bench/cpu-split.py "$OUT/cpu.samples" "$OUT" >"$OUT/cpu.md"
  log "CPU per point (Java: the Cassandra nodes; other: the proxies or Causet's nodes), in $OUT/cpu.md:"
  cat "$OUT/cpu.md" >&2
fi
log "summary in $OUT/summary.md"
