//! Compiles the BPF C programs under `src/bpf/` with clang and generates
//! their Rust skeletons into OUT_DIR (libbpf-cargo, as the sched_ext
//! schedulers do). The committed `src/bpf/vmlinux.h` keeps the build
//! independent of the build machine's kernel BTF; CO-RE relocates field
//! offsets against the running kernel at load time.

use libbpf_cargo::SkeletonBuilder;
use std::path::PathBuf;

const PROGRAMS: &[&str] = &["accounting", "gap_sources", "io_watch", "napi_watch", "softirq_sum", "thread_watch"];

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let bpf_dir = PathBuf::from("src/bpf");
    let arch = match std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") => "x86",
        Ok("aarch64") => "arm64",
        Ok(other) => panic!("irqlab's BPF programs are built for x86_64 and aarch64, not {other}"),
        Err(_) => "x86",
    };
    for name in PROGRAMS {
        let source = bpf_dir.join(format!("{name}.bpf.c"));
        let skeleton = out.join(format!("{name}.skel.rs"));
        if let Err(err) = SkeletonBuilder::new()
            .source(&source)
            .clang_args([
                "-I".into(),
                bpf_dir.clone().into_os_string(),
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
    println!("cargo:rerun-if-changed={}", bpf_dir.join("accounting.h").display());
    println!("cargo:rerun-if-changed={}", bpf_dir.join("thread_watch.h").display());
    println!("cargo:rerun-if-changed={}", bpf_dir.join("napi_watch.h").display());
    println!("cargo:rerun-if-changed={}", bpf_dir.join("io_watch.h").display());
    println!("cargo:rerun-if-changed={}", bpf_dir.join("gap_sources.h").display());
    println!("cargo:rerun-if-changed={}", bpf_dir.join("vmlinux.h").display());
}
