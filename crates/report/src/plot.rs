//! Line and scatter plots as SVG strings.
//!
//! ```
//! use irqlab_report::plot::{LinePlot, Series};
//! let svg = LinePlot::new("Load bound of p=7, e=2")
//!     .x_label("window Δ")
//!     .y_label("load")
//!     .series(Series::line("refined (eq. 9)", vec![(1.0, 1.0), (7.0, 0.29), (9.0, 0.44)]))
//!     .series(Series::points("measured", vec![(2.0, 0.9)]))
//!     .to_svg()
//!     .unwrap();
//! assert!(svg.starts_with("<svg"));
//! ```

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use std::ops::Range;

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Points joined by straight lines, in the given order.
    Line,
    /// Unjoined markers (measured data).
    Points,
}

/// One named set of (x, y) points.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub style: Style,
}

impl Series {
    pub fn line(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series { name: name.into(), points, style: Style::Line }
    }

    pub fn points(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series { name: name.into(), points, style: Style::Points }
    }
}

/// A 2-D plot of several series with a legend. Axis ranges default to the
/// data's extent; `log_x` plots x on a log scale (x must be > 0).
#[derive(Debug, Clone, PartialEq)]
pub struct LinePlot {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    pub x_range: Option<Range<f64>>,
    pub y_range: Option<Range<f64>>,
    pub log_x: bool,
    pub size: (u32, u32),
}

/// Drawing failed (plotters reported an error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("plot `{title}`: {message}")]
pub struct PlotError {
    pub title: String,
    pub message: String,
}

impl LinePlot {
    pub fn new(title: impl Into<String>) -> Self {
        LinePlot {
            title: title.into(),
            x_label: String::new(),
            y_label: String::new(),
            series: Vec::new(),
            x_range: None,
            y_range: None,
            log_x: false,
            size: (800, 480),
        }
    }

    pub fn x_label(mut self, label: impl Into<String>) -> Self {
        self.x_label = label.into();
        self
    }

    pub fn y_label(mut self, label: impl Into<String>) -> Self {
        self.y_label = label.into();
        self
    }

    pub fn series(mut self, series: Series) -> Self {
        self.series.push(series);
        self
    }

    pub fn x_range(mut self, range: Range<f64>) -> Self {
        self.x_range = Some(range);
        self
    }

    pub fn y_range(mut self, range: Range<f64>) -> Self {
        self.y_range = Some(range);
        self
    }

    pub fn log_x(mut self, log: bool) -> Self {
        self.log_x = log;
        self
    }

    /// Renders the plot as a standalone `<svg>` document.
    pub fn to_svg(&self) -> Result<String, PlotError> {
        let fail = |e: &dyn std::fmt::Display| PlotError { title: self.title.clone(), message: e.to_string() };
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, self.size).into_drawing_area();
            root.fill(&WHITE).map_err(|e| fail(&e))?;
            self.draw_on(&root)?;
            root.present().map_err(|e| fail(&e))?;
        }
        Ok(svg)
    }

    /// Draws the plot into an area of a larger SVG.
    fn draw_on(&self, area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>) -> Result<(), PlotError> {
        let fail = |e: &dyn std::fmt::Display| PlotError { title: self.title.clone(), message: e.to_string() };
        let finite = |v: &f64| v.is_finite();
        let xs = self.series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).filter(finite);
        let ys = self.series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).filter(finite);
        let y_range = self.y_range.clone().unwrap_or_else(|| padded(extent(ys), true));
        if self.log_x {
            let x_range = self.x_range.clone().unwrap_or_else(|| {
                let (lo, hi) = extent(xs.filter(|&x| x > 0.0)).unwrap_or((1.0, 10.0));
                lo / 1.25..hi * 1.25
            });
            let lo = if x_range.start > 0.0 { x_range.start } else { 1e-9_f64.max(x_range.end * 1e-6) };
            let x = (lo..x_range.end.max(lo * 10.0)).log_scale();
            self.draw(area, x, y_range).map_err(|e| fail(&e))
        } else {
            let x_range = self.x_range.clone().unwrap_or_else(|| padded(extent(xs), false));
            self.draw(area, x_range, y_range).map_err(|e| fail(&e))
        }
    }

    fn draw<X>(
        &self,
        root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
        x: X,
        y: Range<f64>,
    ) -> Result<(), Box<dyn std::error::Error + '_>>
    where
        X: AsRangedCoord<Value = f64>,
        X::CoordDescType: ValueFormatter<f64>,
    {
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(64)
            .build_cartesian_2d(x, Into::<RangedCoordf64>::into(y))?;
        chart.configure_mesh().x_desc(&self.x_label).y_desc(&self.y_label).light_line_style(WHITE).draw()?;
        for (i, s) in self.series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let data: Vec<(f64, f64)> = s.points.iter().copied().filter(|(a, b)| a.is_finite() && b.is_finite()).collect();
            let anno = match s.style {
                Style::Line => chart.draw_series(LineSeries::new(data, color.stroke_width(2)))?,
                Style::Points => chart.draw_series(data.into_iter().map(|p| Circle::new(p, 3, color.filled())))?,
            };
            anno.label(s.name.clone()).legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(3)));
        }
        if !self.series.is_empty() {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()?;
        }
        Ok(())
    }
}

