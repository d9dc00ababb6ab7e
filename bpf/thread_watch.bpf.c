// SPDX-License-Identifier: GPL-2.0
//
// Watches a few threads (a driver thread under a live server, for
// example): each switch in, switch out and wake-up of a watched thread goes
// to user space as an event with the kernel's timestamp, and the thread's
// total on-CPU time is kept in the program's mapped data (`slots`). The
// decisions (budget exhausted, replenishment due, the kthreads' priority)
// are made in user space by the shared policy code; this program
// observes, and at most says when a sum user space gave it was reached
// (the budget signal) or when the highest waiter changed (the waiter
// filter), below. Tracepoints only: this kernel has no kprobes.

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
// The waiter filter (process-aware's controller; set with `silent`): a
// watched thread that switches out to sleep inside one of `receive_calls`
// (system call numbers, the first `receive_calls_n`) waits for data, at
// the key of its scheduling, rank * 16 + policy (the controller's `rank`:
// SCHED_DEADLINE 1000, FIFO/RR 100 + priority, OTHER/BATCH -nice, IDLE
// -100); its wake-up or next switch in ends the wait. The controller only
// needs to hear when the kthreads' scheduling must change: the highest
// waiting key, else `floor_key`. One WATCH_DECISION record per change of
// that key (`signalled_key`), where reading /proc/TID/syscall at every
// block of a receiver under a flood cost the controller half a CPU
// (issue 42). The system call is the one /proc/TID/syscall shows: the
// number the task entered the kernel with (orig_ax, x86-64).
volatile __u32 waiter_filter;
volatile __s32 floor_key;
volatile __s32 signalled_key;
volatile __u64 receive_waits;
volatile __u32 receive_calls_n;
volatile __s64 receive_calls[WATCH_MAX_CALLS];
// Lazy mode (the sporadic server's controller): events are written
// without waking user space, which reads them when it wakes anyway (on its
// own timer: an exhaustion or a replenishment it computed), except the
// start of a run of a thread user space put in `wake_on_start`, its
// wake-up and its switch in (tids; 0: an empty slot): the mapped data,
// written without a system call. The wake-up counts because this kernel
// does not always trace the switch in that follows it: under a flood
// (Linux 6.18, this VM) about one in 400 runs of a NAPI kthread showed a
// wake-up and a block, the runtime clock grown between, and no switch in
// to the tracepoint, in bursts of up to a few hundred. Under a
// flood a served kthread wakes, runs and blocks thousands of times a
// second; waking the controller at each of those events cost it two
// thirds of a CPU (issue 42).
volatile __u32 lazy;
volatile __u32 wake_on_start[WATCH_MAX];
// Touched atomically before the waiters are looked at: a full barrier, so
// that of two CPUs changing waiters at once at least one sees both.
volatile __u64 decisions_looked;

// Each watched thread's state, in the mapped data: user space reads it
// with plain loads, where a map lookup is a system call (copying the value
// out): the controllers read it several times a period, and those system
// calls were about 45% of bh-budget's own CPU time (issue 42). User space
// picks a free slot, fills it, then adds the thread to `slot_of`.
struct watched slots[WATCH_MAX];

// Watched thread id -> its index in `slots`.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, WATCH_MAX);
	__type(key, __u32);
	__type(value, __u32);
} slot_of SEC(".maps");

static __always_inline struct watched *at_slot(__u32 i)
{
	if (i >= WATCH_MAX)
		return NULL;
	return &slots[i];
}

static __always_inline struct watched *watched_thread(__u32 tid)
{
	__u32 *i = bpf_map_lookup_elem(&slot_of, &tid);
	return i ? at_slot(*i) : NULL;
}

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

// The ring's record type, named in BTF so that the skeleton generates it
// for user space (types::watch_event).
struct watch_event watch_event_btf;

static __always_inline void send_flags(__u32 tid, __u32 kind, __u64 now, __u64 value, __u64 flags)
{
	struct watch_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&lost_events, 1);
		return;
	}
	e->ts = now;
	e->ran_ns = value;
	e->tid = tid;
	e->kind = kind;
	e->cpu = bpf_get_smp_processor_id();
	e->pad = 0;
	bpf_ringbuf_submit(e, flags);
}

static __always_inline void send(__u32 tid, __u32 kind, __u64 now, __u64 value)
{
	send_flags(tid, kind, now, value, BPF_RB_FORCE_WAKEUP);
}

static __always_inline int wakes_on_start(__u32 tid)
{
	for (int i = 0; i < WATCH_MAX; i++)
		if (wake_on_start[i] == tid)
			return 1;
	return 0;
}

static __always_inline void emit(__u32 tid, __u32 kind, __u64 now, __u64 ran_ns)
{
	if (silent)
		return;
	if (lazy && !((kind == WATCH_IN || kind == WATCH_WAKEUP) && wakes_on_start(tid))) {
		send_flags(tid, kind, now, ran_ns, BPF_RB_NO_WAKEUP);
		return;
	}
	// Always wake the reader (send). With the default (adaptive)
	// notification a record submitted while user space is mid-way through
	// consuming wakes nobody; one live server run let its thread go 5 ms at
	// its high level, as if the controller had slept through the thread's
	// start. Not seen with forced wake-ups.
	send(tid, kind, now, ran_ns);
}

