//! One grammar for CPUs and scheduling policies (issue 50;
//! `docs/commands.md`, "CPUs and policies"), over every subcommand that
//! `irqlab --help` lists, recursively: a flag that takes CPUs is `--cpu`
//! with `--cpus` as its visible alias (`--account-cpu` / `--account-cpus`)
//! and reads `1` and LIST syntax through the `flags` module's parser under
//! both spellings; a flag named for its use (`export --probe CPU`) reads
//! the same syntax; every `--policy` and `--floor` takes the same words,
//! `fifo` alone included, with the same errors. A command that adds a CPU
//! or policy flag outside this shape fails here. Nothing here measures or
//! changes the machine: every run ends in a usage error (exit 2).

mod common;
use common::{irqlab, run, stderr, stdout};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// Flags named like CPU flags that are not: `lab run|compare --cpus N`
/// is how many virtual CPUs the guest gets, a count.
const NOT_CPU_FLAGS: [(&str, &str); 2] = [("lab run", "cpus"), ("lab compare", "cpus")];

/// One option line of a command's `-h`.
#[derive(Debug)]
struct Flag {
    /// The long name, without `--`.
    name: String,
    /// The value's name (`LIST`, `CPU`, `POLICY`), empty for a switch.
    value: String,
    /// Visible aliases, without `--`.
    aliases: Vec<String>,
}

