//! The generated BPF skeletons and header constants (see build.rs).

pub mod accounting {
    irqlab_host::bpf_program!("accounting");
    pub use consts::*;
    pub use skel::*;
}

pub mod softirq_sum {
    irqlab_host::bpf_program!("softirq_sum", no_header);
    pub use skel::*;
}
