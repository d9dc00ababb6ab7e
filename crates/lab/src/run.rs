//! `irqlab lab run`: one command as root in a guest of one kernel.
//!
//! The guest is virtme-ng's: this machine's root file system read-only
//! over 9p, with writable overlays (`/etc`, `/tmp`, `/var`, ...) and
//! tmpfs `/run`. The current directory is shared writable, so a command's
//! output files land where the user asked. Under emulation virtme-ng
//! cannot find its virtio-serial return port and exits 255 whatever the
//! command did, so the command's stdout, stderr and exit status come back
//! through a run directory shared with the guest; the host streams the
//! two files as they grow.

use crate::accel::{self, Accel, Choice, Decision};
use crate::catalog::KernelSpec;
use crate::guest_group::GuestGroup;
use crate::image::{self, Preemption};
use crate::{cache, fetch, root, tools, Error, Result};
use serde::Serialize;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The default `--timeout`: a PREEMPT_RT guest boots in 6-8 s under
/// emulation, and the longest smoke suite runs a few minutes there.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20 * 60);

/// A kernel ready to boot.
#[derive(Debug, Clone, Serialize)]
pub struct Guest {
    /// `debian:6.1-rt` or the image's path.
    pub kernel: String,
    pub release: String,
    pub preemption: Preemption,
    /// The Debian package and version, for a known kernel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
    #[serde(skip)]
    pub image: PathBuf,
}

/// Finds the kernel's image, fetching a known kernel on first use.
pub fn resolve(spec: &KernelSpec, progress: &mut dyn FnMut(&str)) -> Result<Guest> {
    match spec {
        KernelSpec::Known(known) => {
            let dir = cache::kernel_dir(known);
            let (manifest, dir) = match cache::read_manifest(known)? {
                Some(m) if m.image_path(&dir).is_file() => (m, dir),
                _ => {
                    progress(&format!("{} is not fetched yet: fetching it", known.name));
                    fetch::fetch(known, progress)?
                }
            };
            let info = image::inspect(&manifest.image_path(&dir))?;
            Ok(Guest {
                kernel: known.name.to_string(),
                release: info.release,
                preemption: info.preemption,
                package: Some(format!("{} {}", manifest.package, manifest.package_version)),
                image: manifest.image_path(&dir),
            })
        }
        KernelSpec::Path(path) => {
            let info = image::inspect(path)?;
            let image = std::fs::canonicalize(path).map_err(|e| Error::Usage(format!("{}: {e}", path.display())))?;
            Ok(Guest { kernel: path.display().to_string(), release: info.release, preemption: info.preemption, package: None, image })
        }
    }
}

#[derive(Debug, Clone)]
pub struct Options {
    pub cpus: u32,
    pub memory: String,
    pub disks: Vec<PathBuf>,
    /// QEMU's `-icount shift=2,sleep=off`: the guest's clock follows
    /// executed instructions (deterministic, free of the host's stalls).
    pub icount: bool,
    pub append: Vec<String>,
    pub timeout: Duration,
    /// Kill the guest when its command has printed nothing for this long
    /// after it started: an emulated kernel that livelocked (seen in TCG
    /// guests under a loaded host) would otherwise hold the run until
    /// `timeout`.
    pub stall: Option<Duration>,
    pub accel: Choice,
    /// Host directories the guest may write besides the current one.
    pub rw_dirs: Vec<PathBuf>,
    /// Boot this root file system with systemd as init instead of the
    /// host's root (`root`): a second run of the same root is a reboot.
    pub root: Option<PathBuf>,
    /// Two virtio NICs wired to each other (virtme-ng's `--network loop`,
    /// no DHCP): devices with NAPI for the guest, and no traffic leaves it.
    pub loop_nics: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            cpus: 2,
            memory: "2G".into(),
            disks: Vec::new(),
            icount: false,
            append: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            stall: None,
            accel: Choice::Auto,
            rw_dirs: Vec::new(),
            root: None,
            loop_nics: false,
        }
    }
}

