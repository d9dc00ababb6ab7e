//! One page with several kernels' surveys side by side (`irqlab lab
//! compare`): which kernel, how it was run (KVM or an emulated CPU), each
//! verdict and its findings, each kernel's interference curves, and the
//! settings `irqlab doctor` read that differ between them.

use crate::page::{self, PageError};
use crate::Survey;
use irqlab_report::html::{Page, Section, Table, Tone};
use std::collections::BTreeMap;

/// One kernel's column: its survey, its doctor document, its `lab` block.
pub struct Column {
    pub label: String,
    pub survey: Option<Survey>,
    /// Why there is no survey (the guest failed, the command failed).
    pub missing: Option<String>,
    pub doctor: Option<serde_json::Value>,
    pub lab: Option<serde_json::Value>,
}

pub fn render(columns: &[Column]) -> Result<String, PageError> {
    let mut page = Page::new("irqlab lab compare: kernels side by side")
        .section(overview(columns))
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
    if emulated {
        section = section.callout(
            Tone::Note,
            "Emulated CPUs: these guests ran under QEMU's software emulation, so their times are an emulated CPU's, \
             not this hardware's. Compare what each kernel does (which steps run, which findings appear), not the sizes.",
        );
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
