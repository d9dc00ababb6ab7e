// SPDX-License-Identifier: GPL-2.0
//
// Per-task interrupt accounting, aggregated in the kernel.
//
// Every CPU's timeline is cut into segments at each boundary event (hard IRQ
// handler entry/exit, softirq entry/exit, context switch). A segment is
// charged, exclusively, to the context that ran it: the innermost hard IRQ
// handler, else the running softirq vector, else the current task. So nested
// IRQs are never counted twice and, per CPU, run + stolen time of all tasks
// (the idle task included) adds up to wall time.
//
// Softirq time is also charged to the task it *served* (its beneficiary):
// the time since the last attribution point goes to the owner of the socket
// a packet was just queued to, or to the task a softirq just woke. What is
// left at softirq exit goes to the last beneficiary of that run, or to the
// orphan bucket when the run served nobody. Service kthreads (ksoftirqd,
// irq/, napi/) flagged by user space get the same treatment for their own
// run time.
//
// Nothing per event crosses to user space: everything lands in per-CPU maps
// that user space reads when it wants a snapshot. The hot path (IRQ and
// softirq boundaries, context switches among the few tasks a CPU is
// busy with, packets for the same socket) touches only the per-CPU state
// array, which the verifier inlines: each CPU keeps the charges of its
// TASK_SLOTS most recently run tasks there, and a task's sums reach its
// hash entry only when its slot is taken by another task.
//
// Some kernels do not trace every context switch (seen on a Firecracker
// guest kernel: no sched_switch fires when the VM agent's threads switch
// out). Every handler therefore checks that the task it finds current is
// the one the state says; when not, the switch was hidden, and the
// segment since the last event is split between the two tasks using the
// old task's own runtime clock (se.sum_exec_runtime), which the scheduler
// keeps exact at every switch.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "accounting.h"

char LICENSE[] SEC("license") = "GPL";

// Set by user space once every program is attached: the start of the
// measured interval (CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns). A
// CPU's first segment starts here; until it is set, nothing is counted
// (attaching takes milliseconds, and a hook attached before another would
// otherwise see only part of what happens meanwhile).
volatile u64 start_ns;

// Bumped whenever a socket changes owner, so per-CPU owner caches know
// when to look again.
volatile u64 owner_generation;

// Bumped by user space whenever it adds to service_threads, so the
// service flag cached in a task slot is looked up again.
volatile u64 service_generation;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct cpu_state);
} cpu_states SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct cpu_totals);
} cpu_totals SEC(".maps");

// Keyed by thread id; the idle task (tid 0) gets one slot per CPU for free.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, MAX_TASKS);
	__type(key, u32);
	__type(value, struct task_stats);
} task_stats SEC(".maps");

// Hard-IRQ time stolen from a task, split by IRQ line.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, MAX_TASK_IRQS);
	__type(key, struct task_irq_key);
	__type(value, u64);
} task_irq_ns SEC(".maps");

// Socket -> its owner: the thread last woken by a packet queued to it (or,
// for sockets open at the start, their process; see seed_socket_owners).
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_SOCKETS);
	__type(key, u64);
	__type(value, u32);
} sock_owner SEC(".maps");

// Threads whose run time is interrupt work done in task context
// (ksoftirqd, threaded IRQ handlers, threaded NAPI), written by user space.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SERVICE_THREADS);
	__type(key, u32);
	__type(value, u8);
} service_threads SEC(".maps");

static __always_inline struct cpu_state *this_cpu_state(void)
{
	u32 zero = 0;
	return bpf_map_lookup_elem(&cpu_states, &zero);
}

static __always_inline struct cpu_totals *this_cpu_totals(void)
{
	u32 zero = 0;
	return bpf_map_lookup_elem(&cpu_totals, &zero);
}