/// What a run records of its guest: the `lab` block of every JSON
/// document a command writes inside it (`IRQLAB_LAB` in its environment).
#[derive(Debug, Clone, Serialize)]
pub struct LabBlock {
    pub kernel: String,
    pub release: String,
    pub preemption: Preemption,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
    pub accel: Accel,
    pub accel_reason: String,
    pub icount: bool,
    pub cpus: u32,
    pub memory: String,
    /// Timings inside are an emulated CPU's, not this hardware's.
    pub emulated: bool,
}

pub struct Outcome {
    /// The command's exit status inside the guest.
    pub status: i32,
    pub lab: LabBlock,
    pub elapsed: Duration,
}

/// Where the command's files are exchanged: a temporary directory the
/// guest sees at the same path, or, booting a root of its own
/// (`Options::root`), one inside that root.
enum RunDir {
    Temporary(tempfile::TempDir),
    InRoot(root::PreparedRoot),
}

/// The guest's side of a run: its run directory, the command's working
/// directory, and whether the script powers the guest off (under
/// systemd nothing else ends the boot).
struct GuestPlace {
    share: PathBuf,
    cwd: PathBuf,
    power_off: bool,
}

impl RunDir {
    fn new(options: &Options, guest: &Guest, notice: &mut dyn FnMut(&str)) -> Result<RunDir> {
        let Some(dir) = &options.root else {
            let tmp = tempfile::Builder::new().prefix("irqlab-lab-").tempdir().map_err(|e| Error::Failed(format!("run directory: {e}")))?;
            return Ok(RunDir::Temporary(tmp));
        };
        let dir = root::check(dir)?;
        notice(&format!("lab: booting {} with systemd as init (what the guest writes there stays for its next boot)", dir.display()));
        Ok(RunDir::InRoot(root::prepare(&dir, modules_of(guest).as_deref(), &guest.release)?))
    }

    fn host(&self) -> &Path {
        match self {
            RunDir::Temporary(tmp) => tmp.path(),
            RunDir::InRoot(prepared) => prepared.share.path(),
        }
    }

    fn guest(&self) -> Result<GuestPlace> {
        Ok(match self {
            RunDir::Temporary(tmp) => GuestPlace {
                share: tmp.path().to_path_buf(),
                cwd: std::env::current_dir().map_err(|e| Error::Failed(format!("current directory: {e}")))?,
                power_off: false,
            },
            RunDir::InRoot(prepared) => GuestPlace { share: prepared.guest_share.clone(), cwd: PathBuf::from("/root"), power_off: true },
        })
    }

    /// What tells this guest's processes from others (`guest_group`):
    /// a path on vng's and QEMU's command lines.
    fn identity(&self) -> &Path {
        match self {
            RunDir::Temporary(tmp) => tmp.path(),
            RunDir::InRoot(prepared) => &prepared.dir,
        }
    }
}

/// The kernel's modules: `lib/modules/RELEASE` above its image's directory.
fn modules_of(guest: &Guest) -> Option<PathBuf> {
    let dir = guest.image.parent()?.parent()?.join("lib/modules").join(&guest.release);
    dir.is_dir().then_some(dir)
}

