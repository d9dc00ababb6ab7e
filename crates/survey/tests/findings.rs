//! The findings rules on the hand-made fixture (crates/survey/tests/fixtures)
//! and on this VM's survey as issue 55 gives it: every finding carries its
//! number and rule, every recommendation answers findings, the verdict is
//! the worst finding, a task set is checked against each curve (idle too)
//! with the servers tried, and the quiet CPU is the one with the least
//! interference that cannot be moved. The tests read the document's fields
//! (`culprit`, `interference`, `quiet_cpu`, a recommendation's `action`,
//! `setting`, `findings`), not its words, but for the one test whose
//! subject is the words.

use irqlab_analysis::{Model, PeriodicTask, Task, TaskSet};
use irqlab_survey::doc::{
    Action, CpuSurvey, Declared, Finding, FindingSource, GapSources, Load, LoadCurve, QuietBasis, Recommendation, Severity, Source,
    SourceKind, Survey, WindowSources,
};
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
        assert_eq!(r.answers().first().copied(), Some(r.finding.as_str()), "{r:?}");
        for id in r.answers() {
            assert!(survey.findings.iter().any(|f| f.id == id), "{} answers no finding {id}", r.id);
        }
    }
    // CPU 1's network load is the fixture's NIC curve (examples/curve-nic.json).
    let driver = finding(&survey, "load-cpu1-net");
    assert_eq!(driver.cpu, Some(1));
    let net1 = survey.cpus[1].curves.iter().find(|c| c.load == Load::Net).unwrap();
    let figures = driver.interference.as_ref().expect("the numbers judged");
    assert_eq!((figures.load, figures.max_load_1ms), (Load::Net, findings::load_at(net1.judged(), 1_000_000).unwrap()));
    assert!(survey.findings.iter().any(|f| f.id == "quietest-cpu"));
    // CPU 1's net run names what took its worst window: the load's own
    // NAPI thread, which the driver recommendations already answer.
    let culprit = driver.culprit.as_ref().expect("a culprit");
    assert_eq!((culprit.kind, culprit.label.as_str(), culprit.pid), (SourceKind::Thread, "napi/irqlab-b-8195/8195 FIFO 50", Some(8195)));
    assert!(culprit.movable && culprit.share > 0.5, "{culprit:?}");
    assert!(!survey.recommendations.iter().any(|r| r.action == Some(Action::MoveThread)), "{:#?}", survey.recommendations);
}

/// The idle run is interference too: the task set is checked against it
/// as well as against each load (issue 55).
#[test]
fn a_task_set_is_checked_against_each_curve_the_idle_one_included() {
    let mut survey = fixture();
    let set = TaskSet { tasks: vec![periodic("control", 0, 10, 5), periodic("logger", 1, 100, 10)] };
    findings::derive(&mut survey, Some(&set));
    // One check per curve: idle and net on CPUs 0 and 1.
    let checks: Vec<(usize, Load)> = survey.schedulability.iter().map(|c| (c.cpu, c.load)).collect();
    assert_eq!(checks, [(0, Load::None), (0, Load::Net), (1, Load::None), (1, Load::Net)]);
    // Only CPU 1's load has a thread irqlab can put under a server.
    for check in &survey.schedulability {
        assert_eq!(!check.servers.is_empty(), (check.cpu, check.load) == (1, Load::Net), "{check:?}");
        let id = format!("taskset-cpu{}-{}", check.cpu, check.load.name());
        let f = finding(&survey, &id);
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
    assert_eq!(bounds[0].action, Some(Action::BoundDriver));

    let mut heavy = fixture();
    for cpu in &mut heavy.cpus {
        for curve in &mut cpu.curves {
            if let Some(fit) = &mut curve.fit {
                fit.utilization = 0.9;
            }
        }
    }
    findings::derive(&mut heavy, None);
    let moved: Vec<_> = heavy.recommendations.iter().filter(|r| r.action == Some(Action::MoveDriver)).collect();
    assert_eq!(moved.len(), 1, "{:#?}", heavy.recommendations);
    // Away from the quiet CPU (CPU 0 here).
    let setting =
        Declared::Threads { matched: "napi:irqlab-b".into(), policy: "fifo:50".into(), cpus: Some("1".into()), kernel_thread: false };
    assert_eq!(moved[0].setting.as_ref(), Some(&setting));
    assert!(!heavy.recommendations.iter().any(|r| r.action == Some(Action::BoundDriver)), "{:#?}", heavy.recommendations);
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
    idle.sources = Some(GapSources {
        available: true,
        note: "test".into(),
        segments: 10,
        lost_segments: 0,
        windows: vec![window],
        totals: Vec::new(),
    });
    idle.steal_ns = Some(40_000_000);
    let value = if virtualised { "yes (hypervisor flag); 1.0 s stolen since boot" } else { "no hypervisor flag (bare metal)" };
    survey.machine.settings.insert("virtualised".into(), value.into());
    survey
}

fn finding<'a>(survey: &'a Survey, id: &str) -> &'a Finding {
    survey.findings.iter().find(|f| f.id == id).unwrap_or_else(|| panic!("no finding {id}: {:#?}", survey.findings))
}

