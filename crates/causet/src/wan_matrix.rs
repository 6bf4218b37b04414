//! Per DC-pair WAN delays for local clusters: a matrix in a TOML file (or one shipped with Causet, by name), which
//! `causet cluster start --wan-matrix` and `causet bench --wan-matrix` turn into each node's per-peer `delay_ms`.
//!
//! The file gives either round-trip times (`rtt_ms`, symmetric; each direction gets half) or one-way delays
//! (`one_way_ms`, row = sender, column = receiver; may be asymmetric), with optional DC `names` and a `source`:
//!
//! ```toml
//! source = "where the figures come from"
//! names = ["us-west-1", "us-east-1", "eu-west-1"]
//! rtt_ms = [
//!   [0, 86, 175],
//!   [86, 0, 81],
//!   [175, 81, 0],
//! ]
//! ```
//!
//! Delays are applied by the sending node, in whole milliseconds (a half round trip is rounded to the nearest).

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The matrices shipped with Causet, by name (`bench/wan/<name>.toml` in the repository).
pub const SHIPPED: &[(&str, &str)] = &[("aws-8dc", include_str!("../../../bench/wan/aws-8dc.toml"))];

/// One-way delays between every pair of DCs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WanMatrix {
    /// Where the matrix came from: a shipped name or a file's path.
    pub origin: String,
    /// The DCs' names, by index (`dc0`, `dc1`, … when the file names none).
    pub names: Vec<String>,
    /// `one_way_ms[i][j]`: what node of DC i waits before a message to DC j leaves, ms.
    pub one_way_ms: Vec<Vec<u64>>,
    /// The file's `source`, if it gives one.
    #[serde(default)]
    pub source: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMatrix {
    source: Option<String>,
    names: Option<Vec<String>>,
    rtt_ms: Option<Vec<Vec<f64>>>,
    one_way_ms: Option<Vec<Vec<f64>>>,
}

impl WanMatrix {
    /// A shipped matrix by name (see [`SHIPPED`]), else the TOML file at that path.
    pub fn load(spec: &str) -> anyhow::Result<WanMatrix> {
        if let Some((name, text)) = SHIPPED.iter().find(|(name, _)| *name == spec) {
            return WanMatrix::parse(text, name);
        }
        let path = Path::new(spec);
        let text = std::fs::read_to_string(path).with_context(|| {
            let shipped: Vec<&str> = SHIPPED.iter().map(|(name, _)| *name).collect();
            format!("reading the WAN matrix {spec:?} (a file, or one of the shipped matrices: {})", shipped.join(", "))
        })?;
        WanMatrix::parse(&text, spec).with_context(|| format!("in the WAN matrix {}", path.display()))
    }

    /// Parses and checks a matrix file's text; `origin` names it in the result.
    pub fn parse(text: &str, origin: &str) -> anyhow::Result<WanMatrix> {
        let raw: RawMatrix = toml::from_str(text).context("not a WAN matrix")?;
        let (rows, halve) = match (raw.rtt_ms, raw.one_way_ms) {
            (Some(rtt), None) => (rtt, true),
            (None, Some(one_way)) => (one_way, false),
            (Some(_), Some(_)) => bail!("give either rtt_ms or one_way_ms, not both"),
            (None, None) => bail!("no delays: give rtt_ms (round trips) or one_way_ms (row = sender)"),
        };
        let n = rows.len();
        if !(1..=16).contains(&n) {
            bail!("the matrix has {n} rows; a cluster has 1 to 16 DCs");
        }
        for (i, row) in rows.iter().enumerate() {
            if row.len() != n {
                bail!("row {i} has {} entries, but the matrix has {n} rows: it must be square", row.len());
            }
            for (j, &d) in row.iter().enumerate() {
                if !(0.0..=600_000.0).contains(&d) {
                    bail!("entry [{i}][{j}] = {d} is not a delay (0 to 600000 ms)");
                }
                if i == j && d != 0.0 {
                    bail!("entry [{i}][{i}] = {d}: a DC's delay to itself must be 0");
                }
                if halve && d != rows[j][i] {
                    bail!("rtt_ms must be symmetric, but [{i}][{j}] = {d} and [{j}][{i}] = {}", rows[j][i]);
                }
            }
        }
        let names = match raw.names {
            Some(names) if names.len() != n => bail!("{} names for {n} DCs", names.len()),
            Some(names) => {
                if let Some(dup) = names.iter().enumerate().find(|(i, a)| names[..*i].contains(a)) {
                    bail!("the name {:?} is given twice", dup.1);
                }
                names
            }
            None => (0..n).map(|i| format!("dc{i}")).collect(),
        };
        let one_way_ms = rows
            .iter()
            .map(|row| row.iter().map(|&d| if halve { d / 2.0 } else { d }.round() as u64).collect())
            .collect();
        Ok(WanMatrix { origin: origin.to_string(), names, one_way_ms, source: raw.source })
    }

