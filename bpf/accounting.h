/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Map layouts shared by accounting.bpf.c and its Rust reader: the
 * skeleton generates #[repr(C)] types from this BTF (skel.rs), which
 * crates/measure/src/accounting/session.rs reads the maps into and raw.rs
 * turns into plain counters.
 * Only u64/u32/s32 fields, laid out without implicit padding.
 */
#ifndef IRQLAB_ACCOUNTING_H
#define IRQLAB_ACCOUNTING_H

#define NR_VECTORS 10        /* NR_SOFTIRQS */
#define VECTOR_SLOTS 16      /* power of two so the index can be masked */
#define MAX_TASKS 16384
#define MAX_TASK_IRQS 16384
#define MAX_SOCKETS 4096
#define MAX_SERVICE_THREADS 1024

/* Pseudo IRQ numbers for x86 system vectors (no irq_handler_entry). */
#define IRQ_LOCAL_TIMER (-1)
#define IRQ_RESCHEDULE (-2)
#define IRQ_CALL_FUNCTION (-3)
#define IRQ_CALL_FUNCTION_SINGLE (-4)

/* Hard IRQ lines whose time for a task is kept per CPU before it reaches the hash map. */
#define IRQ_SLOTS 4

/* Tasks whose charges each CPU keeps by itself (a power of two). A flood
 * switches among a few tasks on a CPU (server, napi thread, idle,
 * ksoftirqd); keeping their sums in the per-CPU array makes a context
 * switch touch no hash map. The least recently used slot is flushed to
 * task_stats when a new task needs one. */
#define TASK_SLOTS 8

/* What one task was charged on this CPU and the hash map has not seen yet. */
struct task_acc {
	__u64 run_ns;
	__u64 hardirq_ns;
	__u64 switches_in;
	__u64 service_generation; /* service_generation when `service` was looked up */
	__u32 service;            /* a service thread (ksoftirqd, irq/, napi/) */
	__u32 valid;
	__u32 tid;
	__u32 tgid;
	__u64 softirq_ns[VECTOR_SLOTS];
	__u64 irq_ns[IRQ_SLOTS];  /* by line, for irq[]; 0: free */
	__s32 irq[IRQ_SLOTS];
	__u32 preempted_vec;         /* PREEMPT_RT: vector + 1 of the softirq it was switched out in, 0: none */
	__u32 preempted_beneficiary; /* ... and that run's last beneficiary */
	char comm[16];
};

struct cpu_state {
	/* What every event reads or writes, first and together (one or two
	 * cache lines), so an event touches few lines besides its slot. */
	__u64 last_ts;          /* start of the open segment */
	__u64 pending_ns;       /* attributable time not yet given to a beneficiary */
	__u64 cur_charged;      /* ns charged to the current task since it became current */
	__u64 cur_task;         /* task_struct address of cur_tid */
	__u64 cur_exec_start;   /* its se.sum_exec_runtime when it became current */
	__u64 wake_sk;          /* socket with a sleeper a packet was just queued to: the next
	                         * sched_waking on this CPU in the same context wakes its owner */
	__u32 initialised;
	__u32 cur_tid;          /* task current on this CPU (0: idle) */
	__u32 cur_slot;         /* slots[] index of the current task */
	__u32 hard_depth;       /* 1 inside a hard IRQ handler, else 0 */
	__s32 soft_vec;         /* running softirq vector, -1 outside softirq */
	__s32 hard_irq;         /* its line, while hard_depth is 1 (handlers never nest) */
	__u32 service;          /* current task is a service thread */
	__u32 beneficiary;      /* last beneficiary of this attribution run */
	/* Which task each slot holds (tid + 1, 0: free) and when it was last
	 * made current, kept here so a switch finds its slot without reading
	 * the slots themselves. */
	__u32 slot_key[TASK_SLOTS];
	__u64 slot_used[TASK_SLOTS];
	__u64 stamp;            /* LRU clock of the slots */
	__u64 owner_sk;         /* the socket last looked up in sock_owner ... */
	__u64 owner_generation; /* ... at this owner_generation */
	__u64 recv_sk;          /* the socket last received from on this CPU ... */
	__u32 owner_tid;        /* ... and its owner */
	__u32 recv_tid;         /* ... and by whom */
	__u32 served_tid;
	__u32 pad;              /* keeps the size a multiple of 8 without implicit padding */
	/* Time served to served_tid not yet added to its task_stats entry
	 * (flushed when another task is served, or at snapshot). */
	__u64 served_softirq_ns[VECTOR_SLOTS];
	__u64 served_thread_ns;
	__u64 flushes;          /* odd while a flush runs; user space retries a read that raced one */
	struct task_acc slots[TASK_SLOTS];
};

struct cpu_totals {
	__u64 hardirq_in_softirq_ns;
	__u64 orphan_softirq_ns[VECTOR_SLOTS];
	__u64 orphan_thread_ns;
	__u64 anomalies;
	__u64 hidden_switches;        /* switches the kernel did not trace, repaired */
	__u64 dropped_tasks;
	__u64 socket_events;          /* packets queued/dropped at a socket */
	__u64 socket_events_no_owner; /* ... whose socket had no known owner */
	__u64 socket_events_outside;  /* ... outside softirq/service context */
};

struct task_stats {
	__u64 run_ns;                          /* ran in its own context */
	__u64 hardirq_ns;                      /* hard IRQs while it was current */
	__u64 softirq_ns[VECTOR_SLOTS];        /* softirqs while it was current */
	__u64 served_softirq_ns[VECTOR_SLOTS]; /* softirq time done for it */
	__u64 served_by_thread_ns;             /* service-thread time done for it */
	__u64 switches_in;
	__u32 tgid;
	__u32 pad;
	char comm[16];
};

struct task_irq_key {
	__u32 tid;
	__s32 irq;
};

#endif
