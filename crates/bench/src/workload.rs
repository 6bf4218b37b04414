//! Workload files: a TOML description of what the sessions do, parsed once into typed values and checked, with
//! errors that name the field and say what it takes.
//!
//! ```toml
//! name = "cure"
//! description = "Cure Fig. 2/3: single-operation transactions on LWW registers, uniform keys"
//! update_ratio = [0.01, 0.10, 0.25, 0.50, 0.99]   # one number, or a sweep: one run per value
//!
//! [keys]
//! per_partition = 10000       # or `count = 10000` (total); `count` may be a list (a sweep)
//! key_bytes = 8
//! distribution = "uniform"    # uniform | zipfian (theta) | pareto (shape) | hotspot (hot_keys, hot_ops)
//!
//! [values]
//! bytes = 10
//! crdt = "lww-register"       # lww-register | mv-register | counter | aw-set
//!
//! [mix]                       # weights of transaction kinds
//! single = 1                  # one read or one update, a static transaction
//! interactive = 0             # start, N reads or updates (each an update with update_ratio), commit
//! batched = false             # interactive: the reads in one request and the updates in one, not one per key
//! static = 0                  # a static update of N keys (with update_ratio), else a static read of N keys
//! read_only = 0               # a static read of N keys
//! keys_per_transaction = 10   # N
//!
//! [clients]
//! sessions_per_dc = 16        # closed loop: concurrent sessions per DC used
//! rate = 0                    # open loop when > 0: target transactions per second over all sessions
//! dcs = []                    # the DCs sessions start at (empty: every DC)
//! remote_fraction = 0.0       # sessions that talk to a DC other than their home DC
//! switch_fraction = 0.0       # sessions that move to the next DC every `switch_every` transactions, with their clock
//! switch_every = 100
//!
//! [run]
//! duration_s = 20
//! warmup_s = 5
//! seed = 1
//! preload = true              # write every key once before the warm-up
//! preload_batch = 100         # keys per preload transaction (1 for the causal middleware's proxy)
//!
//! [visibility]                # client-side visibility probes across DCs during the measured window
//! enabled = true
//! interval_ms = 10
//!
//! [cluster]                   # the shape of a local cluster started for the run (`--compare`, `--local`)
//! dcs = 3
//! nodes_per_dc = 1            # the DC's partitions are spread over its nodes; sessions spread over them too
//! replicas = 1                # copies of each partition in a DC (Raft groups when more than one)
//! partitions = 8
//! wan_delay_ms = 50
//! wan_matrix = "aws-8dc"      # optional: a delay per pair of DCs instead (a file, or a shipped matrix's name)
//! sync = "periodic"
//! ```

use crate::keys::Distribution;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A workload file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The TOML is malformed or has unknown or mistyped fields.
    #[error("{origin}: {message}")]
    Syntax {
        /// Where the text came from.
        origin: String,
        /// The TOML parser's message (with the line and the field).
        message: String,
    },
    /// A field's value is out of its range or contradicts another.
    #[error("{origin}: {field}: {message}")]
    Invalid {
        /// Where the text came from.
        origin: String,
        /// The field, as written in the file.
        field: &'static str,
        /// What it takes.
        message: String,
    },
}

/// One value or a list of values (a sweep).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    /// A single value.
    One(T),
    /// A sweep: one run per value.
    Many(Vec<T>),
}

