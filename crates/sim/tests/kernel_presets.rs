//! Each kernel preset's own mechanisms (issue 53): 6.1 leaves softirqs to
//! a running ksoftirqd and 6.12 does not; 6.1 throttles RT tasks and 6.12
//! runs fair ones with its fair server. Each is shown by running the same
//! scenario under both presets: the difference comes from the mechanism.

use irqlab_sim::machine::MachineResult;
use irqlab_sim::scenario::KernelPreset;
mod common;
use common::{repo_scenario as scenario, run_machine as run};

/// The share of bottom-half work done in softirq context at IRQ exit
/// (the rest ran in ksoftirqd).
fn at_irq_exit(r: &MachineResult) -> f64 {
    let s = &r.cpus[0].sim;
    s.cpu.time.softirq_ns as f64 / s.cpu.bottom_half_ns.max(1) as f64
}

#[test]
fn linux_6_1_leaves_softirqs_to_a_running_ksoftirqd_and_6_12_does_not() {
    let mut sc = scenario("scenarios/kernels/flood-6.1.toml");
    let old = run(&sc);
    sc.spec_mut().machine.kernel = Some(KernelPreset::Linux612);
    let new = run(&sc);
    let (o, n) = (&old.cpus[0].sim.softirq, &new.cpus[0].sim.softirq);
    // 6.1: the flood keeps ksoftirqd runnable, and every IRQ exit (the
    // tick's: the NIC's interrupt is off while NAPI polls) leaves NET_RX
    // to it.
    assert!(o.left_to_running_ksoftirqd > 100, "{o:?}");
    assert_eq!(o.irq_exit_runs, 0, "{o:?}");
    assert_eq!(at_irq_exit(&old), 0.0);
    // 6.12: the same IRQ exits run NET_RX in softirq context.
    assert_eq!(n.left_to_running_ksoftirqd, 0, "{n:?}");
    assert!(n.irq_exit_runs > 100, "{n:?}");
    assert!(at_irq_exit(&new) > 0.05, "6.12 ran {:.1}% at IRQ exit", 100.0 * at_irq_exit(&new));
}

/// Each task's CPU time, in ms, and the CPU's idle time.
fn times(r: &MachineResult) -> (f64, f64, f64) {
    let s = &r.cpus[0].sim;
    let ms = |name: &str| s.tasks.iter().find(|t| t.name == name).map_or(0.0, |t| t.time.run_ns as f64 / 1e6);
    (ms("hog"), ms("fair"), s.cpu.time.idle_ns as f64 / 1e6)
}

#[test]
fn a_fifo_busy_loop_leaves_a_fair_task_50_ms_per_second_on_6_12_and_6_1() {
    let mut sc = scenario("scenarios/kernels/rt-hog-6.12.toml");
    let seconds = 5.0;
    let new = run(&sc);
    let (_, fair, idle) = times(&new);
    // The fair server: 50 ms at the end of each of the 5 seconds (less a
    // context switch or two, and the ticks that interrupt it).
    assert!((fair - 50.0 * seconds).abs() < 1.0, "6.12: the fair task ran {fair} ms in {seconds} s");
    assert_eq!(idle, 0.0);
    assert_eq!(new.cpus[0].sim.bandwidth.as_ref().unwrap()["boosts"], 5);
    // RT throttling: the same share, by holding the RT task back.
    sc.spec_mut().machine.kernel = Some(KernelPreset::Linux61);
    let old = run(&sc);
    let (_, fair, _) = times(&old);
    assert!((fair - 50.0 * seconds).abs() < 2.0, "6.1: the fair task ran {fair} ms in {seconds} s");
    assert_eq!(old.cpus[0].sim.bandwidth.as_ref().unwrap()["throttles"], 5);
    // The papers' kernels have neither: the fair task never runs.
    sc.spec_mut().machine.kernel = None;
    sc.spec_mut().machine.softirq = irqlab_sim::scenario::SoftirqKind::LinuxModern { budget_packets: 300, budget_ns: 2_000_000 };
    let none = run(&sc);
    assert_eq!(times(&none).1, 0.0);
}

#[test]
fn with_no_fair_task_6_1_idles_the_throttled_cpu_and_6_12_lets_the_rt_task_run() {
    let mut sc = scenario("scenarios/kernels/rt-hog-6.12.toml");
    sc.spec_mut().tasks.retain(|t| t.name != "fair");
    let (hog, _, idle) = times(&run(&sc));
    assert!(hog > 4990.0 && idle == 0.0, "6.12: hog {hog} ms, idle {idle} ms");
    sc.spec_mut().machine.kernel = Some(KernelPreset::Linux61);
    let (hog, _, idle) = times(&run(&sc));
    // 950 ms of each second (IRQ time is not the RT class's: IRQ time
    // accounting), the rest idle but for the ticks (1 us each, 1,250).
    assert!((hog - 4750.0).abs() < 0.01, "6.1: hog {hog} ms");
    assert!(idle > 248.0 && idle < 250.0, "6.1: idle {idle} ms");
}

#[test]
fn on_6_12_rt_the_softirq_runs_in_the_irq_thread_at_its_priority() {
    let mut sc = scenario("scenarios/kernels/flood-6.12-rt.toml");
    let rt = run(&sc);
    let s = &rt.cpus[0].sim;
    let task = |s: &irqlab_sim::SimResult, name: &str| s.tasks.iter().find(|t| t.name == name).cloned().unwrap();
    let thread = task(s, "irq/1-eth0");
    assert_eq!(thread.policy, "fifo:50", "the kernel's forced-threaded handlers run at FIFO 50");
    // Every bottom-half job ran in the thread whose handler raised it,
    // none in softirq context or in ksoftirqd.
    assert!(s.cpu.bottom_half_ns > 100_000_000, "{:?}", s.cpu);
    assert_eq!(thread.bottom_half_work_ns, s.cpu.bottom_half_ns);
    assert_eq!(s.cpu.time.softirq_ns, 0);
    assert_eq!(task(s, "ksoftirqd/0").time.run_ns, 0);
    // At FIFO 50: the FIFO 60 task loses no time to NET_RX, the FIFO 40
    // task waits for it.
    let control = task(s, "control");
    assert_eq!(control.time.stolen_softirq_ns, 0);
    let rt_max = control.response.as_ref().unwrap().max_ns;
    // Without PREEMPT_RT the same NET_RX runs at IRQ exit, in whatever
    // it interrupted: the FIFO 60 task included.
    sc.spec_mut().machine.kernel = Some(KernelPreset::Linux612);
    sc.spec_mut().machine.softirq = KernelPreset::Linux612.softirq(300, 2_000_000);
    let plain = run(&sc);
    let s = &plain.cpus[0].sim;
    assert_eq!(s.cpu.time.softirq_ns, s.cpu.bottom_half_ns);
    let control = task(s, "control");
    assert!(control.time.stolen_softirq_ns > 10_000_000, "{:?}", control.time);
    assert!(control.response.as_ref().unwrap().max_ns > rt_max, "the FIFO 60 task's worst response grows without PREEMPT_RT");
}
