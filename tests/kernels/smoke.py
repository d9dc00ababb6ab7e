#!/usr/bin/env python3
"""The kernel matrix's live smoke suite, run as root inside an `irqlab lab run`
guest by scripts/test-kernels.sh (never on the host: it changes the machine).

Each check runs real irqlab commands (or one of the live tests' binaries,
filtered to one test) and records pass / fail / n/a with what it saw.
"n/a" is reserved for a feature this kernel lacks *and* `irqlab doctor`
says so; a check that doctor calls ready and that fails is a failure: that
is the promise "doctor yes means it runs". Timings in an emulated guest
are not this hardware's: the checks test function, never speed.

Writes OUT/results.json and ends with "N passed, N failed".
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

IRQLAB = None
RESULTS = []


def sh(args, timeout=180, **kw):
    """Runs a command; returns (exit status, stdout, stderr)."""
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kw)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        return 124, e.stdout or "", f"timed out after {timeout} s"


def tail(text, n=6):
    """The lines that say why, first: the program's own `error:` line (the
    support table shows a failure's first line), then its last lines."""
    lines = [l for l in (text or "").splitlines() if l.strip()]
    errors = [l for l in lines if l.lstrip().startswith("error") or "Too large" in l or "panicked" in l]
    return "\n".join(errors[:1] + lines[-n:])


def record(name, outcome, detail, started):
    RESULTS.append({"check": name, "outcome": outcome, "detail": detail, "seconds": round(time.time() - started, 1)})
    lines = detail.splitlines() if detail else [""]
    # A failure prints its whole detail: CI shows only this output.
    shown = lines if outcome == "fail" else lines[:1]
    print(f"[{outcome:>4}] {name}: " + "\n         ".join(shown), flush=True)


def power_off_if_asked(check_name):
    """The suite's own test of a guest that dies in a check (resume in
    scripts/test-kernels.sh): IRQLAB_SMOKE_POWER_OFF_IN=CHECK powers the
    guest off when CHECK starts, once per marker file (the resumed suite
    runs it)."""
    marker = os.environ.get("IRQLAB_SMOKE_POWER_OFF_MARKER", "")
    if os.environ.get("IRQLAB_SMOKE_POWER_OFF_IN") == check_name and marker and not os.path.exists(marker):
        open(marker, "w").close()
        with open("/proc/sysrq-trigger", "w") as f:
            f.write("o")
        time.sleep(120)


def check(name):
    def wrap(fn):
        def run(*a):
            started = time.time()
            power_off_if_asked(fn.__name__)
            try:
                outcome, detail = fn(*a)
            except Exception as e:  # a check's own bug is a failure, named
                outcome, detail = "fail", f"{type(e).__name__}: {e}"
            record(name, outcome, detail, started)
        run.__name__ = fn.__name__
        run.check_name = name
        return run
    return wrap


def doctor_row(doctor, command):
    for row in doctor.get("commands", []):
        if row["command"] == command:
            return row
    return None


@check("doctor")
def check_doctor(state):
    code, out, err = sh([IRQLAB, "doctor", "--json", "-"])
    if code not in (0, 1):
        return "fail", f"exit {code}: {tail(err)}"
    doc = json.loads(out)
    state["doctor"] = doc
    missing = [f"{r['command']}: {r['missing']}" for r in doc["commands"] if r.get("missing")]
    return "pass", f"{len(doc['commands'])} commands, {len(missing)} not ready" + ("; " + "; ".join(missing) if missing else "")


@check("measure accounting 2s")
def check_accounting(state):
    row = doctor_row(state["doctor"], "measure accounting")
    code, out, err = sh([IRQLAB, "measure", "accounting", "--duration", "2s", "--json", "-"])
    if code != 0:
        if row and row.get("missing"):
            return "n/a", f"doctor: {row['missing']}"
        return "fail", f"exit {code} while doctor calls it ready: {tail(err)}"
    doc = json.loads(out)
    if doc.get("schema") != "irqlab/accounting/v1" or not doc.get("tasks"):
        return "fail", f"schema {doc.get('schema')}, {len(doc.get('tasks', []))} task rows"
    if "lab" not in doc:
        return "fail", "the document has no lab block"
    for cpu in doc["cpus"]:
        parts = cpu["run_ns"] + cpu["idle_ns"] + cpu["hardirq_ns"] + cpu["softirq_ns"] + cpu.get("unaccounted_ns", 0)
        if abs(parts - cpu["wall_ns"]) > cpu["wall_ns"] // 100:
            return "fail", f"CPU {cpu['cpu']}: run+idle+irq+softirq = {parts} ns against wall {cpu['wall_ns']} ns"
    return "pass", f"{len(doc['tasks'])} task rows; per-CPU parts sum to wall time"


