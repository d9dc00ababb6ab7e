//! The process-aware paper (`docs/papers.md` §2): its §5 experiments in
//! simulation ([`sim`], the `irqlab reproduce process-aware` document) and
//! its Fig. 6 live on the testbed ([`fig6`], `irqlab measure accounting
//! --fig6`, the `irqlab/accounting-fig6/v1` document), and its Fig. 7 live
//! beside the simulation ([`live`], `irqlab reproduce process-aware --live`).

pub mod fig6;
pub mod live;
pub mod sim;
