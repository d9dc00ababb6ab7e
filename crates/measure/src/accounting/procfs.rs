//! What /proc says about tasks: the CPU time it charges them (utime +
//! stime, tick-sampled, the number the process-aware paper calls wrong),
//! their names, and which kernel threads do interrupt work.

use std::collections::HashMap;

/// What /proc/<tid>/stat says (the `procfs` crate's parse, `irqlab_host::task_stat`).
pub use irqlab_host::task_stat::TaskStat;

/// /proc/<tgid>/task/<tid>/stat of one thread; `None` once it exited.
/// (/proc/<tid>/stat would sum the whole thread group's times.)
pub fn task_stat(tgid: u32, tid: u32) -> Option<TaskStat> {
    irqlab_host::task_stat::of_task(tgid as i32, tid as i32)
}

/// Every thread on the machine now, with its stat.
pub fn all_threads() -> HashMap<u32, TaskStat> {
    let mut out = HashMap::new();
    for (pid, tid) in irqlab_host::procs::all_tids() {
        if let Some(stat) = task_stat(pid as u32, tid as u32) {
            out.insert(tid as u32, stat);
        }
    }
    out
}

pub use irqlab_host::machine::{cpu_time_ns, ticks_per_second, CpuTime};

/// Time the hypervisor has taken from `cpu` so far, in ns; 0 on bare
/// metal. The kernel leaves it out of every task's utime/stime, while a
/// task's wall-clock run time (the accounting's) includes it.
pub fn cpu_steal_ns(cpu: usize) -> u64 {
    cpu_time_ns(Some(cpu), &[CpuTime::Steal])
}

/// What kind of work a task does, from its name and kthread flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaskKind {
    /// The per-CPU idle task (tid 0, "swapper/N").
    Idle,
    /// ksoftirqd/N: softirqs deferred to a thread.
    Ksoftirqd,
    /// irq/N-name: a threaded IRQ handler.
    IrqThread,
    /// napi/dev-id: threaded NAPI polling.
    NapiThread,
    /// Any other kernel thread.
    Kthread,
    /// A user-space thread.
    #[default]
    User,
}

impl TaskKind {
    pub fn classify(tid: u32, comm: &str, kernel_thread: bool) -> TaskKind {
        if tid == 0 {
            TaskKind::Idle
        } else if comm.starts_with("ksoftirqd/") || comm.starts_with("ktimers/") {
            // ktimers/N is PREEMPT_RT's softirq thread for TIMER and
            // HRTIMER (6.12+): ksoftirqd's job for those two vectors.
            TaskKind::Ksoftirqd
        } else if comm.starts_with("irq/") {
            TaskKind::IrqThread
        } else if comm.starts_with("napi/") {
            TaskKind::NapiThread
        } else if kernel_thread {
            TaskKind::Kthread
        } else {
            TaskKind::User
        }
    }

    /// Threads whose own run time is interrupt work done for someone else.
    pub fn is_service(self) -> bool {
        matches!(self, TaskKind::Ksoftirqd | TaskKind::IrqThread | TaskKind::NapiThread)
    }

    pub fn label(self) -> &'static str {
        match self {
            TaskKind::Idle => "idle",
            TaskKind::Ksoftirqd => "ksoftirqd",
            TaskKind::IrqThread => "irq-thread",
            TaskKind::NapiThread => "napi-thread",
            TaskKind::Kthread => "kthread",
            TaskKind::User => "user",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_thread_is_visible_and_user() {
        let me = nix::unistd::gettid().as_raw() as u32;
        let s = task_stat(std::process::id(), me).expect("own stat");
        assert!(!s.kernel_thread);
        assert_eq!(TaskKind::classify(me, &s.comm, s.kernel_thread), TaskKind::User);
        assert!(all_threads().contains_key(&me));
    }

    #[test]
    fn classifies_interrupt_threads() {
        assert_eq!(TaskKind::classify(0, "swapper/1", true), TaskKind::Idle);
        assert_eq!(TaskKind::classify(15, "ksoftirqd/1", true), TaskKind::Ksoftirqd);
        assert_eq!(TaskKind::classify(18, "ktimers/0", true), TaskKind::Ksoftirqd, "PREEMPT_RT's timer softirq thread");
        assert_eq!(TaskKind::classify(99, "napi/veth0-8193", true), TaskKind::NapiThread);
        assert_eq!(TaskKind::classify(98, "irq/24-virtio0", true), TaskKind::IrqThread);
        assert!(TaskKind::NapiThread.is_service());
        assert!(!TaskKind::Kthread.is_service());
    }
}
