//! `irqlab export` against the real consumers: `promtool check metrics` on
//! its output, and a real Prometheus (Debian package, installed by
//! scripts/install-deps.sh) scraping it and answering queries through its
//! HTTP API (live: IRQLAB_LIVE_TESTS=1, as root), with the probe and the
//! timer latency thread beside it too. All traffic on loopback.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{irqlab, live_tests_enabled};

#[test]
fn bad_flags_exit_2() {
    for args in [["--listen", "999.1.1.1:5"], ["--listen", "localhost"], ["--interval", "0s"], ["--top", "0"]] {
        let out = irqlab().arg("export").args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
    }
}

#[test]
fn probe_and_latency_cpus_are_checked_naming_the_flags() {
    for (args, named) in [
        (&["--probe", "4095"][..], &["--probe 4095"][..]),
        (&["--latency", "4095"], &["--latency 4095"]),
        (&["--probe", "1", "--latency", "1"], &["--probe 1", "--latency 1"]),
        (&["--latency", "0", "--interval", "5ms"], &["--interval 5ms"]),
    ] {
        let out = irqlab().arg("export").args(args).args(["--duration", "1s"]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with("error: ") && named.iter().all(|n| err.contains(n)), "{args:?}: {err}");
    }
}

/// A running exporter, stopped (SIGINT) when dropped.
struct Exporter {
    child: Child,
    addr: String,
}

impl Exporter {
    /// With `--interval 200ms` unless `extra` gives one.
    fn start(extra: &[&str]) -> Exporter {
        let interval: &[&str] = if extra.contains(&"--interval") { &[] } else { &["--interval", "200ms"] };
        let mut child = irqlab()
            .args(["export", "--listen", "127.0.0.1:0", "--duration", "60s"])
            .args(interval)
            .args(extra)
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let first = lines.next().expect("a line from irqlab export").unwrap();
        let addr = first
            .strip_prefix("serving http://")
            .and_then(|r| r.strip_suffix("/metrics"))
            .unwrap_or_else(|| panic!("unexpected first line: {first}"))
            .to_string();
        // Keep draining stderr so the exporter never blocks on it.
        std::thread::spawn(move || lines.for_each(drop));
        Exporter { child, addr }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let _ = self.child.wait();
    }
}

/// One HTTP GET on loopback: (status line, body).
fn get(addr: &str, path: &str, accept: Option<&str>) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let accept = accept.map(|a| format!("Accept: {a}\r\n")).unwrap_or_default();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{accept}Connection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (head.lines().next().unwrap_or("").to_string(), body.to_string())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn a_taken_address_exits_2_naming_it() {
    if !live_tests_enabled("a_taken_address_exits_2_naming_it") {
        return;
    }
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = irqlab().args(["export", "--listen", &addr, "--duration", "1s"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&addr) && err.contains("already in use"), "{err}");
}

