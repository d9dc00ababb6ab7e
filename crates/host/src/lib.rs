//! The host layer of irqlab's live side: errors and privileges, the
//! real-time toolkit (`rt`, `rt_limit`), machine settings (`machine`) and
//! the controllable state's snapshot and diff (`machine_state`), exit
//! paths (`cleanup`, `stop`), the netns testbed, the kernel's tracepoints,
//! and the control [`journal`]: every change live code makes to the machine,
//! with the objects it changes (`journal::{sched, sched_knobs, threads,
//! cgroup, root_domain, netdev}`). Measurements (`irqlab-measure`) and
//! controllers (`irqlab-control`) build on it.

pub mod bpf;
pub mod bpf_trial;
pub mod cleanup;
pub mod daemons;
pub mod error;
mod flock;
pub mod irqbalance;
pub mod journal;
pub mod machine;
pub mod machine_state;
pub mod privilege;
pub mod procs;
pub mod rt;
pub mod rt_limit;
pub mod run_end;
pub mod stop;
pub mod task_stat;
pub mod testbed;
pub mod tracepoints;
pub mod tuned_profile;

pub use error::{Error, Result};
