//! The dissertation's random-read disk experiment (§6.1.1, Figs. 6.3-6.4)
//! on this machine's disk: one foreground process of intensity i (random
//! 4 KiB O_DIRECT reads, back to back for i × 100 ms of every 100 ms) and
//! one greedy background process (the same reads, back to back), both
//! `irqlab load reads` children, under `irqlab control idletime`'s gate
//! (the simulator's decision code) with p swept, beside no control and
//! BFQ's idle class (`ionice -c3`). The baseline r(i) is measured here
//! first, and the throughput model (§4.4) evaluated on it predicts both
//! throughputs at every p. The network half of the live experiment is not
//! built yet.

use crate::report::{Report, Row};
use irqlab_analysis::idletime::{self as model, BaselineTable, ModelParams, ServiceTime, T_MAX_NS};
use irqlab_analysis::{format_ns, Nanos};
use irqlab_live::control::idletime::{self as control, disk, gate::Mechanism, selector::Selector};
use irqlab_live::control::journal::{self, Object, Value};
use irqlab_live::error::{Error, Result};
use irqlab_live::load::write_data_file;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

pub struct Config {
    pub quick: bool,
    /// Where the two data files go (on the disk to measure); default: a
    /// directory under the current one.
    pub dir: Option<PathBuf>,
    /// The irqlab binary (its `load reads` are the two processes).
    pub exe: PathBuf,
}

/// One run of the two processes.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub setup: String,
    pub intensity: f64,
    pub p_ns: Option<Nanos>,
    pub foreground_per_s: f64,
    pub background_per_s: f64,
    /// Foreground throughput over r(i) measured alone.
    pub foreground_share: f64,
    pub model_foreground_per_s: Option<f64>,
    pub model_background_per_s: Option<f64>,
    pub gate_open_fraction: Option<f64>,
    pub gate_close_reaction_p50_ns: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Details {
    pub disk: disk::Disk,
    pub seconds_per_run: f64,
    /// r(i): (intensity, reads/s) of the foreground alone.
    pub baseline: Vec<(f64, f64)>,
    pub r_max: f64,
    pub service_ns: f64,
    pub background_alone_per_s: f64,
    pub points: Vec<Point>,
    pub notes: Vec<String>,
}

const BLOCK: &str = "4k";

/// `irqlab load reads` on `file` for `seconds`: at intensity `i`, or back to back.
fn reader(cfg: &Config, file: &Path, intensity: Option<f64>, seconds: f64) -> Result<Child> {
    let mut cmd = std::process::Command::new(&cfg.exe);
    cmd.args(["load", "reads", "--block", BLOCK, "--json", "-", "--duration", &format!("{seconds}s", seconds = seconds)]);
    cmd.arg("--file").arg(file);
    if let Some(i) = intensity {
        cmd.args(["--intensity", &i.to_string()]);
    }
    cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().map_err(|e| Error::io(format!("starting {} load reads", cfg.exe.display()), e))
}

/// Reads per second a reader reported.
fn reads_per_s(child: Child) -> Result<f64> {
    let out = child.wait_with_output().map_err(|e| Error::io("waiting for a reader", e))?;
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| Error::Failed(format!("a reader's report: {e} ({})", String::from_utf8_lossy(&out.stdout))))?;
    let (work, elapsed) = (doc["work"].as_f64().unwrap_or(0.0), doc["elapsed_ns"].as_f64().unwrap_or(0.0));
    if elapsed <= 0.0 {
        return Err(Error::Failed(format!("a reader reported no time: {doc}")));
    }
    Ok(work / (elapsed / 1e9))
}

/// BFQ's idle class for process `pid` (ioprio_set, IOPRIO_CLASS_IDLE).
fn idle_class(pid: u32) -> Result<()> {
    const IOPRIO_WHO_PROCESS: libc::c_long = 1;
    const IOPRIO_CLASS_IDLE: libc::c_long = 3;
    // SAFETY: a plain system call on a child of ours.
    let rc = unsafe { libc::syscall(libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, libc::c_long::from(pid as i32), IOPRIO_CLASS_IDLE << 13) };
    if rc != 0 {
        return Err(Error::io("ioprio_set (the idle class)", std::io::Error::last_os_error()));
    }
    Ok(())
}

enum Setup {
    NoControl,
    BfqIdle,
    Idletime(Nanos),
}

struct Bench<'a> {
    cfg: &'a Config,
    fg_file: PathBuf,
    bg_file: PathBuf,
    seconds: f64,
    disk: disk::Disk,
    stop: &'a AtomicBool,
}

