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
// that user space reads when it wants a snapshot.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "accounting.h"

char LICENSE[] SEC("license") = "GPL";

// Set by user space between load and attach: the start of the measured
// interval (CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns). A CPU's first
// segment starts here.
volatile u64 start_ns;

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

// Socket -> thread that last received from it (sock_recv_length).
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

static __always_inline struct task_stats *stats_of(u32 tid)
{
	struct task_stats *s = bpf_map_lookup_elem(&task_stats, &tid);
	if (s)
		return s;
	struct task_stats zero = {};
	bpf_map_update_elem(&task_stats, &tid, &zero, BPF_NOEXIST);
	s = bpf_map_lookup_elem(&task_stats, &tid);
	if (!s) {
		struct cpu_totals *t = this_cpu_totals();
		if (t)
			t->dropped_tasks++;
	}
	return s;
}

static __always_inline void name_task(struct task_stats *s, struct task_struct *p)
{
	if (s->comm[0])
		return;
	s->tgid = BPF_CORE_READ(p, tgid);
	bpf_probe_read_kernel_str(s->comm, sizeof(s->comm), p->comm);
}

static __always_inline u32 is_service_thread(u32 tid)
{
	return bpf_map_lookup_elem(&service_threads, &tid) != NULL;
}

// First event on this CPU: its first segment starts at start_ns and belongs
// to whatever task is current now.
static __always_inline struct cpu_state *state_for_event(void)
{
	struct cpu_state *st = this_cpu_state();
	if (!st)
		return NULL;
	if (!st->initialised) {
		struct task_struct *cur = bpf_get_current_task_btf();
		st->initialised = 1;
		st->last_ts = start_ns;
		st->cur_tid = cur->pid;
		st->soft_vec = -1;
		st->hard_depth = 0;
		st->service = is_service_thread(st->cur_tid);
	}
	return st;
}

// Charges the segment [last_ts, now) to the context that ran it.
static __always_inline void close_segment(struct cpu_state *st, u64 now)
{
	u64 delta = now > st->last_ts ? now - st->last_ts : 0;
	st->last_ts = now;
	if (!delta)
		return;
	struct task_stats *s = stats_of(st->cur_tid);
	if (!s)
		return;
	u32 depth = st->hard_depth;
	if (depth > 0) {
		s->hardirq_ns += delta;
		u32 top = (depth - 1) & (MAX_IRQ_DEPTH - 1);
		struct task_irq_key key = { .tid = st->cur_tid, .irq = st->hard_irq[top] };
		u64 *ns = bpf_map_lookup_elem(&task_irq_ns, &key);
		if (ns) {
			*ns += delta;
		} else {
			bpf_map_update_elem(&task_irq_ns, &key, &delta, BPF_NOEXIST);
		}
		if (st->soft_vec >= 0) {
			struct cpu_totals *t = this_cpu_totals();
			if (t)
				t->hardirq_in_softirq_ns += delta;
		}
	} else if (st->soft_vec >= 0) {
		u32 vec = st->soft_vec & (VECTOR_SLOTS - 1);
		if (vec < NR_VECTORS)
			s->softirq_ns[vec] += delta;
		st->pending_ns += delta;
	} else {
		s->run_ns += delta;
		if (st->service)
			st->pending_ns += delta;
	}
}

