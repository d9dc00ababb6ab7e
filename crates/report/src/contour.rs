//! Shaded grids ("contour plots" in the style of the idletime
//! dissertation's Figs. 6.4–6.16): one cell per (x, y) grid point, grey
//! shade by value, the value printed in the cell. The grids of the papers
//! are not evenly spaced (preemption intervals 0, 0.02, 0.1, ... ms), so
//! cells sit at their index and the axes carry the real values as labels.
//!
//! ```
//! use irqlab_report::contour::HeatMap;
//! let svg = HeatMap::new("FG throughput", vec!["1%".into(), "50%".into()], vec!["0".into(), "20ms".into()],
//!     vec![vec![0.5, 0.5], vec![1.0, 0.9]])
//!     .to_svg()
//!     .unwrap();
//! assert!(svg.starts_with("<svg"));
//! ```

use crate::plot::PlotError;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// A grid of values in [lo, hi], drawn as grey cells.
#[derive(Debug, Clone, PartialEq)]
pub struct HeatMap {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// Labels of the columns (x) and rows (y, bottom to top).
    pub x_ticks: Vec<String>,
    pub y_ticks: Vec<String>,
    /// values[row][column]; NaN cells stay white.
    pub values: Vec<Vec<f64>>,
    /// The value range mapped onto the shades.
    pub range: (f64, f64),
    /// True: high values light (throughput, "lighter is better" as in the
    /// dissertation); false: high values dark (errors).
    pub high_is_light: bool,
    /// Text in each cell: value × `cell_scale`, rounded.
    pub cell_scale: f64,
    /// A horizontal dashed line at this row position (fractional, in row
    /// units, 0 = centre of the first row) with a label, e.g. the service time.
    pub marker: Option<(f64, String)>,
    pub size: (u32, u32),
}

impl HeatMap {
    pub fn new(title: impl Into<String>, x_ticks: Vec<String>, y_ticks: Vec<String>, values: Vec<Vec<f64>>) -> Self {
        HeatMap {
            title: title.into(),
            x_label: String::new(),
            y_label: String::new(),
            x_ticks,
            y_ticks,
            values,
            range: (0.0, 1.0),
            high_is_light: true,
            cell_scale: 100.0,
            marker: None,
            size: (520, 420),
        }
    }

    pub fn labels(mut self, x: impl Into<String>, y: impl Into<String>) -> Self {
        self.x_label = x.into();
        self.y_label = y.into();
        self
    }

    pub fn range(mut self, lo: f64, hi: f64, high_is_light: bool) -> Self {
        self.range = (lo, hi);
        self.high_is_light = high_is_light;
        self
    }

    pub fn marker(mut self, row_position: f64, label: impl Into<String>) -> Self {
        self.marker = Some((row_position, label.into()));
        self
    }

    /// The grey level (0 black … 255 white) of a value.
    pub fn shade(&self, v: f64) -> u8 {
        let (lo, hi) = self.range;
        let t = if hi > lo { ((v - lo) / (hi - lo)).clamp(0.0, 1.0) } else { 0.0 };
        let t = if self.high_is_light { t } else { 1.0 - t };
        (40.0 + 210.0 * t).round() as u8
    }

    /// Renders the map as a standalone `<svg>` document.
    pub fn to_svg(&self) -> Result<String, PlotError> {
        side_by_side_svg(std::slice::from_ref(self))
    }