impl Bench<'_> {
    /// Foreground at `i` and the greedy background together under `setup`.
    fn pair(&self, i: f64, setup: &Setup) -> Result<(f64, f64, Option<control::Report>)> {
        let fg = reader(self.cfg, &self.fg_file, Some(i), self.seconds)?;
        let bg = reader(self.cfg, &self.bg_file, None, self.seconds)?;
        let (fg_pid, bg_pid) = (fg.id(), bg.id());
        let report = match setup {
            Setup::NoControl => None,
            Setup::BfqIdle => {
                idle_class(bg_pid)?;
                None
            }
            Setup::Idletime(p) => {
                let config = control::Config {
                    disk: Some(self.disk.name.clone()),
                    foreground: Selector::Pid(fg_pid as i32),
                    background: Selector::Pid(bg_pid as i32),
                    interval_ns: *p,
                    mechanism: Mechanism::Freezer,
                    duration_ns: Some((self.seconds * 1e9) as u64),
                    record: false,
                };
                Some(control::run(&config, self.stop, |_| {})?)
            }
        };
        Ok((reads_per_s(fg)?, reads_per_s(bg)?, report))
    }
}

/// Runs the experiment; `progress` names each run as it starts.
pub fn reproduce(cfg: &Config, stop: &AtomicBool, mut progress: impl FnMut(&str)) -> Result<Report<Details>> {
    let disk = match &cfg.dir {
        Some(d) => disk_of_dir(d)?,
        None => disk::resolve(None)?,
    };
    let scratch = tempfile::Builder::new()
        .prefix("irqlab-idletime-live")
        .tempdir_in(cfg.dir.clone().unwrap_or_else(|| PathBuf::from(".")))
        .map_err(|e| Error::io("creating the data directory", e))?;
    let (fg_mib, bg_mib) = if cfg.quick { (128, 256) } else { (512, 1024) };
    progress("writing the data files");
    let bench = Bench {
        cfg,
        fg_file: write_data_file(scratch.path(), "foreground", fg_mib)?,
        bg_file: write_data_file(scratch.path(), "background", bg_mib)?,
        seconds: if cfg.quick { 2.0 } else { 5.0 },
        disk: disk.clone(),
        stop,
    };
    let intensities: Vec<f64> = if cfg.quick { vec![0.1, 0.3, 0.5, 0.7, 1.0] } else { (1..=10).map(|k| f64::from(k) / 10.0).collect() };
    let mut baseline = Vec::new();
    for &i in &intensities {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        progress(&format!("baseline: the foreground alone at intensity {:.0}%", i * 100.0));
        baseline.push((i, reads_per_s(reader(cfg, &bench.fg_file, Some(i), bench.seconds)?)?));
    }
    progress("the background alone");
    let background_alone_per_s = reads_per_s(reader(cfg, &bench.bg_file, None, bench.seconds)?)?;
    let table =
        BaselineTable { name: format!("{} random 4 KiB O_DIRECT reads", disk.name), unit: "reads/s".into(), points: baseline.clone() };
    let params = ModelParams { service: ServiceTime::InverseRmax, t_max_ns: T_MAX_NS, alpha: 1.0 };
    let (r_max, service_ns) = (table.r_max(), params.service_ns(&table));

    let fg_intensities: &[f64] = if cfg.quick { &[0.3] } else { &[0.3, 0.6] };
    let intervals: Vec<Nanos> = if cfg.quick {
        vec![0, 1_000_000, 10_000_000, 30_000_000, 80_000_000]
    } else {
        vec![0, 500_000, 1_000_000, 5_000_000, 10_000_000, 20_000_000, 30_000_000, 50_000_000, 80_000_000]
    };
    let mut points = Vec::new();
    'sweep: for &i in fg_intensities {
        let r_i = table.r(i);
        let mut setups: Vec<(String, Setup)> = vec![("no control".into(), Setup::NoControl), ("BFQ idle class".into(), Setup::BfqIdle)];
        setups.extend(
            intervals.iter().map(|&p| (format!("idletime p = {}", if p == 0 { "0".into() } else { format_ns(p) }), Setup::Idletime(p))),
        );
        for (name, setup) in setups {
            if stop.load(Ordering::SeqCst) {
                break 'sweep;
            }
            progress(&format!("intensity {:.0}%: {name}", i * 100.0));
            let _bfq = match setup {
                Setup::BfqIdle => {
                    Some(journal::apply(Object::IoScheduler { disk: disk.name.clone() }, Value::Text { text: "bfq".into() })?)
                }
                _ => None,
            };
            let (fg, bg, report) = bench.pair(i, &setup)?;
            let p_ns = match setup {
                Setup::Idletime(p) => Some(p),
                _ => None,
            };
            points.push(Point {
                setup: name,
                intensity: i,
                p_ns,
                foreground_per_s: fg,
                background_per_s: bg,
                foreground_share: if r_i > 0.0 { fg / r_i } else { 0.0 },
                model_foreground_per_s: p_ns.map(|p| model::foreground_throughput(&table, &params, i, p)),
                model_background_per_s: p_ns.map(|p| model::background_throughput(&table, &params, i, p)),
                gate_open_fraction: report.as_ref().map(|r| r.gate.open_fraction),
                gate_close_reaction_p50_ns: report.as_ref().and_then(|r| r.gate.close_reaction.as_ref().and_then(|s| s.p50_ns)),
            });
        }
    }
    let complete = !stop.load(Ordering::SeqCst);
    let rows = if complete { relations(&table, service_ns, &points) } else { Vec::new() };
    let notes = vec![
        "the simulated column of these rows is the dissertation's throughput model (§4.4) evaluated on the r(i) measured here, with service time 1/r_max".into(),
        "the network half of the live experiment (UDP/TCP through a token-bucket link on the testbed) is not built yet".into(),
    ];
    let details = Details { disk, seconds_per_run: bench.seconds, baseline, r_max, service_ns, background_alone_per_s, points, notes };
    Ok(Report::new("idletime", cfg.quick, complete, 0, rows, details))
}

