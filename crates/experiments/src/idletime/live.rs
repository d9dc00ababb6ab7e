//! The dissertation's live experiments on this machine: random-read disk
//! (§6.1.1, Figs. 6.3-6.4) and UDP or TCP against UDP over a link (§6.2,
//! Figs. 6.7-6.9, 6.11).
//! One foreground process of intensity i (back to back for i × 100 ms of
//! every 100 ms) and one greedy background process, both irqlab `load`
//! children, under `irqlab control idletime`'s gate (the simulator's
//! decision code) with p swept, beside no control (and, for the disk,
//! BFQ's idle class: `ionice -c3`). The baseline r(i) is measured here
//! first, and the throughput model (§4.4) evaluated on it predicts both
//! throughputs at every p.
//!
//! Disk: random 4 KiB O_DIRECT reads of two files on the disk measured.
//! Network (UDP/UDP §6.2.1.1, TCP/UDP §6.2.2.1): a foreground of 1472-byte
//! UDP datagrams or TCP writes, a background of UDP datagrams, from this
//! namespace to testbed host a
//! through the root side of link a (`irqlab-a`), whose egress gets a token
//! bucket (tbf, [`LINK_RATE`]) so that the link, not the CPU, is the
//! bottleneck: the dissertation's GigE link scaled to what this 2-CPU VM
//! moves with room to spare. The senders' socket buffers are kept small
//! ([`SNDBUF`]): what a sender has queued below the gate is the device's
//! queue the gate cannot reach, as the NIC's transmit ring was below the
//! dissertation's scheduler.

use crate::repeats::Spread;
use crate::report::{Report, Row};
use irqlab_analysis::idletime::{self as model, BaselineTable, ModelParams, ServiceTime, T_MAX_NS};
use irqlab_analysis::{format_ns, Nanos};
use irqlab_control::idletime::{self as control, disk, gate::Mechanism, selector::Selector, ResourceSpec};
use irqlab_host::error::{Error, Result};
use irqlab_host::journal::{self, Applied, Object, Value};
use irqlab_host::testbed::{Side, Testbed};
use irqlab_measure::load::write_data_file;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub struct Config {
    pub quick: bool,
    /// Where the two data files go (on the disk to measure); default: a
    /// directory under the current one.
    pub dir: Option<PathBuf>,
    /// The irqlab binary (its `load reads` / `load sends` are the processes).
    pub exe: PathBuf,
    /// Which experiments run: the disk's, the network's.
    pub disk: bool,
    pub net: bool,
}

/// One setup at one foreground intensity: its runs, one per round, and
/// their means.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub setup: String,
    pub intensity: f64,
    pub p_ns: Option<Nanos>,
    /// Means over the runs.
    pub foreground_per_s: f64,
    pub background_per_s: f64,
    /// Each round's run.
    pub foreground_runs: Vec<f64>,
    pub background_runs: Vec<f64>,
    /// The foreground's mean over r(i), the mean of its runs alone at i.
    pub foreground_share: f64,
    /// The standard error of that share (the runs' spread and the runs
    /// alone's); `None` from a single run.
    pub foreground_share_se: Option<f64>,
    pub model_foreground_per_s: Option<f64>,
    pub model_background_per_s: Option<f64>,
    /// The standard error of the model's background from its measured
    /// inputs' (r(i)'s and r_max's runs alone): [`model_background_se`].
    pub model_background_se: Option<f64>,
    /// Means over the runs of each run's figure.
    pub gate_open_fraction: Option<f64>,
    pub gate_close_reaction_p50_ns: Option<u64>,
    /// From the interval's end to the gate open (p50).
    pub gate_open_lateness_p50_ns: Option<u64>,
    /// The model's background with inputs measured in this run
    /// ([`measured_background`]), beside the dissertation's.
    pub measured_model_background_per_s: Option<f64>,
    /// The controller thread's CPU time per second of control, as a share
    /// of one CPU (its report's `overhead.cpu_share`), mean over the runs.
    pub controller_cpu_share: Option<f64>,
}

