//! A media-player-like task for live experiments (the BH-threshold paper's
//! mplayer at 25 fps): frame k is decoded by a fixed amount of real CPU
//! work, then shown at its display time start + (k + 1) × period, or at
//! once when decoding finished late. The rules are the simulator's
//! `MediaPlayer` (`crates/sim/src/workload.rs`), so the two report the same
//! measures: the delay between consecutive displays, and per frame the
//! decode's wall time and the thread's own CPU time.
//!
//! The work is a spin of a data-dependent xorshift loop whose speed is
//! measured first on the same CPU ([`calibrate`]); a frame asks for a number
//! of iterations, never for a duration, so time stolen by interrupts or
//! other threads stretches the decode as it would a real decoder's.

use irqlab_host::error::{Error, Result};
use irqlab_host::rt::{monotonic_ns, sleep_until_ns, thread_cpu_ns};
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};

/// What to play.
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    /// Time between frames (25 fps: 40 ms).
    pub period_ns: u64,
    /// Each frame's decode work, drawn uniformly in [min, max] (as CPU time
    /// on an otherwise idle CPU, converted with the calibration).
    pub decode_min_ns: u64,
    pub decode_max_ns: u64,
    pub frames: u64,
    /// The CPU the player runs on (None: wherever the scheduler puts it).
    pub cpu: Option<usize>,
    pub seed: u64,
}

/// The spin's speed on one CPU.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Calibration {
    pub cpu: Option<usize>,
    /// Iterations per microsecond, from the fastest of the trials (the one
    /// least disturbed).
    pub iterations_per_us: f64,
    pub trials: u32,
}

/// What a play gave.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Run {
    /// Frames decoded and shown.
    pub frames: u64,
    /// Frames whose decoding ended after their display time.
    pub late_frames: u64,
    /// Delay between consecutive displays, ns (frames − 1 of them).
    pub inter_frame_ns: Vec<u64>,
    /// Per frame: the work asked (as idle CPU time), the decode's wall time
    /// and the thread's CPU time during it (which includes interrupt and
    /// softirq time the kernel charged to the player), ns.
    pub decode_target_ns: Vec<u64>,
    pub decode_wall_ns: Vec<u64>,
    pub decode_cpu_ns: Vec<u64>,
    /// Per frame: how long after its display time it was shown, ns (a late
    /// decode, or a sleep that woke late on a busy machine).
    pub display_lag_ns: Vec<u64>,
    /// Every frame was played (not stopped).
    pub complete: bool,
}

/// `iterations` steps of the work loop ([`calibrate`] measures its speed);
/// returns its state so nothing is optimized away. Real CPU work for any
/// experiment's task whose progress must not be read off a CPU clock the
/// kernel also charges interrupt work to.
#[inline(never)]
pub fn spin(iterations: u64) -> u64 {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..iterations {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x = std::hint::black_box(x);
    }
    x
}

/// Runs `work` on a thread of its own, pinned to `cpu` when given.
fn on_cpu<T: Send>(cpu: Option<usize>, work: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| {
            if let Some(cpu) = cpu {
                irqlab_host::rt::pin_to_cpu(cpu)?;
            }
            work()
        })
        .join()
        .unwrap_or_else(|_| Err(Error::Failed("the player thread panicked".into())))
    })
}

/// Measures the spin's speed on `cpu`: `trials` runs of 200,000 iterations
/// (about 0.2-1 ms each), the fastest kept.
pub fn calibrate(cpu: Option<usize>, trials: u32) -> Result<Calibration> {
    const ITERATIONS: u64 = 200_000;
    let best_ns = on_cpu(cpu, || {
        let mut best = u64::MAX;
        for _ in 0..trials.max(1) {
            let t0 = monotonic_ns();
            std::hint::black_box(spin(ITERATIONS));
            best = best.min(monotonic_ns() - t0);
        }
        Ok(best.max(1))
    })?;
    Ok(Calibration { cpu, iterations_per_us: ITERATIONS as f64 * 1_000.0 / best_ns as f64, trials: trials.max(1) })
}

/// The work loop's sustained speed on `cpu` at SCHED_FIFO `priority`,
/// over `wall_ns`: iterations over elapsed time in windows of
/// [`SUSTAINED_WINDOW_NS`] (the machine's own background included, unlike
/// [`calibrate`]'s fastest trial), the median window's speed. With this as
/// the reference, a task nothing else interrupts does its work in the time
/// asked, and what other work takes from it shows as the rest. The median,
/// not the whole span's mean: a burst of other work on the CPU during the
/// calibration (a 500 ms mean once came out 7% slow, and the process-aware
/// reproduction's hog then did 107% of its "sustained" speed in every run)
/// lowers one or two windows, not the reference. The first window is a
/// warm-up, not counted.
pub fn calibrate_sustained(cpu: usize, priority: u8, wall_ns: u64) -> Result<Calibration> {
    on_cpu(Some(cpu), || {
        irqlab_host::rt::set_fifo(priority)?;
        const CHUNK: u64 = 20_000;
        let windows = (wall_ns / SUSTAINED_WINDOW_NS).max(1) + 1;
        let mut speeds = Vec::with_capacity(windows as usize);
        for _ in 0..windows {
            let start = monotonic_ns();
            let mut done = 0u64;
            while monotonic_ns() - start < SUSTAINED_WINDOW_NS {
                std::hint::black_box(spin(CHUNK));
                done += CHUNK;
            }
            speeds.push(done as f64 / ((monotonic_ns() - start) as f64 / 1e3));
        }
        Ok(Calibration { cpu: Some(cpu), iterations_per_us: median_after_warm_up(&speeds), trials: 1 })
    })
}

