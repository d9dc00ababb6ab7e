//! IRQ affinity, the journal's objects `irq-affinity` (one IRQ's
//! `/proc/irq/N/smp_affinity_list`) and `irq-default-affinity`
//! (`/proc/irq/default_smp_affinity`, the CPUs an IRQ registered later
//! starts on), and the IRQs of `/proc/interrupts` named by number or device.
//!
//! The kernel refuses to move some IRQs (per-CPU ones, the timer, managed
//! queue IRQs of multi-queue devices: EIO); a write it refuses is a missing
//! kernel feature (exit 3) naming the IRQ. What it did with a write it took
//! is `effective_affinity_list` (x86 delivers to one CPU of the mask).

use crate::error::{Error, Result};
use serde::Serialize;
use std::path::Path;

/// One line of `/proc/interrupts` with an IRQ number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Irq {
    pub number: u32,
    /// The interrupt controller (`IO-APIC`, `PCI-MSIX-0000:00:03.0`).
    pub chip: String,
    /// Its handlers' names as the kernel lists them (`virtio2-input.0`,
    /// several joined by ", " for a shared line); empty when none is installed.
    pub actions: String,
    /// How often it fired on each CPU, in CPU order.
    pub counts: Vec<u64>,
}

impl Irq {
    /// "IRQ 38 (virtio2-input.0)".
    pub fn label(&self) -> String {
        if self.actions.is_empty() {
            format!("IRQ {}", self.number)
        } else {
            format!("IRQ {} ({})", self.number, self.actions)
        }
    }

    fn action_names(&self) -> impl Iterator<Item = &str> {
        self.actions.split(", ").map(str::trim).filter(|a| !a.is_empty())
    }
}

/// The numbered IRQs of a `/proc/interrupts` text (system vectors such as
/// `LOC:` and `NMI:` have no number and cannot be steered).
pub fn parse_interrupts(text: &str) -> Vec<Irq> {
    let mut lines = text.lines();
    let cpus = lines.next().map_or(0, |header| header.split_whitespace().count());
    lines
        .filter_map(|line| {
            let (number, rest) = line.trim_start().split_once(':')?;
            let number = number.parse::<u32>().ok()?;
            let words: Vec<&str> = rest.split_whitespace().collect();
            let counts: Vec<u64> = words.iter().take(cpus).map_while(|w| w.parse().ok()).collect();
            let mut tail = words[counts.len()..].iter();
            let chip = tail.next().map_or(String::new(), |c| c.to_string());
            let mut tail: Vec<&str> = tail.copied().collect();
            // The hardware IRQ and trigger (`1-edge`, `9-fasteoi`) since Linux 3.x.
            if tail.first().is_some_and(|w| ["-edge", "-level", "-fasteoi", "-simple"].iter().any(|t| w.ends_with(t))) {
                tail.remove(0);
            }
            Some(Irq { number, chip, actions: tail.join(" "), counts })
        })
        .collect()
}

/// The machine's numbered IRQs.
pub fn list() -> Result<Vec<Irq>> {
    let text = std::fs::read_to_string("/proc/interrupts").map_err(|e| Error::io("reading /proc/interrupts", e))?;
    Ok(parse_interrupts(&text))
}

/// The IRQs a user names: a number (`38`), a handler's name
/// (`virtio2-input.0`), a device whose handlers are named after it
/// (`virtio2`: `virtio2-config`, `virtio2-input.0`, ...), or a network
/// device (`eth0`: its bus device's IRQs). Exit 2 naming `spec` when none.
pub fn resolve(spec: &str, irqs: &[Irq]) -> Result<Vec<Irq>> {
    if let Ok(number) = spec.parse::<u32>() {
        return irqs
            .iter()
            .find(|i| i.number == number)
            .cloned()
            .map(|i| vec![i])
            .ok_or_else(|| Error::Invalid(format!("IRQ {number}: no such IRQ in /proc/interrupts (numbered IRQs: {})", numbers(irqs))));
    }
    let mut names = vec![spec.to_string()];
    let mut msi: Vec<u32> = Vec::new();
    let device = Path::new("/sys/class/net").join(spec).join("device");
    if let Ok(real) = std::fs::canonicalize(&device) {
        if let Some(base) = real.file_name() {
            names.push(base.to_string_lossy().into_owned());
        }
        // A PCI NIC lists its MSI vectors; a virtio NIC's are its PCI parent's.
        for dir in [real.join("msi_irqs"), real.join("../msi_irqs")] {
            if let Ok(entries) = std::fs::read_dir(dir) {
                msi.extend(entries.flatten().filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok())));
            }
        }
    }
    let named = |irq: &Irq| {
        irq.action_names()
            .any(|a| names.iter().any(|n| a == n || a.strip_prefix(n.as_str()).is_some_and(|rest| rest.starts_with(['-', ':', '@']))))
    };
    let found: Vec<Irq> = irqs.iter().filter(|i| named(i) || msi.contains(&i.number)).cloned().collect();
    if found.is_empty() {
        return Err(Error::Invalid(format!(
            "`{spec}`: no IRQ has that number, handler name or device (see /proc/interrupts; names here: {})",
            irqs.iter().filter(|i| !i.actions.is_empty()).map(|i| i.actions.as_str()).take(12).collect::<Vec<_>>().join(", ")
        )));
    }
    Ok(found)
}