#[test]
fn promtool_accepts_the_output_and_series_stay_bounded() {
    if !live_tests_enabled("promtool_accepts_the_output_and_series_stay_bounded") {
        return;
    }
    let exporter = Exporter::start(&["--top", "5"]);
    // 1,000 short-lived processes while it measures.
    for _ in 0..1000 {
        Command::new("true").status().unwrap();
    }
    std::thread::sleep(Duration::from_millis(500));
    let (status, body) = get(&exporter.addr, "/metrics", None);
    assert!(status.contains("200"), "{status}");
    promtool_accepts(&body);
    let task_series = body.lines().filter(|l| l.starts_with("irqlab_task_stolen_seconds{")).count();
    assert!(task_series <= 6, "{task_series} task series with --top 5:\n{body}");
    assert!(body.contains("irqlab_task_stolen_seconds{task=\"other\"}"), "{body}");

    // A client that goes away mid-response, then 1,000 scrapes from 50
    // clients at once: every one answered.
    let mut rude = TcpStream::connect(&exporter.addr).unwrap();
    write!(rude, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut first = [0u8; 16];
    let _ = rude.read(&mut first);
    drop(rude);
    let answered: usize = std::thread::scope(|s| {
        let clients: Vec<_> =
            (0..50).map(|_| s.spawn(|| (0..20).filter(|_| get(&exporter.addr, "/metrics", None).0.contains("200")).count())).collect();
        clients.into_iter().map(|c| c.join().unwrap()).sum()
    });
    assert_eq!(answered, 1000);
}

/// `promtool check metrics` on a body; panics with its complaint.
fn promtool_accepts(body: &str) {
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian prometheus; scripts/install-deps.sh installs it)");
    promtool.stdin.take().unwrap().write_all(body.as_bytes()).unwrap();
    let out = promtool.wait_with_output().unwrap();
    assert!(out.status.success(), "promtool: {}{}\n{body}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

/// The values of the series whose line starts with `prefix` (name and
/// labels up to where they differ), in the order served.
fn values(body: &str, prefix: &str) -> Vec<f64> {
    body.lines().filter(|l| l.starts_with(prefix)).filter_map(|l| l.rsplit(' ').next()?.parse().ok()).collect()
}

/// The latency histogram of one CPU: (count, cumulative buckets in order).
fn latency_histogram(body: &str, cpu: &str) -> (f64, Vec<f64>) {
    let count = values(body, &format!("irqlab_timer_latency_seconds_count{{cpu=\"{cpu}\"}} ")).first().copied().unwrap_or(0.0);
    let buckets = body
        .lines()
        .filter(|l| l.starts_with("irqlab_timer_latency_seconds_bucket{") && l.contains(&format!("cpu=\"{cpu}\"")))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect();
    (count, buckets)
}

#[test]
fn probe_gauges_and_a_growing_latency_histogram_are_served() {
    if !live_tests_enabled("probe_gauges_and_a_growing_latency_histogram_are_served") {
        return;
    }
    let exporter = Exporter::start(&["--probe", "1", "--latency", "0", "--interval", "1s"]);
    std::thread::sleep(Duration::from_secs(3));
    // The first rounds end after about one interval plus their set-up.
    let deadline = Instant::now() + Duration::from_secs(20);
    let first = loop {
        let (_, body) = get(&exporter.addr, "/metrics", None);
        let ready = body.contains("irqlab_probe_max_load{cpu=\"1\"") && latency_histogram(&body, "0").0 > 0.0;
        if ready || Instant::now() > deadline {
            break body;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    promtool_accepts(&first);
    for family in ["irqlab_probe_max_load{cpu=\"1\",window=", "irqlab_probe_max_load_since_start{cpu=\"1\",window="] {
        let loads = values(&first, family);
        eprintln!("{family}..: {loads:?}");
        assert_eq!(loads.len(), 4, "{family}: one per window 100us..100ms\n{first}");
        assert!(loads.iter().all(|l| (0.0..=1.0).contains(l)), "{family}: {loads:?}");
    }
    let (count, buckets) = latency_histogram(&first, "0");
    eprintln!("latency cpu 0: count {count}, cumulative buckets {buckets:?}");
    assert!(count > 0.0, "{first}");
    assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "buckets not cumulative: {buckets:?}");
    assert_eq!(buckets.last(), Some(&count), "+Inf bucket is the count: {buckets:?}");

    // One more latency round (1 s plus set-up) later, the count has grown.
    std::thread::sleep(Duration::from_millis(2500));
    let (_, second) = get(&exporter.addr, "/metrics", None);
    let (later, later_buckets) = latency_histogram(&second, "0");
    eprintln!("latency cpu 0 later: count {later}, cumulative buckets {later_buckets:?}");
    assert!(later > count, "count {count} then {later}");
    assert!(later_buckets.iter().zip(&buckets).all(|(b, a)| b >= a), "{buckets:?} then {later_buckets:?}");
    promtool_accepts(&second);
}

#[test]
fn prometheus_scrapes_it_and_reads_back_growing_softirq_counters() {
    if !live_tests_enabled("prometheus_scrapes_it_and_reads_back_growing_softirq_counters") {
        return;
    }
    // With the timer latency histogram of CPU 0 (issue 52: the watch's
    // histograms as Prometheus reads them).
    let exporter = Exporter::start(&["--latency", "0", "--interval", "1s"]);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: irqlab\n    static_configs:\n      - targets: ['{}']\n",
            exporter.addr
        ),
    )
    .unwrap();
    let web = format!("127.0.0.1:{}", free_port());
    let mut prometheus = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
        .arg(format!("--web.listen-address={web}"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("prometheus.log")).unwrap())
        .spawn()
        .expect("prometheus (Debian package; scripts/install-deps.sh installs it)");
    let result = std::panic::catch_unwind(|| {
        let query = |q: &str| -> Option<f64> {
            let q: String = q
                .bytes()
                .map(|b| if b.is_ascii_alphanumeric() || b"_.".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
                .collect();
            // Prometheus may not listen yet (it refuses until it has
            // started): no reading this time.
            TcpStream::connect(&web).ok()?;
            let (_, body) = get(&web, &format!("/api/v1/query?query={q}"), None);
            let v: serde_json::Value = serde_json::from_str(&body).ok()?;
            v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
        };
        // Three readings through Prometheus, each after at least one more
        // scrape: the machine's softirq time only grows.
        let deadline = Instant::now() + Duration::from_secs(40);
        let mut readings: Vec<f64> = Vec::new();
        while readings.len() < 3 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1500));
            if let Some(v) = query("sum(irqlab_softirq_seconds_total)") {
                if readings.last().is_none_or(|&last| v > last) {
                    readings.push(v);
                }
            }
        }
        assert_eq!(readings.len(), 3, "softirq counter readings through Prometheus: {readings:?}");
        assert_eq!(query("up{job=\"irqlab\"}"), Some(1.0), "Prometheus does not see the target up");
        let scrapes = query("count_over_time(up{job=\"irqlab\"}[5m])").unwrap_or(0.0);
        assert!(scrapes >= 3.0, "Prometheus scraped {scrapes} times");
        // The latency histogram read as one: its count grows between two
        // readings, and PromQL's quantile over its buckets is a latency.
        let count = || query("irqlab_timer_latency_seconds_count{cpu=\"0\"}");
        let first = count().unwrap_or(0.0);
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut later = first;
        while later <= first && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1500));
            later = count().unwrap_or(first);
        }
        assert!(later > first && first >= 0.0, "the latency histogram's count through Prometheus: {first} then {later}");
        let p99 = query("histogram_quantile(0.99, irqlab_timer_latency_seconds_bucket{cpu=\"0\"})");
        eprintln!("through Prometheus: CPU 0's timer latency count {first} then {later}, p99 {p99:?} s");
        assert!(p99.is_some_and(|p| p > 0.0 && p < 1.0), "histogram_quantile over the buckets: {p99:?}");
    });
    let _ = prometheus.kill();
    let _ = prometheus.wait();
    if let Err(e) = result {
        let log = std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default();
        eprintln!("prometheus log (tail):\n{}", log.lines().rev().take(20).collect::<Vec<_>>().join("\n"));
        std::panic::resume_unwind(e);
    }
}

