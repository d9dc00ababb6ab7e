//! Cgroup primitives the journal's cgroup objects use, for both
//! hierarchies: where a controller's hierarchy is mounted and which one a
//! feature uses ([`hierarchy`]: the v1 hierarchy with the controller when
//! the machine has one, as this host does, else the v2 hierarchy with its
//! counterpart, as every current distribution mounts alone), which cgroup
//! a thread (v1) or process (v2) is in, creating and removing a cgroup,
//! moving a thread or process, and a v2 cgroup's `cgroup.subtree_control`.

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The hierarchy a cgroup-using feature works in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hierarchy {
    /// The v1 hierarchy that has the controller, mounted here.
    V1(PathBuf),
    /// The v2 hierarchy, mounted here.
    V2(PathBuf),
}

impl Hierarchy {
    /// Its mount point.
    pub fn root(&self) -> &Path {
        match self {
            Hierarchy::V1(p) | Hierarchy::V2(p) => p,
        }
    }

    pub fn is_v2(&self) -> bool {
        matches!(self, Hierarchy::V2(_))
    }

    /// `cgroup v1` or `cgroup v2`, for messages and `doctor`.
    pub fn version(&self) -> &'static str {
        match self {
            Hierarchy::V1(_) => "cgroup v1",
            Hierarchy::V2(_) => "cgroup v2",
        }
    }
}

/// What a v1 controller is called in v2: `blkio` became `io`; the v1
/// freezer became the core file `cgroup.freeze` of every non-root v2
/// cgroup (Linux 5.2), so it needs no controller (`None`).
pub fn v2_counterpart(v1: &str) -> Option<&'static str> {
    match v1 {
        "blkio" => Some("io"),
        "freezer" => None,
        "cpuset" => Some("cpuset"),
        "cpu" | "cpuacct" => Some("cpu"),
        "memory" => Some("memory"),
        "pids" => Some("pids"),
        "hugetlb" => Some("hugetlb"),
        "rdma" => Some("rdma"),
        "misc" => Some("misc"),
        _ => Some("?"),
    }
}

/// One line of /proc/self/mountinfo, the fields a cgroup lookup needs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount {
    point: PathBuf,
    fstype: String,
    /// The file system's own options (a v1 hierarchy's controllers).
    super_options: String,
}

/// The mounts of a /proc/PID/mountinfo text (`ID PARENT MAJ:MIN ROOT
/// POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS`).
fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|l| {
            let (head, tail) = l.split_once(" - ")?;
            let point = head.split_whitespace().nth(4)?;
            let mut t = tail.split_whitespace();
            let (fstype, _source, super_options) = (t.next()?, t.next()?, t.next().unwrap_or(""));
            Some(Mount { point: PathBuf::from(unescape(point)), fstype: fstype.into(), super_options: super_options.into() })
        })
        .collect()
}

/// A mount point as mountinfo writes it, its blanks and backslashes as
/// octal escapes (`\040`).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b.get(i + 1..i + 4).filter(|d| b[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn mounts() -> Vec<Mount> {
    parse_mountinfo(&std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default())
}

fn v1_mount<'m>(mounts: &'m [Mount], controller: &str) -> Option<&'m Mount> {
    mounts.iter().find(|m| m.fstype == "cgroup" && m.super_options.split(',').any(|o| o == controller))
}

fn v2_mount(mounts: &[Mount]) -> Option<&Mount> {
    mounts.iter().find(|m| m.fstype == "cgroup2")
}

/// The hierarchy for v1 `controller` among `mounts`: its v1 hierarchy if
/// one is mounted, else the v2 hierarchy when `v2_controllers` (what its
/// root's `cgroup.controllers` lists) has the counterpart (or it needs
/// none). A v2 hierarchy beside v1 controllers (`/sys/fs/cgroup/unified`)
/// has none of them.
fn choose(mounts: &[Mount], controller: &str, v2_controllers: impl Fn(&Path) -> Option<String>) -> Option<Hierarchy> {
    if let Some(m) = v1_mount(mounts, controller) {
        return Some(Hierarchy::V1(m.point.clone()));
    }
    let m = v2_mount(mounts)?;
    match v2_counterpart(controller) {
        None => Some(Hierarchy::V2(m.point.clone())),
        Some(c) => v2_controllers(&m.point)?.split_whitespace().any(|x| x == c).then(|| Hierarchy::V2(m.point.clone())),
    }
}