/// Boots `guest`, runs `command` inside as root, streams its output to
/// this process's stdout/stderr, and returns its exit status. `stop` is
/// polled: when it turns true the guest is killed (Ctrl-C).
pub fn run(guest: &Guest, command: &[String], options: &Options, stop: &dyn Fn() -> bool, notice: &mut dyn FnMut(&str)) -> Result<Outcome> {
    if command.is_empty() {
        return Err(Error::Usage("lab run: no command given (irqlab lab run --kernel K -- COMMAND...)".into()));
    }
    let mut options = options.clone();
    for disk in &mut options.disks {
        if !disk.is_file() {
            return Err(Error::Usage(format!("--disk {}: not a file (create one with `truncate -s 256M FILE`)", disk.display())));
        }
        // vng runs in the kernel's directory: a relative path would not be found.
        *disk = std::fs::canonicalize(&*disk).map_err(|e| Error::Usage(format!("--disk {}: {e}", disk.display())))?;
    }
    let options = &options;
    let (qemu, vng) = tools::check_all()?;
    let Decision { accel, reason } = accel::decide(options.accel, &qemu, &guest.image)?;
    let lab = LabBlock {
        kernel: guest.kernel.clone(),
        release: guest.release.clone(),
        preemption: guest.preemption,
        package: guest.package.clone(),
        accel,
        accel_reason: reason.clone(),
        icount: options.icount,
        cpus: options.cpus,
        memory: options.memory.clone(),
        emulated: accel == Accel::Tcg,
    };
    notice(&format!(
        "lab: {} ({}, {}) under {}{}: {reason}{}",
        guest.kernel,
        guest.release,
        guest.preemption.label(),
        accel.label(),
        if options.icount { " with -icount" } else { "" },
        if accel == Accel::Tcg { "; timings inside are an emulated CPU's, not this hardware's" } else { "" }
    ));
    let run_dir = RunDir::new(options, guest, notice)?;
    let share = run_dir.host();
    let place = run_dir.guest()?;
    write_guest_script(share, &place, command, &lab)?;
    let started = Instant::now();
    let mut ended = boot(&vng, guest, options, accel, &run_dir, &place, stop)?;
    if ended.as_deref() == Some(BOOT_STALLED) {
        // The command never started, so booting again cannot run it twice.
        notice(&format!("lab: the guest did not start the command within {} s; booting it again", BOOT_TIMEOUT.as_secs()));
        ended = boot(&vng, guest, options, accel, &run_dir, &place, stop)?;
    }
    let status = std::fs::read_to_string(share.join("status")).ok().and_then(|s| s.trim().parse::<i32>().ok());
    match (status, ended) {
        (Some(status), _) => Ok(Outcome { status, lab, elapsed: started.elapsed() }),
        (None, why) => {
            let why = why.unwrap_or_else(|| {
                let started_command = share.join("started").exists();
                format!(
                    "the guest ended after {:.0} s without the command's exit status ({})",
                    started.elapsed().as_secs_f64(),
                    if started_command {
                        "the command had started: a kernel panic or a lost guest"
                    } else {
                        "the command never started: the boot failed"
                    }
                )
            });
            Err(Error::Failed(format!("{why}; the guest's console:\n{}", console_tail(&share.join("console.log"), 15))))
        }
    }
}

/// How long a guest may take to start the command: a PREEMPT_RT guest
/// boots in 6-8 s under emulation, a minute on a loaded host; one that has
/// not started by then has stalled in its boot (seen once in a hundred
/// boots on a loaded 2-CPU host, the console silent), and is booted again.
const BOOT_TIMEOUT: Duration = Duration::from_secs(300);
const BOOT_STALLED: &str = "the guest did not start the command (boot stalled)";

