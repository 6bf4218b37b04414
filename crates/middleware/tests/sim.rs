//! The middleware in the deterministic simulation, through Causet's TCC checker.

use causet_middleware::sim::{run, Mode, SimConfig, SimOutcome};
use causet_middleware::Writers;
use causet_sim::checker::check;

fn seeds() -> u64 {
    std::env::var("CAUSET_MIDDLEWARE_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(300)
}

/// Runs one seed and asserts that its history passes the checker and the local sets converged.
fn run_checked(seed: u64, cfg: &SimConfig) -> SimOutcome {
    let out = run(seed, cfg);
    let report = check(&out.history);
    assert!(report.is_ok(), "seed {seed} with {cfg:?}: {report}");
    assert!(out.converged, "seed {seed}: local sets disagree after replication quiesced");
    out
}

fn assert_causal(cfg: &SimConfig, seeds: std::ops::Range<u64>) -> (u64, u64, u64) {
    let (mut reads, mut rounds, mut unresolved) = (0, 0, 0);
    for seed in seeds {
        let out = run_checked(seed, cfg);
        reads += out.reads;
        rounds += out.read_rounds;
        unresolved += out.unresolved;
    }
    (reads, rounds, unresolved)
}

#[test]
fn the_middleware_is_causal_on_every_seed() {
    let cfg = SimConfig::default();
    let (reads, rounds, unresolved) = assert_causal(&cfg, 0..seeds());
    // The runs exercise resolution: reads walk graphs, and some find a dependency missing and wait.
    eprintln!("{reads} reads, {rounds} store rounds, {unresolved} unresolved attempts");
    assert!(reads > 0 && rounds > reads, "reads resolved something: {reads} reads, {rounds} rounds");
    assert!(unresolved > 0, "no read ever found a dependency missing: the workload does not test resolution");
}

#[test]
fn the_store_alone_violates_causality_on_the_same_workload() {
    let cfg = SimConfig { mode: Mode::StoreAlone, ..SimConfig::default() };
    let failing = (0..50).filter(|&seed| !check(&run(seed, &cfg).history).is_ok()).count();
    assert!(failing >= 5, "the store alone failed the checker on only {failing} of 50 seeds");
}

#[test]
fn multi_level_graphs_short_retention_and_forgetful_instances_stay_causal() {
    for (levels, retain, marks) in [(2, 1, 4), (3, 2, 1), (1, 1, 2)] {
        let cfg = SimConfig {
            levels,
            retain,
            mark_capacity: marks,
            restart_probability: 0.02,
            keys: 4,
            ..SimConfig::default()
        };
        assert_causal(&cfg, 0..seeds() / 3);
    }
}

#[test]
fn two_local_sets_many_instances_and_write_heavy() {
    let cfg = SimConfig {
        local_sets: 2,
        sessions_per_set: 6,
        instances_per_set: 3,
        write_ratio: 0.8,
        ..SimConfig::default()
    };
    let mut conflicts = 0;
    for seed in 0..seeds() {
        let out = run(seed, &cfg);
        let report = check(&out.history);
        assert!(report.is_ok(), "seed {seed}: {report}");
        conflicts += out.conflicts;
    }
    assert!(conflicts > 0, "instances of one local set raced on compare-and-swap at least once");
}

#[test]
fn exclusive_writers_stay_causal_without_compare_and_swap() {
    // One instance per local set, writes of a key ordered by its lock, answered from its write cache when it can,
    // and stored blindly; the simulation asserts that no write's read version (cached or not) was overtaken
    // before it was stored, and the checker that cached clocks rank every write above its causal past.
    // The last setting's cache holds two keys of six, so it forgets entries while writes of them are in flight.
    for (local_sets, write_ratio, mark_capacity) in [(2, 0.8, 64), (3, 0.4, 64), (3, 0.5, 2)] {
        let cfg = SimConfig {
            local_sets,
            sessions_per_set: 5,
            instances_per_set: 1,
            write_ratio,
            mark_capacity,
            writers: Writers::Exclusive,
            ..SimConfig::default()
        };
        let (reads, _, unresolved) = assert_causal(&cfg, 0..seeds());
        assert!(reads > 0 && unresolved > 0, "{reads} reads, {unresolved} unresolved attempts");
        // Seeds found in runs of 3,000: the cache forgot a key while a write of it was in flight (2428: the
        // instance restarted; 592 with the small cache: another key filled it), and the write's store brought the
        // entry back without the reads made in between.
        for seed in [592, 2428] {
            assert_causal(&cfg, seed..seed + 1);
        }
        let cached: u64 = (0..20).map(|seed| run(seed, &cfg).cached_writes).sum();
        assert!(cached > 0, "no write was answered from the instance's cache");
    }
}

/// Few keys and one retained version per record, so that records fold often: the stabilization tests' base.
fn small_records(local_sets: usize, writers: Writers) -> SimConfig {
    SimConfig {
        local_sets,
        keys: 4,
        retain: 1,
        ops_per_session: 60,
        writers,
        instances_per_set: if writers == Writers::Exclusive { 1 } else { 2 },
        ..SimConfig::default()
    }
}

#[test]
fn stable_versions_left_out_of_records_keep_every_seed_causal_and_bound_the_folded_sets() {
    // A cap of one folded vertex: records leave out every version made stable. The same seeds without
    // stabilization fold far more.
    for writers in [Writers::Shared, Writers::Exclusive] {
        let base = small_records(3, writers);
        let capped = SimConfig { folded_cap: Some(1), ..base.clone() };
        let (mut stabilized, mut folded_capped, mut folded_free) = (0, 0, 0);
        for seed in 0..seeds() / 2 {
            let out = run(seed, &capped);
            let report = check(&out.history);
            assert!(report.is_ok(), "seed {seed} with {capped:?}: {report}");
            assert!(out.converged, "seed {seed}: local sets disagree after replication quiesced");
            stabilized += out.stabilized;
            folded_capped += out.max_folded;
            folded_free += run(seed, &SimConfig { folded_cap: Some(usize::MAX), ..base.clone() }).max_folded;
        }
        eprintln!("{writers:?}: {stabilized} versions made stable; largest folded sets summed over seeds: {folded_capped} capped, {folded_free} free");
        assert!(stabilized > 0, "no version was ever made stable");
        assert!(folded_capped < folded_free, "stabilization did not shrink the folded sets");
    }
}

#[test]
fn own_writes_confirmed_and_marked_stable_keep_every_seed_causal_and_shrink_the_folded_sets() {
    // Instances confirm their own writes between other steps (a version replication has not yet delivered
    // everywhere is not confirmed) and mark them stable, with walks beside them or not; the simulator checks the
    // ground truth of every mark (the version and its whole causal past in every local set) and the checker every
    // history. Two local sets (records carry only their own local set's dependencies) and three.
    for local_sets in [2, 3] {
        for writers in [Writers::Shared, Writers::Exclusive] {
            let base = small_records(local_sets, writers);
            let (mut confirmed, mut folded_confirmed, mut folded_free) = (0, 0, 0);
            for walks in [None, Some(4)] {
                let cfg = SimConfig { confirm_own: true, folded_cap: walks, ..base.clone() };
                for seed in 0..seeds() / 4 {
                    let out = run_checked(seed, &cfg);
                    confirmed += out.confirmed_own;
                    if walks.is_none() {
                        folded_confirmed += out.folded_written;
                        folded_free +=
                            run(seed, &SimConfig { folded_cap: Some(usize::MAX), ..base.clone() }).folded_written;
                    }
                }
            }
            eprintln!(
                "{local_sets} local sets, {writers:?}: {confirmed} own writes marked stable; folded \
                 dependencies written, over seeds: {folded_confirmed} with confirmations, {folded_free} without"
            );
            assert!(confirmed > 0, "no own write was ever marked stable");
            assert!(folded_confirmed < folded_free, "confirmations did not shrink the folded sets");
        }
    }
}

#[test]
fn feeds_keep_every_seed_causal_resolve_ahead_of_reads_and_shrink_the_folded_sets() {
    // Exclusive writers keep feeds, the other local sets follow them (resolving versions between other steps) and
    // publish frontiers, and writers mark stable what every other local set resolved; feed batches and frontier
    // rows replicate late and out of order, and restarts start new epochs. The simulator checks the ground truth of
    // every mark and the checker every history. Records then carry fewer folded dependencies than on the same
    // seeds without feeds (the rounds per read are printed: with four keys they barely differ; the benchmark is
    // where following ahead of reads shows).
    for (local_sets, retain) in [(2, 1), (3, 1), (3, 3)] {
        let base = SimConfig { retain, ..small_records(local_sets, Writers::Exclusive) };
        let cfg = SimConfig { feed: true, ..base.clone() };
        let (mut stable, mut followed, mut folded_feed, mut folded_free) = (0, 0, 0, 0);
        let (mut rounds_feed, mut reads_feed, mut rounds_free, mut reads_free) = (0, 0, 0, 0);
        // Seed 1387 (two local sets) failed the checker while the simulated follower's reads did not raise the
        // instance's write-cache clocks (the driver's do): a version the follower marked entered a session's causal
        // past without the session fetching it, and the session's next write of its key ranked below it.
        let regressions = if local_sets == 2 { 1387..1388 } else { 0..0 };
        for seed in (0..seeds() / 3).chain(regressions) {
            let out = run_checked(seed, &cfg);
            (stable, followed, folded_feed) =
                (stable + out.stable_by_feed, followed + out.followed, folded_feed + out.folded_written);
            (rounds_feed, reads_feed) = (rounds_feed + out.read_rounds, reads_feed + out.reads);
            let free = run(seed, &base);
            (rounds_free, reads_free) = (rounds_free + free.read_rounds, reads_free + free.reads);
            folded_free += free.folded_written;
        }
        let (per_read_feed, per_read_free) =
            (rounds_feed as f64 / reads_feed as f64, rounds_free as f64 / reads_free as f64);
        eprintln!(
            "{local_sets} local sets, retain {retain}: {followed} versions followed, {stable} marked stable; \
             rounds per read {per_read_feed:.3} with feeds, {per_read_free:.3} without; folded dependencies \
             written {folded_feed} with feeds, {folded_free} without"
        );
        assert!(followed > 0 && stable > 0, "{followed} versions followed, {stable} marked stable");
        assert!(folded_feed < folded_free, "feeds did not shrink the folded sets");
    }
}

#[test]
fn reads_that_wait_for_their_follower_stay_causal() {
    // With feeds, a read that has read more than `walk_budget` records resolving a version of another local set stops
    // and waits for its follower to mark that version, then returns the head it read first (or walks after waiting
    // too long). Budget 0 waits at once; 1 after one level. The checker holds on every seed, and most waits end
    // with the follower's mark.
    for (local_sets, walk_budget) in [(2, 0), (3, 0), (3, 1)] {
        let cfg = SimConfig { feed: true, walk_budget, ..small_records(local_sets, Writers::Exclusive) };
        let (mut waits, mut resolved) = (0, 0);
        for seed in 0..seeds() / 3 {
            let out = run_checked(seed, &cfg);
            (waits, resolved) = (waits + out.follower_waits, resolved + out.follower_waits_resolved);
        }
        eprintln!("{local_sets} local sets, walk budget {walk_budget}: {waits} reads waited, {resolved} resolved by the follower");
        assert!(resolved > 0 && resolved * 2 > waits, "{waits} reads waited, {resolved} resolved by the follower");
    }
}

#[test]
fn a_read_cache_keeps_every_seed_causal_and_answers_reads_without_the_store() {
    // Exclusive writers with feeds keep a read cache: a read's answer (or the instance's own write) is served again
    // while no newer version of its key is known resolved at the instance, the instance has not written the key
    // since, and its marks forgot nothing; a read whose newest version is not resolved yet is answered from it
    // (of any age) rather than wait (marks of 8 copies forget often; of 64, only at restarts). Restarts clear it; feeds, records and
    // frontier rows replicate late and out of order. The checker holds on every seed and the cache answers reads.
    let shapes = [(2, usize::MAX, 400, 64), (3, usize::MAX, 400, 8), (3, 1, 40, 64), (2, 0, 5_000, 8)];
    for (local_sets, walk_budget, ttl, mark_capacity) in shapes {
        let cfg = SimConfig {
            feed: true,
            walk_budget,
            read_cache_ttl: ttl,
            keys: 12,
            mark_capacity,
            ..small_records(local_sets, Writers::Exclusive)
        };
        let (mut reads, mut hits, mut fallbacks) = (0, 0, 0);
        for seed in 0..seeds() / 3 {
            let out = run_checked(seed, &cfg);
            (reads, hits, fallbacks) =
                (reads + out.reads, hits + out.read_cache_hits, fallbacks + out.read_cache_fallbacks);
        }
        eprintln!(
            "{local_sets} local sets, walk budget {walk_budget}, ttl {ttl}, {mark_capacity} marks: {hits} of {reads} \
             reads from the cache at once, {fallbacks} instead of waiting"
        );
        assert!(fallbacks > 0, "no read was answered from the cache instead of waiting");
        // Forgetful marks empty the cache at every eviction: fewer hits there.
        let share = if mark_capacity >= 64 { 10 } else { 50 };
        assert!(hits * share > reads, "the cache answered {hits} of {reads} reads");
    }
}

/// Found 2026-11-29 with 1,500 seeds, present before feeds, fixed 2026-11-29 (`WriteCache::is_sound`): exclusive
/// writers that confirm their own writes (no feed) lost read-your-writes. A record leaves out versions its writer
/// knows stable, so a version entered a session's causal past at another local set without that local set's
/// instance ever fetching it, and the write cache, which ranks a cached write above what the instance has fetched,
/// then ranked the session's next write of that key below it. Without feeds such writers now keep no write cache.
#[test]
fn exclusive_writers_confirming_without_a_feed_keep_read_your_writes_seed_311() {
    let cfg = SimConfig { confirm_own: true, ..small_records(2, Writers::Exclusive) };
    run_checked(311, &cfg);
}

#[test]
fn reads_that_pull_missing_dependencies_stay_causal_and_wait_less() {
    // A read that finds a dependency missing pulls it from another local set before it retries; the pulled record
    // (the newest of its copy anywhere) may be newer than the version needed, and replication may deliver older
    // ones after it. Pulls change the schedule, so the waits are compared over all seeds of both shapes.
    let (mut waits_pulling, mut waits) = (0, 0);
    for (local_sets, writers) in [(3, Writers::Shared), (2, Writers::Exclusive)] {
        let instances_per_set = if writers == Writers::Exclusive { 1 } else { 2 };
        let base = SimConfig { local_sets, writers, instances_per_set, ..SimConfig::default() };
        let cfg = SimConfig { pull: true, ..base.clone() };
        let mut pulled = 0;
        for seed in 0..seeds() / 3 {
            let out = run_checked(seed, &cfg);
            pulled += out.pulled;
            waits_pulling += out.unresolved;
            waits += run(seed, &base).unresolved;
        }
        eprintln!("{local_sets} local sets, {writers:?}: {pulled} pulls");
        assert!(pulled > 0, "no read ever pulled");
    }
    eprintln!("unresolved attempts: {waits_pulling} pulling, {waits} not");
    assert!(waits_pulling < waits, "pulling did not shorten the waits: {waits_pulling} against {waits}");
}

#[test]
fn a_simulation_is_deterministic() {
    let cfg = SimConfig::default();
    let (a, b) = (run(7, &cfg), run(7, &cfg));
    assert_eq!(a.history, b.history);
    assert_eq!((a.unresolved, a.conflicts, a.read_rounds), (b.unresolved, b.conflicts, b.read_rounds));
}
