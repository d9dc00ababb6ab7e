//! The survey as simulator scenarios (issue 53): what a profile moves in
//! the model and what it leaves, read from the scenario text it writes.

use irqlab_control::profile::Profile;
use irqlab_survey::scenario::{models, Model, RESTORED};
use irqlab_survey::Survey;

fn survey() -> Survey {
    serde_json::from_str(include_str!("fixtures/survey-with-sources.json")).expect("the fixture is a survey")
}

fn model(survey: &Survey, cpu: usize, load: &str) -> Model {
    let (made, skipped) = models(survey).unwrap();
    assert!(skipped.is_empty(), "{skipped:?}");
    made.into_iter().find(|m| m.cpu == cpu && m.load == load).expect("a model of that CPU and load")
}

fn text(survey: &Survey, m: &Model) -> String {
    m.scenario(survey, "fixture", "linux-6.12", "").toml
}

/// The entry of the scenario whose name starts with `name`, from the
/// comments above it (`# measured:`, `# moved:`) to the next entry's.
fn entry<'a>(text: &'a str, name: &str) -> &'a str {
    let at = text.find(&format!("name = \"{name}")).unwrap_or_else(|| panic!("no entry {name} in\n{text}"));
    let start = text[..at].rfind("\n# measured").unwrap_or(0);
    let end = text[at..].find("\n# measured").map_or(text.len(), |e| at + e);
    &text[start..end]
}

fn profile(text: &str) -> Profile {
    Profile::parse("p.toml", &format!("schema = \"irqlab/profile/v1\"\n{text}")).unwrap()
}

#[test]
fn a_steered_irq_moves_to_the_sets_lowest_cpu_unless_the_set_holds_its_own() {
    let s = survey();
    // CPU 0 under the flood carries IRQ 32; steer it to CPU 1.
    let mut m = model(&s, 0, "net");
    assert!(entry(&text(&s, &m), "32 virtio0").contains("cpu = 0"));
    let notes = m.apply_profile(&profile("[[irq]]\nirq = \"*\"\ncpus = \"1\"\n"));
    let after = text(&s, &m);
    assert!(entry(&after, "32 virtio0").contains("cpu = 1") && entry(&after, "32 virtio0").contains("# moved:"), "{after}");
    assert!(notes.iter().any(|n| n.note.contains("irq 32") && n.note.contains("from CPU 0 to CPU 1")), "{notes:?}");
    // System vectors are not steerable: the tick and the IPIs stay.
    assert!(entry(&after, "LOC timer").contains("cpu = 0") && entry(&after, "RES resched IPI").contains("cpu = 0"), "{after}");
    // A set that holds its CPU leaves it there.
    let mut m = model(&s, 0, "net");
    let notes = m.apply_profile(&profile("[[irq]]\nirq = \"32\"\ncpus = \"0-1\"\n"));
    assert!(notes.is_empty(), "{notes:?}");
    assert!(entry(&text(&s, &m), "32 virtio0").contains("cpu = 0"));
}

#[test]
fn a_matched_thread_takes_the_profiles_cpus_and_policy_and_others_stay() {
    let s = survey();
    let mut m = model(&s, 1, "net");
    let notes = m.apply_profile(&profile("[[threads]]\nmatch = \"comm:kworker/1:*\"\npolicy = \"other:5\"\ncpus = \"0\"\n"));
    let after = text(&s, &m);
    let kworker = entry(&after, "kworker/1:2/27845");
    assert!(kworker.contains("cpu = 0") && kworker.contains("nice = 5") && kworker.contains("# moved:"), "{kworker}");
    assert!(entry(&after, "napi/irqlab-b-1/").contains("cpu = 1"), "{after}");
    assert!(notes.iter().any(|n| n.setting == "threads comm:kworker/1:*"), "{notes:?}");
    // A policy the model has no words for is said and the measured one kept.
    let mut m = model(&s, 1, "net");
    let notes = m.apply_profile(&profile("[[threads]]\nmatch = \"napi:irqlab-b\"\npolicy = \"deadline:1ms/10ms\"\n"));
    assert!(notes.iter().any(|n| n.note.contains("not modelled")), "{notes:?}");
    assert!(entry(&text(&s, &m), "napi/irqlab-b-1/").contains("priority = 50"));
}