/// The hierarchy that v1 `controller` (`cpuset`, `freezer`, `blkio`) or
/// its v2 counterpart lives in on this machine; exit 3 naming both when
/// neither is mounted.
pub fn hierarchy(controller: &str) -> Result<Hierarchy> {
    let mounts = mounts();
    choose(&mounts, controller, |root| std::fs::read_to_string(root.join("cgroup.controllers")).ok()).ok_or_else(|| {
        let v2 = match v2_counterpart(controller) {
            Some(c) => format!("no cgroup v2 hierarchy whose root lists {c} in cgroup.controllers"),
            None => "no cgroup v2 hierarchy".into(),
        };
        Error::MissingKernelFeature {
            feature: format!("the cgroup {controller} controller"),
            detail: format!("no cgroup v1 hierarchy with {controller} and {v2} is mounted (/proc/self/mountinfo)"),
        }
    })
}

/// The mount point of the v1 hierarchy that has `controller`; exit 3
/// naming the controller when there is none.
pub fn hierarchy_root(controller: &str) -> Result<PathBuf> {
    v1_mount(&mounts(), controller).map(|m| m.point.clone()).ok_or_else(|| Error::MissingKernelFeature {
        feature: format!("the cgroup v1 {controller} controller"),
        detail: format!("no cgroup v1 hierarchy with {controller} is mounted (/proc/self/mountinfo)"),
    })
}

/// The mount point of the cgroup v2 hierarchy (`/sys/fs/cgroup/unified`
/// beside v1 controllers, or `/sys/fs/cgroup`); exit 3 when none is mounted.
pub fn v2_root() -> Result<PathBuf> {
    v2_mount(&mounts()).map(|m| m.point.clone()).ok_or_else(|| Error::MissingKernelFeature {
        feature: "a mounted cgroup v2 hierarchy".into(),
        detail: "none in /proc/self/mountinfo (mount -t cgroup2 none /sys/fs/cgroup/unified)".into(),
    })
}

/// The cgroup of `controller`'s v1 hierarchy that thread `tid` is in, as a
/// path below the hierarchy's root (`/`, `/irqlab-dl`).
pub fn of_thread(tid: i32, controller: &str) -> Result<String> {
    let path = format!("/proc/{tid}/cgroup");
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(format!("reading {path}"), e))?;
    parse_membership(&text, controller).ok_or_else(|| Error::Failed(format!("{path} names no {controller} cgroup")))
}

/// The v2 cgroup process `pid` is in, as a path below the v2 root.
pub fn of_process_v2(pid: i32) -> Result<String> {
    let path = format!("/proc/{pid}/cgroup");
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(format!("reading {path}"), e))?;
    parse_v2_membership(&text).ok_or_else(|| Error::Failed(format!("{path} names no cgroup v2 cgroup (no `0::` line)")))
}

/// The `controller` line of a /proc/TID/cgroup text (`N:ctrl,ctrl:/path`).
fn parse_membership(text: &str, controller: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
        ctrls.split(',').any(|c| c == controller).then(|| path.to_string())
    })
}

/// The v2 line of a /proc/PID/cgroup text (`0::/path`).
fn parse_v2_membership(text: &str) -> Option<String> {
    text.lines().find_map(|l| l.strip_prefix("0::").map(String::from))
}

/// Moves thread `tid` into `cgroup` (a path below the root of
/// `controller`'s v1 hierarchy).
pub fn move_thread(tid: i32, controller: &str, cgroup: &str) -> Result<()> {
    let tasks = hierarchy_root(controller)?.join(cgroup.trim_start_matches('/')).join("tasks");
    std::fs::write(&tasks, tid.to_string()).map_err(|e| Error::io(format!("moving thread {tid} into {}", tasks.display()), e))
}

