//! `causet middleware`: the causal middleware (Letting-It-Be) over an eventually consistent store, behind a proxy
//! that speaks AntidoteDB's client protocol. See docs/middleware.md.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use causet_middleware::cassandra::{CassandraOptions, CassandraStore, PlainCassandra};
use causet_middleware::causet::CausetStore;
use causet_middleware::memory::MemoryCluster;
use causet_middleware::proxy::{self, Backend};
use causet_middleware::{Config, LocalSet, Middleware, Store, StoreRequests, Writers};
use tokio::net::TcpListener;
use tokio::sync::watch;

pub mod admin;
use admin::InstanceStatus;

/// Options of `causet middleware`.
#[derive(clap::Args, Clone, Debug)]
pub struct MiddlewareArgs {
    /// The store: `cassandra://HOST:PORT[,HOST:PORT…]` (this local set's Cassandra datacenter),
    /// `causet://HOST:PORT` (a node of this local set's DC of a Causet cluster run with `--protocol eventual`; one
    /// middleware instance per local set), or `memory` (an
    /// in-process store per local set with --wan-delay-ms between them; every local set is served by this process,
    /// local set N on the --listen port + N).
    #[arg(long)]
    pub store: String,
    /// This instance's local set, 0-based.
    #[arg(long, default_value_t = 0)]
    pub local_set: LocalSet,
    /// How many local sets (emulated DCs) the deployment has.
    #[arg(long, default_value_t = 2)]
    pub local_sets: usize,
    /// Where AntidoteDB's clients connect.
    #[arg(long, default_value = "127.0.0.1:8087")]
    pub listen: SocketAddr,
    /// Cassandra: this local set's datacenter name [default: dc<local-set + 1>].
    #[arg(long)]
    pub datacenter: Option<String>,
    /// Cassandra: the keyspace of the middleware's table.
    #[arg(long, default_value = "causet_middleware")]
    pub keyspace: String,
    /// Cassandra: create the keyspace (one replica in each datacenter dc1..dcN, N = --local-sets) and the table if missing.
    #[arg(long)]
    pub create_schema: bool,
    /// Embedded dependency-graph levels, k (1: the paper's base protocol).
    #[arg(long, default_value_t = 1)]
    pub levels: u8,
    /// Versions whose dependency information a record keeps before folding the oldest.
    #[arg(long, default_value_t = 8)]
    pub retain: usize,
    /// How long a read may take to resolve, waiting for missing dependencies included, before failing (0: fail at
    /// once when a dependency is missing, and no bound on the rest).
    #[arg(long, default_value_t = 2000)]
    pub resolve_wait_ms: u64,
    /// How long a read waits for a missing dependency to arrive by the store's own replication before it pulls
    /// it from another local set (Cassandra: a read at `ALL`, whose read repair brings it here).
    #[arg(long, default_value_t = 100)]
    pub pull_after_ms: u64,
    /// Never pull a missing dependency: only wait for the store's replication (the paper's behaviour).
    #[arg(long)]
    pub no_pull: bool,
    /// Serve the store alone, without the middleware: plain last-writer-wins reads and writes, not causally
    /// consistent across keys (the baseline the paper compares against). Cassandra only.
    #[arg(long)]
    pub plain: bool,
    /// `memory` store: one-way replication delay between local sets.
    #[arg(long, default_value_t = 0)]
    pub wan_delay_ms: u64,
    /// How the writers of a local set exclude each other: `exclusive` (this instance is its local set's only
    /// writer: it holds a writer lease in the store and writes without compare-and-swap; a second instance of the
    /// local set is refused) or `shared` (any number of instances; a compare-and-swap per write, the paper's
    /// design; Cassandra only).
    #[arg(long, value_enum, default_value_t = WritersArg::Exclusive)]
    pub writers: WritersArg,
    /// When a record's folded dependency set exceeds this many versions, the instance makes them stable (present
    /// with their causal past in every local set) in the background, and later writes leave them out.
    #[arg(long, default_value_t = 16)]
    pub folded_cap: usize,
    /// How long after the store acknowledged one of this instance's writes the instance asks the store to confirm
    /// it in every local set (Cassandra: a read at `ALL`); once confirmed, later records leave it out.
    #[arg(long, default_value_t = 200)]
    pub confirm_after_ms: u64,
    /// Keep no feed of this instance's writes and follow no other local set's (stores that keep feeds: Cassandra
    /// and `memory`): versions are then resolved only when read, and exclusive writers confirm their writes one by
    /// one (`--confirm-after-ms`).
    #[arg(long)]
    pub no_feed: bool,
    /// Feeds: how many records a read may read while resolving a version another local set wrote before it stops
    /// and waits (within --resolve-wait-ms) for this instance's follower of that local set's feed to resolve it
    /// (0: wait at once; `max`: never wait, always walk the version's graph).
    #[arg(long, default_value = "64", value_parser = parse_budget)]
    pub walk_budget: usize,
    /// Exclusive writers: the writer lease's term (renewed every quarter term; a new instance waits for a
    /// previous holder's lease to lapse, up to one term).
    #[arg(long, default_value_t = 12000)]
    pub lease_ms: u64,
    /// Every this many seconds, print a line per local set: the reads, failed reads, writes and waits for the
    /// follower of the interval, and how far each follower is behind its writer's feed (0: only the report at exit).
    #[arg(long, default_value_t = 0)]
    pub report_every_s: u64,
    /// Exclusive writers with feeds and --levels 1: how long a read's answer may be served again from the
    /// instance's read cache, without reading the store, while no newer version of the key is known resolved here
    /// (the follower resolves the other local sets' writes as they come); 0: no read cache.
    #[arg(long, default_value_t = 1000)]
    pub read_cache_ms: u64,
    /// The read cache's size bound, in MiB.
    #[arg(long, default_value_t = 64)]
    pub read_cache_mb: usize,
    /// Serve HTTP on this address: `/metrics` (Prometheus), `/status` (JSON), `/settled` (200 once every
    /// instance's own writes are resolved everywhere and its followers are at their feeds' ends, else 503) and
    /// `/health`. Off by default.
    #[arg(long)]
    pub admin: Option<SocketAddr>,
}

