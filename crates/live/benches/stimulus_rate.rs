//! The generator at 20,000 stimuli per second over loopback, against a
//! responder in the same process: one iteration sends 20,000 stimuli on
//! each path (ICMP and UDP when root, UDP only otherwise), logs every
//! record (JSON lines), and must lose none. Criterion times the sending:
//! ~1.0 s per iteration means the pattern's rate was sustained.

use criterion::{criterion_group, criterion_main, Criterion};
use irqlab_live::privilege::{has, Capability};
use irqlab_live::stimulus::{generator, responder, GeneratorConfig, PathKind, Pattern, ResponderConfig};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const RATE: u64 = 20_000;

fn bench(c: &mut Criterion) {
    // The responder as `irqlab stimulus respond` runs it: SCHED_FIFO 80
    // when allowed, so the target side does not drop what the generator
    // sends while other work holds the CPU.
    let priority = if has(Capability::SysNice) { 80 } else { 0 };
    let r = responder::bind(&ResponderConfig { bind: SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0), priority, cpu: None })
        .expect("bind the responder");
    let port = r.local_addr().unwrap().port();
    let paths = if has(Capability::NetRaw) { vec![PathKind::Icmp, PathKind::Udp] } else { vec![PathKind::Udp] };
    let stop = AtomicBool::new(false);
    let dir = tempfile::tempdir().unwrap();
    std::thread::scope(|s| {
        s.spawn(|| r.serve(&stop));
        let mut group = c.benchmark_group("stimulus");
        group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(12));
        group.bench_function(format!("20000_stimuli_at_20kHz_{}_paths", paths.len()), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for i in 0..iters {
                    let config = GeneratorConfig {
                        target: Ipv4Addr::LOCALHOST,
                        udp_port: port,
                        paths: paths.clone(),
                        pattern: Pattern::periodic(1_000_000_000 / RATE),
                        count: Some(RATE),
                        duration_ns: None,
                        timeout_ns: 1_000_000_000,
                        preflight: false,
                        sender_priority: priority,
                        log: Some(dir.path().join(format!("records-{i}.jsonl"))),
                    };
                    let log_path = config.log.clone().expect("set above");
                    let report = generator::measure(&config, &AtomicBool::new(false), |_| {}).unwrap();
                    let lines = std::fs::read_to_string(&log_path).unwrap().lines().count() as u64;
                    let answered: u64 = report.paths.iter().map(|p| p.answered).sum();
                    for p in &report.paths {
                        assert_eq!(p.sent, RATE, "{}: sent", p.path.name());
                        assert_eq!(p.lost, 0, "{}: lost replies at {RATE}/s", p.path.name());
                    }
                    assert_eq!(lines, answered, "records missing from the log");
                    eprintln!(
                        "sent {} per path in {:.3} s ({:.0}/s), lost 0, {} records logged, {} sends late by more than one interval",
                        RATE,
                        report.elapsed_ns as f64 / 1e9,
                        RATE as f64 / (report.elapsed_ns as f64 / 1e9),
                        lines,
                        report.late_sends
                    );
                    std::fs::remove_file(&log_path).unwrap();
                    total += Duration::from_nanos(report.elapsed_ns);
                }
                total
            })
        });
        group.finish();
        stop.store(true, Ordering::Relaxed);
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
