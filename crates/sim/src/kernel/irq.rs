//! Hard IRQs: lines, the timer tick with tick-sampled accounting, the NIC's
//! interrupt (per packet, NAPI, coalesced, or threaded) and packet arrival.

use super::{HardIrq, Sim};
use crate::net::{Packet, Proto};
use crate::softirq::{Loc, PollDev, SoftirqRun, NET_RX};
use crate::task::{TaskId, TaskKind};
use irqlab_analysis::Nanos;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IrqKind {
    Timer,
    /// High-resolution timer expiries (sleeping tasks' wake-ups).
    HrTimer,
    Nic(usize),
    /// A device implementing [`crate::device::Device`].
    Device(usize),
    /// The function-call IPI another CPU sends (RPS).
    Ipi,
    /// The reschedule IPI of a wake-up from another CPU.
    Resched,
}

#[derive(Debug, Clone)]
pub struct IrqLine {
    pub name: String,
    pub kind: IrqKind,
    /// Asserted and not yet serviced.
    pub pending: bool,
    /// Masked while its handler (or its thread, for threaded IRQs) runs.
    pub in_service: bool,
    /// Threaded IRQ: the thread running the handler.
    pub thread: Option<TaskId>,
    pub thread_pending: bool,
    pub thread_packets: u32,
    pub count: u64,
    pub ns: Nanos,
}

impl IrqLine {
    pub fn new(name: impl Into<String>, kind: IrqKind) -> Self {
        IrqLine {
            name: name.into(),
            kind,
            pending: false,
            in_service: false,
            thread: None,
            thread_pending: false,
            thread_packets: 0,
            count: 0,
            ns: 0,
        }
    }
}

impl Sim {
    /// Asserts an interrupt line; it is serviced as soon as the CPU takes
    /// interrupts and the line is not masked.
    pub fn raise_irq(&mut self, line: usize) {
        self.lines[line].pending = true;
    }

    pub(super) fn next_pending_line(&self) -> Option<usize> {
        // Lower line number = higher hardware priority (timer is line 0).
        self.lines.iter().position(|l| l.pending && !l.in_service)
    }

    pub(super) fn start_hardirq(&mut self, line: usize) {
        let l = &mut self.lines[line];
        l.pending = false;
        l.in_service = true;
        l.count += 1;
        let kind = l.kind;
        let threaded = l.thread.is_some();
        let mut packets = 0;
        let handler = match kind {
            IrqKind::Timer => {
                self.tick_accounting();
                self.cfg.tick
            }
            IrqKind::Nic(n) => {
                let nic = &mut self.nics[n];
                nic.stats.hardirqs += 1;
                if nic.napi_scheduled {
                    nic.stats.hardirqs_while_polling += 1;
                }
                if threaded {
                    self.cfg.irq_primary
                } else if nic.napi {
                    nic.costs.irq
                } else {
                    packets = nic.ring.len() as u32;
                    nic.costs.irq + nic.costs.irq_per_packet * packets as Nanos
                }
            }
            IrqKind::Device(d) => self.with_device(d, |dev, sim| dev.hardirq_cost(sim)),
            IrqKind::HrTimer => self.cfg.hrtimer.unwrap_or(0),
            IrqKind::Ipi | IrqKind::Resched => self.cfg.ipi,
        };
        let cost = self.cfg.irq_entry + handler + self.cfg.irq_exit;
        self.cpu.hardirq = Some(HardIrq { line, left: cost, packets });
    }