/// The recommendations that answer `finding`.
fn answering<'a>(survey: &'a Survey, finding: &str) -> Vec<&'a Recommendation> {
    survey.recommendations.iter().filter(|r| r.answers().contains(&finding)).collect()
}

fn culprit(f: &Finding) -> &FindingSource {
    f.culprit.as_ref().unwrap_or_else(|| panic!("no culprit: {f:#?}"))
}

/// A thread is moved keeping its policy: off the quiet CPU when it took
/// the quiet CPU's window, else kept off the quiet CPU (with two CPUs, on
/// the one it was found on): never sent to the quiet CPU (issue 55).
#[test]
fn a_thread_that_took_the_worst_window_is_named_and_moved_keeping_its_policy() {
    let thread = ("inject/4211 FIFO 95", SourceKind::Thread, Some(4211), Some("fifo:95"), 600_000);
    let sources = [thread, ("unseen", SourceKind::Unseen, None, None, 88_000), ("NET_RX", SourceKind::Softirq, None, None, 30_000)];
    let mut survey = with_sources(0.75, &sources, true);
    findings::derive(&mut survey, None);
    let f = finding(&survey, "load-cpu1-idle");
    assert_eq!(f.severity, Severity::Problem);
    assert_eq!(f.interference.as_ref().map(|i| i.max_load_1ms), Some(0.75));
    let c = culprit(f);
    assert_eq!((c.kind, c.pid, c.policy.as_deref(), c.ns), (SourceKind::Thread, Some(4211), Some("fifo:95"), 600_000));
    assert!((c.share - 600.0 / 718.0).abs() < 1e-9 && c.busy_ns == 718_000 && c.window_ns == 1_000_000 && c.movable, "{c:?}");
    // CPU 0 is the quiet CPU (this fixture's CPU 0 has no gap sources: the
    // whole load decides), so the thread stays on CPU 1, off CPU 0.
    assert_eq!(finding(&survey, "quietest-cpu").cpu, Some(0));
    let r = answering(&survey, "load-cpu1-idle");
    assert_eq!(r.len(), 1, "{r:#?}");
    assert_eq!((r[0].action, r[0].cpu), (Some(Action::MoveThread), Some(1)));
    let kept = Declared::Threads { matched: "pid:4211".into(), policy: "fifo:95".into(), cpus: Some("1".into()), kernel_thread: false };
    assert_eq!(r[0].setting.as_ref(), Some(&kept));
    assert_eq!(r[0].command.as_deref(), Some("irqlab control threads pid:4211 --policy fifo:95 --cpu 1"));

    // CPU 0 busier: CPU 1 is the quiet CPU, and the thread leaves it for CPU 0.
    let mut survey = with_sources(0.75, &sources, true);
    for p in &mut survey.cpus[0].curves[0].measured.points {
        p.max_load = 0.9;
    }
    findings::derive(&mut survey, None);
    assert_eq!(finding(&survey, "quietest-cpu").cpu, Some(1));
    let r = answering(&survey, "load-cpu1-idle");
    let moved = Declared::Threads { matched: "pid:4211".into(), policy: "fifo:95".into(), cpus: Some("0".into()), kernel_thread: false };
    assert_eq!(r[0].setting.as_ref(), Some(&moved), "{r:#?}");
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
    let c = culprit(f);
    assert_eq!((c.kind, c.movable), (SourceKind::Unseen, false));
    assert!((c.share - 500.0 / 600.0).abs() < 1e-9, "{c:?}");
    assert_eq!(f.interference.as_ref().and_then(|i| i.steal_ns), Some(40_000_000));
    let r = answering(&survey, &f.id);
    assert_eq!(r.len(), 1, "{r:#?}");
    assert_eq!((r[0].action, r[0].cpu, r[0].command.as_deref()), (Some(Action::DedicatedCore), Some(1), None));
    // On bare metal the same numbers name firmware, and nothing is asked of a host.
    let mut metal = with_sources(0.6, &[("unseen", SourceKind::Unseen, None, None, 500_000)], false);
    findings::derive(&mut metal, None);
    assert_eq!(culprit(finding(&metal, "load-cpu1-idle")).kind, SourceKind::Unseen);
    assert!(answering(&metal, "load-cpu1-idle").is_empty(), "{:#?}", metal.recommendations);
}

