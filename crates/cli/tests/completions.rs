//! `irqlab completions SHELL`: the bash script, sourced in a real bash,
//! completes subcommands, nested subcommands and value lists; an unknown
//! shell is a usage error (exit 2).

mod common;
use common::{run as irqlab, stderr, stdout};
use std::process::Command;

/// What the bash completion function offers for the command line `words`
/// (the last one being completed), called as bash calls it.
fn bash_offers(words: &[&str]) -> Vec<String> {
    let generated = irqlab(&["completions", "bash"]);
    assert_eq!(generated.status.code(), Some(0), "{}", stderr(&generated));
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &generated.stdout).unwrap();
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let cword = words.len() - 1;
    let previous = if cword > 0 { words[cword - 1] } else { "" };
    let shell = format!(
        "source '{}'; COMP_WORDS=({}); COMP_CWORD={cword}; _irqlab irqlab '{}' '{previous}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        file.path().display(),
        quoted.join(" "),
        words[cword],
    );
    let out = Command::new("bash").arg("-c").arg(&shell).output().expect("run bash");
    assert!(out.status.success(), "bash: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(String::from).collect()
}

#[test]
fn bash_completes_commands_subcommands_and_values() {
    assert_eq!(bash_offers(&["irqlab", "mea"]), ["measure"]);
    assert_eq!(bash_offers(&["irqlab", "measure", "acc"]), ["accounting"]);
    let papers = bash_offers(&["irqlab", "reproduce", ""]);
    for paper in ["idletime", "load-bounds", "bh-threshold", "process-aware", "--quick"] {
        assert!(papers.iter().any(|p| p == paper), "{paper} not offered: {papers:?}");
    }
}

#[test]
fn every_shell_gets_a_script_and_an_unknown_one_is_a_usage_error() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = irqlab(&["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}: {}", stderr(&out));
        assert!(stdout(&out).contains("irqlab"), "{shell}: script does not name irqlab");
    }
    let bad = irqlab(&["completions", "tcsh"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("tcsh"), "{}", stderr(&bad));
}
