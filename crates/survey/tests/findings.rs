//! The findings rules on the hand-made fixture (crates/survey/tests/fixtures):
//! every finding carries its number and rule, every recommendation answers
//! a finding, the verdict is the worst finding, and a task set is checked
//! against each loaded curve with the servers tried.

use irqlab_analysis::{Model, PeriodicTask, Task, TaskSet};
use irqlab_survey::doc::{Severity, Survey};
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