/// The words of an interference finding's title, which is what this test
/// is about (the other tests read the `culprit` field): "most of it" from
/// half the window's gap time on, "the largest part" below (a vCPU stall
/// beside the source can take the rest: issue 55), and time no tracepoint
/// saw named as the hypervisor's on a VM, as firmware's on bare metal.
#[test]
fn the_title_says_most_of_it_from_half_the_gap_time_and_whose_unseen_time_it_is() {
    let thread = ("inject/4211 FIFO 95", SourceKind::Thread, Some(4211), Some("fifo:95"), 600_000);
    let mut most = with_sources(0.75, &[thread, ("unseen", SourceKind::Unseen, None, None, 88_000)], true);
    findings::derive(&mut most, None);
    let title = &finding(&most, "load-cpu1-idle").title;
    assert!(title.ends_with("75% of a 1 ms window, most of it inject/4211 FIFO 95 (87%)"), "{title}");
    let mut part = with_sources(
        0.75,
        &[
            (thread.0, thread.1, thread.2, thread.3, 400_000),
            ("unseen", SourceKind::Unseen, None, None, 350_000),
            ("NET_RX", SourceKind::Softirq, None, None, 100_000),
        ],
        true,
    );
    findings::derive(&mut part, None);
    let title = &finding(&part, "load-cpu1-idle").title;
    assert!(title.ends_with("the largest part inject/4211 FIFO 95 (47%)"), "{title}");
    let measured = &finding(&part, "load-cpu1-idle").measured;
    assert!(measured.contains("what ran in the worst 1ms window: inject/4211 FIFO 95 400us, unseen 350us, NET_RX 100us"), "{measured}");
    let unseen = [("unseen", SourceKind::Unseen, None, None, 500_000)];
    let mut vm = with_sources(0.6, &unseen, true);
    findings::derive(&mut vm, None);
    let f = finding(&vm, "load-cpu1-idle");
    assert!(f.title.contains("most of it unseen by the kernel: the hypervisor or firmware (100%)"), "{}", f.title);
    assert!(f.measured.contains("hypervisor steal on CPU 1 during the run: 40ms"), "{}", f.measured);
    let mut metal = with_sources(0.6, &unseen, false);
    findings::derive(&mut metal, None);
    let title = &finding(&metal, "load-cpu1-idle").title;
    assert!(title.contains("unseen by the kernel: firmware"), "{title}");
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
    assert_eq!(culprit(finding(&survey, "load-cpu1-net")).label, "napi/irqlab-b-8/263 FIFO 50");
    assert!(!survey.recommendations.iter().any(|r| r.action == Some(Action::MoveThread)), "{:#?}", survey.recommendations);
}

#[test]
fn an_irq_is_steered_a_system_vector_and_the_kernels_own_threads_are_not_targeted() {
    let mut survey = with_sources(0.3, &[("irq 11 virtio0", SourceKind::Irq, None, None, 200_000)], false);
    findings::derive(&mut survey, None);
    let f = finding(&survey, "load-cpu1-idle");
    assert_eq!(f.severity, Severity::Warn);
    let c = culprit(f);
    assert_eq!((c.kind, c.label.as_str(), c.share, c.movable), (SourceKind::Irq, "irq 11 virtio0", 1.0, true));
    let r = answering(&survey, &f.id);
    assert_eq!(r.len(), 1, "{r:#?}");
    assert_eq!(r[0].action, Some(Action::SteerIrq));
    // Kept off the quiet CPU 0: on CPU 1, the only other.
    assert_eq!(r[0].setting.as_ref(), Some(&Declared::Irq { irqs: vec!["11".into()], cpus: "1".into() }));
    for (label, kind) in
        [("irq LOC timer", SourceKind::Irq), ("ksoftirqd/1/23 OTHER", SourceKind::Thread), ("rcuc/1/19 FIFO 1", SourceKind::Thread)]
    {
        let mut survey = with_sources(0.3, &[(label, kind, Some(23), Some("other"), 200_000)], false);
        findings::derive(&mut survey, None);
        let c = culprit(finding(&survey, "load-cpu1-idle"));
        assert_eq!((c.label.as_str(), c.movable), (label, false));
        assert!(answering(&survey, "load-cpu1-idle").is_empty(), "{label}: {:#?}", survey.recommendations);
    }
    // Below the warning line nothing is named.
    let mut quiet = with_sources(0.05, &[("irq 11 virtio0", SourceKind::Irq, None, None, 50_000)], false);
    findings::derive(&mut quiet, None);
    assert_eq!(finding(&quiet, "load-cpu1-idle").culprit, None);
}

/// The recommendations irqlab applies become the profile's settings, each
/// with the finding it answers, and the profile reads back as
/// `control apply` reads it.
#[test]
fn the_profile_declares_what_the_recommendations_apply() {
    let thread = ("inject/4211 FIFO 95", SourceKind::Thread, Some(4211), Some("fifo:95"), 600_000);
    let mut survey = with_sources(0.75, &[thread], true);
    findings::derive(&mut survey, None);
    let quietest = answering(&survey, "quietest-cpu");
    assert_eq!((quietest[0].action, quietest[0].cpu), (Some(Action::QuietCpu), Some(0)));
    assert_eq!(quietest[0].command.as_deref(), Some("irqlab control irq '*' default --cpu 1"));
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
    assert_eq!(moved.cpus.as_ref().map(|c| c.get_ref().as_str()), Some("1"));
    assert!(moved.because.as_deref().is_some_and(|b| b.starts_with("load-cpu1-idle: ")), "{:?}", moved.because);
    // Every command a setting made is the setting's.
    for r in survey.recommendations.iter().filter(|r| r.setting.is_some()) {
        assert_eq!(r.command.as_deref(), Some(r.setting.as_ref().unwrap().command().as_str()));
    }
}

