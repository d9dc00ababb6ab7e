//! The findings rules on the hand-made fixture (crates/survey/tests/fixtures):
//! every finding carries its number and rule, every recommendation answers
//! a finding, the verdict is the worst finding, and a task set is checked
//! against each loaded curve with the servers tried.

use irqlab_analysis::{Model, PeriodicTask, Task, TaskSet};
use irqlab_survey::doc::{GapSources, Load, Severity, Source, SourceKind, Survey, WindowSources};
use irqlab_survey::findings;

fn fixture() -> Survey {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/survey.json")).unwrap();
    let mut survey: Survey = serde_json::from_str(&text).unwrap();
    survey.findings.clear();
    survey.recommendations.clear();
    survey.schedulability.clear();
    survey
}

fn periodic(name: &str, priority: i64, period_ms: u64, wcet_ms: u64) -> Task {
    let t = PeriodicTask { period_ns: period_ms * 1_000_000, wcet_ns: wcet_ms * 1_000_000, deadline_ns: period_ms * 1_000_000 };
    Task { name: name.into(), priority, model: Model::Periodic(t), origin: Default::default() }
}

#[test]
fn every_finding_shows_its_number_and_rule_and_the_verdict_is_the_worst() {
    let mut survey = fixture();
    findings::derive(&mut survey, None);
    assert!(!survey.findings.is_empty());
    for f in &survey.findings {
        assert!(!f.measured.is_empty() && !f.rule.is_empty(), "{f:?}");
    }
    let worst = survey.findings.iter().map(|f| f.severity).max().unwrap();
    assert_eq!(survey.verdict.severity, worst);
    for r in &survey.recommendations {
        assert!(survey.findings.iter().any(|f| f.id == r.finding), "{} answers no finding", r.id);
    }
    // CPU 1's network load is the fixture's NIC curve (examples/curve-nic.json).
    let driver = survey.findings.iter().find(|f| f.id == "load-cpu1-net").expect("CPU 1's driver load");
    assert_eq!(driver.cpu, Some(1));
    assert!(driver.measured.contains("at 1 ms"), "{}", driver.measured);
    assert!(survey.findings.iter().any(|f| f.id == "quietest-cpu"));
    // CPU 1's net run names what took its worst window: the load's own
    // NAPI thread, which the driver recommendations already answer.
    assert!(driver.title.contains("most of it napi/irqlab-b-8195/8195 FIFO 50"), "{}", driver.title);
    assert!(!survey.recommendations.iter().any(|r| r.title.starts_with("Move napi/")), "{:#?}", survey.recommendations);
}

#[test]
fn a_task_set_is_checked_against_each_loaded_curve() {
    let mut survey = fixture();
    let set = TaskSet { tasks: vec![periodic("control", 0, 10, 5), periodic("logger", 1, 100, 10)] };
    findings::derive(&mut survey, Some(&set));
    // One check per loaded curve: net on CPUs 0 and 1.
    let cpus: Vec<usize> = survey.schedulability.iter().map(|c| c.cpu).collect();
    assert_eq!(cpus, [0, 1]);
    // Only CPU 1's load has a thread irqlab can put under a server.
    assert!(survey.schedulability[0].servers.is_empty());
    assert!(!survey.schedulability[1].servers.is_empty());
    for check in &survey.schedulability {
        let id = format!("taskset-cpu{}-net", check.cpu);
        let f = survey.findings.iter().find(|f| f.id == id).expect("a finding per check");
        assert_eq!(f.severity == Severity::Problem, !check.schedulable_as_measured, "{f:?}");
    }
}

#[test]
fn a_driver_is_recommended_once_bounded_when_light_and_moved_when_heavy() {
    let mut light = fixture();
    findings::derive(&mut light, None);
    let bounds: Vec<_> =
        light.recommendations.iter().filter(|r| r.command.as_deref().is_some_and(|c| c.contains("napi:irqlab-b"))).collect();
    assert_eq!(bounds.len(), 1, "{bounds:#?}");

    let mut heavy = fixture();
    for cpu in &mut heavy.cpus {
        for curve in &mut cpu.curves {
            if let Some(fit) = &mut curve.fit {
                fit.utilization = 0.9;
            }
        }
    }
    findings::derive(&mut heavy, None);
    let moved: Vec<_> = heavy.recommendations.iter().filter(|r| r.title.starts_with("Give napi:irqlab-b")).collect();
    assert_eq!(moved.len(), 1, "{:#?}", heavy.recommendations);
    assert!(!heavy.recommendations.iter().any(|r| r.title.starts_with("Bound")), "{:#?}", heavy.recommendations);
}

