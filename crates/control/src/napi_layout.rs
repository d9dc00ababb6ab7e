//! The NAPI kthreads a controller holds (bh-budget, process-aware): found,
//! with threaded NAPI switched on through the journal when it was off,
//! then pinned to the controlled CPU and set to the controller's starting
//! policy, each change journalled; at the end restored newest first, the
//! kthreads' settings before threaded NAPI goes back off.

use crate::controller_thread::{self, Cost};
use irqlab_host::journal::sched::SchedAttr;
use irqlab_host::journal::threads::Thread;
use irqlab_host::journal::{self, Applied};
use irqlab_host::rt::monotonic_ns;
use irqlab_host::Result;

pub struct NapiLayout {
    pub threads: Vec<Thread>,
    guards: Vec<Applied>,
    threaded: Option<Applied>,
}

impl NapiLayout {
    /// `dev`'s NAPI kthreads, nothing changed yet but threaded NAPI.
    pub fn find(dev: &str) -> Result<NapiLayout> {
        let (threads, threaded) = journal::netdev::napi_kthreads(dev)?;
        Ok(NapiLayout { threads, guards: Vec::new(), threaded })
    }

    /// Pins every kthread to `cpu` and sets `attr`, where given.
    pub fn hold(&mut self, cpu: Option<usize>, attr: Option<SchedAttr>) -> Result<()> {
        let cpus = cpu.map(|c| vec![c]);
        self.guards.extend(journal::netdev::hold_kthreads(&self.threads, cpus.as_deref(), attr)?);
        Ok(())
    }

    /// Restores what was changed; whether this run had switched threaded
    /// NAPI on (reported as `switched_threaded_on`).
    pub fn restore(self) -> Result<bool> {
        journal::restore_all(self.guards)?;
        let switched_on = self.threaded.is_some();
        if let Some(g) = self.threaded {
            g.restore()?;
        }
        Ok(switched_on)
    }
}

/// A controller's run over a device's NAPI kthreads: its loop's result,
/// what its thread cost, and what was held.
pub struct HeldRun<T> {
    pub result: T,
    pub cost: Cost,
    pub threads: Vec<Thread>,
    /// From the kthreads' hold to the end of the loop.
    pub held_ns: u64,
    /// Whether the run switched threaded NAPI on (and back off).
    pub switched_threaded_on: bool,
}

/// The one lifecycle of a controller of `dev`'s NAPI kthreads (bh-budget,
/// process-aware): `--cpu` online, the kthreads found, its
/// `prerequisites` (privileges, BPF) checked before anything changes,
/// the kthreads held (pinned to `cpu`, set to `attr`), `work` run on the
/// controller's thread (SCHED_FIFO 99 off `cpu`, memory locked) with the
/// held threads, and everything restored before the result is given back
/// (a restore's error is the run's error; the loop's comes after it).
pub fn control<T: Send>(
    name: &str,
    dev: &str,
    cpu: Option<usize>,
    attr: Option<SchedAttr>,
    prerequisites: impl FnOnce() -> Result<()>,
    work: impl FnOnce(&[Thread]) -> Result<T> + Send,
) -> Result<HeldRun<T>> {
    if let Some(cpu) = cpu {
        irqlab_host::rt::require_online(cpu, "--cpu")?;
    }
    let mut layout = NapiLayout::find(dev)?;
    prerequisites()?;
    layout.hold(cpu, attr)?;
    let threads = layout.threads.clone();
    let started = monotonic_ns();
    // Off the kthreads' CPU, as every controller.
    let off: Vec<usize> = cpu.into_iter().collect();
    let setup = controller_thread::Setup { priority: 99, off: &off, lock_memory: true };
    let looped = controller_thread::run(name, setup, || work(&threads));
    let held_ns = monotonic_ns() - started;
    let switched_threaded_on = layout.restore()?;
    let (result, cost) = looped?;
    Ok(HeldRun { result, cost, threads, held_ns, switched_threaded_on })
}
