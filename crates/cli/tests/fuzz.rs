//! Fuzzing every input parser and flag type through the real binary:
//! seeded mutations of the shipped inputs (scenario TOML, task-set TOML,
//! curve JSON/CSV, throughput CSV) and of flag values (durations, ranges,
//! counts, sizes, seeds). A case fails on an exit code other than 0-3, a
//! signal, a run past the time limit, an error message that is empty or
//! not `error: ...`, or an accepted scenario whose conservation checks
//! fail. Failing inputs are kept under `target/fuzz-failures/`.
//!
//! `make test` runs [`DEFAULT_CASES`] cases (under a minute on 2 cores);
//! `IRQLAB_FUZZ_CASES=N` runs N, `IRQLAB_FUZZ_SEED=S` another sequence.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod common;
use common::repo_file;

const DEFAULT_CASES: usize = 2400;
/// A case that takes longer than this is a hang (the slowest accepted
/// shipped input takes well under a second).
const TIME_LIMIT: Duration = Duration::from_secs(20);

/// Values that have broken parsers before or sit on a type's edge.
const EXTREMES: &[&str] = &[
    "0",
    "-1",
    "1",
    "4294967296",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775808",
    "1e308",
    "5e-324",
    "-0.0",
    "nan",
    "inf",
    "\"0ns\"",
    "\"1ns\"",
    "\"9223372036854775808ns\"",
    "\"18446744073709551615s\"",
    "\"1e30s\"",
    "\"-1ms\"",
    "\"ms\"",
    "\"10\"",
    "\"\"",
    "\"hearbeat\"",
    "[]",
    "{}",
    "true",
    "\"0-1\"",
    "\"1..0ms\"",
];

/// Flag values of every type the CLI parses.
const FLAG_VALUES: &[&str] = &[
    "0",
    "1",
    "-1",
    "7ms",
    "2ms",
    "0ns",
    "1ns",
    "1e9s",
    "10000000000s",
    "9223372036854775808ns",
    "18446744073709551615",
    "1.5",
    "ms",
    "",
    "10us..100ms",
    "100ms..10us",
    "0..200ms",
    "1..100%",
    "0..0%",
    "1..1000%",
    "5",
    "100000000",
    "nan",
    "inf",
    "1e308",
    "5e-324",
    "0-1",
    "é",
    "--",
    "-5ms",
];

struct Case {
    /// What is run: the arguments, with `{}` standing for the input file.
    args: Vec<String>,
    /// The mutated input, if the case has one, with the file name it gets.
    input: Option<(PathBuf, Vec<u8>)>,
    /// Whether an accepted run writes a sim document to check.
    sim_json: bool,
}

