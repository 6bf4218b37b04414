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
            chart
                .draw_series(LineSeries::new(line, c.stroke_width(2)))?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
            chart.draw_series(points.into_iter().map(|p| Circle::new(p, 4, c.filled())))?;
        }
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
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
        chart
            .draw_series(LineSeries::new(points, c.stroke_width(2)))?
            .label(label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
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
                chart
                    .draw_series(LineSeries::new(points.iter().copied(), c.stroke_width(2)))?
                    .label(label.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
            }
            chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
        }
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| anyhow::anyhow!("plotting {}: {e}", path.display()))
}
