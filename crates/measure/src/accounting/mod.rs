//! Per-process interrupt accounting with BPF (the process-aware paper,
//! `docs/papers.md` §2): for every task, the time it ran, the hard-IRQ and softirq
//! time that ran while it was current ("stolen"), the softirq time done on
//! its behalf ("served", its beneficiary share), and what /proc charges it.
//!
//! The BPF side (`bpf/accounting.bpf.c`) aggregates in per-CPU maps;
//! user space only reads them ([`Session::snapshot`]) and turns them into a
//! [`Report`].
//!
//! What the numbers mean, and their limits:
//! - Hard-IRQ time is the handlers' time (irq_handler_entry/exit and, on
//!   x86, the local timer / reschedule / call-function vectors); the IRQ
//!   entry and exit code around them counts as the interrupted task's run.
//! - A beneficiary is the owner of the socket a packet was queued to (or
//!   dropped at), else the task a softirq woke. A socket's owner is the
//!   thread last woken by a packet queued to it (a reader blocked in
//!   receive, poll or epoll), or, for sockets already open at the start,
//!   the thread blocked receiving on it then, else their process (its main
//!   thread). A reader that never sleeps on a socket opened after the start
//!   is not found: its socket's packets are counted as without owner
//!   (`socket_events_no_owner`) and their time goes to what they woke, or
//!   is orphaned. (Owners used to be learned at every return from receive,
//!   a program run per datagram; kernels without `sched_waking` still do
//!   that.)
//! - Tasks are keyed by thread id for the whole run; a tid reused within
//!   one measurement would be merged with its predecessor.
//! - Softirq work handed to another CPU (RPS) is attributed where the
//!   packet meets its socket; the hand-off itself has no beneficiary.
//! - Some kernels do not trace every context switch: on the Firecracker
//!   guest kernel CI runs on, no `sched_switch` fires when the VM agent's
//!   threads (PID 1's `tokio-rt-worker`s) switch out, in ftrace as in BPF.
//!   Every handler checks the task it finds current; on a mismatch the
//!   segment since the last event is split using the switched-out task's
//!   `se.sum_exec_runtime` (exact at its switch-out), and user space runs
//!   `sync_cpu` on every CPU before reading. Without this, a CPU-bound
//!   task lost up to 45% of its run time to the agent's threads; with it
//!   the test's spinner matches its CPU clock within 1%. The count is
//!   reported per CPU (`hidden_switches`).

mod measure;
pub mod names;
pub mod procfs;
pub mod raw;
pub mod render;
pub mod report;
pub(crate) mod session;
mod skel;

pub use measure::{measure, Config};
pub use report::Report;
pub use session::{check_loads, check_prerequisites, check_required_tracepoints, missing_optional_tracepoints, Options, Session, Storage};

/// What an accounting experiment on the testbed needs (the process-aware
/// paper's Fig. 6, `irqlab_experiments::process_aware::fig6`): the
/// accounting's BPF prerequisites and tracepoints, SCHED_FIFO and thread
/// pinning, and the testbed's (exit 3 naming the first missing).
pub fn check_testbed_experiment_prerequisites() -> irqlab_host::Result<()> {
    check_prerequisites()?;
    check_required_tracepoints()?;
    irqlab_host::privilege::require(
        &[irqlab_host::privilege::Capability::SysNice],
        "run the CPU-bound task at SCHED_FIFO and pin threads",
    )?;
    irqlab_host::testbed::check_prerequisites()
}