/// Issue 51: a thread whose name was unique when surveyed is written as
/// `comm:NAME`, which a later boot's `control apply` finds again; a name
/// shared with another thread, or a thread gone by the end, stays `pid:N`.
/// The names come from the machine's threads after the measurements.
#[test]
fn a_uniquely_named_thread_is_selected_by_its_name() {
    use irqlab_host::journal::threads::Thread;
    let thread = ("rt-hog/4211 FIFO 95", SourceKind::Thread, Some(4211), Some("fifo:95"), 600_000);
    let profile_of = |now: &[Thread], kernel: bool| {
        let mut survey = with_sources(0.75, &[thread], true);
        survey.thread_names = irqlab_survey::run::thread_names(&survey, now, |_| kernel);
        findings::derive(&mut survey, None);
        let text = irqlab_survey::profile::text(&survey, std::path::Path::new("/tmp/s"));
        let profile = irqlab_control::profile::Profile::parse("profile.toml", &text).unwrap_or_else(|e| panic!("{e}: {text}"));
        (profile, survey.thread_names)
    };
    let matched = |now: &[Thread]| {
        let (profile, names) = profile_of(now, false);
        assert!(!profile.threads[0].all_matching, "not a kernel thread");
        (profile.threads[0].matched.get_ref().clone(), names)
    };
    let t = |tid, comm: &str| Thread { tid, comm: comm.into(), start_ticks: 1 };
    let (unique, names) = matched(&[t(1, "init"), t(4211, "rt-hog"), t(4212, "rt-hog-2")]);
    assert_eq!(unique, "comm:rt-hog");
    assert_eq!((names[0].pid, names[0].comm.as_str(), names[0].unique), (4211, "rt-hog", true));
    // A kernel thread (kdamond.0, moved by a survey on this VM) is named on
    // purpose: `control apply` takes a `comm:` kernel thread only with
    // all_matching.
    let (kthread, names) = profile_of(&[t(4211, "kdamond.0")], true);
    assert!(names[0].kernel);
    assert_eq!(kthread.threads[0].matched.get_ref(), "comm:kdamond.0");
    assert!(kthread.threads[0].all_matching);
    // A glob's own characters are escaped: the name matches only itself.
    assert_eq!(matched(&[t(4211, "w[0]*")]).0, "comm:w[[]0[]][*]");
    assert_eq!(matched(&[t(4211, "rt-hog"), t(4300, "rt-hog")]).0, "pid:4211");
    assert_eq!(matched(&[t(1, "init")]).0, "pid:4211");
}

/// A source row of a window: label, kind, pid, policy, ns.
type Row<'a> = (&'a str, SourceKind, Option<u32>, Option<&'a str>, u64);

const NAPI: &str = "napi/irqlab-b-8195/8195 FIFO 50";
const KWORKER: &str = "kworker/1:1/57 OTHER";

/// One run of this VM's survey (issue 55) made from the composition of its
/// max-load windows at 1, 10 and 100 ms: each window's max load is its
/// sources' sum.
fn run_of(load: Load, windows: [&[Row]; 3], driver_u: Option<f64>) -> LoadCurve {
    let mut points = Vec::new();
    let mut composed = Vec::new();
    for (window_ns, rows) in [1_000_000u64, 10_000_000, 100_000_000].into_iter().zip(windows) {
        let mut sources: Vec<Source> = rows
            .iter()
            .map(|&(label, kind, pid, policy, ns)| Source { label: label.into(), kind, pid, policy: policy.map(str::to_string), ns })
            .collect();
        sources.sort_by_key(|s| std::cmp::Reverse(s.ns));
        let busy_ns: u64 = sources.iter().map(|s| s.ns).sum();
        points.push(irqlab_analysis::CurvePoint { window_ns, max_load: busy_ns as f64 / window_ns as f64 });
        composed.push(WindowSources { window_ns, start_ns: 3_000_000, busy_ns, sources });
    }
    let driven = load == Load::Net;
    LoadCurve {
        load,
        complete: true,
        duration_ns: 2_000_000_000,
        measured: irqlab_analysis::Curve::new(points),
        attributed: None,
        baseline_use: None,
        fit: driver_u.map(|u| irqlab_analysis::HyperbolaFit { utilization: u, period_ns: 1_000_000 }),
        fit_error: None,
        max_gap_ns: 900_000,
        rt_throttled: false,
        driver_threads: if driven { vec!["napi/irqlab-b-8195 FIFO 50 on cpu 1".into()] } else { vec![] },
        driver_match: driven.then(|| "napi:irqlab-b".to_string()),
        sources: Some(GapSources {
            available: true,
            note: "test".into(),
            segments: 100,
            lost_segments: 0,
            windows: composed,
            totals: Vec::new(),
        }),
        steal_ns: Some(30_000_000),
        interrupts: None,
    }
}

