//! Every BPF object irqlab ships passes the running kernel's verifier as
//! the command that uses it loads it (the kernel matrix: 6.1 and 6.12
//! rejected the accounting on its combined stack size while 6.18 took
//! it). Doctor's trial loads are the same checks. Live: root.

use irqlab_control::monitor::io::{self, IoWatch, Target};
use irqlab_control::monitor::{napi, thread};
use irqlab_measure::accounting::{self, Options, Session, Storage};

fn live() -> bool {
    if std::env::var("IRQLAB_LIVE_TESTS").as_deref() != Ok("1") {
        eprintln!("skipped: live test (set IRQLAB_LIVE_TESTS=1 and run as root: BPF)");
        return false;
    }
    true
}

#[test]
fn doctors_trial_loads_pass() {
    if !live() {
        return;
    }
    accounting::check_loads().unwrap();
    thread::check_loads().unwrap();
    napi::check_loads().unwrap();
}

#[test]
fn accounting_with_its_reference_sum_starts() {
    if !live() {
        return;
    }
    let mut storage = Storage::default();
    let session = Session::start(&mut storage, Options { reference_softirq_sum: true }).unwrap();
    drop(session);
}

#[test]
fn both_halves_of_the_io_watch_load() {
    if !live() {
        return;
    }
    // The loopback device and a disk number no disk has: loading and
    // attaching do not care whose requests would be counted.
    let mut storage = io::Storage::default();
    drop(IoWatch::start(&mut storage, Target::Net { ifindex: 1 }, 1_000_000, Some(0x0001_0002)).unwrap());
    let mut storage = io::Storage::default();
    drop(IoWatch::start(&mut storage, Target::Disk { major: 4095, minor: 0 }, 1_000_000, None).unwrap());
}

/// The probe's gap-source monitor (`measure interference`) loads, attaches
/// and hands back what it saw on a CPU (issue 43).
#[test]
fn the_gap_source_monitor_starts() {
    if !live() {
        return;
    }
    let monitor = irqlab_measure::probe::sources::Monitor::start(0).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let collected = monitor.finish().unwrap();
    assert_eq!(collected.lost, 0);
}