/// Several plots stacked top to bottom in one SVG document (e.g. demand
/// above load). The width is the widest plot's, the height the sum.
pub fn stacked_svg(plots: &[LinePlot]) -> Result<String, PlotError> {
    let width = plots.iter().map(|p| p.size.0).max().unwrap_or(800);
    let height: u32 = plots.iter().map(|p| p.size.1).sum::<u32>().max(1);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        let fail = |e: &dyn std::fmt::Display| PlotError { title: "stacked".into(), message: e.to_string() };
        root.fill(&WHITE).map_err(|e| fail(&e))?;
        let mut rest = root.clone();
        for plot in plots {
            let (area, below) = rest.split_vertically(plot.size.1);
            plot.draw_on(&area)?;
            rest = below;
        }
        root.present().map_err(|e| fail(&e))?;
    }
    Ok(svg)
}

fn extent(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values.fold(None, |acc, v| match acc {
        None => Some((v, v)),
        Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
    })
}

/// The data's range with a little room; y starts at 0 for non-negative data
/// (loads and demands read best from zero).
fn padded(extent: Option<(f64, f64)>, from_zero: bool) -> Range<f64> {
    let (mut lo, hi) = extent.unwrap_or((0.0, 1.0));
    if from_zero && lo >= 0.0 {
        lo = 0.0;
    }
    let span = if hi > lo { hi - lo } else { hi.abs().max(1.0) };
    let pad = span * 0.05;
    let lo = if from_zero && lo == 0.0 { 0.0 } else { lo - pad };
    lo..hi + pad
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_lines_points_and_legend() {
        let svg = LinePlot::new("demand")
            .x_label("Δ")
            .y_label("demand")
            .series(Series::line("traditional", vec![(0.0, 0.0), (7.0, 2.0), (14.0, 4.0)]))
            .series(Series::points("measured", vec![(3.0, 1.0), (9.0, 3.0)]))
            .to_svg()
            .unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..60]);
        assert!(svg.contains("traditional") && svg.contains("measured") && svg.contains("<circle"));
        assert!(svg.contains("<polyline") || svg.contains("<path"));
    }

    #[test]
    fn log_axis_and_degenerate_data_do_not_fail() {
        let svg = LinePlot::new("curve")
            .log_x(true)
            .series(Series::points("one", vec![(1000.0, 0.5)]))
            .series(Series::line("bad", vec![(f64::NAN, 1.0)]))
            .to_svg()
            .unwrap();
        assert!(svg.contains("curve"));
        assert!(LinePlot::new("empty").to_svg().is_ok());
        let both = stacked_svg(&[LinePlot::new("top"), LinePlot::new("bottom")]).unwrap();
        assert!(both.contains("top") && both.contains("bottom") && both.contains("height=\"960\""));
    }
}
