//! The survey page in a real browser: headless Chromium (the Debian package
//! `chromium`, installed by `scripts/install-deps.sh`) loads the page
//! rendered from the hand-made fixture, and the test asserts that it loads
//! without console errors and without fetching anything, has the expected
//! number of plots, and no section that is empty below its heading; it
//! keeps a full-page screenshot and the page (`target/tmp/survey-page.{png,html}`).
//! The same for `--compare`'s page (`target/tmp/survey-before-after.{png,html}`):
//! both surveys' numbers and the findings that went away, as shown.
//! Chromium is driven by `irqlab-chromium` (crates/chromium).
//!
//! A live test (`IRQLAB_LIVE_TESTS=1`, as root in CI): it needs Chromium.

use irqlab_chromium::{be32, Browser, INSPECT};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn live_tests_enabled(test: &str) -> bool {
    if std::env::var("IRQLAB_LIVE_TESTS").as_deref() == Ok("1") {
        return true;
    }
    eprintln!("{test}: skipped: live test (set IRQLAB_LIVE_TESTS=1 and run as root)");
    false
}

#[test]
fn the_page_loads_in_chromium_without_errors() {
    if !live_tests_enabled("the_page_loads_in_chromium_without_errors") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let survey: irqlab_survey::Survey = serde_json::from_str(include_str!("fixtures/survey.json")).unwrap();
    let links = [("reproduce load-bounds".to_string(), "load-bounds/index.html".to_string())];
    let page = dir.path().join("index.html");
    irqlab_survey::page::write(&survey, &links, &page).unwrap();
    let log = dir.path().join("chromium.log");
    let mut browser = Browser::start(&dir.path().join("profile"), &log);
    browser.open_page();

    let url = format!("file://{}", page.display());
    let loaded = browser.load(&url);
    assert!(loaded.errors.is_empty(), "console errors: {:#?}", loaded.errors);
    assert!(loaded.requests.iter().all(|r| *r == url), "fetched more than the page: {:?}", loaded.requests);

    let dom = browser.evaluate_json(INSPECT);
    assert_eq!(dom["title"], "irqlab survey");
    assert!(dom["verdict"].as_str().unwrap().starts_with("Under network load"), "{dom}");
    // Two CPUs, CPU 1's two runs' sources, timer latency, stimulus
    // latency; each drawn at its size.
    assert_eq!((dom["svgs"].as_u64(), dom["plotted"].as_u64()), (Some(6), Some(6)), "{dom}");
    assert_eq!(dom["scripts"], 0);
    assert_eq!(dom["sections"].as_array().unwrap().len(), 10, "{dom}");
    assert_eq!(dom["empty"], json!([]), "sections with nothing below their heading");

    let png = browser.screenshot();
    let kept = Path::new(env!("CARGO_TARGET_TMPDIR")).join("survey-page.png");
    std::fs::write(&kept, &png).unwrap();
    std::fs::copy(&page, kept.with_extension("html")).unwrap();
    eprintln!("screenshot: {} (page beside it)", kept.display());
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    let (width, height) = (be32(&png[16..20]), be32(&png[20..24]));
    assert!(width >= 1000 && height >= 1500 && png.len() > 50_000, "{width}×{height}, {} bytes", png.len());

    // The check bites: outside resources are refused and reported.
    let hostile = dir.path().join("hostile.html");
    let html = std::fs::read_to_string(&page).unwrap();
    let extra = r#"<link rel="stylesheet" href="https://example.invalid/a.css"><img src="https://example.invalid/b.png" alt="">"#;
    std::fs::write(&hostile, html.replacen("</body>", &format!("{extra}</body>"), 1)).unwrap();
    let refused = browser.load(&format!("file://{}", hostile.display()));
    eprintln!("refused: {:#?}", refused.errors);
    assert!(refused.errors.len() >= 2, "outside resources went unreported: {:#?}", refused.errors);
    assert!(refused.errors.iter().all(|e| e.contains("Content Security Policy")), "{:#?}", refused.errors);
}

