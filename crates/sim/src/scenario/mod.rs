//! Scenario files (TOML): machine, NIC, kernel threads, tasks, traffic,
//! bottom-half policy, run and metric selection. Every value that is
//! wrong is reported with its `file:line:col`.
//!
//! Three steps: [`keys`] checks every key against its place (a key of
//! another task kind is an error naming the valid keys), serde reads the
//! file into [`raw`] (spanned strings), [`validate`] makes the typed
//! [`Spec`] (durations as [`Nanos`], one [`Work`] variant per task kind)
//! and [`build`] makes a fresh simulator from the spec for each run.
//! [`Scenario::parse`] does all of them once; sweeps change the spec
//! ([`Scenario::spec_mut`]) and run again.
//!
//! A new key goes into its place's list in `keys.rs`, its `Raw*` struct
//! (`raw.rs`), its spec type (`spec.rs`, typed), its check (`validate.rs`)
//! and its use (`build.rs`); a new task kind is a new [`Work`] variant.

mod build;
mod keys;
mod raw;
pub mod spec;
mod validate;

pub use spec::*;

use irqlab_analysis::{InputError, Location, Nanos};

/// A parsed, validated scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub file: String,
    text: String,
    spec: Spec,
}

/// The longest run a scenario may ask for: 10^6 simulated seconds (11.6
/// days). At the benchmark's ~40 simulated seconds per wall second that is
/// already about 7 hours; anything longer is a typo, not an experiment.
pub const MAX_DURATION_NS: Nanos = 1_000_000 * 1_000_000_000;

/// The largest ring, queue, backlog, weight or budget a scenario may set
/// (2^20: Linux's largest NIC rings hold 2^15 descriptors).
pub const MAX_QUEUE: u64 = 1 << 20;

/// The most CPUs a scenario may simulate (each is a simulated kernel of
/// its own; the survey's machines have up to a few dozen).
pub const MAX_CORES: u32 = 64;

/// Run parameters after overrides.
#[derive(Debug, Clone, Copy)]
pub struct RunParams {
    pub duration: Nanos,
    pub warmup: Nanos,
    pub seed: u64,
}

impl Scenario {
    /// Parses and validates `text` (the contents of `file`), and builds
    /// the simulator once (the checks that need all of it).
    pub fn parse(file: &str, text: &str) -> Result<Scenario, InputError> {
        keys::check(file, text)?;
        let raw: raw::Raw = toml::from_str(text).map_err(|e| InputError::from_toml(file, text, &e))?;
        let spec = validate::spec(file, text, raw)?;
        let sc = Scenario { file: file.to_string(), text: text.to_string(), spec };
        sc.check()?;
        Ok(sc)
    }

    /// Builds the simulator once: the checks of names and sockets, and the
    /// bottom-half policy's parameters. After changing the spec, this says
    /// whether it still holds together.
    pub fn check(&self) -> Result<(), InputError> {
        let p = self.run_params(None, None)?;
        self.build_machine(p).map(|_| ())
    }

    /// The validated contents.
    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    /// The contents, to change before a run (a sweep's point).
    pub fn spec_mut(&mut self) -> &mut Spec {
        &mut self.spec
    }

    pub fn name(&self) -> String {
        self.spec
            .name
            .clone()
            .unwrap_or_else(|| std::path::Path::new(&self.file).file_stem().map_or("scenario".into(), |s| s.to_string_lossy().into_owned()))
    }

    /// Whether a run produces a probe curve.
    pub fn has_probe(&self) -> bool {
        self.spec.tasks.iter().any(|t| matches!(t.work, Work::Probe(_)))
            || self.spec.metrics.iter().any(|m| matches!(m, MetricSpec::Probe { .. }))
    }

    pub fn description(&self) -> Option<&str> {
        self.spec.description.as_deref()
    }

    fn err(&self, span: Span, msg: impl Into<String>) -> InputError {
        InputError::at(msg, Location::at_span(&self.file, &self.text, span))
    }

    /// Duration, seed and warm-up from the file, with command-line
    /// overrides.
    pub fn run_params(&self, seed: Option<u64>, duration: Option<Nanos>) -> Result<RunParams, InputError> {
        let r = &self.spec.run;
        let duration = duration.unwrap_or(r.duration);
        if r.warmup >= duration {
            return Err(self.err(r.warmup_at.clone(), "warm-up must be shorter than the run"));
        }
        Ok(RunParams { duration, warmup: r.warmup, seed: seed.or(r.seed).unwrap_or(1) })
    }

    /// Builds a fresh simulator for one run (of CPU 0, on a machine of
    /// several: [`Scenario::build_machine`] builds them all).
    pub fn build(&self, p: RunParams) -> Result<crate::Sim, InputError> {
        build::build(self, p, 0)
    }

    /// Builds every CPU of the machine for one run.
    pub fn build_machine(&self, p: RunParams) -> Result<crate::machine::Machine, InputError> {
        let cpus = (0..self.spec.machine.cores).map(|cpu| build::build(self, p, cpu)).collect::<Result<Vec<_>, _>>()?;
        Ok(crate::machine::Machine::new(cpus))
    }

    /// CPUs simulated.
    pub fn cores(&self) -> usize {
        self.spec.machine.cores
    }
}

/// Parses a link rate: `"100Mbit"`, `"1Gbit"`, `"10Gbit/s"`, `"56kbit"`.
pub fn parse_link(s: &str) -> Result<u64, String> {
    let t = s.trim().trim_end_matches("/s").trim_end_matches("ps");
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = (&t[..split], t[split..].trim());
    let v: f64 = num.parse().map_err(|_| format!("link rate `{s}` is not a number with a unit (e.g. \"100Mbit\")"))?;
    let scale = match unit {
        "bit" | "b" => 1.0,
        "kbit" | "Kbit" | "kb" => 1e3,
        "Mbit" | "mbit" | "Mb" => 1e6,
        "Gbit" | "gbit" | "Gb" => 1e9,
        _ => return Err(format!("link rate `{s}` has an unknown unit (bit, kbit, Mbit, Gbit)")),
    };
    let r = (v * scale).round();
    if r < 1.0 {
        return Err(format!("link rate `{s}` must be positive"));
    }
    Ok(r as u64)
}
