//! Measured interference curves: maximum observed load per window length.
//!
//! The load-bounds paper's empirical load bound (§4, Figs. 4–6): for each
//! window length Δ, the largest fraction of any window of that length that
//! was taken from the probe task. Written by the live probe and by the
//! simulated probe, read by `irqlab fit` and by task sets (`kind = "curve"`).

use crate::input::{InputError, Location};
use serde::{Deserialize, Serialize};

/// The JSON schema tag of a curve document.
pub const CURVE_SCHEMA: &str = "irqlab/curve/v1";

/// One point: over every window of `window_ns`, at most `max_load` of it
/// was taken (a fraction in [0, 1]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// Window length Δ (ns).
    pub window_ns: u64,
    /// Largest observed load over any window of that length, `load_max(Δ)` of the load-bounds paper §4.
    pub max_load: f64,
}

/// The other end of a window length: over every window of `window_ns`, at
/// least `min_load` of it was taken. For an idle-system baseline this is
/// the interference that is in *every* window of that length, so the part
/// of a measured maximum that can be put down to the background for sure
/// (see [`crate::fit::subtract_baseline_floor`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FloorPoint {
    pub window_ns: u64,
    /// Smallest observed load over any window of that length.
    pub min_load: f64,
}

/// The minimal curve document every producer writes and every consumer
/// reads. Producers add their own fields (resolution, histogram,
/// `complete`, ...) beside these; readers ignore what they do not know.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Curve {
    /// Always [`CURVE_SCHEMA`].
    pub schema: String,
    /// The measured points, in any order.
    pub points: Vec<CurvePoint>,
    /// The least load per window length, where the producer measured it
    /// (the live probe does; CSV curves and older documents have none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub floor: Vec<FloorPoint>,
}

/// The header line a CSV curve file starts with.
pub const CSV_HEADER: &str = "window_ns,max_load";
/// The header of a CSV curve that has its least loads too.
pub const CSV_HEADER_WITH_FLOOR: &str = "window_ns,max_load,min_load";

impl Curve {
    /// A curve document holding `points`.
    pub fn new(points: Vec<CurvePoint>) -> Self {
        Curve { schema: CURVE_SCHEMA.to_string(), points, floor: Vec::new() }
    }

    /// A curve document with its least loads too.
    pub fn with_floor(points: Vec<CurvePoint>, floor: Vec<FloorPoint>) -> Self {
        Curve { floor, ..Curve::new(points) }
    }

    /// Reads a curve file's text: JSON (`{"schema": "irqlab/curve/v1",
    /// "points": [...]}`) when it starts with `{`, otherwise CSV with the
    /// header `window_ns,max_load`. Every point is checked
    /// ([`Curve::check_points`]); errors carry `file:line:col`.
    pub fn parse(file: &str, text: &str) -> Result<Curve, InputError> {
        let curve = if text.trim_start().starts_with('{') { Self::parse_json(file, text)? } else { Self::parse_csv(file, text)? };
        curve.check_points().map_err(|(index, message)| InputError::at(message, point_location(file, text, index)))?;
        Ok(curve)
    }

    fn parse_json(file: &str, text: &str) -> Result<Curve, InputError> {
        let curve: Curve = serde_json::from_str(text).map_err(|e| {
            let location = Location { file: file.to_string(), line: e.line(), col: e.column() };
            InputError::at(format!("not a curve document: {e}"), location)
        })?;
        if curve.schema != CURVE_SCHEMA {
            let offset = text.find("\"schema\"").unwrap_or(0);
            return Err(InputError::at(
                format!("schema is `{}`, expected `{CURVE_SCHEMA}`", curve.schema),
                Location::at_offset(file, text, offset),
            ));
        }
        Ok(curve)
    }