/// `irqlab lab compare`'s page. By default rendered from the fixture as
/// two kernels (one setting differing); `scripts/test-kernels.sh` runs this
/// test again on the page its real `lab compare` wrote
/// (`IRQLAB_COMPARE_PAGE`, kernels in `IRQLAB_COMPARE_KERNELS`).
#[test]
fn the_lab_compare_page_loads_in_chromium_without_errors() {
    if !live_tests_enabled("the_lab_compare_page_loads_in_chromium_without_errors") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (page, kernels) = match std::env::var("IRQLAB_COMPARE_PAGE") {
        Ok(page) => {
            let kernels = std::env::var("IRQLAB_COMPARE_KERNELS").expect("IRQLAB_COMPARE_KERNELS beside IRQLAB_COMPARE_PAGE");
            (PathBuf::from(page), kernels.split(',').map(str::to_string).collect::<Vec<_>>())
        }
        Err(_) => {
            let survey: irqlab_survey::Survey = serde_json::from_str(include_str!("fixtures/survey.json")).unwrap();
            let column = |label: &str, clock: &str| irqlab_survey::compare::Column {
                label: label.to_string(),
                survey: Some(survey.clone()),
                missing: None,
                doctor: Some(json!({"settings": [{"name": "clock", "value": clock}, {"name": "hz", "value": "250"}], "commands": []})),
                lab: Some(json!({"release": label, "preemption": "rt", "accel": "tcg", "icount": false})),
                applied: None,
            };
            let columns = [column("debian:6.1-rt", "hpet"), column("debian:6.12-rt", "tsc")];
            let page = dir.path().join("index.html");
            std::fs::write(&page, irqlab_survey::compare::render(&columns).unwrap()).unwrap();
            (page, vec!["debian:6.1-rt".to_string(), "debian:6.12-rt".to_string()])
        }
    };
    let mut browser = Browser::start(&dir.path().join("profile"), &dir.path().join("chromium.log"));
    browser.open_page();
    let url = format!("file://{}", std::fs::canonicalize(&page).unwrap().display());
    let loaded = browser.load(&url);
    assert!(loaded.errors.is_empty(), "console errors: {:#?}", loaded.errors);
    assert!(loaded.requests.iter().all(|r| *r == url), "fetched more than the page: {:?}", loaded.requests);
    let dom = browser.evaluate_json(INSPECT);
    assert_eq!(dom["title"], "irqlab lab compare: kernels side by side");
    assert_eq!(dom["empty"], json!([]), "sections with nothing below their heading");
    let sections: Vec<String> = dom["sections"].as_array().unwrap().iter().map(|s| s.as_str().unwrap_or("").to_string()).collect();
    for kernel in &kernels {
        assert!(sections.iter().any(|s| s == &format!("{kernel}: interference per CPU")), "{kernel}: {sections:?}");
    }
    assert!(dom["plotted"].as_u64().unwrap() >= kernels.len() as u64, "{dom}");
    // The fixture's guests ran under TCG: the page must say so (a real
    // page says it only where its guests were emulated).
    let text = browser.evaluate_json("JSON.stringify(document.body.innerText)");
    let emulated = std::env::var("IRQLAB_COMPARE_PAGE").is_err() || std::fs::read_to_string(&page).unwrap().contains("emulation (TCG)");
    assert!(!emulated || text.as_str().unwrap().contains("Emulated CPUs"), "the page must say the CPUs were emulated");
    let png = browser.screenshot();
    let kept = Path::new(env!("CARGO_TARGET_TMPDIR")).join("lab-compare-page.png");
    std::fs::write(&kept, &png).unwrap();
    eprintln!("screenshot: {}", kept.display());
}

/// The "Before and after" section as the browser shows it: its tables'
/// cells (text and computed background), its callouts, its plots.
const BEFORE_AFTER: &str = r#"JSON.stringify((() => {
  const section = [...document.querySelectorAll('section')].find(s => (s.querySelector('h2') || {}).textContent === 'Before and after');
  if (!section) return null;
  const cell = td => ({ text: td.innerText.trim(), background: getComputedStyle(td).backgroundColor });
  return {
    position: [...document.querySelectorAll('section h2')].map(h => h.textContent).indexOf('Before and after'),
    tables: [...section.querySelectorAll('table')].map(t => [...t.querySelectorAll('tr')].slice(1).map(r => [...r.querySelectorAll('td')].map(cell))),
    callouts: [...section.querySelectorAll('.callout')].map(c => c.innerText),
    plotted: [...section.querySelectorAll('svg')].filter(s => s.getBoundingClientRect().width > 100).length,
  };
})())"#;

