//! Cgroup v1 primitives the journal's [`super::journal::Object::Cgroup`] and
//! [`super::journal::Object::CgroupMember`] arms use: where a controller's
//! hierarchy is mounted, which cgroup a thread is in, creating and removing
//! a cgroup, moving a thread. (This machine has the v1 controllers; its v2
//! hierarchy has none.)

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// The mount point of the v1 hierarchy that has `controller` (from
/// /proc/self/mounts); exit 3 naming the controller when there is none.
pub fn hierarchy_root(controller: &str) -> Result<PathBuf> {
    mount_point(|kind, options| kind == "cgroup" && options.split(',').any(|o| o == controller)).ok_or_else(|| {
        Error::MissingKernelFeature {
            feature: format!("the cgroup v1 {controller} controller"),
            detail: format!("no cgroup v1 hierarchy with {controller} is mounted (/proc/self/mounts)"),
        }
    })
}

/// The mount point of the cgroup v2 hierarchy (`/sys/fs/cgroup/unified`
/// beside v1 controllers, or `/sys/fs/cgroup`); exit 3 when none is mounted.
pub fn v2_root() -> Result<PathBuf> {
    mount_point(|kind, _| kind == "cgroup2").ok_or_else(|| Error::MissingKernelFeature {
        feature: "a mounted cgroup v2 hierarchy".into(),
        detail: "none in /proc/self/mounts (mount -t cgroup2 none /sys/fs/cgroup/unified)".into(),
    })
}

/// The first mount in /proc/self/mounts whose file system type and
/// options `matches`.
fn mount_point(matches: impl Fn(&str, &str) -> bool) -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() >= 4 && matches(f[2], f[3])).then(|| PathBuf::from(f[1]))
    })
}

/// The cgroup of `controller`'s hierarchy that thread `tid` is in, as a
/// path below the hierarchy's root (`/`, `/irqlab-dl`).
pub fn of_thread(tid: i32, controller: &str) -> Result<String> {
    let path = format!("/proc/{tid}/cgroup");
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(format!("reading {path}"), e))?;
    parse_membership(&text, controller).ok_or_else(|| Error::Failed(format!("{path} names no {controller} cgroup")))
}

/// The `controller` line of a /proc/TID/cgroup text (`N:ctrl,ctrl:/path`).
fn parse_membership(text: &str, controller: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
        ctrls.split(',').any(|c| c == controller).then(|| path.to_string())
    })
}

/// Moves thread `tid` into `cgroup` (a path below the root of
/// `controller`'s hierarchy).
pub fn move_thread(tid: i32, controller: &str, cgroup: &str) -> Result<()> {
    let tasks = hierarchy_root(controller)?.join(cgroup.trim_start_matches('/')).join("tasks");
    std::fs::write(&tasks, tid.to_string()).map_err(|e| Error::io(format!("moving thread {tid} into {}", tasks.display()), e))
}

/// Creates the cgroup directory `path` (nothing when it exists).
pub fn create(path: &Path) -> Result<()> {
    match std::fs::create_dir(path) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(Error::io(format!("creating cgroup {}", path.display()), e)),
        _ => Ok(()),
    }
}

/// Removes the cgroup `path`, first moving every task still in it to its
/// parent (a cgroup with tasks cannot be removed). Nothing when it is gone.
pub fn remove(path: &Path) -> Result<()> {
    if !path.is_dir() {
        return Ok(());
    }
    let parent_tasks = path.parent().map(|p| p.join("tasks")).ok_or_else(|| Error::Failed(format!("{} has no parent", path.display())))?;
    let tasks = std::fs::read_to_string(path.join("tasks")).unwrap_or_default();
    for tid in tasks.split_whitespace() {
        // A task that exited meanwhile is gone anyway.
        let _ = std::fs::write(&parent_tasks, tid);
    }
    std::fs::remove_dir(path).map_err(|e| Error::io(format!("removing cgroup {}", path.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn membership_is_read_from_the_controllers_line() {
        let text = "12:pids:/\n4:cpu,cpuacct:/user.slice\n3:cpuset:/irqlab-dl\n0::/init.scope\n";
        assert_eq!(parse_membership(text, "cpuset").as_deref(), Some("/irqlab-dl"));
        assert_eq!(parse_membership(text, "cpuacct").as_deref(), Some("/user.slice"));
        assert_eq!(parse_membership(text, "freezer"), None);
    }

    #[test]
    fn a_controller_without_a_hierarchy_is_exit_3_naming_it() {
        let e = hierarchy_root("no-such-controller").unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(e.to_string().contains("no-such-controller"), "{e}");
    }
}
