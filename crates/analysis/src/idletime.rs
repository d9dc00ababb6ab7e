//! The idletime throughput model: predicted foreground and background
//! throughput of a resource shared by one foreground process of intensity
//! `i` and one greedy background (idletime) process, under an idletime
//! scheduler with preemption interval `p`.
//!
//! Source: Eggert, "Background use of idle resource capacity"
//! (`docs/papers.md` §4), Section 4.4 ("quantitative analysis"), as
//! reconstructed in `docs/papers.md` §4 because the PDF text of the formulas
//! is garbled. The model assumes a non-preemptable resource and,
//! like the prototype (§5.5), a preemption interval that starts when a
//! foreground request is *dispatched*.
//!
//! Intensity `i` is the fraction of each `t_max` = 100 ms CPU quantum the
//! foreground process spends generating requests (§6, "Foreground intensity
//! specifies the fraction of each CPU quantum...").

use crate::input::{InputError, Location};
use crate::units::Nanos;
use serde::Serialize;

/// The CPU quantum of the dissertation's benchmark processes, which is also
/// the longest foreground inter-arrival time: `t_max` = 100 ms (§4.4.1).
pub const T_MAX_NS: Nanos = 100_000_000;

/// A baseline table r(i): foreground throughput without idletime load at
/// each intensity (§4.4, "r : I → R"), e.g. Figures 4.18/6.3 (disk) and 6.7
/// (UDP). Points are sorted by intensity; r(i) between points is linear.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BaselineTable {
    /// What the table measures, e.g. "disk random".
    pub name: String,
    /// Throughput unit, e.g. "blocks/s" or "Mb/s".
    pub unit: String,
    /// (intensity as a fraction in (0, 1], throughput), sorted by intensity.
    pub points: Vec<(f64, f64)>,
}

/// The dissertation's random-access disk baseline (Fig. 6.3), shipped as data.
pub const DISK_RANDOM_CSV: &str = include_str!("../data/idletime/disk_random.csv");
/// The dissertation's sequential disk baseline (Fig. 6.5), shipped as data.
pub const DISK_SEQUENTIAL_CSV: &str = include_str!("../data/idletime/disk_sequential.csv");
/// The dissertation's Gigabit UDP baseline (Fig. 6.7), shipped as data.
pub const UDP_GIGE_CSV: &str = include_str!("../data/idletime/udp_gige.csv");
/// The dissertation's Gigabit TCP baseline (Fig. 6.8), shipped as data.
pub const TCP_GIGE_CSV: &str = include_str!("../data/idletime/tcp_gige.csv");

/// The largest throughput a table row may give, in any unit: 10^12 is a
/// terabit per second counted in bits. Beyond it a row is a typo or an
/// overflow elsewhere (1.8e19 is 2^64), and the model's service time
/// (1/r_max) would fall far below a nanosecond.
pub const MAX_THROUGHPUT: f64 = 1e12;

impl BaselineTable {
    /// Parses `intensity_pct,throughput` rows; `#` lines are comments and a
    /// `# unit: X` comment sets the unit. Errors carry `file:line:col`.
    pub fn parse_csv(name: &str, file: &str, text: &str) -> Result<Self, InputError> {
        let mut unit = String::from("units");
        let mut points: Vec<(f64, f64)> = Vec::new();
        let mut offset = 0usize;
        for line in text.split_inclusive('\n') {
            let start = offset;
            offset += line.len();
            let trimmed = line.trim();
            if trimmed.is_empty() {
                continue;
            }
            if let Some(comment) = trimmed.strip_prefix('#') {
                if let Some(u) = comment.trim().strip_prefix("unit:") {
                    unit = u.trim().to_string();
                }
                continue;
            }
            let at = |col: usize| Location::at_offset(file, text, start + col);
            let fields: Vec<&str> = line.trim_end().split(',').collect();
            if fields.len() != 2 {
                return Err(InputError::at("expected two columns: intensity_pct,throughput", at(0)));
            }
            let (Ok(i_pct), Ok(r)) = (fields[0].trim().parse::<f64>(), fields[1].trim().parse::<f64>()) else {
                if points.is_empty() && fields[0].trim().parse::<f64>().is_err() {
                    continue; // header row
                }
                return Err(InputError::at("expected two numbers", at(0)));
            };
            if !(i_pct > 0.0 && i_pct <= 100.0) {
                return Err(InputError::at("intensity must be in (0, 100] percent", at(0)));
            }
            if !(r.is_finite() && r >= 0.0) {
                return Err(InputError::at("throughput must be a non-negative number", at(fields[0].len() + 1)));
            }
            if r > MAX_THROUGHPUT {
                return Err(InputError::at(
                    format!("throughput {r:e} is implausible: at most {MAX_THROUGHPUT:e} per second"),
                    at(fields[0].len() + 1),
                ));
            }
            if let Some(&(last, _)) = points.last() {
                if i_pct / 100.0 <= last {
                    return Err(InputError::at("intensities must increase from row to row", at(0)));
                }
            }
            points.push((i_pct / 100.0, r));
        }
        if points.is_empty() {
            return Err(InputError::at("the table has no rows", Location::file_only(file)));
        }
        if points.iter().all(|&(_, r)| r == 0.0) {
            return Err(InputError::at("every throughput is zero", Location::file_only(file)));
        }
        Ok(BaselineTable { name: name.to_string(), unit, points })
    }