/// `irqlab survey --compare`'s page: the hand-made survey of the machine
/// after the recommended server was applied (fixtures/survey-after.json)
/// with the first survey (fixtures/survey.json) as its baseline. Chromium
/// shows the "Before and after" section right below the verdict, CPU 1's
/// net load before and after (36% → 8.9% at 1 ms, coloured better), and
/// the findings that went away (the task set that missed its deadlines,
/// the timer latency warning) and the one that appeared.
#[test]
fn the_before_and_after_page_shows_both_surveys_in_chromium() {
    if !live_tests_enabled("the_before_and_after_page_shows_both_surveys_in_chromium") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let before: irqlab_survey::Survey = serde_json::from_str(include_str!("fixtures/survey.json")).unwrap();
    let after: irqlab_survey::Survey = serde_json::from_str(include_str!("fixtures/survey-after.json")).unwrap();
    let baseline = irqlab_survey::before_after::Baseline { path: "/home/user/survey-before/survey.json".into(), survey: before };
    let page = dir.path().join("index.html");
    std::fs::write(&page, irqlab_survey::page::render_compared(&after, Some(&baseline), &[]).unwrap()).unwrap();
    let mut browser = Browser::start(&dir.path().join("profile"), &dir.path().join("chromium.log"));
    browser.open_page();
    let url = format!("file://{}", page.display());
    let loaded = browser.load(&url);
    assert!(loaded.errors.is_empty(), "console errors: {:#?}", loaded.errors);
    assert!(loaded.requests.iter().all(|r| *r == url), "fetched more than the page: {:?}", loaded.requests);
    let dom = browser.evaluate_json(INSPECT);
    assert_eq!(dom["empty"], json!([]), "sections with nothing below their heading");
    assert_eq!(dom["svgs"], dom["plotted"], "{dom}");

    let section = browser.evaluate_json(BEFORE_AFTER);
    assert_eq!(section["position"], 1, "right below the verdict: {section}");
    let texts = |row: &Value| row.as_array().unwrap().iter().map(|c| c["text"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    let numbers = section["tables"][0].as_array().unwrap();
    let net1 = numbers.iter().find(|r| texts(r)[..2] == ["1", "net"]).unwrap_or_else(|| panic!("no CPU 1 net row: {section}"));
    let cells = texts(net1);
    assert_eq!(cells[2..4], ["36% → 8.9%", "-26.6 points, better"], "{cells:?}");
    assert_eq!(cells[8..10], ["140us → 40.3us", "-100us, better"], "{cells:?}");
    // Better is coloured (the stylesheet's ok background), the same is not.
    assert_eq!(net1[2]["background"], "rgb(232, 245, 233)", "{net1}");
    let idle1 = numbers.iter().find(|r| texts(r)[..2] == ["1", "idle"]).unwrap();
    assert_eq!(idle1[2]["background"], "rgba(0, 0, 0, 0)", "{idle1}");

    let findings: Vec<Vec<String>> = section["tables"][1].as_array().unwrap().iter().map(texts).collect();
    let row = |title: &str| findings.iter().find(|r| r[2].starts_with(title)).unwrap_or_else(|| panic!("no {title}: {findings:?}"));
    let taskset = row("CPU 1: your task set misses deadlines under the net load");
    assert_eq!(taskset[0], "went away");
    assert!(taskset[3].starts_with("problem: ") && taskset[4].starts_with("ok: worst responses control: 1.3ms"), "{taskset:?}");
    assert_eq!(row("Timer latency under the net load")[0], "went away");
    assert_eq!(row("Timer latency under the net load")[4], "-");
    assert_eq!(row("CPU frequency governor: powersave")[0], "appeared");
    let callouts = section["callouts"].to_string();
    assert!(callouts.contains("CPU frequency governor: not recorded → powersave"), "{callouts}");
    assert!(!callouts.contains("same conditions"), "{callouts}");
    // Both CPUs' curves, before and after on one plot each.
    assert_eq!(section["plotted"], 2, "{section}");

    let png = browser.screenshot();
    let kept = Path::new(env!("CARGO_TARGET_TMPDIR")).join("survey-before-after.png");
    std::fs::write(&kept, &png).unwrap();
    std::fs::copy(&page, kept.with_extension("html")).unwrap();
    eprintln!("screenshot: {} (page beside it)", kept.display());
}