/// One resource's experiment.
#[derive(Debug, Clone, Serialize)]
pub struct Part {
    /// `disk` or `net`.
    pub resource: String,
    /// The experiment, as the rows name it: `disk`, `net udp/udp`, `net tcp/udp`
    /// (foreground / background protocol).
    pub name: String,
    /// The device and the workload.
    pub setup: String,
    pub unit: String,
    /// r(i): (intensity, throughput) of the foreground alone, the model's
    /// input; at the intensities the setups run at, the mean of every run
    /// alone there ([`Part::alone`]).
    pub baseline: Vec<(f64, f64)>,
    /// The foreground's runs alone at the setups' intensities and at 100%
    /// (r_max): r(i)'s own first, then one at the start of each round.
    pub alone: Vec<(f64, Vec<f64>)>,
    pub r_max: f64,
    pub service_ns: f64,
    /// A TCP foreground's smoothed round-trip time, the mean over its runs
    /// alone at the setups' intensities: the dissertation's landmark for
    /// TCP (ineffective below the RTT, §6.2.2.1), where the service time is
    /// the UDP's and the disk's.
    pub tcp_rtt_ns: Option<f64>,
    /// The mean of the background's runs alone (the first before the
    /// rounds, then one at the start of each).
    pub background_alone_per_s: f64,
    pub background_alone_runs: Vec<f64>,
    pub points: Vec<Point>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Details {
    pub disk: disk::Disk,
    pub seconds_per_run: f64,
    /// Every setup runs once per round; the rounds are interleaved so a
    /// drift of the host's disk or link reaches the baseline and every setup.
    pub rounds: usize,
    pub parts: Vec<Part>,
    pub notes: Vec<String>,
}

const BLOCK: &str = "4k";

/// The link (tbf on `irqlab-a`) as tc takes it: 100 Mbit/s (a 1500-byte
/// frame takes 0.12 ms, the service time the interval is compared with),
/// two frames of burst, and a queue long enough that it drops nothing (the
/// senders' buffers bound it).
const LINK_QDISC: &str = "tbf rate 100mbit burst 3000 latency 200ms";
/// Each sender's SO_SNDBUF (the kernel doubles it: about 14 datagrams,
/// 1.6 ms of the link): the queue below the gate.
const SNDBUF: &str = "16k";
const FG_PORT: u16 = 9001;
const BG_PORT: u16 = 9002;
const TCP_PORT: u16 = 9003;
/// TCP's payload per 1500-byte segment with timestamps.
const TCP_MSS: usize = 1448;

/// Starts one of the experiment's processes: `irqlab load ARGS --json - --duration S`.
fn load(cfg: &Config, args: &[&str], seconds: f64) -> Result<Child> {
    let mut cmd = std::process::Command::new(&cfg.exe);
    cmd.arg("load").args(args).args(["--json", "-", "--duration", &format!("{seconds}s")]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().map_err(|e| Error::io(format!("starting {} load", cfg.exe.display()), e))
}

/// What a load process reported: its work per second, times `scale`,
/// and for a TCP sender the connection's smoothed round-trip time.
struct Done {
    per_s: f64,
    tcp_rtt_us: Option<f64>,
}

fn finished(child: Child, scale: f64) -> Result<Done> {
    let out = child.wait_with_output().map_err(|e| Error::io("waiting for a load process", e))?;
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        let why = String::from_utf8_lossy(&out.stderr);
        Error::Failed(format!(
            "a load process ({}) wrote no report ({e}): {}",
            out.status,
            why.trim().lines().last().unwrap_or("no message")
        ))
    })?;
    let (work, elapsed) = (doc["work"].as_f64().unwrap_or(0.0), doc["elapsed_ns"].as_f64().unwrap_or(0.0));
    if elapsed <= 0.0 {
        return Err(Error::Failed(format!("a load process reported no time: {doc}")));
    }
    Ok(Done { per_s: scale * work / (elapsed / 1e9), tcp_rtt_us: doc["tcp_rtt_us"].as_f64() })
}

/// Work per second a load process reported, times `scale`.
fn per_s(child: Child, scale: f64) -> Result<f64> {
    Ok(finished(child, scale)?.per_s)
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

#[derive(Debug, Clone, Copy)]
enum Setup {
    NoControl,
    BfqIdle,
    Idletime(Nanos),
}

/// What differs between the disk and the network experiment.
struct Workload {
    name: &'static str,
    spec: ResourceSpec,
    /// `load` arguments of the foreground (without the intensity) and the background.
    fg_args: Vec<String>,
    bg_args: Vec<String>,
    /// From the load's work per second to the unit.
    scale: f64,
    unit: &'static str,
    /// Requests (reads, datagrams) per unit of throughput: the service time
    /// is 1 / r_max counted in requests per second.
    requests_per_unit: f64,
    setup: String,
    /// The anchors beside no control.
    anchors: Vec<(&'static str, Setup)>,
}

impl Workload {
    /// `disk` or `net`, as the spec says.
    fn resource(&self) -> &'static str {
        match self.spec {
            ResourceSpec::Disk(_) => "disk",
            ResourceSpec::Net(_) => "net",
        }
    }
}

struct Bench<'a> {
    cfg: &'a Config,
    seconds: f64,
    stop: &'a AtomicBool,
}