/// Moves process `pid` (every thread of it: v2 places processes) into
/// `cgroup`, a path below the v2 root.
pub fn move_process_v2(pid: i32, cgroup: &str) -> Result<()> {
    let procs = v2_root()?.join(cgroup.trim_start_matches('/')).join("cgroup.procs");
    std::fs::write(&procs, pid.to_string()).map_err(|e| Error::io(format!("moving process {pid} into {}", procs.display()), e))
}

/// The v2 cgroup thread `tid` is in (a thread of a threaded subtree may be
/// in a cgroup of its own), as a path below the v2 root.
pub fn of_thread_v2(tid: i32) -> Result<String> {
    let path = format!("/proc/{tid}/task/{tid}/cgroup");
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(format!("reading {path}"), e))?;
    parse_v2_membership(&text).ok_or_else(|| Error::Failed(format!("{path} names no cgroup v2 cgroup (no `0::` line)")))
}

/// Moves thread `tid` alone into `cgroup`, a path below the v2 root,
/// through `cgroup.threads`: the cgroup must be threaded (or the domain
/// of the threaded subtree) and the thread's process in that subtree.
pub fn move_thread_v2(tid: i32, cgroup: &str) -> Result<()> {
    let threads = v2_root()?.join(cgroup.trim_start_matches('/')).join("cgroup.threads");
    std::fs::write(&threads, tid.to_string()).map_err(|e| Error::io(format!("moving thread {tid} into {}", threads.display()), e))
}

/// Makes the new v2 cgroup `dir` threaded: a member of its parent's
/// threaded subtree, whose processes' threads it can then take one by
/// one. There is no way back (only removing the cgroup), so it is not a
/// journal entry of its own: the cgroup's removal undoes it.
pub fn make_threaded(dir: &Path) -> Result<()> {
    write_v2(&dir.join("cgroup.type"), "threaded")
}

fn write_v2(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| Error::io(format!("writing `{text}` to {}", path.display()), e))
}

/// Whether v2 cgroup `dir` gives `controller` to its children (its
/// `cgroup.subtree_control` lists it).
pub fn subtree_enabled(dir: &Path, controller: &str) -> Result<bool> {
    let path = dir.join("cgroup.subtree_control");
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    Ok(text.split_whitespace().any(|c| c == controller))
}

/// Gives `controller` to the children of v2 cgroup `dir`, or takes it back.
pub fn set_subtree(dir: &Path, controller: &str, enabled: bool) -> Result<()> {
    let path = dir.join("cgroup.subtree_control");
    let text = format!("{}{controller}", if enabled { '+' } else { '-' });
    std::fs::write(&path, &text).map_err(|e| Error::io(format!("writing `{text}` to {}", path.display()), e))
}

/// Creates the cgroup directory `path` (nothing when it exists).
pub fn create(path: &Path) -> Result<()> {
    match std::fs::create_dir(path) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(Error::io(format!("creating cgroup {}", path.display()), e)),
        _ => Ok(()),
    }
}

