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
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use std::ops::Range;

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Points joined by straight lines, in the given order.
    Line,
    /// Unjoined markers (measured data).
    Points,
    /// A dashed line (a model or fit drawn over measured data).
    Dashed,
    /// A histogram's outline: each y holds from its x to the next point's x
    /// (give the bins' left edges, then the last bin's right edge).
    Steps,
    /// Filled from y = 0 up to the line (stacked areas: give each layer
    /// its cumulative top, the highest first, so lower layers are drawn
    /// over it).
    Area,
}

/// One named set of (x, y) points.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub style: Style,
    /// Index into the plot palette; `None`: the series' own position. Two
    /// series with one index share a colour (measured points and their fit).
    pub color: Option<usize>,
}

impl Series {
    pub fn line(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series { name: name.into(), points, style: Style::Line, color: None }
    }

    pub fn points(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series { style: Style::Points, ..Series::line(name, points) }
    }

    pub fn dashed(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series { style: Style::Dashed, ..Series::line(name, points) }
    }

    pub fn steps(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series { style: Style::Steps, ..Series::line(name, points) }
    }

    pub fn area(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series { style: Style::Area, ..Series::line(name, points) }
    }

    /// Draws the series in palette colour `index`.
    pub fn color(mut self, index: usize) -> Self {
        self.color = Some(index);
        self
    }

    /// Stacked areas from layers given bottom to top, each point's y the
    /// layer's top: returned top layer first, so that each lower layer is
    /// drawn over the one above it, each in its own colour from
    /// `first_color` up (bottom layer first).
    pub fn stacked(layers: Vec<(String, Vec<(f64, f64)>)>, first_color: usize) -> Vec<Series> {
        layers.into_iter().enumerate().rev().map(|(i, (name, points))| Series::area(name, points).color(first_color + i)).collect()
    }
}

/// A 2-D plot of several series with a legend. Axis ranges default to the
/// data's extent; `log_x` plots x on a log scale (points with x ≤ 0 are
/// left out), `log_y` y (values ≤ 0 are drawn at the axis' bottom, where a
/// histogram's empty bins belong).
#[derive(Debug, Clone, PartialEq)]
pub struct LinePlot {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    pub x_range: Option<Range<f64>>,
    pub y_range: Option<Range<f64>>,
    pub log_x: bool,
    pub log_y: bool,
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
            log_y: false,
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

    pub fn log_y(mut self, log: bool) -> Self {
        self.log_y = log;
        self
    }

    /// Width and height in pixels (default 800 × 480).
    pub fn size(mut self, width: u32, height: u32) -> Self {
        self.size = (width, height);
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
        let (x, y) = (self.x_axis(), self.y_axis());
        match (self.log_x, self.log_y) {
            (false, false) => self.draw(area, x, y),
            (true, false) => self.draw(area, x.log_scale(), y),
            (false, true) => self.draw(area, x, y.log_scale()),
            (true, true) => self.draw(area, x.log_scale(), y.log_scale()),
        }
        .map_err(|e| fail(&e))
    }

    /// The points a series is drawn with: finite, x > 0 on a log x axis,
    /// y ≤ 0 raised to the bottom of a log y axis.
    fn plotted(&self, series: &Series, y_bottom: f64) -> Vec<(f64, f64)> {
        let kept = series.points.iter().copied().filter(|(a, b)| a.is_finite() && b.is_finite() && (!self.log_x || *a > 0.0));
        kept.map(|(a, b)| (a, if self.log_y { b.max(y_bottom) } else { b })).collect()
    }

    fn x_axis(&self) -> Range<f64> {
        let xs = self.series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).filter(|v| v.is_finite());
        match &self.x_range {
            Some(r) if self.log_x => positive(r.clone()),
            Some(r) => r.clone(),
            None if self.log_x => log_padded(extent(xs.filter(|&x| x > 0.0)), 1.25),
            None => padded(extent(xs), false),
        }
    }

    fn y_axis(&self) -> Range<f64> {
        let ys = self.series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).filter(|v| v.is_finite());
        match &self.y_range {
            Some(r) if self.log_y => positive(r.clone()),
            Some(r) => r.clone(),
            None if self.log_y => log_padded(extent(ys.filter(|&y| y > 0.0)), 1.5),
            None => padded(extent(ys), true),
        }
    }

    fn draw<X, Y>(
        &self,
        root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
        x: X,
        y: Y,
    ) -> Result<(), Box<dyn std::error::Error + '_>>
    where
        X: AsRangedCoord<Value = f64>,
        X::CoordDescType: ValueFormatter<f64>,
        Y: AsRangedCoord<Value = f64>,
        Y::CoordDescType: ValueFormatter<f64>,
    {
        let small = self.size.1 < 400;
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, ("sans-serif", if small { 16 } else { 20 }))
            .margin(if small { 8 } else { 12 })
            .x_label_area_size(if small { 38 } else { 44 })
            .y_label_area_size(if small { 56 } else { 64 })
            .build_cartesian_2d(x, y)?;
        chart
            .configure_mesh()
            .x_desc(&self.x_label)
            .y_desc(&self.y_label)
            .x_label_formatter(&|v| tick_label(*v))
            .y_label_formatter(&|v| tick_label(*v))
            .light_line_style(WHITE)
            .draw()?;
        let y_bottom = chart.y_range().start;
        for (i, s) in self.series.iter().enumerate() {
            let color = Palette99::pick(s.color.unwrap_or(i)).to_rgba();
            let data = self.plotted(s, y_bottom);
            let line = color.stroke_width(2);
            let anno = match s.style {
                Style::Line => chart.draw_series(LineSeries::new(data, line))?,
                Style::Steps => chart.draw_series(LineSeries::new(steps(&data), line))?,
                Style::Points => chart.draw_series(data.into_iter().map(|p| Circle::new(p, 3, color.filled())))?,
                Style::Area => {
                    // Opaque fill: a stacked layer must hide the layers
                    // above it where it is drawn over them.
                    let (r, g, b) = color.rgb();
                    let solid = RGBColor(
                        (255.0 - (255.0 - r as f64) * 0.55) as u8,
                        (255.0 - (255.0 - g as f64) * 0.55) as u8,
                        (255.0 - (255.0 - b as f64) * 0.55) as u8,
                    );
                    let anno = chart.draw_series(AreaSeries::new(data, 0.0, solid.filled()).border_style(color.stroke_width(1)))?;
                    anno.label(s.name.clone()).legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 18, y + 5)], solid.filled()));
                    continue;
                }
                Style::Dashed => {
                    let anno = chart.draw_series(DashedLineSeries::new(data, 6, 4, line))?;
                    anno.label(s.name.clone()).legend(move |(x, y)| DashedPathElement::new(vec![(x, y), (x + 18, y)], 4, 3, line));
                    continue;
                }
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