impl MiddlewareArgs {
    /// The options for `store` with every other option at its default, as `causet middleware --store STORE`
    /// gives them.
    pub fn defaults(store: &str) -> MiddlewareArgs {
        #[derive(clap::Parser)]
        struct Command {
            #[command(flatten)]
            args: MiddlewareArgs,
        }
        <Command as clap::Parser>::parse_from(["causet middleware", "--store", store]).args
    }
}

/// `--writers`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum WritersArg {
    /// One instance per local set, fenced by a writer lease; plain writes.
    Exclusive,
    /// Any number of instances; compare-and-swap per write.
    Shared,
}

/// A running middleware: one proxy per local set it serves.
pub struct Running {
    /// Each proxy's local set and address.
    pub listening: Vec<(LocalSet, SocketAddr)>,
    /// Where `--admin` serves, if asked.
    pub admin: Option<SocketAddr>,
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    report: Vec<Box<dyn Fn() -> String + Send + Sync>>,
    status: Vec<Arc<dyn Fn() -> InstanceStatus + Send + Sync>>,
}

impl Running {
    /// One line per local set: what its instance did.
    pub fn report(&self) -> Vec<String> {
        self.report.iter().map(|r| r()).collect()
    }

    /// What each instance's `/status` says now.
    pub fn status(&self) -> Vec<InstanceStatus> {
        self.status.iter().map(|s| s()).collect()
    }

