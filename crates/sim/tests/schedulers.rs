//! Scheduling classes, servers and accounting, each on a small scenario
//! whose outcome follows from the policy's definition.

mod common;

use common::{machine, run, task};

fn share(r: &irqlab_sim::SimResult, name: &str) -> f64 {
    task(r, name).time.run_ns as f64 / r.measured_ns as f64
}

fn hog(name: &str, policy: &str) -> String {
    format!("[[task]]\nname = \"{name}\"\nkind = \"cpu-loop\"\n{policy}\n")
}

const RUN_1S: &str = "[run]\nduration = \"1s\"\n";

#[test]
fn cfs_shares_by_nice_weight_and_sched_idle_gets_almost_nothing() {
    let text = format!(
        "{}{}{}{}{RUN_1S}",
        machine(1000, "linux-2.6", ""),
        hog("n0", "policy = \"other\"\nnice = 0"),
        hog("n5", "policy = \"other\"\nnice = 5"),
        hog("idle", "policy = \"idle\""),
    );
    let r = run(&text);
    // Weights 1024 : 335 : 3 (sched_prio_to_weight, WEIGHT_IDLEPRIO).
    let total = 1024.0 + 335.0 + 3.0;
    assert!((share(&r, "n0") - 1024.0 / total).abs() < 0.02, "{}", share(&r, "n0"));
    assert!((share(&r, "n5") - 335.0 / total).abs() < 0.02, "{}", share(&r, "n5"));
    assert!(share(&r, "idle") < 0.01, "{}", share(&r, "idle"));
}

#[test]
fn linux24_epochs_share_equally_and_rr_rotates() {
    let text = format!("{}{}{}{RUN_1S}", machine(100, "linux-2.4", "scheduler=linux-2.4"), hog("a", ""), hog("b", ""));
    let r = run(&text);
    assert!((share(&r, "a") - 0.5).abs() < 0.05, "{}", share(&r, "a"));
    let text = format!(
        "{}{}{}{RUN_1S}",
        machine(1000, "linux-2.6", "context_switch=1us"),
        hog("a", "policy = \"rr\"\npriority = 10"),
        hog("b", "policy = \"rr\"\npriority = 10"),
    );
    let r = run(&text);
    // 100 ms slices: each gets half, switching about every 100 ms.
    assert!((share(&r, "a") - 0.5).abs() < 0.06, "{}", share(&r, "a"));
    // Ten slices in a second, five for each task.
    assert!((4..=6).contains(&task(&r, "a").context_switches_in), "{}", task(&r, "a").context_switches_in);
}

#[test]
fn sched_deadline_gets_its_bandwidth_and_no_more() {
    let text = format!(
        "{}{}{}{RUN_1S}",
        machine(1000, "linux-2.6", ""),
        hog("dl", "policy = \"deadline\"\nruntime = \"2ms\"\nperiod = \"10ms\""),
        hog("fifo", "policy = \"fifo\"\npriority = 99"),
    );
    let r = run(&text);
    // SCHED_DEADLINE outranks FIFO 99 but is throttled after 2 ms per 10 ms.
    assert!((share(&r, "dl") - 0.2).abs() < 0.005, "{}", share(&r, "dl"));
    assert!((share(&r, "fifo") - 0.8).abs() < 0.005);
}

#[test]
fn servers_limit_their_task_to_the_budget() {
    for (kind, extra) in [("sporadic", "max_repl = 2\ngranularity = \"1us\""), ("polling", ""), ("deferrable", "")] {
        let text = format!(
            "{}{}server = {{ kind = \"{kind}\", budget = \"1ms\", period = \"10ms\" {} }}\n{}{RUN_1S}",
            machine(1000, "linux-2.6", ""),
            hog("served", "policy = \"fifo\"\npriority = 50"),
            if extra.is_empty() { String::new() } else { format!(", {}", extra.replace('\n', ", ")) },
            hog("other", "policy = \"fifo\"\npriority = 10"),
        );
        let r = run(&text);
        let s = share(&r, "served");
        assert!((s - 0.1).abs() < 0.01, "{kind}: served got {s}");
    }
    // A sporadic server with a low priority keeps running there when its
    // budget is gone: above a FIFO 10 hog at low priority 20.
    let text = format!(
        "{}{}server = {{ kind = \"sporadic\", budget = \"1ms\", period = \"10ms\", low_priority = 20 }}\n{}{RUN_1S}",
        machine(1000, "linux-2.6", ""),
        hog("served", "policy = \"fifo\"\npriority = 50"),
        hog("other", "policy = \"fifo\"\npriority = 10"),
    );
    let r = run(&text);
    assert!(share(&r, "served") > 0.99);
}

#[test]
fn tick_accounting_charges_softirq_time_to_the_current_task() {
    let body = |ita: bool| {
        format!(
            "{}{}[nic]\nnapi = true\n[nic.costs]\nirq = \"1us\"\nicmp_echo = \"4us\"\nudp = \"1us\"\n\
             [[traffic]]\nkind = \"poisson\"\ninterval = \"10us\"\n{RUN_1S}",
            machine(1000, "linux-2.6", &format!("irq_entry=1us,irq_exit=1us,irq_time_accounting={ita}")),
            hog("user", ""),
        )
    };
    let r = run(&body(false));
    let t = task(&r, "user");
    // The task is current all the time: every tick is charged to it, as
    // utime when it hit user code and stime when it hit a softirq.
    // (Poisson arrivals: a constant 10 us flood would phase-lock with the
    // 10 ms tick and alias every sample onto the same point.)
    assert_eq!(r.cpu.ticks, 999, "ticks at 1, 2, ... 999 ms of [0, 1 s)");
    assert_eq!(t.charged_utime_ns + t.charged_stime_ns, r.cpu.ticks * 1_000_000);
    // A tick due during a hard IRQ is taken when it ends, i.e. inside the
    // softirq that irq_exit starts: both count as system time.
    let stolen_share = t.time.stolen_ns as f64 / r.measured_ns as f64;
    let stime_share = t.charged_stime_ns as f64 / 1e9;
    assert!(stolen_share > 0.5 && (stime_share - stolen_share).abs() < 0.06, "{stolen_share} vs {stime_share}");
    // With IRQ time accounting those ticks are not the task's.
    let r = run(&body(true));
    assert_eq!(task(&r, "user").charged_stime_ns, 0);
}

#[test]
fn media_player_displays_on_time_without_load() {
    let text = format!(
        "{}[[task]]\nname = \"player\"\nkind = \"media-player\"\nperiod = \"40ms\"\nexec = \"12ms\"\nframes = 20\n{RUN_1S}",
        machine(100, "linux-2.4", "tick=1us,context_switch=2us"),
    );
    let r = run(&text);
    let p = task(&r, "player");
    let x = p.extra.as_ref().unwrap();
    assert_eq!(x["frames_displayed"], 20);
    assert_eq!(x["late_frames"], 0);
    let mean = x["inter_frame_delay"]["mean_ns"].as_u64().unwrap();
    assert!((39_000_000..=41_000_000).contains(&mean), "{mean}");
}
