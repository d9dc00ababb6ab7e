//! The NAPI kthreads a controller holds (bh-budget, process-aware): found,
//! with threaded NAPI switched on through the journal when it was off,
//! then pinned to the controlled CPU and set to the controller's starting
//! policy, each change journalled; at the end restored newest first, the
//! kthreads' settings before threaded NAPI goes back off.

use irqlab_host::journal::sched::SchedAttr;
use irqlab_host::journal::threads::Thread;
use irqlab_host::journal::{self, Applied, Object, Value};
use irqlab_host::Result;

pub struct NapiLayout {
    pub threads: Vec<Thread>,
    guards: Vec<Applied>,
    threaded: Option<Applied>,
}

impl NapiLayout {
    /// `dev`'s NAPI kthreads, nothing changed yet but threaded NAPI.
    pub fn find(dev: &str) -> Result<NapiLayout> {
        let (threads, threaded) = journal::netdev::napi_kthreads(dev)?;
        Ok(NapiLayout { threads, guards: Vec::new(), threaded })
    }

    /// Pins every kthread to `cpu` and sets `attr`, where given.
    pub fn hold(&mut self, cpu: Option<usize>, attr: Option<SchedAttr>) -> Result<()> {
        for t in &self.threads {
            if let Some(cpu) = cpu {
                self.guards.push(journal::apply(Object::ThreadAffinity { thread: t.clone() }, Value::Cpus { cpus: vec![cpu] })?);
            }
            if let Some(attr) = attr {
                self.guards.push(journal::apply(Object::ThreadSched { thread: t.clone() }, Value::Sched { attr })?);
            }
        }
        Ok(())
    }

    /// Restores what was changed; whether this run had switched threaded
    /// NAPI on (reported as `switched_threaded_on`).
    pub fn restore(self) -> Result<bool> {
        journal::restore_all(self.guards)?;
        let switched_on = self.threaded.is_some();
        if let Some(g) = self.threaded {
            g.restore()?;
        }
        Ok(switched_on)
    }
}