impl Bench<'_> {
    fn start(&self, args: &[String], intensity: Option<f64>) -> Result<Child> {
        let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
        let i = intensity.map(|i| i.to_string());
        if let Some(i) = &i {
            a.extend(["--intensity", i]);
        }
        load(self.cfg, &a, self.seconds)
    }

    /// Foreground at `i` and the greedy background together under `setup`.
    fn pair(&self, w: &Workload, i: f64, setup: Setup) -> Result<(f64, f64, Option<control::Report>)> {
        let fg = self.start(&w.fg_args, Some(i))?;
        let bg = self.start(&w.bg_args, None)?;
        let (fg_pid, bg_pid) = (fg.id(), bg.id());
        let report = match setup {
            Setup::NoControl => None,
            Setup::BfqIdle => {
                idle_class(bg_pid)?;
                None
            }
            Setup::Idletime(p) => {
                let config = control::Config {
                    resource: w.spec.clone(),
                    foreground: Selector::Pid(fg_pid as i32),
                    background: Selector::Pid(bg_pid as i32),
                    interval_ns: p,
                    mechanism: Mechanism::Freezer,
                    duration_ns: Some((self.seconds * 1e9) as u64),
                    record: false,
                    band: true,
                };
                Some(control::run(&config, self.stop, |_| {})?)
            }
        };
        Ok((per_s(fg, w.scale)?, per_s(bg, w.scale)?, report))
    }

    /// r(i), the background alone, then the rounds: in each, at each
    /// foreground intensity, the foreground alone and every setup.
    fn part(&self, w: &Workload, progress: &mut dyn FnMut(&str)) -> Result<Part> {
        let quick = self.cfg.quick;
        let intensities: Vec<f64> = if quick { vec![0.1, 0.3, 0.5, 0.7, 1.0] } else { (1..=10).map(|k| f64::from(k) / 10.0).collect() };
        let mut curve = Vec::new();
        for &i in &intensities {
            if self.stop.load(Ordering::SeqCst) {
                break;
            }
            progress(&format!("{}: baseline, the foreground alone at intensity {:.0}%", w.name, i * 100.0));
            curve.push((i, per_s(self.start(&w.fg_args, Some(i))?, w.scale)?));
        }
        progress(&format!("{}: the background alone", w.name));
        let mut background_alone = vec![per_s(self.start(&w.bg_args, None)?, w.scale)?];
        let mut setups: Vec<(String, Setup)> = vec![("no control".into(), Setup::NoControl)];
        setups.extend(w.anchors.iter().map(|&(n, s)| (n.to_string(), s)));
        setups.extend(
            intervals(w.resource(), quick)
                .into_iter()
                .map(|p| (format!("idletime p = {}", if p == 0 { "0".into() } else { format_ns(p) }), Setup::Idletime(p))),
        );
        let fg_intensities: &[f64] = if quick { &[0.3] } else { &[0.3, 0.6] };
        // The runs alone at the setups' intensities and at 100% (r_max,
        // the model's base: at i = 60% a tenth off r_max moves the
        // background's prediction by a quarter, so it is measured in every
        // round too).
        let mut alone: Vec<(f64, Vec<f64>)> =
            fg_intensities.iter().chain(&[1.0]).map(|&i| (i, curve.iter().filter(|c| c.0 == i).map(|c| c.1).collect())).collect();
        let mut runs = Vec::new();
        let mut rtts_us = Vec::new();
        let rounds = rounds(quick);
        'rounds: for round in 1..=rounds {
            if self.stop.load(Ordering::SeqCst) {
                break 'rounds;
            }
            progress(&format!("{} round {round}/{rounds}: the foreground alone at 100% (r_max)", w.name));
            let r_max_run = per_s(self.start(&w.fg_args, Some(1.0))?, w.scale)?;
            if let Some(a) = alone.iter_mut().find(|a| a.0 == 1.0) {
                a.1.push(r_max_run);
            }
            progress(&format!("{} round {round}/{rounds}: the background alone", w.name));
            background_alone.push(per_s(self.start(&w.bg_args, None)?, w.scale)?);
            for (k, &i) in fg_intensities.iter().enumerate() {
                let at = |what: &str| format!("{} round {round}/{rounds}, intensity {:.0}%: {what}", w.name, i * 100.0);
                if self.stop.load(Ordering::SeqCst) {
                    break 'rounds;
                }
                progress(&at("the foreground alone"));
                let done = finished(self.start(&w.fg_args, Some(i))?, w.scale)?;
                alone[k].1.push(done.per_s);
                rtts_us.extend(done.tcp_rtt_us);
                for (index, (name, setup)) in setups.iter().enumerate() {
                    if self.stop.load(Ordering::SeqCst) {
                        break 'rounds;
                    }
                    progress(&at(name));
                    let _bfq = match setup {
                        Setup::BfqIdle => Some(bfq_on(&w.spec)?),
                        _ => None,
                    };
                    let (fg, bg, report) = self.pair(w, i, *setup)?;
                    runs.push(Run {
                        intensity: i,
                        setup: index,
                        fg,
                        bg,
                        open_fraction: report.as_ref().map(|r| r.gate.open_fraction),
                        close_p50_ns: report.as_ref().and_then(|r| r.gate.close_reaction.as_ref().and_then(|s| s.p50_ns)),
                        open_p50_ns: report.as_ref().and_then(|r| r.gate.open_lateness.as_ref().and_then(|s| s.p50_ns)),
                        controller_cpu_share: report.as_ref().map(|r| r.overhead.cpu_share),
                    });
                }
            }
        }
        let table = BaselineTable { name: w.setup.clone(), unit: w.unit.into(), points: with_means(&curve, &alone) };
        let r_max = table.r_max();
        let service = ServiceTime::Fixed((1e9 / (r_max * w.requests_per_unit).max(1e-9)).round() as Nanos);
        let params = ModelParams { service, t_max_ns: T_MAX_NS, alpha: 1.0 };
        let background_alone_per_s = Spread::of(&background_alone).mean;
        let points = points_of(&runs, &setups, &alone, &table, &params, background_alone_per_s);
        Ok(Part {
            resource: w.resource().into(),
            name: w.name.into(),
            setup: w.setup.clone(),
            unit: w.unit.into(),
            baseline: table.points.clone(),
            alone,
            r_max,
            service_ns: params.service_ns(&table),
            tcp_rtt_ns: (!rtts_us.is_empty()).then(|| Spread::of(&rtts_us).mean * 1e3),
            background_alone_per_s,
            background_alone_runs: background_alone,
            points,
        })
    }
}

/// How many times each setup runs (each a round; quick: two, so that a
/// quick run has a spread too).
pub fn rounds(quick: bool) -> usize {
    if quick {
        2
    } else {
        3
    }
}

/// One run of the two processes under one setup.
#[derive(Debug, Clone)]
struct Run {
    intensity: f64,
    /// Index into the setups.
    setup: usize,
    fg: f64,
    bg: f64,
    open_fraction: Option<f64>,
    close_p50_ns: Option<u64>,
    open_p50_ns: Option<u64>,
    controller_cpu_share: Option<f64>,
}

/// r(i) for the model: the curve, with each intensity the setups ran at
/// replaced by the mean of every run alone there.
fn with_means(curve: &[(f64, f64)], alone: &[(f64, Vec<f64>)]) -> Vec<(f64, f64)> {
    let mut points: Vec<(f64, f64)> = curve.to_vec();
    for (i, runs) in alone.iter().filter(|(_, runs)| !runs.is_empty()) {
        let mean = Spread::of(runs).mean;
        match points.iter_mut().find(|p| p.0 == *i) {
            Some(p) => p.1 = mean,
            None => points.push((*i, mean)),
        }
    }
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    points
}

