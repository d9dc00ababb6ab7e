//! `irqlab watch` (issue 52): bad input refused before anything is
//! measured; live (IRQLAB_LIVE_TESTS=1, root), a known injector named as
//! the cause of every spike it made, and an idle run's spikes never left
//! without a cause.

mod common;
use common::inject::Injector;
use common::{irqlab, json, path_str, stderr};
use serde_json::Value;

#[test]
fn a_threshold_below_the_resolution_is_a_usage_error() {
    for t in ["0", "500ns"] {
        let out = irqlab().args(["watch", "--threshold", t, "--duration", "1s"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "--threshold {t}: {}", stderr(&out));
        // The error names the flag and the value.
        assert!(stderr(&out).contains(&format!("--threshold {}", if t == "0" { "0 ns" } else { "500 ns" })), "{}", stderr(&out));
    }
}

#[test]
fn an_exec_of_a_missing_program_is_refused_before_measuring() {
    let out = irqlab()
        .args(["watch", "--threshold", "100us", "--on-threshold", "exec irqlab-no-such-program", "--duration", "1s"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--on-threshold exec irqlab-no-such-program"),
        "the error names the flag and the program: {}",
        stderr(&out)
    );
    let out = irqlab().args(["watch", "--threshold", "100us", "--on-threshold", "halt"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn from_a_document_that_is_not_a_watch_result_is_refused_naming_the_place() {
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "{\"schema\": \"irqlab/watch/v1\",\n  \"complete\": 12x}").unwrap();
    let out = irqlab().args(["watch", "--from", path_str(&broken)]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("{}:2:", broken.display())), "the line of the error: {}", stderr(&out));
    let other = dir.path().join("latency.json");
    std::fs::write(&other, "{\"schema\": \"irqlab/latency/v1\"}").unwrap();
    let out = irqlab().args(["watch", "--from", path_str(&other)]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("schema is `irqlab/latency/v1`, expected `irqlab/watch/v1`"), "{}", stderr(&out));
    let out = irqlab().args(["watch", "--from", path_str(&other), "--cpu", "1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "--from measures nothing: {}", stderr(&out));
}

/// Both live runs measure CPU 1 at SCHED_FIFO 80: one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `irqlab watch` on CPU 1 with `args`; its document.
fn watch(dir: &std::path::Path, args: &[&str]) -> Value {
    let file = dir.join("watch.json");
    let cpu = if args.contains(&"--cpu") { &[][..] } else { &["--cpu", "1"][..] };
    let out = irqlab().arg("watch").args(cpu).args(args).args(["--json", path_str(&file)]).output().unwrap();
    println!("{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json(&file);
    assert_eq!(
        (doc["schema"].as_str(), doc["complete"].as_bool(), doc["ended_by"].as_str()),
        (Some("irqlab/watch/v1"), Some(true), Some("duration"))
    );
    assert_eq!(doc["recorder"]["available"].as_bool(), Some(true), "{}", doc["recorder"]);
    doc
}

/// Every kept spike: its cause's sources add up to its span, and it names
/// something (a culprit: a source, `unseen` or `idle`).
fn check_causes(doc: &Value) {
    for s in doc["spikes"].as_array().unwrap() {
        let cause = &s["cause"];
        let span = cause["span_ns"].as_u64().unwrap();
        assert_eq!(span, s["latency_ns"].as_u64().unwrap(), "{s}");
        let sum: u64 = cause["sources"].as_array().unwrap().iter().map(|x| x["ns"].as_u64().unwrap()).sum();
        assert_eq!(sum, span, "the sources add up to the late time: {s}");
        assert!(!cause["sources"].as_array().unwrap().is_empty(), "an empty cause: {s}");
        // No culprit only when the thread's own path took it all.
        let own = cause["sources"].as_array().unwrap().iter().all(|x| x["pid"] == s["tid"]);
        assert!(!cause["culprit"].is_null() || own, "{s}");
    }
}

/// The injector (SCHED_FIFO 90, above the watch's 80) busy-runs 1 ms every
/// 3 s on CPU 1; the watch wakes every 200 us there, so each burst holds
/// back one wake-up by at least 800 us: a spike over 500 us per burst.
#[test]
fn every_spike_the_injector_made_names_it() {
    if !common::live::enabled_as_root("every_spike_the_injector_made_names_it") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let injector = Injector::start("inject", 1, 90, 1_000_000, 3_000_000_000);
    let doc = watch(dir.path(), &["--interval", "200us", "--threshold", "500us", "--duration", "20s"]);
    let (bursts, tid) = (injector.spans(), injector.tid());
    drop(injector);
    check_causes(&doc);
    let spikes = doc["spikes"].as_array().unwrap();
    assert_eq!(doc["spikes_total"].as_u64(), Some(spikes.len() as u64), "fewer than --keep's 100: all kept");
    let overlaps = |s: &Value| {
        let (due, woke) = (s["due_ns"].as_u64().unwrap(), s["woke_ns"].as_u64().unwrap());
        bursts.iter().any(|&(a, b)| a < woke && b > due)
    };
    let named = |s: &Value| {
        let c = &s["cause"]["culprit"];
        c["pid"].as_u64() == Some(u64::from(tid)) && c["label"].as_str().unwrap_or("").starts_with("inject/")
    };
    let mut by_injector = 0;
    for s in spikes {
        eprintln!("spike: {} us: {}", s["latency_ns"].as_u64().unwrap() / 1_000, s["cause"]["verdict"]);
        if overlaps(s) {
            assert!(named(s), "a spike during a burst not named after the injector: {s}");
            by_injector += 1;
        }
    }
    // Every burst that lay wholly inside the run made its spike.
    let (first, last) =
        (spikes.iter().map(|s| s["due_ns"].as_u64().unwrap()).min(), spikes.iter().map(|s| s["woke_ns"].as_u64().unwrap()).max());
    assert!(first.is_some(), "no spike in 20 s with {} bursts of 1 ms", bursts.len());
    let inside = bursts.iter().filter(|&&(a, b)| a >= first.unwrap().saturating_sub(3_000_000_000) && b <= last.unwrap()).count();
    assert!(by_injector >= inside.min(5), "{by_injector} spikes named the injector for {inside} bursts in the run");
}

/// An idle CPU 1: whatever spikes this VM makes over 100 us are named
/// (unseen time for the hypervisor, or what ran), never empty.
#[test]
fn an_idle_runs_spikes_are_never_left_without_a_cause() {
    if !common::live::enabled_as_root("an_idle_runs_spikes_are_never_left_without_a_cause") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let doc = watch(dir.path(), &["--threshold", "100us", "--duration", "10s"]);
    check_causes(&doc);
    let cpu = &doc["cpus"][0];
    assert_eq!(cpu["cpu"].as_u64(), Some(1));
    assert!(cpu["cycles"].as_u64().unwrap() >= 9_000, "{cpu}");
    // The log histogram holds every wake-up.
    let counted: u64 = cpu["histogram"]["counts"].as_array().unwrap().iter().map(|c| c.as_u64().unwrap()).sum();
    assert_eq!(counted, cpu["cycles"].as_u64().unwrap());
    eprintln!("idle: {} spikes over 100 us; {}", doc["spikes_total"], doc["recorder"]["note"]);
}

/// Fewer spikes than this say nothing of what makes them.
const MIN_SPIKES: u64 = 10;

/// The testbed's NAPI thread of irqlab-b held at SCHED_FIFO 90 on CPU 1
/// (above the watch's 80) by `control threads` while host b floods it:
/// spikes on CPU 1 are the flood's receive work, named as the NAPI
/// thread (threaded NAPI, the testbed's default) or NET_RX.
#[test]
fn a_flood_received_on_the_watched_cpu_is_named() {
    if !common::live::enabled_as_root("a_flood_received_on_the_watched_cpu_is_named") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let made_testbed = !std::path::Path::new("/run/netns/irqlab-b").exists();
    let up = irqlab().args(["testbed", "up"]).output().unwrap();
    assert_eq!(up.status.code(), Some(0), "{}", stderr(&up));
    let napi = irqlab_host::testbed::napi_threads("irqlab-b").first().expect("a napi/irqlab-b-* kthread").pid;
    let mut held = irqlab()
        .args(["control", "threads", "napi:irqlab-b", "--policy", "fifo:90", "--cpu", "1", "--duration", "40s"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while irqlab_host::rt::affinity(napi).unwrap() != vec![1] {
        assert!(start.elapsed() < std::time::Duration::from_secs(10), "control threads did not pin the NAPI thread");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let mut flood = irqlab()
        .args(["traffic", "udp", "--from", "b", "--rate", "200k", "--duration", "30s"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let dir = tempfile::tempdir().unwrap();
    let mut doc = watch(dir.path(), &["--threshold", "200us", "--duration", "10s"]);
    // Too few spikes to judge what names them (a CI run of 2026-11-30 had
    // 3 over 200 us in 10 s: one the NAPI thread's, one kdamond's, one
    // idle): watch again, the flood still on, at half the threshold,
    // where the NAPI thread's runs are many.
    if doc["spikes_total"].as_u64().unwrap_or(0) < MIN_SPIKES {
        eprintln!("{} spikes over 200 us: again at 100 us", doc["spikes_total"]);
        doc = watch(dir.path(), &["--threshold", "100us", "--duration", "10s"]);
    }
    let _ = flood.kill();
    let _ = flood.wait();
    // Ctrl-C: `control threads` restores the thread and ends.
    // SAFETY: signalling our own child.
    unsafe { libc::kill(held.id() as i32, libc::SIGINT) };
    let _ = held.wait();
    // Whatever a failure above left is undone here (nothing, normally).
    let revert = irqlab().args(["control", "revert", "--all"]).output().unwrap();
    if made_testbed {
        let _ = irqlab().args(["testbed", "down"]).output();
    }
    assert_eq!(revert.status.code(), Some(0), "{}", stderr(&revert));
    check_causes(&doc);
    let spikes = doc["spikes"].as_array().unwrap();
    assert!(!spikes.is_empty(), "no spike over 200 us under the flood: {}", doc["cpus"]);
    let receive = |s: &Value| {
        let label = s["cause"]["culprit"]["label"].as_str().unwrap_or("");
        label.starts_with("napi/irqlab-b") || label == "NET_RX"
    };
    let mut culprits: std::collections::BTreeMap<String, usize> = Default::default();
    for s in spikes {
        *culprits.entry(s["cause"]["culprit"]["label"].as_str().unwrap_or("-").to_string()).or_default() += 1;
    }
    eprintln!("culprits of {} kept spikes (of {}): {culprits:?}", spikes.len(), doc["spikes_total"]);
    // The flood's receive work is named in a large part of the worst
    // spikes; the rest are this VM's own: with both vCPUs busy under the
    // flood its host holds one for hundreds of us at times (`unseen`). One
    // run (2026-11-29): 57 of the worst 100 of 514 spikes named the NAPI
    // thread, 43 unseen, none anything else. How many spikes the flood
    // makes varies with what the host gives it: a CI run (2026-11-30) had
    // 6 in 10 s, all six the NAPI thread's. So: more than one spike named,
    // and at least a quarter of them.
    let named = spikes.iter().filter(|s| receive(s)).count();
    assert!(named >= 2 && 4 * named >= spikes.len(), "{named} of {} spikes named the NAPI thread or NET_RX: {culprits:?}", spikes.len());
}

/// `watch --html`'s page in headless Chromium (irqlab-chromium): it loads
/// without a console error or any fetch, shows one histogram per watched
/// CPU and, for each spike the JSON kept, a row whose cause is not empty;
/// a screenshot is kept (`target/tmp/watch-page.png`).
#[test]
fn the_watch_page_shows_each_cpus_histogram_and_its_spikes_in_chromium() {
    if !common::live::enabled_as_root("the_watch_page_shows_each_cpus_histogram_and_its_spikes_in_chromium") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("watch.html");
    // A low threshold on this VM (p99 about 30 us): a few spikes to list.
    let doc = watch(dir.path(), &["--cpu", "0-1", "--threshold", "40us", "--keep", "5", "--duration", "3s", "--html", path_str(&page)]);
    let kept = doc["spikes"].as_array().unwrap().len();
    // The same page again from the run's document (`--from`): what a long
    // run's saved result shows, without measuring again.
    let again = dir.path().join("again.html");
    let from = irqlab().args(["watch", "--from", path_str(&dir.path().join("watch.json")), "--html", path_str(&again)]).output().unwrap();
    assert_eq!(from.status.code(), Some(0), "{}", stderr(&from));
    assert_eq!(std::fs::read_to_string(&again).unwrap(), std::fs::read_to_string(&page).unwrap(), "the page from the document");
    check_page_in_chromium(dir.path(), &page, 2, kept, "watch-page.png");
}

/// A watch page in headless Chromium: it loads with no console error and
/// fetches nothing else, no section is empty, a histogram per CPU is
/// drawn, and each kept spike is a row naming its cause. A screenshot
/// goes to the target's tmp directory as `shot`.
fn check_page_in_chromium(dir: &std::path::Path, page: &std::path::Path, cpus: u64, kept: usize, shot: &str) {
    let mut browser = irqlab_chromium::Browser::start(&dir.join("profile"), &dir.join("chromium.log"));
    browser.open_page();
    let url = format!("file://{}", page.display());
    let loaded = browser.load(&url);
    assert!(loaded.errors.is_empty(), "console errors: {:#?}", loaded.errors);
    assert!(loaded.requests.iter().all(|r| *r == url), "fetched more than the page: {:?}", loaded.requests);
    let dom = browser.evaluate_json(irqlab_chromium::INSPECT);
    assert_eq!(dom["title"], "irqlab watch: timer latency");
    assert_eq!(dom["empty"], serde_json::json!([]), "sections with nothing below their heading");
    assert_eq!(dom["plotted"].as_u64(), Some(cpus), "one histogram per CPU: {dom}");
    let rows = browser.evaluate_json(
        r#"JSON.stringify((() => {
  const s = [...document.querySelectorAll('section')].find(s => (s.querySelector('h2') || {}).textContent === 'The worst spikes and their causes');
  return s ? [...s.querySelectorAll('tr')].slice(1).map(r => r.querySelectorAll('td')[3].innerText.trim()) : null;
})())"#,
    );
    let causes: Vec<&str> = rows.as_array().expect("the spikes section").iter().map(|c| c.as_str().unwrap()).collect();
    assert_eq!(causes.len(), kept, "a row per kept spike: {causes:?}");
    assert!(causes.iter().all(|c| !c.is_empty()), "{causes:?}");
    let png = browser.screenshot();
    let shot = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(shot);
    std::fs::write(&shot, &png).unwrap();
    eprintln!("{kept} spikes listed; screenshot: {}", shot.display());
}

/// A long run's saved document (IRQLAB_WATCH_FROM: what `watch --json`
/// wrote, e.g. the 30-minute run of docs/performance.md), its page made
/// with `--from` and checked in Chromium as a short run's is. Skipped
/// without the variable: a benchmark's check, not CI's.
#[test]
fn a_saved_runs_page_loads_in_chromium() {
    let Some(from) = std::env::var_os("IRQLAB_WATCH_FROM") else {
        eprintln!("skipped: set IRQLAB_WATCH_FROM to a document `irqlab watch --json` wrote");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("watch.html");
    let out = irqlab().args(["watch", "--from"]).arg(&from).args(["--html", path_str(&page)]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = json(std::path::Path::new(&from));
    let kept = doc["spikes"].as_array().unwrap().len();
    check_page_in_chromium(dir.path(), &page, doc["cpus"].as_array().unwrap().len() as u64, kept, "watch-saved-page.png");
}