// The first value of a task's task_stats entry. A global, not a local:
// a zeroed struct task_stats on the stack costs its 216 bytes in every
// subprogram that may create an entry (take_slot, flush_served), and the
// 6.1 and 6.12 verifiers reject the program when the deepest chain of
// subprogram frames adds up past 512 bytes (6.18 gives tracing programs a
// private stack and does not).
static const struct task_stats zero_stats;

static __always_inline struct task_stats *stats_of(u32 tid)
{
	struct task_stats *s = bpf_map_lookup_elem(&task_stats, &tid);
	if (s)
		return s;
	bpf_map_update_elem(&task_stats, &tid, &zero_stats, BPF_NOEXIST);
	s = bpf_map_lookup_elem(&task_stats, &tid);
	if (!s) {
		struct cpu_totals *t = this_cpu_totals();
		if (t)
			t->dropped_tasks++;
	}
	return s;
}

#define PF_KTHREAD_FLAG 0x00200000

// Service threads are kernel threads; only those need the map lookup.
static __always_inline u32 is_service_thread(struct task_struct *p)
{
	if (!(p->flags & PF_KTHREAD_FLAG))
		return 0;
	u32 tid = p->pid;
	return bpf_map_lookup_elem(&service_threads, &tid) != NULL;
}

static __always_inline u64 exec_runtime(u64 p)
{
	if (!p)
		return 0;
	struct task_struct *t = (struct task_struct *)p;
	return BPF_CORE_READ(t, se.sum_exec_runtime);
}

static __always_inline struct task_acc *slot_at(struct cpu_state *st, u32 i)
{
	return &st->slots[i & (TASK_SLOTS - 1)];
}

static __always_inline struct task_acc *cur_acc(struct cpu_state *st)
{
	return slot_at(st, st->cur_slot);
}

// Functions marked __noinline run rarely (a slot taken over, a new task
// served, a hidden switch, a CPU's first event): as BPF subprograms they
// stay out of the hot path's code, which keeps each program a few hundred
// instructions instead of thousands and its instruction-cache footprint
// small.
static __noinline int add_irq_time(u32 tid, s32 irq, u64 delta)
{
	struct task_irq_key key = { .tid = tid, .irq = irq };
	u64 *ns = bpf_map_lookup_elem(&task_irq_ns, &key);
	if (ns)
		*ns += delta;
	else
		bpf_map_update_elem(&task_irq_ns, &key, &delta, BPF_NOEXIST);
	return 0;
}

// Hard-IRQ time of a task by line: one of IRQ_SLOTS per-slot entries, or
// straight to the hash map when all are taken by other lines.
static __always_inline void acc_irq_time(struct task_acc *a, s32 irq, u64 delta)
{
#pragma unroll
	for (int i = 0; i < IRQ_SLOTS; i++) {
		if (a->irq_ns[i] && a->irq[i] == irq) {
			a->irq_ns[i] += delta;
			return;
		}
	}
#pragma unroll
	for (int i = 0; i < IRQ_SLOTS; i++) {
		if (!a->irq_ns[i]) {
			a->irq[i] = irq;
			a->irq_ns[i] = delta;
			return;
		}
	}
	add_irq_time(a->tid, irq, delta);
}

// Adds what a slot holds to its task's hash entry and frees the slot.
static __always_inline void flush_slot(struct cpu_state *st, struct task_acc *a)
{
	if (!a->valid)
		return;
	st->flushes++;
	struct task_stats *s = stats_of(a->tid);
	if (s) {
		if (!s->comm[0]) {
			s->tgid = a->tgid;
			__builtin_memcpy(s->comm, a->comm, sizeof(s->comm));
		}
		s->run_ns += a->run_ns;
		s->hardirq_ns += a->hardirq_ns;
		s->switches_in += a->switches_in;
#pragma unroll
		for (int v = 0; v < NR_VECTORS; v++)
			s->softirq_ns[v] += a->softirq_ns[v];
	}
#pragma unroll
	for (int i = 0; i < IRQ_SLOTS; i++) {
		if (a->irq_ns[i])
			add_irq_time(a->tid, a->irq[i], a->irq_ns[i]);
	}
	__builtin_memset(a, 0, sizeof(*a));
	st->flushes++;
}