/// One source of a worst window: label, kind, pid, policy, ns.
type SourceRow<'a> = (&'a str, SourceKind, Option<u32>, Option<&'a str>, u64);

/// The fixture with CPU 1's idle curve at `load` in every window and its
/// worst 1 ms window made of `sources` (label, kind, pid, policy, ns).
fn with_sources(load: f64, sources: &[SourceRow], virtualised: bool) -> Survey {
    let mut survey = fixture();
    let idle = survey.cpus[1].curves.iter_mut().find(|c| c.load == Load::None).unwrap();
    for p in &mut idle.measured.points {
        p.max_load = load;
    }
    let sources: Vec<Source> = sources
        .iter()
        .map(|&(label, kind, pid, policy, ns)| Source { label: label.into(), kind, pid, policy: policy.map(str::to_string), ns })
        .collect();
    let busy_ns = sources.iter().map(|s| s.ns).sum();
    let window = WindowSources { window_ns: 1_000_000, start_ns: 5_000_000, busy_ns, sources };
    idle.sources = Some(GapSources { available: true, note: "test".into(), segments: 10, lost_segments: 0, windows: vec![window] });
    idle.steal_ns = Some(40_000_000);
    let value = if virtualised { "yes (hypervisor flag); 1.0 s stolen since boot" } else { "no hypervisor flag (bare metal)" };
    survey.machine.settings.insert("virtualised".into(), value.into());
    survey
}

fn finding<'a>(survey: &'a Survey, id: &str) -> &'a irqlab_survey::doc::Finding {
    survey.findings.iter().find(|f| f.id == id).unwrap_or_else(|| panic!("no finding {id}: {:#?}", survey.findings))
}

#[test]
fn a_thread_that_took_the_worst_window_is_named_and_moved_keeping_its_policy() {
    let thread = ("inject/4211 FIFO 95", SourceKind::Thread, Some(4211), Some("fifo:95"), 600_000);
    let mut survey = with_sources(
        0.75,
        &[thread, ("unseen", SourceKind::Unseen, None, None, 88_000), ("NET_RX", SourceKind::Softirq, None, None, 30_000)],
        true,
    );
    findings::derive(&mut survey, None);
    let f = finding(&survey, "load-cpu1-idle");
    assert_eq!(f.severity, Severity::Problem);
    assert!(f.title.ends_with("75% of a 1 ms window, most of it inject/4211 FIFO 95 (84%)"), "{}", f.title);
    assert!(f.measured.contains("what ran in the worst 1ms window: inject/4211 FIFO 95 600us, unseen 88us, NET_RX 30us"), "{}", f.measured);
    let r = survey.recommendations.iter().find(|r| r.finding == f.id).expect("a recommendation for the culprit");
    assert_eq!(r.title, "Move inject/4211 FIFO 95 off CPU 1");
    assert_eq!(r.command.as_deref(), Some("irqlab control threads pid:4211 --policy fifo:95 --cpu 0"));
}

#[test]
fn time_no_tracepoint_saw_on_a_vm_is_the_hosts_with_the_steal_beside_it() {
    let mut survey = with_sources(
        0.6,
        &[("unseen", SourceKind::Unseen, None, None, 500_000), ("irq LOC timer", SourceKind::Irq, None, None, 100_000)],
        true,
    );
    findings::derive(&mut survey, None);
    let f = finding(&survey, "load-cpu1-idle");
    assert!(f.title.contains("most of it unseen by the kernel: the hypervisor or firmware (83%)"), "{}", f.title);
    assert!(f.measured.contains("hypervisor steal on CPU 1 during the run: 40ms"), "{}", f.measured);
    let r = survey.recommendations.iter().find(|r| r.finding == f.id).unwrap();
    assert!(r.title.starts_with("Ask the host for a dedicated physical core"), "{}", r.title);
    assert_eq!(r.command, None);
    // On bare metal the same numbers name firmware, and nothing is asked of a host.
    let mut metal = with_sources(0.6, &[("unseen", SourceKind::Unseen, None, None, 500_000)], false);
    findings::derive(&mut metal, None);
    assert!(finding(&metal, "load-cpu1-idle").title.contains("unseen by the kernel: firmware"));
    assert!(!metal.recommendations.iter().any(|r| r.finding == "load-cpu1-idle"));
}

