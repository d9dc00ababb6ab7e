// SPDX-License-Identifier: GPL-2.0
// Shared between napi_watch.bpf.c and user space (crates/control/src/monitor/napi.rs).
#ifndef IRQLAB_NAPI_WATCH_H
#define IRQLAB_NAPI_WATCH_H

#define NAPI_WATCH_MAX 64

// Per watched NAPI kthread (key: its tid), updated by its own polls only
// (one writer: a thread runs on one CPU at a time).
struct napi_polls {
	__u64 polls;      // napi_poll calls made by the thread
	__u64 work;       // packets they processed (the tracepoint's `work`)
	__u64 full_polls; // polls that used their whole budget (more pending)
	__u64 last_ts;    // bpf_ktime_get_ns of the last poll
	__u32 last_work;
	__u32 last_budget;
	// veth only: packets left in the device's ring right after the last
	// poll (ptr_ring producer - consumer_head); -1 when unknown.
	__s64 last_ring;
};

#endif
