//! The disk in the kernel path: blocking reads through a C-LOOK queue,
//! completion hard IRQ and BLOCK softirq, readers at an intensity.

mod common;

use common::{machine, run, task};
use irqlab_sim::{Scenario, SimResult};

/// A disk with round completion costs (chosen for the mechanism, not a
/// calibration); the drive is the default model (the idletime
/// dissertation's WD Caviar, ~19 ms per random 16 KB read).
const DISK: &str = "[disk]\nname = \"sda\"\n[disk.costs]\nirq = \"20us\"\nblock_softirq = \"50us\"\n";

fn reader(name: &str, pattern: &str, intensity: f64, policy: &str) -> String {
    format!("[[task]]\nname = \"{name}\"\nkind = \"disk-reader\"\npattern = \"{pattern}\"\nintensity = {intensity}\n{policy}\n")
}

fn scenario(tasks: &str, duration: &str) -> String {
    format!("{}{DISK}{tasks}[run]\nduration = \"{duration}\"\n", machine(1000, "linux-modern", ""))
}

fn disk(r: &SimResult) -> &serde_json::Value {
    r.devices.iter().find(|d| d["kind"] == "disk").expect("disk device reported")
}

fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Completion work is stolen from whoever is current when the drive
/// finishes: with the reader blocked, that is the CPU-bound task, which
/// loses exactly the disk's hard-IRQ time and (up to one job in progress
/// at the end) its BLOCK softirq time.
#[test]
fn completion_irq_and_block_softirq_are_stolen_from_a_cpu_bound_task() {
    let loop_task = "[[task]]\nname = \"hog\"\nkind = \"cpu-loop\"\n";
    let r = run(&scenario(&format!("{loop_task}{}", reader("rd", "random", 1.0, "policy = \"fifo\"\npriority = 10")), "2s"));
    assert!(r.conservation.devices_ok, "{:?}", r.conservation);
    let d = disk(&r);
    let completed = u(&d["requests_completed"]);
    assert!(completed > 50, "too few reads: {d}");
    assert_eq!(u(&d["bytes_read"]), completed * 16_384);
    let hog = task(&r, "hog");
    // Zero entry/exit/tick costs: the only hard-IRQ time is the disk's.
    assert_eq!(hog.time.stolen_hardirq_ns, u(&d["hardirq_ns"]), "{d}");
    assert_eq!(u(&d["hardirq_ns"]), u(&d["irq_count"]) * 20_000);
    let bh = u(&d["block_softirq_ns"]);
    assert_eq!(bh, completed * 50_000);
    assert!(hog.time.stolen_softirq_ns >= bh && hog.time.stolen_softirq_ns <= bh + 50_000, "{} vs {bh}", hog.time.stolen_softirq_ns);
    // Each request's response (issue → completion processed) holds its
    // drive service plus at least the completion IRQ and bottom half.
    assert!(u(&d["response"]["min_ns"]) >= u(&d["service"]["min_ns"]) + 70_000, "{d}");
    assert!(u(&d["response"]["mean_ns"]) >= u(&d["service"]["mean_ns"]) + 70_000, "{d}");
    assert_eq!(r.softirq.per_vector_ns.get("block").copied().unwrap_or(0), hog.time.stolen_softirq_ns);
    // Without the reader the hog loses nothing.
    let alone = run(&scenario(loop_task, "2s"));
    assert_eq!(task(&alone, "hog").time.stolen_ns, 0);
    assert_eq!(task(&alone, "hog").time.run_ns, alone.measured_ns);
    // Stolen time comes out of the hog's CPU time, exactly: the run's time
    // is the hog's run and stolen time, the reader's, and the switches.
    let rd = task(&r, "rd");
    assert_eq!(r.cpu.time.idle_ns, 0, "the hog never lets the CPU idle");
    assert_eq!(
        hog.time.run_ns + hog.time.stolen_ns + rd.time.run_ns + rd.time.stolen_ns + r.cpu.context_switch_ns,
        r.measured_ns,
        "hog {hog:?}, reader {rd:?}, cpu {:?}",
        r.cpu
    );
}