    /// A shipped table; these are compile-time data and known to parse.
    fn shipped(name: &str, file: &str, text: &str) -> Self {
        Self::parse_csv(name, file, text).expect("shipped baseline table parses")
    }

    /// Fig. 6.3: random 512-byte disk reads, blocks/s.
    pub fn disk_random() -> Self {
        Self::shipped("disk random", "disk_random.csv", DISK_RANDOM_CSV)
    }
    /// Fig. 6.5: sequential disk reads with read-ahead, MB/s.
    pub fn disk_sequential() -> Self {
        Self::shipped("disk sequential", "disk_sequential.csv", DISK_SEQUENTIAL_CSV)
    }
    /// Fig. 6.7: UDP over Gigabit Ethernet, Mb/s.
    pub fn udp_gige() -> Self {
        Self::shipped("udp gige", "udp_gige.csv", UDP_GIGE_CSV)
    }
    /// Fig. 6.8: TCP over Gigabit Ethernet, Mb/s.
    pub fn tcp_gige() -> Self {
        Self::shipped("tcp gige", "tcp_gige.csv", TCP_GIGE_CSV)
    }

    /// r(i), linear between table points and clamped to the first and last
    /// point outside them (§4.4: r is only known at measured intensities).
    pub fn r(&self, i: f64) -> f64 {
        let pts = &self.points;
        if i <= pts[0].0 {
            return pts[0].1;
        }
        for w in pts.windows(2) {
            let ((i0, r0), (i1, r1)) = (w[0], w[1]);
            if i <= i1 {
                return r0 + (r1 - r0) * (i - i0) / (i1 - i0);
            }
        }
        pts[pts.len() - 1].1
    }

    /// r_max: the largest baseline throughput, the normaliser of background
    /// throughput (§4.4.1, b_n = b / max r(i)). For the shipped tables this
    /// is r(1).
    pub fn r_max(&self) -> f64 {
        self.points.iter().map(|&(_, r)| r).fold(0.0, f64::max)
    }
}

/// How the model's service time (the preemption cost of one background
/// request, §4.4 "the preemption cost ... is the inverse of the service
/// rate") is chosen. `docs/papers.md` §4 writes it as 1/r_max; that only has time
/// units when r counts requests per second (disk blocks/s). For throughput in
/// bytes or bits per second the dissertation instead uses the measured mean
/// service time: 19 ms for the disk (§4.4.2) and 0.05 ms for a 1500-byte
/// packet on Gigabit Ethernet including kernel processing (§4.4.3).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum ServiceTime {
    /// A measured mean service time.
    Fixed(Nanos),
    /// 1 / r_max, with r counted in requests per second.
    InverseRmax,
}

/// The model's parameters besides the baseline table.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ModelParams {
    pub service: ServiceTime,
    /// t_max, the longest foreground inter-arrival time (100 ms, §4.4.1).
    pub t_max_ns: Nanos,
    /// α ∈ [0, 1]: foreground efficiency loss when background work is
    /// present (context switches change resource state, §4.4 "Foreground
    /// Performance"). A resource-dependent constant; 1 means no loss.
    pub alpha: f64,
}

impl ModelParams {
    /// The service time in ns under this choice for `table`.
    pub fn service_ns(&self, table: &BaselineTable) -> f64 {
        match self.service {
            ServiceTime::Fixed(ns) => ns as f64,
            ServiceTime::InverseRmax => 1e9 / table.r_max(),
        }
    }
}

/// The two built-in resources of `idletime-model --resource`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// Random disk reads (§4.4.2): Fig. 6.3 table, 19 ms measured service.
    Disk,
    /// UDP over GigE (§4.4.3): Fig. 6.7 table, 0.05 ms measured service.
    Udp,
}