#[test]
fn the_other_cpus_carry_their_idle_sources_and_the_tick_its_softirqs() {
    let s = survey();
    let m = model(&s, 1, "net");
    let t = text(&s, &m);
    assert!(t.contains("cores = 2"), "{t}");
    // CPU 0's idle sources, named apart.
    assert!(entry(&t, "cpu0 LOC timer").contains("cpu = 0"), "{t}");
    // The tick's softirqs are its bottom half, not lines of their own.
    assert!(entry(&t, "LOC timer").contains("vector = \"timer\""), "{t}");
    assert!(!t.contains("name = \"softirq TIMER\""), "{t}");
}

/// The fixture with CPU 1's flood curve as a survey with wake-ups writes
/// it: the NAPI thread ran first after all but `rest_gaps` of the
/// reschedule IPIs, and took all but `rest_ns` of their time. (Numbers for
/// the test: the fixture predates the fields.)
fn survey_with_wakeups(rest_gaps: u64, rest_ns: u64, max_ns: u64) -> Survey {
    let mut s = survey();
    let curve = s.cpus.iter_mut().find(|c| c.cpu == 1).unwrap().curves.iter_mut().find(|c| c.load.name() == "net").unwrap();
    let totals = &mut curve.sources.as_mut().unwrap().totals;
    let res = totals.iter().find(|t| t.label == "irq RES resched IPI").unwrap().clone();
    let napi = totals.iter_mut().find(|t| t.label.starts_with("napi/irqlab-b-1/")).unwrap();
    napi.woken_by_resched_ipi = res.gaps - rest_gaps;
    napi.resched_ipi_ns = res.ns + res.unseen_ns - rest_ns;
    napi.resched_ipi_max_ns = max_ns;
    s
}

/// The time an entry's `[[irq]]`s take over `run_ns`: arrivals x handler.
fn irq_time(entry: &str, run_ns: u64) -> f64 {
    let ns = |line: &str| line.split('"').nth(1).and_then(|v| v.strip_suffix("ns")).unwrap().parse::<f64>().unwrap();
    let intervals: Vec<f64> = entry.lines().filter(|l| l.starts_with("interval = ")).map(ns).collect();
    let handlers: Vec<f64> = entry.lines().filter(|l| l.starts_with("handler = ")).map(ns).collect();
    assert_eq!(intervals.len(), handlers.len(), "{entry}");
    intervals.iter().zip(&handlers).map(|(i, h)| (run_ns as f64 / i).round() * h).sum()
}

#[test]
fn a_threads_wake_up_ipis_are_its_own_entry_and_the_res_entry_keeps_the_rest() {
    let s = survey_with_wakeups(100, 50_000, 16_000);
    let curve = &s.cpus.iter().find(|c| c.cpu == 1).unwrap().curves.iter().find(|c| c.load.name() == "net").unwrap();
    let res = curve.sources.as_ref().unwrap().totals.iter().find(|t| t.label == "irq RES resched IPI").unwrap();
    let m = model(&s, 1, "net");
    let t = text(&s, &m);
    let waking = entry(&t, "RES resched IPI waking napi/irqlab-b-1/1431");
    let rest = entry(&t, "RES resched IPI\"");
    assert!(waking.contains("cpu = 1") && waking.contains("a part of `irq RES resched IPI`"), "{waking}");
    assert!(rest.contains("cpu = 1") && rest.contains("here the rest, 50000 ns in 100 gaps"), "{rest}");
    // The RES source's longest burst (16636 ns) was not a wake-up's (at
    // most 16000 ns): it stays apart in the rest.
    assert!(rest.contains("(longest)"), "{rest}");
    // Together they are the RES source's measured time, within the
    // integer division of each entry's cost (under 1 ns an arrival) and
    // of its rate.
    let run_ns = curve.duration_ns;
    let together = irq_time(waking, run_ns) + irq_time(rest, run_ns);
    let measured = (res.ns + res.unseen_ns) as f64;
    assert!((together - measured).abs() < res.gaps as f64 + 2_000.0, "{together} ns written, {measured} measured\n{waking}\n{rest}");
    assert!((irq_time(rest, run_ns) - 50_000.0).abs() < 1_000.0, "{rest}");

    // Where the longest was a wake-up's, the rest is at its mean.
    let s2 = survey_with_wakeups(100, 50_000, 16_636);
    let rest = entry(&text(&s2, &model(&s2, 1, "net")), "RES resched IPI\"").to_string();
    assert!(!rest.contains("(longest)") && rest.contains("its longest was a wake-up's"), "{rest}");

    // Moving the thread moves its wake-ups' IPIs with it; the rest stays.
    let mut m = model(&s, 1, "net");
    let notes = m.apply_profile(&profile("[[threads]]\nmatch = \"napi:irqlab-b\"\npolicy = \"fifo:50\"\ncpus = \"0\"\n"));
    assert!(notes.iter().any(|n| n.note.contains("to CPU 0 with its wake-ups' reschedule IPIs")), "{notes:?}");
    let after = text(&s, &m);
    let waking = entry(&after, "RES resched IPI waking napi/irqlab-b-1/1431");
    assert!(
        waking.contains("cpu = 0") && waking.contains("# moved: with the thread it wakes") && waking.contains("upper bound"),
        "{waking}"
    );
    assert!(entry(&after, "RES resched IPI\"").contains("cpu = 1"), "{after}");
}

