//! A machine of several CPUs (issue 53): RPS steering and its IPI, and a
//! one-CPU placement on a machine of two giving that CPU the one-CPU
//! simulator's figures.

use irqlab_sim::machine::MachineResult;
mod common;
use common::{repo_scenario as scenario, run_machine as run};

fn net_rx_ns(r: &MachineResult, cpu: usize) -> u64 {
    r.cpus[cpu].sim.softirq.per_vector_ns.get("net_rx").copied().unwrap_or(0)
}

#[test]
fn rps_puts_the_protocol_on_the_target_cpu_and_the_sender_sends_the_ipi() {
    let sc = scenario("scenarios/kernels/rps-6.12.toml");
    let r = run(&sc);
    let (cpu0, cpu1) = (&r.cpus[0], &r.cpus[1]);
    let delivered = cpu1.sim.conservation.udp_delivered_to_app;
    assert!(delivered > 50_000, "the server on CPU 1 got {delivered} datagrams");
    // Every datagram crossed: CPU 0 polled the NIC and steered it.
    assert_eq!(cpu0.cross_cpu.rps_packets_sent, cpu1.cross_cpu.rps_packets_received);
    assert_eq!(cpu0.sim.conservation.udp_delivered_to_app, 0);
    // NET_RX on both CPUs, each at its own per-packet cost: the steering
    // (0.4 us) on CPU 0, the protocol (1.2 us) on CPU 1.
    let per_packet = |ns: u64, n: u64| ns as f64 / n as f64;
    let sent = cpu0.cross_cpu.rps_packets_sent;
    assert!((per_packet(net_rx_ns(&r, 0), sent) - 400.0).abs() < 1.0, "CPU 0 NET_RX {} ns for {sent}", net_rx_ns(&r, 0));
    assert!((per_packet(net_rx_ns(&r, 1), delivered) - 1200.0).abs() < 50.0, "CPU 1 NET_RX {} ns for {delivered}", net_rx_ns(&r, 1));
    // The IPIs: sent by CPU 0, taken by CPU 1 on its IPI line.
    let ipi_line = |c: &irqlab_sim::machine::CpuRun| c.sim.irq_lines.iter().find(|l| l.name == "ipi").map_or(0, |l| l.count);
    assert!(cpu0.cross_cpu.ipis_sent > 0);
    assert_eq!(cpu0.cross_cpu.ipis_sent, cpu1.cross_cpu.ipis_received);
    assert_eq!(ipi_line(cpu1), cpu1.cross_cpu.ipis_received);
    assert_eq!(ipi_line(cpu0), 0);
    // At most one IPI per datagram (one per NET_RX run of CPU 0 that found
    // CPU 1's backlog idle).
    assert!(cpu0.cross_cpu.ipis_sent <= sent);
}

#[test]
fn without_rps_the_protocol_stays_on_the_interrupted_cpu() {
    let mut sc = scenario("scenarios/kernels/rps-6.12.toml");
    sc.spec_mut().nic.as_mut().unwrap().rps_cpu = None;
    sc.spec_mut().task_mut("server").unwrap().cpu = 0;
    sc.check().unwrap();
    let r = run(&sc);
    assert!(r.cpus[0].sim.conservation.udp_delivered_to_app > 50_000);
    assert_eq!(net_rx_ns(&r, 1), 0);
    assert_eq!(r.cpus[0].cross_cpu.ipis_sent, 0);
    assert_eq!(r.cpus[1].sim.cpu.time.run_ns, 0, "nothing runs on CPU 1");
}

#[test]
fn a_machine_of_two_with_everything_on_cpu_0_gives_cpu_0_the_one_cpu_figures() {
    let one = scenario("scenarios/examples/udp-poisson.toml");
    let p = one.run_params(None, None).unwrap();
    let single = irqlab_sim::run_scenario(&one, p, false, &Default::default(), |_| {}).unwrap().result;
    let mut two = one.clone();
    two.spec_mut().machine.cores = 2;
    let r = run(&two);
    let cpu0 = &r.cpus[0].sim;
    // The same work on the same CPU: times, tasks and packets agree (the
    // IPI line exists but never fires, and the kernel threads are named
    // per CPU).
    assert_eq!(serde_json::to_value(&cpu0.cpu).unwrap(), serde_json::to_value(&single.cpu).unwrap());
    assert_eq!(serde_json::to_value(&cpu0.conservation).unwrap(), serde_json::to_value(&single.conservation).unwrap());
    let run_ns = |r: &irqlab_sim::SimResult| r.tasks.iter().map(|t| (t.time.run_ns, t.jobs)).collect::<Vec<_>>();
    assert_eq!(run_ns(cpu0), run_ns(&single));
    let cpu1 = &r.cpus[1].sim;
    assert_eq!(cpu1.cpu.time.run_ns + cpu1.cpu.time.softirq_ns, 0, "CPU 1 only ticks");
    assert_eq!(cpu1.cpu.time.hardirq_ns, cpu1.cpu.ticks * 1000, "CPU 1's hard IRQ time is its ticks' (0.3 + 0.5 + 0.2 us each)");
}