// Gives the attributable time since the last attribution point to `tid`.
static __always_inline void serve(struct cpu_state *st, u32 tid)
{
	if (tid == 0)
		return;
	st->beneficiary = tid;
	if (!st->pending_ns)
		return;
	struct task_stats *b = stats_of(tid);
	if (!b)
		return;
	if (st->soft_vec >= 0) {
		u32 vec = st->soft_vec & (VECTOR_SLOTS - 1);
		if (vec < NR_VECTORS)
			b->served_softirq_ns[vec] += st->pending_ns;
	} else {
		b->served_by_thread_ns += st->pending_ns;
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

// Each handler reads the clock first, so its timestamp is as close to the
// event as possible whatever else is attached to the same tracepoint.
static __always_inline void hard_enter(s32 irq)
{
	u64 now = bpf_ktime_get_ns();
	struct cpu_state *st = state_for_event();
	if (!st)
		return;
	close_segment(st, now);
	u32 depth = st->hard_depth;
	if (depth >= MAX_IRQ_DEPTH) {
		note_anomaly();
		return;
	}
	st->hard_irq[depth & (MAX_IRQ_DEPTH - 1)] = irq;
	st->hard_depth = depth + 1;
}

static __always_inline void hard_exit(s32 irq)
{
	u64 now = bpf_ktime_get_ns();
	struct cpu_state *st = state_for_event();
	if (!st)
		return;
	close_segment(st, now);
	u32 depth = st->hard_depth;
	if (depth == 0) {
		// Its entry happened before we attached (or was missed).
		return;
	}
	if (st->hard_irq[(depth - 1) & (MAX_IRQ_DEPTH - 1)] != irq)
		note_anomaly();
	st->hard_depth = depth - 1;
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
	struct cpu_state *st = state_for_event();
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
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(on_softirq_exit, unsigned int vec)
{
	u64 now = bpf_ktime_get_ns();
	struct cpu_state *st = state_for_event();
	if (!st)
		return 0;
	close_segment(st, now);
	if (st->soft_vec < 0)
		return 0;
	end_attribution(st);
	st->soft_vec = -1;
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	u64 now = bpf_ktime_get_ns();
	struct cpu_state *st = state_for_event();
	if (!st)
		return 0;
	u32 prev_tid = prev->pid;
	if (st->cur_tid != prev_tid) {
		note_anomaly();
		st->cur_tid = prev_tid;
	}
	close_segment(st, now);
	if (st->hard_depth || st->soft_vec >= 0) {
		note_anomaly();
		st->hard_depth = 0;
		st->soft_vec = -1;
	}
	if (st->service)
		end_attribution(st);
	struct task_stats *s = stats_of(prev_tid);
	if (s)
		name_task(s, prev);
	u32 next_tid = next->pid;
	s = stats_of(next_tid);
	if (s) {
		name_task(s, next);
		s->switches_in++;
	}
	st->cur_tid = next_tid;
	st->service = is_service_thread(next_tid);
	st->pending_ns = 0;
	st->beneficiary = 0;
	return 0;
}

// sched_waking fires in the waker's context (sched_wakeup may fire later on
// the target CPU, from an IPI), so it tells which softirq did the waking.
SEC("tp_btf/sched_waking")
int BPF_PROG(on_waking, struct task_struct *p)
{
	struct cpu_state *st = this_cpu_state();
	if (!st || !st->initialised || !attributing(st))
		return 0;
	u32 tid = p->pid;
	close_segment(st, bpf_ktime_get_ns());
	serve(st, tid);
	struct task_stats *s = stats_of(tid);
	if (s)
		name_task(s, p);
	return 0;
}

static __always_inline void packet_for_socket(const struct sock *sk)
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
	u32 *owner = bpf_map_lookup_elem(&sock_owner, &key);
	if (!owner) {
		t->socket_events_no_owner++;
		return;
	}
	close_segment(st, bpf_ktime_get_ns());
	serve(st, *owner);
}

// A packet was queued to a socket.
SEC("tp_btf/sk_data_ready")
int BPF_PROG(on_sk_data_ready, const struct sock *sk)
{
	packet_for_socket(sk);
	return 0;
}

// A UDP packet was dropped at its socket (receive buffer full): the work
// was still done for that socket's owner.
SEC("tp_btf/udp_fail_queue_rcv_skb")
int BPF_PROG(on_udp_drop, int rc, struct sock *sk)
{
	packet_for_socket(sk);
	return 0;
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(on_sock_recv, struct sock *sk, int ret, int flags)
{
	u64 key = (u64)sk;
	u32 tid = (u32)bpf_get_current_pid_tgid();
	u32 *owner = bpf_map_lookup_elem(&sock_owner, &key);
	if (owner && *owner == tid)
		return 0;
	bpf_map_update_elem(&sock_owner, &key, &tid, BPF_ANY);
	return 0;
}

// Run once at start (a task_file iterator over every process's open
// files): sockets that are already open get their process as owner, so a
// server that is starved and never returns from recv during the
// measurement is still found. A thread receiving later takes over
// (sock_recv_length); an owner learned that way is never overwritten here.
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
	u32 tid = task->pid;
	bpf_map_update_elem(&sock_owner, &key, &tid, BPF_NOEXIST);
	return 0;
}
