//! How many interrupts one CPU took while the probe ran on it, from
//! /proc/interrupts: the local timer (`LOC:`) apart, everything else
//! together. These are counts, so they mean the same in an emulated guest,
//! where the probe's latencies do not; with `nohz_full` on the CPU and the
//! probe its only runnable task, the tick stops and `LOC` falls from HZ to
//! about 1/s (issue 51).
//!
//! The counts are sampled from a thread off the probed CPU (there it would
//! be a second runnable task: the tick would stay on and the probe would
//! see it as interference), and the rates are taken between the first and
//! the last sample inside the probe's spin, so the probe's setup and
//! teardown, when its CPU may sit idle, are left out.

use crate::doc::InterruptRates;
use irqlab_host::rt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the sampler reads /proc/interrupts: the window loses at most
/// this much at each end.
const SAMPLE_EVERY: Duration = Duration::from_millis(50);
/// Samples this close to either end of the spin are left out: its start is
/// placed from the probe's once-a-second report, whose clock estimate and
/// snapshot work can make it a few tens of ms late under emulation.
const MARGIN: Duration = Duration::from_millis(50);

/// One CPU's counts at one moment, modulo 2^32: the kernel's per-CPU
/// counters are `unsigned int` and wrap, and sums and differences taken
/// modulo 2^32 stay exact while a window sees fewer than 2^32 interrupts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Counts {
    /// The `LOC:` row.
    pub local_timer: u32,
    /// Every other row with a count per CPU: numbered IRQs, IPIs, NMIs...
    pub other: u32,
    /// Those rows one by one, by [`row_name`], for telling which kind rose.
    pub rows: Vec<(String, u32)>,
}

/// A row's name in the rates: the system rows by their key (`RES`, `CAL`,
/// `IWI`), a numbered IRQ by its number and the last word of its handlers
/// (`24 virtio0-input.0`).
fn row_name(name: &str, rest: &str) -> String {
    match (name.parse::<u32>(), rest.split_whitespace().last()) {
        (Ok(_), Some(handler)) => format!("{name} {handler}"),
        _ => name.to_string(),
    }
}

/// The counts of `cpu` in a /proc/interrupts text; `None` when the CPU has
/// no column (offline) or there is no `LOC:` row (not x86).
pub fn cpu_counts(text: &str, cpu: usize) -> Option<Counts> {
    let mut lines = text.lines();
    // The header names only the online CPUs: a column is found by its name.
    let header: Vec<&str> = lines.next()?.split_whitespace().collect();
    let column = header.iter().position(|h| *h == format!("CPU{cpu}"))?;
    let mut local_timer = None;
    let mut other = 0u32;
    let mut rows = Vec::new();
    for line in lines {
        let Some((name, rest)) = line.split_once(':') else { continue };
        let name = name.trim();
        // Counted once for the whole machine, not per CPU (one number even
        // where there are several CPU columns).
        if name == "ERR" || name == "MIS" {
            continue;
        }
        let counts: Vec<u64> = rest.split_whitespace().take(header.len()).map_while(|w| w.parse().ok()).collect();
        if counts.len() < header.len() {
            continue;
        }
        let count = counts[column] as u32;
        if name == "LOC" {
            local_timer = Some(count);
        } else {
            other = other.wrapping_add(count);
            rows.push((row_name(name, rest), count));
        }
    }
    Some(Counts { local_timer: local_timer?, other, rows })
}

/// The rates between two samples `window_ns` apart.
pub fn rates(before: &Counts, after: &Counts, window_ns: u64) -> InterruptRates {
    let per_s = |a: u32, b: u32| f64::from(b.wrapping_sub(a)) * 1e9 / window_ns.max(1) as f64;
    // A row in both samples that counted anything (an IRQ registered in
    // between has no start and is left out of the rows, not of `other`).
    let other_by_row = after
        .rows
        .iter()
        .filter_map(|(name, b)| before.rows.iter().find(|(n, _)| n == name).map(|(_, a)| (name, per_s(*a, *b))))
        .filter(|(_, rate)| *rate > 0.0)
        .map(|(name, rate)| (name.clone(), rate))
        .collect();
    InterruptRates {
        local_timer_per_s: per_s(before.local_timer, after.local_timer),
        other_per_s: per_s(before.other, after.other),
        other_by_row,
        window_ns,
    }
}