    pub(super) fn hardirq_done(&mut self, h: HardIrq) {
        let kind = self.lines[h.line].kind;
        if let Some(thread) = self.lines[h.line].thread {
            // IRQF_ONESHOT: the line stays masked until the thread is done.
            self.lines[h.line].thread_pending = true;
            self.wake(thread);
        } else {
            match kind {
                IrqKind::Timer => self.timer_tick(),
                IrqKind::HrTimer => {
                    // hrtimer_wakeup for every timer that expired meanwhile.
                    for t in std::mem::take(&mut self.expired_timers) {
                        if self.tasks[t].state == crate::task::RunState::Sleeping {
                            self.wake(t);
                        }
                    }
                }
                IrqKind::Nic(n) => self.nic_isr_effect(n, h.packets, false),
                IrqKind::Device(d) => self.with_device(d, |dev, sim| dev.hardirq_done(sim)),
                IrqKind::Ipi => self.rps_ipi_handled(),
                IrqKind::Resched => self.remote_wakes_handled(),
            }
            self.lines[h.line].in_service = false;
        }
        self.irq_exit();
    }

    /// irq_exit(): run pending softirqs in softirq context unless we
    /// interrupted softirq processing (or a task holding BHs disabled), or
    /// the model runs them in threads.
    fn irq_exit(&mut self) {
        if self.pending == 0 || self.threaded || self.cpu.softirq.is_some() {
            return;
        }
        if let Some(c) = self.cpu.current {
            if self.task_runs[c].is_some() && self.cpu.switch_left.is_none() {
                return;
            }
        }
        if self.cfg.defer_to_running_ksoftirqd && self.ksoftirqd_running() {
            self.softirq_stats.left_to_running_ksoftirqd += 1;
            return;
        }
        if let Some(mut p) = self.bh_policy.take() {
            let now = p.run_on_irq_exit(self);
            self.bh_policy = Some(p);
            if !now {
                return;
            }
        }
        self.softirq_stats.irq_exit_runs += 1;
        self.cpu.softirq = Some(SoftirqRun::new(self.now, u32::MAX));
    }

    /// 6.1's `ksoftirqd_running(pending)` (kernel/softirq.c): ksoftirqd is
    /// TASK_RUNNING (running or preempted on the run queue) and no vector
    /// of `SOFTIRQ_NOW_MASK` (HI, TASKLET) is pending.
    fn ksoftirqd_running(&self) -> bool {
        const NOW_MASK: u32 = (1 << crate::softirq::HI) | (1 << crate::softirq::TASKLET);
        self.pending & NOW_MASK == 0
            && self
                .ksoftirqd
                .is_some_and(|k| matches!(self.tasks[k].state, crate::task::RunState::Running | crate::task::RunState::Runnable))
    }

    /// Marks a softirq vector pending. Raised outside interrupt context
    /// (by a task), or under the threaded model, it wakes the thread that
    /// serves it.
    pub fn raise_softirq(&mut self, vector: u32, from_task: bool) {
        self.pending |= 1 << vector;
        if self.softirq_in_irq_thread
            && from_task
            && self.cpu.current.is_some_and(|c| matches!(self.tasks[c].kind, TaskKind::IrqThread { .. }))
        {
            return; // PREEMPT_RT: the IRQ thread runs it when its handler ends
        }
        if self.threaded {
            self.wake_bh_thread(vector);
        } else if from_task {
            self.wake_ksoftirqd();
        }
    }

    /// The ISR's effect: NAPI schedules the poll and masks the device
    /// interrupt; without NAPI the packets go to the per-CPU backlog
    /// (netif_rx), dropped when it is full.
    pub(super) fn nic_isr_effect(&mut self, n: usize, packets: u32, from_task: bool) {
        if self.nics[n].threaded.is_some() {
            let line = self.nics[n].line;
            self.lines[line].pending = false;
            return self.napi_schedule_thread(n);
        }
        let nic = &mut self.nics[n];
        if nic.napi {
            if !nic.napi_scheduled {
                nic.napi_scheduled = true;
                self.poll_list.push_back(PollDev::Nic(n));
            }
            // Device interrupt disabled: a level it asserted meanwhile drops.
            let line = nic.line;
            self.lines[line].pending = false;
        } else {
            for _ in 0..packets {
                let Some(p) = self.nics[n].ring.pop_front() else { break };
                if self.backlog.len() >= self.cfg.netdev_max_backlog {
                    self.nics[n].stats.dropped_backlog_full += 1;
                } else {
                    self.backlog.push_back(p);
                }
            }
            if !self.backlog_on_list && !self.backlog.is_empty() {
                self.backlog_on_list = true;
                self.poll_list.push_back(PollDev::Backlog);
            }
        }
        self.raise_softirq(NET_RX, from_task);
    }