    /// The number of DCs.
    pub fn dcs(&self) -> u16 {
        self.one_way_ms.len() as u16
    }

    /// What DC `from` waits before a message to DC `to` leaves, ms.
    pub fn one_way(&self, from: u16, to: u16) -> u64 {
        self.one_way_ms[from as usize][to as usize]
    }

    /// The matrix as a table of one-way delays, for `cluster start` to print.
    pub fn table(&self) -> String {
        let width = self.names.iter().map(String::len).max().unwrap_or(0).max(6);
        let mut out = format!("{:>width$}", "to →");
        for name in &self.names {
            out.push_str(&format!(" {name:>width$}"));
        }
        for (i, row) in self.one_way_ms.iter().enumerate() {
            out.push_str(&format!("\n{:>width$}", self.names[i]));
            for d in row {
                out.push_str(&format!(" {:>width$}", format!("{d} ms")));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_are_halved_and_one_way_delays_kept_as_given() {
        let m =
            WanMatrix::parse("names = [\"a\", \"b\", \"c\"]\nrtt_ms = [[0, 23, 86], [23, 0, 81], [86, 81, 0]]", "t")
                .unwrap();
        assert_eq!(m.one_way_ms, vec![vec![0, 12, 43], vec![12, 0, 41], vec![43, 41, 0]]);
        assert_eq!((m.dcs(), m.one_way(0, 2), m.names[1].as_str()), (3, 43, "b"));
        let m = WanMatrix::parse("one_way_ms = [[0, 10.4], [30, 0]]", "t").unwrap();
        assert_eq!((m.one_way(0, 1), m.one_way(1, 0), m.names.clone()), (10, 30, vec!["dc0".into(), "dc1".into()]));
    }

    #[test]
    fn a_bad_matrix_is_refused_with_the_reason() {
        let refused = |text: &str| format!("{:#}", WanMatrix::parse(text, "t").unwrap_err());
        assert!(refused("rtt_ms = [[0, 1], [2, 0]]").contains("symmetric"));
        assert!(refused("rtt_ms = [[0, 1, 2], [1, 0]]").contains("square"));
        assert!(refused("one_way_ms = [[5]]").contains("to itself"));
        assert!(refused("one_way_ms = [[0, -1], [1, 0]]").contains("not a delay"));
        assert!(refused("rtt_ms = [[0]]\none_way_ms = [[0]]").contains("not both"));
        assert!(refused("names = [\"a\"]").contains("no delays"));
        assert!(refused("names = [\"a\", \"a\"]\nrtt_ms = [[0, 1], [1, 0]]").contains("twice"));
        assert!(refused("names = [\"a\"]\nrtt_ms = [[0, 1], [1, 0]]").contains("1 names for 2 DCs"));
        assert!(refused("rtt = [[0]]").contains("not a WAN matrix"));
        assert!(format!("{:#}", WanMatrix::load("/nonexistent/m.toml").unwrap_err()).contains("aws-8dc"));
    }

    #[test]
    fn the_shipped_matrices_load() {
        for (name, _) in SHIPPED {
            let m = WanMatrix::load(name).unwrap();
            assert_eq!(m.names.len(), m.dcs() as usize);
            assert!(m.source.is_some(), "{name} says where its figures come from");
        }
        let aws = WanMatrix::load("aws-8dc").unwrap();
        // The paper's figures from US-West1: 23 ms to US-West2 and 205 ms to Brazil, round trip.
        assert_eq!((aws.dcs(), aws.one_way(0, 2), aws.one_way(7, 0)), (8, 12, 103));
    }
}