fn numbers(irqs: &[Irq]) -> String {
    irqs.iter().map(|i| i.number.to_string()).collect::<Vec<_>>().join(" ")
}

fn list_path(irq: u32) -> String {
    format!("/proc/irq/{irq}/smp_affinity_list")
}

/// Whether IRQ `irq` is still there (a device unbound takes its IRQs).
pub fn exists(irq: u32) -> bool {
    Path::new(&list_path(irq)).exists()
}

/// The CPUs IRQ `irq` may be delivered to.
pub fn affinity(irq: u32) -> Result<Vec<usize>> {
    read_list(&list_path(irq))
}

/// The CPUs the kernel actually delivers IRQ `irq` to (a subset of its
/// affinity; one CPU on x86), where the kernel says (`None` before 4.15).
pub fn effective(irq: u32) -> Option<Vec<usize>> {
    read_list(&format!("/proc/irq/{irq}/effective_affinity_list")).ok()
}

fn read_list(path: &str) -> Result<Vec<usize>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(format!("reading {path}"), e))?;
    crate::rt::parse_cpu_list(text.trim()).map_err(|e| Error::Failed(format!("{path}: {e}")))
}

/// Sets IRQ `irq`'s affinity; the kernel's refusal says which IRQ and why.
pub fn set_affinity(irq: u32, name: &str, cpus: &[usize]) -> Result<()> {
    let path = list_path(irq);
    let list = crate::rt::format_cpu_list(cpus);
    std::fs::write(&path, &list).map_err(|e| match e.raw_os_error() {
        // EIO: managed or per-CPU (kernel/irq/proc.c); EPERM: the chip refuses (seen for virtio-blk's queue IRQ here).
        Some(libc::EIO | libc::EPERM) => Error::MissingKernelFeature {
            feature: format!("moving IRQ {irq} ({name})"),
            detail: format!(
                "the kernel refused ({e}): a per-CPU or kernel-managed IRQ (a multi-queue device's queue IRQ) keeps the affinity \
                 the kernel gave it"
            ),
        },
        Some(libc::EINVAL) => Error::Invalid(format!("IRQ {irq} ({name}) cannot be delivered to CPU {list} (EINVAL)")),
        _ => Error::io(format!("writing `{list}` to {path}"), e),
    })
}

