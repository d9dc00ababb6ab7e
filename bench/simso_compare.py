#!/usr/bin/env python3
"""irqlab's simulator against SimSo on the same task set, in one run.

The set: 10 periodic tasks, implicit deadlines, rate-monotonic priorities,
periods 5-100 ms, U = 0.8, no interrupts, zero scheduling costs. SimSo
(PyPI `simso`, Chéramy et al.) runs it for --simso-seconds of simulated
time and is timed around `Model.run_model()` alone; irqlab runs it for
--irqlab-seconds and is timed as a whole process (`irqlab sim`, start-up,
scenario parsing and JSON output included). The figure is jobs simulated
per wall second, each the median of --rounds runs, and their ratio. Both
must agree on the jobs and deadline misses over the horizon they share.

Usage: bench/simso_compare.py [--irqlab target/release/irqlab] [--json FILE]
(`make bench` runs it after `scripts/install-bench-deps.sh`.)
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

# (name, period ms, wcet ms): U = 10 x 0.08 = 0.8.
TASKS = [(f"t{i}", p, round(0.08 * p, 3)) for i, p in enumerate([5, 8, 10, 16, 20, 25, 40, 50, 80, 100], start=1)]


def irqlab_scenario(path):
    lines = [
        'name = "rm10"',
        'description = "10 periodic tasks, rate-monotonic, U = 0.8, no interrupts, zero costs (bench/simso_compare.py)"',
        "[machine]",
        "hz = 100",
        'softirq = "threaded"',
        'scheduler = "cfs"',
        "[machine.costs]",
        'irq_entry = "0ns"',
        'irq_exit = "0ns"',
        'tick = "0ns"',
        'context_switch = "0ns"',
        "[run]",
        'duration = "1s"',
        "seed = 1",
    ]
    for rank, (name, period, wcet) in enumerate(TASKS):
        lines += [
            "[[task]]",
            f'name = "{name}"',
            'kind = "periodic"',
            'policy = "fifo"',
            f"priority = {90 - rank}",  # rate-monotonic: shorter period, higher priority
            f'period = "{period}ms"',
            f'exec = "{wcet}ms"',
        ]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def run_irqlab(binary, scenario, seconds):
    start = time.perf_counter()
    out = subprocess.run([binary, "sim", scenario, "--duration", f"{seconds}s", "--json", "-"], check=True, capture_output=True)
    wall = time.perf_counter() - start
    doc = json.loads(out.stdout)
    tasks = [t for t in doc["tasks"] if t["name"] in {n for n, _, _ in TASKS}]
    return wall, sum(t["jobs"] for t in tasks), sum(t["deadline_misses"] for t in tasks), doc["events"]


def run_simso(seconds):
    from simso.configuration import Configuration
    from simso.core import Model

    config = Configuration()
    config.duration = int(seconds * 1000 * config.cycles_per_ms)
    for ident, (name, period, wcet) in enumerate(TASKS, start=1):
        config.add_task(name=name, identifier=ident, period=period, activation_date=0, wcet=wcet, deadline=period)
    config.add_processor(name="CPU 1", identifier=1)
    config.scheduler_info.clas = "simso.schedulers.RM"
    config.check_all()
    model = Model(config)
    start = time.perf_counter()
    model.run_model()
    wall = time.perf_counter() - start
    # Jobs released in [0, horizon), as irqlab counts them (SimSo also
    # records the release at the horizon itself).
    jobs = [job for task in model.results.tasks.values() for job in task.jobs if job.activation_date < config.duration]
    misses = sum(1 for job in jobs if job.exceeded_deadline)
    return wall, len(jobs), misses


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--irqlab", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "irqlab"))
    ap.add_argument("--irqlab-seconds", type=float, default=1000.0, help="simulated seconds per irqlab run")
    ap.add_argument("--simso-seconds", type=float, default=20.0, help="simulated seconds per SimSo run")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    try:
        import simso  # noqa: F401
    except ImportError:
        sys.exit("error: SimSo is not installed (scripts/install-bench-deps.sh installs it from PyPI)")

    with tempfile.TemporaryDirectory() as tmp:
        scenario = os.path.join(tmp, "rm10.toml")
        irqlab_scenario(scenario)
        # Same horizon first: both simulators must agree on what happened.
        _, jobs_i, miss_i, _ = run_irqlab(args.irqlab, scenario, args.simso_seconds)
        _, jobs_s, miss_s = run_simso(args.simso_seconds)
        agree = jobs_i == jobs_s and miss_i == miss_s
        irq_rates, simso_rates, events = [], [], 0
        for _ in range(args.rounds):
            wall, jobs, _, events = run_irqlab(args.irqlab, scenario, args.irqlab_seconds)
            irq_rates.append(jobs / wall)
            wall, jobs, _ = run_simso(args.simso_seconds)
            simso_rates.append(jobs / wall)

    irq, sim = statistics.median(irq_rates), statistics.median(simso_rates)
    doc = {
        "schema": "irqlab/bench-simso/v1",
        "task_set": [{"name": n, "period_ms": p, "wcet_ms": e} for n, p, e in TASKS],
        "same_horizon": {"seconds": args.simso_seconds, "irqlab_jobs": jobs_i, "simso_jobs": jobs_s,
                         "irqlab_misses": miss_i, "simso_misses": miss_s, "agree": agree},
        "irqlab_jobs_per_s": irq_rates,
        "simso_jobs_per_s": simso_rates,
        "irqlab_events_per_run": events,
        "ratio_median": irq / sim,
    }
    print(f"same {args.simso_seconds:g} s horizon: irqlab {jobs_i} jobs / {miss_i} misses, SimSo {jobs_s} jobs / {miss_s} misses"
          f" ({'agree' if agree else 'DISAGREE'})")
    print(f"irqlab: {irq:,.0f} jobs/s (whole process, {args.irqlab_seconds:g} s simulated; runs {', '.join(f'{r:,.0f}' for r in irq_rates)})")
    print(f"SimSo:  {sim:,.0f} jobs/s (run_model alone, {args.simso_seconds:g} s simulated; runs {', '.join(f'{r:,.0f}' for r in simso_rates)})")
    print(f"ratio (medians): {irq / sim:,.0f}x")
    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, args.json)
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
