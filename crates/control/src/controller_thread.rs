//! The controller's own thread, one shape for every live controller: a
//! thread of its own at a real-time priority above what it controls, off
//! the CPU it controls (there, at that priority, every event of a
//! controlled thread would wake the controller, which would preempt it,
//! which is another event: a livelock seen when bh-budget's controller was
//! pinned with its kthreads), its memory locked so that no page fault
//! delays a decision, and its own CPU time measured: what running the
//! controller costs (issue 42's figure, `Overhead`). What it starts (the
//! background command idletime controls) starts at SCHED_OTHER
//! (SCHED_RESET_ON_FORK), not at the controller's priority.

use irqlab_host::error::{Error, Result};
use irqlab_host::rt;
use serde::Serialize;

/// How the controller's thread runs.
#[derive(Debug, Clone, Copy)]
pub struct Setup<'a> {
    /// Its SCHED_FIFO priority.
    pub priority: u8,
    /// CPUs it stays off (the controlled threads' CPUs).
    pub off: &'a [usize],
    /// Lock the process's memory while it runs.
    pub lock_memory: bool,
}

/// What a controller cost: its thread's CPU time per second of control.
/// Its setup (loading and verifying its BPF programs, finding its threads)
/// is a one-off, reported apart: over a short run it would hide what
/// control costs per second (~100 ms of setup is 2.5% of a 4 s run).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Overhead {
    /// The controller thread's id (to find it in `measure accounting`'s
    /// rows: the kernel may have seen it before it took its name).
    pub controller_tid: u32,
    /// CPU time while it controlled.
    pub controller_cpu_ns: u64,
    /// How long it controlled (wall time).
    pub controlled_ns: u64,
    /// Controller CPU time per second of control, us.
    pub controller_us_per_s: f64,
    /// The same as a share of one CPU (0.02: 2%).
    pub cpu_share: f64,
    /// CPU time before control began.
    pub setup_cpu_ns: u64,
}

impl Overhead {
    pub fn of(cost: Cost) -> Overhead {
        let share = cost.control_cpu_ns as f64 / cost.control_ns.max(1) as f64;
        Overhead {
            controller_tid: cost.tid,
            controller_cpu_ns: cost.control_cpu_ns,
            controlled_ns: cost.control_ns,
            controller_us_per_s: share * 1e6,
            cpu_share: share,
            setup_cpu_ns: cost.setup_cpu_ns,
        }
    }
}

/// What the controller's thread used: before control began and during it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cost {
    /// The thread's id.
    pub tid: u32,
    pub setup_cpu_ns: u64,
    pub control_cpu_ns: u64,
    /// Wall time from the start of control to the end.
    pub control_ns: u64,
}

/// The thread's CPU time and the monotonic clock, now.
fn clocks() -> (u64, u64) {
    (rt::thread_cpu_ns(), rt::monotonic_ns())
}

impl Cost {
    /// From the clocks at the thread's start, at the start of control (when
    /// the controller said), and now.
    fn between(start: (u64, u64), control: Option<(u64, u64)>, end: (u64, u64)) -> Cost {
        let control = control.unwrap_or(start);
        Cost {
            tid: nix::unistd::gettid().as_raw() as u32,
            setup_cpu_ns: control.0.saturating_sub(start.0),
            control_cpu_ns: end.0.saturating_sub(control.0),
            control_ns: end.1.saturating_sub(control.1),
        }
    }
}

thread_local! {
    /// When this controller thread began controlling ([`control_starts`]).
    static CONTROL_START: std::cell::Cell<Option<(u64, u64)>> = const { std::cell::Cell::new(None) };
}

/// Said by a controller's loop on its thread once its setup is done and
/// control begins: [`Overhead`] counts from here.
pub fn control_starts() {
    CONTROL_START.with(|c| c.set(Some(clocks())));
}

/// The controller thread's name (its comm, as `ps -L` and the accounting
/// show it): `irqlab-` and the controller's name, cut to the kernel's 15
/// bytes.
fn thread_name(name: &str) -> String {
    let mut comm = format!("irqlab-{name}");
    comm.truncate(15);
    comm
}

/// Runs `work` on the controller's thread set up as `setup` says (named
/// `name` in messages, [`thread_name`] on the machine); returns its result
/// and what the thread used.
pub fn run<T: Send>(name: &str, setup: Setup<'_>, work: impl FnOnce() -> Result<T> + Send) -> Result<(T, Cost)> {
    std::thread::scope(|scope| join(name, spawn(scope, name, setup, work)?))
}

