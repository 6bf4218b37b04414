#!/usr/bin/env bash
# Runs the first-transaction examples (Python, Java, JavaScript; see examples/README.md) against one fresh
# `causet start` server on free loopback ports, one after another, and prints one line per language. They share
# the objects, so each must read the counter above the previous one's value and the set as [new, sale]. Exits
# non-zero if any example fails.
#
# Environment:
#   CAUSET_BIN      the causet binary (absolute, or relative to the current directory); when unset,
#                   `cargo build -p causet --locked` builds one and ${CARGO_TARGET_DIR:-target}/debug/causet is used.
#   PYTHON          the interpreter that creates the Python example's virtualenv [default: python3].
#   CAUSET_M2_REPO  Maven's local repository [default: Maven's own, ~/.m2/repository].
# Setup is quiet and cached: the virtualenv is target/examples-venv (rebuilt when requirements.txt changes), Maven
# builds into target/examples-java, and `npm ci` runs when examples/js/node_modules is missing or
# package-lock.json changed.
# shellcheck disable=SC2317  # cleanup and the run_* functions are called by trap and by `step`
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
if [[ -n "${CAUSET_BIN:-}" && "$CAUSET_BIN" != /* ]]; then
    CAUSET_BIN="$PWD/$CAUSET_BIN"
fi
cd "$root"
python="${PYTHON:-python3}"

for tool in "$python" curl; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "examples: '$tool' is not on PATH" >&2
        exit 2
    fi
done
# shellcheck source-path=SCRIPTDIR source=../conformance/causet-bin.sh
source "$root/conformance/causet-bin.sh"
causet_bin examples

work="$(mktemp -d "${TMPDIR:-/tmp}/causet-examples.XXXXXX")"
server_pid=""
child=""
failed=0

stop_server() {
    [[ -n "$server_pid" ]] || return 0
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 1 150); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
}
cleanup() {
    local status=$?
    if [[ -n "$child" ]]; then # a running example, and everything it started (its own process group)
        kill -TERM -- "-$child" 2>/dev/null || true
        wait "$child" 2>/dev/null || true
    fi
    stop_server
    if [[ "$status" -eq 0 ]]; then
        rm -rf "$work"
    else
        echo "examples: the server's data and log are kept in $work" >&2
    fi
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# The server: free loopback ports (bound to port 0 by Python, then released; another attempt if another process
# takes one first), ready when /health answers ok within 30 s.
for attempt in 1 2 3; do
    read -r client_port admin_port < <("$python" -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))')
    rm -rf "$work/data"
    "$CAUSET_BIN" start --data-dir "$work/data" --client-bind "127.0.0.1:$client_port" \
        --admin-bind "127.0.0.1:$admin_port" >"$work/server.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 1 300); do
        if [[ "$(curl -fsS --max-time 1 "http://127.0.0.1:$admin_port/health" 2>/dev/null)" == ok ]]; then
            break 2
        fi
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$server_pid" 2>/dev/null; then
        echo "examples: the server did not answer /health within 30 s; its log:" >&2
        tail -n 20 "$work/server.log" >&2
        exit 1
    fi
    wait "$server_pid" || true
    server_pid=""
    echo "examples: the server exited at start (attempt $attempt); its log:" >&2
    tail -n 20 "$work/server.log" >&2
done
[[ -n "$server_pid" ]] || exit 1

# The examples' setup and runs. `set -e` does not apply inside them (see `step`): each failure is returned explicitly.
bounded() { # bounded SECONDS CMD...: CMD, stopped after SECONDS where coreutils' timeout exists
    if command -v timeout >/dev/null 2>&1; then timeout --foreground -k 10 "$@"; else "${@:2}"; fi
}
sha256() {
    "$python" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$1"
}
run_python() {
    local venv="$root/target/examples-venv" requirements="$here/python/requirements.txt" wanted
    wanted="$(sha256 "$requirements")" || return
    if [[ ! -x "$venv/bin/python" || "$(cat "$venv/.requirements.sha256" 2>/dev/null)" != "$wanted" ]]; then
        if [[ -e "$venv" && ! -f "$venv/pyvenv.cfg" ]]; then
            echo "$venv exists and is not a virtualenv; refusing to replace it"
            return 2
        fi
        rm -rf "$venv" && "$python" -m venv "$venv" \
            && "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements" \
            && echo "$wanted" >"$venv/.requirements.sha256" || return
    fi
    PYTHONDONTWRITEBYTECODE=1 bounded 60 "$venv/bin/python" "$here/python/first_transaction.py" 127.0.0.1 "$client_port"
}
run_java() {
    if ! command -v java >/dev/null || ! command -v mvn >/dev/null; then
        echo "needs Java 17+ and Maven on PATH"
        return 2
    fi
    local args=(-q -B -Dstyle.color=never -f "$here/java/pom.xml")
    [[ -z "${CAUSET_M2_REPO:-}" ]] || args+=("-Dmaven.repo.local=$CAUSET_M2_REPO")
    # Maven 3.8 prints stray ANSI resets even in batch mode: sed strips them.
    bounded 300 mvn "${args[@]}" compile exec:java "-Dexec.args=127.0.0.1 $client_port" 2>&1 \
        | sed -u 's/\x1b\[[0-9;]*m//g'
}
run_js() {
    if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
        echo "needs Node.js 20+ and npm on PATH"
        return 2
    fi
    local dir="$here/js" wanted
    wanted="$(sha256 "$dir/package-lock.json")" || return
    local stamp="$dir/node_modules/.causet-package-lock.sha256"
    if [[ ! -d "$dir/node_modules" || "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]]; then
        (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) && echo "$wanted" >"$stamp" || return
    fi
    bounded 60 node "$dir/first_transaction.js" 127.0.0.1 "$client_port"
}

# step NAME FUNCTION: runs it in the background in a process group of its own (so that a signal to this script
# stops it and all it started, see cleanup), then prints its line, or why it failed with its output. Each example
# must read the counter above the previous one's and the set as [new, sale].
last_visits=0
step() {
    local name="$1" out="$work/$1.out" status=0 line visits
    set -m
    "$2" </dev/null >"$out" 2>&1 &
    child=$!
    set +m
    wait "$child" || status=$?
    child=""
    line="$(grep "^$name: visits = " "$out" | tail -n 1 || true)"
    visits="$(sed -n 's/^[a-z]*: visits = \([0-9]*\), tags = \[new, sale\] .*/\1/p' <<<"$line")"
    if [[ "$status" -eq 0 && -n "$visits" && "$visits" -gt "$last_visits" ]]; then
        echo "$line"
        last_visits="$visits"
    else
        failed=1
        if [[ "$status" -ne 0 ]]; then
            echo "$name: FAILED (exit $status)"
        else
            echo "$name: FAILED (expected visits > $last_visits and tags = [new, sale])"
        fi
        sed 's/^/    /' "$out" >&2
    fi
}
step python run_python
step java run_java
step js run_js

stop_server
exit "$failed"