// A task that has no slot on this CPU takes the least recently used one,
// flushed first. Returns the slot's index.
static __noinline u32 take_slot(struct cpu_state *st, struct task_struct *p)
{
	u32 victim = 0;
	u64 oldest = ~0ULL;
#pragma unroll
	for (u32 i = 0; i < TASK_SLOTS; i++) {
		u64 used = st->slot_key[i] ? st->slot_used[i] : 0;
		if (used < oldest) {
			oldest = used;
			victim = i;
		}
	}
	victim &= TASK_SLOTS - 1;
	struct task_acc *a = slot_at(st, victim);
	flush_slot(st, a);
	u32 tid = p->pid;
	st->slot_key[victim] = tid + 1;
	a->valid = 1;
	a->tid = tid;
	a->tgid = p->tgid;
	bpf_probe_read_kernel_str(a->comm, sizeof(a->comm), p->comm);
	a->service_generation = ~0ULL;
	return victim;
}

// The slot of task `p` on this CPU: its own if it has one, else a new one.
static __always_inline struct task_acc *slot_for(struct cpu_state *st, struct task_struct *p)
{
	u32 key = p->pid + 1;
#pragma unroll
	for (u32 i = 0; i < TASK_SLOTS; i++) {
		if (st->slot_key[i] == key) {
			st->cur_slot = i;
			return &st->slots[i];
		}
	}
	u32 i = take_slot(st, p) & (TASK_SLOTS - 1);
	st->cur_slot = i;
	return &st->slots[i];
}

// `p` becomes the current task of this CPU.
static __always_inline void make_current(struct cpu_state *st, struct task_struct *p)
{
	struct task_acc *a = slot_for(st, p);
	a->switches_in++;
	st->slot_used[st->cur_slot & (TASK_SLOTS - 1)] = ++st->stamp;
	if (a->service_generation != service_generation) {
		a->service = is_service_thread(p);
		a->service_generation = service_generation;
	}
	st->service = a->service;
	st->cur_tid = p->pid;
	st->cur_task = (u64)p;
	st->cur_exec_start = p->se.sum_exec_runtime;
	st->cur_charged = 0;
	st->pending_ns = 0;
	st->beneficiary = 0;
	st->wake_sk = 0;
}

// Charges the segment [last_ts, now) to the context that ran it. Handlers
// that run with interrupts enabled (softirq, socket, waking) can be
// interrupted between reading the clock and getting here, and the IRQ's
// handlers move last_ts past their `now`: the boundary never goes back, or
// the IRQ's time would be counted twice.
static __always_inline void close_segment(struct cpu_state *st, u64 now)
{
	if (now <= st->last_ts)
		return;
	u64 delta = now - st->last_ts;
	st->last_ts = now;
	st->cur_charged += delta;
	struct task_acc *a = cur_acc(st);
	if (st->hard_depth) {
		a->hardirq_ns += delta;
		acc_irq_time(a, st->hard_irq, delta);
		if (st->soft_vec >= 0) {
			struct cpu_totals *t = this_cpu_totals();
			if (t)
				t->hardirq_in_softirq_ns += delta;
		}
	} else if (st->soft_vec >= 0) {
		u32 vec = st->soft_vec & (VECTOR_SLOTS - 1);
		a->softirq_ns[vec] += delta;
		st->pending_ns += delta;
	} else {
		a->run_ns += delta;
		if (st->service)
			st->pending_ns += delta;
	}
}

