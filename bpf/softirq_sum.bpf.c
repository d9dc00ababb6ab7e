// SPDX-License-Identifier: GPL-2.0
//
// The plain reference irqlab's accounting is checked against: the sum of
// softirq_exit - softirq_entry per vector, exactly what a bpftrace
// one-liner or bcc's softirqs tool computes (sum_entry/sum_exit). Nested
// hard IRQ time is included here (the accounting excludes it and reports
// it separately).
//
// Every program attached to a tracepoint reads the clock at its own
// moment: the programs run one after the other in the order they were
// attached. sum_entry/sum_exit are attached before the accounting and
// last_entry/last_exit after it, so at each softirq boundary the
// accounting reads the clock somewhere in between. The last pair sums,
// per vector, how far its clock is past the first pair's at the entry
// (window_in_ns) and at the exit (window_out_ns). The same plain sum read
// at the last position would be sum + window_out - window_in: how much
// the sum moves between the two positions the accounting lies between.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "accounting.h"

char LICENSE[] SEC("license") = "GPL";

// Set by user space once every program of the session is attached: the
// same start as the accounting's, so both sum over the same interval.
volatile u64 start_ns;

struct sum_state {
	__u64 entered_ns;      /* first pair: entry of the softirq running (0: not summed) */
	__u64 exited_ns;       /* first pair: exit of the softirq just left (0: none) */
	__u64 last_entered_ns; /* last pair: entry of the softirq running (0: not seen) */
	__u64 pending_in_ns;   /* its entry window, added at its exit */
	__u64 count;           /* softirqs summed */
	__u64 windows;         /* softirqs whose windows were summed */
	__u64 sum_ns[VECTOR_SLOTS];
	__u64 max_ns[VECTOR_SLOTS]; /* the longest of them */
	__u64 window_in_ns[VECTOR_SLOTS];
	__u64 window_out_ns[VECTOR_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct sum_state);
} softirq_sums SEC(".maps");

static __always_inline struct sum_state *state(void)
{
	u32 zero = 0;
	return bpf_map_lookup_elem(&softirq_sums, &zero);
}

SEC("tp_btf/softirq_entry")
int BPF_PROG(sum_entry, unsigned int vec)
{
	u64 now = bpf_ktime_get_ns();
	u64 start = start_ns;
	if (!start || now < start)
		return 0;
	struct sum_state *s = state();
	if (s)
		s->entered_ns = now;
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(sum_exit, unsigned int vec)
{
	u64 now = bpf_ktime_get_ns();
	struct sum_state *s = state();
	if (!s || !s->entered_ns)
		return 0;
	u64 d = now - s->entered_ns;
	u32 v = vec & (VECTOR_SLOTS - 1);
	s->sum_ns[v] += d;
	s->count++;
	if (d > s->max_ns[v])
		s->max_ns[v] = d;
	s->entered_ns = 0;
	s->exited_ns = now;
	return 0;
}

SEC("tp_btf/softirq_entry")
int BPF_PROG(last_entry, unsigned int vec)
{
	u64 now = bpf_ktime_get_ns();
	struct sum_state *s = state();
	if (!s)
		return 0;
	s->last_entered_ns = 0;
	if (s->entered_ns && now >= s->entered_ns) {
		s->last_entered_ns = now;
		s->pending_in_ns = now - s->entered_ns;
	}
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(last_exit, unsigned int vec)
{
	u64 now = bpf_ktime_get_ns();
	struct sum_state *s = state();
	if (!s)
		return 0;
	if (s->last_entered_ns && s->exited_ns && now >= s->exited_ns) {
		u32 v = vec & (VECTOR_SLOTS - 1);
		s->window_in_ns[v] += s->pending_in_ns;
		s->window_out_ns[v] += now - s->exited_ns;
		s->windows++;
	}
	s->last_entered_ns = 0;
	s->exited_ns = 0;
	return 0;
}
