//! NIC transmit: echo replies and UDP sends go through the tx queue, the
//! wire, the tx-completion IRQ and the NET_TX softirq.

mod common;

use common::{machine, run, task};
use irqlab_sim::SimResult;

/// Round costs chosen for the mechanism, not a calibration.
fn nic(tx: &str) -> String {
    format!("[nic]\nring = 1024\nnapi = true\n[nic.costs]\nirq = \"1us\"\nicmp_echo = \"2us\"\nudp = \"2us\"\n{tx}")
}

fn tx(queue: u32, link: &str) -> String {
    format!("[nic.tx]\nqueue = {queue}\nlink = \"{link}\"\nirq = \"1us\"\ncomplete = \"0.5us\"\n")
}

fn ping(interval: &str, model: &str, tx_section: &str, extra: &str) -> String {
    format!(
        "{}{}{extra}[[traffic]]\nkind = \"ping-flood\"\ninterval = \"{interval}\"\nsize = 64\n[run]\nduration = \"200ms\"\n",
        machine(1000, model, "irq_entry=0.5us"),
        nic(tx_section),
    )
}

fn tx_dev(r: &SimResult) -> &serde_json::Value {
    r.devices.iter().find(|d| d["kind"] == "nic-tx").expect("tx device reported")
}

fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Every echo reply is queued, sent on the wire and freed in NET_TX; the
/// NET_TX time is the per-frame completion cost times the frames freed.
#[test]
fn echo_replies_go_through_the_tx_queue_and_net_tx() {
    let r = run(&ping("20us", "linux-modern", &tx(1000, "1Gbit"), ""));
    assert!(r.conservation.devices_ok, "{}", tx_dev(&r));
    let n = &r.nics[0].stats;
    let d = tx_dev(&r);
    assert!(n.replies_sent > 9_000, "{n:?}");
    assert_eq!(n.replies_sent, u(&d["frames_queued"]));
    assert_eq!(n.replies_dropped_tx_full, 0);
    let done = u(&d["frames_completed"]);
    assert!(done + 3 >= n.replies_sent, "{d}");
    assert_eq!(u(&d["net_tx_softirq_ns"]), done * 500);
    assert_eq!(r.softirq.per_vector_ns["net_tx"], done * 500, "{:?}", r.softirq);
    assert_eq!(u(&d["bytes_sent"]), u(&d["frames_sent"]) * 64);
    // One completion IRQ per sent frame at this rate (each frame's IRQ is
    // handled before the next one is out).
    assert!(u(&d["completion_hardirqs"]) * 10 >= u(&d["frames_sent"]) * 9, "{d}");
}

/// A tx link slower than the offered replies fills the queue; the excess
/// is dropped with its reason, the wire carries what its rate allows.
#[test]
fn tx_queue_limit_drops_replies_when_the_link_is_slow() {
    // 64 + 24 bytes at 10 Mbit/s = 70.4 us per frame; one ping per 10 us.
    let r = run(&ping("10us", "linux-modern", &tx(100, "10Mbit"), ""));
    let d = tx_dev(&r);
    assert!(r.conservation.devices_ok, "{d}");
    let dropped = u(&d["dropped"]["queue_full"]);
    assert!(dropped > 10_000, "{d}");
    assert_eq!(r.nics[0].stats.replies_dropped_tx_full, dropped);
    assert_eq!(u(&d["queue_max"]), 100);
    let sent = u(&d["frames_sent"]);
    let wire_limit = 200_000_000 / 70_400;
    assert!(sent <= wire_limit + 1 && sent + 2 >= wire_limit, "sent {sent}, wire allows {wire_limit}");
    // Without the tx side the same flood has no tx drops and no NET_TX.
    let plain = run(&ping("10us", "linux-modern", "", ""));
    assert!(plain.devices.is_empty());
    assert_eq!(plain.nics[0].stats.replies_sent, plain.nics[0].stats.icmp_handled);
    assert!(!plain.softirq.per_vector_ns.contains_key("net_tx"));
}

/// A UDP server's replies are sends through the same queue.
#[test]
fn udp_server_replies_are_transmitted() {
    let text = format!(
        "{}{}[[task]]\nname = \"srv\"\nkind = \"udp-server\"\nsocket = \"s\"\nrecv_cost = \"2us\"\nuser_cost = \"5us\"\nreply_size = 512\nsend_cost = \"3us\"\n\
         [[traffic]]\nkind = \"constant\"\ninterval = \"100us\"\nsocket = \"s\"\nsize = 512\n[run]\nduration = \"100ms\"\n",
        machine(1000, "linux-modern", ""),
        nic(&tx(1000, "1Gbit")),
    );
    let r = run(&text);
    let d = tx_dev(&r);
    let srv = task(&r, "srv");
    let replies = u(&srv.extra.as_ref().unwrap()["replies"]);
    assert!(replies >= 990, "{replies}");
    assert_eq!(u(&d["frames_queued"]), replies);
    assert_eq!(r.nics[0].stats.replies_sent, 0, "no ICMP in this run");
    // The send syscall is kernel time of the server.
    assert!(srv.system_ns >= replies * 5_000, "{}", srv.system_ns);
}

/// Under the threaded model NET_TX runs in the net-tx thread.
#[test]
fn threaded_net_tx_runs_in_its_thread() {
    let r = run(&ping("20us", "threaded", &tx(1000, "1Gbit"), ""));
    let t = task(&r, "net-tx");
    assert!(t.bottom_half_work_ns > 0);
    // Every freed frame's work ran there (plus at most one job cut by the end).
    let freed = u(&tx_dev(&r)["net_tx_softirq_ns"]);
    assert!(t.bottom_half_work_ns >= freed && t.bottom_half_work_ns <= freed + 500, "{} vs {freed}", t.bottom_half_work_ns);
    assert_eq!(r.cpu.time.softirq_ns, 0, "no softirq context under the threaded model");
}
