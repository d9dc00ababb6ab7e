//! Judging the live sweeps: the machine's own miss rate, the limits of a
//! sweep (strict and sustained), the spread of counts over repeated sweeps
//! and each configuration's summary.

use super::*;

/// One repeated sweep of a configuration.
#[derive(Debug, Clone, Serialize)]
pub struct RepeatSummary {
    pub repeat: u32,
    pub tau2_misses: u64,
    pub heartbeats_missed: u64,
    /// Largest swept e2 at and below which τ2 missed no more than the
    /// machine's own rate explains; 0 when it did already at the first.
    pub meets_up_to_e2_ns: Nanos,
    /// The swept e2 before the misses that last to the sweep's end (see
    /// [`sustained_limit`]); 0 when they start at the first.
    pub sustained_up_to_e2_ns: Nanos,
}

/// One configuration's sweep, summed up.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub setup: Setup,
    /// Over all repeats.
    pub tau2_misses: u64,
    pub heartbeats_missed: u64,
    pub heartbeats_sent: u64,
    pub repeats: Vec<RepeatSummary>,
    /// τ2's misses and τ1's polls without a heartbeat per repeated sweep.
    pub tau2_misses_per_sweep: Spread,
    pub heartbeats_missed_per_sweep: Spread,
    /// The median of the repeats' limits (each the largest swept e2 at and
    /// below which τ2 missed no more than the machine's own miss rate
    /// explains, 0 when it did at the first), and their least and largest;
    /// `None` without points.
    pub meets_up_to_e2_ns: Option<Nanos>,
    pub meets_up_to_range_ns: Option<(Nanos, Nanos)>,
    /// The same for the sustained limits (the live limit compared with the
    /// analysis).
    pub sustained_up_to_e2_ns: Option<Nanos>,
    pub sustained_up_to_range_ns: Option<(Nanos, Nanos)>,
    /// The analysis compared with the live limit (with the machine's own
    /// interference; the paper's where that has no curve) and the paper's.
    pub predicted_max_e2_ns: Option<Nanos>,
    pub paper_predicted_max_e2_ns: Option<Nanos>,
}

/// The largest swept e2 at and below which every point missed no more
/// than the machine's own rate explains.
pub(super) fn meets_up_to(points: &[&Point], noise_rate: f64) -> Option<Nanos> {
    points.iter().take_while(|p| !past_noise(p, noise_rate)).last().map(|p| p.e2_ns)
}

/// τ2 missed more at this point than the machine's own rate explains.
fn past_noise(p: &Point, noise_rate: f64) -> bool {
    p.tau2_misses > allowed_misses(p.tau2_jobs, noise_rate)
}

/// The live limit compared with the analysis: the largest swept e2 before
/// the misses that last to the sweep's end (every point after it misses
/// more than the machine's own rate explains), 0 when they start at the
/// first point. τ2's response time cannot fall as e2 grows (fixed
/// priorities, the same interference), so a point past the noise that
/// clean points follow is not τ2's schedulability ending but the machine:
/// on this VM the host's stalls of the vCPU come in bursts (τ1, 2 ms of
/// 10, misses in the same points) that a Poisson rate from the no-flood
/// sweep does not describe. [`meets_up_to`], which any such point ends,
/// is reported beside it.
pub(super) fn sustained_limit(points: &[&Point], noise_rate: f64) -> Nanos {
    let tail = points.iter().rev().take_while(|p| past_noise(p, noise_rate)).count();
    match points.len() - tail {
        0 => 0,
        met => points[met - 1].e2_ns,
    }
}

/// The machine's own miss rate: a one-sided 95% upper bound on the rate
/// of τ2's misses over the no-flood points where τ1 and τ2 leave at least
/// 1 ms of each period idle (a VM's host stalls; what else runs).
pub(super) fn noise_rate(points: &[Point]) -> f64 {
    let quiet = points.iter().filter(|p| p.setup == Setup::NoFlood && p.e2_ns + E1 + MS <= PERIOD);
    let (misses, jobs) = quiet.fold((0, 0), |(m, j), p| (m + p.tau2_misses, j + p.tau2_jobs));
    if jobs == 0 {
        return 0.0;
    }
    poisson_upper_95(misses) / jobs as f64
}

