// SPDX-License-Identifier: GPL-2.0
// Shared between thread_watch.bpf.c and user space (crates/control/src/monitor).
#ifndef IRQLAB_THREAD_WATCH_H
#define IRQLAB_THREAD_WATCH_H

#define WATCH_MAX 64

// What happened to a watched thread (`kind`); #defines, so that user
// space gets them generated (irqlab-bpf-build).
#define WATCH_IN 1        // switched in: it runs from `ts`
#define WATCH_PREEMPTED 2 // switched out still runnable
#define WATCH_BLOCKED 3   // switched out to sleep (or exit)
#define WATCH_WAKEUP 4    // woken (runnable from `ts`)
#define WATCH_BUDGET 5    // the watched threads' time reached `budget_at_ns` (at a NAPI poll's end)
#define WATCH_DECISION 6  // the waiter filter's key changed; `ran_ns` holds the new key (a signed value)

// Most receive-family system calls the waiter filter matches.
#define WATCH_MAX_CALLS 16

// Per watched thread, updated in the kernel.
struct watched {
	// On-CPU time since watching started, as of its last switch: its
	// scheduler runtime clock (se.sum_exec_runtime) minus `base_rt`. The
	// clock is exact at every switch, so a switch the kernel did not trace
	// loses nothing (some guest kernels hide a few).
	__u64 ran_ns;
	// When its current run started; 0 while it is not running.
	__u64 on_since;
	__u64 switches_in;
	// Its runtime clock when watching started (set by user space from
	// /proc/TID/schedstat).
	__u64 base_rt;
	// When it first left a CPU at or after the global `mark_ns` (user
	// space's mark, e.g. the moment it lowered the thread): older than the
	// mark until it has.
	__u64 off_after_mark;
	// The waiter filter: set while it sleeps in one of `receive_calls`,
	// with its scheduling's key (rank * 16 + policy) taken then.
	__u32 waiting;
	__s32 wait_key;
};

// One event, as the ring buffer delivers it.
struct watch_event {
	__u64 ts;     // bpf_ktime_get_ns (CLOCK_MONOTONIC)
	__u64 ran_ns; // the thread's ran_ns after this event
	__u32 tid;
	__u32 kind;   // one of WATCH_*
	__u32 cpu;
	__u32 pad;
};

#endif