/// This VM's survey (issue 55), idle and under the net load, from the
/// issue's numbers: CPU 0 is the hypervisor's, idle and loaded (unseen
/// time fills its worst 1 ms windows; 89% of 10 ms idle); CPU 1 is quiet
/// idle (9% at 1 ms, 2% at 10 ms) and its 100% under the flood is the NAPI
/// thread's and a kworker's. With `loaded` false, only the idle runs
/// (`--load none`).
fn this_vm(loaded: bool) -> Survey {
    let mut survey = fixture();
    let unseen = |ns| ("unseen", SourceKind::Unseen, None, None, ns);
    let timer = |ns| ("irq LOC timer", SourceKind::Irq, None, None, ns);
    let napi = |ns| (NAPI, SourceKind::Thread, Some(8195), Some("fifo:50"), ns);
    let kworker = |ns| (KWORKER, SourceKind::Thread, Some(57), Some("other"), ns);
    let cpu0_idle = run_of(
        Load::None,
        [&[unseen(990_000), timer(10_000)], &[unseen(8_900_000), timer(40_000)], &[unseen(12_000_000), timer(400_000)]],
        None,
    );
    let cpu0_net = run_of(
        Load::Net,
        [
            &[unseen(800_000), napi(200_000)],
            &[unseen(5_500_000), napi(3_500_000), timer(50_000)],
            &[napi(30_000_000), unseen(12_000_000), timer(400_000)],
        ],
        Some(0.4),
    );
    let cpu1_idle = run_of(
        Load::None,
        [
            &[timer(40_000), unseen(30_000), kworker(20_000)],
            &[timer(100_000), unseen(60_000), kworker(40_000)],
            &[timer(500_000), unseen(200_000), kworker(100_000)],
        ],
        None,
    );
    let cpu1_net = run_of(
        Load::Net,
        [
            &[napi(750_000), kworker(200_000), unseen(50_000)],
            &[napi(7_000_000), kworker(1_500_000), unseen(200_000), timer(50_000)],
            &[napi(55_000_000), kworker(10_000_000), unseen(2_000_000), timer(500_000)],
        ],
        Some(0.9),
    );
    let (idle, net) = ([cpu0_idle, cpu1_idle], [cpu0_net, cpu1_net]);
    survey.cpus = idle
        .into_iter()
        .zip(net)
        .enumerate()
        .map(|(cpu, (idle, net))| CpuSurvey { cpu, curves: if loaded { vec![idle, net] } else { vec![idle] } })
        .collect();
    survey.options.loads = if loaded { vec![Load::Net] } else { vec![] };
    survey.schedulability.clear();
    survey.machine.settings.insert("virtualised".into(), "yes (hypervisor flag); 40.0 s stolen since boot".into());
    survey
}

/// The CPUs a setting sends work to.
fn destination(setting: &Declared) -> Vec<usize> {
    let list = match setting {
        Declared::Irq { cpus, .. } => cpus.as_str(),
        Declared::Threads { cpus: Some(cpus), .. } => cpus.as_str(),
        _ => "",
    };
    list.split(',').filter(|c| !c.is_empty()).map(|c| c.parse().unwrap()).collect()
}

/// Issue 55: CPU 0 and CPU 1 both measured 100% of a 1 ms window, but CPU
/// 0's is the hypervisor's, which nothing here can move, and CPU 1's the
/// driver's, which the page moves: CPU 1 is the quiet CPU, nothing is sent
/// to it, and the host is asked for a core for CPU 0 once, for both runs.
#[test]
fn this_vms_quiet_cpu_is_the_one_whose_load_can_be_moved() {
    let mut survey = this_vm(true);
    findings::derive(&mut survey, None);
    let quiet = finding(&survey, "quietest-cpu");
    assert_eq!(quiet.cpu, Some(1), "{quiet:#?}");
    let scores = quiet.quiet_cpu.as_ref().expect("the scores");
    assert_eq!(scores.basis, QuietBasis::Unmovable);
    let cpus: Vec<(usize, f64)> = scores.cpus.iter().map(|s| (s.cpu, s.at_1ms)).collect();
    // CPU 1: the kworker and the unseen time of the flood's window (25%);
    // CPU 0: all of its idle window.
    assert_eq!(cpus, [(1, 0.25), (0, 1.0)]);
    // The time-critical task goes to CPU 1, interrupts to CPU 0.
    let task = answering(&survey, "quietest-cpu");
    assert_eq!((task[0].action, task[0].cpu), (Some(Action::QuietCpu), Some(1)));
    assert_eq!(task[0].setting.as_ref(), Some(&Declared::Irq { irqs: vec!["*".into(), "default".into()], cpus: "0".into() }));
    // Nothing movable is sent to CPU 1: the driver needs 90% of a CPU and
    // gets CPU 0.
    for r in &survey.recommendations {
        assert!(r.setting.as_ref().is_none_or(|s| !destination(s).contains(&1)), "sends work to the quiet CPU: {r:#?}");
    }
    let driver: Vec<_> = survey.recommendations.iter().filter(|r| r.action == Some(Action::MoveDriver)).collect();
    assert_eq!(driver.len(), 1, "{:#?}", survey.recommendations);
    assert_eq!(driver[0].setting.as_ref().map(destination), Some(vec![0]));
    // One recommendation per change: the dedicated core for CPU 0 once,
    // answering the idle and the loaded run.
    let core: Vec<_> = survey.recommendations.iter().filter(|r| r.action == Some(Action::DedicatedCore)).collect();
    assert_eq!(core.len(), 1, "{core:#?}");
    assert_eq!((core[0].cpu, core[0].answers()), (Some(0), vec!["load-cpu0-idle", "load-cpu0-net"]));
    let mut seen = std::collections::HashSet::new();
    for r in &survey.recommendations {
        assert!(seen.insert((r.title.clone(), r.command.clone())), "listed twice: {r:#?}");
    }
    // The page shows it once, for both findings.
    let page = irqlab_survey::page::render(&survey, &[]).unwrap();
    assert_eq!(page.matches(&format!("<h3>{}</h3>", core[0].title)).count(), 1);
    let both = [finding(&survey, "load-cpu0-idle").title.as_str(), finding(&survey, "load-cpu0-net").title.as_str()].join("; ");
    assert!(page.contains(&format!("<p>For: {both}.</p>")), "the page names both findings it answers");
}

