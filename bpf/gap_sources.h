// SPDX-License-Identifier: GPL-2.0
// Shared between gap_sources.bpf.c and its reader (crates/measure/src/probe/sources.rs
// reads the skeleton's generated types, not byte offsets).
#ifndef IRQLAB_GAP_SOURCES_H
#define IRQLAB_GAP_SOURCES_H

#define GS_KIND_IRQ 1
#define GS_KIND_SOFTIRQ 2
#define GS_KIND_THREAD 3
// x86 system vectors (local timer, IPIs): hard IRQ context with no IRQ
// number; `id` is one of the GS_SYSVEC_* below.
#define GS_KIND_SYSVEC 4

#define GS_SYSVEC_LOCAL_TIMER 1
#define GS_SYSVEC_RESCHEDULE 2
#define GS_SYSVEC_CALL_FUNCTION 3
#define GS_SYSVEC_CALL_FUNCTION_SINGLE 4

// One stretch of the probed CPU's time that one context ran, exclusively:
// the innermost hard IRQ, else the running softirq vector, else the
// current thread. Consecutive segments of a CPU never overlap.
struct gs_segment {
	__u64 start_ns; // CLOCK_MONOTONIC (bpf_ktime_get_ns)
	__u64 end_ns;
	__u32 kind;        // GS_KIND_*
	__u32 id;          // IRQ number, softirq vector, sysvec, or thread id
	__u32 tgid;        // threads: process id
	__u32 policy;      // threads: SCHED_* number
	__u32 rt_priority; // threads: 1..99 under FIFO/RR
	__s32 nice;        // threads: static_prio - 120
	__u32 kthread;     // threads: 1 for a kernel thread
	__u32 pad;
	char name[16];     // IRQ action name or thread comm
};

// Where the CPU is, between two boundary events.
struct gs_state {
	__u64 last_ts;   // start of the segment in progress (0: none yet)
	__u32 hard_depth;
	__u32 hard_kind; // GS_KIND_IRQ or GS_KIND_SYSVEC
	__u32 hard_id;
	__u32 soft;      // running softirq vector + 1 (0: none; the map starts zeroed)
	char irq_name[16];
};

#endif
