//! `causet-fuzz`: runs the fuzz targets with the seeded mutation fuzzer, or replays one input.
//!
//! ```text
//! causet-fuzz <frame|request|effect|state|all> [--seconds N | --iterations N] [--seed S]
//! causet-fuzz <target> --replay FILE
//! causet-fuzz <target|all> --write-corpus DIR    (seed inputs for cargo-fuzz: DIR/<target>/<n>)
//! ```
//! A finding prints the target, the seed, the panic and the input in hex, saves the input under
//! `fuzz-findings/`, and exits 1.

use anyhow::{bail, Context};
use causet_fuzz::{hex, run, targets::TARGETS, Budget};
use std::time::Duration;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(which) = args.first() else {
        bail!("usage: causet-fuzz <frame|request|effect|state|all> [--seconds N | --iterations N] [--seed S] [--replay FILE]");
    };
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let seed: u64 = flag("--seed").map(|s| s.parse()).transpose().context("--seed")?.unwrap_or(1);
    let budget = match (flag("--seconds"), flag("--iterations")) {
        (_, Some(n)) => Budget::Iterations(n.parse().context("--iterations")?),
        (Some(s), None) => Budget::Time(Duration::from_secs_f64(s.parse().context("--seconds")?)),
        (None, None) => Budget::Time(Duration::from_secs(10)),
    };
    let chosen: Vec<_> = TARGETS.iter().filter(|(name, _)| which == "all" || which == name).collect();
    if chosen.is_empty() {
        bail!("unknown target {which:?}: use frame, request, effect, state or all");
    }
    if let Some(dir) = flag("--write-corpus") {
        for (name, _) in chosen {
            let target_dir = std::path::Path::new(&dir).join(name);
            std::fs::create_dir_all(&target_dir)?;
            let seeds = causet_fuzz::corpus::seeds(name);
            for (i, input) in seeds.iter().enumerate() {
                std::fs::write(target_dir.join(format!("seed-{i}")), input)?;
            }
            println!("{name}: {} seed inputs in {}", seeds.len(), target_dir.display());
        }
        return Ok(());
    }
    if let Some(path) = flag("--replay") {
        let input = std::fs::read(&path).with_context(|| format!("reading {path}"))?;
        for (name, target) in chosen {
            println!("replaying {path} ({} bytes) on {name}", input.len());
            target(&input);
        }
        println!("no panic");
        return Ok(());
    }
    let budget = match budget {
        Budget::Time(d) => Budget::Time(d / chosen.len() as u32),
        other => other,
    };
    for (name, target) in chosen {
        match run(name, *target, seed, budget) {
            Ok(stats) => println!("{name}: {} inputs in {:.1} s, no panic (seed {seed})", stats.inputs, stats.seconds),
            Err(finding) => {
                std::fs::create_dir_all("fuzz-findings")?;
                let path = format!("fuzz-findings/{name}-seed{seed}.bin");
                std::fs::write(&path, &finding.input)?;
                println!(
                    "{name}: FINDING with seed {seed}: {}\ninput ({} bytes): {}\nsaved to {path}; replay with: \
                     causet-fuzz {name} --replay {path}",
                    finding.message,
                    finding.input.len(),
                    hex(&finding.input)
                );
                std::process::exit(1);
            }
        }
    }
    Ok(())
}