    /// Stops the proxies.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

fn config(args: &MiddlewareArgs, ls: LocalSet) -> Config {
    Config {
        levels: args.levels,
        retain: args.retain,
        resolve_wait: Duration::from_millis(args.resolve_wait_ms),
        pull_after: (!args.no_pull).then(|| Duration::from_millis(args.pull_after_ms)),
        writers: match args.writers {
            WritersArg::Exclusive => Writers::Exclusive,
            WritersArg::Shared => Writers::Shared,
        },
        lease_term: Duration::from_millis(args.lease_ms),
        folded_cap: args.folded_cap,
        confirm_after: Duration::from_millis(args.confirm_after_ms),
        feed: !args.no_feed,
        walk_budget: args.walk_budget,
        read_cache_ttl: Duration::from_millis(args.read_cache_ms),
        read_cache_bytes: args.read_cache_mb << 20,
        ..Config::new(ls, args.local_sets)
    }
}

fn parse_budget(s: &str) -> Result<usize, String> {
    match s {
        "max" => Ok(usize::MAX),
        _ => s.parse().map_err(|e| format!("{e}: a number of records, or max")),
    }
}

fn summary<S: Store>(ls: LocalSet, m: &Middleware<S>) -> String {
    use std::sync::atomic::Ordering::Relaxed;
    let s = &m.stats;
    let (reads, rounds) = (s.reads.load(Relaxed), s.read_rounds.load(Relaxed));
    let (hits, fallbacks) = (s.read_cache_hits.load(Relaxed), s.read_cache_fallbacks.load(Relaxed));
    let (unfed, unmarked, unconfirmed) = m.dropped();
    let (writes, bytes, values) =
        (s.writes.load(Relaxed), s.written_bytes.load(Relaxed), s.written_value_bytes.load(Relaxed));
    format!(
        "local set {ls}: {reads} reads ({} from the read cache at once and {} instead of waiting, {:.2} store rounds each, {} waited for a dependency, {} pulled one \
         ({} pulls failed), {} failed), {writes} \
         writes ({} compare-and-swap conflicts, {} from the write cache, {:.0} metadata bytes per write, largest \
         folded set {}; {} versions made stable, {} of them resolved everywhere from the feed ({} versions in {} \
         batches), {} own writes confirmed with {} requests, {} walks stopped short; {} versions of other local sets' \
         feeds resolved ahead of reads, {} attempts found one missing; reads expanded {} versions with feed entries' \
         own requirements and {} with their records'; {} reads waited for the follower, {:.1} ms on average, {} \
         of them in vain; dropped from full queues: {unfed} versions kept out of the feed, {unmarked} not kept for \
         marking, {unconfirmed} own writes not queued for confirmation; {})",
        hits,
        fallbacks,
        if reads > hits + fallbacks { rounds as f64 / (reads - hits - fallbacks) as f64 } else { 0.0 },
        s.unresolved.load(Relaxed),
        s.pulled.load(Relaxed),
        s.pulls_failed.load(Relaxed),
        s.failed_reads.load(Relaxed),
        s.conflicts.load(Relaxed),
        s.cached_writes.load(Relaxed),
        if writes > 0 { (bytes - values) as f64 / writes as f64 } else { 0.0 },
        s.max_folded.load(Relaxed),
        s.stabilized.load(Relaxed),
        s.stable_by_feed.load(Relaxed),
        s.feed_versions.load(Relaxed),
        s.feed_batches.load(Relaxed),
        s.confirmed_own.load(Relaxed),
        s.confirmations.load(Relaxed),
        s.unstabilized.load(Relaxed),
        s.followed.load(Relaxed),
        s.follow_missing.load(Relaxed),
        s.read_expanded_own.load(Relaxed),
        s.read_expanded_records.load(Relaxed),
        s.follower_waits.load(Relaxed),
        s.follower_wait_ms.load(Relaxed) as f64 / s.follower_waits.load(Relaxed).max(1) as f64,
        s.follower_waits_failed.load(Relaxed),
        store_requests(m.store_requests(), reads + writes),
    )
}

/// What an instance asked of its store: in all, per client read or write, and by kind (the kinds asked for).
fn store_requests(requests: &StoreRequests, operations: u64) -> String {
    let total = requests.total();
    let kinds: Vec<String> =
        requests.by_kind().iter().filter(|(_, n)| *n > 0).map(|(kind, n)| format!("{n} {kind}")).collect();
    format!(
        "{total} store requests, {:.2} per read or write ({})",
        total as f64 / operations.max(1) as f64,
        if kinds.is_empty() { "none".to_owned() } else { kinds.join(", ") }
    )
}

/// Starts the proxies.
pub async fn start(args: &MiddlewareArgs) -> anyhow::Result<Running> {
    if args.local_sets == 0 || args.local_sets > 64 {
        bail!("--local-sets must be between 1 and 64, not {}", args.local_sets);
    }
    if args.levels == 0 || args.levels > 8 {
        bail!("--levels must be between 1 and 8, not {}", args.levels);
    }
    if args.lease_ms < 3000 {
        bail!(
            "--lease-ms must be at least 3000 (a write in flight gets a third of the term to land), not {}",
            args.lease_ms
        );
    }
    if args.writers == WritersArg::Shared && args.store.starts_with("causet://") {
        bail!("--writers shared needs compare-and-swap, which Causet in eventual mode does not offer: use --writers exclusive");
    }
    if args.plain && !args.store.starts_with("cassandra://") {
        bail!("--plain serves Cassandra alone (a cassandra:// store); over other stores, drive them directly");
    }
    if args.store != "memory" && args.local_set as usize >= args.local_sets {
        bail!("--local-set {} is not below --local-sets {}", args.local_set, args.local_sets);
    }
    let (stop, stopped) = watch::channel(false);
    let mut running =
        Running { listening: Vec::new(), admin: None, stop, tasks: Vec::new(), report: Vec::new(), status: Vec::new() };
    match serve_all(&mut running, args, &stopped).await {
        Ok(()) => Ok(running),
        Err(e) => {
            // What started before the failure stops before the error is returned: its listeners are closed and
            // its writer leases given up, so a retry can use the same ports (and take the leases) at once.
            running.stop().await;
            Err(e)
        }
    }
}

/// Starts the proxies `args` asks for into `running`.
async fn serve_all(
    running: &mut Running,
    args: &MiddlewareArgs,
    stopped: &watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let ls = args.local_set;
    if args.store == "memory" {
        let cluster = MemoryCluster::new(args.local_sets, Duration::from_millis(args.wan_delay_ms));
        for ls in 0..args.local_sets as LocalSet {
            let mut addr = args.listen;
            addr.set_port(args.listen.port().checked_add(ls).context("--listen port + local set is over 65535")?);
            serve_middleware(running, ls, addr, cluster.store(ls), args, stopped).await?;
        }
    } else if let Some(nodes) = args.store.strip_prefix("cassandra://") {
        let options = CassandraOptions {
            nodes: nodes.split(',').map(str::to_owned).collect(),
            datacenter: args.datacenter.clone().unwrap_or_else(|| format!("dc{}", ls + 1)),
            keyspace: args.keyspace.clone(),
            create_in: args.create_schema.then(|| (1..=args.local_sets).map(|i| format!("dc{i}")).collect()),
        };
        if args.plain {
            let store = Arc::new(PlainCassandra::connect(&options).await.map_err(anyhow::Error::msg)?);
            let report = move || format!("local set {ls}: Cassandra alone (no causal consistency)");
            let status = move |listen| InstanceStatus::plain(ls, listen);
            serve(running, ls, args.listen, store, report, status, stopped).await?;
        } else {
            let store = CassandraStore::connect(&options, ls).await.map_err(anyhow::Error::msg)?;
            serve_middleware(running, ls, args.listen, store, args, stopped).await?;
        }
    } else if let Some(addr) = args.store.strip_prefix("causet://") {
        let store = CausetStore::connect(addr, 16).await.map_err(anyhow::Error::msg)?;
        serve_middleware(running, ls, args.listen, store, args, stopped).await?;
    } else {
        bail!("unknown --store {:?}: use cassandra://HOST:PORT, causet://HOST:PORT or memory", args.store);
    }
    if let Some(addr) = args.admin {
        let listener = TcpListener::bind(addr).await.with_context(|| format!("--admin: listening on {addr}"))?;
        running.admin = Some(listener.local_addr()?);
        let instances: admin::Instances = Arc::new(running.status.clone());
        running.tasks.push(tokio::spawn(admin::serve(listener, instances, stopped.clone())));
    }
    Ok(())
}

/// Serves local set `ls` with a middleware instance over `store`.
async fn serve_middleware<S: Store + 'static>(
    running: &mut Running,
    ls: LocalSet,
    addr: SocketAddr,
    store: S,
    args: &MiddlewareArgs,
    stopped: &watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let m = Arc::new(Middleware::new(store, &config(args, ls)));
    m.take_lease().await.with_context(|| format!("local set {ls}: taking the writer lease"))?;
    let background = m.clone();
    let mut stop = stopped.clone();
    running.tasks.push(tokio::spawn(async move {
        tokio::select! {
            () = background.maintain() => return,
            _ = stop.wait_for(|s| *s) => {}
        }
        if let Err(e) = background.release_lease().await {
            eprintln!("local set {ls}: giving the writer lease up failed ({e}); it lapses on its own");
        }
    }));
    if args.report_every_s > 0 {
        let (m, mut stop, every) = (m.clone(), stopped.clone(), Duration::from_secs(args.report_every_s));
        running.tasks.push(tokio::spawn(async move {
            let started = tokio::time::Instant::now();
            let mut tick = tokio::time::interval_at(started + every, every);
            let mut last = Counts::of(&m.stats);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stop.wait_for(|s| *s) => return,
                }
                let now = Counts::of(&m.stats);
                println!("{}", progress_line(ls, started.elapsed(), &last, &now, &m.following()));
                last = now;
            }
        }));
    }
    let (counters, observed) = (m.clone(), m.clone());
    let status = move |listen| InstanceStatus::of(ls, listen, &observed);
    serve(running, ls, addr, m, move || summary(ls, &counters), status, stopped).await
}