impl Resource {
    pub fn table(self) -> BaselineTable {
        match self {
            Resource::Disk => BaselineTable::disk_random(),
            Resource::Udp => BaselineTable::udp_gige(),
        }
    }
    /// Default parameters: the measured service time of §4.4.2 / §4.4.3,
    /// t_max = 100 ms, α = 1.
    pub fn params(self) -> ModelParams {
        let service = match self {
            Resource::Disk => ServiceTime::Fixed(19_000_000),
            Resource::Udp => ServiceTime::Fixed(50_000),
        };
        ModelParams { service, t_max_ns: T_MAX_NS, alpha: 1.0 }
    }
}

/// Background throughput b(i, p) (§4.4 "Background Performance"; `docs/papers.md` §4):
///
/// - `b = r_max − r(i)/2` if p < service (the scheduler is a plain priority
///   queue; each foreground request waits half a service time on average);
/// - `b = (r_max − r(i)) · max(0, s(i) − (p + service)) / s(i)` if
///   service ≤ p ≤ t_max, with s(i) = (1 − i)·t_max the mean foreground
///   inter-arrival gap;
/// - `b = 0` if p > t_max.
///
/// Clamped to [0, r_max]; intensity clamped to (0, 1].
pub fn background_throughput(table: &BaselineTable, params: &ModelParams, i: f64, p_ns: Nanos) -> f64 {
    let i = i.clamp(0.0, 1.0);
    let r_max = table.r_max();
    let r_i = table.r(i);
    let service = params.service_ns(table);
    let p = p_ns as f64;
    let b = if p < service {
        r_max - r_i / 2.0
    } else if p_ns <= params.t_max_ns {
        let s = (1.0 - i) * params.t_max_ns as f64;
        if s <= 0.0 {
            0.0
        } else {
            (r_max - r_i) * (s - (p + service)).max(0.0) / s
        }
    } else {
        0.0
    };
    b.clamp(0.0, r_max)
}

/// Foreground throughput f(i, p) = min(r_max − b(i, p), r(i)), times α when
/// b(i, p) > 0 (§4.4 "Foreground Performance"; `docs/papers.md` §4).
pub fn foreground_throughput(table: &BaselineTable, params: &ModelParams, i: f64, p_ns: Nanos) -> f64 {
    let b = background_throughput(table, params, i, p_ns);
    let f = (table.r_max() - b).min(table.r(i.clamp(0.0, 1.0))).max(0.0);
    if b > 0.0 {
        f * params.alpha.clamp(0.0, 1.0)
    } else {
        f
    }
}

/// One model point with the normalisation of §4.4.1: f_n = f / r(i),
/// b_n = b / max r(i).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Prediction {
    pub intensity: f64,
    pub p_ns: Nanos,
    pub foreground: f64,
    pub background: f64,
    pub foreground_norm: f64,
    pub background_norm: f64,
}

/// Evaluates f, b and their normalised forms at (i, p).
pub fn predict(table: &BaselineTable, params: &ModelParams, i: f64, p_ns: Nanos) -> Prediction {
    let foreground = foreground_throughput(table, params, i, p_ns);
    let background = background_throughput(table, params, i, p_ns);
    let r_i = table.r(i.clamp(0.0, 1.0));
    Prediction {
        intensity: i,
        p_ns,
        foreground,
        background,
        foreground_norm: if r_i > 0.0 { foreground / r_i } else { 0.0 },
        background_norm: background / table.r_max(),
    }
}