/// Removes the cgroup `path`, first moving every task still in it to its
/// parent (a cgroup with tasks cannot be removed): threads through v1's
/// `tasks` and a threaded v2 cgroup's `cgroup.threads`, processes through
/// v2's `cgroup.procs` (a v2 cgroup has `cgroup.controllers`); a process leaving a frozen v2 cgroup thaws.
/// Nothing when it is gone. A v2 cgroup whose last tasks are exiting
/// stays busy a moment: the removal is retried for a second.
pub fn remove(path: &Path) -> Result<()> {
    if !path.is_dir() {
        return Ok(());
    }
    // A threaded v2 cgroup gives its threads back one by one.
    let members = match std::fs::read_to_string(path.join("cgroup.type")) {
        Ok(kind) if kind.trim() == "threaded" => "cgroup.threads",
        _ if path.join("cgroup.controllers").exists() => "cgroup.procs",
        _ => "tasks",
    };
    let parent = path.parent().map(|p| p.join(members)).ok_or_else(|| Error::Failed(format!("{} has no parent", path.display())))?;
    let mut tries = 0;
    loop {
        let tasks = std::fs::read_to_string(path.join(members)).unwrap_or_default();
        for tid in tasks.split_whitespace() {
            // A task that exited meanwhile is gone anyway.
            let _ = std::fs::write(&parent, tid);
        }
        match std::fs::remove_dir(path) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && tries < 50 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            r => return r.map_err(|e| Error::io(format!("removing cgroup {}", path.display()), e)),
        }
    }
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
        assert_eq!(parse_v2_membership(text).as_deref(), Some("/init.scope"));
        assert_eq!(parse_v2_membership("0::/irqlab-idletime-42\n").as_deref(), Some("/irqlab-idletime-42"));
        assert_eq!(parse_v2_membership("3:cpuset:/\n"), None);
    }

    #[test]
    fn a_controller_without_a_hierarchy_is_exit_3_naming_it() {
        let e = hierarchy_root("no-such-controller").unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(e.to_string().contains("no-such-controller"), "{e}");
        let e = hierarchy("no-such-controller").unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(e.to_string().contains("no-such-controller") && e.to_string().contains("cgroup v2"), "{e}");
    }

    /// This host: v1 controllers, an empty v2 hierarchy beside them.
    const HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
    /// A current distribution (and the Debian guests): v2 alone.
    const UNIFIED: &str = "\
22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
26 24 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";

    #[test]
    fn mountinfo_lines_give_point_type_and_options() {
        let m = parse_mountinfo(UNIFIED);
        assert_eq!(m.len(), 2);
        assert_eq!(
            m[1],
            Mount { point: "/sys/fs/cgroup".into(), fstype: "cgroup2".into(), super_options: "rw,nsdelegate,memory_recursiveprot".into() }
        );
        let m = parse_mountinfo("50 1 0:40 / /mnt/my\\040cgroups rw - cgroup cgroup rw,cpuset\nnot a mount line\n");
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].point, PathBuf::from("/mnt/my cgroups"));
        assert_eq!(unescape("a\\134b\\011"), "a\\b\t");
    }

    #[test]
    fn the_v1_hierarchy_is_chosen_where_the_machine_has_it() {
        let mounts = parse_mountinfo(HYBRID);
        // The unified hierarchy beside v1 has no controllers.
        let none = |_: &Path| Some(String::new());
        assert_eq!(choose(&mounts, "cpuset", none), Some(Hierarchy::V1("/sys/fs/cgroup/cpuset".into())));
        assert_eq!(choose(&mounts, "freezer", none), Some(Hierarchy::V1("/sys/fs/cgroup/freezer".into())));
        assert_eq!(choose(&mounts, "blkio", none), Some(Hierarchy::V1("/sys/fs/cgroup/blkio".into())));
        assert_eq!(choose(&mounts, "memory", none), None);
    }

    #[test]
    fn on_a_v2_only_machine_v2_is_chosen_when_its_root_has_the_counterpart() {
        let mounts = parse_mountinfo(UNIFIED);
        let all = |p: &Path| {
            assert_eq!(p, Path::new("/sys/fs/cgroup"));
            Some("cpuset cpu io memory hugetlb pids rdma misc\n".to_string())
        };
        for c in ["cpuset", "blkio", "freezer"] {
            let h = choose(&mounts, c, all).unwrap();
            assert!(h.is_v2() && h.root() == Path::new("/sys/fs/cgroup") && h.version() == "cgroup v2", "{c}: {h:?}");
        }
        // cpuset not offered: no hierarchy for it; the freezer needs no controller.
        let no_cpuset = |_: &Path| Some("cpu io memory pids\n".to_string());
        assert_eq!(choose(&mounts, "cpuset", no_cpuset), None);
        assert!(choose(&mounts, "freezer", |_: &Path| None).is_some_and(|h| h.is_v2()));
        assert_eq!(choose(&mounts, "blkio", |_: &Path| None), None);
        assert_eq!(choose(&parse_mountinfo(""), "freezer", all), None);
    }
}