/// The counters a progress line compares between two instants.
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    reads: u64,
    failed: u64,
    writes: u64,
    waits: u64,
    wait_ms: u64,
}

impl Counts {
    fn of(s: &causet_middleware::Stats) -> Counts {
        use std::sync::atomic::Ordering::Relaxed;
        Counts {
            reads: s.reads.load(Relaxed),
            failed: s.failed_reads.load(Relaxed),
            writes: s.writes.load(Relaxed),
            waits: s.follower_waits.load(Relaxed),
            wait_ms: s.follower_wait_ms.load(Relaxed),
        }
    }
}

/// One `--report-every-s` line: what local set `ls` did between `last` and `now`, and where its followers stand.
fn progress_line(
    ls: LocalSet,
    at: Duration,
    last: &Counts,
    now: &Counts,
    following: &[(LocalSet, Option<(u64, u64)>)],
) -> String {
    let waits = now.waits - last.waits;
    let mut line = format!(
        "local set {ls} at {:.0} s: {} reads ({} failed), {} writes; {waits} reads waited for the follower",
        at.as_secs_f64(),
        now.reads - last.reads,
        now.failed - last.failed,
        now.writes - last.writes,
    );
    if waits > 0 {
        line += &format!(", {:.0} ms on average", (now.wait_ms - last.wait_ms) as f64 / waits as f64);
    }
    for (writer, progress) in following {
        line += &match progress {
            Some((resolved, end)) => {
                format!("; following local set {writer}: {} versions behind ({resolved} of {end})", end - resolved)
            }
            None => format!("; following local set {writer}: its feed not announced yet"),
        };
    }
    line
}