// Adds the time served to served_tid, kept per CPU, to its hash entry.
static __noinline int flush_served(struct cpu_state *st)
{
	if (!st->served_tid)
		return 0;
	st->flushes++;
	struct task_stats *b = stats_of(st->served_tid);
	if (b) {
#pragma unroll
		for (int v = 0; v < NR_VECTORS; v++)
			b->served_softirq_ns[v] += st->served_softirq_ns[v];
		b->served_by_thread_ns += st->served_thread_ns;
	}
#pragma unroll
	for (int v = 0; v < NR_VECTORS; v++)
		st->served_softirq_ns[v] = 0;
	st->served_thread_ns = 0;
	st->served_tid = 0;
	st->flushes++;
	return 0;
}

// Gives the attributable time since the last attribution point to `tid`.
// A flood usually serves one task again and again: its time stays in the
// per-CPU state until another task is served.
static __always_inline void serve(struct cpu_state *st, u32 tid)
{
	if (tid == 0)
		return;
	st->beneficiary = tid;
	if (!st->pending_ns)
		return;
	if (tid != st->served_tid) {
		flush_served(st);
		st->served_tid = tid;
	}
	if (st->soft_vec >= 0) {
		u32 vec = st->soft_vec & (VECTOR_SLOTS - 1);
		st->served_softirq_ns[vec] += st->pending_ns;
	} else {
		st->served_thread_ns += st->pending_ns;
	}
	st->pending_ns = 0;
}

// End of an attribution run (softirq exit, service thread switched out):
// the remainder goes to the run's last beneficiary, or is orphaned.
static __always_inline void end_attribution(struct cpu_state *st)
{
	if (st->beneficiary) {
		serve(st, st->beneficiary);
	} else if (st->pending_ns) {
		struct cpu_totals *t = this_cpu_totals();
		if (t) {
			if (st->soft_vec >= 0) {
				u32 vec = st->soft_vec & (VECTOR_SLOTS - 1);
				if (vec < NR_VECTORS)
					t->orphan_softirq_ns[vec] += st->pending_ns;
			} else {
				t->orphan_thread_ns += st->pending_ns;
			}
		}
	}
	st->pending_ns = 0;
	st->beneficiary = 0;
}

// Whether beneficiary events on this CPU right now are interrupt work
// done for someone: inside a softirq (not in a hard IRQ nested in it), or
// in a service thread's own context.
static __always_inline int attributing(struct cpu_state *st)
{
	return st->hard_depth == 0 && (st->soft_vec >= 0 || st->service);
}

static __always_inline void note_anomaly(void)
{
	struct cpu_totals *t = this_cpu_totals();
	if (t)
		t->anomalies++;
}

// `cur` is current on this CPU but the state says another task is: the
// kernel switched without tracing it. The old task ran from its last
// known point for as long as its runtime clock advanced beyond what it
// was already charged; the rest of the segment since the last event is
// left open for `cur`.
static __noinline int repair_hidden_switch(struct cpu_state *st, u64 now, struct task_struct *cur)
{
	struct cpu_totals *t = this_cpu_totals();
	if (t)
		t->hidden_switches++;
	u64 segment = now > st->last_ts ? now - st->last_ts : 0;
	u64 ran = exec_runtime(st->cur_task) - st->cur_exec_start;
	u64 old_part = ran > st->cur_charged ? ran - st->cur_charged : 0;
	if (old_part > segment)
		old_part = segment;
	close_segment(st, st->last_ts + old_part);
	if (st->service)
		end_attribution(st);
	make_current(st, cur);
	// A switch happens in task context: whatever the state says about
	// IRQ or softirq context belonged to the old task.
	st->hard_depth = 0;
	st->soft_vec = -1;
	return 0;
}

// A CPU's first event: its first segment starts at start_ns. Returns 0
// while start_ns is not yet set (nothing is counted until then).
static __noinline int init_cpu(struct cpu_state *st, struct task_struct *cur)
{
	if (!start_ns)
		return 0;
	st->initialised = 1;
	st->last_ts = start_ns;
	st->soft_vec = -1;
	st->hard_depth = 0;
	make_current(st, cur);
	cur_acc(st)->switches_in = 0;
	return 1;
}