/// The runs grouped by intensity and setup (in the order they ran), their
/// means, and the model's predictions beside them.
fn points_of(
    runs: &[Run],
    setups: &[(String, Setup)],
    alone: &[(f64, Vec<f64>)],
    table: &BaselineTable,
    params: &ModelParams,
    background_alone_per_s: f64,
) -> Vec<Point> {
    // Groups in the order their first run ran.
    let mut groups: Vec<Vec<&Run>> = Vec::new();
    let mut group_of = std::collections::HashMap::new();
    for r in runs {
        let g = *group_of.entry((r.intensity.to_bits(), r.setup)).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[g].push(r);
    }
    groups
        .into_iter()
        .map(|these| {
            let (i, index) = (these[0].intensity, these[0].setup);
            let (fg, bg): (Vec<f64>, Vec<f64>) = these.iter().map(|r| (r.fg, r.bg)).unzip();
            let (fg_spread, bg_spread) = (Spread::of(&fg), Spread::of(&bg));
            let base = alone.iter().find(|a| a.0 == i).map_or_else(|| Spread::of(&[table.r(i)]), |a| Spread::of(&a.1));
            let mean_of = |f: &dyn Fn(&Run) -> Option<f64>| {
                let v: Vec<f64> = these.iter().filter_map(|r| f(r)).collect();
                (!v.is_empty()).then(|| Spread::of(&v).mean)
            };
            let close_p50 = mean_of(&|r| r.close_p50_ns.map(|n| n as f64)).map(|n| n.round() as u64);
            let open_p50 = mean_of(&|r| r.open_p50_ns.map(|n| n as f64)).map(|n| n.round() as u64);
            let p_ns = match setups[index].1 {
                Setup::Idletime(p) => Some(p),
                _ => None,
            };
            Point {
                setup: setups[index].0.clone(),
                intensity: i,
                p_ns,
                foreground_per_s: fg_spread.mean,
                background_per_s: bg_spread.mean,
                foreground_share: if base.mean > 0.0 { fg_spread.mean / base.mean } else { 0.0 },
                foreground_share_se: fg_spread.ratio_se(&base),
                foreground_runs: fg,
                background_runs: bg,
                model_foreground_per_s: p_ns.map(|p| model::foreground_throughput(table, params, i, p)),
                model_background_per_s: p_ns.map(|p| model::background_throughput(table, params, i, p)),
                model_background_se: p_ns.and_then(|p| model_background_se(table, params, i, p, alone)),
                gate_open_fraction: mean_of(&|r| r.open_fraction),
                gate_close_reaction_p50_ns: close_p50,
                gate_open_lateness_p50_ns: open_p50,
                controller_cpu_share: mean_of(&|r| r.controller_cpu_share),
                measured_model_background_per_s: p_ns.map(|p| {
                    let gate = GateReaction { open_ns: open_p50.unwrap_or(0), close_ns: close_p50.unwrap_or(0) };
                    measured_background(table, params, i, p, background_alone_per_s, gate)
                }),
            }
        })
        .collect()
}

/// The standard error the model's background takes from its two measured
/// inputs, r(i) and r_max (each the mean of its runs alone, with the
/// mean's standard error): each moved by its error in turn, the two
/// changes added in quadrature (the model is linear in each). `None`
/// unless both were repeated. The service time 1/r_max moves with r_max.
fn model_background_se(table: &BaselineTable, params: &ModelParams, i: f64, p: Nanos, alone: &[(f64, Vec<f64>)]) -> Option<f64> {
    let se_at = |at: f64| alone.iter().find(|a| a.0 == at).and_then(|a| Spread::of(&a.1).se());
    let (se_i, se_max) = (se_at(i)?, se_at(1.0)?);
    let base = model::background_throughput(table, params, i, p);
    let moved = |at: f64, by: f64| {
        let mut t = table.clone();
        for point in t.points.iter_mut().filter(|q| q.0 == at) {
            point.1 += by;
        }
        let mut params = *params;
        if let ServiceTime::Fixed(ns) = params.service {
            // 1/r_max, scaled as r_max moves.
            let r_max = table.r_max();
            params.service = ServiceTime::Fixed((ns as f64 * r_max / t.r_max().max(1e-9)).round() as Nanos);
        }
        model::background_throughput(&t, &params, i, p) - base
    };
    Some(moved(i, se_i).hypot(moved(1.0, se_max)))
}

/// How late the real gate follows the decisions (p50s of one run).
#[derive(Debug, Clone, Copy)]
struct GateReaction {
    /// From the interval's end to the background thawed: idle time the
    /// background does not get.
    open_ns: u64,
    /// From the foreground's arrival to the background frozen: time the
    /// background still runs.
    close_ns: u64,
}

/// The dissertation's background model (§4.4, `model::background_throughput`
/// for p at or above the service time) with two of its inputs measured in
/// this run instead of taken as ideal: the background's rate while it has
/// the resource is its rate alone (the model gives it r_max), and each idle
/// period it is let in `gate.open_ns` after the interval's end and frozen
/// `gate.close_ns` after the foreground's next arrival (the model: at
/// once). A second prediction beside the dissertation's, not instead of it.
fn measured_background(table: &BaselineTable, params: &ModelParams, i: f64, p: Nanos, background_alone: f64, gate: GateReaction) -> f64 {
    let (r_max, r_i, service) = (table.r_max(), table.r(i), params.service_ns(table));
    let s = (1.0 - i) * T_MAX_NS as f64;
    if p as f64 >= s || s <= 0.0 || r_max <= 0.0 {
        return 0.0;
    }
    let usable = (s - (p as f64 + service + gate.open_ns as f64) + gate.close_ns as f64).clamp(0.0, s);
    ((r_max - r_i) * usable / s * background_alone / r_max).max(0.0)
}

