//! The controllers' BPF monitors (`bpf/` at the workspace root): block and
//! egress requests, NAPI polls, thread switches and wake-ups.

fn main() {
    irqlab_bpf_build::build(&["io_watch", "napi_watch", "thread_watch"]);
}
