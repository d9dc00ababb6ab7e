//! The BH-threshold paper (`docs/papers.md` §1): its experiments in
//! simulation ([`sim`], re-exported here) and live on the testbed ([`live`]).

pub mod live;
pub mod sim;

pub use sim::*;