/// λ with P(X ≤ k; λ) = 0.05 for Poisson X: the one-sided 95% upper
/// confidence bound on the mean of k observed events (3.0 for k = 0).
pub(super) fn poisson_upper_95(k: u64) -> f64 {
    let (mut lo, mut hi) = (k as f64, k as f64 + 10.0 + 4.0 * (k as f64).sqrt());
    for _ in 0..100 {
        let mid = (lo + hi) / 2.0;
        if poisson_cdf(k, mid) > 0.05 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

pub(super) fn poisson_cdf(k: u64, lambda: f64) -> f64 {
    let (mut term, mut sum) = ((-lambda).exp(), 0.0);
    for i in 0..=k {
        if i > 0 {
            term *= lambda / i as f64;
        }
        sum += term;
    }
    sum
}

/// The most misses among `jobs` the machine's own rate explains at the
/// 95% level: the smallest c with P(X ≤ c) ≥ 0.95, X Poisson of mean
/// jobs × rate.
pub fn allowed_misses(jobs: u64, rate: f64) -> u64 {
    let lambda = jobs as f64 * rate;
    (0..=jobs).find(|&c| poisson_cdf(c, lambda) >= 0.95).unwrap_or(jobs)
}

pub(super) fn summaries(points: &[Point], predictions: &[Prediction], noise_rate: f64) -> Vec<Summary> {
    Setup::ALL
        .iter()
        .map(|&setup| {
            let mine: Vec<&Point> = points.iter().filter(|p| p.setup == setup).collect();
            let mut rounds: Vec<u32> = mine.iter().map(|p| p.repeat).collect();
            rounds.sort_unstable();
            rounds.dedup();
            let repeats: Vec<RepeatSummary> = rounds
                .iter()
                .map(|&repeat| {
                    let sweep: Vec<&Point> = mine.iter().copied().filter(|p| p.repeat == repeat).collect();
                    RepeatSummary {
                        repeat,
                        tau2_misses: sweep.iter().map(|p| p.tau2_misses).sum(),
                        heartbeats_missed: sweep.iter().map(|p| p.tau1_polls.saturating_sub(p.heartbeats_received)).sum(),
                        meets_up_to_e2_ns: meets_up_to(&sweep, noise_rate).unwrap_or(0),
                        sustained_up_to_e2_ns: sustained_limit(&sweep, noise_rate),
                    }
                })
                .collect();
            let mut limits: Vec<Nanos> = repeats.iter().map(|r| r.meets_up_to_e2_ns).collect();
            limits.sort_unstable();
            let mut sustained: Vec<Nanos> = repeats.iter().map(|r| r.sustained_up_to_e2_ns).collect();
            sustained.sort_unstable();
            let prediction = predictions.iter().find(|p| p.setup == setup);
            Summary {
                setup,
                tau2_misses: mine.iter().map(|p| p.tau2_misses).sum(),
                heartbeats_missed: mine.iter().map(|p| p.tau1_polls.saturating_sub(p.heartbeats_received)).sum(),
                heartbeats_sent: mine.iter().map(|p| p.tau1_polls).sum(),
                tau2_misses_per_sweep: Spread::of(&repeats.iter().map(|r| r.tau2_misses as f64).collect::<Vec<_>>()),
                heartbeats_missed_per_sweep: Spread::of(&repeats.iter().map(|r| r.heartbeats_missed as f64).collect::<Vec<_>>()),
                meets_up_to_e2_ns: median(&limits),
                meets_up_to_range_ns: limits.first().zip(limits.last()).map(|(a, b)| (*a, *b)),
                sustained_up_to_e2_ns: median(&sustained),
                sustained_up_to_range_ns: sustained.first().zip(sustained.last()).map(|(a, b)| (*a, *b)),
                predicted_max_e2_ns: prediction.map(|p| p.machine_max_e2_ns.unwrap_or(p.max_e2_ns)),
                paper_predicted_max_e2_ns: prediction.map(|p| p.max_e2_ns),
                repeats,
            }
        })
        .collect()
}

/// The median of sorted values (the mean of the middle two for an even
/// count); `None` when empty.
pub(super) fn median(sorted: &[Nanos]) -> Option<Nanos> {
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2),
    }
}
