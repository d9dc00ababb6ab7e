//! What /proc/PID/stat says about a task, read with the `procfs` crate
//! (the comm may hold spaces and parentheses; procfs parses it once, for
//! everyone): its name, state, parent, kernel-thread flag, the CPU time
//! the kernel charged it, and its start time (which, with the tid,
//! identifies a thread across tid reuse).

/// PF_KTHREAD in the task's flags (include/linux/sched.h).
const PF_KTHREAD: u32 = 0x0020_0000;

/// The fields irqlab reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskStat {
    pub comm: String,
    /// `R`, `S`, `D`, `Z`, ...
    pub state: char,
    pub ppid: i32,
    pub kernel_thread: bool,
    /// utime + stime, in clock ticks.
    pub charged_ticks: u64,
    /// Start time in clock ticks since boot (field 22).
    pub start_ticks: u64,
}

impl TaskStat {
    fn of(stat: procfs::process::Stat) -> TaskStat {
        TaskStat {
            comm: stat.comm,
            state: stat.state,
            ppid: stat.ppid,
            kernel_thread: stat.flags & PF_KTHREAD != 0,
            charged_ticks: stat.utime + stat.stime,
            start_ticks: stat.starttime,
        }
    }

    /// A zombie (or a task being reaped) has nothing left to schedule.
    pub fn exited(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }
}

/// `/proc/TID/stat` of any task (a thread's own line, by its tid); `None`
/// once it is gone.
pub fn of(tid: i32) -> Option<TaskStat> {
    procfs::process::Process::new(tid).ok()?.stat().ok().map(TaskStat::of)
}

/// `/proc/TGID/task/TID/stat`: one thread's own times (`/proc/TID/stat` of
/// a group leader sums the whole group's).
pub fn of_task(tgid: i32, tid: i32) -> Option<TaskStat> {
    procfs::process::Process::new(tgid).ok()?.task_from_tid(tid).ok()?.stat().ok().map(TaskStat::of)
}

/// This process's.
pub fn of_self() -> Option<TaskStat> {
    procfs::process::Process::myself().ok()?.stat().ok().map(TaskStat::of)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_and_a_kernel_thread_read_back() {
        let me = of_self().expect("own stat");
        assert!(!me.kernel_thread && !me.exited());
        assert_eq!(of(std::process::id() as i32).map(|s| s.start_ticks), Some(me.start_ticks));
        // The test runs in a thread of its own: its line by tid, and as a task of this process.
        let tid = unsafe { libc::gettid() };
        // /proc/TID/stat of a thread that is not the group leader sums the
        // group's times (the kernel's whole-process view); its task line is
        // its own. The identity fields agree.
        let (thread, task) = (of(tid).expect("own thread's stat"), of_task(std::process::id() as i32, tid).expect("own task stat"));
        assert_eq!((&task.comm, task.start_ticks, task.ppid), (&thread.comm, thread.start_ticks, thread.ppid));
        // kthreadd, PID 2, is the kernel's first thread.
        assert!(of(2).is_some_and(|k| k.kernel_thread && k.comm == "kthreadd"));
        assert_eq!(of(i32::MAX), None);
    }
}
