//! `irqlab control irq`: IRQs steered to CPUs while this runs.

use super::control::{hold_plan, online, HoldArgs};
use crate::error::{CliError, Status};
use crate::flags;
use irqlab_control::profile;
use irqlab_host::journal;

#[derive(clap::Args)]
pub struct Args {
    /// IRQs: a number (38), a handler's name (virtio2-input.0), a device
    /// (virtio2, eth0: all its IRQs), `*` (every IRQ the kernel lets move),
    /// or `default` (/proc/irq/default_smp_affinity)
    #[arg(value_name = "IRQ|DEVICE", required = true)]
    irqs: Vec<String>,
    /// The CPUs to deliver them to (e.g. 0 or 0-3,6)
    #[arg(long, visible_alias = "cpus", value_name = "LIST", value_parser = flags::cpu_list)]
    cpu: flags::CpuList,
    #[command(flatten)]
    hold: HoldArgs,
}

pub fn run(args: Args) -> Result<Status, CliError> {
    let cpus = online(Some(&args.cpu), "--cpu")?.unwrap_or_default();
    let irqs = journal::irq::list()?;
    let mut plan = Vec::new();
    for spec in &args.irqs {
        plan.extend(profile::plan_irq(spec, &cpus, None, &irqs)?);
    }
    let source = format!("control irq {} --cpu {}", args.irqs.join(" "), args.cpu);
    hold_plan(source, profile::Plan { changes: profile::last_word(plan), ..Default::default() }, None, args.hold)
}
