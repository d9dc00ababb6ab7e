//! `irqlab export`: the accounting's figures on `/metrics` in the
//! Prometheus / OpenMetrics text format, for the monitoring stack people
//! already run. The BPF accounting runs for the exporter's whole life; every
//! `interval` its report becomes a [`Snapshot`], which each scrape encodes
//! (a scrape never touches the BPF maps, so a thousand scrapes cost the
//! kernel nothing).
//!
//! Label cardinality is bounded: per CPU and softirq vector (both bounded
//! by the machine), and per task only for the `top` tasks by stolen plus
//! served time, the rest summed into `task="other"`. A thousand short-lived
//! processes therefore add no series.
//!
//! Optionally the interference probe and a timer latency thread run beside
//! it, each on a CPU of its own, in rounds of one interval ([`rounds`]);
//! each completed round updates what scrapes get. Whoever changes the
//! figures encodes them once ([`Published`]); a scrape copies the text.

pub mod rounds;

use crate::accounting::{self, Options, Report, Session, Storage};
use irqlab_host::error::{Error, Result};
use irqlab_host::stop::StopOnDrop;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
pub use rounds::{LatencyFigures, ProbeFigures, WindowLoad};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What to serve and how often to refresh it.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    /// How often the accounting is read into a new snapshot.
    pub interval_ns: u64,
    /// Tasks with their own series; the rest are `task="other"`.
    pub top: usize,
    /// HTTP worker threads (concurrent scrapes beyond this wait).
    pub workers: usize,
    /// Run the interference probe on this CPU in rounds of one interval.
    /// It takes the CPU: it spins there at SCHED_FIFO, RT throttling lifted
    /// for each round where allowed.
    pub probe_cpu: Option<usize>,
    /// Run a timer latency thread (cyclictest's method) on this CPU in
    /// rounds of one interval; not the probe's CPU, where it would starve.
    pub latency_cpu: Option<usize>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 9464)),
            interval_ns: 5_000_000_000,
            top: 10,
            workers: 4,
            probe_cpu: None,
            latency_cpu: None,
        }
    }
}

impl Config {
    /// Exit 2 naming the parameter (`probe_cpu`, `latency_cpu`,
    /// `interval`) for a CPU that is not online, one CPU for both, or
    /// rounds too short to measure anything.
    pub fn check(&self) -> Result<()> {
        if let Some(cpu) = self.probe_cpu {
            irqlab_host::rt::require_online(cpu, "probe_cpu")?;
        }
        if let Some(cpu) = self.latency_cpu {
            irqlab_host::rt::require_online(cpu, "latency_cpu")?;
        }
        if let (Some(p), Some(l)) = (self.probe_cpu, self.latency_cpu) {
            if p == l {
                return Err(Error::Invalid(format!(
                    "probe_cpu and latency_cpu are both {p}: the probe spins there at SCHED_FIFO and would starve the latency thread"
                )));
            }
        }
        let rounds = self.probe_cpu.is_some() || self.latency_cpu.is_some();
        if rounds && self.interval_ns < rounds::MIN_ROUND_NS {
            return Err(Error::Invalid(format!(
                "interval {}: the probe and latency rounds last one interval, at least {}",
                irqlab_analysis::units::format_ns(self.interval_ns),
                irqlab_analysis::units::format_ns(rounds::MIN_ROUND_NS)
            )));
        }
        Ok(())
    }

    /// What the measurements need, exit 3 naming the first missing thing.
    fn check_prerequisites(&self) -> Result<()> {
        accounting::check_prerequisites()?;
        if self.probe_cpu.is_some() {
            crate::probe::check_prerequisites(crate::probe::Policy::Fifo)?;
        }
        if self.latency_cpu.is_some() {
            crate::latency::realtime::check_prerequisites(crate::latency::Config::default().priority)?;
        }
        Ok(())
    }
}

/// One task's series: who, and its cumulative times in seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskFigures {
    /// `comm/tid`, or `other`.
    pub task: String,
    pub stolen_s: f64,
    pub served_s: f64,
    pub run_s: f64,
}

/// The figures one scrape serves, cumulative since the exporter started.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub duration_s: f64,
    /// (cpu, mode, seconds): run, idle, hardirq, softirq, steal.
    pub cpu_seconds: Vec<(usize, &'static str, f64)>,
    /// (cpu, vector, seconds).
    pub softirq_seconds: Vec<(usize, String, f64)>,
    pub tasks: Vec<TaskFigures>,
    /// Once the probe has completed a round.
    pub probe: Option<ProbeFigures>,
    /// Once the latency thread has completed a round.
    pub latency: Option<LatencyFigures>,
}

