//! One page with several kernels' surveys side by side (`irqlab lab
//! compare`): which kernel, how it was run (KVM or an emulated CPU), each
//! verdict and its findings, the local timer's rate on each CPU (the tick
//! `nohz_full` stops), each kernel's interference curves, and the settings
//! `irqlab doctor` read that differ between them.

use crate::doc::{Action, Declared, InterruptRates, Load, Recommendation};
use crate::page::{self, PageError};
use crate::Survey;
use irqlab_report::html::{Page, Section, Table, Tone};
use std::collections::{BTreeMap, BTreeSet};

/// One kernel's column: its survey, its doctor document, its `lab` block.
pub struct Column {
    pub label: String,
    pub survey: Option<Survey>,
    /// Why there is no survey (the guest failed, the command failed).
    pub missing: Option<String>,
    pub doctor: Option<serde_json::Value>,
    pub lab: Option<serde_json::Value>,
    /// What was applied in the guest before its survey, said on the page
    /// (`lab compare --recommended-boot`: the first survey's profile).
    pub applied: Option<String>,
}

pub fn render(columns: &[Column]) -> Result<String, PageError> {
    let mut page = Page::new("irqlab lab compare: kernels side by side")
        .section(overview(columns))
        .section(local_timer(columns))
        .section(findings_side_by_side(columns))
        .section(settings(columns))
        .section(readiness(columns));
    for column in columns {
        let Some(survey) = &column.survey else { continue };
        let mut findings = page::findings(survey);
        findings.heading = format!("{}: findings", column.label);
        let mut curves = page::interference(survey)?;
        curves.heading = format!("{}: interference per CPU", column.label);
        page = page.section(findings).section(curves);
    }
    Ok(page.render()?)
}

fn lab_text(column: &Column, key: &str) -> String {
    column.lab.as_ref().and_then(|l| l.get(key)).map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string)).unwrap_or_default()
}

fn overview(columns: &[Column]) -> Section {
    let mut table = Table::new(["kernel", "release", "preemption", "run under", "verdict"]).text_columns([0, 1, 2, 3, 4]);
    let mut emulated = false;
    for c in columns {
        emulated |= lab_text(c, "accel") == "tcg";
        let accel = match lab_text(c, "accel").as_str() {
            "tcg" => format!("emulation (TCG){}", if lab_text(c, "icount") == "true" { ", -icount" } else { "" }),
            "kvm" => "KVM".to_string(),
            other => other.to_string(),
        };
        let verdict = match (&c.survey, &c.missing) {
            (Some(s), _) => s.verdict.headline.clone(),
            (None, Some(why)) => format!("no survey: {why}"),
            (None, None) => "no survey".to_string(),
        };
        table.push_row([c.label.clone(), lab_text(c, "release"), lab_text(c, "preemption"), accel, verdict]);
    }
    let mut section = Section::new("Kernels").table(table);
    for c in columns {
        if let Some(applied) = &c.applied {
            section = section.callout(Tone::Note, format!("{}: {applied}", c.label));
        }
    }
    if emulated {
        section = section.callout(
            Tone::Note,
            "Emulated CPUs: these guests ran under QEMU's software emulation, so their times are an emulated CPU's, \
             not this hardware's. Compare what each kernel does (which steps run, which findings appear), not the sizes.",
        );
    }
    section
}

