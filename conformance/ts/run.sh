#!/usr/bin/env bash
# Runs the TypeScript/JavaScript client-conformance suite: AntidoteDB's published `antidote_ts_client` (npm)
# against `causet start` servers. Exits non-zero if any test fails.
#
# Environment:
#   CAUSET_BIN   the causet binary to test (absolute, or relative to the current directory); when unset,
#                `cargo build -p causet --locked` builds one and ${CARGO_TARGET_DIR:-target}/debug/causet is used.
# Needs Node.js 20 or later and npm. `npm ci` installs the pinned client into conformance/ts/node_modules when it
# is missing or package-lock.json changed (a stamp in node_modules holds the lock file's hash).
# Extra arguments go to `node --test`, e.g. `conformance/ts/run.sh --test-name-pattern=counter`.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
if [[ -n "${CAUSET_BIN:-}" && "$CAUSET_BIN" != /* ]]; then
    CAUSET_BIN="$PWD/$CAUSET_BIN"
fi
cd "$root"

for tool in node npm; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "conformance/ts: '$tool' is not on PATH; install Node.js 20 or later (with npm)" >&2
        exit 2
    fi
done
if ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)'; then
    echo "conformance/ts: Node.js $(node --version) is too old; the suite needs Node.js 20 or later" >&2
    exit 2
fi

if [[ -n "${CAUSET_BIN:-}" && ! -x "$CAUSET_BIN" ]]; then
    echo "conformance/ts: CAUSET_BIN=$CAUSET_BIN is not an executable" >&2
    exit 2
fi

# The client: installed once with `npm ci`, reinstalled when package-lock.json changes.
lock="$here/package-lock.json"
stamp="$here/node_modules/.causet-package-lock.sha256"
wanted="$(node -e 'const c = require("crypto"), fs = require("fs");
process.stdout.write(c.createHash("sha256").update(fs.readFileSync(process.argv[1])).digest("hex"))' "$lock")"
if [[ ! -d "$here/node_modules" || ! -f "$stamp" || "$(cat "$stamp")" != "$wanted" ]]; then
    echo "== conformance/ts: installing the client (npm ci) in $here/node_modules"
    (cd "$here" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    echo "$wanted" > "$stamp"
fi

# The server binary.
source "$here/../causet-bin.sh"
causet_bin conformance/ts

echo "== conformance/ts: testing $CAUSET_BIN"
cd "$here"
exec node --test "$@" tests/*.test.js