#[test]
fn a_survey_without_wake_ups_writes_the_res_entry_whole() {
    let s = survey();
    let t = text(&s, &model(&s, 1, "net"));
    assert!(!t.contains("waking"), "{t}");
    assert!(!entry(&t, "RES resched IPI").contains("here the rest"), "{t}");
}

#[test]
fn a_thread_moved_off_the_probed_cpu_gives_back_the_tick_and_unseen_time_its_runs_hid() {
    let s = survey();
    let curve = |load: &str| s.cpus.iter().find(|c| c.cpu == 1).unwrap().curves.iter().find(|c| c.load.name() == load).unwrap();
    let total = |load: &str, label: &str| {
        let c = curve(load);
        let t = c.sources.as_ref().unwrap().totals.iter().find(|t| t.label == label).unwrap();
        (t.ns + t.unseen_ns) as f64 / c.duration_ns as f64
    };
    let run_ns = curve("net").duration_ns;
    let before = text(&s, &model(&s, 1, "net"));
    let unseen_before = irq_time(entry(&before, "unseen"), run_ns) / run_ns as f64;
    // Under the flood CPU 1's unseen time was 0.04% of the run, idle 1.42%.
    assert!((unseen_before - total("net", "unseen")).abs() < 0.0002, "{unseen_before}");

    // Steering every IRQ to CPU 0 moves nothing off CPU 1 (none of its
    // sources there is a device IRQ): nothing comes back.
    let mut m = model(&s, 1, "net");
    let notes = m.apply_profile(&profile("[[irq]]\nirq = \"*\"\ncpus = \"0\"\n"));
    assert!(!notes.iter().any(|n| n.setting == RESTORED), "{notes:?}");
    assert_eq!(irq_time(entry(&text(&s, &m), "unseen"), run_ns), irq_time(entry(&before, "unseen"), run_ns));

    // Moving the NAPI thread (94.7% of the run; with the RES time and the
    // rest 95.8% of the CPU's busy time other than LOC and unseen) brings
    // them back toward the idle run by that share.
    let mut m = model(&s, 1, "net");
    let notes = m.apply_profile(&profile("[[threads]]\nmatch = \"napi:irqlab-b\"\npolicy = \"fifo:50\"\ncpus = \"0\"\n"));
    let restored: Vec<_> = notes.iter().filter(|n| n.setting == RESTORED).collect();
    assert_eq!(restored.len(), 2, "{notes:?}");
    let after = text(&s, &m);
    let unseen = entry(&after, "unseen");
    assert!(unseen.contains("# moved: unseen on CPU 1") && unseen.contains("cpu = 1"), "{unseen}");
    let unseen_after = irq_time(unseen, run_ns) / run_ns as f64;
    let napi = total("net", "napi/irqlab-b-1/1431 FIFO 50");
    assert!(unseen_after > 0.9 * total("idle", "unseen") && unseen_after < total("idle", "unseen"), "{unseen_after}, napi {napi}");
    let loc = entry(&after, "LOC timer");
    assert!(loc.contains("# moved: irq LOC timer on CPU 1"), "{loc}");

    // The idle model has nothing to give back.
    let mut idle = model(&s, 1, "idle");
    let notes = idle.apply_profile(&profile("[[threads]]\nmatch = \"comm:kworker/1:*\"\npolicy = \"other:5\"\ncpus = \"0\"\n"));
    assert!(!notes.iter().any(|n| n.setting == RESTORED), "{notes:?}");
}
