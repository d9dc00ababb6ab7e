// SPDX-License-Identifier: GPL-2.0
//
// The plain reference irqlab's accounting is checked against: the sum of
// softirq_exit - softirq_entry per vector, exactly what a bpftrace
// one-liner or bcc's softirqs tool computes. Nested hard IRQ time is
// included here (the accounting excludes it and reports it separately).

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "accounting.h"

char LICENSE[] SEC("license") = "GPL";

// Set by user space once every program of the session is attached: the
// same start as the accounting's, so both sum over the same interval.
volatile u64 start_ns;

struct sum_state {
	__u64 entered_ns;
	__u64 sum_ns[VECTOR_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct sum_state);
} softirq_sums SEC(".maps");

SEC("tp_btf/softirq_entry")
int BPF_PROG(sum_entry, unsigned int vec)
{
	u64 now = bpf_ktime_get_ns();
	u64 start = start_ns;
	if (!start || now < start)
		return 0;
	u32 zero = 0;
	struct sum_state *s = bpf_map_lookup_elem(&softirq_sums, &zero);
	if (s)
		s->entered_ns = now;
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(sum_exit, unsigned int vec)
{
	u64 now = bpf_ktime_get_ns();
	u32 zero = 0;
	struct sum_state *s = bpf_map_lookup_elem(&softirq_sums, &zero);
	if (!s || !s->entered_ns)
		return 0;
	s->sum_ns[vec & (VECTOR_SLOTS - 1)] += now - s->entered_ns;
	s->entered_ns = 0;
	return 0;
}