/// The idle probe runs' local timer rate per CPU, one column per kernel:
/// with `nohz_full` on a CPU its tick stops while the probe runs there
/// alone, and the rate falls from HZ to about 1/s.
fn local_timer(columns: &[Column]) -> Section {
    fn idle_rate(c: &Column, cpu: usize) -> Option<&InterruptRates> {
        let probed = c.survey.as_ref()?.cpus.iter().find(|s| s.cpu == cpu)?;
        probed.curves.iter().find(|l| l.load == Load::None)?.interrupts.as_ref()
    }
    let cpus: BTreeSet<usize> = columns.iter().filter_map(|c| c.survey.as_ref()).flat_map(|s| s.cpus.iter().map(|c| c.cpu)).collect();
    let section = Section::new("Local timer interrupts per second during the probe, per CPU (idle)");
    if !cpus.iter().any(|&cpu| columns.iter().any(|c| idle_rate(c, cpu).is_some())) {
        return section.paragraph("No survey recorded its CPUs' interrupt counts during the idle probe (older surveys do not).");
    }
    let headers: Vec<String> = std::iter::once("CPU".to_string()).chain(columns.iter().map(|c| c.label.clone())).collect();
    let mut table = Table::new(headers.clone());
    let mut others = Table::new(headers).text_columns(1..=columns.len());
    for &cpu in &cpus {
        let cells = columns.iter().map(|c| idle_rate(c, cpu).map_or("-".to_string(), |r| page::per_s(r.local_timer_per_s)));
        table.push_row(std::iter::once(cpu.to_string()).chain(cells));
        let kinds = columns.iter().map(|c| idle_rate(c, cpu).map_or("-".to_string(), |r| page::top_rows(r, 3)));
        others.push_row(std::iter::once(cpu.to_string()).chain(kinds));
    }
    let mut section = section
        .table(table)
        .paragraph(
            "Counted from /proc/interrupts (LOC) while the probe spun: under emulation (TCG) a rate or a count is meaningful, \
             a latency is not.",
        )
        .subheading("The other interrupts, most first (per second, idle)")
        .table(others)
        .paragraph("What else the CPU took while the probe spun: RES rescheduling IPIs, CAL function calls, IWI irq work, a numbered IRQ by its handler.");
    // What each survey predicted from these numbers for the next boot
    // (`lab compare --recommended-boot` boots the kernel with it), and the
    // run-time setting PREEMPT_RT needs beside nohz_full= (the ktimers raise).
    let about_the_tick =
        |r: &&Recommendation| matches!(r.setting, Some(Declared::Boot { .. })) || r.action == Some(Action::RaiseTimerThread);
    for c in columns {
        let Some(survey) = &c.survey else { continue };
        for r in survey.recommendations.iter().filter(about_the_tick) {
            let predicted = r.predicted.as_deref().map(|p| format!(": {p}")).unwrap_or_default();
            section = section.callout(Tone::Note, format!("{} recommends {}{predicted}", c.label, r.command.as_deref().unwrap_or("-")));
        }
    }
    section
}

/// Every finding of any kernel, one row per finding (by its stable id),
/// what each kernel measured for it: which problems are a kernel's own.
fn findings_side_by_side(columns: &[Column]) -> Section {
    // One row per stable id; titles differ by their numbers, the first seen names the row.
    let mut rows: BTreeMap<String, (String, Vec<String>)> = BTreeMap::new();
    for (i, c) in columns.iter().enumerate() {
        let Some(survey) = &c.survey else { continue };
        for f in &survey.findings {
            let row = rows.entry(f.id.clone()).or_insert_with(|| (f.title.clone(), vec!["-".to_string(); columns.len()]));
            row.1[i] = format!("{}: {}", format!("{:?}", f.severity).to_lowercase(), f.measured);
        }
    }
    let headers: Vec<String> = std::iter::once("finding".to_string()).chain(columns.iter().map(|c| c.label.clone())).collect();
    let mut table = Table::new(headers).text_columns(0..=columns.len());
    for (title, cells) in rows.into_values() {
        table.push_row(std::iter::once(title).chain(cells));
    }
    Section::new("Findings side by side").table(table).paragraph("\"-\": the kernel's survey has no such finding.")
}

