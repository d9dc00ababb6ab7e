//! Which raw tracepoints the running kernel has: a `tp_btf` program needs
//! the `btf_trace_<name>` typedef in the kernel's BTF. Asked by every BPF
//! user (the accounting, the gap-source monitor), answered from one cache.

use std::collections::HashMap;
use std::sync::Mutex;

/// The x86 system vectors' tracepoints (the local timer, reschedule and
/// call-function IPIs), by the program names the accounting and the
/// gap-source monitor both give them. Optional: not every kernel has them.
pub const SYSTEM_VECTORS: &[(&str, &str)] = &[
    ("on_timer_entry", "local_timer_entry"),
    ("on_timer_exit", "local_timer_exit"),
    ("on_resched_entry", "reschedule_entry"),
    ("on_resched_exit", "reschedule_exit"),
    ("on_callfn_entry", "call_function_entry"),
    ("on_callfn_exit", "call_function_exit"),
    ("on_callfn1_entry", "call_function_single_entry"),
    ("on_callfn1_exit", "call_function_single_exit"),
];

/// Those of `names` the running kernel lacks, in their order. Parsing
/// vmlinux's BTF takes tens of ms and the answer cannot change while we
/// run, so each name is looked up once per process.
pub fn missing<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Vec<String>, String> {
    static KNOWN: Mutex<Option<HashMap<String, bool>>> = Mutex::new(None);
    let names: Vec<&str> = names.into_iter().collect();
    let mut known = KNOWN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let known = known.get_or_insert_with(HashMap::new);
    if names.iter().any(|n| !known.contains_key(*n)) {
        let btf = libbpf_rs::btf::Btf::from_vmlinux().map_err(|e| format!("cannot read the kernel's BTF: {e}"))?;
        for n in &names {
            known
                .entry((*n).to_string())
                .or_insert_with(|| btf.type_by_name::<libbpf_rs::btf::BtfType>(&format!("btf_trace_{n}")).is_some());
        }
    }
    Ok(names.into_iter().filter(|n| !known[*n]).map(String::from).collect())
}
