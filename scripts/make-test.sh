#!/usr/bin/env bash
# `make test`'s stages: the cargo tests, the Python package, the kernel
# matrix. Every stage runs even when an earlier one failed, so that one CI
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

# A hung test ends the run after TEST_TIMEOUT instead of holding CI until
# its own limit; libtest has already named it ("has been running for over
# 60 seconds"). --no-fail-fast: one failing binary must not hide the others.
# shellcheck disable=SC2086 # CARGO_FLAGS is a list of flags
stage cargo timeout --signal=INT --kill-after=30s "$TEST_TIMEOUT" "$CARGO" test $CARGO_FLAGS --no-fail-fast
stage python make --no-print-directory test-python
stage kernels make --no-print-directory test-kernels KERNELS="${TEST_KERNELS:-}" IRQLAB_SMOKE_ONLY="${TEST_SMOKE:-}"

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
exit 1
