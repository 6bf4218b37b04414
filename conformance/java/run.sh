#!/usr/bin/env bash
# Runs the Java client-conformance suite: AntidoteDB's published Java client (eu.antidotedb:antidote-java-client
# 0.1.0, from Maven Central) against `causet start` servers. Exits non-zero if any test fails.
#
# Environment:
#   CAUSET_BIN       the causet binary to test (absolute, or relative to the current directory); when unset,
#                    `cargo build -p causet --locked` builds one and ${CARGO_TARGET_DIR:-target}/debug/causet is used.
#   CAUSET_M2_REPO   Maven's local repository [default: Maven's own, ~/.m2/repository]; downloads go there.
#   CAUSET_KEEP_WORK set to 1 to keep the servers' data directories and logs even when every test passes (they are
#                    always kept after a failure; the path is printed).
#   JAVA_HOME, MAVEN_OPTS, MAVEN_ARGS  as Maven reads them.
# Extra arguments go to Maven, e.g. `conformance/java/run.sh -Dtest=TypesTest` or `-Dtest='ErrorsTest#connect*'`.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
if [[ -n "${CAUSET_BIN:-}" && "$CAUSET_BIN" != /* ]]; then
    CAUSET_BIN="$PWD/$CAUSET_BIN"
fi
cd "$root"

# The tools.
if ! command -v java >/dev/null 2>&1; then
    echo "conformance/java: no 'java' on PATH: install a JDK 17 or later (Debian: apt-get install openjdk-17-jdk-headless)" >&2
    exit 2
fi
java_major="$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p' | head -1)"
if [[ -z "$java_major" || "${java_major%%.*}" -lt 17 ]]; then
    echo "conformance/java: java ${java_major:-of unknown version} is older than 17 (set JAVA_HOME or PATH)" >&2
    exit 2
fi
if ! command -v mvn >/dev/null 2>&1; then
    echo "conformance/java: no 'mvn' on PATH: install Apache Maven 3.6.3 or later (Debian: apt-get install maven)" >&2
    exit 2
fi

if [[ -n "${CAUSET_BIN:-}" && ! -x "$CAUSET_BIN" ]]; then
    echo "conformance/java: CAUSET_BIN=$CAUSET_BIN is not an executable" >&2
    exit 2
fi

# The server binary.
source "$here/../causet-bin.sh"
causet_bin conformance/java

# Maven's build output goes to target/conformance-java (set in pom.xml); the servers' data directories and logs go
# to a fresh directory of their own, with a file of the servers' pids so that none outlives this script.
build="$root/target/conformance-java"
mkdir -p "$build"
work="$(mktemp -d "${TMPDIR:-/tmp}/causet-conformance-java.XXXXXX")"
reports="$build/surefire-reports"
rm -rf "$reports"

mvn_args=(-q -B -Dstyle.color=never -f "$here/pom.xml" "-Dcauset.bin=$CAUSET_BIN" "-Dcauset.workdir=$work")
if [[ -n "${CAUSET_M2_REPO:-}" ]]; then
    mvn_args+=("-Dmaven.repo.local=$CAUSET_M2_REPO")
fi

mvn_pid=""
status=1
cleanup() {
    if [[ -n "$mvn_pid" ]] && kill -0 "$mvn_pid" 2>/dev/null; then
        kill -TERM "$mvn_pid" 2>/dev/null || true
        wait "$mvn_pid" 2>/dev/null || true
    fi
    # Servers of a test JVM that died without its shutdown hook (SIGKILL): only the pids it recorded, and only
    # while they still run this binary.
    if [[ -f "$work/pids" ]]; then
        while read -r pid; do
            [[ -n "$pid" ]] || continue
            if [[ "$(readlink "/proc/$pid/exe" 2>/dev/null || true)" == "$(readlink -f "$CAUSET_BIN")" ]]; then
                kill -TERM "$pid" 2>/dev/null || true
                for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
                kill -KILL "$pid" 2>/dev/null || true
            fi
        done < "$work/pids"
    fi
    if [[ "$status" -eq 0 && "${CAUSET_KEEP_WORK:-0}" != 1 ]]; then
        rm -rf "$work"
    else
        echo "== conformance/java: servers' data and logs kept in $work" >&2
    fi
}
trap cleanup EXIT
trap 'status=143; exit 143' TERM
trap 'status=130; exit 130' INT

echo "== conformance/java: testing $CAUSET_BIN"
# Maven 3.8's console prints stray ANSI resets even in batch mode: its output goes through sed, which strips escape
# sequences. Maven runs in the background so that a SIGTERM or Ctrl-C to this script stops it (see cleanup).
exec 3> >(sed -u 's/\x1b\[[0-9;]*m//g')
sed_pid=$!
mvn "${mvn_args[@]}" "$@" test >&3 2>&3 &
mvn_pid=$!
set +e
wait "$mvn_pid"
status=$?
set -e
mvn_pid=""
exec 3>&-
for _ in $(seq 1 100); do kill -0 "$sed_pid" 2>/dev/null || break; sleep 0.05; done

# A closing line from Surefire's reports: Maven's quiet mode prints nothing when every test passes.
if compgen -G "$reports/TEST-*.xml" >/dev/null; then
    read -r tests failures errors skipped < <(
        sed -n 's/.*<testsuite \(.*\)>.*/\1/p' "$reports"/TEST-*.xml | awk '
            { for (i = 1; i <= NF; i++) { split($i, kv, "="); gsub(/"/, "", kv[2]); v[kv[1]] += kv[2] } }
            END { printf "%d %d %d %d\n", v["tests"], v["failures"], v["errors"], v["skipped"] }')
    passed=$((tests - failures - errors - skipped))
    echo "conformance/java: $passed passed, $((failures + errors)) failed, $skipped skipped"
    if [[ "$status" -ne 0 && $((failures + errors)) -gt 0 ]]; then
        echo "conformance/java: reports in $reports" >&2
    fi
else
    echo "conformance/java: no test reports (Maven failed before running tests)" >&2
fi
exit "$status"