impl Snapshot {
    /// The report's figures with at most `top` tasks of their own.
    pub fn of(report: &Report, top: usize) -> Snapshot {
        let s = |ns: u64| ns as f64 / 1e9;
        let mut cpu_seconds = Vec::new();
        let mut softirq_seconds = Vec::new();
        for c in &report.cpus {
            for (mode, ns) in [
                ("run", c.time.run_ns),
                ("idle", c.time.idle_ns),
                ("hardirq", c.time.hardirq_ns),
                ("softirq", c.time.softirq_ns),
                ("steal", c.steal_ns),
            ] {
                cpu_seconds.push((c.cpu, mode, s(ns)));
            }
            for (vector, ns) in &c.softirq_by_vector_ns {
                softirq_seconds.push((c.cpu, vector.clone(), s(*ns)));
            }
        }
        let mut ranked: Vec<_> = report.tasks.iter().filter(|t| t.tid != 0).collect();
        ranked.sort_by_key(|t| std::cmp::Reverse(t.time.stolen_ns + t.served_softirq_ns() + t.served_by_thread_ns));
        let mut tasks: Vec<TaskFigures> = ranked
            .iter()
            .take(top)
            .map(|t| TaskFigures {
                task: format!("{}/{}", t.comm, t.tid),
                stolen_s: s(t.time.stolen_ns),
                served_s: s(t.served_softirq_ns() + t.served_by_thread_ns),
                run_s: s(t.time.run_ns),
            })
            .collect();
        let rest = &ranked[top.min(ranked.len())..];
        tasks.push(TaskFigures {
            task: "other".into(),
            stolen_s: s(rest.iter().map(|t| t.time.stolen_ns).sum()),
            served_s: s(rest.iter().map(|t| t.served_softirq_ns() + t.served_by_thread_ns).sum()),
            run_s: s(rest.iter().map(|t| t.time.run_ns).sum()),
        });
        Snapshot { duration_s: s(report.duration_ns), cpu_seconds, softirq_seconds, tasks, probe: None, latency: None }
    }

    /// The snapshot in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Figures(self.clone())));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).expect("writing to a String cannot fail");
        out
    }
}

#[derive(Debug)]
struct Figures(Snapshot);

impl Collector for Figures {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let f = &self.0;
        let by_mode: Vec<_> =
            f.cpu_seconds.iter().map(|(cpu, mode, s)| ([("cpu", cpu.to_string()), ("mode", mode.to_string())], *s)).collect();
        counters(
            &mut encoder,
            "irqlab_cpu_seconds",
            "CPU time by mode since the exporter started (steal lies inside the other modes)",
            &by_mode,
        )?;
        let by_vector: Vec<_> =
            f.softirq_seconds.iter().map(|(cpu, vector, s)| ([("cpu", cpu.to_string()), ("vector", vector.clone())], *s)).collect();
        counters(&mut encoder, "irqlab_softirq_seconds", "Softirq time by CPU and vector since the exporter started", &by_vector)?;
        // Per task: gauges, not counters: a task entering the top N takes
        // its time out of "other", which may then fall.
        for (name, help, value) in [
            (
                "irqlab_task_stolen_seconds",
                "Hard-IRQ and softirq time that ran while the task was current, since the exporter started (top tasks, rest in task=\"other\")",
                (|t: &TaskFigures| t.stolen_s) as fn(&TaskFigures) -> f64,
            ),
            (
                "irqlab_task_served_seconds",
                "Interrupt work done on the task's behalf, since the exporter started (top tasks, rest in task=\"other\")",
                |t: &TaskFigures| t.served_s,
            ),
            ("irqlab_task_run_seconds", "Time the task ran in its own context, since the exporter started", |t: &TaskFigures| t.run_s),
        ] {
            let gauge = ConstGauge::new(0.0f64);
            let mut family = encoder.encode_descriptor(name, help, None, gauge.metric_type())?;
            for t in &f.tasks {
                ConstGauge::new(value(t)).encode(family.encode_family(&[("task", t.task.clone())])?)?;
            }
        }
        let gauge = ConstGauge::new(f.duration_s);
        gauge.encode(encoder.encode_descriptor(
            "irqlab_measurement_seconds",
            "How long the accounting has run",
            None,
            gauge.metric_type(),
        )?)?;
        if let Some(probe) = &f.probe {
            probe.encode(&mut encoder)?;
        }
        if let Some(latency) = &f.latency {
            latency.encode(&mut encoder)?;
        }
        Ok(())
    }
}