/// A seeded mutation of `text`: one of several edits a person (or a
/// corrupted file) might make.
fn mutate(rng: &mut Pcg64Mcg, text: &str) -> Vec<u8> {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let pick_line = |rng: &mut Pcg64Mcg, lines: &[String]| rng.gen_range(0..lines.len().max(1));
    match rng.gen_range(0..10) {
        // Replace a value (after `=` or between commas) with an extreme.
        0..=3 => {
            let candidates: Vec<usize> = (0..lines.len()).filter(|&i| lines[i].contains('=') || lines[i].contains(',')).collect();
            if let Some(&i) = candidates.choose(rng) {
                let value = *EXTREMES.choose(rng).unwrap();
                let line = &lines[i];
                lines[i] = match line.find('=') {
                    Some(eq) => format!("{} = {value}", &line[..eq].trim_end()),
                    None => {
                        let mut cells: Vec<String> = line.split(',').map(str::to_string).collect();
                        let c = rng.gen_range(0..cells.len());
                        cells[c] = value.trim_matches('"').to_string();
                        cells.join(",")
                    }
                };
            }
        }
        // A typo in a key or a value: one character changed.
        4 => {
            let i = pick_line(rng, &lines);
            if let Some(line) = lines.get_mut(i) {
                let chars: Vec<char> = line.chars().collect();
                if !chars.is_empty() {
                    let at = rng.gen_range(0..chars.len());
                    let new = *b"abcdefghijklmnopqrstuvwxyz_0123456789.\"[]=#-".choose(rng).unwrap() as char;
                    *line = chars.iter().enumerate().map(|(k, &c)| if k == at { new } else { c }).collect();
                }
            }
        }
        5 => {
            if !lines.is_empty() {
                let i = pick_line(rng, &lines);
                lines.remove(i);
            }
        }
        6 => {
            if !lines.is_empty() {
                let i = pick_line(rng, &lines);
                let copy = lines[i].clone();
                lines.insert(i, copy);
            }
        }
        7 => {
            if lines.len() >= 2 {
                let (a, b) = (pick_line(rng, &lines), pick_line(rng, &lines));
                lines.swap(a, b);
            }
        }
        // A huge value.
        8 => {
            let i = pick_line(rng, &lines);
            if let Some(line) = lines.get_mut(i) {
                if let Some(eq) = line.find('=') {
                    *line = format!("{} = \"{}\"", &line[..eq].trim_end(), "9".repeat(100_000));
                }
            }
        }
        // Raw bytes: NUL, bare CR, invalid UTF-8, or a cut-off file.
        _ => {
            let mut bytes = lines.join("\n").into_bytes();
            let at = rng.gen_range(0..=bytes.len());
            match rng.gen_range(0..4) {
                0 => bytes.insert(at, 0),
                1 => bytes.insert(at, b'\r'),
                2 => bytes.insert(at, 0xff),
                _ => bytes.truncate(at),
            }
            return bytes;
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out.into_bytes()
}

fn files(dir: &str, ext: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(repo_file(dir))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    found.sort();
    found
}

fn scenario_files() -> Vec<PathBuf> {
    ["scenarios/examples", "scenarios/bh-threshold", "scenarios/load-bounds", "scenarios/process-aware"]
        .iter()
        .flat_map(|d| files(d, "toml"))
        .collect()
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The `n`-th case of the sequence `seed`: the same on every machine.
fn case(seed: u64, n: usize) -> Case {
    let mut rng = Pcg64Mcg::seed_from_u64(seed ^ (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let file_case = |rng: &mut Pcg64Mcg, sources: Vec<PathBuf>, args: Vec<String>, sim_json| {
        let source = sources.choose(rng).unwrap().clone();
        let text = std::fs::read_to_string(&source).unwrap();
        Case { args, input: Some((source, mutate(rng, &text))), sim_json }
    };
    match n % 6 {
        0 | 1 => {
            file_case(&mut rng, scenario_files(), args(&["sim", "{}", "--duration", "200ms", "--seed", "7", "--json", "{json}"]), true)
        }
        2 => file_case(
            &mut rng,
            vec![
                repo_file("examples/p7-e2.toml").into(),
                repo_file("examples/servers.toml").into(),
                repo_file("examples/curve-nic.toml").into(),
                repo_file("examples/section5-sporadic.toml").into(),
            ],
            args(&["analyze", "{}"]),
            false,
        ),
        3 => {
            let curves = vec![repo_file("examples/curve-nic.json").into(), repo_file("examples/curve-baseline.csv").into()];
            if rng.gen_bool(0.5) {
                file_case(&mut rng, curves, args(&["fit", "{}"]), false)
            } else {
                file_case(&mut rng, curves, args(&["fit", &repo_file("examples/curve-nic.json"), "--baseline", "{}"]), false)
            }
        }
        4 => file_case(
            &mut rng,
            files("crates/analysis/data/idletime", "csv"),
            args(&["idletime-model", "--resource", "{}", "--p-steps", "3", "--i-steps", "3"]),
            false,
        ),
        _ => flag_case(&mut rng),
    }
}

/// A command with one or more flags set to values of every type.
fn flag_case(rng: &mut Pcg64Mcg) -> Case {
    let which = rng.gen_range(0..4);
    let mut v = || FLAG_VALUES.choose(rng).unwrap().to_string();
    let ping = repo_file("scenarios/examples/ping-flood.toml");
    let list: Vec<String> = match which {
        0 => vec!["bound".into(), "--period".into(), v(), "--wcet".into(), v(), "--to".into(), v(), "--rows".into(), v()],
        1 => vec![
            "idletime-model".into(),
            "--resource".into(),
            "disk".into(),
            "--p".into(),
            v(),
            "--p-steps".into(),
            v(),
            "--i".into(),
            v(),
            "--i-steps".into(),
            v(),
            "--alpha".into(),
            v(),
            "--t-max".into(),
            v(),
        ],
        2 => vec![
            "sim".into(),
            ping,
            "--duration".into(),
            {
                // Only durations that end soon: the point is the parser.
                let d = v();
                if d.ends_with("ms") && d.trim_end_matches("ms").parse::<f64>().is_ok_and(|x| x > 200.0) {
                    "200ms".into()
                } else {
                    d
                }
            },
            "--seed".into(),
            v(),
        ],
        _ => vec![
            "bound".into(),
            "--period".into(),
            "7ms".into(),
            "--wcet".into(),
            "2ms".into(),
            "--from".into(),
            v(),
            "--deadline".into(),
            v(),
        ],
    };
    Case { args: list, input: None, sim_json: false }
}

/// Runs one case; Err describes the failure.
fn run_case(case: &Case, dir: &Path) -> Result<(), String> {
    let input = case.input.as_ref().map(|(source, bytes)| {
        // Beside copies of its siblings, so relative references resolve.
        let path = dir.join(source.file_name().unwrap());
        for sibling in std::fs::read_dir(source.parent().unwrap()).unwrap().flatten() {
            if sibling.path().is_file() {
                std::fs::copy(sibling.path(), dir.join(sibling.file_name())).unwrap();
            }
        }
        std::fs::write(&path, bytes).unwrap();
        path
    });
    let json = dir.join("out.json");
    let _ = std::fs::remove_file(&json);
    let args: Vec<String> = case
        .args
        .iter()
        .map(|a| match a.as_str() {
            "{}" => input.as_ref().unwrap().display().to_string(),
            "{json}" => json.display().to_string(),
            _ => a.clone(),
        })
        .collect();
    // Into a file, not a pipe: a pipe nobody drains until exit would stall
    // a child that writes more than its buffer (a 100 KB value echoed).
    let stderr_path = dir.join("stderr.txt");
    let mut child = Command::new(env!("CARGO_BIN_EXE_irqlab"))
        .args(&args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > TIME_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("ran past {TIME_LIMIT:?}: irqlab {args:?}"));
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let stderr = String::from_utf8_lossy(&std::fs::read(&stderr_path).unwrap()).into_owned();
    let code = match status.code() {
        Some(code @ 0..=3) => code,
        Some(code) => return Err(format!("exit {code}: irqlab {args:?}: {stderr}")),
        None => return Err(format!("killed by a signal ({status}): irqlab {args:?}: {stderr}")),
    };
    if code == 2 {
        let first = stderr.lines().next().unwrap_or("");
        if !first.starts_with("error: ") || first.trim_end() == "error:" {
            return Err(format!("exit 2 without a message: irqlab {args:?}: {stderr:?}"));
        }
    }
    if code == 0 && case.sim_json {
        let doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&json).map_err(|e| format!("no JSON: {e}"))?).map_err(|e| format!("bad JSON: {e}"))?;
        let c = &doc["conservation"];
        for check in ["cpu_time_ok", "packets_ok", "devices_ok"] {
            if c[check] != true {
                return Err(format!("accepted, but conservation {check} fails: irqlab {args:?}: {c}"));
            }
        }
    }
    Ok(())
}

#[test]
fn mutated_inputs_and_flags_never_crash_hang_or_pass_silently_broken() {
    let cases: usize = std::env::var("IRQLAB_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_CASES);
    let seed: u64 = std::env::var("IRQLAB_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(20261125);
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    let keep = Path::new(env!("CARGO_TARGET_TMPDIR")).join("../fuzz-failures");
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let dir = tempfile::tempdir().unwrap();
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= cases {
                        return;
                    }
                    let case = case(seed, n);
                    if let Err(why) = run_case(&case, dir.path()) {
                        let mut kept = String::new();
                        if let Some((source, bytes)) = &case.input {
                            std::fs::create_dir_all(&keep).unwrap();
                            let path = keep.join(format!("{seed}-{n}-{}", source.file_name().unwrap().to_string_lossy()));
                            std::fs::write(&path, bytes).unwrap();
                            kept = format!(" (input kept as {})", path.display());
                        }
                        failures.lock().unwrap().push(format!("case {n}{kept}: {}", truncate(&why, 600)));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    eprintln!("{cases} cases (seed {seed}), {} failed", failures.len());
    assert!(failures.is_empty(), "{} of {cases} cases failed:\n{}", failures.len(), failures.join("\n"));
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

#[test]
fn the_mutator_changes_its_input_and_is_deterministic() {
    let text = "[[task]]\nname = \"a\"\nperiod = \"10ms\"\nwcet = \"2ms\"\n";
    let changed = (0..50).filter(|&k| mutate(&mut Pcg64Mcg::seed_from_u64(k), text) != text.as_bytes()).count();
    assert!(changed >= 40, "only {changed} of 50 mutations changed the input");
    let a = case(1, 5);
    let b = case(1, 5);
    assert_eq!(a.args, b.args);
}