    fn parse_csv(file: &str, text: &str) -> Result<Curve, InputError> {
        let mut lines = text.lines().enumerate().filter(|(_, l)| {
            let l = l.trim();
            !l.is_empty() && !l.starts_with('#')
        });
        let at = |line: usize, col: usize| Location { file: file.to_string(), line: line + 1, col };
        let with_floor = match lines.next() {
            Some((_, header)) if header.trim().replace(' ', "") == CSV_HEADER => false,
            Some((_, header)) if header.trim().replace(' ', "") == CSV_HEADER_WITH_FLOOR => true,
            Some((n, _)) => {
                return Err(InputError::at(
                    format!("a CSV curve starts with the header `{CSV_HEADER}` (or `{CSV_HEADER_WITH_FLOOR}`)"),
                    at(n, 1),
                ))
            }
            None => return Err(InputError::at("empty curve file", Location::file_only(file))),
        };
        let columns = if with_floor { 3 } else { 2 };
        let (mut points, mut floor) = (Vec::new(), Vec::new());
        for (n, line) in lines {
            let fields: Vec<&str> = line.split(',').collect();
            if fields.len() != columns {
                let header = if with_floor { CSV_HEADER_WITH_FLOOR } else { CSV_HEADER };
                return Err(InputError::at(format!("expected {columns} fields: {header}"), at(n, 1)));
            }
            // The column where field i starts, for error places.
            let col = |i: usize| fields[..i].iter().map(|f| f.len() + 1).sum::<usize>() + 1;
            let window = fields[0].trim();
            let window_ns = window
                .parse::<u64>()
                .map_err(|_| InputError::at(format!("window_ns `{window}` is not a whole number of nanoseconds"), at(n, 1)))?;
            let number = |i: usize, name: &str| {
                let f = fields[i].trim();
                f.parse::<f64>().map_err(|_| InputError::at(format!("{name} `{f}` is not a number"), at(n, col(i))))
            };
            points.push(CurvePoint { window_ns, max_load: number(1, "max_load")? });
            if with_floor {
                floor.push(FloorPoint { window_ns, min_load: number(2, "min_load")? });
            }
        }
        Ok(Curve::with_floor(points, floor))
    }

    /// Checks what every consumer relies on: at least one point, windows
    /// longer than zero, loads finite and within [0, 1]. On failure, the
    /// index of the offending point and what is wrong with it.
    pub fn check_points(&self) -> Result<(), (Option<usize>, String)> {
        if self.points.is_empty() {
            return Err((None, "the curve has no points".to_string()));
        }
        for (i, p) in self.points.iter().enumerate() {
            if p.window_ns == 0 {
                return Err((Some(i), format!("point {}: window_ns must be > 0", i + 1)));
            }
            if !p.max_load.is_finite() || !(0.0..=1.0).contains(&p.max_load) {
                return Err((Some(i), format!("point {} (window_ns {}): max_load {} is outside [0, 1]", i + 1, p.window_ns, p.max_load)));
            }
        }
        for (i, f) in self.floor.iter().enumerate() {
            let max = self.points.iter().find(|p| p.window_ns == f.window_ns).map_or(1.0, |p| p.max_load);
            if f.window_ns == 0 || !f.min_load.is_finite() || !(0.0..=max).contains(&f.min_load) {
                return Err((
                    None,
                    format!("floor point {} (window_ns {}): min_load {} is outside [0, max_load {max}]", i + 1, f.window_ns, f.min_load),
                ));
            }
        }
        Ok(())
    }

    /// Writes the curve as CSV with the header [`CSV_HEADER`], or
    /// [`CSV_HEADER_WITH_FLOOR`] when every point has its least load.
    pub fn to_csv(&self) -> String {
        let floor_of = |w: u64| self.floor.iter().find(|f| f.window_ns == w).map(|f| f.min_load);
        let with_floor = !self.floor.is_empty() && self.points.iter().all(|p| floor_of(p.window_ns).is_some());
        let mut out = format!("{}\n", if with_floor { CSV_HEADER_WITH_FLOOR } else { CSV_HEADER });
        for p in &self.points {
            match floor_of(p.window_ns).filter(|_| with_floor) {
                Some(min) => out.push_str(&format!("{},{},{min}\n", p.window_ns, p.max_load)),
                None => out.push_str(&format!("{},{}\n", p.window_ns, p.max_load)),
            }
        }
        out
    }
}