/// Serves local set `ls` with `backend` on `addr`; `report` says what it did.
async fn serve<B: Backend>(
    running: &mut Running,
    ls: LocalSet,
    addr: SocketAddr,
    backend: Arc<B>,
    report: impl Fn() -> String + Send + Sync + 'static,
    status: impl Fn(SocketAddr) -> InstanceStatus + Send + Sync + 'static,
    stopped: &watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let listener = TcpListener::bind(addr).await.with_context(|| format!("listening on {addr}"))?;
    let local = listener.local_addr()?;
    running.listening.push((ls, local));
    running.tasks.push(tokio::spawn(proxy::serve(listener, backend, stopped.clone())));
    running.report.push(Box::new(report));
    running.status.push(Arc::new(move || status(local)));
    Ok(())
}

/// `causet middleware`: serves until `stop` completes, then prints what each instance did.
pub async fn run(args: MiddlewareArgs, stop: impl std::future::Future<Output = ()>) -> anyhow::Result<()> {
    let running = start(&args).await?;
    for (ls, addr) in &running.listening {
        println!(
            "causal middleware for local set {ls} serving AntidoteDB's protocol on {addr} (store: {})",
            args.store
        );
    }
    if let Some(addr) = running.admin {
        println!("admin HTTP (/metrics, /status, /settled) on {addr}");
    }
    stop.await;
    for line in running.report() {
        println!("{line}");
    }
    running.stop().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_the_commands() {
        let a = MiddlewareArgs::defaults("memory");
        assert_eq!((a.store.as_str(), a.local_sets, a.walk_budget, a.admin), ("memory", 2, 64, None));
        assert_eq!(a.listen, "127.0.0.1:8087".parse().unwrap());
    }

    #[test]
    fn a_progress_line_gives_the_interval_and_the_followers_lag() {
        let last = Counts { reads: 100, failed: 1, writes: 50, waits: 2, wait_ms: 100 };
        let now = Counts { reads: 1100, failed: 3, writes: 550, waits: 6, wait_ms: 900 };
        let line = progress_line(1, Duration::from_secs(10), &last, &now, &[(0, Some((40, 1040))), (2, None)]);
        assert_eq!(
            line,
            "local set 1 at 10 s: 1000 reads (2 failed), 500 writes; 4 reads waited for the follower, 200 ms on \
             average; following local set 0: 1000 versions behind (40 of 1040); following local set 2: its feed not \
             announced yet"
        );
    }
}
