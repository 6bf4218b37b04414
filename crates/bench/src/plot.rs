//! SVG plots of a report: throughput against update ratio per protocol, latency CDFs, visibility CDFs. Text is
//! laid out by plotters' built-in estimate (no system fonts needed); the SVG viewer renders it.

use crate::histogram::HistogramSummary;
use crate::report::Report;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

const SIZE: (u32, u32) = (960, 600);

fn colour(i: usize) -> RGBColor {
    const COLOURS: [RGBColor; 10] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
    ];
    COLOURS[i % COLOURS.len()]
}

type PlotResult = Result<(), Box<dyn std::error::Error>>;

/// Writes every plot the report has data for into `dir`; returns the files written.
pub fn write_plots(report: &Report, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    let throughput = dir.join("throughput.svg");
    throughput_plot(report, &throughput).map_err(|e| anyhow::anyhow!("plotting throughput: {e}"))?;
    written.push(throughput);
    let latency = dir.join("latency-cdf.svg");
    let series: Vec<(String, &HistogramSummary)> = report
        .runs
        .iter()
        .map(|r| {
            let label = format!("{} {:.0}% upd, {} keys", report.label(r), r.point.update_ratio * 100.0, r.point.keys);
            (label, &r.latency)
        })
        .collect();
    cdf_plot(&latency, "Transaction latency (CDF)", &series).map_err(|e| anyhow::anyhow!("plotting latency: {e}"))?;
    written.push(latency);
    let mut vis = Vec::new();
    for r in &report.runs {
        if let Some(v) = &r.visibility {
            let label = format!("{} {:.0}% upd", report.label(r), r.point.update_ratio * 100.0);
            vis.push((format!("{label}: client"), &v.client));
            if v.server.count > 0 {
                vis.push((format!("{label}: server metric"), &v.server));
            }
        }
    }
    if !vis.is_empty() {
        let path = dir.join("visibility-cdf.svg");
        cdf_plot(&path, "Visibility across DCs (CDF)", &vis)
            .map_err(|e| anyhow::anyhow!("plotting visibility: {e}"))?;
        written.push(path);
    }
    Ok(written)
}

fn throughput_plot(report: &Report, path: &Path) -> PlotResult {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let mut key_counts: Vec<u64> = report.runs.iter().map(|r| r.point.keys).collect();
    key_counts.sort_unstable();
    key_counts.dedup();
    let y_max = report.runs.iter().map(|r| r.throughput_per_s).fold(1.0, f64::max) * 1.15;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{}: throughput against update ratio", report.workload.name), ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..100f64, 0f64..y_max)?;
    chart.configure_mesh().x_desc("updates (%)").y_desc("committed transactions / s").draw()?;
    let mut i = 0;
    for protocol in &report.protocols {
        for keys in &key_counts {
            let mut points: Vec<(f64, f64)> = report
                .runs
                .iter()
                .filter(|r| &r.protocol == protocol && r.point.keys == *keys)
                .map(|r| (r.point.update_ratio * 100.0, r.throughput_per_s))
                .collect();
            if points.is_empty() {
                continue;
            }
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            // With repetitions, the line joins the medians; every run is a dot.
            let mut line: Vec<(f64, f64)> = Vec::new();
            for (x, _) in &points {
                if line.last().is_none_or(|(lx, _)| lx != x) {
                    let ys: Vec<f64> = points.iter().filter(|p| p.0 == *x).map(|p| p.1).collect();
                    line.push((*x, crate::report::median(&ys)));
                }
            }
            let c = colour(i);
            i += 1;
            let label = if key_counts.len() > 1 { format!("{protocol}, {keys} keys") } else { protocol.clone() };
            labelled_line(&mut chart, line, label, c)?;
            chart.draw_series(points.into_iter().map(|p| Circle::new(p, 4, c.filled())))?;
        }
    }
    legend(&mut chart, SeriesLabelPosition::MiddleRight)?;
    root.present()?;
    Ok(())
}