impl<T: Clone> OneOrMany<T> {
    /// The values, in order.
    pub fn values(&self) -> Vec<T> {
        match self {
            OneOrMany::One(v) => vec![v.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

/// The CRDT type of every object the workload touches, and what an update does to it.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum CrdtKind {
    /// `register_lww`: an update assigns a value of `values.bytes`.
    LwwRegister,
    /// `register_mv`: an update assigns a value of `values.bytes`.
    MvRegister,
    /// `counter_pn`: an update increments by one.
    Counter,
    /// `set_aw`: an update adds an element of `values.bytes`.
    AwSet,
}

/// `[keys]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KeysSection {
    /// Total keys (or a sweep of key counts).
    #[serde(default)]
    pub count: Option<OneOrMany<u64>>,
    /// Keys per partition of the target DC (the Cure paper's unit); total = this × partitions.
    #[serde(default)]
    pub per_partition: Option<u64>,
    /// Bytes per key: keys are zero-padded decimal numbers of this width.
    #[serde(default = "default_key_bytes")]
    pub key_bytes: usize,
    /// `uniform`, `zipfian`, `pareto` or `hotspot`.
    #[serde(default = "default_distribution")]
    pub distribution: String,
    /// Zipfian skew θ (YCSB's 0.99 by default).
    #[serde(default)]
    pub theta: Option<f64>,
    /// Pareto shape α (1.16 by default: the 80/20 rule).
    #[serde(default)]
    pub shape: Option<f64>,
    /// Hotspot: the fraction of keys that are hot.
    #[serde(default)]
    pub hot_keys: Option<f64>,
    /// Hotspot: the fraction of operations on hot keys.
    #[serde(default)]
    pub hot_ops: Option<f64>,
}

fn default_key_bytes() -> usize {
    8
}
fn default_distribution() -> String {
    "uniform".into()
}

/// `[values]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ValuesSection {
    /// Bytes per written value (registers, set elements).
    #[serde(default = "default_value_bytes")]
    pub bytes: usize,
    /// The objects' type.
    #[serde(default = "default_crdt")]
    pub crdt: CrdtKind,
}

fn default_value_bytes() -> usize {
    10
}
fn default_crdt() -> CrdtKind {
    CrdtKind::LwwRegister
}

impl Default for ValuesSection {
    fn default() -> Self {
        ValuesSection { bytes: default_value_bytes(), crdt: default_crdt() }
    }
}

/// `[mix]`: weights of the transaction kinds.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MixSection {
    /// Single-operation static transactions: an update with probability `update_ratio`, else a read.
    #[serde(default)]
    pub single: f64,
    /// Interactive transactions of `keys_per_transaction` distinct keys; each operation an update with probability
    /// `update_ratio`, else a read.
    #[serde(default)]
    pub interactive: f64,
    /// Static transactions of `keys_per_transaction` distinct keys: a static update with probability
    /// `update_ratio`, else a static read.
    #[serde(rename = "static", default)]
    pub static_: f64,
    /// Read-only static transactions of `keys_per_transaction` distinct keys.
    #[serde(default)]
    pub read_only: f64,
    /// Keys per multi-key transaction.
    #[serde(default = "default_keys_per_transaction")]
    pub keys_per_transaction: usize,
    /// Interactive transactions send their reads in one request and then their updates in one (start, read,
    /// update, commit), as a client that registers a transaction's operations together does, instead of one
    /// request per key in a random order.
    #[serde(default)]
    pub batched: bool,
}

fn default_keys_per_transaction() -> usize {
    10
}

impl Default for MixSection {
    fn default() -> Self {
        MixSection {
            single: 1.0,
            interactive: 0.0,
            static_: 0.0,
            read_only: 0.0,
            keys_per_transaction: default_keys_per_transaction(),
            batched: false,
        }
    }
}

/// `[clients]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClientsSection {
    /// Concurrent sessions per DC used (each its own connection and causal clock).
    #[serde(default = "default_sessions")]
    pub sessions_per_dc: usize,
    /// Open loop when positive: transactions per second over all sessions, at evenly spaced intended start
    /// times; latency counts from the intended start, so a slow server shows as latency, not as a lower rate.
    #[serde(default)]
    pub rate: f64,
    /// The DCs sessions start at; empty means every DC of the target.
    #[serde(default)]
    pub dcs: Vec<u16>,
    /// Fraction of sessions that talk to the next DC instead of their home DC.
    #[serde(default)]
    pub remote_fraction: f64,
    /// Fraction of sessions that move to the next DC every `switch_every` transactions, carrying their clock.
    #[serde(default)]
    pub switch_fraction: f64,
    /// Transactions between moves of a switching session.
    #[serde(default = "default_switch_every")]
    pub switch_every: u64,
    /// Where transactions read (single reads, static reads, read-only and interactive transactions): `"leader"` (the
    /// default: the node's lease cache where it has one, else the leaders), `"nearest"` (the replica on the
    /// session's server where a partition has one), `"cache"` (the node's lease cache) or `"fresh"` (the leaders,
    /// even where the node caches).
    #[serde(default)]
    pub read_from: ReadFromName,
}

