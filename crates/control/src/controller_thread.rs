//! The controller's own thread, one shape for every live controller: a
//! thread of its own at a real-time priority above what it controls, off
//! the CPU it controls (there, at that priority, every event of a
//! controlled thread would wake the controller, which would preempt it,
//! which is another event: a livelock seen when bh-budget's controller was
//! pinned with its kthreads), its memory locked so that no page fault
//! delays a decision, and its own CPU time measured: what running the
//! controller costs (issue 42's figure, `Overhead`).

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

/// What a controller cost: its thread's CPU time over the time it held.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Overhead {
    pub controller_cpu_ns: u64,
    /// Controller CPU time per second of wall time, us.
    pub controller_us_per_s: f64,
    /// The same as a share of one CPU (0.02: 2%).
    pub cpu_share: f64,
}

impl Overhead {
    pub fn of(controller_cpu_ns: u64, held_ns: u64) -> Overhead {
        let share = controller_cpu_ns as f64 / held_ns.max(1) as f64;
        Overhead { controller_cpu_ns, controller_us_per_s: share * 1e6, cpu_share: share }
    }
}

/// Runs `work` on the controller's thread set up as `setup` says (named
/// `name` in messages); returns its result and the thread's CPU time.
pub fn run<T: Send>(name: &str, setup: Setup<'_>, work: impl FnOnce() -> Result<T> + Send) -> Result<(T, u64)> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                rt::set_fifo(setup.priority)?;
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
                let cpu_start = rt::thread_cpu_ns();
                let result = work();
                let cpu_ns = rt::thread_cpu_ns().saturating_sub(cpu_start);
                if setup.lock_memory {
                    rt::unlock_memory();
                }
                result.map(|r| (r, cpu_ns))
            })
            .join()
            .unwrap_or_else(|_| Err(Error::Failed(format!("the {name} controller panicked"))))
    })
}

/// The controller's setup on the calling thread, for a controller whose
/// monitor and actuator stay on it (idletime's BPF watch, cgroup gate and
/// background child): SCHED_FIFO and memory locked while this lives, the
/// thread's own scheduling back when it is dropped; `cpu_ns` is the CPU
/// time the thread used since. It stays on every CPU: what it controls
/// are whole processes, wherever they run.
pub struct ThisThread {
    tid: i32,
    before: irqlab_host::journal::sched::SchedAttr,
    lock_memory: bool,
    cpu_start: u64,
}

impl ThisThread {
    pub fn raise(priority: u8, lock_memory: bool) -> Result<ThisThread> {
        use irqlab_host::journal::sched;
        let tid = nix::unistd::gettid().as_raw();
        let before = sched::get(tid)?;
        sched::set(tid, sched::SchedAttr::Fifo { priority: u32::from(priority) })?;
        let raised = ThisThread { tid, before, lock_memory, cpu_start: rt::thread_cpu_ns() };
        if lock_memory {
            rt::lock_memory()?;
        }
        Ok(raised)
    }

    /// The thread's CPU time since it was raised.
    pub fn cpu_ns(&self) -> u64 {
        rt::thread_cpu_ns().saturating_sub(self.cpu_start)
    }
}

impl Drop for ThisThread {
    fn drop(&mut self) {
        if self.lock_memory {
            rt::unlock_memory();
        }
        let _ = irqlab_host::journal::sched::set(self.tid, self.before);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overhead_is_cpu_time_over_the_time_held() {
        let o = Overhead::of(20_000_000, 1_000_000_000);
        assert_eq!(o.controller_cpu_ns, 20_000_000);
        assert!((o.cpu_share - 0.02).abs() < 1e-12 && (o.controller_us_per_s - 20_000.0).abs() < 1e-6, "{o:?}");
        assert_eq!(Overhead::of(5, 0).cpu_share, 5.0, "no division by zero");
    }

    #[test]
    fn the_work_runs_and_its_cpu_time_is_measured() {
        // Priority 0: no real-time policy needed for the test.
        let setup = Setup { priority: 0, off: &[], lock_memory: false };
        let (sum, cpu_ns) = run("test", setup, || Ok((0..5_000_000u64).map(std::hint::black_box).sum::<u64>())).unwrap();
        assert_eq!(sum, 5_000_000 * 4_999_999 / 2);
        assert!(cpu_ns > 0);
        let failed = run("test", setup, || -> Result<()> { Err(Error::Failed("no".into())) });
        assert!(failed.is_err());
    }
}