/// The load's own NAPI thread is answered by the driver rules, also when
/// the kernel cut its comm at 15 characters (seen in a 6.1-rt guest:
/// `napi/irqlab-b-8/263` for napi/irqlab-b-8198).
#[test]
fn the_loads_own_driver_thread_is_not_moved_even_with_its_comm_cut_short() {
    let mut survey = fixture();
    let net = survey.cpus[1].curves.iter_mut().find(|c| c.load == Load::Net).unwrap();
    net.driver_threads = vec!["napi/irqlab-b-8198 (SCHED_FIFO 50, CPU 1)".into()];
    let window = &mut net.sources.as_mut().unwrap().windows;
    for w in window.iter_mut() {
        for s in w.sources.iter_mut().filter(|s| s.label.starts_with("napi/")) {
            s.label = "napi/irqlab-b-8/263 FIFO 50".into();
        }
    }
    findings::derive(&mut survey, None);
    assert!(finding(&survey, "load-cpu1-net").title.contains("napi/irqlab-b-8/263"));
    assert!(!survey.recommendations.iter().any(|r| r.title.starts_with("Move napi/")), "{:#?}", survey.recommendations);
}

#[test]
fn an_irq_is_steered_a_system_vector_and_the_kernels_own_threads_are_not_targeted() {
    let mut survey = with_sources(0.3, &[("irq 11 virtio0", SourceKind::Irq, None, None, 200_000)], false);
    findings::derive(&mut survey, None);
    let f = finding(&survey, "load-cpu1-idle");
    assert_eq!(f.severity, Severity::Warn);
    assert!(f.title.ends_with("most of it irq 11 virtio0 (100%)"), "{}", f.title);
    let r = survey.recommendations.iter().find(|r| r.finding == f.id).unwrap();
    assert_eq!(r.command.as_deref(), Some("irqlab control irq 11 --cpus 0"));
    for (label, kind) in
        [("irq LOC timer", SourceKind::Irq), ("ksoftirqd/1/23 OTHER", SourceKind::Thread), ("rcuc/1/19 FIFO 1", SourceKind::Thread)]
    {
        let mut survey = with_sources(0.3, &[(label, kind, Some(23), Some("other"), 200_000)], false);
        findings::derive(&mut survey, None);
        assert!(finding(&survey, "load-cpu1-idle").title.contains(label));
        assert!(!survey.recommendations.iter().any(|r| r.finding == "load-cpu1-idle"), "{label}: {:#?}", survey.recommendations);
    }
    // Below the warning line nothing is named.
    let mut quiet = with_sources(0.05, &[("irq 11 virtio0", SourceKind::Irq, None, None, 50_000)], false);
    findings::derive(&mut quiet, None);
    assert!(!finding(&quiet, "load-cpu1-idle").title.contains("irq 11"));
}

/// The recommendations irqlab applies become the profile's settings, each
/// with the finding it answers, and the profile reads back as
/// `control apply` reads it.
#[test]
fn the_profile_declares_what_the_recommendations_apply() {
    let thread = ("inject/4211 FIFO 95", SourceKind::Thread, Some(4211), Some("fifo:95"), 600_000);
    let mut survey = with_sources(0.75, &[thread], true);
    findings::derive(&mut survey, None);
    let quietest = survey.recommendations.iter().find(|r| r.finding == "quietest-cpu").expect("the quietest-CPU recommendation");
    assert_eq!(quietest.command.as_deref(), Some("irqlab control irq '*' default --cpus 1"));
    let text = irqlab_survey::profile::text(&survey, std::path::Path::new("/tmp/s"));
    assert!(
        text.starts_with("# irqlab profile") && text.contains("# Apply (held until Ctrl-C): irqlab control apply /tmp/s/profile.toml"),
        "{text}"
    );
    let profile = irqlab_control::profile::Profile::parse("profile.toml", &text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(profile.default_irq.as_ref().map(|d| d.cpus.get_ref().as_str()), Some("1"));
    assert_eq!(profile.irqs.iter().map(|i| (i.irq.get_ref().as_str(), i.cpus.get_ref().as_str())).collect::<Vec<_>>(), vec![("*", "1")]);
    let moved = &profile.threads[0];
    assert_eq!((moved.matched.get_ref().as_str(), moved.policy.get_ref().as_str()), ("pid:4211", "fifo:95"));
    assert_eq!(moved.cpus.as_ref().map(|c| c.get_ref().as_str()), Some("0"));
    assert!(moved.because.as_deref().is_some_and(|b| b.starts_with("load-cpu1-idle: Move inject/4211")), "{:?}", moved.because);
    // Every command a setting made is the setting's.
    for r in survey.recommendations.iter().filter(|r| r.setting.is_some()) {
        assert_eq!(r.command.as_deref(), Some(r.setting.as_ref().unwrap().command().as_str()));
    }
}
