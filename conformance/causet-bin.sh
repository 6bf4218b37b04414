# Sourced by the conformance suites' run.sh scripts (Python, Java, JavaScript): `causet_bin SUITE` sets and exports
# CAUSET_BIN, the causet binary under test. When the caller's environment names none, it builds one with
# `cargo build -p causet --locked` in the repository ($root, set by the caller) and uses
# ${CARGO_TARGET_DIR:-target}/debug/causet; a binary that is missing or not executable ends the run (status 2).
causet_bin() {
    local suite="$1"
    if [[ -z "${CAUSET_BIN:-}" ]]; then
        echo "== $suite: building causet"
        (cd "$root" && cargo build -p causet --locked)
        local target="${CARGO_TARGET_DIR:-$root/target}"
        [[ "$target" = /* ]] || target="$root/$target"
        CAUSET_BIN="$target/debug/causet"
    fi
    if [[ ! -x "$CAUSET_BIN" ]]; then
        echo "$suite: no causet binary at $CAUSET_BIN" >&2
        exit 2
    fi
    export CAUSET_BIN
}
