//! The process-aware paper's Fig. 6 live on the testbed (issue 7): the
//! interrupt time stolen from a SCHED_FIFO CPU-bound task grows with the
//! UDP rate (its NET_RX part at every step), and /proc's charge of that
//! task exceeds its true run time by about what was stolen; at least 80% of the NET_RX time is attributed to
//! the UDP server. Runs only with IRQLAB_LIVE_TESTS=1, as root.

use irqlab_experiments::process_aware::fig6::{self, Config};
use std::sync::atomic::AtomicBool;

#[test]
fn stolen_time_grows_with_rate_and_proc_overcharges() {
    if std::env::var("IRQLAB_LIVE_TESTS").as_deref() != Ok("1") {
        eprintln!("skipped: live test (set IRQLAB_LIVE_TESTS=1 and run as root: BPF, netns, SCHED_FIFO)");
        return;
    }
    // Two rounds: one 1.5 s run on a VM can cost 2-3 times the NET_RX a
    // packet of its neighbours (a CI run: 41.2 ms at 4000/s, 36.9 ms at
    // 16000/s); the growth compares each rate's least disturbed round.
    let config = Config { rates_pps: vec![1_000, 4_000, 16_000], duration_ns: 1_500_000_000, rounds: 2, ..Default::default() };
    let result = fig6::measure(&config, &AtomicBool::new(false), |_| {}).expect("fig6 run");
    eprint!("{}", fig6::table(&result));
    assert!(result.complete);
    // The rate-driven part (NET_RX) must grow at every step; all stolen time
    // only from the lowest to the highest rate, since it also holds the
    // timer tick, whose cost on a VM swings by ~10 ms per run whatever the
    // rate (seen in CI: 9.9, 29.0, 27.2 ms with NET_RX 2.0, 6.6, 21.9).
    assert!(result.network_stolen_grows_with_rate, "stolen time did not grow with the rate");
    // The beneficiary attribution puts the measured CPU's NET_RX time on the
    // UDP server (the paper's server machine is that CPU; the sender-side
    // RPS hand-off runs on the other CPU, host b's stand-in).
    for p in &result.points {
        assert!(p.cpu_net_rx_ns > 0, "{} pps: no NET_RX on the measured CPU", p.rate_pps);
        assert!(p.cpu_beneficiary_share >= 0.8, "{} pps: only {:.1}% of NET_RX on the server", p.rate_pps, 100.0 * p.cpu_beneficiary_share);
    }
    let last = result.points.iter().rfind(|p| p.rate_pps == 16_000).unwrap();
    assert!(last.net_rx_ns > 0 && last.hog_stolen_net_rx_ns > 0, "no NET_RX time was stolen from the CPU-bound task");
    // /proc charges the CPU-bound task for every tick it was current, so at
    // the highest rate it is charged more than it really ran, by roughly
    // the stolen time (within tick sampling: 2 ticks). On a VM the kernel
    // leaves the hypervisor's steal out of that charge, while the true run
    // time (wall clock while current) includes it: add it back.
    let proc = last.hog_proc_charged_ns.expect("hog alive at report time") + last.cpu_steal_ns;
    let tick = 1_000_000_000 / irqlab_measure::accounting::procfs::ticks_per_second();
    assert!(
        proc + 2 * tick > last.hog_run_ns + last.hog_stolen_ns / 2,
        "proc + steal {proc} vs run {} stolen {} (steal {})",
        last.hog_run_ns,
        last.hog_stolen_ns,
        last.cpu_steal_ns
    );
    assert!(proc > last.hog_run_ns, "/proc (+ steal) {proc} does not exceed the true run {}", last.hog_run_ns);
}
