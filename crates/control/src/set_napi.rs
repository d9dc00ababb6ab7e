//! `irqlab control napi DEV [settings]`: lists a device's NAPI instances
//! (id, IRQ, polling thread, settings) and, given settings, applies them
//! through the journal, holds them, and restores them at the end (or keeps
//! them with `persist`). Per NAPI instance through the netdev netlink
//! family where the kernel has it ([`irqlab_host::journal::netdev`]); the per-device sysfs
//! files otherwise (`threaded`, `napi_defer_hard_irqs`, `gro_flush_timeout`;
//! IRQ suspension has none). The NAPI budgets are global sysctls.

use irqlab_host::error::{Error, Result};
use irqlab_host::journal::hold::{self, Changed};
use irqlab_host::journal::netdev::{self, Knob, Napi, Netdev};
use irqlab_host::journal::{self, Applied, Object, Value};
use irqlab_host::privilege::{self, Capability};
use irqlab_host::run_end::EndedBy;
use serde::Serialize;
use std::sync::atomic::AtomicBool;

pub const SCHEMA: &str = "irqlab/control-napi/v1";
const BUDGET: &str = "/proc/sys/net/core/netdev_budget";
const BUDGET_USECS: &str = "/proc/sys/net/core/netdev_budget_usecs";

/// The settings asked for; `None` leaves one alone.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    pub threaded: Option<bool>,
    pub defer_hard_irqs: Option<u64>,
    pub gro_flush_timeout_ns: Option<u64>,
    pub irq_suspend_timeout_ns: Option<u64>,
    /// `net.core.netdev_budget` (packets per NET_RX run, all devices).
    pub budget: Option<u64>,
    /// `net.core.netdev_budget_usecs` (time per NET_RX run, all devices).
    pub budget_usecs: Option<u64>,
}

impl Settings {
    pub fn is_empty(&self) -> bool {
        self.per_napi().is_empty() && self.budget.is_none() && self.budget_usecs.is_none()
    }

