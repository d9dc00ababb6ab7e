//! A generic interrupt source (`[[irq]]` in a scenario): a device that
//! interrupts at constant or Poisson intervals, with a hard-IRQ handler
//! cost and an optional bottom-half job on a softirq vector. Useful as
//! background interrupt load, and the smallest example of the
//! [`crate::device::Device`] plug point.

use crate::device::Device;
use crate::engine::SourceRng;
use crate::kernel::{Ev, Sim};
use crate::softirq::{Job, JobWhat};
use irqlab_analysis::Nanos;
use rand::Rng;
use serde_json::json;

pub struct IrqSource {
    pub name: String,
    pub id: usize,
    pub line: usize,
    pub interval: Nanos,
    pub poisson: bool,
    pub handler: Nanos,
    pub bh_cost: Nanos,
    pub vector: u32,
    pub rng: SourceRng,
    raised: u64,
    handled: u64,
    bh_done: u64,
}

impl IrqSource {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        name: String,
        id: usize,
        line: usize,
        interval: Nanos,
        poisson: bool,
        handler: Nanos,
        bh_cost: Nanos,
        vector: u32,
        rng: SourceRng,
    ) -> Self {
        IrqSource { name, id, line, interval, poisson, handler, bh_cost, vector, rng, raised: 0, handled: 0, bh_done: 0 }
    }

    /// The gap to the next interrupt.
    pub fn next_gap(&mut self) -> Nanos {
        if self.poisson {
            let u: f64 = self.rng.gen();
            ((-(1.0 - u).ln() * self.interval as f64).round() as Nanos).max(1)
        } else {
            self.interval
        }
    }
}

impl Device for IrqSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn hardirq_cost(&mut self, _sim: &Sim) -> Nanos {
        self.handler
    }

    fn hardirq_done(&mut self, sim: &mut Sim) {
        self.handled += 1;
        if self.bh_cost > 0 {
            let job = Job { vector: self.vector, cost: self.bh_cost, what: JobWhat::Device { dev: self.id, token: 0 }, owner: None };
            sim.queue_bh_job(job, false);
        }
    }

    fn bh_done(&mut self, _sim: &mut Sim, _token: u64) {
        self.bh_done += 1;
    }

    fn on_event(&mut self, sim: &mut Sim, _token: u64) {
        self.raised += 1;
        sim.raise_irq(self.line);
        let gap = self.next_gap();
        sim.q.schedule_in(gap, Ev::Device { dev: self.id as u32, token: 0 });
    }

    fn reset_stats(&mut self) {
        (self.raised, self.handled, self.bh_done) = (0, 0, 0);
    }

    fn report(&self) -> serde_json::Value {
        json!({"name": self.name, "kind": "irq", "raised": self.raised, "hardirqs": self.handled,
               "bottom_halves_done": self.bh_done})
    }
}
