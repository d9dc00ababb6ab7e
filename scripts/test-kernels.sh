#!/usr/bin/env bash
# The kernel matrix: boots each kernel with `irqlab lab run` and runs the
# live smoke suite (tests/kernels/smoke.py) inside, then writes the support
# table (docs/kernel-support.md, and README's copy between its markers).
#   KERNELS="debian:6.1-rt debian:6.12-rt" scripts/test-kernels.sh
# Guests run under emulation on a machine without usable KVM: the suite
# tests function there, never timing. Exit 1 if any check failed.
set -uo pipefail
cd "$(dirname "$0")/.."
KERNELS=${KERNELS:-debian:6.1 debian:6.1-rt debian:6.12 debian:6.12-rt}
OUT=${OUT:-out}/kernels
CARGO=${CARGO:-cargo}
mkdir -p "$OUT"

# The live tests the suite runs inside, built here (the guest sees this
# checkout read-only): name -> executable.
# lab_live, reboot_live and recommended_boot_live run on the host (below), not inside.
tests=(accounting_live page_chromium control_idletime root_domain_live sched_knobs_live lab_live reboot_live recommended_boot_live)
args=()
for t in "${tests[@]}"; do args+=(--test "$t"); done
$CARGO test --release --quiet -p irqlab-measure -p irqlab-survey -p irqlab-cli "${args[@]}" --no-run --message-format=json 2>/dev/null \
  | python3 -c '
import json, sys
out = {}
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        out[m["target"]["name"]] = m["executable"]
json.dump(out, sys.stdout)' > "$OUT/binaries.json" || { echo "error: building the live tests failed" >&2; exit 1; }

# A block device for the checks that need a disk.
disk="$OUT/disk.img"
truncate -s 1G "$disk"  # sparse; the idletime test writes 320 MiB of data files

# Whether a results file exists and its suite ran to the end.
complete() {
  [ -f "$1" ] && python3 -c 'import json,sys; sys.exit(not json.load(open(sys.argv[1])).get("complete"))' "$1"
}

status=0
for k in $KERNELS; do
  slug=${k//:/-}
  echo "== $k" >&2
  rm -f "$OUT/$slug/results.json"
  smoke() {
    target/release/irqlab lab run --kernel "$k" --disk "$disk" --timeout 30min --stall 5min -- \
      python3 tests/kernels/smoke.py --irqlab target/release/irqlab --binaries "$OUT/binaries.json" --out "$OUT/$slug" "$@"
  }
  smoke
  # A guest that ended in the middle of the suite (the emulated machine
  # died: no status came back; or it livelocked: nothing printed for 5 min,
  # --stall) gets one more guest for the checks left; the
  # results name the check it ended in. A check's own failure is not rerun.
  if ! complete "$OUT/$slug/results.json"; then
    echo "warning: $k: the guest ended before the suite did; running the checks left in a new guest" >&2
    smoke --resume
  fi
  if ! complete "$OUT/$slug/results.json"; then
    echo "error: $k: the suite did not complete" >&2
    status=1
  elif ! python3 -c 'import json,sys; sys.exit(any(r["outcome"] == "fail" for r in json.load(open(sys.argv[1]))["results"]))' "$OUT/$slug/results.json"; then
    status=1
  fi
done
# Two kernels' surveys on one page (`lab compare`), then that page in
# headless Chromium (the survey page's browser test, pointed at it).
if [[ " $KERNELS " == *" debian:6.1-rt "* && " $KERNELS " == *" debian:6.12-rt "* ]]; then
  echo "== lab compare debian:6.1-rt debian:6.12-rt" >&2
  rm -rf "$OUT/compare"
  if target/release/irqlab lab compare --stall 5min --kernel debian:6.1-rt --kernel debian:6.12-rt --out "$OUT/compare" -- survey --quick; then
    chromium_test=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["page_chromium"])' "$OUT/binaries.json")
    IRQLAB_LIVE_TESTS=1 IRQLAB_COMPARE_PAGE="$OUT/compare/index.html" IRQLAB_COMPARE_KERNELS=debian:6.1-rt,debian:6.12-rt \
      "$chromium_test" --exact the_lab_compare_page_loads_in_chromium_without_errors || status=1
  else
    echo "error: lab compare failed" >&2; status=1
  fi
fi
# On the host: a guest dies with its `lab run` (kill -9), or, its watchdog
# killed too, is named by `control status` and ended by `revert --all`.
first_kernel=${KERNELS%% *}
echo "== lab run kill -9 ($first_kernel)" >&2
lab_live=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["lab_live"])' "$OUT/binaries.json")
IRQLAB_LIVE_TESTS=1 IRQLAB_LAB_KERNEL="$first_kernel" "$lab_live" --nocapture || { echo "error: the lab run kill -9 test failed" >&2; status=1; }
# On the host: `control install` meets real boots: a Debian root with
# systemd as init (make lab-root) booted three times by `lab run --root`
# (install; reboot: every setting in force, uninstall; reboot: defaults).
# A PREEMPT_RT kernel of the matrix: the profile sets an IRQ thread.
# REBOOT_TEST=0 (make test's kernels stage) leaves it out.
reboot_kernel=$first_kernel
for k in $KERNELS; do [[ $k == *-rt ]] && reboot_kernel=$k; done
if [ "${REBOOT_TEST:-1}" = 0 ]; then
  echo "== control install across reboots: left out (REBOOT_TEST=0; make test-kernels runs it)" >&2
elif lab_root=$(scripts/install-lab-root.sh); then
  echo "== control install across reboots ($reboot_kernel, systemd root)" >&2
  reboot_live=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["reboot_live"])' "$OUT/binaries.json")
  IRQLAB_LIVE_TESTS=1 IRQLAB_LAB_KERNEL="$reboot_kernel" IRQLAB_LAB_ROOT="$lab_root" "$reboot_live" --nocapture --test-threads=1 \
    || { echo "error: the reboot test failed" >&2; status=1; }
else
  echo "error: no lab root (scripts/install-lab-root.sh failed)" >&2; status=1
fi
# On the host: the survey's boot recommendation booted and its prediction
# checked (`lab compare --recommended-boot`: two guests per kernel), on the
# 6.12 kernels of the matrix. Only with the reboot test (REBOOT_TEST).
if [ "${REBOOT_TEST:-1}" != 0 ]; then
  recommended_boot=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["recommended_boot_live"])' "$OUT/binaries.json")
  for k in $KERNELS; do
    [[ $k == debian:6.12* ]] || continue
    echo "== the recommended boot options, booted ($k)" >&2
    IRQLAB_LIVE_TESTS=1 IRQLAB_LAB_KERNEL="$k" "$recommended_boot" --nocapture || { echo "error: $k: the recommended boot test failed" >&2; status=1; }
  done
fi
python3 scripts/kernel-table.py "$OUT" docs/kernel-support.md README.md || status=1
exit $status
