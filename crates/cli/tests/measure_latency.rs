//! `irqlab measure latency` against the real binary, and side by side with
//! rt-tests' cyclictest (live: IRQLAB_LIVE_TESTS=1, as root).

use std::process::{Command, Stdio};

mod common;
use common::{irqlab, live_tests_enabled};

#[test]
fn bad_flags_exit_2_with_a_message() {
    for args in
        [vec!["--interval", "1"], vec!["--interval", "1us"], vec!["--cpu", "9999"], vec!["--cpu", "1-0"], vec!["--duration", "soon"]]
    {
        let out = irqlab().args(["measure", "latency"]).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
    }
}

#[test]
fn writes_latency_v1_json() {
    if !live_tests_enabled("writes_latency_v1_json") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("lat.json");
    let out = irqlab()
        .args(["measure", "latency", "--cpu", "0", "--interval", "1ms", "--duration", "200ms", "--histogram", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("T: 0 ("), "{stdout}");
    assert!(stdout.contains("# Histogram"), "{stdout}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["schema"], "irqlab/latency/v1");
    assert_eq!(v["complete"], true);
    assert_eq!(v["policy"], "SCHED_FIFO");
    common::assert_records_this_machine(&v);
    assert_eq!(v["threads"][0]["cycles"], 200);
    let lat = &v["threads"][0]["latency"];
    let hist: u64 = lat["histogram"]["counts"].as_array().unwrap().iter().map(|c| c.as_u64().unwrap()).sum();
    assert_eq!(hist + lat["histogram"]["overflow"].as_u64().unwrap(), 200);
    assert!(lat["min_ns"].as_u64().unwrap() <= lat["p50_ns"].as_u64().unwrap());
    assert!(lat["p50_ns"].as_u64().unwrap() <= lat["max_ns"].as_u64().unwrap());
}

#[test]
fn json_dash_puts_only_the_document_on_stdout() {
    if !live_tests_enabled("json_dash_puts_only_the_document_on_stdout") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = irqlab()
        .args(["measure", "latency", "--cpu", "0", "--interval", "1ms", "--duration", "100ms", "--histogram", "--json", "-"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(v["schema"], "irqlab/latency/v1");
    assert_eq!(v["threads"][0]["cycles"], 100);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "a file was written into the working directory");
}

/// One run's latency: the extremes and mean as the tool reports them, and
/// a 1 us histogram (bucket k counts latencies in [k, k+1) us; both tools
/// bucket that way), all in ns.
#[derive(Debug, Clone)]
struct Run {
    min: f64,
    avg: f64,
    max: f64,
    buckets: Vec<u64>,
    overflow: u64,
}

impl Run {
    /// The lower edge of the bucket holding the q-quantile, in ns (the
    /// histogram's end when it falls among the overflows): one rule for
    /// both tools' histograms.
    fn quantile(&self, q: f64) -> f64 {
        let total = self.buckets.iter().sum::<u64>() + self.overflow;
        let rank = ((q * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (k, &c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return k as f64 * 1_000.0;
            }
        }
        self.buckets.len() as f64 * 1_000.0
    }

    /// The same run read through a histogram of `len` 1 us buckets: what
    /// lies past its end counts as overflow. Both tools' runs are compared
    /// through the shorter of their histograms, so a quantile past one
    /// tool's end reads as that end for both (the CI of 9b663a6 compared
    /// irqlab's 120-149 us 99th percentiles with cyclictest's histogram
    /// end, 100 us, on a host noisier than this one).
    fn through_histogram_of(&self, len: usize) -> Run {
        let keep = len.min(self.buckets.len());
        let mut run = self.clone();
        run.overflow += run.buckets.drain(keep..).sum::<u64>();
        run
    }
}

/// cyclictest's histogram with `-N -h N`: N buckets of 1 ns (1 ms: past
/// the 99th percentile of this VM, 11-40 us, and of the CI host, where it
/// reached 150 us), read into 1 us buckets. cyclictest prints every
/// bucket, a line each (14 MB a run). `-N` also gives the mean in ns;
/// without it the mean is truncated to whole us.
const CYCLICTEST_HISTOGRAM_NS: usize = 1_000_000;

/// cyclictest's `-q -N -h N` output: the histogram lines `ns count`, and
/// the `# Min/Avg/Max Latencies` (ns) and `# Histogram Overflows` lines.
fn parse_cyclictest(text: &str) -> Run {
    let field = |name: &str| -> f64 {
        let line = text.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name} in {text}"));
        line[name.len()..].split_whitespace().next().unwrap().parse::<f64>().unwrap()
    };
    let mut buckets = vec![0; CYCLICTEST_HISTOGRAM_NS / 1_000];
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let mut cols = line.split_whitespace().map(|c| c.parse::<u64>());
        if let (Some(Ok(ns)), Some(Ok(c))) = (cols.next(), cols.next()) {
            buckets[ns as usize / 1_000] += c;
        }
    }
    Run {
        min: field("# Min Latencies:"),
        avg: field("# Avg Latencies:"),
        max: field("# Max Latencies:"),
        buckets,
        overflow: field("# Histogram Overflows:") as u64,
    }
}

/// The CPU both tools measure: the last online one (the tests' own
/// threads tend to start on CPU 0).
fn last_online_cpu() -> String {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    online.trim().rsplit(['-', ',']).next().unwrap().to_string()
}

fn require_cyclictest() {
    assert!(
        Command::new("cyclictest").arg("--help").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok(),
        "cyclictest not installed: scripts/install-deps.sh installs rt-tests"
    );
}

fn cyclictest_command(cpu: &str, seconds: u32, aligned: bool) -> Command {
    let mut c = Command::new("cyclictest");
    c.args(["-q", "-m", "-p80", &format!("-a{cpu}"), "-t1", "-i1000", &format!("-D{seconds}"), "-N"]);
    c.arg(format!("-h{CYCLICTEST_HISTOGRAM_NS}"));
    if aligned {
        c.arg("--secaligned");
    }
    c
}

fn irqlab_command(cpu: &str, seconds: u32, aligned: bool, json: &std::path::Path) -> Command {
    let mut c = irqlab();
    c.args(["measure", "latency", "--cpu", cpu, "--priority", "80", "--interval", "1ms"])
        .args(["--duration", &format!("{seconds}s"), "--json"])
        .arg(json)
        .stdout(Stdio::null());
    if aligned {
        c.arg("--align");
    }
    c
}

fn irqlab_run(out: std::process::Output, json: &std::path::Path) -> Run {
    assert!(out.status.success(), "irqlab: {}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    let lat = &v["threads"][0]["latency"];
    let hist = &lat["histogram"];
    assert_eq!(hist["bucket_ns"], 1_000, "the comparison assumes 1 us buckets");
    Run {
        min: lat["min_ns"].as_f64().unwrap(),
        avg: lat["mean_ns"].as_f64().unwrap(),
        max: lat["max_ns"].as_f64().unwrap(),
        buckets: hist["counts"].as_array().unwrap().iter().map(|c| c.as_u64().unwrap()).collect(),
        overflow: hist["overflow"].as_u64().unwrap(),
    }
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// cyclictest's own reporting resolution without `-N` (1 us): two tools
/// that agree to better than that agree for any user of either.
const RESOLUTION_NS: f64 = 1_000.0;

/// Whether irqlab's rounds agree with cyclictest's on one statistic: the
/// median of irqlab's rounds must lie within the range of cyclictest's
/// rounds widened on each side by how far either tool strays from itself
/// on this machine, now (the larger range of its own rounds), or by the
/// 1 us resolution when the machine is quieter than that. (Widening by
/// cyclictest's range alone failed once in CI with irqlab's own rounds
/// 5.1 us apart and cyclictest's 1.3 us: the machine moved between rounds,
/// not the tools apart.) Err says by how much it missed.
fn agrees_across_rounds(what: &str, ours: &[f64], theirs: &[f64]) -> Result<(), String> {
    let range = |v: &[f64]| v.iter().copied().fold(f64::NEG_INFINITY, f64::max) - v.iter().copied().fold(f64::INFINITY, f64::min);
    let lo = theirs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = theirs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let tolerance = range(theirs).max(range(ours)).max(RESOLUTION_NS);
    let m = median(ours);
    if m >= lo - tolerance && m <= hi + tolerance {
        Ok(())
    } else {
        Err(format!(
            "{what}: irqlab's median {m:.0} ns (rounds {ours:.0?}) is outside cyclictest's rounds {lo:.0}..{hi:.0} ns \
             widened by the larger spread of either tool's rounds, {tolerance:.0} ns (rounds {theirs:.0?})"
        ))
    }
}

/// The two tools measure the same thing: each alone on the CPU, in
/// alternating slices (the order flips every round, so a drift in the
/// machine's background load hits both alike), compared per statistic
/// against how much cyclictest's own rounds differ.
///
/// Compared: the 1st, 50th and 99th percentiles of each run's histogram
/// and the mean. Not compared, only printed: the minimum and maximum,
/// which are single samples. cyclictest's minimum in particular is set by
/// its own main thread, which it pins to the measured CPU too and which
/// wakes every 10 ms (`voluntary_ctxt_switches` of that thread grow by
/// 100/s): the rare wake-up that finds the CPU already awake comes out a
/// few us lower (7 us against a floor of 11-12 us here), and irqlab, whose
/// main thread is not on that CPU, has no such samples. That moved the
/// minima 3 us apart in most runs, a difference of the tools' own
/// footprints, not of what they measure.
///
/// Run at the same time on one CPU they would not be comparable either:
/// woken at the same instant, the one served second carries the other's
/// wake-up and switch in every sample (6-14 us on this VM). That
/// side-by-side run is still printed, as a report.
#[test]
fn agrees_with_cyclictest_on_the_same_cpu() {
    if !live_tests_enabled("agrees_with_cyclictest_on_the_same_cpu") {
        return;
    }
    require_cyclictest();
    let cpu = last_online_cpu();
    const ROUNDS: usize = 5;
    const SECONDS: u32 = 2;
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("lat.json");
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let run_ours = || irqlab_run(irqlab_command(&cpu, SECONDS, false, &json).output().unwrap(), &json);
        let run_theirs = || parse_cyclictest(&String::from_utf8_lossy(&cyclictest_command(&cpu, SECONDS, false).output().unwrap().stdout));
        let (o, t) = if round % 2 == 0 {
            let o = run_ours();
            (o, run_theirs())
        } else {
            let t = run_theirs();
            (run_ours(), t)
        };
        // irqlab's histogram ends at its maximum unless it overflowed: only
        // then is its end a limit of what it can tell.
        let common = if o.overflow == 0 { t.buckets.len() } else { o.buckets.len().min(t.buckets.len()) };
        let (o, t) = (o.through_histogram_of(common), t.through_histogram_of(common));
        eprintln!("round {round}, cpu {cpu}:\n  irqlab     {}\n  cyclictest {}", describe(&o), describe(&t));
        ours.push(o);
        theirs.push(t);
    }
    report_side_by_side(&cpu);
    type Statistic = (&'static str, fn(&Run) -> f64);
    let statistics: [Statistic; 4] =
        [("p1", |r| r.quantile(0.01)), ("p50", |r| r.quantile(0.50)), ("p99", |r| r.quantile(0.99)), ("mean", |r| r.avg)];
    let failures: Vec<String> = statistics
        .into_iter()
        .filter_map(|(what, f)| {
            let pick = |runs: &[Run]| runs.iter().map(f).collect::<Vec<_>>();
            agrees_across_rounds(what, &pick(&ours), &pick(&theirs)).err()
        })
        .collect();
    assert!(failures.is_empty(), "irqlab and cyclictest disagree: {failures:#?}");
}

fn describe(r: &Run) -> String {
    format!(
        "p1/p50/p99 {:.0}/{:.0}/{:.0} ns, mean {:.0} ns; min/max {:.0}/{:.0} ns (printed only)",
        r.quantile(0.01),
        r.quantile(0.50),
        r.quantile(0.99),
        r.avg,
        r.min,
        r.max
    )
}

/// Both tools at once, wake-ups aligned to the same instants: printed, not
/// asserted (see above for why the one served second reads higher).
fn report_side_by_side(cpu: &str) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("lat.json");
    let ours = irqlab_command(cpu, 2, true, &json).spawn().unwrap();
    let theirs = cyclictest_command(cpu, 2, true).output().unwrap();
    let o = irqlab_run(ours.wait_with_output().unwrap(), &json);
    let t = parse_cyclictest(&String::from_utf8_lossy(&theirs.stdout));
    eprintln!(
        "side by side (report only), cpu {cpu}, mean shift {:.0} ns:\n  irqlab     {}\n  cyclictest {}",
        o.avg - t.avg,
        describe(&o),
        describe(&t)
    );
}

#[test]
fn quantiles_come_from_the_bucket_that_holds_them() {
    let run = Run { min: 0.0, avg: 0.0, max: 0.0, buckets: vec![0, 0, 10, 80, 9], overflow: 1 };
    assert_eq!(run.quantile(0.01), 2_000.0);
    assert_eq!(run.quantile(0.10), 2_000.0);
    assert_eq!(run.quantile(0.11), 3_000.0);
    assert_eq!(run.quantile(0.99), 4_000.0);
    // Past the histogram: its end, not a made-up bucket.
    assert_eq!(run.quantile(1.0), 5_000.0);
}

#[test]
fn cyclictests_histogram_output_is_read() {
    let text = "# /dev/cpu_dma_latency set to 0us\n# Histogram\n000000 000000\n011832 000004\n012001 000360\n\
                012999 000007\n# Total: 000000371\n# Min Latencies: 11832\n# Avg Latencies: 12497\n\
                # Max Latencies: 1205000\n# Histogram Overflows: 00001\n# Histogram Overflow at cycle number:\n\
                # Thread 0: 00123\n";
    let run = parse_cyclictest(text);
    assert_eq!((run.min, run.avg, run.max, run.overflow), (11_832.0, 12_497.0, 1_205_000.0, 1));
    assert_eq!((run.buckets[11], run.buckets[12]), (4, 367));
    assert_eq!(run.quantile(0.5), 12_000.0);
}

#[test]
fn agreement_check_can_fail() {
    let theirs = [13_000.0, 13_200.0, 13_100.0];
    assert!(agrees_across_rounds("avg", &[13_150.0, 13_400.0, 12_900.0], &theirs).is_ok());
    // Twice the latency is a disagreement whatever the machine.
    assert!(agrees_across_rounds("avg", &[26_000.0, 26_200.0, 26_100.0], &theirs).is_err());
    // A spread wider than the resolution widens the tolerance.
    let noisy = [13_000.0, 17_000.0, 14_000.0];
    assert!(agrees_across_rounds("avg", &[20_000.0, 20_500.0, 19_000.0], &noisy).is_ok());
    assert!(agrees_across_rounds("avg", &[21_500.0, 22_000.0, 21_200.0], &noisy).is_err());
    // irqlab's own rounds straying widens it too, by their range (5 us):
    // median 18.5 us against 15.8..17.0 is within; 23 us is not.
    let steady = [15_766.0, 17_023.0, 16_607.0, 16_357.0, 16_059.0];
    assert!(agrees_across_rounds("mean", &[15_101.0, 19_680.0, 20_225.0, 18_055.0, 18_520.0], &steady).is_ok());
    assert!(agrees_across_rounds("mean", &[23_000.0, 23_200.0, 22_900.0], &steady).is_err());
}