/// Every metric the Grafana dashboard queries is one the exporter serves
/// (with `--probe` and `--latency`: their figures after one round each).
#[test]
fn the_dashboard_queries_only_served_metrics() {
    use irqlab_measure::accounting::report::{CpuReport, TaskReport};
    use irqlab_measure::export::{LatencyFigures, ProbeFigures};
    let report = irqlab_measure::accounting::Report {
        cpus: vec![CpuReport { softirq_by_vector_ns: [("NET_RX".to_string(), 1)].into(), ..Default::default() }],
        tasks: vec![TaskReport { tid: 5, ..Default::default() }],
        ..Default::default()
    };
    let mut probe = ProbeFigures::new(1);
    probe.record(&[irqlab_analysis::curve::CurvePoint { window_ns: 100_000, max_load: 0.1 }]);
    let snapshot = irqlab_measure::export::Snapshot {
        probe: Some(probe),
        latency: Some(LatencyFigures::new(0)),
        ..irqlab_measure::export::Snapshot::of(&report, 10)
    };
    let served = snapshot.encode();
    let dashboard = std::fs::read_to_string(common::repo_file("docs/grafana-irqlab.json")).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&dashboard).unwrap();
    let mut checked = 0;
    for target in doc["panels"].as_array().unwrap().iter().flat_map(|p| p["targets"].as_array().unwrap()) {
        let expr = target["expr"].as_str().unwrap();
        for name in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| w.starts_with("irqlab_")) {
            assert!(served.lines().any(|l| l.starts_with(name)), "dashboard queries {name}, which is not served:\n{served}");
            checked += 1;
        }
    }
    assert!(checked >= 9, "only {checked} metric references found");
}
