#!/usr/bin/env bash
# `make test`'s stages: the cargo tests, the Python package, whether they
# left the machine as they found it, the kernel matrix. Every stage runs even when an earlier one failed, so that one CI
# run shows every failure; each stage's output is kept in $OUT/logs, and the
# failed tests' panic messages are repeated at the end, where a log cut in
# its middle (a CI summary keeps the head and the tail) still shows them.
set -uo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-out}
CARGO=${CARGO:-cargo}
CARGO_FLAGS=${CARGO_FLAGS:---release --workspace}
TEST_TIMEOUT=${TEST_TIMEOUT:-40m}
mkdir -p "$OUT/logs"

failed=()
stage() {
    local name=$1
    shift
    echo "== make test: $name (log: $OUT/logs/test-$name.log)"
    "$@" 2>&1 | tee "$OUT/logs/test-$name.log"
    local rc=${PIPESTATUS[0]}
    if [ "$rc" -ne 0 ]; then
        failed+=("$name (exit $rc)")
    fi
}

# The machine's controllable state before any test runs, for the
# machine-state stage to compare with after the live suites (`irqlab
# doctor --snapshot`/`--diff`, `irqlab_host::machine_state`). The binary is
# built first: in a fresh clone nothing is, and the cargo stage's build of
# the same flags reuses this one.
profile=debug
[[ " $CARGO_FLAGS " == *" --release "* ]] && profile=release
IRQLAB_BIN=${CARGO_TARGET_DIR:-target}/$profile/irqlab
BEFORE=$OUT/logs/machine-state-before.json
rm -f "$BEFORE"
snapshot_before() {
    # shellcheck disable=SC2086 # CARGO_FLAGS is a list of flags
    "$CARGO" build $CARGO_FLAGS --bin irqlab && "$IRQLAB_BIN" doctor --snapshot "$BEFORE"
}
stage machine-state-before snapshot_before

# A hung test ends the run after TEST_TIMEOUT instead of holding CI until
# its own limit; libtest has already named it ("has been running for over
# 60 seconds"). --no-fail-fast: one failing binary must not hide the others.
# shellcheck disable=SC2086 # CARGO_FLAGS is a list of flags
stage cargo timeout --signal=INT --kill-after=30s "$TEST_TIMEOUT" "$CARGO" test $CARGO_FLAGS --no-fail-fast
stage python make --no-print-directory test-python
# Every live test leaves the machine as it found it (the kernels stage
# runs in guests, so it is not part of this). A difference names the
# object and both values; threads and IRQs that came or went are none.
machine_state() {
    if [ ! -f "$BEFORE" ]; then
        echo "no snapshot from before the tests ($BEFORE): see test-machine-state-before.log"
        return 1
    fi
    "$IRQLAB_BIN" doctor --diff "$BEFORE" --json "$OUT/logs/machine-state-diff.json"
}
stage machine-state machine_state
# The reboot test of `control install` (10 min) only in `make test-kernels`.
stage kernels make --no-print-directory test-kernels KERNELS="${TEST_KERNELS:-}" IRQLAB_SMOKE_ONLY="${TEST_SMOKE:-}" REBOOT_TEST=0

if [ ${#failed[@]} -eq 0 ]; then
    echo "== make test: every stage passed"
    exit 0
fi

echo
echo "== make test: failed: ${failed[*]}"
# Each failed Rust test: its name, then its panic message (lines cut at
# 2,000 characters: a message may carry a whole JSON point).
if [ -f "$OUT/logs/test-cargo.log" ]; then
    awk '
        /^---- .* stdout ----$/ { name = $0; next }
        /panicked at/ { print name; grab = 1 }
        grab && /^$/ { grab = 0; print ""; next }
        grab { print substr($0, 1, 2000) }
        /^error: [0-9]+ targets? failed:/ { tail = 1 }
        tail { print }
    ' "$OUT/logs/test-cargo.log"
fi
# What the tests left changed on the machine, where the tail shows it.
if [[ " ${failed[*]} " == *" machine-state (exit "* ]]; then
    echo "== machine-state: changed since $BEFORE"
    cat "$OUT/logs/test-machine-state.log"
fi
exit 1