/// Every subcommand path (`["control", "threads"]`) with its flags.
fn commands() -> Vec<(Vec<String>, Vec<Flag>)> {
    let mut found = Vec::new();
    let mut pending: Vec<Vec<String>> = vec![Vec::new()];
    while let Some(path) = pending.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("-h");
        let out = run(&args);
        assert_eq!(out.status.code(), Some(0), "irqlab {}: {}", args.join(" "), stderr(&out));
        let help = stdout(&out);
        for sub in subcommands(&help) {
            let mut deeper = path.clone();
            deeper.push(sub);
            pending.push(deeper);
        }
        if !path.is_empty() {
            found.push((path, flags(&help)));
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

/// The names under `Commands:` (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    let Some(section) = help.split("\nCommands:\n").nth(1) else { return Vec::new() };
    section
        .lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(String::from)
        .collect()
}

/// The options of a `-h`: a line indented up to 6 columns that starts
/// with `-`, its description on the same line or (clap's next-line layout,
/// when some help is long) on the lines indented deeper below it.
fn flags(help: &str) -> Vec<Flag> {
    let mut entries: Vec<(String, String)> = Vec::new();
    for line in help.split("\nExamples:").next().unwrap_or(help).lines() {
        let indent = line.len() - line.trim_start().len();
        let text = line.trim_start();
        if indent <= 6 && text.starts_with('-') {
            entries.push((text.to_string(), String::new()));
        } else if let Some(last) = entries.last_mut().filter(|_| indent > 6) {
            last.1.push(' ');
            last.1.push_str(text);
        } else if !text.is_empty() {
            // A section heading or an argument: the last option ended.
            entries.push((String::new(), String::new()));
        }
    }
    let mut flags = Vec::new();
    for (header, below) in entries {
        // `-h, --help`
        let header = match header.get(..4) {
            Some(short) if short.starts_with('-') && !short.starts_with("--") && short.ends_with(", ") => &header[4..],
            _ => header.as_str(),
        };
        let Some(spec) = header.strip_prefix("--") else { continue };
        let (spec, beside) = spec.split_once("  ").unwrap_or((spec, ""));
        let description = format!("{beside} {below}");
        let (name, value) = spec.split_once(' ').unwrap_or((spec, ""));
        let value = value.trim_matches(|c| matches!(c, '<' | '>' | '[' | ']' | '.')).to_string();
        let aliases = ["[alias: ", "[aliases: "]
            .iter()
            .find_map(|open| description.split_once(open))
            .map(|(_, rest)| {
                let list = rest.split(']').next().unwrap_or("");
                list.split(", ").map(|a| a.trim().trim_start_matches("--").to_string()).collect()
            })
            .unwrap_or_default();
        flags.push(Flag { name: name.to_string(), value, aliases });
    }
    flags
}

fn is_cpu_named(name: &str) -> bool {
    ["cpu", "cpus"].contains(&name) || name.ends_with("-cpu") || name.ends_with("-cpus")
}

/// `irqlab PATH ARGS`, which must end in a usage error (exit 2) within
/// 20 s; its stderr.
fn refused(path: &[String], args: &[&str]) -> String {
    let mut child = irqlab()
        .args(path)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("irqlab {} {}: still running after 20 s; it should have refused its flags", path.join(" "), args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "irqlab {} {}: {err}", path.join(" "), args.join(" "));
    assert!(err.starts_with("error: "), "irqlab {} {}: {err}", path.join(" "), args.join(" "));
    err
}

#[test]
fn every_cpu_flag_is_cpu_with_cpus_and_reads_cpu_lists() {
    let mut seen = BTreeSet::new();
    for (path, flags) in commands() {
        let command = path.join(" ");
        for flag in &flags {
            let exempt = NOT_CPU_FLAGS.contains(&(command.as_str(), flag.name.as_str()));
            let cpu_named = is_cpu_named(&flag.name) && !exempt;
            let takes_cpus = matches!(flag.value.as_str(), "CPU" | "LIST");
            if !cpu_named && !takes_cpus {
                continue;
            }
            let at = format!("{command} --{}", flag.name);
            assert!(takes_cpus, "{at}: a CPU flag's value is CPU (one) or LIST (several), not `{}`", flag.value);
            let mut spellings = vec![flag.name.clone()];
            if cpu_named {
                let singular = flag.name.trim_end_matches('s');
                assert_eq!(flag.name, singular, "{at}: the flag is --{singular}, with --{singular}s its alias");
                let plural = format!("{singular}s");
                assert!(flag.aliases.contains(&plural), "{at}: --{plural} is not a visible alias ({:?})", flag.aliases);
                spellings.push(plural);
            }
            // Both spellings reach the `flags` module's parser: its words,
            // under the flag's name.
            let named = format!("for '--{} <{}>'", flag.name, flag.value);
            for spelling in &spellings {
                let err = refused(&path, &[&format!("--{spelling}"), "x"]);
                assert!(err.contains(&named) && err.contains("`x` is not a CPU number in `x`"), "{command} --{spelling} x: {err}");
                // LIST syntax, naming one CPU where one is meant.
                let err = refused(&path, &[&format!("--{spelling}"), "1-0"]);
                assert!(err.contains("range `1-0` runs backwards"), "{command} --{spelling} 1-0: {err}");
                if flag.value == "CPU" {
                    let err = refused(&path, &[&format!("--{spelling}"), "0-1"]);
                    assert!(err.contains("this takes one CPU; `0-1` names 2"), "{command} --{spelling} 0-1: {err}");
                }
            }
            seen.insert(at);
        }
    }
    // The walk found them (a help layout it cannot read would find none).
    for expected in [
        "control threads --cpu",
        "control irq --cpu",
        "control fair-server --cpu",
        "control bh-budget --cpu",
        "control process-aware --cpu",
        "control process-aware --account-cpu",
        "measure latency --cpu",
        "measure interference --cpu",
        "measure accounting --cpu",
        "stimulus respond --cpu",
        "traffic --cpu",
        "survey --cpu",
        "reproduce --cpu",
        "export --probe",
        "export --latency",
    ] {
        assert!(seen.contains(expected), "{expected} not found among {seen:?}");
    }
}

#[test]
fn every_policy_flag_takes_the_same_words() {
    let mut seen = BTreeSet::new();
    let mut unknown_word_errors = BTreeSet::new();
    for (path, flags) in commands() {
        let command = path.join(" ");
        for flag in flags.iter().filter(|f| ["policy", "floor"].contains(&f.name.as_str()) || f.value == "POLICY") {
            let at = format!("{command} --{}", flag.name);
            assert_eq!(flag.value, "POLICY", "{at}: a policy flag's value is POLICY");
            let spelled = format!("--{}", flag.name);
            let named = format!("for '--{} <POLICY>'", flag.name);
            // `fifo` alone parses: the error is the unknown flag after it.
            for words in ["fifo", "fifo:80", "rr", "other", "background"] {
                let err = refused(&path, &[&spelled, words, "--no-such-flag"]);
                assert!(err.contains("'--no-such-flag'") && !err.contains(&named), "{at} {words}: {err}");
            }
            // One parser: the same message for the same mistake everywhere.
            let err = refused(&path, &[&spelled, "turbo"]);
            let (_, why) = err.split_once(&format!("invalid value 'turbo' {named}: ")).unwrap_or_else(|| panic!("{at} turbo: {err}"));
            unknown_word_errors.insert(why.lines().next().unwrap_or("").to_string());
            let err = refused(&path, &[&spelled, "fifo:100"]);
            assert!(err.contains(&format!("invalid value 'fifo:100' {named}: priority `100` is outside 1..=99")), "{at} fifo:100: {err}");
            seen.insert(at);
        }
    }
    assert_eq!(unknown_word_errors.len(), 1, "policy flags disagree on their words: {unknown_word_errors:?}");
    let words = unknown_word_errors.first().unwrap();
    assert!(words.starts_with("unknown policy; expected background, foreground, fifo[:PRIO], rr[:PRIO], other[:NICE], idle,"), "{words}");
    for expected in [
        "control threads --policy",
        "control process-aware --floor",
        "measure interference --policy",
        "measure latency --policy",
        "stimulus respond --policy",
        "stimulus run --policy",
    ] {
        assert!(seen.contains(expected), "{expected} not found among {seen:?}");
    }
}

/// A command whose own threads run under SCHED_FIFO or SCHED_OTHER only
/// takes `fifo` (its own default priority), `fifo:PRIO` and `other`, and
/// refuses the other words before anything runs, naming the flag, the
/// value and what it takes.
#[test]
fn own_threads_refuse_what_they_cannot_run_under() {
    let path = |p: &str| p.split(' ').map(String::from).collect::<Vec<_>>();
    for (command, rest) in [
        ("measure latency", &["--cpu", "4095", "--duration", "10ms"][..]),
        ("measure interference", &["--cpu", "4095", "--duration", "10ms"]),
        ("stimulus respond", &["--cpu", "4095"]),
        ("stimulus run", &["--target", "127.0.0.1", "--count", "1"]),
    ] {
        for words in ["rr:5", "rr", "idle", "other:5", "deadline:1ms/10ms"] {
            let mut args = vec!["--policy", words];
            args.extend_from_slice(rest);
            let err = refused(&path(command), &args);
            assert!(
                err.contains(&format!("--policy {words}: this command's own threads run under SCHED_FIFO or SCHED_OTHER only"))
                    && err.contains("fifo, fifo:PRIO or other"),
                "{command} --policy {words}: {err}"
            );
        }
    }
    // Accepted: the run goes on to the CPU the machine lacks.
    for (command, words) in [("measure latency", "fifo"), ("measure latency", "other"), ("measure interference", "fifo")] {
        let err = refused(&path(command), &["--policy", words, "--cpu", "4095", "--duration", "10ms"]);
        assert!(err.contains("--cpu 4095") && !err.contains("--policy"), "{command} --policy {words}: {err}");
    }
}
