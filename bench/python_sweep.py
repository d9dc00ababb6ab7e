#!/usr/bin/env python3
"""The Python package's sweep on each backend, and its per-run overhead.

200 runs of a shipped scenario (the BH-threshold flood, 0.5 s simulated
each: a 10 x 10 grid of the controller's gain and window x 2 seeds) on the
serial, processes and local-Ray backends, as runs per wall second; and the
same single run through `irqlab.simulate` and through `irqlab sim --json`
(a process per run, as a shell loop would), median of --rounds, to give the
Python layer's overhead per run. Run by `make bench` from .venv/python.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import irqlab

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SCENARIO = os.path.join(ROOT, "scenarios", "bh-threshold", "flood-bh-scheduler.toml")
GRID = {"policy.gain": [round(0.05 * k, 2) for k in range(1, 11)], "policy.window": [10 * k for k in range(1, 11)]}


def timed(f):
    start = time.perf_counter()
    out = f()
    return time.perf_counter() - start, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--irqlab", default=os.path.join(ROOT, "target", "release", "irqlab"))
    ap.add_argument("--duration", default="0.5s")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()

    runs = {}
    reference = None
    for backend in ["serial", "processes", "ray"]:
        wall, df = timed(lambda: irqlab.sweep(SCENARIO, GRID, seeds=[1, 2], duration=args.duration, backend=backend))
        runs[backend] = {"runs": len(df), "wall_s": wall, "runs_per_s": len(df) / wall}
        reference = df if reference is None else reference
        runs[backend]["same_rows_as_serial"] = bool(df.equals(reference))
        print(f"{backend:9}: {len(df)} runs in {wall:.2f} s = {len(df) / wall:.1f} runs/s")

    py, cli = [], []
    for _ in range(args.rounds):
        py.append(timed(lambda: irqlab.simulate(SCENARIO, seed=1, duration=args.duration))[0])
        cli.append(timed(lambda: json.loads(subprocess.run([args.irqlab, "sim", SCENARIO, "--seed", "1", "--duration", args.duration, "--json", "-"],
                                                           check=True, capture_output=True).stdout))[0])
    py_s, cli_s = statistics.median(py), statistics.median(cli)
    print(f"one run: irqlab.simulate {py_s * 1e3:.1f} ms, irqlab sim (process) {cli_s * 1e3:.1f} ms: Python layer {100 * (py_s / cli_s - 1):+.1f}%")
    doc = {"schema": "irqlab/bench-python/v1", "backends": runs, "simulate_ms": py_s * 1e3, "cli_ms": cli_s * 1e3,
           "overhead_pct": 100 * (py_s / cli_s - 1), "cpus": os.cpu_count()}
    if args.json:
        with open(args.json + ".tmp", "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(args.json + ".tmp", args.json)
    return 0 if all(r["same_rows_as_serial"] for r in runs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
