//! The other tools that manage the knobs irqlab sets or measures:
//! irqbalance, tuned, stalld, rtirq, and the kernel's own boot options.
//! `irqlab doctor` lists those found, running or installed, each with what
//! it manages that irqlab also touches (docs/commands.md, "Other tools on
//! the machine").

use serde::Serialize;
use std::path::Path;

/// One tool found on the machine.
#[derive(Debug, Clone, Serialize)]
pub struct Tool {
    pub name: &'static str,
    /// Its processes running now.
    pub running: Vec<i32>,
    /// Where it is installed (its program or configuration), when found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub installed: Option<String>,
    /// What it is set to here (tuned's profile, irqbalance's socket).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// What it manages that irqlab also sets or measures, and how irqlab
    /// lives beside it.
    pub shares: &'static str,
    /// Something it does here that undoes or disturbs irqlab's work.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

fn first_existing(paths: &[&str]) -> Option<String> {
    paths.iter().find(|p| Path::new(p).exists()).map(|p| p.to_string())
}

/// Every tool found, running or installed.
pub fn found() -> Vec<Tool> {
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut tools = vec![irqbalance(), tuned(&release), stalld(&release), rtirq()];
    tools.retain(|t| !t.running.is_empty() || t.installed.is_some());
    tools.extend(kernel_options(&cmdline));
    tools
}

fn irqbalance() -> Tool {
    let running = crate::irqbalance::running();
    let detail = running.first().map(|d| {
        if !d.has_socket() {
            return format!("no socket at {}: irqlab cannot ask it to leave IRQs alone", d.socket().display());
        }
        match d.banned() {
            Ok(banned) => format!("socket {}; IRQs it leaves alone: {}", d.socket().display(), crate::irqbalance::format_irqs(&banned)),
            Err(e) => format!("socket {}: {e}", d.socket().display()),
        }
    });
    Tool {
        name: "irqbalance",
        running: running.iter().map(|d| d.pid).collect(),
        installed: first_existing(&["/usr/sbin/irqbalance", "/usr/bin/irqbalance"]),
        detail,
        shares: "IRQ affinities, moved at every pass (10 s): `control irq` and `control apply` ask it through its socket to \
                 leave the IRQs they move alone for the hold, and give its list back after",
        warning: None,
    }
}

/// The active tuned profile and whether it (or a profile it includes)
/// writes `kernel.sched_rt_runtime_us`.
fn tuned(release: &str) -> Tool {
    let profile = std::fs::read_to_string("/etc/tuned/active_profile").ok().map(|p| p.trim().to_string()).filter(|p| !p.is_empty());
    let writes_rt_runtime = profile.as_deref().is_some_and(|p| p.split_whitespace().any(|p| profile_writes(p, "sched_rt_runtime_us", 0)));
    let running = crate::machine::processes_named("tuned");
    let warning = (writes_rt_runtime && has_fair_servers(release)).then(|| {
        "its profile writes kernel.sched_rt_runtime_us; on this kernel (6.12+) any write of that sysctl makes the kernel \
         forget its fair servers' bandwidth, after which `control fair-server` cannot lower one (EBUSY)"
            .to_string()
    });
    Tool {
        name: "tuned",
        running,
        installed: first_existing(&["/usr/sbin/tuned", "/etc/tuned/tuned-main.conf"]),
        detail: profile.map(|p| format!("active profile: {p}")),
        shares: "IRQ affinities and thread policies ([scheduler], [irqbalance]), kernel.sched_rt_runtime_us ([sysctl] of the \
                 realtime profiles), the kernel command line ([bootloader]): where its profile and irqlab's disagree, the \
                 last to apply wins until the next boot, where tuned applies its own",
        warning,
    }
}

/// Whether tuned profile `name` (in /etc/tuned or /usr/lib/tuned) or one
/// it includes mentions `key`.
fn profile_writes(name: &str, key: &str, depth: usize) -> bool {
    if depth > 8 {
        return false;
    }
    let Some(text) = ["/etc/tuned", "/usr/lib/tuned"].iter().find_map(|d| std::fs::read_to_string(format!("{d}/{name}/tuned.conf")).ok())
    else {
        return false;
    };
    text.contains(key)
        || text.lines().filter_map(|l| l.trim().strip_prefix("include")).filter_map(|l| l.trim_start().strip_prefix('=')).any(|list| {
            list.split(',').map(str::trim).filter(|p| !p.is_empty() && !p.contains('$')).any(|p| profile_writes(p, key, depth + 1))
        })
}

/// Linux 6.12 and later run the fair class under a deadline server.
fn has_fair_servers(release: &str) -> bool {
    let mut parts = release.trim().split(['.', '-']);
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    (major, minor) >= (6, 12)
}

/// stalld's processes running now.
pub fn stalld_running() -> Vec<i32> {
    crate::machine::processes_named("stalld")
}

/// The warning for a run that leaves threads runnable without letting them
/// run (`starved`: a controller's parked threads, or what the probe's
/// real-time spin keeps off its CPU), where stalld runs: that is what it
/// looks for, and its boost to SCHED_DEADLINE would undo the run's point
/// (`breaks`). stalld (1.x) reads its ignore lists (`-i`/`--ignore_threads`,
/// `-I`/`--ignore_processes`, regexes) only at its start and has no
/// run-time socket, so irqlab cannot tell it to leave them alone: it says
/// how. `None` where no stalld runs.
pub fn stalld_warning(starved: &str, breaks: &str) -> Option<String> {
    let pids = stalld_running();
    let list = pids.iter().map(i32::to_string).collect::<Vec<_>>().join(", ");
    (!pids.is_empty()).then(|| {
        format!(
            "warning: stalld (pid {list}) runs: {starved} are what it looks for (threads left runnable past its threshold, \
             20-60 s by default), and its boost to SCHED_DEADLINE would {breaks}. It takes no ignore list at run time: restart \
             it with `--ignore_threads REGEX` naming them, or stop it for this run"
        )
    })
}

fn stalld(release: &str) -> Tool {
    let running = stalld_running();
    Tool {
        name: "stalld",
        installed: first_existing(&["/usr/bin/stalld", "/usr/sbin/stalld", "/etc/sysconfig/stalld", "/etc/stalld.conf"]),
        detail: None,
        shares: "boosts any thread left runnable for its threshold (20-60 s) to SCHED_DEADLINE: the sporadic server and \
                 bh-budget park NAPI threads at SCHED_FIFO 1 or SCHED_IDLE and the interference probe spins a SCHED_FIFO \
                 thread, which is what it looks for; a boost breaks a server's budget and shows in the probe's curves",
        warning: (!running.is_empty() && has_fair_servers(release)).then(|| {
            "its throttlectl writes kernel.sched_rt_runtime_us, which on 6.12+ makes the kernel forget its fair servers' \
             bandwidth"
                .to_string()
        }),
        running,
    }
}

fn rtirq() -> Tool {
    Tool {
        name: "rtirq",
        running: Vec::new(),
        installed: first_existing(&["/etc/default/rtirq", "/etc/init.d/rtirq", "/usr/bin/rtirq"]),
        detail: None,
        shares: "the IRQ threads' SCHED_FIFO priorities, set at boot: `control threads irq:…` and a profile change them \
                 until the next boot",
        warning: None,
    }
}

/// The kernel's own boot options that place IRQs and isolate CPUs.
fn kernel_options(cmdline: &str) -> Option<Tool> {
    let keys = ["irqaffinity", "isolcpus", "nohz_full", "rcu_nocbs", "kthread_cpus"];
    let found: Vec<&str> = cmdline.split_whitespace().filter(|w| keys.iter().any(|k| w.split('=').next() == Some(*k))).collect();
    if found.is_empty() {
        return None;
    }
    Some(Tool {
        name: "kernel command line",
        running: Vec::new(),
        installed: None,
        detail: Some(found.join(" ")),
        shares: "where IRQs start (irqaffinity=), CPUs kept from the scheduler, the tick and managed IRQs (isolcpus=, \
                 nohz_full=), where RCU callbacks and kernel threads run: `control irq` moves an IRQ only within what \
                 the kernel allows (a managed IRQ stays)",
        warning: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fair_servers_from_612() {
        assert!(has_fair_servers("6.12.57+deb12-rt-amd64"));
        assert!(has_fair_servers("6.18.0"));
        assert!(!has_fair_servers("6.1.0-37-rt-amd64"));
        assert!(!has_fair_servers("garbage"));
    }

    #[test]
    fn the_kernels_placement_options_are_named() {
        let k = kernel_options("BOOT_IMAGE=/vmlinuz quiet isolcpus=domain,1 irqaffinity=0 nohz=on").unwrap();
        assert_eq!(k.detail.as_deref(), Some("isolcpus=domain,1 irqaffinity=0"));
        assert!(kernel_options("quiet nohz=on").is_none());
    }
}