/// The windows [`calibrate_sustained`] measures in.
pub const SUSTAINED_WINDOW_NS: u64 = 100_000_000;

/// The median of `speeds` without the first (the warm-up), or the first
/// when it is alone.
fn median_after_warm_up(speeds: &[f64]) -> f64 {
    let mut rest: Vec<f64> = speeds.iter().skip(1).copied().collect();
    if rest.is_empty() {
        return speeds.first().copied().unwrap_or(0.0);
    }
    rest.sort_by(f64::total_cmp);
    let n = rest.len();
    if n % 2 == 1 {
        rest[n / 2]
    } else {
        (rest[n / 2 - 1] + rest[n / 2]) / 2.0
    }
}

impl Config {
    fn check(&self) -> Result<()> {
        if self.period_ns == 0 || self.frames == 0 {
            return Err(Error::Invalid("player: period and frames must be above 0".into()));
        }
        if self.decode_min_ns > self.decode_max_ns {
            return Err(Error::Invalid("player: decode min above max".into()));
        }
        Ok(())
    }
}

/// Plays `config.frames` frames (or until `stop`), as the simulator's
/// player does: decode, sleep until the frame's display time if early,
/// display. `on_start` runs once on the player's thread just before the
/// first frame.
pub fn play(config: &Config, calibration: &Calibration, stop: &AtomicBool, on_start: impl FnOnce() + Send) -> Result<Run> {
    config.check()?;
    on_cpu(config.cpu, || {
        let mut rng = rand_pcg::Pcg64::seed_from_u64(config.seed);
        let mut run = Run::default();
        on_start();
        let start = monotonic_ns();
        let mut last_display: Option<u64> = None;
        for k in 0..config.frames {
            if stop.load(Ordering::Relaxed) {
                return Ok(run);
            }
            let target = rng.gen_range(config.decode_min_ns..=config.decode_max_ns);
            let iterations = (target as f64 / 1_000.0 * calibration.iterations_per_us) as u64;
            let (w0, c0) = (monotonic_ns(), thread_cpu_ns());
            std::hint::black_box(spin(iterations));
            let (w1, c1) = (monotonic_ns(), thread_cpu_ns());
            run.decode_target_ns.push(target);
            run.decode_wall_ns.push(w1 - w0);
            run.decode_cpu_ns.push(c1.saturating_sub(c0));
            let due = start + (k + 1) * config.period_ns;
            if w1 < due {
                sleep_until_ns(due);
            } else {
                run.late_frames += 1;
            }
            let shown = monotonic_ns();
            run.display_lag_ns.push(shown.saturating_sub(due));
            if let Some(last) = last_display {
                run.inter_frame_ns.push(shown - last);
            }
            last_display = Some(shown);
            run.frames += 1;
        }
        run.complete = true;
        Ok(run)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sustained_speed_is_the_median_window_after_the_warm_up() {
        // A slow warm-up and one window a burst of other work slowed:
        // neither moves the reference.
        assert_eq!(median_after_warm_up(&[50.0, 100.0, 101.0, 70.0, 99.0, 100.5]), 100.0);
        assert_eq!(median_after_warm_up(&[50.0, 100.0, 90.0]), 95.0);
        assert_eq!(median_after_warm_up(&[42.0]), 42.0);
        assert_eq!(median_after_warm_up(&[]), 0.0);
    }

    #[test]
    fn plays_every_frame_on_time_when_the_work_fits() {
        let cal = calibrate(None, 5).unwrap();
        assert!(cal.iterations_per_us > 0.0);
        let config = Config { period_ns: 5_000_000, decode_min_ns: 100_000, decode_max_ns: 200_000, frames: 6, cpu: None, seed: 1 };
        let run = play(&config, &cal, &AtomicBool::new(false), || {}).unwrap();
        assert!(run.complete);
        assert_eq!((run.frames, run.inter_frame_ns.len(), run.decode_wall_ns.len()), (6, 5, 6));
        assert!(run.decode_target_ns.iter().all(|t| (100_000..=200_000).contains(t)));
        // Nothing shows before its display time, 5 ms after the previous
        // one's: a gap is a period plus this frame's lag minus the previous
        // frame's (a busy machine can stretch a decode or a sleep's wake-up
        // past the display time; the next gap is then short by as much).
        assert_eq!(run.display_lag_ns.len(), 6);
        for (j, &gap) in run.inter_frame_ns.iter().enumerate() {
            assert!(gap + run.display_lag_ns[j] >= 4_990_000, "gap {j}: {:?}, lags {:?}", run.inter_frame_ns, run.display_lag_ns);
        }
    }

    #[test]
    fn a_stopped_play_is_incomplete() {
        let cal = Calibration { cpu: None, iterations_per_us: 1.0, trials: 1 };
        let config = Config { period_ns: 1_000_000, decode_min_ns: 0, decode_max_ns: 0, frames: 10, cpu: None, seed: 1 };
        let run = play(&config, &cal, &AtomicBool::new(true), || {}).unwrap();
        assert!(!run.complete);
        assert_eq!(run.frames, 0);
        assert!(play(&Config { frames: 0, ..config }, &cal, &AtomicBool::new(false), || {}).is_err());
    }
}
