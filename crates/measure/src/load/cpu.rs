//! CPU load: one busy loop per online CPU, at normal priority or in
//! SCHED_IDLE.

use irqlab_host::error::Result;
use std::sync::atomic::AtomicBool;

pub fn run(sched_idle: bool, duration_ns: u64, stop: &AtomicBool) -> Result<super::Done> {
    let cpus = irqlab_host::rt::online_cpus()?;
    let deadline = super::deadline(duration_ns);
    let loops: u64 = std::thread::scope(|s| {
        let workers: Vec<_> = cpus
            .iter()
            .map(|&cpu| {
                s.spawn(move || {
                    let _ = irqlab_host::rt::pin_to_cpu(cpu);
                    if sched_idle {
                        let _ = irqlab_host::rt::set_idle();
                    }
                    let mut n = 0u64;
                    let mut x = 1u64;
                    while super::running(deadline, stop) {
                        for _ in 0..10_000 {
                            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                        }
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap_or(0)).sum()
    });
    let class = if sched_idle { "SCHED_IDLE" } else { "SCHED_OTHER" };
    Ok(super::Done::new(loops, "spin loops of 10000 multiplications", format!("{} CPUs, {class}", cpus.len())))
}