@check("probe (measure interference 1s)")
def check_probe(state):
    code, out, err = sh([IRQLAB, "measure", "interference", "--duration", "1s", "--json", "-"])
    if code != 0:
        return "fail", f"exit {code}: {tail(err)}"
    doc = json.loads(out)
    if doc.get("schema") != "irqlab/curve/v1":
        return "fail", f"schema {doc.get('schema')}"
    # The gap-source monitor (issue 43) must pass this kernel's verifier;
    # a probe without it still runs, so only the document tells.
    sources = doc.get("sources", {})
    if not sources.get("available"):
        return "fail", f"schema {doc['schema']}; gap sources unavailable: {sources.get('note')}"
    return "pass", f"schema {doc['schema']}; gap sources: {sources.get('note')}"


def max_us(doc):
    """The largest of a latency document's per-thread maxima, in us."""
    return max((t["latency"]["max_ns"] or 0) for t in doc["threads"]) // 1000


@check("measure latency beside rtla timerlat")
def check_latency(state):
    """Beside cyclictest too, waking at the same instants on every CPU
    (`--align`, `--secaligned -d 0`): both maxima shown, not compared (an
    emulated CPU's timing). Issue 52: irqlab's first sample was once set
    before its threads' set-up, ~30 ms late here against cyclictest's 40 us."""
    code, out, err = sh([IRQLAB, "measure", "latency", "--align", "--duration", "2s", "--json", "-"])
    if code != 0:
        return "fail", f"irqlab measure latency: exit {code}: {tail(err)}"
    doc = json.loads(out)
    ours = f"irqlab: {doc.get('schema')}, max {max_us(doc)} us"
    if shutil.which("cyclictest"):
        code, out_c, err_c = sh(["cyclictest", "-m", "-S", "-d", "0", "--secaligned", "-p", "80", "-i", "1000", "-D", "2s", "-q"], timeout=120)
        maxima = [int(line.split("Max:")[1].split()[0]) for line in out_c.splitlines() if "Max:" in line]
        ours += f"; cyclictest max {max(maxima)} us" if code == 0 and maxima else f"; cyclictest: exit {code}: {tail(out_c + err_c)}"
    if not shutil.which("rtla"):
        return "fail", f"{ours}; rtla is not installed (make lab-deps installs Debian's rtla)"
    tracers = open("/sys/kernel/tracing/available_tracers").read().split() if os.path.exists("/sys/kernel/tracing/available_tracers") else []
    if "timerlat" not in tracers:
        return "pass", f"{ours}; rtla timerlat n/a: this kernel has no timerlat tracer ({' '.join(tracers) or 'no tracefs'})"
    code, out, err = sh(["rtla", "timerlat", "top", "-d", "2s", "-q"], timeout=120)
    if code != 0 or "IRQ" not in out + err:
        return "fail", f"{ours}; rtla timerlat top: exit {code}: {tail(out + err)}"
    return "pass", f"{ours}; rtla timerlat ran: {tail(out, 1)}"