// The state of this CPU at an event, with `cur` the task current now.
// The first event on a CPU starts its first segment at start_ns.
static __always_inline struct cpu_state *state_at(u64 now, struct task_struct *cur)
{
	struct cpu_state *st = this_cpu_state();
	if (!st)
		return NULL;
	if (!st->initialised) {
		if (!init_cpu(st, cur))
			return NULL;
	} else if (st->cur_task != (u64)cur) {
		// Compared by address: reading cur->pid would touch a line of the
		// task_struct that an IRQ arriving at an idle CPU finds cold.
		repair_hidden_switch(st, now, cur);
	}
	return st;
}

static __always_inline struct cpu_state *state_now(u64 now)
{
	return state_at(now, bpf_get_current_task_btf());
}

// Each handler reads the clock first, so its timestamp is as close to the
// event as possible whatever else is attached to the same tracepoint.
static __always_inline void hard_enter(s32 irq)
{
	u64 now = bpf_ktime_get_ns();
	struct cpu_state *st = state_now(now);
	if (!st)
		return;
	close_segment(st, now);
	// Hard IRQ handlers run with interrupts off and never nest; a handler
	// still open means its exit was not seen (on the CI guest kernel about
	// one call-function-single IPI in fifty has no exit event).
	if (st->hard_depth) {
		note_anomaly();
		st->hard_depth = 0;
	}
	st->hard_irq = irq;
	st->hard_depth = 1;
}