/// [`predict`] over a grid of preemption intervals × foreground
/// intensities: one row per interval, one cell per intensity.
pub fn predict_grid(table: &BaselineTable, params: &ModelParams, intervals_ns: &[Nanos], intensities: &[f64]) -> Vec<Vec<Prediction>> {
    intervals_ns.iter().map(|&p| intensities.iter().map(|&i| predict(table, params, i, p)).collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    #[test]
    fn shipped_tables_parse_with_their_units() {
        let d = BaselineTable::disk_random();
        assert_eq!(d.unit, "blocks/s");
        assert_eq!(d.points.len(), 18);
        assert!(close(d.r_max(), 52.40));
        assert_eq!(BaselineTable::udp_gige().unit, "Mb/s");
        assert!(close(BaselineTable::udp_gige().r_max(), 275.95));
        assert!(close(BaselineTable::tcp_gige().r_max(), 418.14));
        assert!(close(BaselineTable::disk_sequential().r_max(), 12.90));
    }

    #[test]
    fn r_interpolates_and_clamps() {
        let d = BaselineTable::disk_random();
        // 50% lies between 45:26.04 and 55:30.86.
        assert!(close(d.r(0.5), 28.45));
        assert!(close(d.r(0.001), 8.30));
        assert!(close(d.r(1.0), 52.40));
    }

    #[test]
    fn below_service_time_is_a_priority_queue() {
        // Disk, i = 50%, p = 10 ms < 19 ms: b = 52.40 - 28.45/2 = 38.175,
        // f = min(52.40 - 38.175, 28.45) = 14.225 = r(i)/2.
        let (t, m) = (Resource::Disk.table(), Resource::Disk.params());
        let pr = predict(&t, &m, 0.5, 10 * MS);
        assert!(close(pr.background, 38.175));
        assert!(close(pr.foreground, 14.225));
        assert!(close(pr.foreground_norm, 0.5));
        assert!(close(pr.background_norm, 38.175 / 52.40));
    }

    #[test]
    fn middle_region_at_hand_computed_point() {
        // Disk, i = 10%, p = 20 ms: r = 9.34, s = 90 ms,
        // b = (52.40 - 9.34) * (90 - 39) / 90 = 24.40066..., f = min(28.0, 9.34) * α.
        let t = Resource::Disk.table();
        let m = ModelParams { alpha: 0.9, ..Resource::Disk.params() };
        let b = background_throughput(&t, &m, 0.1, 20 * MS);
        assert!(close(b, 43.06 * 51.0 / 90.0));
        assert!(close(foreground_throughput(&t, &m, 0.1, 20 * MS), 9.34 * 0.9));
    }

    #[test]
    fn background_clamps_to_zero_when_interval_fills_the_gap() {
        // i = 50%, p = 40 ms: s = 50 ms < 40 + 19 → b = 0, f = r(i), α unused.
        let t = Resource::Disk.table();
        let m = ModelParams { alpha: 0.5, ..Resource::Disk.params() };
        let pr = predict(&t, &m, 0.5, 40 * MS);
        assert_eq!(pr.background, 0.0);
        assert!(close(pr.foreground_norm, 1.0));
        // Above t_max nothing runs in the background either.
        assert_eq!(background_throughput(&t, &m, 0.01, 150 * MS), 0.0);
        // i = 100%: s = 0, no division by zero.
        assert_eq!(background_throughput(&t, &m, 1.0, 30 * MS), 0.0);
    }

    #[test]
    fn udp_point_and_inverse_rmax_service() {
        // UDP, i = 30%, p = 1 ms: r = 82.51, s = 70 ms,
        // b = (275.95 - 82.51) * (70 - 1.05) / 70.
        let (t, m) = (Resource::Udp.table(), Resource::Udp.params());
        let b = background_throughput(&t, &m, 0.3, MS);
        assert!(close(b, (275.95 - 82.51) * 68.95 / 70.0));
        // 1/r_max of the disk table = 1/52.4 s = 19.08 ms: p = 19 ms is below it.
        let d = Resource::Disk.table();
        let inv = ModelParams { service: ServiceTime::InverseRmax, ..Resource::Disk.params() };
        assert!(close(inv.service_ns(&d), 1e9 / 52.40));
        assert!(close(background_throughput(&d, &inv, 0.5, 19 * MS), 52.40 - 28.45 / 2.0));
    }

    #[test]
    fn bad_tables_are_located_errors() {
        let e = BaselineTable::parse_csv("x", "t.csv", "intensity_pct,throughput\n10,1\n5,2\n").unwrap_err();
        assert_eq!(e.location.as_ref().unwrap().to_string(), "t.csv:3:1");
        let e = BaselineTable::parse_csv("x", "t.csv", "10,abc\n").unwrap_err();
        assert!(e.to_string().contains("two numbers"), "{e}");
        let e = BaselineTable::parse_csv("x", "t.csv", "150,1\n").unwrap_err();
        assert!(e.to_string().contains("(0, 100]"));
        assert!(BaselineTable::parse_csv("x", "t.csv", "# only\n").is_err());
        for huge in ["1.8e19", "1e308"] {
            let e = BaselineTable::parse_csv("x", "t.csv", &format!("10,5\n20,{huge}\n")).unwrap_err();
            assert_eq!(e.location.as_ref().unwrap().to_string(), "t.csv:2:4");
            assert!(e.to_string().contains("implausible"), "{e}");
        }
    }
}
