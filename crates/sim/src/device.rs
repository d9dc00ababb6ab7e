//! The plug point for devices other than the built-in NIC (disk, ...):
//! a device owns an IRQ line ([`crate::kernel::IrqKind::Device`]), may
//! schedule its own events ([`crate::kernel::Ev::Device`]) and queue
//! bottom-half jobs ([`crate::kernel::Sim::queue_bh_job`]). The kernel
//! takes the device out of its slot while calling it, so a device may
//! change anything in the simulator except itself.

use crate::kernel::Sim;
use crate::task::TaskId;
use irqlab_analysis::Nanos;

pub trait Device {
    fn name(&self) -> &str;
    /// Handler cost of its hard IRQ (entry/exit costs are added).
    fn hardirq_cost(&mut self, sim: &Sim) -> Nanos;
    /// The hard IRQ handler finished: acknowledge, queue bottom halves.
    fn hardirq_done(&mut self, sim: &mut Sim);
    /// A bottom-half job this device queued finished.
    fn bh_done(&mut self, sim: &mut Sim, token: u64);
    /// One of this device's own events fired.
    fn on_event(&mut self, sim: &mut Sim, token: u64);
    /// Results for the JSON `devices` list.
    fn report(&self) -> serde_json::Value;
    /// Requests or items inside the device (for conservation checks).
    fn in_flight(&self) -> u64 {
        0
    }
    /// A task issued a blocking read ([`crate::task::Step::Read`]); it is
    /// already blocked and the device must wake it when the read is done.
    /// Devices that do not read wake it at once.
    fn submit_read(&mut self, sim: &mut Sim, task: TaskId, _sector: u64, _sectors: u64) {
        sim.wake(task);
    }
    /// A frame of `size` bytes to send (NIC transmit: echo replies, UDP
    /// sends by task `from`). Returns false when it was dropped.
    fn transmit(&mut self, _sim: &mut Sim, _size: u32, _from: Option<TaskId>) -> bool {
        false
    }
    /// Statistics restart (end of warm-up).
    fn reset_stats(&mut self) {}
    /// The device's own conservation law (every request submitted is
    /// completed or still inside), for the result's `conservation`.
    fn conserved(&self) -> bool {
        true
    }
}
