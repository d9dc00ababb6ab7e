// SPDX-License-Identifier: GPL-2.0
//
// Counts the NAPI polls of a few threaded-NAPI kthreads (the bh-budget
// controller's P(k) and its backlog proxy): per kthread, the polls, the
// packets they processed (`napi:napi_poll`'s `work`), the polls that used
// their whole budget, and, for veth, the packets left in the receive ring
// right after the poll. Nothing goes to user space per event: it reads
// the map at each period boundary. Tracepoints only (no kprobes here).

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "napi_watch.h"

char LICENSE[] SEC("license") = "GPL";

// The address of veth_poll (from /proc/kallsyms, set by user space after
// loading; 0: unknown). A NAPI whose
// poll function it is sits first in a struct veth_rq, whose ring we read.
volatile __u64 veth_poll_addr;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NAPI_WATCH_MAX);
	__type(key, __u32);
	__type(value, struct napi_polls);
} polls SEC(".maps");

static __always_inline __s64 veth_ring_left(struct napi_struct *napi)
{
	// veth built as a module without BTF: no ring to read (the verifier
	// drops the branch below).
	if (!bpf_core_type_exists(struct veth_rq))
		return -1;
	if (!veth_poll_addr || (__u64)BPF_CORE_READ(napi, poll) != veth_poll_addr)
		return -1;
	// struct veth_rq begins with its xdp_napi.
	struct veth_rq *rq = (struct veth_rq *)napi;
	int producer = BPF_CORE_READ(rq, xdp_ring.producer);
	int head = BPF_CORE_READ(rq, xdp_ring.consumer_head);
	int size = BPF_CORE_READ(rq, xdp_ring.size);
	if (size <= 0)
		return -1;
	int left = producer - head;
	if (left < 0)
		left += size;
	return left;
}

SEC("tp_btf/napi_poll")
int BPF_PROG(on_napi_poll, struct napi_struct *napi, int work, int budget)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct napi_polls *p = bpf_map_lookup_elem(&polls, &tid);

	if (!p)
		return 0;
	p->polls++;
	if (work > 0)
		p->work += work;
	if (work >= budget && budget > 0)
		p->full_polls++;
	p->last_ts = bpf_ktime_get_ns();
	p->last_work = work > 0 ? work : 0;
	p->last_budget = budget > 0 ? budget : 0;
	p->last_ring = veth_ring_left(napi);
	return 0;
}