/// Where reads go, as a workload file names it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ReadFromName {
    /// Each partition's leader.
    #[default]
    Leader,
    /// The nearest replica.
    Nearest,
    /// The node's lease cache.
    Cache,
    /// The leaders, even where the node caches.
    Fresh,
}

impl ReadFromName {
    /// The client's choice.
    pub fn read_from(self) -> causet_client::ReadFrom {
        match self {
            ReadFromName::Leader => causet_client::ReadFrom::Leader,
            ReadFromName::Nearest => causet_client::ReadFrom::Nearest,
            ReadFromName::Cache => causet_client::ReadFrom::Cache,
            ReadFromName::Fresh => causet_client::ReadFrom::Fresh,
        }
    }
}

fn default_sessions() -> usize {
    16
}
fn default_switch_every() -> u64 {
    100
}

impl Default for ClientsSection {
    fn default() -> Self {
        ClientsSection {
            sessions_per_dc: default_sessions(),
            rate: 0.0,
            dcs: Vec::new(),
            remote_fraction: 0.0,
            switch_fraction: 0.0,
            switch_every: default_switch_every(),
            read_from: ReadFromName::Leader,
        }
    }
}

/// `[run]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RunSection {
    /// Measured seconds per run.
    #[serde(default = "default_duration")]
    pub duration_s: f64,
    /// Unmeasured seconds before.
    #[serde(default = "default_warmup")]
    pub warmup_s: f64,
    /// Seed of every random choice of the load generator.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Write every key once before the warm-up (not measured), so reads find values rather than empty objects.
    #[serde(default)]
    pub preload: bool,
    /// Keys per preload transaction (1 for targets without multi-key transactions, such as the causal
    /// middleware's proxy).
    #[serde(default = "default_preload_batch")]
    pub preload_batch: u64,
}

fn default_preload_batch() -> u64 {
    100
}

fn default_duration() -> f64 {
    20.0
}
fn default_warmup() -> f64 {
    5.0
}
fn default_seed() -> u64 {
    1
}

impl Default for RunSection {
    fn default() -> Self {
        RunSection {
            duration_s: default_duration(),
            warmup_s: default_warmup(),
            seed: default_seed(),
            preload: false,
            preload_batch: default_preload_batch(),
        }
    }
}

/// `[visibility]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct VisibilitySection {
    /// Probe visibility during the measured window (needs two DCs or more).
    #[serde(default)]
    pub enabled: bool,
    /// Pause between probes, ms (spaces samples so they do not align with one heartbeat).
    #[serde(default = "default_probe_interval")]
    pub interval_ms: u64,
}

fn default_probe_interval() -> u64 {
    10
}

impl Default for VisibilitySection {
    fn default() -> Self {
        VisibilitySection { enabled: false, interval_ms: default_probe_interval() }
    }
}

/// `[cluster]`: the local cluster the tool starts (ignored when it drives an existing one).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSection {
    /// DCs.
    #[serde(default = "default_dcs")]
    pub dcs: u16,
    /// Nodes per DC.
    #[serde(default = "default_nodes_per_dc")]
    pub nodes_per_dc: u16,
    /// Copies of each partition inside a DC (at most `nodes_per_dc`).
    #[serde(default = "default_nodes_per_dc")]
    pub replicas: u16,
    /// Partitions per DC (also the multiplier of `keys.per_partition` against an `--addr` target).
    #[serde(default = "default_partitions")]
    pub partitions: u32,
    /// One-way delay between DCs, ms.
    #[serde(default = "default_wan_delay")]
    pub wan_delay_ms: u64,
    /// A delay per pair of DCs instead of `wan_delay_ms`: a matrix file, or a shipped matrix's name (see
    /// `causet cluster start --wan-matrix`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wan_matrix: Option<String>,
    /// `always` or `periodic`.
    #[serde(default = "default_sync")]
    pub sync: String,
    /// Lines added to every node's configuration, e.g. `["cache = { enabled = true }"]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_config: Vec<String>,
}

fn default_dcs() -> u16 {
    1
}
fn default_nodes_per_dc() -> u16 {
    1
}
fn default_partitions() -> u32 {
    8
}
fn default_wan_delay() -> u64 {
    50
}
fn default_sync() -> String {
    "periodic".into()
}