fn cdf_plot(path: &Path, title: &str, series: &[(String, &HistogramSummary)]) -> PlotResult {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let nonempty: Vec<&(String, &HistogramSummary)> = series.iter().filter(|(_, h)| h.count > 0).collect();
    let x_min = nonempty.iter().map(|(_, h)| h.min_us as f64 / 1000.0).fold(f64::INFINITY, f64::min);
    let x_max = nonempty.iter().map(|(_, h)| h.max_us as f64 / 1000.0).fold(0.0, f64::max);
    let (x_min, x_max) =
        if x_min.is_finite() && x_max > x_min { (x_min.max(0.001), x_max * 1.2) } else { (0.001, 1000.0) };
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(64)
        .build_cartesian_2d((x_min..x_max).log_scale(), 0f64..1.0)?;
    chart.configure_mesh().x_desc("latency (ms, log scale)").y_desc("fraction ≤ latency").draw()?;
    for (i, (label, h)) in nonempty.iter().enumerate() {
        let c = colour(i);
        let points: Vec<(f64, f64)> = h.cdf().into_iter().map(|(us, f)| ((us as f64 / 1000.0).max(x_min), f)).collect();
        labelled_line(&mut chart, points, label.clone(), c)?;
    }
    legend(&mut chart, SeriesLabelPosition::LowerRight)?;
    root.present()?;
    Ok(())
}

/// A line of a panel: its label and its `(x, y)` points.
pub type Line = (String, Vec<(f64, f64)>);