/// The rates between the first and the last sample inside `[start, end]`
/// (less [`MARGIN`] at each end); `None` with fewer than two.
pub fn rates_within(samples: &[(Instant, Counts)], start: Instant, end: Instant) -> Option<InterruptRates> {
    let inside: Vec<&(Instant, Counts)> = samples.iter().filter(|(t, _)| *t >= start + MARGIN && *t + MARGIN <= end).collect();
    let ((t0, first), (t1, last)) = (inside.first()?, inside.last()?);
    (t1 > t0).then(|| rates(first, last, (*t1 - *t0).as_nanos() as u64))
}

/// Reads /proc/interrupts every [`SAMPLE_EVERY`] from another CPU than
/// the probed one until [`Sampler::finish`].
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<(Instant, Counts)>>>,
}

impl Sampler {
    /// Samples `cpu`'s counts; samples nothing when the thread cannot run
    /// off `cpu` (a one-CPU machine or cpuset).
    pub fn start(cpu: usize) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("irqlab-irqcount".into())
            .spawn(move || {
                let _ = rt::pin_off(cpu);
                if rt::affinity(0).map_or(true, |cpus| cpus.contains(&cpu)) {
                    return Vec::new();
                }
                let mut samples = Vec::new();
                while !flag.load(Ordering::SeqCst) {
                    let now = Instant::now();
                    if let Some(counts) = std::fs::read_to_string("/proc/interrupts").ok().and_then(|t| cpu_counts(&t, cpu)) {
                        samples.push((now, counts));
                    }
                    std::thread::sleep(SAMPLE_EVERY);
                }
                samples
            })
            .ok();
        Sampler { stop, thread }
    }

    /// Stops sampling; the rates over the spin `[start, end]`.
    pub fn finish(mut self, start: Instant, end: Instant) -> Option<InterruptRates> {
        rates_within(&self.samples(), start, end)
    }

    fn samples(&mut self) -> Vec<(Instant, Counts)> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().and_then(|t| t.join().ok()).unwrap_or_default()
    }
}

