//! One accounting measurement with the shape every live measurement has:
//! `measure(&Config, &stop, on_tick) -> Result<Report>`. Loads and attaches
//! the BPF programs, waits out the duration (or `stop`), hands an interim
//! report to `on_tick` every `tick_ns` when asked to, and returns the final
//! report, marked incomplete when `stop` ended it.

use super::{check_prerequisites, Options, Report, Session, Storage};
use irqlab_host::error::Result;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What to measure, with the defaults `irqlab measure accounting` uses.
#[derive(Debug, Clone)]
pub struct Config {
    /// How long to measure.
    pub duration_ns: u64,
    /// How often `on_tick` gets an interim report; `None`: never (an
    /// interim report costs a snapshot of every map).
    pub tick_ns: Option<u64>,
    /// Also run a plain softirq_entry/exit sum to compare the totals with.
    pub reference_softirq_sum: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config { duration_ns: 10_000_000_000, tick_ns: None, reference_softirq_sum: false }
    }
}

/// Measures for `config.duration_ns` or until `stop` is set.
pub fn measure(config: &Config, stop: &AtomicBool, mut on_tick: impl FnMut(&Report)) -> Result<Report> {
    check_prerequisites()?;
    let mut storage = Storage::default();
    let mut session = Session::start(&mut storage, Options { reference_softirq_sum: config.reference_softirq_sum })?;
    let started = Instant::now();
    let end = started + Duration::from_nanos(config.duration_ns);
    let tick = config.tick_ns.map(Duration::from_nanos);
    let mut next_tick = tick.map(|t| started + t);
    while Instant::now() < end && !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50).min(end.saturating_duration_since(Instant::now())));
        if let (Some(due), Some(tick)) = (next_tick, tick) {
            if Instant::now() >= due {
                next_tick = Some(due + tick);
                on_tick(&session.report(false)?);
            }
        }
    }
    session.report(!stop.load(Ordering::SeqCst))
}