@check("watch beside rtla timerlat")
def check_watch(state):
    """`irqlab watch` (issue 52): its flight recorder loads on this kernel and
    every kept spike's sources add up to its late time; rtla timerlat runs
    beside it where the kernel has the tracer. The threshold is high (an
    emulated CPU wakes milliseconds late): this tests function, not timing."""
    watch = subprocess.Popen([IRQLAB, "watch", "--duration", "4s", "--threshold", "5ms", "--keep", "20", "--json", "-"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tracers = open("/sys/kernel/tracing/available_tracers").read().split() if os.path.exists("/sys/kernel/tracing/available_tracers") else []
    beside = "rtla timerlat n/a: this kernel has no timerlat tracer"
    if "timerlat" in tracers and shutil.which("rtla"):
        code, out, err = sh(["rtla", "timerlat", "top", "-d", "2s", "-q"], timeout=120)
        if code != 0 or "IRQ" not in out + err:
            watch.kill()
            return "fail", f"rtla timerlat top beside irqlab watch: exit {code}: {tail(out + err)}"
        beside = f"rtla timerlat ran beside it: {tail(out, 1)}"
    try:
        out, err = watch.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        watch.kill()
        return "fail", "irqlab watch did not end within 300 s of a 4 s run"
    if watch.returncode != 0:
        return "fail", f"irqlab watch: exit {watch.returncode}: {tail(err)}"
    doc = json.loads(out)
    if doc.get("schema") != "irqlab/watch/v1" or not doc.get("recorder", {}).get("available"):
        return "fail", f"schema {doc.get('schema')}; recorder: {doc.get('recorder')}"
    for s in doc["spikes"]:
        parts = sum(x["ns"] for x in s["cause"]["sources"])
        if parts != s["latency_ns"] or not s["cause"]["sources"]:
            return "fail", f"a spike of {s['latency_ns']} ns explained by sources adding up to {parts} ns: {s['cause']['verdict']}"
    return "pass", f"{doc['spikes_total']} spikes over 5 ms, each explained; {beside}"


@check("testbed up/down")
def check_testbed(state):
    code, out, err = sh([IRQLAB, "testbed", "up"])
    if code != 0:
        return "fail", f"up: exit {code}: {tail(err)}"
    code, out, err = sh([IRQLAB, "testbed", "down"])
    if code != 0:
        return "fail", f"down: exit {code}: {tail(err)}"
    code, out, _ = sh(["ip", "netns", "list"])
    if "irqlab-" in out:
        return "fail", f"namespaces left after down: {out.strip()}"
    return "pass", "up and down, nothing left"


def policy_of(pid):
    code, out, _ = sh(["chrt", "-p", str(pid)])
    return out


@check("control threads: kill -9, status, revert --all")
def check_threads_kill(state):
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        ctl = subprocess.Popen([IRQLAB, "control", "threads", f"pid:{sleeper.pid}", "--policy", "fifo:10"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.time() + 60
        while "SCHED_FIFO" not in policy_of(sleeper.pid) and time.time() < deadline:
            time.sleep(0.2)
        if "SCHED_FIFO" not in policy_of(sleeper.pid):
            ctl.kill()
            return "fail", f"the policy was never set: {policy_of(sleeper.pid).strip()}"
        ctl.send_signal(signal.SIGKILL)
        ctl.wait()
        code, status, err = sh([IRQLAB, "control", "status"])
        if str(sleeper.pid) not in status:
            return "fail", f"control status does not name the leftover: {tail(status + err)}"
        code, out, err = sh([IRQLAB, "control", "revert", "--all"])
        if code != 0:
            return "fail", f"revert --all: exit {code}: {tail(err)}"
        after = policy_of(sleeper.pid)
        if "SCHED_OTHER" not in after:
            return "fail", f"after revert: {after.strip()}"
        return "pass", "set SCHED_FIFO 10, killed, named by status, restored to SCHED_OTHER by revert --all"
    finally:
        sleeper.kill()


def irq_masks():
    """Every IRQ's (mask, delivery CPUs), and the default mask."""
    masks = {}
    for n in os.listdir("/proc/irq"):
        if n.isdigit():
            try:
                mask = open(f"/proc/irq/{n}/smp_affinity_list").read().strip()
                eff = open(f"/proc/irq/{n}/effective_affinity_list").read().strip()
            except OSError:
                continue
            masks[n] = (mask, eff)
    return masks, open("/proc/irq/default_smp_affinity").read().strip()


def mask_changes(before, after):
    (b, bd), (a, ad) = before, after
    changed = [f"IRQ {n} {b[n][0]} -> {a.get(n, ('gone',))[0]}" for n in b if n in a and a[n][0] != b[n][0]]
    if ad != bd:
        changed.append(f"default {bd} -> {ad}")
    moved = [n for n in b if n in a and a[n][1] != b[n][1]]
    return changed, moved


@check("control irq '*' default: held 2s, then kill -9, status, revert --all")
def check_irq(state):
    before = irq_masks()
    code, out, err = sh([IRQLAB, "control", "irq", "*", "default", "--cpus", "0", "--duration", "2s", "--json", "-"], timeout=240)
    if code != 0:
        return "fail", f"held 2s: exit {code}: {tail(err)}"
    changed, moved = mask_changes(before, irq_masks())
    if changed:
        return "fail", f"after the hold, masks not restored: {'; '.join(changed)}"
    moved_after_hold = len(moved)
    ctl = subprocess.Popen([IRQLAB, "control", "irq", "*", "default", "--cpus", "0"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while irq_masks()[1] == before[1] and time.time() < deadline and ctl.poll() is None:
        time.sleep(0.2)
    time.sleep(1)  # the IRQs after the default
    ctl.send_signal(signal.SIGKILL)
    ctl.wait()
    code, status, err = sh([IRQLAB, "control", "status"])
    if "LEFTOVER" not in status:
        return "fail", f"control status does not name the leftovers: {tail(status + err)}"
    code, out, err = sh([IRQLAB, "control", "revert", "--all"], timeout=240)
    if code != 0:
        return "fail", f"revert --all: exit {code}: {tail(err)}"
    changed, moved = mask_changes(before, irq_masks())
    if changed:
        return "fail", f"after kill -9 and revert, masks not restored: {'; '.join(changed)}"
    # Where in its mask the kernel delivers an IRQ is its choice: x86 keeps
    # an IRQ where it is when the mask written contains that CPU, and moves
    # some only when they next fire (irqlab asks for the old CPU first).
    return "pass", (f"{len(before[0])} IRQs and the default set to CPU 0 and restored, after the hold and after kill -9 + revert; "
                    f"delivered to another CPU of the restored mask: {moved_after_hold} after the hold, {len(moved)} after revert")


def journal_entries():
    """The control journal's entries (`control status --json -`): what
    irqlab has changed on this machine and not yet undone. None where the
    command failed."""
    code, out, _ = sh([IRQLAB, "control", "status", "--json", "-"])
    return json.loads(out)["entries"] if code == 0 else None


def governed(name, args, state, doctor_command):
    row = doctor_row(state["doctor"], doctor_command)
    code, out, err = sh([IRQLAB, "testbed", "up"])
    if code != 0:
        return "fail", f"testbed up: exit {code}: {tail(err)}"
    try:
        code, out, err = sh([IRQLAB, "control", *args, "--json", "-"], timeout=240)
        if code != 0:
            if row and row.get("missing"):
                return "n/a", f"doctor: {row['missing']}"
            return "fail", f"exit {code}: {tail(err)}"
        doc = json.loads(out)
        entries = journal_entries()
        left = "" if entries == [] else f"; control status after: {entries}"
        return ("pass" if not left else "fail"), f"{doc.get('schema')}, complete={doc.get('complete')}{left}"
    finally:
        sh([IRQLAB, "testbed", "down"])


@check("control bh-budget 2s")
def check_bh_budget(state):
    return governed("bh-budget", ["bh-budget", "irqlab-b", "--duration", "2s"], state, "control bh-budget")


@check("control process-aware 2s")
def check_process_aware(state):
    return governed("process-aware", ["process-aware", "irqlab-b", "--duration", "2s"], state, "control process-aware")


def live_test(name, binary_key, test_filter, state):
    """One of the live tests' own binaries (built on the host), one test."""
    binaries = state["binaries"]
    if binary_key not in binaries:
        return "fail", f"test binary {binary_key} was not built (scripts/test-kernels.sh builds it)"
    env = dict(os.environ, IRQLAB_LIVE_TESTS="1", RUST_BACKTRACE="0")
    code, out, err = sh([binaries[binary_key], "--exact", test_filter, "--test-threads=1", "--nocapture"], timeout=900, env=env)
    text = out + err
    if code == 0 and "1 passed" in text:
        return "pass", f"{binary_key}::{test_filter}"
    return "fail", f"{binary_key}::{test_filter}: exit {code}: {tail(text, 8)}"


@check("accounting attribution (live test)")
def check_accounting_test(state):
    return live_test("accounting", "accounting_live", "accounting_is_consistent_on_this_kernel", state)


def prepare_disk(state):
    """The block device `lab run --disk` gave the guest: formatted and
    mounted as the live tests' scratch directory (the guest's / is 9p,
    which has no disk under it). Returns the device name or None."""
    if "disk" in state:
        return state["disk"]
    state["disk"] = None
    for module in ("virtio_scsi", "sd_mod", "virtio_blk"):
        sh(["modprobe", module])
    time.sleep(1)
    code, out, _ = sh(["lsblk", "-dn", "-o", "NAME,TYPE,MOUNTPOINT"])
    disks = [l.split()[0] for l in out.splitlines() if len(l.split()) >= 2 and l.split()[1] == "disk" and len(l.split()) == 2]
    if not disks:
        state["disk_why"] = f"no block device in the guest (lsblk: {out.strip()})"
        return None
    dev = disks[0]
    mnt = "/tmp/irqlab-scratch"
    os.makedirs(mnt, exist_ok=True)
    code, _, err = sh(["mkfs.ext4", "-q", "-F", f"/dev/{dev}"])
    if code == 0:
        code, _, err = sh(["mount", f"/dev/{dev}", mnt])
    if code != 0:
        state["disk_why"] = f"/dev/{dev}: {tail(err, 2)}"
        return None
    state["disk"] = dev
    state["scratch"] = mnt
    return dev


def live_test_on_disk(name, binary_key, test_filter, state):
    if not prepare_disk(state):
        return "fail", f"no scratch disk: {state.get('disk_why')}"
    os.environ["IRQLAB_TEST_DISK"] = state["disk"]
    os.environ["IRQLAB_TEST_SCRATCH"] = state["scratch"]
    return live_test(name, binary_key, test_filter, state)


# The block tracepoints the idletime gate's BPF programs attach to.
BLOCK_EVENTS = ["block/block_bio_queue", "block/block_rq_issue", "block/block_rq_complete"]

# The tracepoints the survey's BPF programs (the gap-source monitor and
# the accounting; bpf/gap_sources.bpf.c, bpf/accounting.bpf.c) attach to.
SURVEY_EVENTS = ["irq/irq_handler_entry", "irq/irq_handler_exit", "irq/softirq_entry", "irq/softirq_exit",
                 "irq_vectors/local_timer_entry", "irq_vectors/local_timer_exit",
                 "irq_vectors/reschedule_entry", "irq_vectors/reschedule_exit",
                 "irq_vectors/call_function_entry", "irq_vectors/call_function_exit",
                 "irq_vectors/call_function_single_entry", "irq_vectors/call_function_single_exit",
                 "sched/sched_switch", "sched/sched_waking", "sock/sk_data_ready",
                 "udp/udp_fail_queue_rcv_skb", "sock/sock_recv_length"]


# A second tracefs instance, whose copy of each event is a second probe.
TRACE_INSTANCE = "/sys/kernel/tracing/instances/irqlab-smoke"


def tracepoints_pinned(events, on):
    """Turns `events` (SYSTEM/NAME) on (or back off) in the top tracefs
    instance and in a second one: two probes on each tracepoint, so that a
    BPF program's attach and detach (2 <-> 3 probes) patch no kernel text
    (see check_idletime_gate for the emulated guests' oops this avoids).
    Recording is off in both instances meanwhile: the probes are what
    matters, not the trace. The events that could not be set, with why (an
    event this kernel lacks is skipped)."""
    failed = []
    if on:
        try:
            os.makedirs(TRACE_INSTANCE, exist_ok=True)
        except OSError as e:
            failed.append(f"{TRACE_INSTANCE}: {e.strerror}")
    for root in ["/sys/kernel/tracing", TRACE_INSTANCE]:
        try:
            with open(f"{root}/tracing_on", "w") as f:
                f.write("0" if on else "1")
        except OSError as e:
            failed.append(f"{root}/tracing_on: {e.strerror}")
        for name in events:
            if not os.path.isdir(f"/sys/kernel/tracing/events/{name}"):
                continue  # an event this kernel lacks (6.1 has no sock/sk_data_ready): BPF does not attach there either
            path = f"{root}/events/{name}/enable"
            try:
                with open(path, "w") as f:
                    f.write("1" if on else "0")
            except OSError as e:
                failed.append(f"{path}: {e.strerror}")
    if not on:
        try:
            os.rmdir(TRACE_INSTANCE)
        except OSError as e:
            failed.append(f"{TRACE_INSTANCE}: {e.strerror}")
    return failed


@check("idletime gate on this kernel's cgroups: Ctrl-C, kill -9, revert (live test)")
def check_idletime_gate(state):
    # Emulated 6.12-rt guests panicked in this check (by 2026-11-27: 4 of 6
    # runs on record; never in 6.1-rt): "Fatal exception in interrupt" at
    # blk_mq_start_request+0x16, the instruction pointer one byte into the
    # 5-byte jump of the block_rq_issue tracepoint's static branch. Each
    # attach and detach of the gate's programs patches that site (int3
    # first) while the other vCPU issues the readers' I/O through it. KVM
    # does not run here, so whether QEMU's emulation or the kernel is at
    # fault is not known. With the events on in tracefs the static keys
    # are patched once, before the test's I/O starts; that was not enough
    # (2026-11-28 CI: the same oops at submit_bio_noacct_nocheck+0x2c3, the
    # block_bio_queue site, in the guest and again in its resumed one). A
    # tracepoint's first probe also sets its static call to that probe and
    # a second one switches it to the iterator (kernel/tracepoint.c,
    # tracepoint_add_func: 0->1 and 1->2 patch text, N->N+1 for N >= 2
    # does not). So the events are on in two tracefs instances: two probes
    # before the test, and the programs' attach and detach (2 <-> 3) patch
    # nothing.
    failed = tracepoints_pinned(BLOCK_EVENTS, True)
    try:
        verdict, detail = live_test_on_disk("idletime", "control_idletime", "ctrl_c_and_kill_9_leave_nothing_behind", state)
    finally:
        tracepoints_pinned(BLOCK_EVENTS, False)
    note = f" (block tracepoints not pre-enabled: {'; '.join(failed)})" if failed else " (block tracepoints on in two tracefs instances for the test)"
    return verdict, detail + note


@check("load-bounds shielding: a CPU split off, SCHED_DEADLINE pinned, kill -9, revert (live test)")
def check_shielding(state):
    return live_test("shielding", "root_domain_live", "after_kill_9_the_split_is_named_and_reverted", state)


@check("scheduler debugfs knobs: HRTICK_DL and the fair server held, kill -9, revert (live test)")
def check_sched_knobs(state):
    # The test skips (and passes) where the knobs cannot be set; in a guest
    # without lockdown that would hide a regression, so a skip fails here.
    binaries = state["binaries"]
    if "sched_knobs_live" not in binaries:
        return "fail", "test binary sched_knobs_live was not built (scripts/test-kernels.sh builds it)"
    test = "hrtick_dl_and_the_fair_server_are_held_restored_and_reverted_after_kill_9"
    env = dict(os.environ, IRQLAB_LIVE_TESTS="1", RUST_BACKTRACE="0")
    code, out, err = sh([binaries["sched_knobs_live"], "--exact", test, "--test-threads=1", "--nocapture"], timeout=900, env=env)
    text = out + err
    if code == 0 and "1 passed" in text and "skipped" not in text:
        fair = "no fair server: exit 3 checked" if "no fair server on this kernel" in text else "fair server set and reverted"
        if "the kernel accounts less than its fair servers' bandwidth" in text:
            fair += "; the kernel accounted less than the servers' bandwidth (forgotten after an RT-limit read, or below zero): exit 3 checked, recounted first"
        return "pass", f"sched_knobs_live::{test} ({fair})"
    return "fail", f"sched_knobs_live::{test}: exit {code}: {tail(text, 8)}"


def toml_file(path):
    import tomllib
    with open(path, "rb") as f:
        return tomllib.load(f)


def expected_preset(uname_v, release):
    """The simulator preset `sim --from-survey` must pick for this kernel
    (docs/sim-multicore.md): 6.12 and later -> linux-6.12, 4.9-6.4 ->
    linux-6.1, -rt with PREEMPT_RT."""
    major, minor = (int(x) for x in re.match(r"(\d+)\.(\d+)", release).groups())
    base = "linux-6.12" if (major, minor) >= (6, 12) else "linux-6.1"
    return base + ("-rt" if "PREEMPT_RT" in uname_v else "")


def moves_of(profile):
    """The profile's `[[threads]]` moves the smoke check follows into the
    predicted scenarios: (the task-name prefix of a `napi:DEV` or
    `comm:NAME` MATCH, its CPU set)."""
    out = []
    for t in toml_file(profile).get("threads", []):
        match, cpus = t.get("match", ""), t.get("cpus")
        if not cpus:
            continue
        cpu_set = set()
        for part in str(cpus).split(","):
            a, _, b = part.partition("-")
            cpu_set.update(range(int(a), int(b or a) + 1))
        if match.startswith("napi:"):
            out.append((f"napi/{match[5:]}-", cpu_set))
        elif match.startswith("comm:") and not any(c in match for c in "*?["):
            out.append((f"{match[5:]}/", cpu_set))
    return out


def thread_rows(scenario):
    """Each `[[task]]` of a from-survey scenario but the probe: (name, cpu, policy, priority)."""
    return [(t["name"], t.get("cpu", 0), t.get("policy", "other"), t.get("priority")) for t in scenario.get("task", []) if t.get("kind") != "probe"]


@check("predict, apply, measure: sim --from-survey of this kernel's survey, its profile predicted, applied, surveyed again (function)")
def check_predict(state):
    # The survey attaches and detaches its BPF programs once per phase; in
    # an emulated 6.12-rt guest that patching oopsed in handle_softirqs
    # (int3 at the softirq_entry site, ktimers/0, 2026-11-30) as the
    # idletime gate's did at the block sites: the same remedy.
    failed = tracepoints_pinned(SURVEY_EVENTS, True)
    try:
        verdict, detail = predict_apply_measure(state)
    finally:
        tracepoints_pinned(SURVEY_EVENTS, False)
    note = f" (tracepoints not pinned: {'; '.join(failed)})" if failed else " (the survey's tracepoints pinned by two tracefs probes)"
    return verdict, detail + note


def predict_apply_measure(state):
    # Issue 53's loop in this kernel: the scenario must be this kernel's
    # (its preset, and every thread the probe saw, on its CPU at its
    # policy: on PREEMPT_RT the IRQ threads, ktimers and ksoftirqd where
    # the guest has them); the profile's moves must be in the predicted
    # scenarios; `control apply --predict` must apply and undo it, and
    # `survey --compare` carry the prediction beside the measurement.
    # Timing in an emulated guest is not this hardware's: the numbers are
    # printed, never judged.
    work = os.path.join(state["out"], "predict")  # kept beside results.json: the surveys, scenarios and prediction
    shutil.rmtree(work, ignore_errors=True)
    before, after = f"{work}/before", f"{work}/after"
    code, out, err = sh([IRQLAB, "testbed", "up"])
    if code != 0:
        return "fail", f"testbed up: exit {code}: {tail(err)}"
    apply = None
    try:
        code, out, err = sh([IRQLAB, "survey", "--quick", "--load", "net", "--out", before], timeout=1200)
        if code not in (0, 1):
            return "fail", f"survey: exit {code}: {tail(err)}"
        survey = json.load(open(f"{before}/survey.json"))
        profile = f"{before}/profile.toml"
        code, out, err = sh([IRQLAB, "sim", "--from-survey", before, "--profile", profile, "--json", "-"], timeout=600)
        if code != 0:
            return "fail", f"sim --from-survey: exit {code}: {tail(err)}"
        prediction = json.loads(out)
        want = expected_preset(os.uname().version, os.uname().release)
        if prediction.get("preset") != want:
            return "fail", f"preset {prediction.get('preset')}, this kernel ({os.uname().release}, {os.uname().version}) is {want}"
        problems, seen, rt_threads, moved = [], 0, set(), set()
        for run in prediction["runs"]:
            cpu, load = run["cpu"], run["load"]
            scenario = toml_file(run["scenario"])
            if scenario["machine"].get("kernel") != want:
                problems.append(f"{run['scenario']}: kernel {scenario['machine'].get('kernel')}")
            tasks = thread_rows(scenario)
            curve = next(c for c in next(c for c in survey["cpus"] if c["cpu"] == cpu)["curves"] if c["load"] == ("none" if load == "idle" else load))
            for t in curve["sources"]["totals"]:
                if t["kind"] != "thread":
                    continue
                seen += 1
                spec = (t.get("policy") or "other").split(":")
                policy, prio = spec[0], (int(spec[1]) if len(spec) > 1 and spec[1].isdigit() else None)
                named = [x for x in tasks if x[0].startswith(f"{t['label']}") or x[0].startswith(f"cpu{cpu} {t['label']}")]
                if not any(x[1] == cpu and x[2] == policy and (prio is None or x[3] == prio) for x in named):
                    problems.append(f"CPU {cpu} {load}: thread {t['label']} ({t.get('policy')}) not in the scenario on CPU {cpu} at its policy: {named[:2]}")
                if re.match(r"(irq/|ktimers/|ksoftirqd/|napi/)", t["label"]):
                    rt_threads.add(f"{t['label'].split('/')[0]}/ {t.get('policy')}")
            predicted = run.get("predicted")
            if predicted is None:
                problems.append(f"CPU {cpu} {load}: no prediction")
                continue
            # Each thread the profile moves is on its new CPU in the predicted scenario.
            moved_tasks = thread_rows(toml_file(predicted["scenario"]))
            for setting in moves_of(profile):
                prefix, to = setting
                hits = [x for x in tasks if x[0].split(" ", 1)[-1].startswith(prefix) or x[0].startswith(prefix)]
                for name, _, _, _ in hits:
                    now = [x for x in moved_tasks if x[0] == name]
                    if not now or now[0][1] not in to:
                        problems.append(f"CPU {cpu} {load}: {name} not moved to CPUs {sorted(to)} in {predicted['scenario']}: {now[:1]}")
                    else:
                        moved.add(f"{name} -> CPU {now[0][1]}")
        if problems:
            return "fail", f"{len(problems)} problems: " + "; ".join(problems[:6])
        # Before anything changes, the profile must apply and be undone.
        apply = subprocess.Popen([IRQLAB, "control", "apply", profile, "--predict", "--allow-missing"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 300
        held = False
        while time.time() < deadline and apply.poll() is None:
            if journal_entries():
                held = True
                break
            time.sleep(0.5)
        if not held:
            return "fail", f"control apply --predict never held its changes (exit {apply.poll()})"
        code, out, err = sh([IRQLAB, "survey", "--quick", "--load", "net", "--compare", before, "--out", after], timeout=1200)
        apply.send_signal(signal.SIGTERM)
        out_a, err_a = apply.communicate(timeout=120)
        if code not in (0, 1):
            return "fail", f"survey --compare: exit {code}: {tail(err)}"
        if apply.returncode != 1:
            return "fail", f"control apply --predict after SIGTERM: exit {apply.returncode} (a signalled run exits 1): {tail(err_a)}"
        entries = journal_entries()
        if entries != []:
            return "fail", f"control status after the apply ended: {entries}"
        rows = json.load(open(f"{after}/survey.json")).get("prediction", {}).get("rows") or []
        if not rows:
            return "fail", "the after survey carries no prediction"
        moves = [l.strip() for l in open(profile) if l.strip().startswith(("match", "irq ="))]
        pct = lambda v: "-" if v is None else f"{v:.1%}"
        table = "; ".join(f"CPU {r['cpu']} {r['load']} {pct(r.get('before'))} -> predicted {pct(r.get('predicted'))}, measured {pct(r.get('after'))}"
                          for r in rows if r.get("window_ns") is None)
        return "pass", (f"preset {want}; {seen} thread sources, each in its scenario on its CPU at its policy "
                        f"(kernel threads: {', '.join(sorted(rt_threads)) or 'none seen'}); profile {moves or 'moves nothing'}, in the model: {', '.join(sorted(moved)) or 'nothing moved'}; "
                        f"applied with --predict and undone; the after survey's {len(rows)} prediction rows, mean load: {table}")
    finally:
        # On a failure path: end the apply as a user would (SIGTERM undoes
        # its changes), and revert whatever a stuck one left, so that the
        # checks after this one start from an unchanged machine.
        if apply is not None and apply.poll() is None:
            apply.terminate()
            try:
                apply.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                apply.kill()
                apply.communicate()
        if apply is not None and journal_entries():
            sh([IRQLAB, "control", "revert", "--all"], timeout=240)
        sh([IRQLAB, "testbed", "down"])


CHECKS = [check_doctor, check_accounting, check_accounting_test, check_probe, check_latency, check_watch, check_testbed,
          check_threads_kill, check_irq, check_bh_budget, check_process_aware, check_idletime_gate, check_shielding, check_sched_knobs,
          check_predict]


def main():
    global IRQLAB
    ap = argparse.ArgumentParser()
    ap.add_argument("--irqlab", required=True)
    ap.add_argument("--binaries", required=True, help="JSON: test name -> executable")
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default=os.environ.get("IRQLAB_SMOKE_ONLY", ""),
                    help="comma-separated function names of the checks to run (default: all)")
    ap.add_argument("--resume", action="store_true",
                    help="keep the checks an earlier guest recorded in --out and run the rest")
    a = ap.parse_args()
    IRQLAB = os.path.abspath(a.irqlab)
    state = {"doctor": {}, "binaries": json.load(open(a.binaries)), "out": os.path.abspath(a.out)}
    os.makedirs(a.out, exist_ok=True)
    started = time.time()
    only = [n for n in a.only.split(",") if n]
    chosen = [c for c in CHECKS if not only or c.__name__ in only]
    path = os.path.join(a.out, "results.json")
    lab = json.loads(os.environ.get("IRQLAB_LAB", "{}"))
    doc = {"schema": "irqlab/kernel-smoke/v1", "lab": lab, "uname": os.uname().release, "date": time.strftime("%Y-%m-%d"),
           "complete": False, "guest_ended_in": [], "results": RESULTS}
    if a.resume and os.path.exists(path):
        # The guest ended in the middle of the suite (a crash of the
        # emulated machine, not a check's failure: each check's own
        # failures are recorded): the checks done are kept, the one it
        # ended in is named and run again, then the rest.
        before = json.load(open(path))
        RESULTS.extend(before["results"])
        done = {r["check"] for r in RESULTS}
        pending = [c for c in chosen if c.check_name not in done]
        doc["guest_ended_in"] = before.get("guest_ended_in", []) + ([pending[0].check_name] if pending else [])
        chosen = pending
        print(f"resuming: the previous guest ended in '{doc['guest_ended_in'][-1]}'" if pending else "resuming: nothing left", flush=True)

    def save(complete):
        doc["complete"] = complete
        doc["seconds"] = round(time.time() - started)
        tmp = os.path.join(a.out, ".results.json.tmp")
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=2)
        os.replace(tmp, path)

    for c in chosen:
        c(state)
        save(False)
    save(True)
    passed = sum(r["outcome"] != "fail" for r in RESULTS)
    failed = len(RESULTS) - passed
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