/// Both CPUs unseen-filled at 1 ms: the longer windows decide.
#[test]
fn a_tie_at_1_ms_is_broken_on_the_10_ms_windows() {
    let mut survey = this_vm(true);
    // CPU 1's idle run stalled for a whole 1 ms window too, and for 30% of 10 ms.
    let stall = |ns| Source { label: "unseen".into(), kind: SourceKind::Unseen, pid: None, policy: None, ns };
    let idle1 = &mut survey.cpus[1].curves[0];
    let windows = &mut idle1.sources.as_mut().unwrap().windows;
    for (w, ns) in windows.iter_mut().zip([1_000_000, 3_000_000, 3_000_000]) {
        w.sources = vec![stall(ns)];
        w.busy_ns = ns;
    }
    for (p, w) in idle1.measured.points.iter_mut().zip(windows.iter()) {
        p.max_load = w.busy_ns as f64 / w.window_ns as f64;
    }
    findings::derive(&mut survey, None);
    let quiet = finding(&survey, "quietest-cpu");
    let scores = &quiet.quiet_cpu.as_ref().unwrap().cpus;
    assert_eq!((scores[0].at_1ms, scores[1].at_1ms), (1.0, 1.0), "{scores:?}");
    // 10 ms: CPU 1 30%, CPU 0 89% (its idle stall).
    assert_eq!(quiet.cpu, Some(1), "{quiet:#?}");
    assert!(scores[0].at_10ms.unwrap() < scores[1].at_10ms.unwrap(), "{scores:?}");
}

/// `survey --load none --taskset FILE` (issue 55): the idle curves are
/// interference too, and the task set gets an answer for each CPU; where
/// it misses, another CPU where it fits idle is named.
#[test]
fn a_task_set_with_only_the_idle_runs_has_an_answer() {
    let mut survey = this_vm(false);
    // examples/section5-foreground.toml's periodic tasks.
    let set = TaskSet { tasks: vec![periodic("tau1", 2, 10, 2), periodic("tau2", 3, 10, 5)] };
    findings::derive(&mut survey, Some(&set));
    let checks: Vec<(usize, Load, bool)> = survey.schedulability.iter().map(|c| (c.cpu, c.load, c.schedulable_as_measured)).collect();
    // CPU 0's idle interference fills a 1 ms window (and 89% of 10 ms): tau2 misses there.
    assert_eq!(checks, [(0, Load::None, false), (1, Load::None, true)]);
    assert_eq!(finding(&survey, "taskset-cpu0-idle").severity, Severity::Problem);
    assert_eq!(finding(&survey, "taskset-cpu1-idle").severity, Severity::Ok);
    let r = answering(&survey, "taskset-cpu0-idle");
    assert_eq!(r.len(), 1, "{r:#?}");
    assert_eq!((r[0].action, r[0].cpu), (Some(Action::MoveTaskset), Some(1)));
}

/// This VM's idle survey with the local timer's rate on each CPU during
/// the probe's spin, as `/proc/interrupts` counted it.
fn ticking(rates: [f64; 2]) -> Survey {
    let mut survey = this_vm(false);
    for (cpu, rate) in survey.cpus.iter_mut().zip(rates) {
        cpu.curves[0].interrupts = Some(irqlab_survey::doc::InterruptRates {
            local_timer_per_s: rate,
            other_per_s: 4.0,
            other_by_row: Default::default(),
            window_ns: 2_000_000_000,
        });
    }
    survey
}

fn boot_options(survey: &Survey) -> Vec<(&str, &Recommendation)> {
    let options = survey.recommendations.iter().filter_map(|r| match &r.setting {
        Some(Declared::Boot { option }) => Some((option.as_str(), r)),
        _ => None,
    });
    options.collect()
}

