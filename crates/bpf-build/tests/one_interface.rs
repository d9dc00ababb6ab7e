//! The BPF programs and their Rust readers share one interface: every
//! constant of a program's header reaches Rust through the generator
//! (`<name>_consts.rs`), and every record through the skeleton's types
//! and `irqlab_host::bpf::read`. These checks read the sources, so a
//! constant copied by hand, or a record decoded by hand, fails here
//! rather than drifting from the header later.

use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(irqlab_bpf_build::BPF_DIR).parent().unwrap().to_path_buf()
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The sources of the crates that can read a BPF program: those on
/// irqlab-host, whose `bpf` module is the way in (the simulator's own
/// model of a kernel's softirq vectors is not a copy of a header, and the
/// generator's tests name constants of its own).
fn sources() -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    for krate in std::fs::read_dir(workspace().join("crates")).unwrap().flatten() {
        let manifest = std::fs::read_to_string(krate.path().join("Cargo.toml")).unwrap_or_default();
        let is_host = manifest.contains("name = \"irqlab-host\"");
        let src = krate.path().join("src");
        if src.is_dir() && (is_host || manifest.contains("irqlab-host")) {
            rust_files(&src, &mut files);
        }
    }
    assert!(files.len() > 50, "found only {} source files under {}", files.len(), workspace().display());
    files.into_iter().map(|f| (f.clone(), std::fs::read_to_string(&f).unwrap())).collect()
}

/// The names of the integer `#define`s of every header under bpf/, as the
/// generator takes them.
fn header_constants() -> Vec<String> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(irqlab_bpf_build::BPF_DIR).unwrap().flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "h") && path.file_name().is_some_and(|n| n != "vmlinux.h") {
            let rust = irqlab_bpf_build::rust_consts(&std::fs::read_to_string(&path).unwrap(), "");
            names.extend(rust.lines().filter_map(|l| l.strip_prefix("pub const ")?.split(':').next().map(str::to_string)));
        }
    }
    assert!(names.iter().any(|n| n == "GS_KIND_IRQ") && names.iter().any(|n| n == "IRQ_LOCAL_TIMER"), "{names:?}");
    names
}

#[test]
fn no_constant_of_a_bpf_header_is_written_by_hand_in_rust() {
    let names = header_constants();
    let mut copied = Vec::new();
    for (path, text) in sources() {
        for (i, line) in text.lines().enumerate() {
            for name in &names {
                // `const NAME: T = <value>;` is a copy unless its value
                // is the generated constant itself (`... ::NAME as T`).
                if let Some(rest) = line.split_once(&format!("const {name}:")).map(|(_, r)| r) {
                    let value = rest.split_once('=').map_or("", |(_, v)| v);
                    if !value.contains(name.as_str()) {
                        copied.push(format!("{}:{}: {}", path.display(), i + 1, line.trim()));
                    }
                }
            }
        }
    }
    assert!(copied.is_empty(), "header constants copied by hand (use the generated consts module):\n{}", copied.join("\n"));
}

/// No kernel record is decoded by hand: BPF records go through
/// `irqlab_host::bpf::read` with the skeleton's generated types, socket
/// control messages through nix's `ControlMessageOwned`. The one
/// `read_unaligned` left is `irqlab_host::bpf`'s own.
#[test]
fn no_record_is_decoded_by_hand() {
    let own = workspace().join("crates/host/src/bpf.rs");
    let by_hand: Vec<String> = sources()
        .into_iter()
        .filter(|(path, text)| *path != own && text.contains("read_unaligned"))
        .map(|(path, _)| path.display().to_string())
        .collect();
    assert!(by_hand.is_empty(), "records read with read_unaligned outside irqlab_host::bpf: {by_hand:?}");
}