/// A plot of lines over time: one panel per `(y axis label, lines)`, stacked, sharing the x axis (seconds). For
/// resource samples over a run (`causet check`).
pub fn time_panels(path: &Path, title: &str, panels: &[(&str, Vec<Line>)]) -> anyhow::Result<()> {
    let draw = || -> PlotResult {
        let height = 40 + 300 * panels.len().max(1) as u32;
        let root = SVGBackend::new(path, (SIZE.0, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(title, ("sans-serif", 22))?;
        let x_max = (panels.iter())
            .flat_map(|(_, series)| series.iter().flat_map(|(_, points)| points.iter().map(|p| p.0)))
            .fold(1.0, f64::max);
        for ((y_desc, series), area) in panels.iter().zip(root.split_evenly((panels.len().max(1), 1))) {
            let y_max = (series.iter()).flat_map(|(_, points)| points.iter().map(|p| p.1)).fold(1.0, f64::max) * 1.15;
            let mut chart = ChartBuilder::on(&area)
                .margin(12)
                .x_label_area_size(36)
                .y_label_area_size(80)
                .build_cartesian_2d(0f64..x_max, 0f64..y_max)?;
            chart.configure_mesh().x_desc("seconds").y_desc(*y_desc).draw()?;
            for (i, (label, points)) in series.iter().enumerate() {
                let c = colour(i);
                labelled_line(&mut chart, points.iter().copied(), label.clone(), c)?;
            }
            legend(&mut chart, SeriesLabelPosition::MiddleRight)?;
        }
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| anyhow::anyhow!("plotting {}: {e}", path.display()))
}

/// Plots a benchmark script asks for (`causet bench --plot FILE`): a JSON file `{"plots": [LinesPlot, ...]}`, each
/// rendered to its `file`, relative to the JSON file's directory. Scripts that sweep configurations outside one
/// report (`bench/honeypot.sh`) summarise their runs into such a file.
#[derive(Debug, serde::Deserialize)]
pub struct PlotSpecs {
    /// The plots, each written to its own file.
    pub plots: Vec<LinesPlot>,
}

/// One plot of lines: points joined in x order, each point a dot.
#[derive(Debug, serde::Deserialize)]
pub struct LinesPlot {
    /// The SVG file to write, relative to the spec's directory.
    pub file: PathBuf,
    /// The caption.
    pub title: String,
    /// The x axis's label.
    pub x_label: String,
    /// The y axis's label.
    pub y_label: String,
    /// A logarithmic x axis (every x must be positive).
    #[serde(default)]
    pub log_x: bool,
    /// Horizontal reference lines, drawn dashed in grey with their labels (a goal, a ratio of 1).
    #[serde(default)]
    pub references: Vec<Reference>,
    /// The lines.
    pub series: Vec<SeriesSpec>,
}

/// A horizontal reference line of a [`LinesPlot`].
#[derive(Debug, serde::Deserialize)]
pub struct Reference {
    /// Its height.
    pub y: f64,
    /// What it marks.
    pub label: String,
}

/// A line of a [`LinesPlot`].
#[derive(Debug, serde::Deserialize)]
pub struct SeriesSpec {
    /// The legend's label.
    pub label: String,
    /// Its `[x, y]` points, in any order.
    pub points: Vec<(f64, f64)>,
}

/// Renders every plot of the spec file `spec`; returns the files written.
pub fn render_specs(spec: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let text = std::fs::read_to_string(spec).map_err(|e| anyhow::anyhow!("reading {}: {e}", spec.display()))?;
    let specs: PlotSpecs =
        serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{} is not a plot spec: {e}", spec.display()))?;
    let dir = spec.parent().unwrap_or(Path::new("."));
    let mut written = Vec::new();
    for plot in &specs.plots {
        let path = dir.join(&plot.file);
        lines_plot(&path, plot).map_err(|e| anyhow::anyhow!("plotting {}: {e}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// Renders one [`LinesPlot`] to `path`.
pub fn lines_plot(path: &Path, plot: &LinesPlot) -> anyhow::Result<()> {
    let points = || plot.series.iter().flat_map(|s| s.points.iter().copied());
    let bad = points().find(|(x, y)| !x.is_finite() || !y.is_finite() || (plot.log_x && *x <= 0.0));
    if let Some((x, y)) = bad {
        anyhow::bail!("point ({x}, {y}) cannot be drawn{}", if plot.log_x { " on a logarithmic x axis" } else { "" });
    }
    if points().next().is_none() {
        anyhow::bail!("no points to plot");
    }
    let (x_min, x_max) = points().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), (x, _)| (lo.min(x), hi.max(x)));
    let ys = points().map(|p| p.1).chain(plot.references.iter().map(|r| r.y));
    // Headroom for the legend, drawn in the upper right corner.
    let y_max = ys.fold(0.0, f64::max) * 1.4;
    let y_max = if y_max > 0.0 { y_max } else { 1.0 };
    let draw = || -> PlotResult {
        let root = SVGBackend::new(path, SIZE).into_drawing_area();
        root.fill(&WHITE)?;
        let builder = |root| {
            let mut b = ChartBuilder::on(root);
            b.caption(&plot.title, ("sans-serif", 22)).margin(16).x_label_area_size(48).y_label_area_size(80);
            b
        };
        if plot.log_x {
            let (lo, hi) = if x_max > x_min { (x_min / 1.5, x_max * 1.5) } else { (x_min / 10.0, x_max * 10.0) };
            let mut chart = builder(&root).build_cartesian_2d((lo..hi).log_scale(), 0f64..y_max)?;
            chart.configure_mesh().x_desc(&plot.x_label).y_desc(&plot.y_label).x_label_formatter(&number).draw()?;
            draw_lines(&mut chart, plot, (lo, hi))?;
        } else {
            let pad = if x_max > x_min { (x_max - x_min) * 0.05 } else { 1.0 };
            let (lo, hi) = (x_min - pad, x_max + pad);
            let mut chart = builder(&root).build_cartesian_2d(lo..hi, 0f64..y_max)?;
            chart.configure_mesh().x_desc(&plot.x_label).y_desc(&plot.y_label).x_label_formatter(&number).draw()?;
            draw_lines(&mut chart, plot, (lo, hi))?;
        }
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| anyhow::anyhow!("{e}"))
}

/// An axis label: whole numbers without a fraction (10, not 10.0), others with up to three decimals.
fn number(x: &f64) -> String {
    if (x - x.round()).abs() < 1e-9 {
        format!("{x:.0}")
    } else {
        format!("{x:.3}").trim_end_matches('0').to_string()
    }
}

/// Draws `plot`'s reference lines across `x_range`, its series and the legend on `chart`.
fn draw_lines<'a, DB, X>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, plotters::coord::types::RangedCoordf64>>,
    plot: &LinesPlot,
    x_range: (f64, f64),
) -> PlotResult
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    X: Ranged<ValueType = f64>,
{
    // Black and dashed: no series colour is black.
    for r in &plot.references {
        let style = BLACK.stroke_width(1);
        chart
            .draw_series(DashedLineSeries::new(vec![(x_range.0, r.y), (x_range.1, r.y)], 8, 6, style))?
            .label(r.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    for (i, s) in plot.series.iter().enumerate() {
        let c = colour(i);
        let mut points = s.points.clone();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        labelled_line(chart, points.clone(), s.label.clone(), c)?;
        chart.draw_series(points.into_iter().map(|p| Circle::new(p, 4, c.filled())))?;
    }
    legend(chart, SeriesLabelPosition::UpperRight)
}

/// Draws one line of `points` in colour `c`, with `label` in the legend.
fn labelled_line<'a, DB, CT>(
    chart: &mut ChartContext<'a, DB, CT>,
    points: impl IntoIterator<Item = CT::From>,
    label: String,
    c: RGBColor,
) -> PlotResult
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    CT: CoordTranslate,
    CT::From: Clone + 'static,
{
    chart
        .draw_series(LineSeries::new(points, c.stroke_width(2)))?
        .label(label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    Ok(())
}

/// Draws the legend of `chart`'s labelled series at `position`, on a translucent white box.
fn legend<'a, DB, CT>(chart: &mut ChartContext<'a, DB, CT>, position: SeriesLabelPosition) -> PlotResult
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    CT: CoordTranslate,
{
    chart.configure_series_labels().position(position).background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(dir: &Path, plots: serde_json::Value) -> PathBuf {
        let path = dir.join("plots.json");
        std::fs::write(&path, serde_json::json!({ "plots": plots }).to_string()).expect("write spec");
        path
    }

    #[test]
    fn a_spec_renders_each_plot_with_its_lines_and_references() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = spec(
            dir.path(),
            serde_json::json!([
                {"file": "ratio.svg", "title": "cache ÷ fresh", "x_label": "keys", "y_label": "ratio", "log_x": true,
                 "references": [{"y": 3.0, "label": "goal"}],
                 "series": [{"label": "90/10 buffer", "points": [[1000, 1.4], [10, 1.9], [100, 1.7]]},
                            {"label": "90/10 cache", "points": [[10, 1.1], [10000, 1.0]]}]},
                {"file": "linear.svg", "title": "t", "x_label": "x", "y_label": "y",
                 "series": [{"label": "one point", "points": [[5, 2]]}]}
            ]),
        );
        let written = render_specs(&path).expect("renders");
        assert_eq!(written, vec![dir.path().join("ratio.svg"), dir.path().join("linear.svg")]);
        let svg = std::fs::read_to_string(&written[0]).expect("svg written");
        for text in ["cache ÷ fresh", "90/10 buffer", "90/10 cache", "goal", "keys"] {
            assert!(svg.contains(text), "{text} missing from the plot");
        }
        assert!(std::fs::read_to_string(&written[1]).expect("svg written").contains("one point"));
    }

    #[test]
    fn a_spec_that_cannot_be_drawn_is_refused_with_the_reason() {
        let dir = tempfile::tempdir().expect("tempdir");
        let zero = serde_json::json!([{"file": "a.svg", "title": "t", "x_label": "x", "y_label": "y", "log_x": true,
                                       "series": [{"label": "s", "points": [[0, 1]]}]}]);
        let err = render_specs(&spec(dir.path(), zero)).expect_err("x = 0 on a log axis").to_string();
        assert!(err.contains("logarithmic"), "{err}");
        let empty = serde_json::json!([{"file": "a.svg", "title": "t", "x_label": "x", "y_label": "y", "series": []}]);
        assert!(render_specs(&spec(dir.path(), empty)).expect_err("nothing to draw").to_string().contains("no points"));
        std::fs::write(dir.path().join("bad.json"), "{\"plots\": [{\"file\": 1}]}").expect("write");
        let err = render_specs(&dir.path().join("bad.json")).expect_err("not a spec").to_string();
        assert!(err.contains("is not a plot spec"), "{err}");
    }
}