/// A histogram outline through `points` (left edges, then the right edge):
/// each y held until the next x.
fn steps(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len() * 2);
    for pair in points.windows(2) {
        out.extend([pair[0], (pair[1].0, pair[0].1)]);
    }
    out.extend(points.last());
    out
}

/// An axis number as short as it reads: no trailing zeros ("100", "0.25"),
/// thousands and millions as k and M ("10k", "2.5M").
fn tick_label(v: f64) -> String {
    let trim = |s: String| if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s };
    let a = v.abs();
    match a {
        _ if a >= 1e6 => format!("{}M", trim(format!("{:.2}", v / 1e6))),
        _ if a >= 1e4 => format!("{}k", trim(format!("{:.2}", v / 1e3))),
        _ if a == 0.0 || a >= 1e-4 => trim(format!("{v:.4}")),
        _ => format!("{v:e}"),
    }
}

/// A range a log axis can show: a start ≤ 0 becomes a millionth of the end.
fn positive(range: Range<f64>) -> Range<f64> {
    let lo = if range.start > 0.0 { range.start } else { 1e-9_f64.max(range.end * 1e-6) };
    lo..range.end.max(lo * 10.0)
}

/// The positive data's range on a log axis, widened by `factor` each way.
fn log_padded(extent: Option<(f64, f64)>, factor: f64) -> Range<f64> {
    let (lo, hi) = extent.unwrap_or((1.0, 10.0));
    positive(lo / factor..hi * factor)
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

    #[test]
    fn tick_labels_are_short() {
        let labels: Vec<String> = [0.0, 100.0, 90.0, 0.25, 0.01, 1000.0, 10_000.0, 2_500_000.0, -40.0, 1e-6].map(tick_label).into();
        assert_eq!(labels, ["0", "100", "90", "0.25", "0.01", "1000", "10k", "2.5M", "-40", "1e-6"]);
    }

    #[test]
    fn steps_hold_each_value_until_the_next_edge() {
        assert_eq!(steps(&[(0.0, 5.0), (1.0, 2.0), (2.0, 0.0)]), vec![(0.0, 5.0), (1.0, 5.0), (1.0, 2.0), (2.0, 2.0), (2.0, 0.0)]);
        assert_eq!(steps(&[]), vec![]);
    }

    #[test]
    fn dashed_steps_log_y_and_shared_colours() {
        let plot = LinePlot::new("latency")
            .size(480, 260)
            .log_y(true)
            .series(Series::steps("idle", vec![(0.0, 900.0), (1.0, 0.0), (2.0, 3.0), (3.0, 0.0)]).color(2))
            .series(Series::dashed("idle fit", vec![(0.0, 100.0), (3.0, 1.0)]).color(2));
        // Empty bins sit on the axis' bottom, not at -inf.
        assert_eq!(plot.plotted(&plot.series[0], 0.5)[1], (1.0, 0.5));
        assert_eq!(plot.y_axis(), 1.0 / 1.5..900.0 * 1.5);
        let svg = plot.to_svg().unwrap();
        assert!(svg.contains("width=\"480\"") && svg.contains("height=\"260\""));
        assert!(svg.contains("idle fit"));
        // One colour for both series: the fit's dashes and the outline share it.
        let colour = Palette99::pick(2).to_rgba();
        let rgb = format!("#{:02X}{:02X}{:02X}", colour.0, colour.1, colour.2);
        assert!(svg.matches(rgb.as_str()).count() >= 4, "{rgb} in {svg}");
        assert_eq!(LinePlot::new("x").log_y(true).y_range(0.0..100.0).y_axis(), 100.0 * 1e-6..100.0);
    }
}
