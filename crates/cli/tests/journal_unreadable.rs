//! A control journal entry that cannot be read (its file cut short, as a
//! crash in the middle of a plain write would leave it) is named as such by
//! `control status`, `control revert` and `doctor`, never taken for
//! "nothing changed"; `doctor --strict` fails on it. A live test: it writes
//! into the real journal (/run/irqlab/control), so it runs as root, alone
//! in its own test binary, and removes what it made.

mod common;
use common::live::enabled_as_root;
use common::*;
use std::process::Command;

#[test]
fn an_entry_cut_short_is_named_everywhere() {
    if !enabled_as_root("an_entry_cut_short_is_named_everywhere") {
        return;
    }
    let mut sleeper = Command::new("sleep").arg("120").spawn().unwrap();
    let pid = sleeper.id().to_string();
    let set = run(&["control", "threads", &format!("pid:{pid}"), "--policy", "fifo:10", "--persist", "--json", "-"]);
    assert_eq!(set.status.code(), Some(0), "{}", stderr(&set));
    let entry = common::live::control_entries().into_iter().find(|e| e["object"].to_string().contains(&pid)).expect("the persisted entry");
    let file = std::path::Path::new("/run/irqlab/control").join(format!("{}.json", entry["id"].as_str().unwrap()));
    let text = std::fs::read(&file).unwrap();
    std::fs::write(&file, &text[..text.len() / 2]).unwrap();

    let status = run(&["control", "status"]);
    let said = stdout(&status);
    assert!(said.contains("UNREADABLE") && said.contains(&file.display().to_string()), "{said}");
    assert!(!said.contains("changed nothing"), "{said}");
    let doc: serde_json::Value = serde_json::from_slice(&run(&["control", "status", "--json", "-"]).stdout).unwrap();
    assert_eq!(doc["unreadable"].as_array().map(Vec::len), Some(1), "{doc}");

    let doctor = run(&["doctor"]);
    assert_eq!(doctor.status.code(), Some(1), "a journal that cannot be read is not ready, --strict or not");
    assert!(stdout(&doctor).contains("PROBLEM: unreadable entry"), "{}", stdout(&doctor));
    assert_eq!(run(&["doctor", "--strict"]).status.code(), Some(1));

    let revert = run(&["control", "revert", "--all"]);
    assert!(stdout(&revert).contains("not reverted: unreadable entry"), "{}", stdout(&revert));
    assert!(!stdout(&revert).contains("nothing to revert"), "{}", stdout(&revert));

    // What the entry held, undone by hand as the message says; then the file.
    assert!(Command::new("chrt").args(["-o", "-p", "0", &pid]).status().unwrap().success());
    std::fs::remove_file(&file).unwrap();
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert!(stdout(&run(&["control", "status"])).contains("changed nothing"));
}