    fn per_napi(&self) -> Vec<(Knob, u64)> {
        [
            (Knob::Threaded, self.threaded.map(u64::from)),
            (Knob::DeferHardIrqs, self.defer_hard_irqs),
            (Knob::GroFlushTimeout, self.gro_flush_timeout_ns),
            (Knob::IrqSuspendTimeout, self.irq_suspend_timeout_ns),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect()
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub dev: String,
    pub settings: Settings,
    pub duration_ns: Option<u64>,
    pub persist: bool,
}

/// What a device's NAPI looks like now.
#[derive(Debug, Clone, Serialize)]
pub struct Listing {
    pub dev: String,
    pub ifindex: u32,
    /// Per instance from netlink; empty when the kernel has no netdev family.
    pub napis: Vec<Napi>,
    /// Why there are no per-instance figures, when there are none.
    pub napis_unavailable: Option<String>,
    /// The device-wide sysfs view (threaded, napi_defer_hard_irqs,
    /// gro_flush_timeout) and the global budgets.
    pub device: Vec<(String, String)>,
}

fn sysfs(dev: &str, file: &str) -> String {
    format!("/sys/class/net/{dev}/{file}")
}

/// The device's NAPI instances and settings.
pub fn list(dev: &str) -> Result<Listing> {
    let ifindex = netdev::ifindex(dev)?;
    let (napis, napis_unavailable) = match Netdev::open().and_then(|mut n| n.napis(ifindex)) {
        Ok(napis) => (napis, None),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    let device = [
        ("threaded", sysfs(dev, "threaded")),
        ("napi_defer_hard_irqs", sysfs(dev, "napi_defer_hard_irqs")),
        ("gro_flush_timeout", sysfs(dev, "gro_flush_timeout")),
        ("net.core.netdev_budget", BUDGET.into()),
        ("net.core.netdev_budget_usecs", BUDGET_USECS.into()),
    ]
    .into_iter()
    .filter_map(|(name, path)| std::fs::read_to_string(path).ok().map(|v| (name.to_string(), v.trim().to_string())))
    .collect();
    Ok(Listing { dev: dev.into(), ifindex, napis, napis_unavailable, device })
}

/// The `irqlab/control-napi/v1` document.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub before: Listing,
    /// As it was while the settings held.
    pub during: Listing,
    /// "netlink" (per NAPI instance) or "sysfs" (per device).
    pub via: &'static str,
    pub changes: Vec<Changed>,
    pub persist: bool,
    pub held_ns: u64,
    pub ended_by: EndedBy,
    pub complete: bool,
    /// Values something else changed while the run held them, as found
    /// (each said on stderr then; `control status` names them after).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drifts: Vec<hold::Drift>,
}

/// Applies the settings (each recorded in the journal first), holds them
/// until `stop`, the duration, or the device's disappearance, and restores
/// them (unless `persist`).
pub fn run(config: &Config, stop: &AtomicBool) -> Result<Report> {
    privilege::require(&[Capability::NetAdmin], "change NAPI settings")?;
    let before = list(&config.dev)?;
    let mut applied: Vec<Applied> = Vec::new();
    let per_napi = config.settings.per_napi();
    let mut via = "netlink";
    if !per_napi.is_empty() {
        if before.napis.is_empty() {
            via = "sysfs";
            apply_per_device(config, &per_napi, &before, &mut applied)?;
        } else {
            for napi in &before.napis {
                for &(knob, value) in &per_napi {
                    let object = Object::Napi { dev: config.dev.clone(), ifindex: before.ifindex, id: napi.id, knob };
                    match journal::apply(object, Value::Uint { value }) {
                        Ok(a) => applied.push(a),
                        // 6.13-6.16 take no per-NAPI `threaded`: the device's switch.
                        Err(Error::MissingKernelFeature { .. } | Error::Invalid(_)) if knob == Knob::Threaded => {
                            via = "netlink and sysfs (threaded)";
                            apply_per_device(config, &[(knob, value)], &before, &mut applied)?;
                            break;
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
        }
    }
    for (path, value) in [(BUDGET, config.settings.budget), (BUDGET_USECS, config.settings.budget_usecs)] {
        if let Some(v) = value {
            applied.push(journal::apply(Object::File { path: path.into() }, Value::Text { text: v.to_string() })?);
        }
    }
    let during = list(&config.dev)?;
    let mut drift = hold::DriftWatch::new(true);
    let (held_ns, ended_by) = hold::wait_while(stop, config.duration_ns, config.persist, || {
        let gone = (netdev::ifindex(&config.dev).ok() != Some(before.ifindex)).then_some(EndedBy::DeviceGone);
        if gone.is_none() {
            drift.check_all(&applied);
        }
        gone
    });
    // Restored newest first, as every hold is.
    let changes = hold::settle(applied, config.persist)?;
    Ok(Report {
        schema: SCHEMA,
        before,
        during,
        via,
        changes,
        persist: config.persist,
        held_ns,
        complete: ended_by.complete(config.duration_ns, 0),
        ended_by,
        drifts: drift.drifts,
    })
}

/// The per-device sysfs files for kernels without per-NAPI netlink.
fn apply_per_device(config: &Config, settings: &[(Knob, u64)], before: &Listing, applied: &mut Vec<Applied>) -> Result<()> {
    for &(knob, value) in settings {
        let file = match knob {
            Knob::Threaded => "threaded",
            Knob::DeferHardIrqs => "napi_defer_hard_irqs",
            Knob::GroFlushTimeout => "gro_flush_timeout",
            Knob::IrqSuspendTimeout => {
                return Err(Error::MissingKernelFeature {
                    feature: "per-NAPI irq-suspend-timeout".into(),
                    detail: before.napis_unavailable.clone().unwrap_or_else(|| "it has no sysfs file".into()),
                })
            }
        };
        let object = Object::File { path: sysfs(&config.dev, file) };
        applied.push(journal::apply(object, Value::Text { text: value.to_string() })?);
    }
    Ok(())
}