/// The preemption intervals swept: from below the service time (disk about
/// 60 us on this virtio disk, the link 0.12 ms) past s(i).
fn intervals(resource: &str, quick: bool) -> Vec<Nanos> {
    const MS: Nanos = 1_000_000;
    match (resource, quick) {
        ("disk", true) => vec![0, MS, 10 * MS, 30 * MS, 80 * MS],
        ("disk", false) => vec![0, MS / 2, MS, 5 * MS, 10 * MS, 20 * MS, 30 * MS, 50 * MS, 80 * MS],
        (_, true) => vec![0, MS / 20, MS, 10 * MS, 30 * MS, 80 * MS],
        (_, false) => vec![0, MS / 20, MS / 2, MS, 5 * MS, 10 * MS, 20 * MS, 30 * MS, 50 * MS, 80 * MS],
    }
}

/// BFQ on the disk while the guard lives (journalled).
fn bfq_on(spec: &ResourceSpec) -> Result<Applied> {
    let ResourceSpec::Disk(Some(disk)) = spec else { return Err(Error::Failed("BFQ's idle class is a disk's anchor".into())) };
    journal::apply(Object::IoScheduler { disk: disk.clone() }, Value::Text { text: "bfq".into() })
}

/// The disk part: two data files on the disk, then the sweep.
fn disk_part(bench: &Bench<'_>, disk: &disk::Disk, progress: &mut dyn FnMut(&str)) -> Result<Part> {
    let cfg = bench.cfg;
    let scratch = tempfile::Builder::new()
        .prefix("irqlab-idletime-live")
        .tempdir_in(cfg.dir.clone().unwrap_or_else(|| PathBuf::from(".")))
        .map_err(|e| Error::io("creating the data directory", e))?;
    let (fg_mib, bg_mib) = if cfg.quick { (128, 256) } else { (512, 1024) };
    progress("disk: writing the data files");
    let (fg_file, bg_file) =
        (write_data_file(scratch.path(), "foreground", fg_mib)?, write_data_file(scratch.path(), "background", bg_mib)?);
    let reads =
        |file: &Path| -> Vec<String> { vec!["reads".into(), "--block".into(), BLOCK.into(), "--file".into(), file.display().to_string()] };
    let w = Workload {
        name: "disk",
        spec: ResourceSpec::Disk(Some(disk.name.clone())),
        fg_args: reads(&fg_file),
        bg_args: reads(&bg_file),
        scale: 1.0,
        unit: "reads/s",
        requests_per_unit: 1.0,
        setup: format!("{} random 4 KiB O_DIRECT reads", disk.name),
        anchors: vec![("BFQ idle class", Setup::BfqIdle)],
    };
    bench.part(&w, progress)
}

/// Takes what the senders send to testbed host a, in its namespace, until
/// `stop`: UDP on the foreground and background ports (datagrams taken,
/// not answered with ICMP errors) and a TCP discard service.
fn start_sinks(bed: &Testbed, stop: &Arc<AtomicBool>) -> Result<Vec<irqlab_host::testbed::NsThread<()>>> {
    let tick = std::time::Duration::from_millis(100);
    let mut threads = Vec::new();
    for port in [FG_PORT, BG_PORT] {
        let stop = stop.clone();
        threads.push(bed.spawn_in(Side::A, move || {
            let Ok(socket) = std::net::UdpSocket::bind(("0.0.0.0", port)) else { return };
            let _ = socket.set_read_timeout(Some(tick));
            let mut buf = [0u8; 2048];
            while !stop.load(Ordering::Relaxed) {
                let _ = socket.recv(&mut buf);
            }
        })?);
    }
    let stop = stop.clone();
    threads.push(bed.spawn_in(Side::A, move || {
        let Ok(listener) = std::net::TcpListener::bind(("0.0.0.0", TCP_PORT)) else { return };
        let _ = listener.set_nonblocking(true);
        std::thread::scope(|scope| {
            while !stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut conn, _)) => {
                        let stop = &stop;
                        // The connection's thread inherits this one's namespace; it only reads.
                        scope.spawn(move || {
                            let _ = conn.set_nonblocking(false);
                            let _ = conn.set_read_timeout(Some(tick));
                            let mut buf = vec![0u8; 1 << 16];
                            while !stop.load(Ordering::Relaxed) {
                                match std::io::Read::read(&mut conn, &mut buf) {
                                    Ok(0) => break,
                                    Ok(_) => {}
                                    Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                                    Err(_) => break,
                                }
                            }
                        });
                    }
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
                }
            }
        });
    })?);
    Ok(threads)
}

/// The network parts: the testbed, the link's token bucket (journalled),
/// the sinks, then the sweep with a UDP foreground and with a TCP one,
/// each against a greedy UDP background (§6.2.1.1 and §6.2.2.1).
fn network_parts(bench: &Bench<'_>, progress: &mut dyn FnMut(&str)) -> Result<Vec<Part>> {
    progress("net: the testbed and a 100 Mbit/s token bucket on irqlab-a");
    let bed = Testbed::up()?;
    let dev = Side::A.netns().to_string();
    let _link = journal::apply(Object::RootQdisc { dev: dev.clone() }, Value::Text { text: LINK_QDISC.into() })?;
    let sink_stop = Arc::new(AtomicBool::new(false));
    let sinks = start_sinks(&bed, &sink_stop)?;
    let args = |port: u16, tcp: bool| -> Vec<String> {
        let mut a: Vec<String> =
            ["sends", "--to", "a", "--port", &port.to_string(), "--sndbuf", SNDBUF].iter().map(|s| s.to_string()).collect();
        if tcp {
            a.extend(["--tcp".into(), "--size".into(), "16384".into()]);
        }
        a
    };
    let mut parts = Vec::new();
    let mut sweep = || -> Result<()> {
        for (name, tcp) in [("net udp/udp", false), ("net tcp/udp", true)] {
            if bench.stop.load(Ordering::SeqCst) {
                break;
            }
            // Throughput counted in payload bytes; a request is one datagram or one segment.
            let payload = if tcp { TCP_MSS } else { irqlab_measure::load::UDP_PAYLOAD_MAX };
            let w = Workload {
                name,
                spec: ResourceSpec::Net(Some(dev.clone())),
                fg_args: args(if tcp { TCP_PORT } else { FG_PORT }, tcp),
                bg_args: args(BG_PORT, false),
                scale: 8.0 / 1e6,
                unit: "Mb/s",
                requests_per_unit: 1e6 / (8.0 * payload as f64),
                setup: format!(
                    "{dev}: {} foreground, 1472-byte UDP background, over {LINK_QDISC}, SO_SNDBUF {SNDBUF}",
                    if tcp { "TCP (16 KiB writes)" } else { "1472-byte UDP" }
                ),
                anchors: Vec::new(),
            };
            parts.push(bench.part(&w, progress)?);
        }
        Ok(())
    };
    let result = sweep();
    // The sinks stop on every way out (they hold the testbed's sockets).
    sink_stop.store(true, Ordering::Relaxed);
    for s in sinks {
        let _ = s.join();
    }
    result.map(|()| parts)
}

