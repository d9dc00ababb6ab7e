//! One module per subcommand; each has `Args` (clap) and `run(Args)`.

pub mod analyze;
pub mod bench;
pub mod bound;
pub mod completions;
pub mod control;
pub mod control_export;
pub mod doctor;
pub mod export;
pub mod fit;
pub mod idletime_model;
pub mod lab;
pub mod load;
pub mod man;
pub mod measure;
pub mod measure_accounting;
pub mod measure_interference;
pub mod measure_latency;
pub mod reproduce;
pub mod sim;
pub mod sim_from_survey;
pub mod stimulus;
pub mod survey;
pub mod testbed;
pub mod traffic;
pub mod watch;