impl Default for ClusterSection {
    fn default() -> Self {
        ClusterSection {
            dcs: default_dcs(),
            nodes_per_dc: default_nodes_per_dc(),
            replicas: default_nodes_per_dc(),
            partitions: default_partitions(),
            wan_delay_ms: default_wan_delay(),
            wan_matrix: None,
            sync: default_sync(),
            node_config: Vec::new(),
        }
    }
}

/// A workload file as written.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadFile {
    /// Short name (file names of reports derive from it).
    pub name: String,
    /// What it reproduces.
    #[serde(default)]
    pub description: String,
    /// Probability of an update (see `[mix]`), or a sweep.
    #[serde(default = "default_update_ratio")]
    pub update_ratio: OneOrMany<f64>,
    /// `[keys]`.
    pub keys: KeysSection,
    /// `[values]`.
    #[serde(default)]
    pub values: ValuesSection,
    /// `[mix]`.
    #[serde(default)]
    pub mix: MixSection,
    /// `[clients]`.
    #[serde(default)]
    pub clients: ClientsSection,
    /// `[run]`.
    #[serde(default)]
    pub run: RunSection,
    /// `[visibility]`.
    #[serde(default)]
    pub visibility: VisibilitySection,
    /// `[cluster]`.
    #[serde(default)]
    pub cluster: ClusterSection,
}

fn default_update_ratio() -> OneOrMany<f64> {
    OneOrMany::One(0.1)
}

/// The key count of a workload, before the target's partition count is known.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum KeySpace {
    /// Total keys, one run per value.
    Total(Vec<u64>),
    /// Keys per partition.
    PerPartition(u64),
}

/// A checked workload.
#[derive(Clone, Debug, Serialize)]
pub struct Workload {
    /// The file's contents, checked.
    pub file: WorkloadFile,
    /// The key distribution.
    pub distribution: Distribution,
    /// The key space.
    pub key_space: KeySpace,
}

/// One run of a sweep: an update ratio and a key count.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Probability of an update.
    pub update_ratio: f64,
    /// Keys.
    pub keys: u64,
}

