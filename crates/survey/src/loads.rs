//! The loads a survey measures under, started around one measurement and
//! stopped (and every change undone) when the [`RunningLoad`] drops.
//!
//! The network load is the load-bounds paper's setup on the testbed: UDP
//! datagrams from host b, as fast as one sender goes, into the root
//! namespace, where the root side's threaded-NAPI kthread does the receive
//! work. That kthread runs at SCHED_FIFO 50 (PREEMPT_RT's default for
//! interrupt threads) on the CPU being measured, and the probe just below
//! it, so the probe sees what the driver takes, as the paper measured it.
//! Both changes go through the control journal (undone on every exit path,
//! named by `irqlab control status` after a kill). The sender is pinned to
//! another CPU, so it is not measured as the driver. A kthread setting a
//! profile keeps in force (`control apply`, held or persisted) is left as
//! the profile sets it: a survey after applying measures the profile.

use crate::doc::Load;
use irqlab_host::error::{Error, Result};
use irqlab_host::journal::sched::SchedAttr;
use irqlab_host::journal::threads::Thread;
use irqlab_host::journal::{self, Applied, Object, Value};
use irqlab_host::testbed::{self, Side, Testbed};
use irqlab_host::{rt, testbed::NsThread};
use irqlab_measure::load::{self as live_load, LoadKind};
use irqlab_measure::traffic::{self, Kind, Plan, Schedule};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The testbed device whose NAPI kthread carries the network load.
pub const NET_DEVICE: &str = "irqlab-b";
/// The driver thread's priority during the network load.
pub const DRIVER_PRIORITY: u32 = 50;
/// Time between datagrams asked of the sender: far more than it manages,
/// so it sends as fast as it goes.
const NET_INTERVAL_NS: u64 = 2_000;
/// How long a load runs before a measurement starts.
pub const RAMP: Duration = Duration::from_millis(300);

/// A load running until dropped.
pub struct RunningLoad {
    /// Tells the load's threads to stop; dropped first.
    stop: Arc<AtomicBool>,
    worker: Option<Worker>,
    /// Journalled changes (the driver thread's class and CPUs), undone on drop.
    _changes: Vec<Applied>,
    /// The driver threads as set for the run, for the document.
    pub driver_threads: Vec<String>,
    /// `irqlab control threads` MATCH for those threads.
    pub driver_match: Option<String>,
    scratch: Option<PathBuf>,
    _bed: Option<Testbed>,
}

enum Worker {
    Local(std::thread::JoinHandle<Result<live_load::LoadReport>>),
    Netns(NsThread<Result<traffic::Counters>>),
}

impl RunningLoad {
    /// Starts `load` with `focus` the CPU being measured; `None` for
    /// [`Load::None`].
    pub fn start(load: Load, focus: usize) -> Result<Option<RunningLoad>> {
        match load {
            Load::None => Ok(None),
            Load::Net => start_net(focus).map(Some),
            Load::Cpu => Ok(Some(start_local(LoadKind::Cpu { sched_idle: false }, None))),
            Load::Disk => {
                let dir = std::env::temp_dir().join(format!("irqlab-survey-disk-{}", std::process::id()));
                std::fs::create_dir_all(&dir).map_err(|e| Error::io(format!("creating the disk load's directory {}", dir.display()), e))?;
                Ok(Some(start_local(LoadKind::Disk { dir: dir.clone() }, Some(dir))))
            }
        }
    }
}

impl Drop for RunningLoad {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        match self.worker.take() {
            Some(Worker::Local(h)) => drop(h.join()),
            Some(Worker::Netns(h)) => drop(h.join()),
            None => {}
        }
        if let Some(dir) = &self.scratch {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn start_local(kind: LoadKind, scratch: Option<PathBuf>) -> RunningLoad {
    let stop = Arc::new(AtomicBool::new(false));
    let worker = {
        let stop = stop.clone();
        std::thread::spawn(move || live_load::run(&kind, u64::MAX / 2, &stop))
    };
    RunningLoad {
        stop,
        worker: Some(Worker::Local(worker)),
        _changes: Vec::new(),
        driver_threads: Vec::new(),
        driver_match: None,
        scratch,
        _bed: None,
    }
}

/// The journal entry of another irqlab process that sets `object` and
/// keeps it set: a profile held by `control apply` or kept with
/// `--persist`.
fn set_by_profile(object: &Object) -> Option<journal::Entry> {
    let me = std::process::id() as i32;
    journal::entries()
        .into_iter()
        .find(|e| &e.object == object && e.owner.pid != me && matches!(e.state(), journal::State::Active | journal::State::Persistent))
}

fn start_net(focus: usize) -> Result<RunningLoad> {
    let bed = Testbed::up()?;
    let target = bed.root_addr(Side::B);
    if !bed.allows_target(target) {
        return Err(Error::Failed(format!("{target} is not a testbed address")));
    }
    let threads = testbed::napi_threads(NET_DEVICE);
    if threads.is_empty() {
        return Err(Error::MissingKernelFeature {
            feature: "threaded NAPI".into(),
            detail: format!("{NET_DEVICE} has no napi/{NET_DEVICE}-* kernel thread"),
        });
    }
    let mut changes = Vec::new();
    let mut described = Vec::new();
    let attr = SchedAttr::Fifo { priority: DRIVER_PRIORITY };
    for t in threads {
        let Some(thread) = Thread::of(t.pid) else { continue };
        let sched = Object::ThreadSched { thread: thread.clone() };
        let affinity = Object::ThreadAffinity { thread };
        // A profile in force (`control apply`, held or persisted) sets the
        // thread as the user wants it: the survey measures the machine so,
        // and says so, instead of moving it for the run.
        let mut kept = Vec::new();
        for (object, value, what) in
            [(sched, Value::Sched { attr }, attr.to_string()), (affinity, Value::Cpus { cpus: vec![focus] }, format!("CPU {focus}"))]
        {
            match set_by_profile(&object) {
                Some(entry) => kept.push(format!("{} as {} sets it", entry.new, entry.owner.describe())),
                None => {
                    changes.push(journal::apply(object, value)?);
                    kept.push(what);
                }
            }
        }
        described.push(format!("{} ({})", t.comm, kept.join(", ")));
    }
    let others: Vec<usize> = rt::online_cpus()?.into_iter().filter(|&c| c != focus).collect();
    let sender_cpu = others.first().copied();
    let stop = Arc::new(AtomicBool::new(false));
    let plan = Plan {
        kind: Kind::Udp { port: 9 },
        target,
        schedule: Schedule::Periodic { interval_ns: NET_INTERVAL_NS },
        size: 64,
        duration_ns: u64::MAX / 2,
    };
    let worker = {
        let stop = stop.clone();
        bed.spawn_in(Side::B, move || {
            if let Some(cpu) = sender_cpu {
                rt::pin_to_cpu(cpu)?;
            }
            traffic::send(&plan, &stop)
        })?
    };
    Ok(RunningLoad {
        stop,
        worker: Some(Worker::Netns(worker)),
        _changes: changes,
        driver_threads: described,
        driver_match: Some(format!("napi:{NET_DEVICE}")),
        scratch: None,
        _bed: Some(bed),
    })
}
