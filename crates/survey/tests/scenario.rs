//! The survey as simulator scenarios (issue 53): what a profile moves in
//! the model and what it leaves, read from the scenario text it writes.

use irqlab_control::profile::Profile;
use irqlab_survey::scenario::{models, Model};
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