/// Sets IRQ `irq`'s affinity as the journal does: delivered to `effective`
/// first when that is given (a restore), then the mask, then the IRQ's
/// threads moved to where it is now delivered.
///
/// Why the restore goes through `effective`: x86 keeps an IRQ on its
/// current CPU when the mask written contains it, so writing the old mask
/// back alone would leave the IRQ (and on PREEMPT_RT its thread) on the CPU
/// the change moved it to. Where the kernel moves an IRQ only when it next
/// fires (seen for virtio's IRQs in a 6.1-rt guest), the mask is written
/// once that move has happened, or after [`MOVE_WAIT`].
///
/// Why the threads: the kernel moves an IRQ's thread itself only when the
/// IRQ next fires, so a quiet device's thread would stay where the change
/// left it.
pub fn set_affinity_and_threads(irq: u32, name: &str, cpus: &[usize], effective: Option<&[usize]>) -> Result<()> {
    if let Some(delivered) = effective.filter(|e| !e.is_empty() && e.iter().all(|c| cpus.contains(c)) && *e != cpus) {
        if self::effective(irq).as_deref() != Some(delivered) {
            set_affinity(irq, name, delivered)?;
            let deadline = std::time::Instant::now() + MOVE_WAIT;
            while self::effective(irq).as_deref() != Some(delivered) && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
    }
    set_affinity(irq, name, cpus)?;
    let delivered = self::effective(irq).filter(|e| !e.is_empty()).unwrap_or_else(|| cpus.to_vec());
    for tid in threads(irq) {
        // Best effort: the kernel does the same at the IRQ's next firing.
        let _ = crate::rt::set_affinity(tid, &delivered);
    }
    Ok(())
}

/// How long a restore waits for an IRQ to fire and move (a busy device's
/// IRQ fires within it; a quiet one was not moved by the change either).
pub const MOVE_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// The kernel threads that handle IRQ `irq` (`irq/N-NAME`, and a secondary
/// `irq/N-s-NAME`).
pub fn threads(irq: u32) -> Vec<i32> {
    crate::procs::named(&format!("irq/{irq}-"))
}

const DEFAULT: &str = "/proc/irq/default_smp_affinity";

/// The CPUs an IRQ registered from now on starts with.
pub fn default_affinity() -> Result<Vec<usize>> {
    let text = std::fs::read_to_string(DEFAULT).map_err(|e| Error::io(format!("reading {DEFAULT}"), e))?;
    crate::rt::parse_cpu_mask_hex(&text).map_err(|e| Error::Failed(format!("{DEFAULT}: {e}")))
}

pub fn set_default_affinity(cpus: &[usize]) -> Result<()> {
    let mask = crate::rt::cpu_mask_hex(cpus);
    std::fs::write(DEFAULT, &mask).map_err(|e| Error::io(format!("writing `{mask}` to {DEFAULT}"), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERRUPTS: &str = "           CPU0       CPU1       \n \
 24:          1          0  IO-APIC   5-edge      ACPI:Ged\n \
 26:          0         16  IO-APIC   4-edge      ttyS0\n \
 29:          0          0 PCI-MSIX-0000:00:01.0   1-edge      virtio0-inflate\n \
 38:          0      29875 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\n \
 39:      22739          0 PCI-MSIX-0000:00:03.0   2-edge      virtio2-output.0\n \
 40:          0          0 PCI-MSIX-0000:00:04.0   0-edge      \n \
 11:          5          7   IO-APIC  11-fasteoi   uhci_hcd:usb1, eth1\n\
NMI:          0          0   Non-maskable interrupts\n\
LOC:   14372971   13240542   Local timer interrupts\n\
ERR:          0\n";

    #[test]
    fn proc_interrupts_parses_to_numbered_irqs() {
        let irqs = parse_interrupts(INTERRUPTS);
        assert_eq!(irqs.iter().map(|i| i.number).collect::<Vec<_>>(), vec![24, 26, 29, 38, 39, 40, 11]);
        let input = &irqs[3];
        assert_eq!(
            (input.chip.as_str(), input.actions.as_str(), input.counts.clone()),
            ("PCI-MSIX-0000:00:03.0", "virtio2-input.0", vec![0, 29875])
        );
        assert_eq!(irqs[5].actions, "");
        assert_eq!(irqs[6].actions, "uhci_hcd:usb1, eth1");
        assert_eq!(input.label(), "IRQ 38 (virtio2-input.0)");
    }

    #[test]
    fn irqs_are_named_by_number_handler_or_device() {
        let irqs = parse_interrupts(INTERRUPTS);
        let numbers = |spec: &str| resolve(spec, &irqs).map(|v| v.iter().map(|i| i.number).collect::<Vec<_>>());
        assert_eq!(numbers("38").unwrap(), vec![38]);
        assert_eq!(numbers("virtio2-input.0").unwrap(), vec![38]);
        assert_eq!(numbers("virtio2").unwrap(), vec![38, 39]);
        // A shared line answers to each of its handlers; a prefix is not a device.
        assert_eq!(numbers("eth1").unwrap(), vec![11]);
        assert_eq!(numbers("uhci_hcd").unwrap(), vec![11]);
        assert!(numbers("virtio").is_err());
        let e = numbers("99").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("IRQ 99") && e.to_string().contains("24 26 29"), "{e}");
        let e = numbers("nic9").unwrap_err();
        assert!(e.to_string().contains("`nic9`") && e.to_string().contains("virtio2-input.0"), "{e}");
    }
}