    /// Samples what the tick interrupted, as the kernel's tick-based
    /// accounting does (update_process_times → account_*_time).
    fn tick_accounting(&mut self) {
        let tick = self.cfg.tick_ns();
        self.times.ticks += 1;
        let Some(c) = self.cpu.current else { return };
        let in_bh = self.cpu.softirq.is_some();
        let t = &mut self.tasks[c];
        if in_bh {
            if !self.cfg.irq_time_accounting {
                t.acct.charged_stime_ns += tick;
            }
        } else if self.cpu.switch_left.is_some() || t.chunk_kernel || t.is_kernel_thread() {
            t.acct.charged_stime_ns += tick;
        } else {
            t.acct.charged_utime_ns += tick;
        }
    }

    fn timer_tick(&mut self) {
        for s in 0..self.servers.len() {
            self.server_tick(s);
        }
        if let Some(c) = self.cpu.current {
            if self.sched.tick(c, &mut self.tasks, self.now) {
                self.tasks[c].requeue_tail = true;
                self.cpu.need_resched = true;
            }
        }
        if let Some(mut p) = self.bh_policy.take() {
            p.on_tick(self);
            self.bh_policy = Some(p);
        }
    }

    /// A packet of `source` reaches its NIC (after its wire time).
    pub(super) fn packet_arrives(&mut self, source: usize) {
        let now = self.now;
        let s = &self.sources[source];
        let n = s.nic;
        let wire = s.wire_ns;
        // The link carries one frame at a time: a frame cannot finish
        // arriving sooner than its wire time after the previous one.
        let free = self.nics[n].link_free_at;
        if free > 0 && now < free + wire {
            self.q.schedule_at(free + wire, super::Ev::Arrive { source: source as u32 });
            return;
        }
        self.nics[n].link_free_at = now;
        let s = &mut self.sources[source];
        s.sent += 1;
        let pkt = Packet { proto: s.proto, size: s.size, source: source as u16, arrival: now };
        let gap = s.next_gap();
        if now + gap < s.stop {
            self.q.schedule_at(now + gap, super::Ev::Arrive { source: source as u32 });
        }
        let nic = &mut self.nics[n];
        nic.stats.packets_offered += 1;
        if nic.ring.len() >= nic.ring_size {
            nic.stats.dropped_ring_full += 1;
            return;
        }
        nic.ring.push_back(pkt);
        if nic.napi_scheduled {
            return; // device interrupt disabled while NAPI polls
        }
        if nic.coalesce_frames > 1 || nic.coalesce_ns > 0 {
            nic.unsignalled += 1;
            if nic.unsignalled >= nic.coalesce_frames.max(1) {
                nic.unsignalled = 0;
                nic.coalesce_armed = false;
            } else {
                if !nic.coalesce_armed && nic.coalesce_ns > 0 {
                    nic.coalesce_armed = true;
                    nic.coalesce_gen = nic.coalesce_gen.wrapping_add(1);
                    let gen = nic.coalesce_gen;
                    let at = now + nic.coalesce_ns;
                    self.q.schedule_at(at, super::Ev::Coalesce { nic: n as u32, gen });
                }
                return;
            }
        }
        self.raise_nic_irq(n);
    }

