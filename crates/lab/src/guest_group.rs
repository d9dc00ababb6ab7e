//! A guest dies with the `lab run` that started it, on every exit path.
//!
//! An emulated guest takes a whole host CPU and a livelocked one never
//! ends by itself (its `--timeout` is enforced by `lab run`), so a guest
//! left behind makes every later measurement on the host wrong. Three
//! layers, each covering what the one before cannot:
//!
//! - `lab run` kills the guest's process group (vng and the QEMU it
//!   starts) when it ends, unwinding or not (`atexit`);
//! - a **watchdog**, a shell in a process group of its own that ignores
//!   the terminal's signals, holds a pipe from `lab run`: when `lab run`
//!   dies, even by SIGKILL, the pipe closes and the watchdog kills the
//!   group; vng also gets SIGKILL when the thread that started it dies
//!   (`PR_SET_PDEATHSIG`);
//! - a **record** under [`DIR`] names the group, its owner and the run
//!   directory, so that a guest outliving both (its watchdog killed too)
//!   is named by `irqlab control status` and `doctor` and ended by
//!   `irqlab control revert --all` (the host crate's journal reads
//!   [`GuestRecord::all`], as it does an abandoned testbed).

use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};

/// Where records live: tmpfs, so a reboot (which ends every guest) empties it.
pub const DIR: &str = "/run/irqlab/lab";

/// One running guest, as `lab run` recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestRecord {
    /// The guest's process group: vng's pid, which leads it.
    pub pgid: i32,
    /// The `lab run` that owns it: pid and start time in clock ticks
    /// (`/proc/PID/stat` field 22), so a later process with its pid is not it.
    pub owner_pid: i32,
    pub owner_start_ticks: u64,
    /// The watchdog's pid (see the module's doc).
    pub watchdog_pid: i32,
    /// `debian:6.12-rt` or the image's path.
    pub kernel: String,
    /// The run directory shared with the guest: it is on vng's and QEMU's
    /// command lines, which tells the group's processes from others.
    pub share: PathBuf,
}

impl GuestRecord {
    fn path(&self) -> PathBuf {
        Path::new(DIR).join(format!("guest-{}.json", self.pgid))
    }

    /// Every readable record (a record is written atomically, so an
    /// unreadable one is not irqlab's and is skipped).
    pub fn all() -> Vec<GuestRecord> {
        let Ok(dir) = std::fs::read_dir(DIR) else { return Vec::new() };
        let mut found: Vec<GuestRecord> = dir
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
            .filter_map(|e| std::fs::read_to_string(e.path()).ok())
            .filter_map(|text| serde_json::from_str(&text).ok())
            .collect();
        found.sort_by_key(|r| r.pgid);
        found
    }

    /// Whether the `lab run` that started the guest still runs.
    pub fn owner_alive(&self) -> bool {
        start_ticks(self.owner_pid) == Some(self.owner_start_ticks)
    }

    /// The guest's processes still running: members of its process group
    /// whose command line names its run directory.
    pub fn processes(&self) -> Vec<i32> {
        let share = self.share.to_string_lossy().into_owned();
        let Ok(proc_dir) = std::fs::read_dir("/proc") else { return Vec::new() };
        proc_dir
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()))
            .filter(|&pid| process_group(pid) == Some(self.pgid))
            .filter(|&pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| String::from_utf8_lossy(&c).contains(&share)))
            .collect()
    }

    pub fn running(&self) -> bool {
        !self.processes().is_empty()
    }

    /// Kills what is left of the guest and removes the record.
    pub fn end(&self) -> std::io::Result<()> {
        if self.running() {
            // SAFETY: signalling a process group whose members were just
            // checked to be this guest's.
            if unsafe { libc::kill(-self.pgid, libc::SIGKILL) } != 0 {
                let err = std::io::Error::last_os_error();
                if err.raw_os_error() != Some(libc::ESRCH) {
                    return Err(err);
                }
            }
        }
        match std::fs::remove_file(self.path()) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    fn write(&self) -> std::io::Result<()> {
        std::fs::create_dir_all(DIR)?;
        let tmp = Path::new(DIR).join(format!(".guest-{}.tmp", self.pgid));
        std::fs::write(&tmp, serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?)?;
        std::fs::rename(&tmp, self.path())
    }
}

/// Field `n` (1-based, as proc(5) counts) of `/proc/PID/stat`.
fn stat_field(pid: i32, n: usize) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(n.checked_sub(3)?).map(String::from)
}

fn start_ticks(pid: i32) -> Option<u64> {
    stat_field(pid, 22)?.parse().ok()
}

fn process_group(pid: i32) -> Option<i32> {
    stat_field(pid, 5)?.parse().ok()
}

/// What the watchdog runs: the group and the record's path come first on
/// its pipe; then `done` when `lab run` ended the guest itself, or
/// end-of-file when `lab run` died.
const WATCHDOG: &str = r#"trap '' INT HUP TERM QUIT PIPE
read -r pgid record || exit 0
read -r word
[ "$word" = done ] && exit 0
kill -s KILL -- "-$pgid" 2>/dev/null
[ -n "$record" ] && rm -f "$record"
exit 0
"#;

