//! The generated BPF skeletons (see build.rs).

#![allow(clippy::all, clippy::pedantic, dead_code, unused_imports, non_camel_case_types, non_snake_case)]

pub mod accounting {
    include!(concat!(env!("OUT_DIR"), "/accounting.skel.rs"));
}

pub mod softirq_sum {
    include!(concat!(env!("OUT_DIR"), "/softirq_sum.skel.rs"));
}
