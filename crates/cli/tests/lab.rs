//! `irqlab lab`: what can be checked without booting a guest (the guests
//! themselves run in `make test-kernels`, scripts/test-kernels.sh): bad
//! kernels and missing tools exit as docs/conventions.md says, naming what
//! to do, and a document written inside a guest carries its `lab` block.

mod common;
use common::*;

#[test]
fn an_unknown_kernel_exits_2_naming_the_known_ones() {
    let out = run(&["lab", "run", "--kernel", "debian:5.10", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    for known in ["debian:6.1", "debian:6.1-rt", "debian:6.12", "debian:6.12-rt"] {
        assert!(stderr(&out).contains(known), "{}", stderr(&out));
    }
    let out = run(&["lab", "fetch", "ubuntu:22.04"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn a_file_that_is_not_a_kernel_image_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("vmlinuz");
    std::fs::write(&fake, vec![b'x'; 4096]).unwrap();
    let out = run(&["lab", "run", "--kernel", fake.to_str().unwrap(), "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("not a kernel image"), "{}", stderr(&out));
    let out = run(&["lab", "run", "--kernel", dir.path().to_str().unwrap(), "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn without_qemu_it_exits_3_naming_the_package() {
    let out = irqlab().args(["lab", "run", "--kernel", "debian:6.1-rt", "--", "true"]).env("PATH", "/nonexistent").output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("qemu-system-x86"), "{}", stderr(&out));
}

#[test]
fn a_command_needs_a_command() {
    let out = run(&["lab", "run", "--kernel", "debian:6.1-rt"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn documents_written_in_a_guest_carry_its_lab_block_and_others_do_not() {
    let args = ["bench", "sim", "--duration", "100ms", "--json", "-"];
    let plain: serde_json::Value = serde_json::from_slice(&run(&args).stdout).unwrap();
    assert!(plain.get("lab").is_none());
    let lab = r#"{"kernel":"debian:6.12-rt","accel":"tcg","icount":true}"#;
    let out = irqlab().args(args).env("IRQLAB_LAB", lab).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["lab"]["kernel"], "debian:6.12-rt");
    assert_eq!(doc["lab"]["accel"], "tcg");
    assert_eq!(doc["schema"], plain["schema"]);
}

#[test]
fn the_kernel_list_names_every_known_kernel_and_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let out = irqlab().args(["lab", "kernels", "--json"]).env("IRQLAB_CACHE_DIR", dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["schema"], "irqlab/lab-kernels/v1");
    assert_eq!(doc["kernels"].as_array().unwrap().len(), 4);
    assert!(doc["kernels"].as_array().unwrap().iter().all(|k| k["fetched"].is_null()));
    assert_eq!(doc["cache"], dir.path().to_str().unwrap());
}

#[test]
fn a_root_without_systemd_exits_2_naming_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&["lab", "run", "--kernel", "debian:6.12-rt", "--root", dir.path().to_str().unwrap(), "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("lib/systemd/systemd") && stderr(&out).contains("make lab-root"), "{}", stderr(&out));
}

#[test]
fn a_compare_column_takes_command_line_options_and_refuses_flags_and_repeats() {
    let compare = |a: &str, b: &str| run(&["lab", "compare", "--kernel", a, "--kernel", b, "--", "survey", "--quick"]);
    let out = compare("debian:6.12-rt", "debian:6.12-rt --nohz");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("`--nohz`"), "{}", stderr(&out));
    let out = compare("debian:6.12-rt nohz_full=1", "debian:6.12-rt  nohz_full=1");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("given twice"), "{}", stderr(&out));
    let out = compare("debian:6.12-rt", "debian:5.10 nohz_full=1");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn one_kernel_is_a_comparison_only_with_its_recommended_boot_options() {
    let out = run(&["lab", "compare", "--kernel", "debian:6.12-rt", "--", "survey", "--quick"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--recommended-boot"), "{}", stderr(&out));
}
