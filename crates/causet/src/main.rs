//! The `causet` command.

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "causet", version, about = "Causet: a geo-replicated database with transactional causal consistency")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the deterministic simulator: one seed (--seed), or many (--seeds) from a starting seed.
    ///
    /// Each seed derives its topology, clock skew and drift, message delays, partition crashes and workload, runs
    /// the real protocol state machines in virtual time, and checks the recorded history for Transactional Causal+
    /// Consistency and for lost acknowledged writes. A failing seed prints the command that replays it.
    Sim {
        /// Replay exactly this seed.
        #[arg(long, conflicts_with = "seeds")]
        seed: Option<u64>,
        /// Run this many seeds, starting at --from.
        #[arg(long)]
        seeds: Option<u64>,
        /// The first seed of a --seeds run.
        #[arg(long, default_value_t = 0)]
        from: u64,
        /// Inject a deliberate protocol bug (skip-read-wait, commit-at-min-prepare-time, ignore-prepared-in-pvc) to
        /// see the checker catch it.
        #[arg(long)]
        bug: Option<String>,
        /// Write the recorded history of a --seed run to this file as JSON (format: docs/history.md).
        #[arg(long, requires = "seed")]
        history: Option<std::path::PathBuf>,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Sim { seed, seeds, from, bug, history } => {
            let bug = match bug.as_deref() {
                None => None,
                Some(name) => match causet_sim::parse_bug(name) {
                    Some(b) => Some(b),
                    None => bail!("unknown bug {name:?}: use skip-read-wait, commit-at-min-prepare-time or ignore-prepared-in-pvc"),
                },
            };
            match (seed, seeds) {
                (Some(seed), _) => {
                    println!("seed {seed}");
                    let result = causet_sim::run_seed(seed, bug);
                    println!("{}", result.summary());
                    if let Some(path) = history {
                        let json = serde_json::to_string_pretty(&result.history)?;
                        std::fs::write(&path, json).with_context(|| format!("writing {}", path.display()))?;
                        println!("history written to {}", path.display());
                    }
                    if !result.passed() {
                        std::process::exit(1);
                    }
                }
                (None, count) => {
                    let count = count.unwrap_or(100);
                    let started = std::time::Instant::now();
                    let (mut failed, mut committed, mut reads) = (Vec::new(), 0u64, 0usize);
                    for seed in from..from + count {
                        let result = causet_sim::run_seed(seed, bug);
                        committed += result.stats.committed;
                        reads += result.report.reads_checked;
                        if !result.passed() {
                            println!("{}", result.summary());
                            failed.push(seed);
                        }
                        let done = seed - from + 1;
                        if done % 10 == 0 || done == count {
                            let secs = started.elapsed().as_secs_f64();
                            eprintln!(
                                "{done}/{count} seeds, {} failed, {committed} transactions committed and checked \
                                 ({:.0} per second), {reads} reads checked, {secs:.0} s",
                                failed.len(),
                                committed as f64 / secs
                            );
                        }
                    }
                    if !failed.is_empty() {
                        bail!("{} of {count} seeds failed: {failed:?}", failed.len());
                    }
                    println!("all {count} seeds passed");
                }
            }
        }
    }
    Ok(())
}