/// One boot of the guest: streams the command's output until the guest
/// ends (`None`) or is killed (`Some(why)`: --timeout, Ctrl-C, a stalled
/// boot). The console goes to the run directory's console.log.
fn boot(
    vng: &Path,
    guest: &Guest,
    options: &Options,
    accel: Accel,
    run_dir: &RunDir,
    place: &GuestPlace,
    stop: &dyn Fn() -> bool,
) -> Result<Option<String>> {
    let share = run_dir.host();
    let mut vng_command = vng_command(vng, guest, options, accel, run_dir, place);
    let console = File::create(share.join("console.log")).map_err(|e| Error::Failed(format!("console log: {e}")))?;
    let started = Instant::now();
    vng_command.stdin(Stdio::null()).stdout(console.try_clone().map_err(|e| Error::Failed(e.to_string()))?).stderr(console);
    // The guest's own process group, which dies with this process on every
    // exit path (`guest_group`).
    let (mut child, _guest) = GuestGroup::spawn(&mut vng_command, &guest.kernel, run_dir.identity())
        .map_err(|e| Error::Missing(format!("{}: {e}", vng.display())))?;
    let mut stdout = Tail::new(share.join("stdout"));
    let mut stderr = Tail::new(share.join("stderr"));
    // Since when the started command has printed nothing (--stall).
    let mut quiet_since = Instant::now();
    let ended = loop {
        let printed = stdout.forward(&mut std::io::stdout()) + stderr.forward(&mut std::io::stderr());
        if printed > 0 || !share.join("started").exists() {
            quiet_since = Instant::now();
        }
        if let Ok(Some(_)) = child.try_wait() {
            break None;
        }
        if started.elapsed() > options.timeout {
            break Some(format!("the guest was killed at --timeout {} s", options.timeout.as_secs()));
        }
        if let Some(stall) = options.stall.filter(|&s| quiet_since.elapsed() > s) {
            break Some(format!("the guest was killed: its command printed nothing for {} s (--stall)", stall.as_secs()));
        }
        if started.elapsed() > BOOT_TIMEOUT && !share.join("started").exists() {
            break Some(BOOT_STALLED.to_string());
        }
        if stop() {
            break Some("the guest was killed: interrupted".to_string());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    if ended.is_some() {
        // vng runs QEMU as a child of its own: the whole group goes.
        unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
        let _ = child.wait();
    }
    stdout.forward(&mut std::io::stdout());
    stderr.forward(&mut std::io::stderr());
    Ok(ended)
}

/// The script the guest runs: the host's PATH and the user's IRQLAB_*
/// settings, the command in the user's directory, its output and status
/// into the shared run directory (status written last, by rename); in a
/// root of its own, then a clean power-off.
fn write_guest_script(share: &Path, place: &GuestPlace, command: &[String], lab: &LabBlock) -> Result<()> {
    let mut script = String::from("#!/bin/sh\n");
    let mut export = |name: &str, value: &str| script.push_str(&format!("export {name}={}\n", sh_quote(value)));
    for (name, value) in std::env::vars() {
        let forwarded =
            name.starts_with("IRQLAB_") || matches!(name.as_str(), "PATH" | "HOME" | "RUST_BACKTRACE" | "RUST_LOG" | "CARGO_TARGET_DIR");
        if forwarded && name != "IRQLAB_LAB" {
            export(&name, &value);
        }
    }
    export("IRQLAB_LAB", &serde_json::to_string(lab).unwrap_or_default());
    if place.power_off {
        // The root's own irqlab (the build under test, copied in) first.
        script.push_str("export PATH=/usr/local/bin:$PATH HOME=/root\n");
    }
    let dir = place.share.display().to_string();
    // First of all: the host knows the guest booted and started.
    script.push_str(&format!(": >{}/started\n", sh_quote(&dir)));
    script.push_str(&format!("cd {} || exit 97\n", sh_quote(&place.cwd.display().to_string())));
    let words: Vec<String> = command.iter().map(|w| sh_quote(w)).collect();
    script.push_str(&format!("{} >{q}/stdout 2>{q}/stderr </dev/null\n", words.join(" "), q = sh_quote(&dir)));
    script.push_str(&format!("echo $? >{q}/status.tmp && mv {q}/status.tmp {q}/status\n", q = sh_quote(&dir)));
    if place.power_off {
        // A clean shutdown, as a reboot makes: systemd stops every
        // service (irqlab's installed unit restores what it held).
        script.push_str("systemctl --no-block poweroff\n");
    }
    let path = share.join("guest.sh");
    std::fs::write(&path, script).map_err(|e| Error::io("writing", &path, e))?;
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).map_err(|e| Error::io("chmod", &path, e))
}

fn vng_command(vng: &Path, guest: &Guest, options: &Options, accel: Accel, run_dir: &RunDir, place: &GuestPlace) -> Command {
    let mut command = Command::new(vng);
    // vng calls virtme-run by name: its own bin directory goes first.
    if let Some(bin) = vng.parent() {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let joined = std::env::join_paths(std::iter::once(bin.to_path_buf()).chain(std::env::split_paths(&path))).unwrap_or(path);
        command.env("PATH", joined);
    }
    command.arg("--run").arg(&guest.image).args(["--disable-microvm", "--cpus", &options.cpus.to_string(), "--memory", &options.memory]);
    // The kernel's own messages into console.log: a guest that ends
    // without its command's status shows its panic or oops in the tail.
    command.arg("--verbose");
    if accel == Accel::Tcg {
        command.arg("--disable-kvm");
    }
    match run_dir {
        // The run directory is inside the root, which the guest writes.
        RunDir::InRoot(prepared) => {
            command.arg("--root").arg(&prepared.dir).args(["--rw", "--systemd"]);
        }
        RunDir::Temporary(tmp) => {
            command.arg("--rwdir").arg(tmp.path());
            if place.cwd != Path::new("/") {
                command.arg("--rwdir").arg(&place.cwd);
            }
            for dir in options.rw_dirs.iter().filter(|d| !d.starts_with(&place.cwd)) {
                command.arg("--rwdir").arg(dir);
            }
        }
    }
    if options.loop_nics {
        command.args(["--network", "loop", "--no-dhcp"]);
    }
    for disk in &options.disks {
        command.arg("--disk").arg(disk);
    }
    for append in &options.append {
        command.arg("--append").arg(append);
    }
    if options.icount {
        command.arg("--qemu-opts=-icount shift=2,sleep=off");
    }
    // The kernel's directory holds lib/modules: virtme-ng looks above the image.
    if let Some(dir) = guest.image.parent() {
        command.current_dir(dir);
    }
    // Under systemd the root's unit runs the script (`root`).
    if let RunDir::Temporary(tmp) = run_dir {
        command.arg("--").arg(tmp.path().join("guest.sh"));
    }
    command
}

/// A file the guest appends to, forwarded as it grows.
struct Tail {
    path: PathBuf,
    offset: u64,
}

impl Tail {
    fn new(path: PathBuf) -> Self {
        Tail { path, offset: 0 }
    }

    /// Copies what was appended since the last call; how many bytes.
    fn forward(&mut self, out: &mut dyn Write) -> usize {
        let Ok(mut file) = File::open(&self.path) else { return 0 };
        if file.seek(SeekFrom::Start(self.offset)).is_err() {
            return 0;
        }
        let mut bytes = Vec::new();
        let Ok(n) = file.read_to_end(&mut bytes) else { return 0 };
        self.offset += n as u64;
        let _ = out.write_all(&bytes);
        let _ = out.flush();
        n
    }
}

/// The console's last `lines` lines; when the kernel oopsed, from the
/// oops's first line instead (its reason and stack), at most 60 lines.
fn console_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read(path).map(|b| String::from_utf8_lossy(&b).replace('\r', "")).unwrap_or_default();
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let oops_starts = ["[ cut here ]", "BUG:", "Oops:", "general protection fault", "Kernel panic"];
    let oops = all.iter().position(|l| oops_starts.iter().any(|m| l.contains(m)));
    let tail = match oops {
        Some(i) if all.len() - i <= 60 => &all[i..],
        Some(i) => &all[i..i + 60],
        None => &all[all.len().saturating_sub(lines)..],
    };
    if tail.is_empty() {
        "  (nothing)".into()
    } else {
        tail.iter().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n")
    }
}