fn task<'a>(r: &'a MachineResult, cpu: usize, name: &str) -> &'a irqlab_sim::results::TaskResult {
    r.cpus[cpu].sim.tasks.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("no {name} on CPU {cpu}"))
}

#[test]
fn a_napi_thread_on_another_cpu_polls_there_woken_by_a_reschedule_ipi() {
    let sc = scenario("scenarios/kernels/napi-thread-6.12.toml");
    let r = run(&sc);
    let (cpu0, cpu1) = (&r.cpus[0], &r.cpus[1]);
    let delivered = cpu1.sim.conservation.udp_delivered_to_app;
    assert!(delivered > 40_000, "{delivered}");
    // CPU 0 takes the interrupts and nothing else of the network.
    assert_eq!(cpu0.sim.cpu.bottom_half_ns, 0);
    let irqs = cpu0.sim.nics[0].stats.hardirqs;
    assert!(irqs > 10_000);
    let probe = task(&r, 0, "probe");
    assert_eq!(probe.time.stolen_softirq_ns, 0);
    // The thread polls on CPU 1: 1.2 us of NET_RX per datagram, in a task.
    let napi = task(&r, 1, "napi/eth0-0");
    assert_eq!(napi.policy, "other:nice0");
    assert_eq!(napi.bottom_half_work_ns, cpu1.sim.cpu.bottom_half_ns);
    assert_eq!(cpu1.sim.cpu.time.softirq_ns, 0);
    assert!((napi.bottom_half_work_ns as f64 / delivered as f64 - 1200.0).abs() < 50.0, "{} ns for {delivered}", napi.bottom_half_work_ns);
    // One wake-up per interrupt (a poll ends before the next packet at
    // 50 kpps), each a reschedule IPI on CPU 1.
    let resched = cpu1.sim.irq_lines.iter().find(|l| l.name == "resched").unwrap().count;
    assert_eq!(cpu0.cross_cpu.ipis_sent, cpu1.cross_cpu.ipis_received);
    assert_eq!(resched, cpu1.cross_cpu.ipis_received);
    assert!(resched as f64 > 0.9 * irqs as f64, "{resched} IPIs for {irqs} interrupts");
}

#[test]
fn a_napi_thread_beside_a_fifo_busy_loop_gets_only_the_fair_servers_time() {
    // The layout before the survey's move: the SCHED_OTHER NAPI thread on
    // the CPU of a FIFO busy loop, its reader there too.
    let mut sc = scenario("scenarios/kernels/napi-thread-6.12.toml");
    sc.spec_mut().nic.as_mut().unwrap().napi_thread_cpu = Some(0);
    sc.spec_mut().task_mut("server").unwrap().cpu = 0;
    sc.check().unwrap();
    let r = run(&sc);
    let napi = task(&r, 0, "napi/eth0-0");
    let server = task(&r, 0, "server");
    // 0.9 s measured: at most the fair server's 50 ms per second for the
    // NAPI thread and the server together.
    assert!(napi.time.run_ns + server.time.run_ns <= 50_000_000, "napi {} server {}", napi.time.run_ns, server.time.run_ns);
    let nic = &r.cpus[0].sim.nics[0].stats;
    assert!(nic.dropped_ring_full > nic.packets_received, "{nic:?}");
}

/// Two CPUs, an `[[irq]]` source on CPU `irq_cpu`.
fn irq_on(irq_cpu: u64) -> String {
    format!(
        "[machine]\ncores = 2\nkernel = \"linux-6.12\"\nhz = 250\n[machine.costs]\nirq_entry = \"0\"\nirq_exit = \"0\"\ntick = \"0\"\ncontext_switch = \"0\"\n\
         [[irq]]\nname = \"dev\"\ncpu = {irq_cpu}\ninterval = \"100us\"\nhandler = \"10us\"\n\
         [run]\nduration = \"100ms\"\n"
    )
}

#[test]
fn an_irq_source_interrupts_the_cpu_its_cpu_key_names() {
    let text = irq_on(1);
    let sc = irqlab_sim::Scenario::parse("irq.toml", &text).unwrap_or_else(|e| panic!("{e}"));
    let r = run(&sc);
    let count = |cpu: usize| r.cpus[cpu].sim.irq_lines.iter().find(|l| l.name == "dev").map_or(0, |l| l.count);
    assert_eq!(count(0), 0, "CPU 0 has no `dev` interrupts");
    assert!(count(1) >= 990, "CPU 1 took {} of about 1000", count(1));
    // 10 us every 100 us: a tenth of CPU 1 in hard IRQs, none of CPU 0.
    assert_eq!(r.cpus[0].sim.cpu.time.hardirq_ns, 0);
    assert!((r.cpus[1].sim.cpu.time.hardirq_ns as f64 / r.cpus[1].sim.measured_ns as f64 - 0.1).abs() < 0.001);
    // A CPU the machine does not have is bad input at the key.
    let err = irqlab_sim::Scenario::parse("irq.toml", &irq_on(2)).expect_err("cpu = 2 of 2 CPUs is refused");
    assert!(err.to_string().contains("cpu = 2, but the machine has cores = 2"), "{err}");
    assert_eq!(err.location.as_ref().map(|l| l.line), Some(12), "{err}");
}
