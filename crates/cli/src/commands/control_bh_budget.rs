//! `irqlab control bh-budget`: the BH-threshold paper's adaptive budget on a device's NAPI kthreads.

use crate::error::{CliError, Status};
use crate::flags;
use crate::output::{self, json_or_summary};
use irqlab_control::bh_budget;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The network device whose NAPI kthreads are governed (e.g. irqlab-b)
    #[arg(value_name = "DEV")]
    dev: String,
    /// The sampling period (100us..1s)
    #[arg(long, value_name = "D", default_value = "1ms", value_parser = flags::duration_ns)]
    period: u64,
    /// K, the controller's gain, in (0, 1]
    #[arg(long, value_name = "K", default_value_t = bh_budget::Config::default().gain)]
    gain: f64,
    /// W, the window of the means, in periods
    #[arg(long, value_name = "W", default_value_t = bh_budget::Config::default().window)]
    window: usize,
    /// T_min, the smallest threshold
    #[arg(long, value_name = "T", default_value = "50us", value_parser = flags::duration_ns)]
    min: u64,
    /// T(0), the first period's threshold (default: half the period)
    #[arg(long, value_name = "T", value_parser = flags::duration_ns)]
    initial: Option<u64>,
    /// fifo: SCHED_FIFO HIGH until the threshold, SCHED_IDLE after (a user-space
    /// controller); deadline: SCHED_DEADLINE runtime = threshold (tick-enforced
    /// unless HRTICK_DL is on); observe: nothing enforced, the kthreads keep their
    /// own scheduling (what the kernel's default does, and what the controller
    /// would have asked)
    #[arg(long, value_name = "fifo|deadline|observe", default_value = "fifo")]
    enforce: bh_budget::Enforce,
    /// The SCHED_FIFO priority below the threshold (fifo)
    #[arg(long, value_name = "PRIO", default_value_t = bh_budget::Config::default().high)]
    high: u32,
    /// Pin the NAPI kthreads to this CPU (restored at the end; fifo only)
    #[arg(long, visible_alias = "cpus", value_name = "CPU", value_parser = flags::one_cpu)]
    cpu: Option<usize>,
    /// Run this long (default: until Ctrl-C or SIGTERM)
    #[arg(long, value_name = "D", value_parser = flags::positive_duration_ns)]
    duration: Option<u64>,
    /// Write the per-period irqlab/bh-budget-trace/v1 trace: k, C, P, N, E, T, T(k+1)
    #[arg(long, value_name = "FILE", value_parser = output::file_only())]
    trace: Option<PathBuf>,
    /// Write the irqlab/bh-budget/v1 summary ("-": to stdout, instead of the text)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<Status, CliError> {
    output::refuse_clashes(&[], &[("--trace", args.trace.as_deref()), ("--json", args.json.as_deref())])?;
    let config = bh_budget::Config {
        dev: args.dev.clone(),
        period_ns: args.period,
        gain: args.gain,
        window: args.window,
        min_ns: args.min,
        initial_ns: args.initial,
        cpu: args.cpu,
        duration_ns: args.duration,
        enforce: args.enforce,
        high: args.high,
        ..bh_budget::Config::default()
    };
    super::control::warn_of_stalld(&format!("{}'s NAPI threads, parked once their budget is spent,", config.dev), "run them past it");
    let stop = crate::signal::stop_flag();
    let outcome = bh_budget::run(&config, &stop, |_| {})?;
    if let Some(path) = &args.trace {
        output::write_json(path, &outcome.trace)?;
    }
    json_or_summary(args.json.as_deref(), &outcome.report, summary)?;
    Ok(Status::from_ok(outcome.report.complete))
}

fn summary(r: &bh_budget::Report) -> String {
    use irqlab_analysis::format_ns;
    let f = &r.figures;
    let ns = |v: Option<u64>| v.map_or("-".to_string(), format_ns);
    let threads: Vec<String> = r.threads.iter().map(|t| format!("{} ({})", t.comm, t.tid)).collect();
    let mut text = format!(
        "bh-budget on {} ({}): {} periods of {} ({}), K {}, W {}, T_min {}, T(0) {}, enforced by {}\n",
        r.config.dev,
        threads.join(", "),
        f.periods,
        format_ns(r.config.period_ns),
        r.ended_by,
        r.config.gain,
        r.config.window,
        format_ns(r.config.min_ns),
        format_ns(r.initial_ns),
        match r.enforce {
            bh_budget::Enforce::Fifo => "SCHED_FIFO until the threshold, SCHED_IDLE after",
            bh_budget::Enforce::Deadline => "SCHED_DEADLINE runtime",
            bh_budget::Enforce::Observe => "nothing (observe only)",
        }
    );
    text.push_str(&format!(
        "BH time per ms: mean {}, range {}..{}, p50 {}, p99 {}\nthreshold: mean {}, range {}..{}\n",
        format_ns(f.bh_per_ms.mean_ns as u64),
        format_ns(f.bh_per_ms.min_ns),
        format_ns(f.bh_per_ms.max_ns),
        ns(f.bh_per_ms.p50_ns),
        ns(f.bh_per_ms.p99_ns),
        format_ns(f.threshold.mean_ns as u64),
        format_ns(f.threshold.min_ns),
        format_ns(f.threshold.max_ns)
    ));
    text.push_str(&format!(
        "throughput: {} packets, {:.0}/s; throttled in {} periods: reaction p50/p99/max {}/{}/{}, then on the CPU for the rest of its poll \
         p50/p99/max {}/{}/{}; beyond threshold + reaction + rest of poll in {} periods ({:.1}%)\n",
        f.packets,
        f.packets_per_s,
        f.throttled,
        ns(f.reaction.p50_ns),
        ns(f.reaction.p99_ns),
        ns(f.reaction.max_ns),
        ns(f.ran_on.p50_ns),
        ns(f.ran_on.p99_ns),
        ns(f.ran_on.max_ns),
        f.beyond_threshold,
        100.0 * f.beyond_fraction
    ));
    for s in &f.load_steps {
        let settled = s.settled_after.map_or("did not settle".to_string(), |n| format!("settled after {n} periods"));
        text.push_str(&format!(
            "load step at period {}: {:.0} -> {:.0} packets per period, threshold {settled}\n",
            s.k, s.p_before, s.p_after
        ));
    }
    text.push_str(&format!(
        "controller overhead: {:.0} us of CPU per second of control (setup {} apart); sched_setattr round trip p50/p99/max {}/{}/{} over {} calls\n",
        r.overhead.controller.controller_us_per_s,
        ns(Some(r.overhead.controller.setup_cpu_ns)),
        ns(r.overhead.setattr.p50_ns),
        ns(r.overhead.setattr.p99_ns),
        ns(r.overhead.setattr.max_ns),
        r.overhead.setattr.count
    ));
    text.push_str(&format!("pending proxy: {}\n", r.pending_proxy));
    if r.enforce == bh_budget::Enforce::Deadline || r.deadline_enforcement.granularity == "tick" {
        text.push_str(&format!("note: {}\n", r.deadline_enforcement.note));
    }
    if r.late_periods > 0 || r.lost_events > 0 || r.deadline_refusals > 0 {
        text.push_str(&format!(
            "warning: {} periods closed a period or more late, {} monitor events lost, {} SCHED_DEADLINE changes refused\n",
            r.late_periods, r.lost_events, r.deadline_refusals
        ));
    }
    text
}
