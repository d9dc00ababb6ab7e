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
  for f in examples/*.toml; do
    name=$(basename "$f" .toml)
    "$IRQLAB" analyze "$f" --json "$OUT/analysis-$name.json" --html "$OUT/analysis-$name.html"
  done
  "$IRQLAB" bound --period 7ns --wcet 2ns --from 1ns --to 60ns --svg "$OUT/bound-p7-e2.svg"
}

STEPS=(step_analysis)

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
