// SPDX-License-Identifier: GPL-2.0
//
// Watches a few threads (a driver thread under a live server, for
// example): each switch in, switch out and wake-up of a watched thread goes
// to user space as an event with the kernel's timestamp, and the thread's
// total on-CPU time is kept in a map. The decisions (budget exhausted,
// replenishment due) are made in user space by the shared policy code;
// this program observes, and at most says when a sum user space gave it
// was reached (the budget signal, below). Tracepoints only: this kernel
// has no kprobes.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "thread_watch.h"

char LICENSE[] SEC("license") = "GPL";

// Events the ring buffer had no room for (user space fell behind).
volatile __u64 lost_events;
// Set by user space when it only reads the totals: no events, no wake-ups
// (a thread that switches thousands of times a second would otherwise wake
// the reader as often, and the reader would perturb what it watches).
volatile __u32 silent;
// Set by user space (CLOCK_MONOTONIC ns; 0: none): each watched thread's
// first switch out at or after it is kept (`off_after_mark`), so that user
// space learns when a thread it lowered left the CPU without polling.
volatile __u64 mark_ns;
// The budget signal (bh-budget's controller): user space sets
// `budget_at_ns`, the watched threads' summed on-CPU time at which its
// period's threshold is reached, then clears `budget_signalled`. At the
// end of each NAPI poll a watched thread runs, the sum (running threads'
// runs so far included) is compared with it, and the first time it is
// reached one WATCH_BUDGET record wakes user space, silent or not. A
// threaded NAPI poll runs with bottom halves off and is not preempted, so
// its end is the first moment a lowered kthread can leave the CPU anyway;
// user space sleeps until then instead of looking on a timer.
volatile __u64 budget_at_ns;
volatile __u32 budget_signalled;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, WATCH_MAX);
	__type(key, __u32);
	__type(value, struct watched);
} watched SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

// The ring's record type, named in BTF so that the skeleton generates it
// for user space (types::watch_event).
struct watch_event watch_event_btf;

static __always_inline void emit(__u32 tid, __u32 kind, __u64 now, __u64 ran_ns)
{
	if (silent)
		return;
	struct watch_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&lost_events, 1);
		return;
	}
	e->ts = now;
	e->ran_ns = ran_ns;
	e->tid = tid;
	e->kind = kind;
	e->cpu = bpf_get_smp_processor_id();
	e->pad = 0;
	// Always wake the reader. With the default (adaptive) notification a
	// record submitted while user space is mid-way through consuming wakes
	// nobody; one live server run let its thread go 5 ms at its high level,
	// as if the controller had slept through the thread's start. Not seen
	// with forced wake-ups.
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

static __always_inline __u64 runtime_since(struct watched *w, struct task_struct *p)
{
	__u64 rt = BPF_CORE_READ(p, se.sum_exec_runtime);
	return rt > w->base_rt ? rt - w->base_rt : 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next, unsigned int prev_state)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 prev_tid = prev->pid;
	__u32 next_tid = next->pid;
	struct watched *w = bpf_map_lookup_elem(&watched, &prev_tid);

	// A thread runs on one CPU at a time, so its entry has one writer.
	// The scheduler has brought prev's runtime clock up to date before
	// this tracepoint.
	if (w) {
		w->ran_ns = runtime_since(w, prev);
		w->on_since = 0;
		if (mark_ns && now >= mark_ns && w->off_after_mark < mark_ns)
			w->off_after_mark = now;
		emit(prev_tid, prev_state == 0 ? WATCH_PREEMPTED : WATCH_BLOCKED, now, w->ran_ns);
	}
	w = bpf_map_lookup_elem(&watched, &next_tid);
	if (w) {
		w->ran_ns = runtime_since(w, next);
		w->on_since = now;
		w->switches_in++;
		emit(next_tid, WATCH_IN, now, w->ran_ns);
	}
	return 0;
}

static __always_inline int woken(struct task_struct *p)
{
	__u32 tid = p->pid;
	struct watched *w = bpf_map_lookup_elem(&watched, &tid);

	if (w)
		emit(tid, WATCH_WAKEUP, bpf_ktime_get_ns(), w->ran_ns);
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(on_wakeup, struct task_struct *p) { return woken(p); }

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(on_wakeup_new, struct task_struct *p) { return woken(p); }

struct sum_ctx {
	__u64 now;
	__u64 sum;
};

static long add_ran(struct bpf_map *map, __u32 *tid, struct watched *w, struct sum_ctx *c)
{
	c->sum += w->ran_ns;
	if (w->on_since && c->now > w->on_since)
		c->sum += c->now - w->on_since;
	return 0;
}

SEC("tp_btf/napi_poll")
int BPF_PROG(on_napi_poll, struct napi_struct *napi, int work, int budget)
{
	__u64 at = budget_at_ns;
	if (!at || budget_signalled)
		return 0;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	if (!bpf_map_lookup_elem(&watched, &tid))
		return 0;
	struct sum_ctx c = { .now = bpf_ktime_get_ns(), .sum = 0 };
	bpf_for_each_map_elem(&watched, add_ran, &c, 0);
	if (c.sum < at)
		return 0;
	// Two kthreads ending polls at once on two CPUs may both send one:
	// user space reads the sum again either way.
	budget_signalled = 1;
	struct watch_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&lost_events, 1);
		return 0;
	}
	e->ts = c.now;
	e->ran_ns = c.sum;
	e->tid = tid;
	e->kind = WATCH_BUDGET;
	e->cpu = bpf_get_smp_processor_id();
	e->pad = 0;
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
	return 0;
}