    /// The threaded IRQ handler's step: run the driver ISR once per
    /// interrupt, then unmask the line and sleep.
    pub(super) fn irq_thread_step(&mut self, t: TaskId, line: usize) {
        if self.task_runs[t].is_some() {
            // PREEMPT_RT: the softirqs its handler raised, in this thread.
            self.bh_step(Loc::Task(t));
            if self.tasks[t].chunk.is_some() {
                return;
            }
        }
        if self.lines[line].thread_pending {
            self.lines[line].thread_pending = false;
            let cost = match self.lines[line].kind {
                IrqKind::Nic(n) => {
                    let nic = &self.nics[n];
                    if nic.napi {
                        nic.costs.irq
                    } else {
                        let p = nic.ring.len() as u32;
                        self.lines[line].thread_packets = p;
                        nic.costs.irq + nic.costs.irq_per_packet * p as Nanos
                    }
                }
                IrqKind::Device(d) => self.with_device(d, |dev, sim| dev.hardirq_cost(sim)),
                IrqKind::Timer | IrqKind::HrTimer | IrqKind::Ipi | IrqKind::Resched => 0,
            };
            self.tasks[t].chunk = Some(cost);
            self.tasks[t].chunk_kernel = true;
        } else {
            self.block_current(t);
        }
    }

    /// The IRQ thread's step finished: its handler, or (PREEMPT_RT) a
    /// softirq job it runs after the handler.
    pub(super) fn irq_thread_done(&mut self, t: TaskId, line: usize) {
        if self.task_runs[t].is_some() {
            return self.bh_thread_chunk_done(t);
        }
        match self.lines[line].kind {
            IrqKind::Nic(n) => {
                let p = std::mem::take(&mut self.lines[line].thread_packets);
                self.nic_isr_effect(n, p, true);
            }
            IrqKind::Device(d) => self.with_device(d, |dev, sim| dev.hardirq_done(sim)),
            IrqKind::Timer | IrqKind::HrTimer | IrqKind::Ipi | IrqKind::Resched => {}
        }
        self.lines[line].in_service = false;
        if self.softirq_in_irq_thread && self.pending != 0 {
            // irq_forced_thread_fn's local_bh_enable: one __do_softirq run
            // here; what it leaves goes to ksoftirqd (end of the run).
            self.softirq_stats.thread_runs += 1;
            self.task_runs[t] = Some(SoftirqRun::new(self.now, u32::MAX));
        }
    }

    /// Where a NIC's packet goes once the protocol handled it.
    pub(super) fn deliver(&mut self, pkt: Packet) {
        let n = self.sources[pkt.source as usize].nic;
        match pkt.proto {
            Proto::IcmpEcho { reply } => {
                let st = &mut self.nics[n].stats;
                st.packets_received += 1;
                st.icmp_handled += 1;
                if reply {
                    let sent = match self.nics[n].tx_dev {
                        Some(tx) => self.with_device(tx, |d, sim| d.transmit(sim, pkt.size, None)),
                        None => true,
                    };
                    let st = &mut self.nics[n].stats;
                    if sent {
                        st.replies_sent += 1;
                    } else {
                        st.replies_dropped_tx_full += 1;
                    }
                }
            }
            Proto::Udp { socket } => {
                let s = &mut self.sockets[socket as usize];
                if s.enqueue(pkt) {
                    self.nics[n].stats.packets_received += 1;
                    if let Some(w) = s.waiter.take() {
                        self.wake(w);
                    }
                } else {
                    self.nics[n].stats.dropped_socket_full += 1;
                }
            }
        }
    }

    pub(super) fn packet_job_cost(&self, pkt: &Packet) -> (Nanos, Option<TaskId>) {
        let n = self.sources[pkt.source as usize].nic;
        let c = &self.nics[n].costs;
        match pkt.proto {
            Proto::IcmpEcho { reply: true } => (c.icmp_echo, None),
            Proto::IcmpEcho { reply: false } => (c.icmp_no_reply, None),
            Proto::Udp { socket } => (c.udp, self.sockets[socket as usize].owner),
        }
    }

    #[allow(dead_code)]
    fn loc_of_current_run(&self) -> Option<Loc> {
        if self.cpu.softirq.is_some() {
            Some(Loc::Cpu)
        } else {
            self.cpu.current.filter(|&c| self.task_runs[c].is_some()).map(Loc::Task)
        }
    }
}