/// OpenMetrics text turned into the classic Prometheus text format 0.0.4
/// (what `promtool check metrics` and clients that do not ask for
/// OpenMetrics read): a counter family's HELP and TYPE name its `_total`
/// series, and there is no `# EOF`. Samples are the same lines.
pub fn classic_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> =
        openmetrics.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter")).collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ')?;
            counters.contains(name).then(|| format!("{prefix}{name}_total {tail}"))
        });
        out.push_str(renamed.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

/// One counter family: its series are (two labels, seconds).
fn counters(encoder: &mut DescriptorEncoder, name: &str, help: &str, series: &[([(&str, String); 2], f64)]) -> std::fmt::Result {
    let mut family = encoder.encode_descriptor(name, help, None, ConstCounter::new(0.0f64).metric_type())?;
    for (labels, seconds) in series {
        ConstCounter::new(*seconds).encode(family.encode_family(labels)?)?;
    }
    Ok(())
}

/// What the server did, for the caller's summary.
#[derive(Debug, Clone, Default)]
pub struct Served {
    pub scrapes: u64,
    pub refreshes: u64,
    /// Rounds the probe and the latency thread completed.
    pub probe_rounds: u64,
    pub latency_rounds: u64,
}

/// The figures scrapes serve and their text, encoded by whoever changes
/// the figures: a scrape only copies the text, never waits for an encoding
/// or a measurement.
struct Published {
    figures: Mutex<Snapshot>,
    text: Mutex<String>,
}

impl Published {
    fn new(figures: Snapshot) -> Published {
        let text = Mutex::new(figures.encode());
        Published { figures: Mutex::new(figures), text }
    }

    /// Changes the figures and publishes their new text.
    fn update(&self, change: impl FnOnce(&mut Snapshot)) {
        let mut figures = lock(&self.figures);
        change(&mut figures);
        let text = figures.encode();
        *lock(&self.text) = text;
    }

    fn text(&self) -> String {
        lock(&self.text).clone()
    }
}

/// A poisoned lock still holds a whole value here (every writer replaces
/// it at once).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// Checks the config (exit 2) and the privileges (exit 3), binds
/// `config.listen` (exit 2 naming it when taken), then serves until `stop`
/// or until a measuring thread fails (its error is returned). `on_ready`
/// gets the bound address (port 0 picks a free one).
pub fn serve(config: &Config, stop: &AtomicBool, on_ready: impl FnOnce(SocketAddr)) -> Result<Served> {
    config.check()?;
    config.check_prerequisites()?;
    let server = tiny_http::Server::http(config.listen).map_err(|e| match e.downcast_ref::<std::io::Error>() {
        Some(io) if io.kind() == std::io::ErrorKind::AddrInUse => {
            Error::Invalid(format!("listen address {}: already in use", config.listen))
        }
        _ => Error::Invalid(format!("listen address {}: {e}", config.listen)),
    })?;
    let bound = server.server_addr().to_ip().ok_or_else(|| Error::Failed("the server has no IP address".into()))?;
    let mut storage = Storage::default();
    let mut session = Session::start(&mut storage, Options::default())?;
    let published = &Published::new(Snapshot::of(&session.report(false)?, config.top));
    let scrapes = &AtomicU64::new(0);
    // Everything stops when this is set: by the refresh loop on `stop`, or
    // by a measuring thread that failed.
    let halt = &AtomicBool::new(false);
    on_ready(bound);
    let interval_ns = config.interval_ns;
    let (refreshes, probe_rounds, latency_rounds) = std::thread::scope(|s| -> Result<_> {
        for _ in 0..config.workers.max(1) {
            s.spawn(|| answer_scrapes(&server, published, scrapes, halt));
        }
        let probe = config.probe_cpu.map(|cpu| s.spawn(move || rounds::probe_rounds(cpu, interval_ns, published, halt)));
        let latency = config.latency_cpu.map(|cpu| s.spawn(move || rounds::latency_rounds(cpu, interval_ns, published, halt)));
        let refreshes = refresh(&mut session, config, published, stop, halt);
        Ok((refreshes?, joined(probe, "probe")?, joined(latency, "latency")?))
    })?;
    Ok(Served { scrapes: scrapes.load(Ordering::Relaxed), refreshes, probe_rounds, latency_rounds })
}

/// Reads the accounting into the published figures every interval until
/// `stop` or `halt`; sets `halt` on the way out. Returns the refreshes.
fn refresh(session: &mut Session<'_>, config: &Config, published: &Published, stop: &AtomicBool, halt: &AtomicBool) -> Result<u64> {
    let _halt = StopOnDrop([halt]);
    let interval = Duration::from_nanos(config.interval_ns);
    let mut next = Instant::now() + interval;
    let mut refreshes = 0;
    while !stop.load(Ordering::SeqCst) && !halt.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50));
        if Instant::now() >= next {
            next += interval;
            let fresh = Snapshot::of(&session.report(false)?, config.top);
            // The measuring threads' figures stay; they change them.
            published.update(|f| *f = Snapshot { probe: f.probe.take(), latency: f.latency.take(), ..fresh });
            refreshes += 1;
        }
    }
    Ok(refreshes)
}

