// SPDX-License-Identifier: GPL-2.0
//
// What ran on the probed CPU, for `irqlab measure interference` to line up
// with its probe's gaps (crates/measure/src/probe/sources.rs).
//
// The CPU's timeline is cut at every boundary event (hard IRQ handler and
// x86 system-vector entry/exit, softirq entry/exit, context switch), as the
// accounting program does, and each piece goes to user space as a segment
// charged to the innermost context: hard IRQ, else softirq vector, else the
// current thread. Only the probed CPU is watched; user space keeps the
// segments that fall inside the probe's gaps (the probe's own thread
// segments are dropped there), so what the probe lost to an IRQ nested in
// its own run is named too.
//
// Segments are written to the ring buffer without a wake-up: a wake-up is
// an irq_work on the probed CPU, interference the monitor would add to what
// it measures. User space polls the buffer from another CPU instead.
//
// Stack use stays small (the 6.1 and 6.12 verifiers count 512 bytes over
// the deepest chain of frames): the segment is built in a per-CPU array
// and copied into the ring buffer with bpf_ringbuf_output.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "gap_sources.h"

char LICENSE[] SEC("license") = "GPL";

#define PF_KTHREAD_FLAG 0x00200000

// Set by user space before attaching: the CPU to watch.
volatile __u32 target_cpu;
// Segments the ring buffer had no room for (user space fell behind):
// their time shows up as `unseen`, and the run says so.
volatile __u64 lost_segments;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gs_state);
} state SEC(".maps");

// Scratch for the segment being built (off the stack, see above).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gs_segment);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 23);
} segments SEC(".maps");

// The probed CPU's state, or NULL on every other CPU.
static __always_inline struct gs_state *watched(void)
{
	__u32 zero = 0;
	if (bpf_get_smp_processor_id() != target_cpu)
		return NULL;
	return bpf_map_lookup_elem(&state, &zero);
}

// Ends the segment in progress at `now` and sends it; the next starts at
// `now`. Called at every boundary, before the state changes.
static __noinline void close_segment(struct gs_state *st, __u64 now)
{
	__u32 zero = 0;
	__u64 start = st->last_ts;
	st->last_ts = now;
	// Nothing is known about what ran before the first event.
	if (!start || now <= start)
		return;
	struct gs_segment *seg = bpf_map_lookup_elem(&scratch, &zero);
	if (!seg)
		return;
	seg->start_ns = start;
	seg->end_ns = now;
	seg->tgid = 0;
	seg->policy = 0;
	seg->rt_priority = 0;
	seg->nice = 0;
	seg->kthread = 0;
	seg->pad = 0;
	if (st->hard_depth) {
		seg->kind = st->hard_kind;
		seg->id = st->hard_id;
		__builtin_memcpy(seg->name, st->irq_name, sizeof(seg->name));
	} else if (st->soft) {
		seg->kind = GS_KIND_SOFTIRQ;
		seg->id = st->soft - 1;
		__builtin_memset(seg->name, 0, sizeof(seg->name));
	} else {
		struct task_struct *p = bpf_get_current_task_btf();
		seg->kind = GS_KIND_THREAD;
		seg->id = BPF_CORE_READ(p, pid);
		seg->tgid = BPF_CORE_READ(p, tgid);
		seg->policy = BPF_CORE_READ(p, policy);
		seg->rt_priority = BPF_CORE_READ(p, rt_priority);
		seg->nice = BPF_CORE_READ(p, static_prio) - 120;
		seg->kthread = (BPF_CORE_READ(p, flags) & PF_KTHREAD_FLAG) ? 1 : 0;
		bpf_probe_read_kernel_str(seg->name, sizeof(seg->name), p->comm);
	}
	if (bpf_ringbuf_output(&segments, seg, sizeof(*seg), BPF_RB_NO_WAKEUP))
		__sync_fetch_and_add(&lost_segments, 1);
}

static __always_inline void hard_enter(__u32 kind, __u32 id, struct irqaction *action)
{
	__u64 now = bpf_ktime_get_ns();
	struct gs_state *st = watched();
	if (!st)
		return;
	close_segment(st, now);
	// Handlers do not nest on current kernels; were one to, the outer
	// handler's remainder is charged to the inner one's name.
	st->hard_depth++;
	st->hard_kind = kind;
	st->hard_id = id;
	__builtin_memset(st->irq_name, 0, sizeof(st->irq_name));
	if (action) {
		const char *name = BPF_CORE_READ(action, name);
		if (name)
			bpf_probe_read_kernel_str(st->irq_name, sizeof(st->irq_name), name);
	}
}

static __always_inline void hard_exit(void)
{
	__u64 now = bpf_ktime_get_ns();
	struct gs_state *st = watched();
	if (!st)
		return;
	close_segment(st, now);
	if (st->hard_depth)
		st->hard_depth--;
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(on_irq_entry, int irq, struct irqaction *action)
{
	hard_enter(GS_KIND_IRQ, irq, action);
	return 0;
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(on_irq_exit, int irq, struct irqaction *action, int ret)
{
	hard_exit();
	return 0;
}

// x86 system vectors do not pass through irq_handler_entry. Optional:
// user space does not load these where the kernel lacks the tracepoint
// (their time is then `unseen`).
SEC("tp_btf/local_timer_entry")
int BPF_PROG(on_timer_entry, int vector) { hard_enter(GS_KIND_SYSVEC, GS_SYSVEC_LOCAL_TIMER, NULL); return 0; }
SEC("tp_btf/local_timer_exit")
int BPF_PROG(on_timer_exit, int vector) { hard_exit(); return 0; }
SEC("tp_btf/reschedule_entry")
int BPF_PROG(on_resched_entry, int vector) { hard_enter(GS_KIND_SYSVEC, GS_SYSVEC_RESCHEDULE, NULL); return 0; }
SEC("tp_btf/reschedule_exit")
int BPF_PROG(on_resched_exit, int vector) { hard_exit(); return 0; }
SEC("tp_btf/call_function_entry")
int BPF_PROG(on_callfn_entry, int vector) { hard_enter(GS_KIND_SYSVEC, GS_SYSVEC_CALL_FUNCTION, NULL); return 0; }
SEC("tp_btf/call_function_exit")
int BPF_PROG(on_callfn_exit, int vector) { hard_exit(); return 0; }
SEC("tp_btf/call_function_single_entry")
int BPF_PROG(on_callfn1_entry, int vector) { hard_enter(GS_KIND_SYSVEC, GS_SYSVEC_CALL_FUNCTION_SINGLE, NULL); return 0; }
SEC("tp_btf/call_function_single_exit")
int BPF_PROG(on_callfn1_exit, int vector) { hard_exit(); return 0; }

SEC("tp_btf/softirq_entry")
int BPF_PROG(on_softirq_entry, unsigned int vec)
{
	__u64 now = bpf_ktime_get_ns();
	struct gs_state *st = watched();
	if (!st)
		return 0;
	close_segment(st, now);
	st->soft = vec + 1;
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(on_softirq_exit, unsigned int vec)
{
	__u64 now = bpf_ktime_get_ns();
	struct gs_state *st = watched();
	if (!st)
		return 0;
	close_segment(st, now);
	st->soft = 0;
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next, unsigned int prev_state)
{
	__u64 now = bpf_ktime_get_ns();
	struct gs_state *st = watched();
	if (!st)
		return 0;
	// `current` is still prev here: the segment is prev's.
	close_segment(st, now);
	// No handler spans a switch; on PREEMPT_RT a softirq may be preempted
	// in its thread, and its rest is then charged to that thread.
	st->hard_depth = 0;
	st->soft = 0;
	return 0;
}