/// doctor's settings (name -> value) per kernel, only the rows that differ.
fn settings(columns: &[Column]) -> Section {
    let mut rows: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (i, c) in columns.iter().enumerate() {
        let Some(list) = c.doctor.as_ref().and_then(|d| d["settings"].as_array()) else { continue };
        for s in list {
            let name = s["name"].as_str().unwrap_or("?").to_string();
            let value = s["value"].as_str().map_or_else(|| s["value"].to_string(), str::to_string);
            rows.entry(name).or_insert_with(|| vec![String::new(); columns.len()])[i] = value;
        }
    }
    let headers: Vec<String> = std::iter::once("setting".to_string()).chain(columns.iter().map(|c| c.label.clone())).collect();
    let mut table = Table::new(headers).text_columns(0..=columns.len());
    let mut same = 0;
    for (name, values) in rows {
        if values.windows(2).all(|w| w[0] == w[1]) {
            same += 1;
            continue;
        }
        table.push_row(std::iter::once(name).chain(values));
    }
    Section::new("Settings that differ (irqlab doctor)")
        .table(table)
        .paragraph(format!("{same} other settings are the same on every kernel."))
}

fn readiness(columns: &[Column]) -> Section {
    let mut table = Table::new(["kernel", "not ready here (irqlab doctor)"]).text_columns([0, 1]);
    for c in columns {
        let missing: Vec<String> = c
            .doctor
            .as_ref()
            .and_then(|d| d["commands"].as_array())
            .map(|rows| {
                rows.iter()
                    .filter(|r| !r["missing"].is_null())
                    .map(|r| format!("{}: {}", r["command"].as_str().unwrap_or("?"), r["missing"].as_str().unwrap_or("")))
                    .collect()
            })
            .unwrap_or_default();
        table.push_row([c.label.clone(), if missing.is_empty() { "everything is ready".to_string() } else { missing.join("; ") }]);
    }
    Section::new("Commands").table(table)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::InterruptRates;

    /// The page's survey fixture, its idle run on CPU 1 at `loc` local timer interrupts per second.
    fn column(label: &str, loc: f64) -> Column {
        let mut survey: Survey = serde_json::from_str(include_str!("../tests/fixtures/survey.json")).unwrap();
        let cpu1 = survey.cpus.iter_mut().find(|c| c.cpu == 1).unwrap();
        let idle = cpu1.curves.iter_mut().find(|l| l.load == Load::None).unwrap();
        idle.interrupts =
            Some(InterruptRates { local_timer_per_s: loc, other_per_s: 3.0, other_by_row: Default::default(), window_ns: 1_900_000_000 });
        Column { label: label.into(), survey: Some(survey), missing: None, doctor: None, lab: None, applied: None }
    }

    #[test]
    fn the_local_timer_row_has_each_kernels_rate() {
        let columns = [column("debian:6.12-rt", 250.0), column("debian:6.12-rt nohz_full=1 rcu_nocbs=1", 1.0)];
        let html = render(&columns).unwrap();
        let start = html.find("Local timer interrupts per second during the probe").unwrap();
        let section = &html[start..start + html[start..].find("</section>").unwrap()];
        // CPU 0 recorded nothing in either survey; CPU 1: 250/s, then 1/s with nohz_full.
        assert!(section.contains("<tr><td>0</td><td>-</td><td>-</td></tr>"), "{section}");
        assert!(section.contains("<tr><td>1</td><td>250</td><td>1.0</td></tr>"), "{section}");
    }

    /// A column whose guest had settings applied before its survey says
    /// so under the kernels' table; the others say nothing of it.
    #[test]
    fn what_was_applied_before_a_survey_is_said() {
        let mut applied = column("debian:6.12-rt nohz_full=1 +profile", 1.0);
        applied.applied = Some("the profile's 1 run-time setting applied before the survey".into());
        let html = render(&[column("debian:6.12-rt", 250.0), applied]).unwrap();
        let kernels = &html[html.find("<h2").unwrap()..html.find("Local timer interrupts per second").unwrap()];
        assert!(kernels.contains("debian:6.12-rt nohz_full=1 +profile: the profile&#x27;s 1 run-time setting applied"), "{kernels}");
        assert_eq!(kernels.matches("run-time setting").count(), 1, "{kernels}");
    }
}