impl Workload {
    /// Reads and checks a workload file.
    pub fn from_path(path: &Path) -> Result<Workload, WorkloadError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| WorkloadError::Io { path: path.display().to_string(), source })?;
        Workload::parse(&text, &path.display().to_string())
    }

    /// Parses and checks a workload; `origin` names the text in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Workload, WorkloadError> {
        let file: WorkloadFile = toml::from_str(text)
            .map_err(|e| WorkloadError::Syntax { origin: origin.into(), message: e.to_string().trim().to_string() })?;
        Workload::check(file, origin)
    }

    /// Checks a workload (after the command line changed some of its fields, for example).
    pub fn check(file: WorkloadFile, origin: &str) -> Result<Workload, WorkloadError> {
        let bad =
            |field: &'static str, message: String| WorkloadError::Invalid { origin: origin.into(), field, message };
        if file.name.is_empty() || !file.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(bad("name", format!("{:?}: use letters, digits, '-' and '_'", file.name)));
        }
        let ratios = file.update_ratio.values();
        if ratios.is_empty() {
            return Err(bad("update_ratio", "an empty sweep: give at least one value".into()));
        }
        if let Some(r) = ratios.iter().find(|r| !(0.0..=1.0).contains(*r)) {
            return Err(bad("update_ratio", format!("{r} is not a fraction between 0 and 1 (0.1 = 10% updates)")));
        }
        let key_space = match (&file.keys.count, file.keys.per_partition) {
            (Some(_), Some(_)) => return Err(bad("keys", "give `count` or `per_partition`, not both".into())),
            (None, None) => return Err(bad("keys", "give `count` (total keys) or `per_partition`".into())),
            (Some(c), None) => {
                let counts = c.values();
                if counts.is_empty() || counts.contains(&0) {
                    return Err(bad("keys.count", "every key count must be at least 1".into()));
                }
                KeySpace::Total(counts)
            }
            (None, Some(0)) => return Err(bad("keys.per_partition", "must be at least 1".into())),
            (None, Some(p)) => KeySpace::PerPartition(p),
        };
        if file.run.preload_batch == 0 {
            return Err(bad("run.preload_batch", "must be at least 1 (keys per preload transaction)".into()));
        }
        if !(1..=64).contains(&file.keys.key_bytes) {
            return Err(bad("keys.key_bytes", format!("{}: between 1 and 64", file.keys.key_bytes)));
        }
        let largest = match &key_space {
            KeySpace::Total(c) => c.iter().copied().max().unwrap_or(1),
            KeySpace::PerPartition(p) => p.saturating_mul(file.cluster.partitions as u64),
        };
        if (largest as f64).log10() >= file.keys.key_bytes as f64 {
            return Err(bad(
                "keys.key_bytes",
                format!("{} bytes cannot number {largest} keys in decimal", file.keys.key_bytes),
            ));
        }
        let k = &file.keys;
        let distribution = match k.distribution.as_str() {
            "uniform" => Distribution::Uniform,
            "zipfian" => {
                let theta = k.theta.unwrap_or(0.99);
                if !(theta > 0.0 && theta.is_finite()) {
                    return Err(bad("keys.theta", format!("{theta}: the zipfian skew is a positive number")));
                }
                Distribution::Zipfian { theta }
            }
            "pareto" => {
                let shape = k.shape.unwrap_or(1.16);
                if !(shape > 0.0 && shape.is_finite()) {
                    return Err(bad("keys.shape", format!("{shape}: the Pareto shape is a positive number")));
                }
                Distribution::Pareto { shape }
            }
            "hotspot" => {
                let hot_keys = k.hot_keys.unwrap_or(0.2);
                let hot_ops = k.hot_ops.unwrap_or(0.8);
                if !(hot_keys > 0.0 && hot_keys <= 1.0) {
                    return Err(bad("keys.hot_keys", format!("{hot_keys}: a fraction of the keys in (0, 1]")));
                }
                if !(0.0..=1.0).contains(&hot_ops) {
                    return Err(bad("keys.hot_ops", format!("{hot_ops}: a fraction of the operations in [0, 1]")));
                }
                Distribution::Hotspot { hot_keys, hot_ops }
            }
            other => {
                return Err(bad(
                    "keys.distribution",
                    format!("unknown distribution {other:?}: use uniform, zipfian, pareto or hotspot"),
                ))
            }
        };
        let stray = |field: &'static str, set: bool, wants: &str| {
            if set && k.distribution != wants {
                Err(bad(field, format!("only applies to distribution = \"{wants}\"")))
            } else {
                Ok(())
            }
        };
        stray("keys.theta", k.theta.is_some(), "zipfian")?;
        stray("keys.shape", k.shape.is_some(), "pareto")?;
        stray("keys.hot_keys", k.hot_keys.is_some(), "hotspot")?;
        stray("keys.hot_ops", k.hot_ops.is_some(), "hotspot")?;
        if file.values.bytes > 1 << 20 {
            return Err(bad("values.bytes", format!("{}: at most 1 MiB", file.values.bytes)));
        }
        let m = &file.mix;
        let weights = [m.single, m.interactive, m.static_, m.read_only];
        if weights.iter().any(|w| !(*w >= 0.0 && w.is_finite())) {
            return Err(bad("mix", "weights are non-negative numbers".into()));
        }
        if weights.iter().sum::<f64>() <= 0.0 {
            return Err(bad("mix", "every weight is 0: give single, interactive, static or read_only a weight".into()));
        }
        let multi = m.interactive > 0.0 || m.static_ > 0.0 || m.read_only > 0.0;
        if m.batched && m.interactive <= 0.0 {
            return Err(bad(
                "mix.batched",
                "batches the operations of interactive transactions: give interactive a weight".into(),
            ));
        }
        if multi && m.keys_per_transaction == 0 {
            return Err(bad("mix.keys_per_transaction", "at least 1".into()));
        }
        let smallest = match &key_space {
            KeySpace::Total(c) => c.iter().copied().min().unwrap_or(1),
            KeySpace::PerPartition(p) => *p,
        };
        if multi && m.keys_per_transaction as u64 > smallest {
            return Err(bad(
                "mix.keys_per_transaction",
                format!("{} distinct keys per transaction from {smallest} keys", m.keys_per_transaction),
            ));
        }
        let c = &file.clients;
        if c.sessions_per_dc == 0 || c.sessions_per_dc > 4096 {
            return Err(bad("clients.sessions_per_dc", format!("{}: between 1 and 4096", c.sessions_per_dc)));
        }
        if !(c.rate >= 0.0 && c.rate.is_finite()) {
            return Err(bad("clients.rate", "a non-negative number of transactions per second".into()));
        }
        for (field, v) in
            [("clients.remote_fraction", c.remote_fraction), ("clients.switch_fraction", c.switch_fraction)]
        {
            if !(0.0..=1.0).contains(&v) {
                return Err(bad(field, format!("{v}: a fraction between 0 and 1")));
            }
        }
        if c.remote_fraction + c.switch_fraction > 1.0 {
            return Err(bad("clients", "remote_fraction + switch_fraction exceeds 1".into()));
        }
        if c.switch_every == 0 {
            return Err(bad("clients.switch_every", "at least 1 transaction".into()));
        }
        let r = &file.run;
        if !(r.duration_s > 0.0 && r.duration_s <= 86_400.0) {
            return Err(bad("run.duration_s", format!("{}: positive, at most a day", r.duration_s)));
        }
        if !(r.warmup_s >= 0.0 && r.warmup_s <= 86_400.0) {
            return Err(bad("run.warmup_s", format!("{}: non-negative, at most a day", r.warmup_s)));
        }
        if file.visibility.interval_ms > 60_000 {
            return Err(bad("visibility.interval_ms", "at most 60000".into()));
        }
        let cl = &file.cluster;
        if !(1..=16).contains(&cl.dcs) {
            return Err(bad("cluster.dcs", format!("{}: between 1 and 16", cl.dcs)));
        }
        if cl.partitions == 0 {
            return Err(bad("cluster.partitions", "at least 1".into()));
        }
        if cl.nodes_per_dc == 0 || u32::from(cl.nodes_per_dc) > cl.partitions.min(64) {
            let most = cl.partitions.min(64);
            return Err(bad(
                "cluster.nodes_per_dc",
                format!("{}: between 1 and {most} (partitions, at most 64)", cl.nodes_per_dc),
            ));
        }
        if cl.replicas == 0 || cl.replicas > cl.nodes_per_dc {
            return Err(bad("cluster.replicas", format!("{}: between 1 and nodes_per_dc", cl.replicas)));
        }
        if !["always", "periodic"].contains(&cl.sync.as_str()) {
            return Err(bad("cluster.sync", format!("{:?}: always or periodic", cl.sync)));
        }
        if let Some(dc) = c.dcs.iter().find(|d| **d >= cl.dcs) {
            return Err(bad("clients.dcs", format!("DC {dc} does not exist in a {}-DC cluster", cl.dcs)));
        }
        Ok(Workload { file, distribution, key_space })
    }

    /// The runs of the sweep for a target with `partitions` partitions per DC: every update ratio for every key
    /// count, in file order.
    pub fn points(&self, partitions: u32) -> Vec<Point> {
        let counts = match &self.key_space {
            KeySpace::Total(c) => c.clone(),
            KeySpace::PerPartition(p) => vec![p * partitions as u64],
        };
        let mut out = Vec::new();
        for keys in counts {
            for update_ratio in self.file.update_ratio.values() {
                out.push(Point { update_ratio, keys });
            }
        }
        out
    }
}

/// The workloads shipped in `bench/workloads/`, compiled in so `--workload NAME` works from any directory.
pub const SHIPPED: &[(&str, &str)] = &[
    ("cure", include_str!("../../../bench/workloads/cure.toml")),
    ("visibility", include_str!("../../../bench/workloads/visibility.toml")),
    ("honeypot-uniform", include_str!("../../../bench/workloads/honeypot-uniform.toml")),
    ("honeypot-pareto", include_str!("../../../bench/workloads/honeypot-pareto.toml")),
    ("karma", include_str!("../../../bench/workloads/karma.toml")),
    ("letting-it-be", include_str!("../../../bench/workloads/letting-it-be.toml")),
    ("smoke", include_str!("../../../bench/workloads/smoke.toml")),
];

/// A shipped workload by name, or a file by path.
pub fn load(name_or_path: &str) -> Result<Workload, WorkloadError> {
    match SHIPPED.iter().find(|(name, _)| *name == name_or_path) {
        Some((name, text)) => Workload::parse(text, &format!("shipped workload {name}")),
        None => Workload::from_path(Path::new(name_or_path)),
    }
}