    fn draw_on(&self, area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>) -> Result<(), PlotError> {
        let fail = |e: &dyn std::fmt::Display| PlotError { title: self.title.clone(), message: e.to_string() };
        let nx = self.x_ticks.len().max(1);
        let ny = self.y_ticks.len().max(1);
        let x_ticks = self.x_ticks.clone();
        let y_ticks = self.y_ticks.clone();
        let x_fmt = move |v: &f64| label_at(&x_ticks, *v);
        let y_fmt = move |v: &f64| label_at(&y_ticks, *v);
        let mut chart = ChartBuilder::on(area)
            .caption(&self.title, ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(-0.5..nx as f64 - 0.5, -0.5..ny as f64 - 0.5)
            .map_err(|e| fail(&e))?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(nx)
            .y_labels(ny)
            .x_label_formatter(&x_fmt)
            .y_label_formatter(&y_fmt)
            .x_desc(&self.x_label)
            .y_desc(&self.y_label)
            .draw()
            .map_err(|e| fail(&e))?;
        for (r, row) in self.values.iter().enumerate() {
            for (c, &v) in row.iter().enumerate() {
                let (x, y) = (c as f64, r as f64);
                let g = if v.is_finite() { self.shade(v) } else { 255 };
                chart
                    .draw_series(std::iter::once(Rectangle::new([(x - 0.5, y - 0.5), (x + 0.5, y + 0.5)], RGBColor(g, g, g).filled())))
                    .map_err(|e| fail(&e))?;
                if v.is_finite() {
                    let ink = if g < 128 { WHITE } else { BLACK };
                    let text = format!("{:.0}", v * self.cell_scale);
                    let style = ("sans-serif", 11).into_font().color(&ink).pos(Pos::new(HPos::Center, VPos::Center));
                    chart.draw_series(std::iter::once(Text::new(text, (x, y), style))).map_err(|e| fail(&e))?;
                }
            }
        }
        if let Some((pos, label)) = &self.marker {
            let red = RGBColor(200, 30, 30);
            let xs: Vec<f64> = (0..=(nx * 8)).map(|k| -0.5 + k as f64 / 8.0).collect();
            for pair in xs.chunks(2) {
                if let [a, b] = pair {
                    chart
                        .draw_series(std::iter::once(PathElement::new(vec![(*a, *pos), (*b, *pos)], red.stroke_width(2))))
                        .map_err(|e| fail(&e))?;
                }
            }
            let style = ("sans-serif", 12).into_font().color(&red);
            chart.draw_series(std::iter::once(Text::new(label.clone(), (-0.45, *pos + 0.08), style))).map_err(|e| fail(&e))?;
        }
        Ok(())
    }
}

fn label_at(ticks: &[String], v: f64) -> String {
    let k = v.round();
    if (v - k).abs() < 1e-6 && k >= 0.0 && (k as usize) < ticks.len() {
        ticks[k as usize].clone()
    } else {
        String::new()
    }
}

/// Several maps next to each other in one SVG document (e.g. foreground
/// beside background, as the dissertation's figures show them).
pub fn side_by_side_svg(maps: &[HeatMap]) -> Result<String, PlotError> {
    let width: u32 = maps.iter().map(|m| m.size.0).sum::<u32>().max(1);
    let height = maps.iter().map(|m| m.size.1).max().unwrap_or(420);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        let fail = |e: &dyn std::fmt::Display| PlotError { title: "side by side".into(), message: e.to_string() };
        root.fill(&WHITE).map_err(|e| fail(&e))?;
        let mut rest = root.clone();
        for map in maps {
            let (area, right) = rest.split_horizontally(map.size.0);
            map.draw_on(&area)?;
            rest = right;
        }
        root.present().map_err(|e| fail(&e))?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shades_run_from_dark_to_light() {
        let m = HeatMap::new("t", vec![], vec![], vec![]);
        assert_eq!(m.shade(0.0), 40);
        assert_eq!(m.shade(1.0), 250);
        assert_eq!(m.shade(2.0), 250);
        let e = m.clone().range(0.0, 0.5, false);
        assert_eq!(e.shade(0.0), 250);
        assert_eq!(e.shade(0.5), 40);
    }

    #[test]
    fn renders_cells_ticks_and_marker() {
        let svg = side_by_side_svg(&[
            HeatMap::new(
                "FG",
                vec!["1%".into(), "100%".into()],
                vec!["0".into(), "20ms".into()],
                vec![vec![0.5, 0.52], vec![1.0, f64::NAN]],
            )
            .labels("intensity", "p")
            .marker(0.5, "service time"),
            HeatMap::new("BG", vec!["1%".into()], vec!["0".into()], vec![vec![0.9]]),
        ])
        .unwrap();
        assert!(svg.starts_with("<svg"));
        let flat: String = svg.split_whitespace().collect();
        for text in [">FG<", ">BG<", ">100%<", ">20ms<", ">servicetime<", ">52<", ">90<"] {
            assert!(flat.contains(text), "missing {text} in {svg}");
        }
    }
}