/// Issue 51: the tick measured on a CPU running one task is answered by
/// `nohz_full=` for that CPU, never for CPU 0 (the housekeeping CPU), and
/// the profile carries it as `[boot] cmdline` with its reason; a rate of a
/// tickless CPU recommends nothing.
#[test]
fn a_tick_measured_under_one_task_recommends_nohz_full_off_the_housekeeping_cpu() {
    let mut survey = ticking([233.0, 223.0]);
    findings::derive(&mut survey, None);
    let options = boot_options(&survey);
    assert_eq!(options.iter().map(|(o, _)| *o).collect::<Vec<_>>(), ["nohz_full=1"], "{:#?}", survey.recommendations);
    let (_, rec) = options[0];
    assert_eq!((rec.action, rec.cpu, rec.answers()), (Some(Action::BootIsolation), Some(1), vec!["tick-cpu1"]));
    assert_eq!(rec.command.as_deref(), Some("nohz_full=1"));
    let tick = finding(&survey, "tick-cpu1");
    assert_eq!(tick.cpu, Some(1));
    assert!(survey.findings.iter().all(|f| f.id != "tick-cpu0"));

    let text = irqlab_survey::profile::text(&survey, std::path::Path::new("/tmp/s"));
    let profile = irqlab_control::profile::Profile::parse("profile.toml", &text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let boot = profile.boot.as_ref().expect("a [boot] section");
    assert_eq!(boot.cmdline.get_ref(), "nohz_full=1");
    assert!(boot.because.get("nohz_full").is_some_and(|b| b.starts_with("tick-cpu1: ")), "{:?}", boot.because);
    // What control apply checks: options it knows, one CPU left.
    let checked = irqlab_control::boot::check(boot.cmdline.get_ref(), &[0, 1]).unwrap();
    assert_eq!(checked[0].cpus, [1]);

    let mut tickless = ticking([233.0, 1.0]);
    findings::derive(&mut tickless, None);
    assert!(boot_options(&tickless).is_empty(), "{:#?}", tickless.recommendations);
}

/// A CPU already booted nohz_full whose tick still fired gets a finding
/// that says so, not the same option again; RCU callbacks seen in a
/// window (the RCU softirq, or rcuc/N on PREEMPT_RT) recommend rcu_nocbs.
#[test]
fn a_nohz_full_cpu_still_ticking_is_named_and_rcu_work_recommends_rcu_nocbs() {
    let mut survey = ticking([233.0, 139.0]);
    survey.machine.settings.insert("isolated CPUs".into(), "isolated none, nohz_full 1".into());
    let rcuc =
        Source { label: "rcuc/1/19 FIFO 1".into(), kind: SourceKind::Thread, pid: Some(19), policy: Some("fifo:1".into()), ns: 12_000 };
    survey.cpus[1].curves[0].sources.as_mut().unwrap().windows[1].sources.push(rcuc);
    findings::derive(&mut survey, None);
    assert_eq!(finding(&survey, "tick-kept-cpu1").cpu, Some(1));
    assert!(answering(&survey, "tick-kept-cpu1").is_empty());
    let options: Vec<&str> = boot_options(&survey).iter().map(|(o, _)| *o).collect();
    assert_eq!(options, ["rcu_nocbs=1"], "{:#?}", survey.recommendations);
    assert_eq!(answering(&survey, "rcu-cpu1").len(), 1);

    survey.machine.settings.insert("isolated CPUs".into(), "isolated none, nohz_full 1, rcu_nocbs 1".into());
    findings::derive(&mut survey, None);
    assert!(boot_options(&survey).is_empty(), "{:#?}", survey.recommendations);
}

/// On PREEMPT_RT a nohz_full CPU keeps its tick under a real-time task
/// because ktimers/N (FIFO 1) starves (docs/lab.md): the tick-kept finding
/// gets the recommendation to run ktimers/N above the task, as a thread
/// setting of the profile; without PREEMPT_RT it gets none.
#[test]
fn on_preempt_rt_a_kept_tick_recommends_ktimers_above_the_task() {
    let mut survey = ticking([233.0, 250.0]);
    survey.machine.settings.insert("isolated CPUs".into(), "isolated 1, nohz_full 1, rcu_nocbs 1".into());
    findings::derive(&mut survey, None);
    assert!(answering(&survey, "tick-kept-cpu1").is_empty(), "not RT: {:#?}", survey.recommendations);
    survey.machine.settings.insert("preemption".into(), "PREEMPT_RT: fully preemptible, interrupt handlers threaded".into());
    findings::derive(&mut survey, None);
    let recs = answering(&survey, "tick-kept-cpu1");
    assert_eq!(recs.len(), 1, "{:#?}", survey.recommendations);
    let fifo = format!("fifo:{}", irqlab_survey::run::PROBE_PRIORITY + 1);
    assert!(
        matches!(&recs[0].setting, Some(Declared::Threads { matched, policy, cpus: None, kernel_thread: true }) if matched == "comm:ktimers/1" && *policy == fifo),
        "{:#?}",
        recs[0]
    );
    assert_eq!(recs[0].cpu, Some(1));
}

/// On PREEMPT_RT nohz_full= alone leaves the tick on under a real-time
/// task (ktimers/N starves), so a ticking CPU not yet tickless gets both
/// answers at once: the boot option and the ktimers raise, two
/// recommendations with ids of their own, both in the profile (its
/// `[boot]` and a `[[threads]]` by the thread's stable name).
#[test]
fn on_preempt_rt_a_ticking_cpu_gets_nohz_full_and_the_ktimers_raise_together() {
    let mut survey = ticking([233.0, 250.0]);
    survey.machine.settings.insert("preemption".into(), "PREEMPT_RT: fully preemptible, interrupt handlers threaded".into());
    findings::derive(&mut survey, None);
    let recs = answering(&survey, "tick-cpu1");
    assert_eq!(recs.len(), 2, "{:#?}", survey.recommendations);
    assert!(recs.iter().any(|r| matches!(&r.setting, Some(Declared::Boot { option }) if option == "nohz_full=1")), "{recs:#?}");
    assert!(recs.iter().any(|r| matches!(&r.setting, Some(Declared::Threads { matched, .. }) if matched == "comm:ktimers/1")), "{recs:#?}");
    assert_ne!(recs[0].id, recs[1].id);
    let text = irqlab_survey::profile::text(&survey, std::path::Path::new("/tmp/s"));
    let profile = irqlab_control::profile::Profile::parse("profile.toml", &text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(profile.boot.as_ref().map(|b| b.cmdline.get_ref().as_str()), Some("nohz_full=1"));
    // A kernel thread on purpose: `control apply` takes it only with all_matching.
    let ktimers = profile.threads.iter().find(|t| t.matched.get_ref() == "comm:ktimers/1").expect("the raise in [[threads]]");
    assert!(ktimers.all_matching, "{text}");

    // Not PREEMPT_RT: the boot option alone.
    let mut plain = ticking([233.0, 250.0]);
    findings::derive(&mut plain, None);
    assert_eq!(answering(&plain, "tick-cpu1").len(), 1, "{:#?}", plain.recommendations);
}

/// The quiet CPU and the boot isolation agree (what `lab compare
/// --recommended-boot` showed disagreeing in a 6.12-rt guest: the quiet
/// CPU 0, every IRQ steered to CPU 1, and nohz_full=1): CPU 1's tick,
/// which `nohz_full=1` takes off it, does not count against it, so where
/// CPU 0 is quieter only by its tick, CPU 1 is the quiet CPU, the IRQs go
/// to CPU 0 and the task's CPU is the one made tickless.
#[test]
fn the_tick_that_nohz_full_removes_does_not_make_the_isolated_cpu_loud() {
    let unseen = |ns| ("unseen", SourceKind::Unseen, None, None, ns);
    let timer = |ns| ("irq LOC timer", SourceKind::Irq, None, None, ns);
    let mut survey = ticking([250.0, 250.0]);
    survey.cpus[0].curves[0] =
        run_of(Load::None, [&[timer(10_000), unseen(10_000)], &[timer(60_000), unseen(40_000)], &[timer(500_000)]], None);
    survey.cpus[1].curves[0] = run_of(Load::None, [&[timer(40_000)], &[timer(200_000)], &[timer(2_000_000)]], None);
    for cpu in &mut survey.cpus {
        cpu.curves[0].interrupts = Some(irqlab_survey::doc::InterruptRates {
            local_timer_per_s: 250.0,
            other_per_s: 4.0,
            other_by_row: Default::default(),
            window_ns: 2_000_000_000,
        });
    }
    findings::derive(&mut survey, None);
    let quiet = finding(&survey, "quietest-cpu");
    assert_eq!(quiet.cpu, Some(1), "{quiet:#?}");
    let scores: Vec<(usize, f64)> = quiet.quiet_cpu.as_ref().unwrap().cpus.iter().map(|s| (s.cpu, s.at_1ms)).collect();
    // CPU 1: nothing stays (its tick goes with nohz_full=1); CPU 0: 2%.
    assert_eq!(scores, [(1, 0.0), (0, 0.02)]);
    let steer = answering(&survey, "quietest-cpu");
    assert_eq!(steer[0].setting.as_ref(), Some(&Declared::Irq { irqs: vec!["*".into(), "default".into()], cpus: "0".into() }));
    assert_eq!(boot_options(&survey).iter().map(|(o, _)| *o).collect::<Vec<_>>(), ["nohz_full=1"]);

    // Already nohz_full and the tick kept (not PREEMPT_RT: no answer to
    // it): the tick stays CPU 1's, and CPU 0 is quieter.
    survey.machine.settings.insert("isolated CPUs".into(), "isolated none, nohz_full 1".into());
    findings::derive(&mut survey, None);
    assert_eq!(finding(&survey, "quietest-cpu").cpu, Some(0));
}

/// The SCHED softirq (load balancing) on a CPU running one task is
/// answered by `isolcpus=domain,` for it, and not once the running kernel
/// already keeps the CPU out of the scheduler's domains.
#[test]
fn load_balancing_under_one_task_recommends_isolcpus_domain() {
    let mut survey = ticking([233.0, 1.0]);
    let sched = Source { label: "SCHED".into(), kind: SourceKind::Softirq, pid: None, policy: None, ns: 30_000 };
    survey.cpus[1].curves[0].sources.as_mut().unwrap().windows[2].sources.push(sched);
    findings::derive(&mut survey, None);
    let options = boot_options(&survey);
    assert_eq!(options.iter().map(|(o, _)| *o).collect::<Vec<_>>(), ["isolcpus=domain,1"], "{:#?}", survey.recommendations);
    assert_eq!((options[0].1.cpu, options[0].1.answers()), (Some(1), vec!["balance-cpu1"]));
    let checked = irqlab_control::boot::check("isolcpus=domain,1", &[0, 1]).unwrap();
    assert_eq!(checked[0].cpus, [1]);

    survey.machine.settings.insert("isolated CPUs".into(), "isolated 1, nohz_full none".into());
    findings::derive(&mut survey, None);
    assert!(boot_options(&survey).is_empty(), "{:#?}", survey.recommendations);
}
