//! `irqlab lab kernels|fetch|run`: irqlab on the kernels its users run,
//! each booted in a QEMU guest over this machine's root file system.

use crate::error::{CliError, Status};
use crate::flags;
use crate::output::print;
use irqlab_lab::accel::{self, Choice};
use irqlab_lab::catalog::{KernelSpec, KNOWN};
use irqlab_lab::{cache, fetch, run};
use std::path::PathBuf;
use std::sync::atomic::Ordering;

#[derive(clap::Subcommand)]
pub enum Command {
    /// The kernels irqlab knows, which are fetched and where, their
    /// preemption model, and whether KVM or emulation would run them
    Kernels {
        /// Print the list as JSON (`irqlab/lab-kernels/v1`)
        #[arg(long)]
        json: bool,
    },
    /// Fetch and unpack a known kernel's newest Debian package into the cache
    Fetch {
        /// debian:6.1, debian:6.1-rt, debian:6.12 or debian:6.12-rt
        kernel: String,
    },
    /// Boot a kernel in a guest and run COMMAND inside as root; exits with
    /// COMMAND's exit status
    Run(RunArgs),
    /// Run the same survey in each kernel and write one page with the
    /// kernels side by side (findings, curves, settings that differ)
    Compare(CompareArgs),
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// A known kernel (`irqlab lab kernels`; fetched on first use) or the
    /// path of a kernel image (bzImage; modules in lib/modules above it)
    #[arg(long)]
    kernel: String,
    #[command(flatten)]
    guest: GuestArgs,
    /// Boot this root file system with systemd as init instead of this
    /// machine's root (`make lab-root` builds one): the guest's writes stay
    /// there, so a second run is a reboot. The command runs from a unit
    /// after `multi-user.target`, then the guest powers off cleanly; irqlab
    /// itself is copied in as /usr/local/bin/irqlab
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// The command to run inside, after `--`
    #[arg(last = true, required = true, num_args = 1..)]
    command: Vec<String>,
}

#[derive(clap::Args)]
pub struct CompareArgs {
    /// A kernel to compare (repeat: at least two), optionally with kernel
    /// command-line options of its own: 'debian:6.12-rt nohz_full=1
    /// rcu_nocbs=1' (the same kernel with and without them, side by side)
    #[arg(long = "kernel", required = true, num_args = 1)]
    kernels: Vec<String>,
    /// After each kernel, boot it again with the kernel command-line options
    /// its survey recommended (the [boot] of its profile.toml: nohz_full=,
    /// rcu_nocbs=), apply the profile's run-time settings there (`control
    /// apply --persist --allow-missing`; the column is headed `+profile`)
    /// and survey it again: the prediction and its check side by side. One
    /// --kernel is then enough
    #[arg(long)]
    recommended_boot: bool,
    /// Directory for the page (index.html) and each kernel's survey and doctor documents
    #[arg(long, default_value = "irqlab-lab-compare")]
    out: PathBuf,
    #[command(flatten)]
    guest: GuestArgs,
    /// The survey to run in each kernel, after `--`: `survey [OPTIONS]`
    #[arg(last = true, required = true, num_args = 1..)]
    command: Vec<String>,
}

/// How a guest is made: the same for `run` and `compare`.
#[derive(clap::Args)]
struct GuestArgs {
    /// How many virtual CPUs the guest has (a count, not this machine's CPUs)
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    cpus: u32,
    /// Memory of the guest (QEMU's -m: 512M, 2G)
    #[arg(long, default_value = "2G")]
    memory: String,
    /// A file given to the guest as a block device (repeatable)
    #[arg(long)]
    disk: Vec<PathBuf>,
    /// Drive the guest's clock by executed instructions (QEMU -icount
    /// shift=2,sleep=off): deterministic timing, free of the host's stalls
    #[arg(long)]
    icount: bool,
    /// Extra kernel command-line options (repeatable)
    #[arg(long)]
    append: Vec<String>,
    /// Kill the guest after this long and report it
    #[arg(long, default_value = "20min", value_parser = flags::positive)]
    timeout: flags::Duration,
    /// Kill the guest when its command has printed nothing for this long
    /// (an emulated kernel that livelocked); default: only --timeout
    #[arg(long, value_parser = flags::positive)]
    stall: Option<flags::Duration>,
    /// auto: KVM if a probe guest actually runs under it, emulation otherwise
    #[arg(long, value_enum, default_value_t = AccelFlag::Auto)]
    accel: AccelFlag,
    /// Give the guest two virtio NICs wired to each other (no DHCP; no
    /// traffic leaves the guest): network devices with NAPI to tune
    #[arg(long)]
    loop_nics: bool,
}

