//! The measurements' BPF programs (`bpf/` at the workspace root): the
//! accounting, its softirq sum, and the probe's gap-source monitor.

fn main() {
    irqlab_bpf_build::build(&["accounting", "gap_sources", "softirq_sum"]);
}
