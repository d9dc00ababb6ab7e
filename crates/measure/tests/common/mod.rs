//! Helpers shared by the live tests.

pub use irqlab_host::stop::StopOnDrop;