/// Runs the experiment; `progress` names each run as it starts.
pub fn reproduce(cfg: &Config, stop: &AtomicBool, mut progress: impl FnMut(&str)) -> Result<Report<Details>> {
    let disk = match &cfg.dir {
        Some(d) => disk_of_dir(d)?,
        None => disk::resolve(None)?,
    };
    let bench = Bench { cfg, seconds: if cfg.quick { 2.0 } else { 5.0 }, stop };
    let mut parts = Vec::new();
    if cfg.disk {
        parts.push(disk_part(&bench, &disk, &mut progress)?);
    }
    if cfg.net && !stop.load(Ordering::SeqCst) {
        parts.extend(network_parts(&bench, &mut progress)?);
    }
    let complete = !stop.load(Ordering::SeqCst);
    let rows = if complete { parts.iter().flat_map(relations).collect() } else { Vec::new() };
    let notes = vec![
        "the simulated column of these rows is the dissertation's throughput model (§4.4) evaluated on the r(i) measured here, with service time \
         1/r_max (r_max in requests per second: reads, datagrams)"
            .into(),
        format!("network: {LINK_QDISC} on irqlab-a (the link), senders' SO_SNDBUF {SNDBUF}; a UDP and a TCP foreground, each against a greedy UDP background"),
    ];
    let details = Details { disk, seconds_per_run: bench.seconds, rounds: rounds(cfg.quick), parts, notes };
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

/// The dissertation's claims, judged on this machine's resource: the
/// foreground keeps 80% (disk) / 90% (network) of r(i) with p above the
/// service time, the model predicts the background within 15%, the
/// background stalls past s(i), and without control the foreground loses more.
fn relations(part: &Part) -> Vec<Row> {
    let table = BaselineTable { name: part.setup.clone(), unit: part.unit.clone(), points: part.baseline.clone() };
    let (service_ns, points, res, unit) = (part.service_ns, &part.points, part.name.as_str(), part.unit.as_str());
    let (keep, claim) = if part.resource == "disk" {
        (0.8, "≥ 0.80 (Ch. 6: foreground keeps 80%)")
    } else {
        (0.9, "≥ 0.90 (§6.2: foreground keeps 90%)")
    };
    let mut rows = Vec::new();
    for i in points.iter().map(|p| p.intensity.to_bits()).collect::<std::collections::BTreeSet<u64>>().into_iter().map(f64::from_bits) {
        let at: Vec<&Point> = points.iter().filter(|p| p.intensity == i).collect();
        let s_i = (1.0 - i) * T_MAX_NS as f64;
        let pct = i * 100.0;
        // The dissertation's landmark: idletime is ineffective below the
        // service time, and for a TCP foreground below its round-trip time
        // (§6.2.2.1: its pauses for ACKs end the interval inside a burst).
        let landmark_ns = part.tcp_rtt_ns.map_or(service_ns, |rtt| rtt.max(service_ns));
        for p in at.iter().filter(|p| p.p_ns.is_some_and(|p| p as f64 >= service_ns && (p as f64) < landmark_ns)) {
            rows.push(
                Row::info(
                    format!(
                        "{res} i={pct:.0}% p={}: below the TCP round-trip time ({}), foreground share of r(i){} (not checked: \
                         the dissertation's landmark, ineffective below the RTT)",
                        format_ns(p.p_ns.unwrap_or(0)),
                        format_ns((landmark_ns / 1e3).round() as Nanos * 1000),
                        share_note(p, part)
                    ),
                    "ineffective below the RTT (§6.2.2.1)",
                    f64::NAN,
                    "share",
                )
                .with_live(p.foreground_share),
            );
        }
        let effective: Vec<&&Point> = at.iter().filter(|p| p.p_ns.is_some_and(|p| p as f64 >= landmark_ns)).collect();
        for p in &effective {
            let label = format_ns(p.p_ns.unwrap_or(0));
            let model_fg = p.model_foreground_per_s.unwrap_or(0.0) / table.r(i);
            rows.push(
                Row::check(
                    format!("{res} i={pct:.0}% p={label}: foreground share of r(i){}", share_note(p, part)),
                    claim,
                    model_fg,
                    "share",
                    p.foreground_share >= keep,
                )
                .with_live(p.foreground_share),
            );
            let model_bg = p.model_background_per_s.unwrap_or(0.0);
            let pv = p.p_ns.unwrap_or(0) as f64;
            if model_bg >= 0.05 * table.r_max() && pv + service_ns < s_i {
                let err = (p.background_per_s - model_bg).abs() / model_bg;
                rows.push(
                    Row::check(
                        format!("{res} i={pct:.0}% p={label}: background {unit} (model within 15%){}", background_note(p)),
                        "model within 15% (§4.4)",
                        model_bg,
                        unit,
                        err <= 0.15,
                    )
                    .with_live(p.background_per_s),
                );
                if let Some(m) = p.measured_model_background_per_s.filter(|&m| m > 0.0) {
                    let err = (p.background_per_s - m).abs() / m;
                    rows.push(
                        Row::check(
                            format!(
                                "{res} i={pct:.0}% p={label}: background {unit} (model with measured inputs within 15%){}",
                                background_note(p)
                            ),
                            "the same model, background alone and gate reaction measured",
                            m,
                            unit,
                            err <= 0.15,
                        )
                        .with_live(p.background_per_s),
                    );
                }
            } else if pv > s_i {
                rows.push(
                    Row::check(
                        format!("{res} i={pct:.0}% p={label} > s(i): background stalls (≤ 5% of r_max)"),
                        "stalls (§6.1)",
                        model_bg,
                        unit,
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
                    format!(
                        "{res} i={pct:.0}%: without control the foreground keeps less than under idletime (p ≥ {})",
                        if part.tcp_rtt_ns.is_some() { "the RTT" } else { "service" }
                    ),
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
                Row::info(format!("{res} i={pct:.0}%: BFQ idle class, foreground share of r(i)"), "-", f64::NAN, "share")
                    .with_live(bfq.foreground_share),
            );
            rows.push(
                Row::info(format!("{res} i={pct:.0}%: BFQ idle class, background {unit}"), "-", f64::NAN, unit)
                    .with_live(bfq.background_per_s),
            );
        }
    }
    // What the controller itself cost (issue 42: at most 2% of a CPU), its
    // most expensive setup; not a claim of the dissertation.
    if let Some(worst) = points.iter().filter_map(|p| p.controller_cpu_share.map(|c| (c, p))).max_by(|a, b| a.0.total_cmp(&b.0)) {
        rows.push(
            Row::info(
                format!(
                    "{res}: the controller's own CPU, share of one CPU, at its costliest (i={:.0}%, {}; goal ≤ 0.02)",
                    worst.1.intensity * 100.0,
                    worst.1.setup
                ),
                "-",
                f64::NAN,
                "share",
            )
            .with_live(worst.0),
        );
    }
    rows
}

/// How a foreground share was measured: the runs behind the two means
/// and the share's standard error.
fn share_note(p: &Point, part: &Part) -> String {
    let alone = part.alone.iter().find(|a| a.0 == p.intensity).map_or(0, |a| a.1.len());
    let se = p.foreground_share_se.map_or(String::new(), |se| format!(", standard error {se:.2}"));
    format!(" (mean of {} runs over the mean of {alone} alone{se})", p.foreground_runs.len())
}

/// The runs behind a background mean and their standard error, and the
/// model's (from r(i)'s and r_max's runs alone).
fn background_note(p: &Point) -> String {
    let spread = Spread::of(&p.background_runs);
    let se = spread.se().map_or(String::new(), |se| format!(", standard error {se:.0}"));
    let model = p.model_background_se.map_or(String::new(), |se| format!("; the model's standard error {se:.0}"));
    format!(" (mean of {} runs{se}{model})", spread.n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn linear() -> (BaselineTable, ModelParams) {
        let table = BaselineTable {
            name: "linear".into(),
            unit: "reads/s".into(),
            points: (1..=10).map(|k| (f64::from(k) / 10.0, 1000.0 * f64::from(k))).collect(),
        };
        (table, ModelParams { service: ServiceTime::Fixed(100_000), t_max_ns: T_MAX_NS, alpha: 1.0 })
    }

    #[test]
    fn with_ideal_inputs_the_measured_prediction_is_the_model() {
        let (table, params) = linear();
        let ideal = GateReaction { open_ns: 0, close_ns: 0 };
        for p in [1_000_000, 10_000_000, 50_000_000] {
            let m = measured_background(&table, &params, 0.3, p, table.r_max(), ideal);
            let b = model::background_throughput(&table, &params, 0.3, p);
            assert!((m - b).abs() < 1e-9 * b.max(1.0), "p {p}: {m} against {b}");
        }
    }

    #[test]
    fn the_measured_inputs_move_the_prediction_as_they_should() {
        let (table, params) = linear();
        let ideal = GateReaction { open_ns: 0, close_ns: 0 };
        let p = 10_000_000;
        let b = measured_background(&table, &params, 0.3, p, table.r_max(), ideal);
        // A background that reads at 90% of r_max alone gets 90% of the model.
        let slower = measured_background(&table, &params, 0.3, p, 0.9 * table.r_max(), ideal);
        assert!((slower / b - 0.9).abs() < 1e-9);
        // Opening 1 ms late costs the background 1 ms of the 70 ms idle part; closing 1 ms late gives it back.
        let late = measured_background(&table, &params, 0.3, p, table.r_max(), GateReaction { open_ns: 1_000_000, close_ns: 0 });
        assert!((b - late - (table.r_max() - table.r(0.3)) * 1e6 / 70e6).abs() < 1e-6);
        let both = measured_background(&table, &params, 0.3, p, table.r_max(), GateReaction { open_ns: 1_000_000, close_ns: 1_000_000 });
        assert!((both - b).abs() < 1e-6);
        // Past s(i) nothing is left.
        assert_eq!(measured_background(&table, &params, 0.3, 80_000_000, table.r_max(), ideal), 0.0);
    }

    #[test]
    fn the_model_s_error_comes_from_r_i_s_and_r_max_s_runs() {
        let (table, params) = linear();
        let p = 10_000_000;
        // r(0.3) = 3000 and r_max = 10000 with standard errors 100 and 200.
        let alone = vec![(0.3, vec![2900.0, 3100.0]), (1.0, vec![9800.0, 10_200.0])];
        let se = model_background_se(&table, &params, 0.3, p, &alone).unwrap();
        // b = (r_max - r(i)) (s - p - service) / s, s = 70 ms, service 0.1 ms scaled by r_max.
        let frac: f64 = (70e6 - 10e6 - 1e5) / 70e6;
        let expected = (100.0 * frac).hypot(200.0 * frac);
        assert!((se - expected).abs() / expected < 0.01, "{se} against {expected}");
        // Without r_max's runs repeated there is no error to give.
        assert_eq!(model_background_se(&table, &params, 0.3, p, &alone[..1]), None);
    }

    #[test]
    fn the_setups_intensities_take_the_mean_of_every_run_alone() {
        let curve = vec![(0.1, 100.0), (0.3, 300.0), (0.6, 600.0)];
        let alone = vec![(0.3, vec![300.0, 330.0, 270.0, 320.0]), (0.6, Vec::new())];
        assert_eq!(with_means(&curve, &alone), vec![(0.1, 100.0), (0.3, 305.0), (0.6, 600.0)]);
    }

    #[test]
    fn the_runs_of_a_setup_become_one_point_with_their_means() {
        let (table, params) = linear();
        let setups = vec![("no control".to_string(), Setup::NoControl), ("idletime p = 10ms".to_string(), Setup::Idletime(10_000_000))];
        let run = |setup, fg, bg, close| Run {
            intensity: 0.3,
            setup,
            fg,
            bg,
            open_fraction: (setup == 1).then_some(0.5),
            close_p50_ns: close,
            open_p50_ns: close,
            controller_cpu_share: close.map(|c| c as f64 / 1e7),
        };
        // Two rounds, in the order they ran.
        let runs = vec![
            run(0, 2000.0, 5000.0, None),
            run(1, 2900.0, 6000.0, Some(100_000)),
            run(0, 2200.0, 5200.0, None),
            run(1, 3100.0, 7000.0, Some(300_000)),
        ];
        let alone = vec![(0.3, vec![3000.0, 2900.0, 3100.0])];
        let points = points_of(&runs, &setups, &alone, &table, &params, table.r_max());
        assert_eq!(points.len(), 2);
        let (none, idle) = (&points[0], &points[1]);
        assert_eq!((none.setup.as_str(), none.p_ns), ("no control", None));
        assert_eq!(none.foreground_runs, vec![2000.0, 2200.0]);
        assert!((none.foreground_share - 2100.0 / 3000.0).abs() < 1e-12);
        assert_eq!((idle.foreground_per_s, idle.background_per_s), (3000.0, 6500.0));
        assert!((idle.foreground_share - 1.0).abs() < 1e-12);
        assert_eq!(idle.gate_close_reaction_p50_ns, Some(200_000));
        assert_eq!((none.controller_cpu_share, idle.controller_cpu_share), (None, Some(0.02)));
        let se = idle.foreground_share_se.unwrap();
        let expected = Spread::of(&[2900.0, 3100.0]).ratio_se(&Spread::of(&[3000.0, 2900.0, 3100.0])).unwrap();
        assert!((se - expected).abs() < 1e-12 && se > 0.0);
        assert!(idle.model_background_per_s.is_some() && none.model_background_per_s.is_none());
        // One run has no spread to report.
        assert_eq!(points_of(&runs[..2], &setups, &alone, &table, &params, 1.0)[1].foreground_share_se, None);
    }

    #[test]
    fn a_tcp_foreground_is_checked_from_its_round_trip_time() {
        let (table, params) = linear();
        let setups: Vec<(String, Setup)> =
            [1_000_000, 5_000_000].iter().map(|&p| (format!("idletime p = {}", format_ns(p)), Setup::Idletime(p))).collect();
        let run = |setup, fg| Run {
            intensity: 0.3,
            setup,
            fg,
            bg: 1000.0,
            open_fraction: Some(0.5),
            close_p50_ns: None,
            open_p50_ns: None,
            controller_cpu_share: None,
        };
        let alone = vec![(0.3, vec![3000.0])];
        let points = points_of(&[run(0, 2000.0), run(1, 2950.0)], &setups, &alone, &table, &params, table.r_max());
        let part = |rtt| Part {
            resource: "net".into(),
            name: "net tcp/udp".into(),
            setup: String::new(),
            unit: "Mb/s".into(),
            baseline: table.points.clone(),
            alone: alone.clone(),
            r_max: table.r_max(),
            service_ns: 100_000.0,
            tcp_rtt_ns: rtt,
            background_alone_per_s: table.r_max(),
            background_alone_runs: vec![table.r_max()],
            points: points.clone(),
        };
        let share_rows = |part: &Part| -> Vec<(String, Option<bool>)> {
            relations(part).into_iter().filter(|r| r.metric.contains("foreground share")).map(|r| (r.metric, r.holds)).collect()
        };
        // With a 2 ms RTT, p = 1 ms is below the landmark: shown, not checked.
        let rows = share_rows(&part(Some(2_000_000.0)));
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert!(rows[0].0.contains("p=1ms: below the TCP round-trip time (2ms)") && rows[0].1.is_none(), "{rows:?}");
        assert!(rows[1].0.contains("p=5ms") && rows[1].1 == Some(true), "{rows:?}");
        // Without one (UDP), both are checked and the 67% fails.
        let rows = share_rows(&part(None));
        assert_eq!(rows.iter().map(|r| r.1).collect::<Vec<_>>(), vec![Some(false), Some(true)], "{rows:?}");
    }
}
