#!/usr/bin/env bash
# `make demo`: runs irqlab's main jobs with short durations and writes a
# report under $OUT (default out/). Each capability adds one step function
# below and registers it in STEPS; a step that needs privileges it does not
# have says so and is skipped, the rest still run.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
IRQLAB=${IRQLAB:-target/release/irqlab}
mkdir -p "$OUT"

step_analysis() {
  # Schedulability analysis (issue 2). `analyze` exits 1 for a task set that
  # is not schedulable, as section5-foreground is meant to be: only exit
  # codes above 1 are failures of the step.
  local rc=0 code
  for f in examples/*.toml; do
    name=$(basename "$f" .toml)
    "$IRQLAB" analyze "$f" --json "$OUT/analysis-$name.json" --html "$OUT/analysis-$name.html"
    code=$?
    [ "$code" -le 1 ] || rc=1
  done
  "$IRQLAB" bound --period 7ms --wcet 2ms --from 0.5ms --to 60ms --svg "$OUT/bound-p7-e2.svg" || rc=1
  "$IRQLAB" fit examples/curve-nic.json --baseline examples/curve-baseline.csv \
    --json "$OUT/fit-curve-nic.json" --svg "$OUT/fit-curve-nic.svg" || rc=1
  return $rc
}

step_accounting() {
  # Per-process interrupt accounting with BPF (issue 7): who is being
  # robbed, then the process-aware paper's Fig. 6 on the testbed. Needs
  # root (CAP_BPF, CAP_PERFMON, CAP_NET_ADMIN, CAP_SYS_NICE): skipped without.
  if [ "$(id -u)" -ne 0 ]; then echo "   skipped: needs root for BPF and the testbed" >&2; return 0; fi
  "$IRQLAB" measure accounting --duration 3s --check --top 15 \
    --json "$OUT/accounting.json" --prometheus "$OUT/accounting.prom" || return 1
  "$IRQLAB" measure accounting --fig6 --duration 2s --rates 5000,20000,50000 \
    --json "$OUT/accounting-fig6.json"
}

STEPS=(step_analysis step_accounting)

failed=0
for step in "${STEPS[@]}"; do
  echo "== ${step#step_}" >&2
  if ! "$step"; then
    echo "   step ${step#step_} failed" >&2
    failed=1
  fi
done

{
  echo '<!doctype html><meta charset="utf-8"><title>irqlab demo</title>'
  echo '<h1>irqlab demo</h1><ul>'
  for f in "$OUT"/*.html "$OUT"/*.svg; do
    [ -e "$f" ] || continue
    b=$(basename "$f"); [ "$b" = index.html ] && continue
    echo "<li><a href=\"$b\">$b</a></li>"
  done
  echo '</ul>'
} > "$OUT/index.html.tmp" && mv "$OUT/index.html.tmp" "$OUT/index.html"
echo "report: $OUT/index.html" >&2
exit $failed
