//! `irqlab man --out DIR` (`make man`): one page per command, each with
//! its options and an EXAMPLES section, readable by `man -l`.

mod common;
use common::{run as irqlab, stderr};
use std::process::Command;

#[test]
fn man_writes_one_page_per_command_with_examples() {
    let dir = tempfile::tempdir().unwrap();
    let out = irqlab(&["man", "--out", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut pages: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    pages.sort();
    for page in [
        "irqlab.1",
        "irqlab-survey.1",
        "irqlab-analyze.1",
        "irqlab-measure.1",
        "irqlab-measure-interference.1",
        "irqlab-control-idletime.1",
        "irqlab-reproduce.1",
        "irqlab-completions.1",
    ] {
        assert!(pages.iter().any(|p| p == page), "{page} missing from {pages:?}");
    }
    assert!(!pages.iter().any(|p| p.contains("-help") || p.contains("-man.")), "help/man pages: {pages:?}");
    for page in &pages {
        let text = std::fs::read_to_string(dir.path().join(page)).unwrap();
        assert!(text.contains(".SH EXAMPLES\n.TP\n\\fBirqlab") || text.contains(".SH EXAMPLES\n.TP\n\\fBsudo irqlab"), "{page}:\n{text}");
        assert!(text.contains(".SH SYNOPSIS"), "{page}");
    }
    // Every subcommand listed by `irqlab --help` has its page.
    let help = irqlab(&["--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    let commands = help.split("Commands:").nth(1).unwrap().split("\n\n").next().unwrap();
    for name in commands.lines().filter_map(|l| l.split_whitespace().next()).filter(|n| *n != "help") {
        assert!(pages.contains(&format!("irqlab-{name}.1")), "no page for {name}");
    }

    // Rendered as a reader sees it (where man-db is installed).
    let rendered = Command::new("man").env("MANWIDTH", "100").arg("-l").arg(dir.path().join("irqlab-survey.1")).output();
    match rendered {
        Ok(r) if r.status.success() => {
            let text = String::from_utf8_lossy(&r.stdout);
            for part in ["SYNOPSIS", "OPTIONS", "--quick", "--load", "EXAMPLES", "irqlab survey --quick --load net"] {
                assert!(text.contains(part), "{part} not in man -l's page:\n{text}");
            }
        }
        _ => eprintln!("skipped the man -l check: man-db not installed (scripts/install-deps.sh installs it)"),
    }
}
