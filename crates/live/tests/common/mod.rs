//! Helpers shared by the live tests.

pub use irqlab_live::stop::StopOnDrop;
