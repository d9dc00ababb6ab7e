//! Human names for what the BPF side records as numbers: softirq vectors,
//! IRQ lines (from /proc/interrupts) and the x86 system vectors that get
//! pseudo IRQ numbers in `accounting.h`.

use std::collections::BTreeMap;

/// Softirq vector names, in `enum { HI_SOFTIRQ, ... }` order
/// (include/linux/interrupt.h), as /proc/softirqs prints them.
pub const SOFTIRQ_NAMES: [&str; 10] = ["HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU"];

/// The vector whose beneficiary attribution the Fig. 6 check is about.
pub const NET_RX: usize = 3;

/// Name of softirq vector `vec` (`"vec<N>"` for one this kernel added).
pub fn softirq_name(vec: usize) -> String {
    SOFTIRQ_NAMES.get(vec).map(|s| s.to_string()).unwrap_or_else(|| format!("vec{vec}"))
}

/// Names of IRQ lines: `"<irq>:<action names>"` so shared lines show every
/// handler (irq_handler_entry fires per action; time is keyed by line).
#[derive(Debug, Default, Clone)]
pub struct IrqNames {
    lines: BTreeMap<i32, String>,
}

impl IrqNames {
    /// Reads /proc/interrupts; an unreadable file just leaves numbers.
    pub fn from_proc() -> Self {
        std::fs::read_to_string("/proc/interrupts").map(|t| Self::parse(&t)).unwrap_or_default()
    }

    /// Parses the /proc/interrupts format: a header of CPU columns, then
    /// `IRQ: count... [chip] [hwirq-type] actions`.
    pub fn parse(text: &str) -> Self {
        let mut lines = BTreeMap::new();
        let mut rows = text.lines();
        let ncpus = rows.next().map(|h| h.split_whitespace().count()).unwrap_or(0);
        for row in rows {
            let Some((irq, rest)) = row.split_once(':') else { continue };
            let Ok(irq) = irq.trim().parse::<i32>() else { continue };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            // After the per-CPU counts come the chip, the hw irq/trigger
            // and the action names (comma-separated for shared lines).
            let tail = fields.get(ncpus..).unwrap_or(&[]);
            let actions = if tail.len() > 2 { tail[2..].join(" ") } else { tail.join(" ") };
            lines.insert(irq, actions);
        }
        IrqNames { lines }
    }

    /// The display name of IRQ number `irq` (negative: x86 system vector).
    pub fn name(&self, irq: i32) -> String {
        use super::skel::accounting as bpf;
        const LOCAL_TIMER: i32 = bpf::IRQ_LOCAL_TIMER as i32;
        const RESCHEDULE: i32 = bpf::IRQ_RESCHEDULE as i32;
        const CALL_FUNCTION: i32 = bpf::IRQ_CALL_FUNCTION as i32;
        const CALL_FUNCTION_SINGLE: i32 = bpf::IRQ_CALL_FUNCTION_SINGLE as i32;
        match irq {
            LOCAL_TIMER => "LOC:local-timer".into(),
            RESCHEDULE => "RES:reschedule".into(),
            CALL_FUNCTION => "CAL:call-function".into(),
            CALL_FUNCTION_SINGLE => "CAL:call-function-single".into(),
            n => match self.lines.get(&n) {
                Some(actions) if !actions.is_empty() => format!("{n}:{actions}"),
                _ => n.to_string(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "           CPU0       CPU1       \n  \
0:         44          0   IO-APIC   2-edge      timer\n \
11:        120         33   IO-APIC  11-fasteoi   uhci_hcd:usb1, virtio2\n \
24:          0        912   PCI-MSI 49152-edge      virtio0-input.0\n\
NMI:          0          0   Non-maskable interrupts\n\
LOC:      12345      23456   Local timer interrupts\n";

    #[test]
    fn names_lines_including_shared_ones() {
        let names = IrqNames::parse(SAMPLE);
        assert_eq!(names.name(0), "0:timer");
        assert_eq!(names.name(11), "11:uhci_hcd:usb1, virtio2");
        assert_eq!(names.name(24), "24:virtio0-input.0");
        assert_eq!(names.name(99), "99");
        assert_eq!(names.name(-1), "LOC:local-timer");
    }

    #[test]
    fn softirq_names_follow_the_kernel_enum() {
        assert_eq!(softirq_name(NET_RX), "NET_RX");
        assert_eq!(softirq_name(9), "RCU");
        assert_eq!(softirq_name(12), "vec12");
    }
}