/// The disk a directory is on (exit 2 naming `--dir` when none).
fn disk_of_dir(dir: &Path) -> Result<disk::Disk> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(dir).map_err(|e| Error::Invalid(format!("--dir {}: {e}", dir.display())))?;
    let (major, minor) = (nix::sys::stat::major(meta.dev()) as u32, nix::sys::stat::minor(meta.dev()) as u32);
    let link = format!("/sys/dev/block/{major}:{minor}");
    let name = std::fs::canonicalize(&link)
        .ok()
        .and_then(|p| {
            let p = if p.join("partition").exists() { p.parent()?.to_path_buf() } else { p };
            p.file_name()?.to_str().map(String::from)
        })
        .ok_or_else(|| Error::Invalid(format!("--dir {}: on device {major}:{minor}, which is no disk (a tmpfs?)", dir.display())))?;
    disk::resolve(Some(&name))
}

/// The dissertation's claims, judged on this disk.
fn relations(table: &BaselineTable, service_ns: f64, points: &[Point]) -> Vec<Row> {
    let mut rows = Vec::new();
    for i in points.iter().map(|p| p.intensity.to_bits()).collect::<std::collections::BTreeSet<u64>>().into_iter().map(f64::from_bits) {
        let at: Vec<&Point> = points.iter().filter(|p| p.intensity == i).collect();
        let s_i = (1.0 - i) * T_MAX_NS as f64;
        let pct = i * 100.0;
        let effective: Vec<&&Point> = at.iter().filter(|p| p.p_ns.is_some_and(|p| p as f64 >= service_ns)).collect();
        for p in &effective {
            let label = format_ns(p.p_ns.unwrap_or(0));
            let model_fg = p.model_foreground_per_s.unwrap_or(0.0) / table.r(i);
            rows.push(
                Row::check(
                    format!("disk i={pct:.0}% p={label}: foreground share of r(i)"),
                    "≥ 0.80 (Ch. 6: foreground keeps 80%)",
                    model_fg,
                    "share",
                    p.foreground_share >= 0.8,
                )
                .with_live(p.foreground_share),
            );
            let model_bg = p.model_background_per_s.unwrap_or(0.0);
            let pv = p.p_ns.unwrap_or(0) as f64;
            if model_bg >= 0.05 * table.r_max() && pv + service_ns < s_i {
                let err = (p.background_per_s - model_bg).abs() / model_bg;
                rows.push(
                    Row::check(
                        format!("disk i={pct:.0}% p={label}: background reads/s (model within 15%)"),
                        "model within 15% (§4.4)",
                        model_bg,
                        "reads/s",
                        err <= 0.15,
                    )
                    .with_live(p.background_per_s),
                );
            } else if pv > s_i {
                rows.push(
                    Row::check(
                        format!("disk i={pct:.0}% p={label} > s(i): background stalls (≤ 5% of r_max)"),
                        "stalls (§6.1)",
                        model_bg,
                        "reads/s",
                        p.background_per_s <= 0.05 * table.r_max(),
                    )
                    .with_live(p.background_per_s),
                );
            }
        }
        if let (Some(none), Some(worst)) =
            (at.iter().find(|p| p.setup == "no control"), effective.iter().map(|p| p.foreground_share).min_by(f64::total_cmp))
        {
            rows.push(
                Row::check(
                    format!("disk i={pct:.0}%: without control the foreground keeps less than under idletime (p ≥ service)"),
                    "less",
                    worst,
                    "share",
                    none.foreground_share < worst,
                )
                .with_live(none.foreground_share),
            );
        }
        if let Some(bfq) = at.iter().find(|p| p.setup == "BFQ idle class") {
            rows.push(
                Row::info(format!("disk i={pct:.0}%: BFQ idle class, foreground share of r(i)"), "-", f64::NAN, "share")
                    .with_live(bfq.foreground_share),
            );
            rows.push(
                Row::info(format!("disk i={pct:.0}%: BFQ idle class, background reads/s"), "-", f64::NAN, "reads/s")
                    .with_live(bfq.background_per_s),
            );
        }
    }
    rows
}
