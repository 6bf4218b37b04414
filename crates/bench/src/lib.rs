//! Causet's load generator, behind `causet bench`: workloads described in TOML ([`workload`]), keys drawn from
//! seeded distributions ([`keys`]), many concurrent sessions over the client protocol each carrying its causal
//! clock, in a closed or open loop ([`runner`]), visibility across DCs from the client and the server side
//! ([`visibility`]), HDR histograms ([`histogram`]), and a report as JSON, Markdown and SVG plots ([`report`],
//! [`plot`]).
//!
//! Starting local clusters (one per protocol for `--compare`) is the `causet` binary's part; this crate drives
//! whatever [`runner::Target`] it is given.

#![warn(missing_docs)]

pub mod histogram;
pub mod keys;
pub mod plot;
mod progress;
pub mod report;
pub mod runner;
pub mod target;
pub mod visibility;
pub mod workload;

pub use report::Report;
pub use runner::{run_point, RunResult};
pub use target::{DcTarget, Target};
pub use workload::{Point, Workload};

use std::path::{Path, PathBuf};

/// Writes `report.json`, `report.md` and the SVG plots into `dir` (created if missing); returns the files.
pub fn write_outputs(report: &Report, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("creating {}: {e}", dir.display()))?;
    let json = dir.join("report.json");
    std::fs::write(&json, report.to_json())?;
    let md = dir.join("report.md");
    std::fs::write(&md, report.to_markdown())?;
    let mut files = vec![json, md];
    files.extend(plot::write_plots(report, dir)?);
    Ok(files)
}
