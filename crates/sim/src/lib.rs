//! Deterministic discrete-event simulator of a Linux-like kernel: hard IRQs,
//! softirqs, NAPI, ksoftirqd, threaded IRQs, schedulers and servers.
//!
//! - [`engine`]: integer-ns event queue with deterministic tie-breaking and
//!   one seeded random stream per named source.
//! - [`kernel`]: the CPU (hard IRQ > softirq > task contexts), the main
//!   loop, accounting; [`machine`]: several CPUs stepped together (RPS,
//!   IPIs).
//! - [`softirq`]: softirq models (linux-2.4, linux-2.6, linux-modern,
//!   threaded) and the [`softirq::BottomHalfPolicy`] plug point;
//!   [`policy`] is the registry of policies.
//! - [`sched`]: FIFO/RR, CFS-like and Linux 2.4 epoch fair classes,
//!   SCHED_DEADLINE; [`server`]: sporadic, polling, deferrable servers.
//! - [`net`]: NIC, sockets, traffic; [`net_tx`]: NIC transmit (tx queue,
//!   NET_TX); [`device`]: the plug point for other
//!   devices; [`workload`]: task behaviors; [`probe`]: simulated
//!   interference probe.
//! - [`scenario`]: TOML scenarios; [`results`]: the `irqlab/sim/v1`
//!   document; [`trace`]: Chrome trace export.

pub mod bench;
pub mod device;
pub mod disk;
pub mod engine;
pub mod idletime;
pub mod irq_source;
pub mod kernel;
pub mod machine;
pub mod metrics;
pub mod net;
pub mod net_tx;
pub mod policy;
pub mod probe;
pub mod results;
pub mod scenario;
pub mod sched;
pub mod server;
pub mod softirq;
pub mod task;
pub mod trace;
pub mod workload;

pub use kernel::{Sim, SimError};
pub use results::SimResult;
pub use scenario::{RunParams, Scenario};

use irqlab_analysis::Nanos;
use std::sync::atomic::AtomicBool;

/// What one run produces.
pub struct RunOutput {
    pub result: SimResult,
    /// Chrome trace-event JSON, when asked for.
    pub trace: Option<serde_json::Value>,
}

/// Runs a scenario: builds a fresh simulator, runs the warm-up (statistics
/// then restart) and the rest, and returns the result. `progress` gets the
/// simulated time now and then; `stop` ends the run early (the result is
/// then marked incomplete).
pub fn run_scenario(
    sc: &Scenario,
    p: RunParams,
    want_trace: bool,
    stop: &AtomicBool,
    progress: impl FnMut(Nanos),
) -> Result<RunOutput, RunError> {
    if sc.cores() > 1 {
        // One CPU's run of a machine of several would be a silent part of it.
        return Err(RunError::Input(irqlab_analysis::InputError::new(format!(
            "{}: cores = {}: a scenario of several CPUs runs with run_machine (`irqlab sim` does so)",
            sc.file,
            sc.cores()
        ))));
    }
    let mut sim = sc.build(p)?;
    if want_trace {
        sim.trace = Some(trace::Trace::default());
    }
    if p.warmup > 0 {
        sim.q.schedule_at(p.warmup, kernel::Ev::WarmupEnd);
    }
    let complete = sim.run(p.duration, stop, progress)?;
    let result = sim.result(&sc.name(), sc.description(), p.duration, p.warmup, complete);
    let trace = sim.trace.as_ref().map(|t| t.to_json());
    Ok(RunOutput { result, trace })
}

/// Runs a scenario of several CPUs (`cores > 1`; any count works) as
/// [`run_scenario`] runs one.
pub fn run_machine(
    sc: &Scenario,
    p: RunParams,
    stop: &AtomicBool,
    progress: impl FnMut(Nanos),
) -> Result<machine::MachineResult, RunError> {
    let mut m = sc.build_machine(p)?;
    if p.warmup > 0 {
        m.warmup_until(p.warmup);
    }
    let complete = m.run(p.duration, stop, progress)?;
    Ok(m.result(&sc.name(), sc.description(), p.duration, p.warmup, complete))
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Input(#[from] irqlab_analysis::InputError),
    #[error(transparent)]
    Sim(#[from] SimError),
}
