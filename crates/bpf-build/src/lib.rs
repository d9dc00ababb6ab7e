//! Compiles BPF C programs under the workspace's `bpf/` directory with
//! clang and generates their Rust skeletons into the calling build
//! script's OUT_DIR (libbpf-cargo, as the sched_ext schedulers do). One
//! helper for every crate with BPF programs: each build script names its
//! programs, `include!(concat!(env!("OUT_DIR"), "/<name>.skel.rs"))` reads
//! them. The committed `bpf/vmlinux.h` keeps the build independent of the
//! build machine's kernel BTF; CO-RE relocates field offsets against the
//! running kernel at load time.

use libbpf_cargo::SkeletonBuilder;
use std::path::{Path, PathBuf};

/// The shared sources: programs, their headers and `vmlinux.h`.
pub const BPF_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bpf");

/// Builds `bpf/<name>.bpf.c` into `$OUT_DIR/<name>.skel.rs` for each name,
/// and asks cargo to rerun when a program or a header changes. Panics (the
/// build script's way to fail) with where to get clang when one fails.
pub fn build(programs: &[&str]) {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let bpf_dir = Path::new(BPF_DIR);
    let arch = match std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") => "x86",
        Ok("aarch64") => "arm64",
        Ok(other) => panic!("irqlab's BPF programs are built for x86_64 and aarch64, not {other}"),
        Err(_) => "x86",
    };
    for name in programs {
        let source = bpf_dir.join(format!("{name}.bpf.c"));
        let skeleton = out.join(format!("{name}.skel.rs"));
        if let Err(err) = SkeletonBuilder::new()
            .source(&source)
            .clang_args([
                "-I".into(),
                bpf_dir.as_os_str().to_owned(),
                format!("-D__TARGET_ARCH_{arch}").into(),
                "-Wall".into(),
                "-Werror".into(),
            ])
            .build_and_generate(&skeleton)
        {
            // The usual cause on a fresh machine is a missing clang or
            // libelf; say where to get them instead of a bare backtrace.
            panic!(
                "building BPF program {}: {err:#}\n(scripts/install-deps.sh installs clang, libelf-dev and zlib1g-dev)",
                source.display()
            );
        }
        println!("cargo:rerun-if-changed={}", source.display());
    }
    // Every header (vmlinux.h included): a program may include any of them.
    let headers = std::fs::read_dir(bpf_dir).unwrap_or_else(|e| panic!("reading {}: {e}", bpf_dir.display()));
    for entry in headers.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|ext| ext == "h") {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}