static __always_inline int in_receive_call(struct task_struct *p)
{
#if defined(__TARGET_ARCH_x86)
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(p);
	__s64 nr = BPF_CORE_READ(regs, orig_ax);
	__u32 n = receive_calls_n;

	for (int i = 0; i < WATCH_MAX_CALLS; i++) {
		if (i >= n)
			break;
		if (receive_calls[i] == nr)
			return 1;
	}
#endif
	return 0;
}

// The key of a task's scheduling: its rank * 16 + its policy.
static __always_inline __s32 wait_key_of(struct task_struct *p)
{
	__u32 policy = BPF_CORE_READ(p, policy);
	__s32 rank;

	if (policy == 6) // SCHED_DEADLINE
		rank = 1000;
	else if (policy == 1 || policy == 2) // SCHED_FIFO, SCHED_RR
		rank = 100 + (__s32)BPF_CORE_READ(p, rt_priority);
	else if (policy == 5) // SCHED_IDLE
		rank = -100;
	else // SCHED_OTHER, SCHED_BATCH: -nice
		rank = 120 - BPF_CORE_READ(p, static_prio);
	return rank * 16 + (__s32)policy;
}

struct best_ctx {
	__s32 best;
	__u32 any;
};

static long highest_waiting(struct bpf_map *map, __u32 *tid, __u32 *slot, struct best_ctx *c)
{
	struct watched *w = at_slot(*slot);

	if (w && w->waiting && (!c->any || w->wait_key > c->best)) {
		c->best = w->wait_key;
		c->any = 1;
	}
	return 0;
}

// After a wait began or ended: one record when the key changed.
static __always_inline void decide(__u32 tid, __u64 now)
{
	struct best_ctx c = { .best = 0, .any = 0 };

	__sync_fetch_and_add(&decisions_looked, 1);
	bpf_for_each_map_elem(&slot_of, highest_waiting, &c, 0);
	__s32 key = c.any ? c.best : floor_key;
	if (key == signalled_key)
		return;
	signalled_key = key;
	send(tid, WATCH_DECISION, now, (__u64)(__s64)key);
}

// A watched thread woke or runs again: its wait, if any, is over.
static __always_inline void wait_ends(struct watched *w, __u32 tid, __u64 now)
{
	if (waiter_filter && w->waiting) {
		w->waiting = 0;
		decide(tid, now);
	}
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
	struct watched *w = watched_thread(prev_tid);

	// A thread runs on one CPU at a time, so its entry has one writer.
	// The scheduler has brought prev's runtime clock up to date before
	// this tracepoint.
	if (w) {
		w->ran_ns = runtime_since(w, prev);
		w->on_since = 0;
		if (mark_ns && now >= mark_ns && w->off_after_mark < mark_ns)
			w->off_after_mark = now;
		emit(prev_tid, prev_state == 0 ? WATCH_PREEMPTED : WATCH_BLOCKED, now, w->ran_ns);
		if (waiter_filter && prev_state != 0 && !w->waiting && in_receive_call(prev)) {
			// The key before the flag: user space reads the slot with
			// plain loads and takes the key once the flag is set.
			w->wait_key = wait_key_of(prev);
			asm volatile("" ::: "memory");
			w->waiting = 1;
			__sync_fetch_and_add(&receive_waits, 1);
			decide(prev_tid, now);
		}
	}
	w = watched_thread(next_tid);
	if (w) {
		w->ran_ns = runtime_since(w, next);
		w->on_since = now;
		w->switches_in++;
		emit(next_tid, WATCH_IN, now, w->ran_ns);
		wait_ends(w, next_tid, now);
	}
	return 0;
}

static __always_inline int woken(struct task_struct *p)
{
	__u32 tid = p->pid;
	struct watched *w = watched_thread(tid);

	if (w) {
		__u64 now = bpf_ktime_get_ns();
		emit(tid, WATCH_WAKEUP, now, w->ran_ns);
		wait_ends(w, tid, now);
	}
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

static long add_ran(struct bpf_map *map, __u32 *tid, __u32 *slot, struct sum_ctx *c)
{
	struct watched *w = at_slot(*slot);

	if (!w)
		return 0;
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
	if (!bpf_map_lookup_elem(&slot_of, &tid))
		return 0;
	struct sum_ctx c = { .now = bpf_ktime_get_ns(), .sum = 0 };
	bpf_for_each_map_elem(&slot_of, add_ran, &c, 0);
	if (c.sum < at)
		return 0;
	// Two kthreads ending polls at once on two CPUs may both send one:
	// user space reads the sum again either way.
	budget_signalled = 1;
	send(tid, WATCH_BUDGET, c.now, c.sum);
	return 0;
}