/// The process group of the guest being run, killed at process exit if
/// still held: a second Ctrl-C or SIGTERM exits without unwinding.
static HELD_GROUP: AtomicI32 = AtomicI32::new(0);

extern "C" fn kill_held_group() {
    let pgid = HELD_GROUP.swap(0, Ordering::SeqCst);
    if pgid > 0 {
        // SAFETY: signalling the process group this process started.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
}

/// A started guest's process group, held until it is dropped (after the
/// guest ended or was killed).
pub(crate) struct GuestGroup {
    watchdog: Option<(Child, ChildStdin)>,
    record: Option<GuestRecord>,
}

impl GuestGroup {
    /// Spawns `command` as the leader of a new process group that dies with
    /// this process. The watchdog starts first, so no moment exists in
    /// which a started guest has none.
    pub(crate) fn spawn(command: &mut Command, kernel: &str, share: &Path) -> std::io::Result<(Child, GuestGroup)> {
        static HOOK: std::sync::Once = std::sync::Once::new();
        // SAFETY: registering a plain extern "C" function with no arguments.
        HOOK.call_once(|| unsafe {
            libc::atexit(kill_held_group);
        });
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg(WATCHDOG)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .ok()
            .and_then(|mut c| c.stdin.take().map(|stdin| (c, stdin)));
        // SAFETY: prctl is async-signal-safe; it only sets this child's
        // parent-death signal (vng dies with the thread that starts it).
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        // Records of guests that ended with their owner gone are of no use.
        for ended in GuestRecord::all().into_iter().filter(|r| !r.owner_alive() && !r.running()) {
            let _ = std::fs::remove_file(ended.path());
        }
        let child = command.process_group(0).spawn()?;
        let pgid = child.id() as i32;
        HELD_GROUP.store(pgid, Ordering::SeqCst);
        let owner_pid = std::process::id() as i32;
        let record = GuestRecord {
            pgid,
            owner_pid,
            owner_start_ticks: start_ticks(owner_pid).unwrap_or(0),
            watchdog_pid: watchdog.as_ref().map_or(0, |(c, _)| c.id() as i32),
            kernel: kernel.to_string(),
            share: share.to_path_buf(),
        };
        // Without root /run/irqlab is not writable: the watchdog still
        // ends the guest, only a guest outliving it would go unnamed.
        let record = record.write().ok().map(|()| record);
        let mut group = GuestGroup { watchdog, record };
        let path = group.record.as_ref().map(|r| r.path().display().to_string()).unwrap_or_default();
        if let Some((_, stdin)) = &mut group.watchdog {
            let _ = writeln!(stdin, "{pgid} {path}");
        }
        Ok((child, group))
    }
}

impl Drop for GuestGroup {
    fn drop(&mut self) {
        HELD_GROUP.store(0, Ordering::SeqCst);
        if let Some((mut watchdog, mut stdin)) = self.watchdog.take() {
            let _ = writeln!(stdin, "done");
            drop(stdin);
            let _ = watchdog.wait();
        }
        if let Some(record) = self.record.take() {
            let _ = std::fs::remove_file(record.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_start_time_and_a_group() {
        let me = std::process::id() as i32;
        assert!(start_ticks(me).is_some_and(|t| t > 0));
        // SAFETY: getpgrp has no preconditions.
        assert_eq!(process_group(me), Some(unsafe { libc::getpgrp() }));
        assert_eq!(start_ticks(-1), None);
    }

    /// The watchdog kills the group when its pipe closes without `done`,
    /// and leaves it alone after `done` (the mechanism under a SIGKILL of
    /// `lab run`; the live test kills a real `lab run`).
    #[test]
    fn the_watchdog_kills_the_group_only_when_its_owner_vanishes() {
        let spawn_sleeper = || Command::new("sleep").arg("60").process_group(0).spawn().unwrap();
        let watchdog = || {
            let mut w = Command::new("sh").arg("-c").arg(WATCHDOG).stdin(Stdio::piped()).process_group(0).spawn().unwrap();
            let stdin = w.stdin.take().unwrap();
            (w, stdin)
        };
        // Owner gone: end of file.
        let mut sleeper = spawn_sleeper();
        let (mut w, mut stdin) = watchdog();
        writeln!(stdin, "{} ", sleeper.id()).unwrap();
        drop(stdin);
        w.wait().unwrap();
        let status = sleeper.wait().unwrap();
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(libc::SIGKILL));
        // Owner ended the guest itself: `done`.
        let mut sleeper = spawn_sleeper();
        let (mut w, mut stdin) = watchdog();
        writeln!(stdin, "{} ", sleeper.id()).unwrap();
        writeln!(stdin, "done").unwrap();
        drop(stdin);
        w.wait().unwrap();
        assert!(sleeper.try_wait().unwrap().is_none(), "the watchdog killed a guest whose owner said done");
        sleeper.kill().unwrap();
        let _ = sleeper.wait();
    }
}
