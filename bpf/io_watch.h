// SPDX-License-Identifier: GPL-2.0
// Shared between io_watch.bpf.c and user space (crates/control/src/monitor/io.rs).
#ifndef IRQLAB_IO_WATCH_H
#define IRQLAB_IO_WATCH_H

#define IO_WATCH_PROCESSES 4096

// The class user space gives a process (key: tgid).
#define IO_FOREGROUND 1
#define IO_BACKGROUND 2

#define IO_ISSUE 1    // the request went to the driver (block_rq_issue)
#define IO_COMPLETE 2 // the driver completed it (block_rq_complete)
// Its struct request was issued again without a completion seen: it
// completed before now (io_watch.bpf.c, on_rq_issue).
#define IO_COMPLETE_INFERRED 3
// A packet dropped before the driver took it (kfree_skb).
#define IO_DROPPED 4

struct io_watch_event {
	__u64 ts_ns;  // bpf_ktime_get_ns (CLOCK_MONOTONIC)
	__u64 sector; // the request's first sector, or the packet's skb address
	__u32 bytes;
	__u32 tgid;   // the process that queued the request's first bio
	__u8 class;   // IO_FOREGROUND or IO_BACKGROUND
	__u8 kind;    // IO_ISSUE or IO_COMPLETE
	__u8 pad[6];
};

#endif