/// A measuring thread's rounds (0 when it was not asked for).
fn joined(thread: Option<std::thread::ScopedJoinHandle<'_, Result<u64>>>, what: &str) -> Result<u64> {
    match thread {
        None => Ok(0),
        Some(t) => t.join().unwrap_or_else(|_| Err(Error::Failed(format!("the {what} thread panicked")))),
    }
}

fn answer_scrapes(server: &tiny_http::Server, published: &Published, scrapes: &AtomicU64, stop: &AtomicBool) {
    let openmetrics: tiny_http::Header =
        "Content-Type: application/openmetrics-text; version=1.0.0; charset=utf-8".parse().expect("valid header");
    let classic: tiny_http::Header = "Content-Type: text/plain; version=0.0.4; charset=utf-8".parse().expect("valid header");
    while !stop.load(Ordering::SeqCst) {
        let Ok(Some(request)) = server.recv_timeout(Duration::from_millis(100)) else { continue };
        // A client that went away mid-response is its own problem: the
        // error is dropped and the next request served.
        let _ = match (request.method(), request.url()) {
            (tiny_http::Method::Get, "/metrics") => {
                scrapes.fetch_add(1, Ordering::Relaxed);
                let text = published.text();
                // Prometheus asks for OpenMetrics; everyone else gets the
                // classic format.
                let wants_openmetrics =
                    request.headers().iter().any(|h| h.field.equiv("Accept") && h.value.as_str().contains("application/openmetrics-text"));
                if wants_openmetrics {
                    request.respond(tiny_http::Response::from_string(text).with_header(openmetrics.clone()))
                } else {
                    request.respond(tiny_http::Response::from_string(classic_text(&text)).with_header(classic.clone()))
                }
            }
            (tiny_http::Method::Get, "/") => request.respond(
                tiny_http::Response::from_string("<html><body><a href=\"/metrics\">/metrics</a></body></html>")
                    .with_header("Content-Type: text/html".parse::<tiny_http::Header>().expect("valid header")),
            ),
            _ => request.respond(tiny_http::Response::from_string("not found\n").with_status_code(404)),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounting::report::{CpuReport, TaskReport};

    fn task(tid: u32, stolen_ns: u64) -> TaskReport {
        let time = irqlab_analysis::cpu_time::TaskTime { stolen_ns, ..Default::default() };
        TaskReport { tid, tgid: tid, comm: format!("t{tid}"), time, ..Default::default() }
    }

    #[test]
    fn at_most_top_tasks_plus_other_whatever_the_number_of_processes() {
        let report = Report { tasks: (1..=1000).map(|tid| task(tid, tid as u64 * 1000)).collect(), ..Default::default() };
        let snap = Snapshot::of(&report, 5);
        assert_eq!(snap.tasks.len(), 6);
        assert_eq!(snap.tasks[0].task, "t1000/1000");
        let other = snap.tasks.last().unwrap();
        assert_eq!(other.task, "other");
        let total: u64 = (1..=995).map(|t| t * 1000).sum();
        assert!((other.stolen_s - total as f64 / 1e9).abs() < 1e-12);
    }

    #[test]
    fn encodes_openmetrics_with_counters_and_gauges() {
        let report = Report {
            cpus: vec![CpuReport {
                cpu: 1,
                time: irqlab_analysis::cpu_time::CpuTime { softirq_ns: 2_000_000_000, ..Default::default() },
                softirq_by_vector_ns: [("NET_RX".to_string(), 1_500_000_000)].into(),
                ..Default::default()
            }],
            tasks: vec![task(7, 3_000_000)],
            ..Default::default()
        };
        let text = Snapshot::of(&report, 10).encode();
        assert!(text.contains("# TYPE irqlab_cpu_seconds counter"), "{text}");
        assert!(text.contains("irqlab_cpu_seconds_total{cpu=\"1\",mode=\"softirq\"} 2.0"), "{text}");
        assert!(text.contains("irqlab_softirq_seconds_total{cpu=\"1\",vector=\"NET_RX\"} 1.5"), "{text}");
        assert!(text.contains("irqlab_task_stolen_seconds{task=\"t7/7\"} 0.003"), "{text}");
        assert!(text.trim_end().ends_with("# EOF"), "{text}");
        let classic = classic_text(&text);
        assert!(classic.contains("# HELP irqlab_cpu_seconds_total CPU time"), "{classic}");
        assert!(classic.contains("# TYPE irqlab_softirq_seconds_total counter\n"), "{classic}");
        assert!(classic.contains("# TYPE irqlab_task_stolen_seconds gauge\n"), "{classic}");
        assert!(!classic.contains("# EOF"), "{classic}");
        assert_eq!(classic.lines().filter(|l| !l.starts_with('#')).count(), text.lines().filter(|l| !l.starts_with('#')).count());
    }
}