/// [`run`] beside other work: the thread starts in `scope` and the caller
/// goes on; [`join`] gives its result and cost (a controller's measuring
/// thread beside its control loop, as process-aware's accounting).
pub fn spawn<'scope, T: Send + 'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    name: &str,
    setup: Setup<'scope>,
    work: impl FnOnce() -> Result<T> + Send + 'scope,
) -> Result<std::thread::ScopedJoinHandle<'scope, Result<(T, Cost)>>> {
    std::thread::Builder::new()
        .name(thread_name(name))
        .spawn_scoped(scope, move || {
            rt::set_fifo_not_inherited(setup.priority)?;
            // One CPU off: every other; more: the others left (all
            // of them when nothing is left).
            match setup.off {
                [] => {}
                [one] => rt::pin_off(*one)?,
                many => {
                    let rest: Vec<usize> = rt::online_cpus()?.into_iter().filter(|c| !many.contains(c)).collect();
                    if !rest.is_empty() {
                        rt::set_affinity(0, &rest)?;
                    }
                }
            }
            if setup.lock_memory {
                rt::lock_memory()?;
            }
            CONTROL_START.with(|c| c.set(None));
            let start = clocks();
            let result = work();
            let cost = Cost::between(start, CONTROL_START.with(|c| c.get()), clocks());
            if setup.lock_memory {
                rt::unlock_memory();
            }
            result.map(|r| (r, cost))
        })
        .map_err(|e| Error::Failed(format!("the {name} controller's thread: {e}")))
}

/// The result of a thread [`spawn`] started, once it ends.
pub fn join<T>(name: &str, thread: std::thread::ScopedJoinHandle<'_, Result<(T, Cost)>>) -> Result<(T, Cost)> {
    thread.join().unwrap_or_else(|_| Err(Error::Failed(format!("the {name} controller panicked"))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overhead_is_cpu_time_over_the_time_controlled_setup_apart() {
        // Started at CPU 1 ms / wall 10 ms, controlling from CPU 101 ms / wall
        // 110 ms, ended at CPU 121 ms / wall 1110 ms.
        let cost = Cost::between((1_000_000, 10_000_000), Some((101_000_000, 110_000_000)), (121_000_000, 1_110_000_000));
        let tid = nix::unistd::gettid().as_raw() as u32;
        assert_eq!(cost, Cost { tid, setup_cpu_ns: 100_000_000, control_cpu_ns: 20_000_000, control_ns: 1_000_000_000 });
        let o = Overhead::of(cost);
        assert_eq!((o.controller_cpu_ns, o.setup_cpu_ns, o.controlled_ns), (20_000_000, 100_000_000, 1_000_000_000));
        assert!((o.cpu_share - 0.02).abs() < 1e-12 && (o.controller_us_per_s - 20_000.0).abs() < 1e-6, "{o:?}");
        // A controller that never said when control began: all of it counts.
        let all = Cost::between((0, 0), None, (30, 60));
        assert_eq!(all, Cost { tid, setup_cpu_ns: 0, control_cpu_ns: 30, control_ns: 60 });
        assert_eq!(Overhead::of(Cost { tid, setup_cpu_ns: 0, control_cpu_ns: 5, control_ns: 0 }).cpu_share, 5.0, "no division by zero");
    }

    #[test]
    fn the_work_runs_and_its_cpu_time_is_measured() {
        // Priority 0: no real-time policy needed for the test.
        let setup = Setup { priority: 0, off: &[], lock_memory: false };
        let (sum, cost) = run("test", setup, || {
            let setup_work = (0..1_000_000u64).map(std::hint::black_box).sum::<u64>();
            control_starts();
            Ok(setup_work + (0..5_000_000u64).map(std::hint::black_box).sum::<u64>())
        })
        .unwrap();
        assert_eq!(sum, 1_000_000 * 999_999 / 2 + 5_000_000 * 4_999_999 / 2);
        assert!(cost.setup_cpu_ns > 0 && cost.control_cpu_ns > 0 && cost.control_ns > 0, "{cost:?}");
        let failed = run("test", setup, || -> Result<()> { Err(Error::Failed("no".into())) });
        assert!(failed.is_err());
        // The machine sees it by its name, cut to the kernel's 15 bytes.
        let (comm, _) = run("process-aware", setup, || Ok(std::fs::read_to_string("/proc/thread-self/comm").unwrap())).unwrap();
        assert_eq!(comm.trim_end(), "irqlab-process-");
        assert_eq!(thread_name("bh-budget"), "irqlab-bh-budge");
    }
}