/// Sequential reads stream from the head position (no seek, no rotational
/// wait); random ones pay both: the same reader completes many more.
#[test]
fn sequential_reads_complete_faster_than_random_ones() {
    let seq = run(&scenario(&reader("rd", "sequential", 1.0, ""), "2s"));
    let rnd = run(&scenario(&reader("rd", "random", 1.0, ""), "2s"));
    let (ds, dr) = (disk(&seq), disk(&rnd));
    let mean = |d: &serde_json::Value, k: &str| u(&d[k]["mean_ns"]);
    // Random: ~19 ms mean service (drive model); sequential 16 KB: 0.3 ms
    // overhead + 32/300 of an 11.1 ms revolution ~ 1.5 ms.
    let rs = mean(dr, "service");
    assert!((15_000_000..23_000_000).contains(&rs), "random service {rs}");
    assert!(mean(ds, "service") * 5 < rs, "sequential {} vs random {rs}", mean(ds, "service"));
    assert!(u(&ds["requests_completed"]) > 5 * u(&dr["requests_completed"]));
    assert_eq!(u(&ds["accesses"]["mechanical"]), 1, "only the first sequential read seeks: {ds}");
    // The reader's own response times include the completion path.
    let t = task(&seq, "rd");
    assert_eq!(t.jobs, u(&ds["requests_completed"]));
    assert!(t.response.as_ref().unwrap().mean_ns > mean(ds, "service"));
}

/// With several readers the queue holds several requests and C-LOOK serves
/// them in sector order: shorter seeks than one reader's random reads.
#[test]
fn clook_queue_shortens_random_service_with_several_readers() {
    let one = run(&scenario(&reader("r0", "random", 1.0, ""), "3s"));
    let four: String = (0..4).map(|i| reader(&format!("r{i}"), "random", 1.0, "")).collect();
    let many = run(&scenario(&four, "3s"));
    assert!(many.conservation.devices_ok);
    let (d1, d4) = (disk(&one), disk(&many));
    assert!(u(&d4["queue_max"]) >= 3, "{d4}");
    assert!(u(&d4["service"]["mean_ns"]) < u(&d1["service"]["mean_ns"]), "{d1}\n{d4}");
    assert!(u(&d4["requests_completed"]) > u(&d1["requests_completed"]));
}

/// Intensity is the fraction of each 100 ms quantum spent issuing.
#[test]
fn intensity_limits_the_reading_share_of_each_quantum() {
    let full = run(&scenario(&reader("rd", "random", 1.0, ""), "3s"));
    let light = run(&scenario(&reader("rd", "random", 0.2, ""), "3s"));
    let (f, l) = (u(&disk(&full)["requests_completed"]), u(&disk(&light)["requests_completed"]));
    // 0.2 of 100 ms holds one or two ~19 ms reads per quantum.
    assert!(l * 2 < f && l >= 30, "intensity 0.2: {l} reads, 1.0: {f}");
}

/// Statistics restart at the warm-up and the request balance still holds
/// (requests in the queue at the restart are counted in flight).
#[test]
fn warmup_keeps_the_request_balance() {
    let four: String = (0..3).map(|i| reader(&format!("r{i}"), "random", 1.0, "")).collect();
    let text = scenario(&four, "1s").replace("[run]\n", "[run]\nwarmup = \"333ms\"\n");
    let r = run(&text);
    assert!(r.conservation.devices_ok, "{}", disk(&r));
    assert!(u(&disk(&r)["in_flight_at_start"]) > 0);
}

#[test]
fn bad_disk_input_points_at_the_value() {
    let err = |text: &str| Scenario::parse("s.toml", text).expect_err("must be rejected");
    let no_disk = format!("{}{}[run]\nduration = \"1s\"\n", machine(1000, "linux-modern", ""), reader("rd", "random", 1.0, ""));
    let e = err(&no_disk);
    assert!(e.to_string().contains("needs a [disk]"), "{e}");
    assert!(e.location.is_some());
    let e = err(&scenario(&reader("rd", "random", 1.5, ""), "1s"));
    assert!(e.to_string().contains("intensity"), "{e}");
    let line = e.location.as_ref().unwrap().line;
    assert_eq!(scenario(&reader("rd", "random", 1.5, ""), "1s").lines().nth(line - 1).unwrap(), "intensity = 1.5");
    let e = err(&scenario(&reader("rd", "zigzag", 1.0, ""), "1s"));
    assert!(e.to_string().contains("pattern"), "{e}");
}