/// A word the shell reads back as exactly `word`.
pub fn sh_quote(word: &str) -> String {
    if !word.is_empty() && word.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./:=,+@%".contains(&b)) {
        return word.to_string();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_survives_the_shell() {
        let words = ["plain", "two words", "it's", "$HOME", "", "a\"b", "--json=-"];
        for word in words {
            let out = std::process::Command::new("sh").arg("-c").arg(format!("printf %s {}", sh_quote(word))).output().unwrap();
            assert_eq!(String::from_utf8(out.stdout).unwrap(), word);
        }
    }

    #[test]
    fn the_console_tail_starts_at_the_oops() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("console.log");
        let boot: Vec<String> = (0..100).map(|i| format!("[ {i}.0] booting")).collect();
        std::fs::write(&path, boot.join("\n")).unwrap();
        assert_eq!(console_tail(&path, 3), "  [ 97.0] booting\n  [ 98.0] booting\n  [ 99.0] booting");
        let oops = ["[ 26.7] BUG: unable to handle page fault", "[ 26.7] RIP: 0010:blk_mq_start_request+0x16/0x1b0"];
        let panic = "[ 26.8] Kernel panic - not syncing: Fatal exception in interrupt";
        std::fs::write(&path, format!("{}\n{}\n{}\n", boot.join("\n"), oops.join("\n"), panic)).unwrap();
        let tail = console_tail(&path, 1);
        assert!(tail.starts_with("  [ 26.7] BUG: unable") && tail.ends_with("Fatal exception in interrupt"), "{tail}");
        assert_eq!(console_tail(&dir.path().join("none"), 5), "  (nothing)");
    }
}
