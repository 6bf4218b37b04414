#!/usr/bin/env bash
# Runs the AntidoteDB client-conformance suite: the published `antidotedb` Python client (and raw frames of
# AntidoteDB's protocol) against a `causet start` server. Exits non-zero if any test fails.
#
# Environment:
#   CAUSET_BIN       the causet binary to test; when unset, `cargo build -p causet` builds one.
#   CAUSET_PY_VENV   where the virtualenv lives [default: target/conformance-venv]; it is created when missing and
#                    refreshed when requirements.txt changes.
#   PYTHON           the interpreter that creates the virtualenv [default: python3, 3.9 or later].
# Extra arguments go to pytest, e.g. `conformance/run.sh -k counter -x`.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
if [[ -n "${CAUSET_BIN:-}" && "$CAUSET_BIN" != /* ]]; then
    CAUSET_BIN="$PWD/$CAUSET_BIN"
fi
cd "$root"

python="${PYTHON:-python3}"
venv="${CAUSET_PY_VENV:-$root/target/conformance-venv}"
requirements="$here/requirements.txt"

if ! "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 9) else 1)' 2>/dev/null; then
    echo "conformance: $python is missing or older than Python 3.9 (set PYTHON)" >&2
    exit 2
fi

if [[ -n "${CAUSET_BIN:-}" && ! -x "$CAUSET_BIN" ]]; then
    echo "conformance: CAUSET_BIN=$CAUSET_BIN is not an executable" >&2
    exit 2
fi

# The virtualenv: created once, reinstalled when requirements.txt changes (a stamp holds its hash).
stamp="$venv/.requirements.sha256"
wanted="$("$python" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$requirements")"
if [[ ! -x "$venv/bin/python" || ! -f "$stamp" || "$(cat "$stamp")" != "$wanted" ]]; then
    echo "== conformance: preparing the virtualenv in $venv"
    if [[ -e "$venv" && ! -f "$venv/pyvenv.cfg" ]]; then
        echo "conformance: $venv exists and is not a virtualenv; refusing to replace it" >&2
        exit 2
    fi
    rm -rf "$venv"
    if ! "$python" -m venv "$venv"; then
        echo "conformance: '$python -m venv' failed (on Debian/Ubuntu: apt-get install python3-venv)" >&2
        exit 2
    fi
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
    echo "$wanted" > "$stamp"
fi

# The server binary.
source "$here/causet-bin.sh"
causet_bin conformance

echo "== conformance: testing $CAUSET_BIN"
# Bytecode stays out of the source tree; the client's old generated code needs the pure-Python protobuf runtime
# only with protobuf 4+, which requirements.txt excludes, but the setting keeps a stray newer protobuf working.
export PYTHONDONTWRITEBYTECODE=1
export PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python
exec "$venv/bin/python" -m pytest -c "$here/pytest.ini" --rootdir "$here" "$@"