impl Drop for Sampler {
    /// A probe that failed still ends the sampler.
    fn drop(&mut self) {
        self.samples();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 2-CPU x86 guest's /proc/interrupts (trimmed), with the one-number
    /// rows ERR and MIS.
    const BEFORE: &str = "           CPU0       CPU1       \n  \
  0:         44          0   IO-APIC   2-edge      timer\n \
 11:        120         33   IO-APIC  11-fasteoi   uhci_hcd:usb1, virtio2\n \
 24:          0        912   PCI-MSI 49152-edge      virtio0-input.0\n\
NMI:          0          0   Non-maskable interrupts\n\
LOC:      12345      23456   Local timer interrupts\n\
RES:         10         20   Rescheduling interrupts\n\
CAL:          5          7   Function call interrupts\n\
ERR:          0\n\
MIS:          0\n";

    /// Two seconds later: 500 ticks on CPU 0, 2 on CPU 1 (nohz_full).
    const AFTER: &str = "           CPU0       CPU1       \n  \
  0:         44          0   IO-APIC   2-edge      timer\n \
 11:        130         33   IO-APIC  11-fasteoi   uhci_hcd:usb1, virtio2\n \
 24:          0       1012   PCI-MSI 49152-edge      virtio0-input.0\n\
NMI:          0          0   Non-maskable interrupts\n\
LOC:      12845      23458   Local timer interrupts\n\
RES:         10         24   Rescheduling interrupts\n\
CAL:          5          7   Function call interrupts\n\
ERR:          3\n\
MIS:          0\n";

    #[test]
    fn counts_are_read_per_cpu_with_the_local_timer_apart() {
        let cpu0 = cpu_counts(BEFORE, 0).unwrap();
        assert_eq!((cpu0.local_timer, cpu0.other), (12345, 44 + 120 + 10 + 5));
        let cpu1 = cpu_counts(BEFORE, 1).unwrap();
        assert_eq!((cpu1.local_timer, cpu1.other), (23456, 33 + 912 + 20 + 7));
        let rows: Vec<(&str, u32)> = cpu1.rows.iter().map(|(n, c)| (n.as_str(), *c)).collect();
        assert_eq!(rows, [("0 timer", 0), ("11 virtio2", 33), ("24 virtio0-input.0", 912), ("NMI", 0), ("RES", 20), ("CAL", 7)]);
        // No column for an offline CPU, no LOC row off x86.
        assert_eq!(cpu_counts(BEFORE, 2), None);
        assert_eq!(cpu_counts("           CPU0\n  0:   44   IO-APIC   2-edge   timer\n", 0), None);
    }

    #[test]
    fn columns_are_found_by_name_when_a_cpu_is_offline() {
        let text =
            "           CPU0       CPU2\n 11:   1   2   IO-APIC  11-fasteoi   eth0\nLOC:   100   200   Local timer interrupts\nERR:   7\n";
        assert_eq!(cpu_counts(text, 2).map(|c| (c.local_timer, c.other)), Some((200, 2)));
        // On one CPU, ERR's single number is still not the CPU's.
        let one = "           CPU0\nLOC:   100   Local timer interrupts\nERR:   7\nMIS:   1\n";
        assert_eq!(cpu_counts(one, 0).map(|c| (c.local_timer, c.other)), Some((100, 0)));
    }

    #[test]
    fn rates_over_two_seconds() {
        let two_s = 2_000_000_000;
        let cpu0 = rates(&cpu_counts(BEFORE, 0).unwrap(), &cpu_counts(AFTER, 0).unwrap(), two_s);
        assert_eq!((cpu0.local_timer_per_s, cpu0.other_per_s, cpu0.window_ns), (250.0, 5.0, two_s));
        let cpu1 = rates(&cpu_counts(BEFORE, 1).unwrap(), &cpu_counts(AFTER, 1).unwrap(), two_s);
        assert_eq!((cpu1.local_timer_per_s, cpu1.other_per_s), (1.0, 52.0));
        // Which kinds rose: the NIC's queue and the rescheduling IPI.
        let rows: Vec<(&str, f64)> = cpu1.other_by_row.iter().map(|(n, r)| (n.as_str(), *r)).collect();
        assert_eq!(rows, [("24 virtio0-input.0", 50.0), ("RES", 2.0)]);
    }

    #[test]
    fn a_counter_that_wraps_still_counts() {
        let before = Counts { local_timer: u32::MAX - 1, other: u32::MAX, rows: vec![("RES".into(), u32::MAX)] };
        let after = Counts { local_timer: 248, other: 9, rows: vec![("RES".into(), 9)] };
        let r = rates(&before, &after, 1_000_000_000);
        assert_eq!((r.local_timer_per_s, r.other_per_s, r.other_by_row["RES"]), (250.0, 10.0, 10.0));
    }

    #[test]
    fn only_samples_inside_the_spin_count() {
        let t = Instant::now();
        let at = |ms: u64, loc: u32| (t + Duration::from_millis(ms), Counts { local_timer: loc, ..Counts::default() });
        // Setup (idle, no ticks), the spin from 1000 to 3000 ms at 250/s, teardown.
        let samples = [at(0, 0), at(950, 0), at(1100, 0), at(2100, 250), at(2900, 450), at(3100, 460), at(4000, 460)];
        let r = rates_within(&samples, t + Duration::from_millis(1000), t + Duration::from_millis(3000)).unwrap();
        assert_eq!((r.local_timer_per_s, r.window_ns), (250.0, 1_800_000_000));
        assert_eq!(rates_within(&samples[..3], t + Duration::from_millis(1000), t + Duration::from_millis(3000)), None);
    }
}