static __always_inline void hard_exit(s32 irq)
{
	u64 now = bpf_ktime_get_ns();
	struct cpu_state *st = state_now(now);
	if (!st)
		return;
	close_segment(st, now);
	if (!st->hard_depth) {
		// Its entry happened before we attached (or was missed).
		return;
	}
	if (st->hard_irq != irq)
		note_anomaly();
	st->hard_depth = 0;
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(on_irq_entry, int irq, struct irqaction *action)
{
	hard_enter(irq);
	return 0;
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(on_irq_exit, int irq, struct irqaction *action, int ret)
{
	hard_exit(irq);
	return 0;
}

// x86 system vectors do not pass through irq_handler_entry; they get
// pseudo IRQ numbers (negative) that user space names.
SEC("tp_btf/local_timer_entry")
int BPF_PROG(on_timer_entry, int vector) { hard_enter(IRQ_LOCAL_TIMER); return 0; }
SEC("tp_btf/local_timer_exit")
int BPF_PROG(on_timer_exit, int vector) { hard_exit(IRQ_LOCAL_TIMER); return 0; }
SEC("tp_btf/reschedule_entry")
int BPF_PROG(on_resched_entry, int vector) { hard_enter(IRQ_RESCHEDULE); return 0; }
SEC("tp_btf/reschedule_exit")
int BPF_PROG(on_resched_exit, int vector) { hard_exit(IRQ_RESCHEDULE); return 0; }
SEC("tp_btf/call_function_entry")
int BPF_PROG(on_callfn_entry, int vector) { hard_enter(IRQ_CALL_FUNCTION); return 0; }
SEC("tp_btf/call_function_exit")
int BPF_PROG(on_callfn_exit, int vector) { hard_exit(IRQ_CALL_FUNCTION); return 0; }
SEC("tp_btf/call_function_single_entry")
int BPF_PROG(on_callfn1_entry, int vector) { hard_enter(IRQ_CALL_FUNCTION_SINGLE); return 0; }
SEC("tp_btf/call_function_single_exit")
int BPF_PROG(on_callfn1_exit, int vector) { hard_exit(IRQ_CALL_FUNCTION_SINGLE); return 0; }

SEC("tp_btf/softirq_entry")
int BPF_PROG(on_softirq_entry, unsigned int vec)
{
	u64 now = bpf_ktime_get_ns();
	struct cpu_state *st = state_now(now);
	if (!st)
		return 0;
	close_segment(st, now);
	// Softirqs run with no hard IRQ handler active: a non-zero depth means
	// an exit was missed; resynchronise here.
	if (st->hard_depth) {
		note_anomaly();
		st->hard_depth = 0;
	}
	if (st->service) {
		// A service thread (ksoftirqd) about to run softirqs: close its own
		// attribution run first.
		end_attribution(st);
	}
	st->soft_vec = vec < NR_VECTORS ? (s32)vec : -1;
	st->pending_ns = 0;
	st->beneficiary = 0;
	st->wake_sk = 0;
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(on_softirq_exit, unsigned int vec)
{
	u64 now = bpf_ktime_get_ns();
	struct cpu_state *st = state_now(now);
	if (!st)
		return 0;
	close_segment(st, now);
	if (st->soft_vec < 0)
		return 0;
	end_attribution(st);
	st->soft_vec = -1;
	st->wake_sk = 0;
	return 0;
}

// Set by user space on a PREEMPT_RT kernel (/sys/kernel/realtime), where
// softirqs run in task context and can be preempted: a switch inside one is
// then no anomaly, and the softirq resumes when its task runs again.
volatile u32 preemptible_softirqs;

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	u64 now = bpf_ktime_get_ns();
	struct cpu_state *st = state_at(now, prev);
	if (!st)
		return 0;
	close_segment(st, now);
	if (st->soft_vec >= 0 && !st->hard_depth && preemptible_softirqs) {
		// Its time so far goes to the run's beneficiary; the vector and
		// the beneficiary wait in prev's slot.
		u32 vec = st->soft_vec;
		u32 beneficiary = st->beneficiary;
		end_attribution(st);
		struct task_acc *a = cur_acc(st);
		a->preempted_vec = vec + 1;
		a->preempted_beneficiary = beneficiary;
		st->soft_vec = -1;
	}
	if (st->hard_depth || st->soft_vec >= 0) {
		note_anomaly();
		st->hard_depth = 0;
		st->soft_vec = -1;
	}
	if (st->service)
		end_attribution(st);
	make_current(st, next);
	struct task_acc *n = cur_acc(st);
	if (n->preempted_vec) {
		st->soft_vec = (s32)(n->preempted_vec - 1);
		st->beneficiary = n->preempted_beneficiary;
		n->preempted_vec = 0;
	}
	return 0;
}

// `tid` owns the socket `key` (it was just woken by a packet queued to
// it). Usually already known: the per-CPU cache of the last lookup says so
// without touching the map.
static __always_inline void learn_owner(struct cpu_state *st, u64 key, u32 tid)
{
	if (key == st->owner_sk && st->owner_tid == tid && st->owner_generation == owner_generation)
		return;
	u32 *o = bpf_map_lookup_elem(&sock_owner, &key);
	if (!o || *o != tid) {
		bpf_map_update_elem(&sock_owner, &key, &tid, BPF_ANY);
		// Every CPU's cached owner may now be stale.
		owner_generation++;
	}
	st->owner_sk = key;
	st->owner_tid = tid;
	st->owner_generation = owner_generation;
}

// sched_waking fires in the waker's context (sched_wakeup may fire later on
// the target CPU, from an IPI), so it tells which softirq did the waking.
// Right after a packet was queued to a socket with a sleeper (wake_sk), the
// task woken is the one waiting on that socket: its owner. Waking the task
// already being served changes nothing else, so it costs only the state
// lookup.
SEC("tp_btf/sched_waking")
int BPF_PROG(on_waking, struct task_struct *p)
{
	struct cpu_state *st = this_cpu_state();
	if (!st || !st->initialised || !attributing(st))
		return 0;
	// Waking a service thread (ksoftirqd, PREEMPT_RT's ktimers, an IRQ or
	// NAPI thread) passes work on rather than delivering it: irq_exit()
	// wakes ktimers or ksoftirqd after the hard IRQ's exit tracepoint,
	// inside whatever softirq the IRQ interrupted. Its time is not for them.
	if (is_service_thread(p))
		return 0;
	u32 tid = p->pid;
	if (st->wake_sk) {
		learn_owner(st, st->wake_sk, tid);
		st->wake_sk = 0;
	}
	if (tid == st->beneficiary)
		return 0;
	u64 now = bpf_ktime_get_ns();
	st = state_now(now);
	if (!st || !attributing(st))
		return 0;
	close_segment(st, now);
	serve(st, tid);
	return 0;
}

// Whether a task sleeps on the socket's wait queue (what the kernel's
// skwq_has_sleeper asks right after this tracepoint, before it wakes it).
static __always_inline int has_sleeper(const struct sock *sk)
{
	struct socket_wq *wq = sk->sk_wq;
	if (!wq)
		return 0;
	return wq->wait.head.next != &wq->wait.head;
}

static __always_inline void packet_for_socket(const struct sock *sk, int queued)
{
	struct cpu_state *st = this_cpu_state();
	struct cpu_totals *t = this_cpu_totals();
	if (!st || !t || !st->initialised)
		return;
	t->socket_events++;
	if (!attributing(st)) {
		t->socket_events_outside++;
		return;
	}
	u64 key = (u64)sk;
	// A sleeper will be woken right after this: the waking learns the owner.
	st->wake_sk = queued && has_sleeper(sk) ? key : 0;
	u32 owner;
	if (key == st->owner_sk && st->owner_generation == owner_generation) {
		// Same socket as the last packet on this CPU and no socket has
		// changed owner since: same owner.
		owner = st->owner_tid;
	} else {
		u32 *o = bpf_map_lookup_elem(&sock_owner, &key);
		if (!o) {
			t->socket_events_no_owner++;
			return;
		}
		owner = *o;
		st->owner_sk = key;
		st->owner_tid = owner;
		st->owner_generation = owner_generation;
	}
	// Consecutive packets for the task already being served extend its
	// attribution run; its time is given at the next change or at the end.
	if (owner == st->beneficiary)
		return;
	u64 now = bpf_ktime_get_ns();
	st = state_now(now);
	if (!st || !attributing(st))
		return;
	close_segment(st, now);
	serve(st, owner);
}

// A packet was queued to a socket.
SEC("tp_btf/sk_data_ready")
int BPF_PROG(on_sk_data_ready, const struct sock *sk)
{
	packet_for_socket(sk, 1);
	return 0;
}

// The same where the kernel has no sk_data_ready tracepoint (6.1): the
// function UDP and TCP sockets have as their sk_data_ready callback, which
// the tracepoint sits in where it exists. Loaded only where the tracepoint
// is missing (session.rs), so a packet is never counted twice.
SEC("fentry/sock_def_readable")
int BPF_PROG(on_sock_def_readable, struct sock *sk)
{
	packet_for_socket(sk, 1);
	return 0;
}

// A UDP packet was dropped at its socket (receive buffer full): the work
// was still done for that socket's owner.
SEC("tp_btf/udp_fail_queue_rcv_skb")
int BPF_PROG(on_udp_drop, int rc, struct sock *sk)
{
	packet_for_socket(sk, 0);
	return 0;
}

// `tid` owns the socket at `key`: it receives from it. The per-CPU cache
// of the last claim keeps a thread that claims the same socket again from
// touching the map.
static __always_inline void claim_socket(u64 key, u32 tid)
{
	struct cpu_state *st = this_cpu_state();
	if (st && st->recv_sk == key && st->recv_tid == tid)
		return;
	u32 *owner = bpf_map_lookup_elem(&sock_owner, &key);
	if (!owner || *owner != tid) {
		bpf_map_update_elem(&sock_owner, &key, &tid, BPF_ANY);
		// Every CPU's cached owner may now be stale.
		owner_generation++;
	}
	if (st) {
		st->recv_sk = key;
		st->recv_tid = tid;
	}
}

// Only loaded on kernels without sched_waking, where owners cannot be
// learned from wakeups: the thread that returns from receiving on a
// socket becomes its owner. It runs at every receive, which costs a
// program run per datagram on a flood; the sleeps and wakeups come at most
// once per sleep.
SEC("tp_btf/sock_recv_length")
int BPF_PROG(on_sock_recv, struct sock *sk, int ret, int flags)
{
	claim_socket((u64)sk, (u32)bpf_get_current_pid_tgid());
	return 0;
}

// Address of the kernel's receiver_wake_function (from /proc/kallsyms, set
// by user space before the iterator runs; 0 when unknown): the wake
// function of a thread blocked in a datagram socket's receive, whose wait
// entry's `private` is that thread.
volatile u64 receiver_wake_fn;

// The thread blocked receiving on `sk` (the first entry of its wait queue,
// when it is a receiver's), or 0.
static __always_inline u32 waiting_receiver(const struct sock *sk)
{
	if (!receiver_wake_fn)
		return 0;
	u64 wq = (u64)BPF_CORE_READ(sk, sk_wq);
	if (!wq)
		return 0;
	u64 head = wq + bpf_core_field_offset(struct socket_wq, wait) + bpf_core_field_offset(struct wait_queue_head, head);
	u64 next = 0;
	if (bpf_probe_read_kernel(&next, sizeof(next), (void *)head) || !next || next == head)
		return 0;
	u64 entry = next - bpf_core_field_offset(struct wait_queue_entry, entry);
	u64 func = 0, private = 0;
	bpf_probe_read_kernel(&func, sizeof(func), (void *)(entry + bpf_core_field_offset(struct wait_queue_entry, func)));
	bpf_probe_read_kernel(&private, sizeof(private), (void *)(entry + bpf_core_field_offset(struct wait_queue_entry, private)));
	if (func != receiver_wake_fn || !private)
		return 0;
	struct task_struct *t = (struct task_struct *)private;
	return BPF_CORE_READ(t, pid);
}

// Run once at start (a task_file iterator over every process's open
// files): sockets that are already open get an owner, so a server that is
// starved and never sleeps on its socket again during the measurement is
// still found: the thread blocked receiving on it right now, else its
// process. A thread woken by a packet later takes over (on_waking); an
// owner learned that way is never overwritten here.
SEC("iter/task_file")
int seed_socket_owners(struct bpf_iter__task_file *ctx)
{
	struct file *file = ctx->file;
	struct task_struct *task = ctx->task;
	if (!file || !task)
		return 0;
	struct socket *sock = bpf_sock_from_file(file);
	if (!sock)
		return 0;
	struct sock *sk = sock->sk;
	if (!sk)
		return 0;
	u64 key = (u64)sk;
	u32 waiter = waiting_receiver(sk);
	if (waiter) {
		bpf_map_update_elem(&sock_owner, &key, &waiter, BPF_ANY);
		return 0;
	}
	u32 tid = task->pid;
	bpf_map_update_elem(&sock_owner, &key, &tid, BPF_NOEXIST);
	return 0;
}

// Run by user space on each CPU (BPF_PROG_TEST_RUN with
// BPF_F_TEST_RUN_ON_CPU, an IPI) right before it reads the maps: repairs a
// switch the kernel did not trace and closes the open segment at this
// moment, so the snapshot needs no guessing about who is current.
SEC("raw_tp")
int sync_cpu(void *ctx)
{
	u64 now = bpf_ktime_get_ns();
	struct cpu_state *st = this_cpu_state();
	if (!st || !st->initialised)
		return 0;
	st = state_now(now);
	if (st)
		close_segment(st, now);
	return 0;
}
