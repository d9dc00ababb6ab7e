//! Trial loads for readiness checks: doctor's "yes" for a BPF-based
//! command means its programs pass this kernel's verifier, not only that
//! the privileges and BTF are there (6.1 and 6.12 rejected a program 6.18
//! accepts, on its combined stack size).
//!
//! libbpf prints the verifier's log through its print callback; during a
//! trial that goes to a buffer instead of stderr, and a rejection is told
//! by its last line (the verifier's reason), not by the errno.

use crate::error::{Error, Result};
use libbpf_rs::PrintLevel;
use std::sync::Mutex;

/// libbpf's warnings while a trial runs (None: no trial running).
static CAPTURED: Mutex<Option<String>> = Mutex::new(None);
/// One trial at a time: libbpf's print callback is process-wide.
static TRIAL: Mutex<()> = Mutex::new(());

fn capture(_level: PrintLevel, msg: String) {
    if let Ok(mut captured) = CAPTURED.lock() {
        if let Some(buffer) = captured.as_mut() {
            buffer.push_str(&msg);
        }
    }
}

/// [`load`] for a skeleton opened as it is generated (no map resized, no
/// program left out): `builder`'s object opened, loaded into a scratch
/// storage and dropped.
pub fn load_skel<B>(what: &str, builder: B) -> Result<()>
where
    B: for<'obj> libbpf_rs::skel::SkelBuilder<'obj>,
{
    use libbpf_rs::skel::OpenSkel;
    let mut storage = crate::bpf::Storage::default();
    load(what, || {
        let open = builder.open(&mut storage.0).map_err(crate::bpf::err(&format!("opening {what}")))?;
        open.load().map(drop).map_err(crate::bpf::err(&format!("loading {what}")))
    })
}

/// Runs `load` (opens and loads a BPF object, then drops it) with libbpf's
/// messages kept from stderr. When it fails on a program the kernel
/// rejects, the error is exit 3 naming `what`, the program and the
/// verifier's reason; other failures come back as they are.
pub fn load(what: &str, load: impl FnOnce() -> Result<()>) -> Result<()> {
    let _one = TRIAL.lock().unwrap_or_else(|e| e.into_inner());
    *CAPTURED.lock().unwrap_or_else(|e| e.into_inner()) = Some(String::new());
    let previous = libbpf_rs::set_print(Some((PrintLevel::Warn, capture)));
    let outcome = load();
    libbpf_rs::set_print(previous);
    let log = CAPTURED.lock().unwrap_or_else(|e| e.into_inner()).take().unwrap_or_default();
    outcome.map_err(|err| match rejection(&log) {
        Some(reason) => Error::MissingKernelFeature { feature: format!("{what} loadable"), detail: reason },
        None => err,
    })
}

/// "the verifier rejects program P: REASON" from libbpf's warnings, when a
/// program failed to load.
fn rejection(log: &str) -> Option<String> {
    let program = log.lines().find_map(|line| {
        let rest = line.split("prog '").nth(1)?;
        let (name, tail) = rest.split_once('\'')?;
        tail.contains("load failed").then_some(name)
    })?;
    let verifier_log = log.split("-- BEGIN PROG LOAD LOG --").nth(1).map(|l| l.split("-- END PROG LOAD LOG --").next().unwrap_or(l));
    let reason = verifier_log.and_then(|l| l.lines().rev().map(str::trim).find(|line| is_reason(line)));
    Some(match reason {
        Some(reason) => format!("the kernel's BPF verifier rejects program {program}: {reason}"),
        None => format!("the kernel rejects program {program} (no verifier log)"),
    })
}

/// Whether a line of a verifier log says why, rather than tracing an
/// instruction, a register state or the statistics.
fn is_reason(line: &str) -> bool {
    let numbered = line.split_once(':').is_some_and(|(head, _)| !head.is_empty() && head.chars().all(|c| c.is_ascii_digit()));
    let state = line.starts_with('R') && line[1..].trim_start_matches(|c: char| c.is_ascii_digit()).starts_with(['=', '_']);
    !(line.is_empty()
        || numbered
        || state
        || line.starts_with(';')
        || line.starts_with("processed ")
        || line.starts_with("verification time")
        || line.starts_with("stack depth")
        || line.starts_with("from ")
        || line.starts_with("func#")
        || line.starts_with("last_idx")
        || line.starts_with("regs=")
        || line.starts_with("parent "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verifier_reason_is_the_last_line_that_is_not_a_trace() {
        // libbpf's warnings as 6.1's verifier left them (trimmed).
        let log = "libbpf: prog 'on_irq_entry': BPF program load failed: -EACCES\n\
                   libbpf: prog 'on_irq_entry': -- BEGIN PROG LOAD LOG --\n\
                   combined stack size of 4 calls is 544. Too large\n\
                   processed 12724 insns (limit 1000000) max_states_per_insn 8 total_states 662 peak_states 502 mark_read 24\n\
                   -- END PROG LOAD LOG --\n\
                   libbpf: prog 'on_irq_entry': failed to load: -EACCES\n";
        assert_eq!(
            rejection(log).unwrap(),
            "the kernel's BPF verifier rejects program on_irq_entry: combined stack size of 4 calls is 544. Too large"
        );
        let log = "libbpf: prog 'p': BPF program load failed: -EACCES\n-- BEGIN PROG LOAD LOG --\n\
                   0: R1=ctx() R10=fp0\n; x = *p;\n5: (79) r1 = *(u64 *)(r2 +0)\nR2 invalid mem access 'scalar'\n\
                   processed 6 insns\n-- END PROG LOAD LOG --\n";
        assert_eq!(rejection(log).unwrap(), "the kernel's BPF verifier rejects program p: R2 invalid mem access 'scalar'");
        assert_eq!(rejection("libbpf: failed to open object\n"), None);
    }
}