impl GuestArgs {
    fn options(self) -> run::Options {
        run::Options {
            cpus: self.cpus,
            memory: self.memory,
            disks: self.disk,
            icount: self.icount,
            append: self.append,
            timeout: std::time::Duration::from_nanos(self.timeout.0),
            stall: self.stall.map(|s| std::time::Duration::from_nanos(s.0)),
            accel: match self.accel {
                AccelFlag::Auto => Choice::Auto,
                AccelFlag::Kvm => Choice::Kvm,
                AccelFlag::Tcg => Choice::Tcg,
            },
            rw_dirs: Vec::new(),
            root: None,
            loop_nics: self.loop_nics,
        }
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum AccelFlag {
    Auto,
    Kvm,
    Tcg,
}

pub fn run(command: Command) -> Result<Status, CliError> {
    match command {
        Command::Kernels { json } => kernels(json),
        Command::Fetch { kernel } => {
            let KernelSpec::Known(known) = KernelSpec::parse(&kernel)? else {
                return Err(CliError::Usage(format!("lab fetch {kernel}: a kernel image given by path needs no fetch")));
            };
            let (manifest, dir) = fetch::fetch(&known, &mut |step| eprintln!("lab: {step}"))?;
            print(&format!(
                "{} = {} {} ({}) in {}\n",
                known.name,
                manifest.package,
                manifest.package_version,
                manifest.release,
                dir.display()
            ))?;
            Ok(Status::Success)
        }
        Command::Run(args) => run_in_guest(args),
        Command::Compare(args) => compare(args),
    }
}

fn run_in_guest(args: RunArgs) -> Result<Status, CliError> {
    let spec = KernelSpec::parse(&args.kernel)?;
    // Bad input first (exit 2), whatever else is missing: an image given by
    // path is read before the tools are looked for.
    if let KernelSpec::Path(path) = &spec {
        irqlab_lab::image::inspect(path)?;
    }
    let mut options = args.guest.options();
    if let Some(dir) = &args.root {
        options.root = Some(irqlab_lab::root::check(dir)?);
    }
    irqlab_lab::tools::check_all()?;
    let guest = run::resolve(&spec, &mut |step| eprintln!("lab: {step}"))?;
    let stop = crate::signal::stop_flag();
    let outcome = run::run(&guest, &args.command, &options, &|| stop.load(Ordering::SeqCst), &mut |line| eprintln!("{line}"))?;
    eprintln!("lab: {} exited {} after {:.0} s", guest.kernel, outcome.status, outcome.elapsed.as_secs_f64());
    Ok(Status::Exit(outcome.status))
}

fn kernels(json: bool) -> Result<Status, CliError> {
    let mut rows = Vec::new();
    for known in KNOWN {
        let manifest = cache::read_manifest(known)?;
        rows.push(serde_json::json!({
            "name": known.name,
            "suite": known.suite,
            "preemption": known.preemption.label(),
            "fetched": manifest.as_ref().map(|m| serde_json::json!({
                "package": m.package, "version": m.package_version, "release": m.release,
                "image": m.image_path(&cache::kernel_dir(known)),
            })),
        }));
    }
    let accel = accel::cached();
    if json {
        let doc = serde_json::json!({
            "schema": "irqlab/lab-kernels/v1",
            "cache": cache::root(),
            "kernels": rows,
            "accel": accel,
        });
        print(&format!("{}\n", serde_json::to_string_pretty(&doc).map_err(|e| CliError::Failed(e.to_string()))?))?;
        return Ok(Status::Success);
    }
    let mut out = format!("{:<16} {:<16} {:<19} {}\n", "KERNEL", "PREEMPTION", "SUITE", "FETCHED");
    for (known, row) in KNOWN.iter().zip(&rows) {
        let fetched = match &row["fetched"] {
            serde_json::Value::Null => "no (`irqlab lab fetch` or the first `lab run` fetches it)".to_string(),
            f => format!("{} {}", f["package"].as_str().unwrap_or(""), f["version"].as_str().unwrap_or("")),
        };
        out.push_str(&format!("{:<16} {:<16} {:<19} {fetched}\n", known.name, known.preemption.label(), known.suite));
    }
    out.push_str(&format!("cache: {}\n", cache::root().join("kernels").display()));
    out.push_str(&match accel {
        Some(d) => format!("guests run under {}: {}\n", d.accel.label(), d.reason),
        None if std::fs::metadata("/dev/kvm").is_err() => "guests run under emulation (TCG): no /dev/kvm\n".to_string(),
        None => "KVM or emulation: decided by a probe boot at the first `lab run` on this boot\n".to_string(),
    });
    out.push_str("also: any kernel image by path (`--kernel PATH/bzImage`)\n");
    print(&out)?;
    Ok(Status::Success)
}

/// Each kernel in turn: doctor's document and the survey, written by the
/// guest into OUT/<kernel>/; then the page from what came back. A kernel
/// whose guest failed keeps its column, saying why.
fn compare(args: CompareArgs) -> Result<Status, CliError> {
    if args.kernels.len() < 2 && !args.recommended_boot {
        return Err(CliError::Usage("lab compare: give at least two --kernel (or one with --recommended-boot)".into()));
    }
    if args.command.first().map(String::as_str) != Some("survey") || args.command.iter().any(|w| w == "--out" || w.starts_with("--out=")) {
        return Err(CliError::Usage(
            "lab compare runs a survey in each kernel: -- survey [OPTIONS] (without --out: each kernel's goes to OUT/<kernel>/)".into(),
        ));
    }
    let mut columns_asked = args.kernels.iter().map(|k| ColumnSpec::parse(k)).collect::<Result<Vec<_>, _>>()?;
    for (i, c) in columns_asked.iter().enumerate() {
        if columns_asked[..i].iter().any(|o| o.label() == c.label()) {
            return Err(CliError::Usage(format!("--kernel '{}': given twice (each column is a kernel and its command line)", c.label())));
        }
    }
    for ColumnSpec { spec, .. } in &columns_asked {
        if let KernelSpec::Path(path) = spec {
            irqlab_lab::image::inspect(path)?;
        }
    }
    irqlab_lab::tools::check_all()?;
    std::fs::create_dir_all(&args.out).map_err(|e| CliError::io(&args.out, e))?;
    let out = std::fs::canonicalize(&args.out).map_err(|e| CliError::io(&args.out, e))?;
    let exe = std::env::current_exe().map_err(|e| CliError::Failed(format!("this program's path: {e}")))?;
    let mut options = args.guest.options();
    options.rw_dirs.push(out.clone());
    let stop = crate::signal::stop_flag();
    let mut columns = Vec::new();
    let mut next = 0;
    while next < columns_asked.len() {
        let column_asked = &columns_asked[next];
        next += 1;
        let spec = &column_asked.spec;
        let label = column_asked.label();
        let dir = out.join(label.replace([':', '/', ' ', ','], "-"));
        let mut options = options.clone();
        options.append.extend(column_asked.append.iter().cloned());
        std::fs::create_dir_all(&dir).map_err(|e| CliError::io(&dir, e))?;
        let irqlab = run::sh_quote(&exe.display().to_string());
        let survey: Vec<String> = args.command.iter().map(|w| run::sh_quote(w)).collect();
        // The recommended boot's column takes the rest of its profile too
        // (thread policies such as PREEMPT_RT's ktimers raise) before its
        // survey: the recommendation is the whole profile. A setting whose
        // thread this boot does not have is left out (--allow-missing).
        let apply = column_asked.profile.as_ref().map_or(String::new(), |(p, _)| {
            let p = run::sh_quote(&p.display().to_string());
            format!(
                "{irqlab} control apply {p} --persist --allow-missing || {{ echo \"lab: control apply {p} failed: no survey\" >&2; exit 3; }}; "
            )
        });
        let script = format!(
            "{irqlab} doctor --json {d}/doctor.json >/dev/null; {apply}{irqlab} {} --out {d}",
            survey.join(" "),
            d = run::sh_quote(&dir.display().to_string())
        );
        let survey_once = || {
            run::resolve(spec, &mut |step| eprintln!("lab: {step}")).and_then(|guest| {
                let command = ["sh".into(), "-c".into(), script.clone()];
                run::run(&guest, &command, &options, &|| stop.load(Ordering::SeqCst), &mut |l| eprintln!("{l}"))
            })
        };
        let started = std::time::Instant::now();
        let mut outcome = survey_once();
        // An emulated guest that died under the survey (a TCG livelock or a
        // lost boot, seen about once in fifty guests on a loaded host, and
        // in two 6.1-rt guests in a row under the net load on 2026-11-29)
        // says nothing about the kernel's survey: a fresh guest runs it
        // again, up to twice. A survey that ran and failed is not repeated,
        // nor one that used up --timeout.
        for attempt in ["once more", "a last time"] {
            let Err(irqlab_lab::Error::Failed(why)) = &outcome else { break };
            if stop.load(Ordering::SeqCst) || started.elapsed() >= options.timeout {
                break;
            }
            eprintln!("lab: {label}: the guest failed ({why}); surveying it {attempt} in a fresh guest");
            outcome = survey_once();
        }
        let missing = match &outcome {
            Err(e) => Some(e.to_string()),
            Ok(_) => None,
        };
        let mut column = read_column(label, &dir, missing);
        column.applied = column_asked.applied();
        match (&column.missing, &outcome) {
            (Some(why), Ok(o)) => eprintln!("lab: {}: no survey: {why} (the guest's command exited {})", column.label, o.status),
            (Some(why), Err(_)) => eprintln!("lab: {}: no survey: {why}", column.label),
            (None, Ok(o)) => eprintln!("lab: {} surveyed in {:.0} s (exit {})", column.label, o.elapsed.as_secs_f64(), o.status),
            (None, Err(_)) => {}
        }
        let recommended = (args.recommended_boot && column_asked.append.is_empty() && column.survey.is_some())
            .then(|| recommended_column(column_asked, &dir))
            .transpose()?
            .flatten();
        columns.push(column);
        if stop.load(Ordering::SeqCst) {
            break;
        }
        if let Some(with_options) = recommended {
            if !columns_asked.iter().any(|c| c.label() == with_options.label()) {
                eprintln!("lab: next, {} (its survey's recommended boot options)", with_options.label());
                columns_asked.insert(next, with_options);
            }
        }
    }
    let html = irqlab_survey::compare::render(&columns).map_err(|e| CliError::Failed(e.to_string()))?;
    let page = out.join("index.html");
    crate::output::write_text(&page, &html)?;
    let complete = columns.iter().filter(|c| c.survey.is_some()).count();
    print(&format!("page: {}  ({complete} of {} kernels surveyed)\n", page.display(), columns_asked.len()))?;
    Ok(Status::from_ok(complete == columns_asked.len()))
}

/// A column of `lab compare`: a kernel, and kernel command-line options
/// of its own (`--kernel 'debian:6.12-rt nohz_full=1'`): the same kernel
/// booted with and without a recommendation, side by side.
struct ColumnSpec {
    spec: KernelSpec,
    text: String,
    append: Vec<String>,
    /// A profile whose run-time settings the guest applies before its
    /// survey (`--recommended-boot`), and how many it holds.
    profile: Option<(PathBuf, usize)>,
}

impl ColumnSpec {
    fn parse(text: &str) -> Result<ColumnSpec, CliError> {
        let mut words = text.split_whitespace();
        let kernel = words.next().ok_or_else(|| CliError::Usage("--kernel '': give a kernel (irqlab lab kernels)".into()))?;
        let append: Vec<String> = words.map(str::to_string).collect();
        if let Some(bad) = append.iter().find(|w| w.starts_with('-')) {
            return Err(CliError::Usage(format!(
                "--kernel '{text}': `{bad}` is not a kernel command-line option (the kernel first, then options such as nohz_full=1)"
            )));
        }
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        Ok(ColumnSpec { spec: KernelSpec::parse(kernel)?, text, append, profile: None })
    }

    /// The kernel and its options, as the column is headed; `+profile`
    /// where a profile was applied before the survey.
    fn label(&self) -> String {
        let kernel = match self.append.is_empty() {
            true => self.spec.label(),
            false => self.text.clone(),
        };
        match self.profile {
            Some(_) => format!("{kernel} +profile"),
            None => kernel,
        }
    }

    /// What the page says was applied before the survey.
    fn applied(&self) -> Option<String> {
        self.profile.as_ref().map(|(path, n)| {
            format!(
                "booted with {}'s [boot] options, and its {n} run-time setting{} applied (`irqlab control apply --persist \
                 --allow-missing`) before the survey",
                path.display(),
                if *n == 1 { "" } else { "s" }
            )
        })
    }
}

/// The column of `kernel` booted with the `[boot]` options its survey's
/// profile (DIR/profile.toml) recommends; `None`, said on stderr, when it
/// recommended none.
fn recommended_column(kernel: &ColumnSpec, dir: &std::path::Path) -> Result<Option<ColumnSpec>, CliError> {
    let path = dir.join(irqlab_survey::profile::FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| CliError::io(&path, e))?;
    let profile = irqlab_control::profile::Profile::parse(&path.display().to_string(), &text)?;
    let Some(boot) = profile.boot.as_ref().filter(|b| !b.cmdline.get_ref().trim().is_empty()) else {
        eprintln!("lab: {}: its survey recommended no boot option; no column with them", kernel.label());
        return Ok(None);
    };
    let mut column = ColumnSpec::parse(&format!("{} {}", kernel.text, boot.cmdline.get_ref()))?;
    let run_time = profile.run_time_settings();
    column.profile = (run_time > 0).then(|| (path.clone(), run_time));
    Ok(Some(column))
}

fn read_column(label: String, dir: &std::path::Path, missing: Option<String>) -> irqlab_survey::compare::Column {
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok().and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
    let survey_json = read("survey.json");
    let lab = survey_json.as_ref().and_then(|s| s.get("lab").cloned()).or_else(|| read("doctor.json").and_then(|d| d.get("lab").cloned()));
    let survey = survey_json.and_then(|v| serde_json::from_value::<irqlab_survey::Survey>(v).ok());
    let missing = missing.or_else(|| survey.is_none().then(|| format!("no readable survey.json in {}", dir.display())));
    irqlab_survey::compare::Column { label, survey, missing, doctor: read("doctor.json"), lab, applied: None }
}