/// Where point `index` sits in the source: its CSV line, or for JSON the
/// `index`-th `window_ns` key (a good guess without a span-aware parser).
fn point_location(file: &str, text: &str, index: Option<usize>) -> Location {
    let Some(index) = index else { return Location::file_only(file) };
    let offset = if text.trim_start().starts_with('{') {
        text.match_indices("\"window_ns\"").nth(index).map(|(o, _)| o)
    } else {
        let mut data_lines = text.lines().scan(0usize, |offset, line| {
            let start = *offset;
            *offset += line.len() + 1;
            Some((start, line))
        });
        let mut data = data_lines.by_ref().filter(|(_, l)| {
            let l = l.trim();
            !l.is_empty() && !l.starts_with('#')
        });
        data.next(); // header
        data.nth(index).map(|(o, _)| o)
    };
    offset.map_or_else(|| Location::file_only(file), |o| Location::at_offset(file, text, o))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_json_and_csv_alike() {
        let json = r#"{"schema": "irqlab/curve/v1", "extra": 1,
            "points": [{"window_ns": 1000, "max_load": 0.5}, {"window_ns": 2000, "max_load": 0.25}]}"#;
        let csv = "# measured\nwindow_ns,max_load\n1000,0.5\n2000,0.25\n";
        let a = Curve::parse("a.json", json).unwrap();
        let b = Curve::parse("b.csv", csv).unwrap();
        assert_eq!(a, b);
        assert_eq!(Curve::parse("c.csv", &a.to_csv()).unwrap(), a);
    }

    #[test]
    fn bad_curves_are_located() {
        let e = Curve::parse("c.csv", "window_ns,max_load\n1000,0.5\n2000,x\n").unwrap_err();
        assert_eq!(e.location.unwrap().to_string(), "c.csv:3:6");
        let e = Curve::parse("c.csv", "window_ns,max_load\n1000,0.5\n2000,1.5\n").unwrap_err();
        assert_eq!(e.location.unwrap().to_string(), "c.csv:3:1");
        let e = Curve::parse("c.csv", "a,b\n").unwrap_err();
        assert!(e.message.contains("header"));
        let e = Curve::parse("c.json", "{\"schema\": \"x\", \"points\": []}").unwrap_err();
        assert!(e.message.contains("schema"));
        let json = "{\"schema\": \"irqlab/curve/v1\", \"points\": [\n{\"window_ns\": 1, \"max_load\": 0.5},\n{\"window_ns\": 0, \"max_load\": 0.5}]}";
        let e = Curve::parse("c.json", json).unwrap_err();
        assert_eq!(e.location.unwrap().line, 3);
        let e = Curve::parse("c.json", "{\"points\": ").unwrap_err();
        assert_eq!(e.location.unwrap().line, 1);
        let e = Curve::parse("c.csv", "window_ns,max_load,min_load\n1000,0.5,zero\n").unwrap_err();
        assert_eq!((e.message.as_str(), e.location.unwrap().to_string()), ("min_load `zero` is not a number", "c.csv:2:10".to_string()));
        let e = Curve::parse("c.csv", "window_ns,max_load,min_load\n1000,0.5,0.7\n").unwrap_err();
        assert!(e.message.contains("outside [0, max_load 0.5]"), "{}", e.message);
    }

    #[test]
    fn floors_travel_through_json_and_csv() {
        let csv = "window_ns,max_load,min_load\n1000,0.5,0.1\n2000,0.25,0.05\n";
        let c = Curve::parse("f.csv", csv).unwrap();
        assert_eq!(c.floor, vec![FloorPoint { window_ns: 1000, min_load: 0.1 }, FloorPoint { window_ns: 2000, min_load: 0.05 }]);
        assert_eq!(c.to_csv(), csv);
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(Curve::parse("f.json", &json).unwrap(), c);
        // Without a floor the document is what it always was.
        assert!(!serde_json::to_string(&Curve::new(c.points.clone())).unwrap().contains("floor"));
    }
}
