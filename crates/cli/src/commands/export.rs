//! `irqlab export`: serves the BPF accounting's figures on `/metrics` for
//! Prometheus. Wiring only: the exporter is `irqlab_live::export`.

use crate::error::{CliError, Status};
use crate::flags;
use irqlab_live::export::{self, Config};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(clap::Args)]
pub struct Args {
    /// Address to serve /metrics on (loopback unless another is given;
    /// port 0 picks a free one and prints it)
    #[arg(long, default_value = "127.0.0.1:9464", value_name = "ADDR:PORT")]
    listen: SocketAddr,
    /// How often the accounting is read into what scrapes get
    #[arg(long, default_value = "5s", value_name = "D", value_parser = flags::positive_duration_ns)]
    interval: u64,
    /// Tasks with series of their own; the rest are summed as task="other"
    #[arg(long, default_value_t = 10, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1000))]
    top: u16,
    /// Stop after this long (default: until Ctrl-C or SIGTERM)
    #[arg(long, value_name = "D", value_parser = flags::positive_duration_ns)]
    duration: Option<u64>,
}

pub fn run(args: Args) -> Result<Status, CliError> {
    let (interval_ns, duration_ns) = (args.interval, args.duration);
    let config = Config { listen: args.listen, interval_ns, top: args.top as usize, ..Config::default() };
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
        let served = export::serve(&config, &stop, |addr| eprintln!("serving http://{addr}/metrics"));
        timer_done.store(true, Ordering::SeqCst);
        served
    })?;
    eprintln!("served {} scrapes, {} refreshes", served.scrapes, served.refreshes);
    Ok(Status::Success)
}
