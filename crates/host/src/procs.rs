//! The processes and threads of this machine now: the one walk of /proc,
//! through the `procfs` crate. Each list is a snapshot; a task may be gone
//! by the time it is read further, which every reader allows for.

/// Every process id (thread-group id), lowest first.
pub fn pids() -> Vec<i32> {
    let Ok(all) = procfs::process::all_processes() else { return Vec::new() };
    let mut pids: Vec<i32> = all.flatten().map(|p| p.pid).collect();
    pids.sort_unstable();
    pids
}

/// The thread ids of process `pid`, lowest first; empty once it is gone.
pub fn tids(pid: i32) -> Vec<i32> {
    let Ok(tasks) = procfs::process::Process::new(pid).and_then(|p| p.tasks()) else { return Vec::new() };
    let mut tids: Vec<i32> = tasks.flatten().map(|t| t.tid).collect();
    tids.sort_unstable();
    tids
}

/// Every thread as (its process id, its thread id), by process then thread.
pub fn all_tids() -> Vec<(i32, i32)> {
    pids().into_iter().flat_map(|pid| tids(pid).into_iter().map(move |tid| (pid, tid))).collect()
}

/// A task's name (/proc/PID/comm, without its newline); `None` once it is
/// gone.
pub fn comm(pid: i32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).ok().map(|c| c.trim_end().to_string())
}

/// The processes whose name starts with `prefix`: kernel threads of one
/// kind (`irq/`, `napi/`), which are processes of their own.
pub fn named(prefix: &str) -> Vec<i32> {
    pids().into_iter().filter(|&pid| comm(pid).is_some_and(|c| c.starts_with(prefix))).collect()
}

/// A thread's scheduler statistics (/proc/TID/schedstat): its time on a
/// CPU and waiting on a run queue (ns), and the slices it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedstat {
    pub run_ns: u64,
    pub wait_ns: u64,
    pub slices: u64,
}

/// `tid`'s [`Schedstat`]; `None` once it is gone.
pub fn schedstat(tid: i32) -> Option<Schedstat> {
    let s = procfs::process::Process::new(tid).ok()?.schedstat().ok()?;
    Some(Schedstat { run_ns: s.sum_exec_runtime, wait_ns: s.run_delay, slices: s.pcount })
}

/// The process (thread group) of thread `tid` (/proc/TID/status `Tgid`);
/// `None` once it is gone.
pub fn tgid(tid: i32) -> Option<i32> {
    procfs::process::Process::new(tid).ok()?.status().ok().map(|s| s.tgid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_and_its_threads_are_listed() {
        let me = std::process::id() as i32;
        assert!(pids().contains(&me));
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            tx.send(procfs::process::Process::myself().unwrap().task_main_thread().map(|_| ()).is_ok()).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(200));
        });
        assert!(rx.recv().unwrap());
        let mine = tids(me);
        assert!(mine.len() >= 2 && mine.contains(&me), "{mine:?}");
        assert!(all_tids().iter().any(|&(p, t)| p == me && t != me));
        t.join().unwrap();
        assert_eq!(comm(me).as_deref(), std::fs::read_to_string("/proc/self/comm").ok().as_deref().map(str::trim_end));
        assert!(tids(-1).is_empty() && comm(-1).is_none());
        assert_eq!(tgid(me), Some(me));
        // The test runs on a thread of its own: its clock, not the main thread's.
        let this = nix::unistd::gettid().as_raw();
        let before = schedstat(this).unwrap();
        let spin = std::time::Instant::now();
        while spin.elapsed() < std::time::Duration::from_millis(20) {}
        assert!(schedstat(this).unwrap().run_ns > before.run_ns, "the scheduler's clock of this thread moved");
    }
}
