//! `irqlab export`: serves the BPF accounting's figures on `/metrics` for
//! Prometheus, and optionally the probe's max load and timer latency
//! measured beside it. Wiring only: the exporter is `irqlab_measure::export`.

use crate::error::{CliError, Status};
use crate::flags;
use irqlab_measure::export::{self, Config};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(clap::Args)]
pub struct Args {
    /// Address to serve /metrics on (loopback unless another is given;
    /// port 0 picks a free one and prints it)
    #[arg(long, default_value = "127.0.0.1:9464", value_name = "ADDR:PORT")]
    listen: SocketAddr,
    /// How often the accounting is read into what scrapes get; also how
    /// long each --probe / --latency round lasts (at least 10ms with them)
    #[arg(long, default_value = "5s", value_name = "D", value_parser = flags::positive_duration_ns)]
    interval: u64,
    /// Tasks with series of their own; the rest are summed as task="other"
    #[arg(long, default_value_t = 10, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1000))]
    top: u16,
    /// Also run the interference probe on this CPU in back-to-back rounds of
    /// one --interval, serving each round's max load per window (100us to
    /// 100ms) and the largest since start. It takes the CPU: the probe spins
    /// there at SCHED_FIFO with RT throttling lifted for each round, so
    /// other tasks barely run on it
    #[arg(long, value_name = "CPU", value_parser = flags::one_cpu)]
    probe: Option<usize>,
    /// Also measure timer latency on this CPU (cyclictest's method: SCHED_FIFO
    /// 80, 1 ms timer) in rounds of one --interval, served as a cumulative
    /// histogram. Not the --probe CPU
    #[arg(long, value_name = "CPU", value_parser = flags::one_cpu)]
    latency: Option<usize>,
    /// Stop after this long (default: until Ctrl-C or SIGTERM)
    #[arg(long, value_name = "D", value_parser = flags::positive_duration_ns)]
    duration: Option<u64>,
}

/// The library's parameter names and the flags that set them.
const FLAGS: [(&str, &str); 3] = [("probe_cpu", "--probe"), ("latency_cpu", "--latency"), ("interval", "--interval")];

pub fn run(args: Args) -> Result<Status, CliError> {
    let (interval_ns, duration_ns) = (args.interval, args.duration);
    if let (Some(p), Some(l)) = (args.probe, args.latency) {
        if p == l {
            return Err(irqlab_host::Error::Invalid(format!(
                "--probe {p} and --latency {l}: the same CPU; the probe spins there at SCHED_FIFO and would starve the latency thread (give them two CPUs)"
            ))
            .into());
        }
    }
    let config = Config {
        listen: args.listen,
        interval_ns,
        top: args.top as usize,
        probe_cpu: args.probe,
        latency_cpu: args.latency,
        ..Config::default()
    };
    let stop = crate::signal::stop_flag();
    let timer_done = AtomicBool::new(false);
    let served = std::thread::scope(|s| {
        if let Some(ns) = duration_ns {
            let stop = &stop;
            let done = &timer_done;
            s.spawn(move || {
                let end = std::time::Instant::now() + std::time::Duration::from_nanos(ns);
                while std::time::Instant::now() < end && !done.load(Ordering::SeqCst) {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                stop.store(true, Ordering::SeqCst);
            });
        }
        let served = export::serve(&config, &stop, |addr| eprintln!("serving http://{addr}/metrics"))
            .map_err(|e| super::measure::name_flags(e, &FLAGS));
        timer_done.store(true, Ordering::SeqCst);
        served
    })?;
    eprintln!("served {} scrapes, {} refreshes", served.scrapes, served.refreshes);
    if args.probe.is_some() || args.latency.is_some() {
        eprintln!("completed {} probe rounds, {} latency rounds", served.probe_rounds, served.latency_rounds);
    }
    Ok(Status::Success)
}
