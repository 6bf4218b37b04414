//! `causet backup` and `causet restore`: an online, causally consistent backup of a DC, and a new node or DC built
//! from it (`docs/backup.md`).
//!
//! A backup opens a transaction at one node of the DC: its snapshot `S` is a stable snapshot of the DC, which
//! every partition has applied, and while it stays open the DC's garbage collection keeps every version `S` needs.
//! Then, partition by partition, the node serving it pages through its objects at `S`
//! (`POST /admin/export/{partition}`). Every partition is read at the same vector, so the backup is a causally
//! consistent cut of the DC, however long it takes and whatever commits meanwhile.
//!
//! The backup is a directory: `partition-<p>.bin` per partition (frames of a big-endian `u32` length and the
//! postcard of `(ObjectId, state bytes)`), then `manifest.json`, written last, so a directory without it is an
//! unfinished backup. A restore writes, for each partition of the target node, a checkpoint holding the objects
//! at `S`, into a fresh data directory; the node starts from it as from any checkpoint.

use anyhow::{anyhow, bail, Context};
use causet_client::{Client, Transaction};
use causet_core::partition::Checkpoint;
use causet_core::store::ObjectImage;
use causet_core::topology::Topology;
use causet_core::{DcId, ObjectId, PartitionId, Timestamp, VectorClock};
use causet_crdt::Crdt;
use causet_server::backup::{ExportReply, ExportRequest};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufReader, BufWriter, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The backup format this build writes and reads.
pub const FORMAT: u32 = 1;

/// What `manifest.json` says of a backup.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    /// The backup format.
    pub format: u32,
    /// The DC backed up.
    pub dc: u16,
    /// DCs in its cluster (the length of `snapshot`).
    pub dcs: u16,
    /// Its partitions.
    pub partitions: u32,
    /// The snapshot every partition was read at, one HLC timestamp per DC.
    pub snapshot: Vec<u64>,
    /// When the backup started and finished, Unix ms.
    pub started_unix_ms: u64,
    /// When it finished.
    pub finished_unix_ms: u64,
    /// Per partition: its file, objects and bytes.
    pub files: Vec<PartitionFile>,
}

/// One partition's file in a backup.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PartitionFile {
    /// The partition.
    pub partition: u32,
    /// The file's name in the backup directory.
    pub file: String,
    /// Objects in it.
    pub objects: u64,
    /// Its size.
    pub bytes: u64,
}

impl Manifest {
    /// Objects in the backup.
    pub fn objects(&self) -> u64 {
        self.files.iter().map(|f| f.objects).sum()
    }

    /// The snapshot as a vector clock.
    pub fn snapshot(&self) -> VectorClock {
        VectorClock::from_entries(self.snapshot.iter().map(|&t| Timestamp(t)).collect())
    }
}

/// Where a backup reads from.
#[derive(Clone, Debug)]
pub struct Source {
    /// A client port of the DC: the backup's transaction runs there.
    pub client: SocketAddr,
    /// The admin address of every node of the DC.
    pub admins: Vec<SocketAddr>,
    /// The DC's admin token (exports read everything).
    pub token: String,
    /// Objects per request.
    pub page: u32,
}

/// What one node's `/status` tells a backup.
struct NodeView {
    admin: SocketAddr,
    dc: u16,
    dcs: u16,
    node: u16,
    partitions: u32,
    /// partition → the node serving it.
    leaders: BTreeMap<u32, u16>,
}

fn view(admin: SocketAddr) -> anyhow::Result<NodeView> {
    let body = crate::cluster::http_get(admin, "/status").with_context(|| format!("GET http://{admin}/status"))?;
    let s: serde_json::Value =
        serde_json::from_str(&body).with_context(|| format!("http://{admin}/status is not Causet's JSON"))?;
    let num = |k: &str| s[k].as_u64().ok_or_else(|| anyhow!("http://{admin}/status has no {k}"));
    let mut leaders = BTreeMap::new();
    for p in s["partition_map"].as_array().into_iter().flatten() {
        if let (Some(partition), Some(leader)) = (p["partition"].as_u64(), p["leader"].as_u64()) {
            leaders.insert(partition as u32, leader as u16);
        }
    }
    Ok(NodeView {
        admin,
        dc: num("dc")? as u16,
        dcs: num("dcs")? as u16,
        node: num("node")? as u16,
        partitions: num("partitions")? as u32,
        leaders,
    })
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Backs the DC up into `out` (a new or empty directory) at the snapshot of `tx`, an open transaction of the DC,
/// which it touches now and then so that it stays open. Progress goes to `progress`. The caller ends `tx`.
pub async fn backup_at(
    tx: &mut Transaction<'_>,
    source: &Source,
    out: &Path,
    progress: &mut dyn FnMut(&str),
) -> anyhow::Result<Manifest> {
    let started_unix_ms = unix_ms();
    let snapshot = tx.snapshot().clone();
    let views = source.admins.iter().map(|&a| view(a)).collect::<anyhow::Result<Vec<_>>>()?;
    let first = views.first().ok_or_else(|| anyhow!("no admin address given"))?;
    let (dc, dcs, partitions) = (first.dc, first.dcs, first.partitions);
    if let Some(other) = views.iter().find(|v| (v.dc, v.dcs, v.partitions) != (dc, dcs, partitions)) {
        bail!("http://{} is DC {} of {} with {} partitions, not DC {dc} of {dcs} with {partitions}: give the admin addresses of one DC", other.admin, other.dc, other.dcs, other.partitions);
    }
    if snapshot.len() != dcs as usize {
        bail!(
            "the transaction's snapshot has {} entries, the DC {dcs} DCs: is the client port of this DC?",
            snapshot.len()
        );
    }
    require_empty(out, "back up into a new directory")?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    // Reading a dummy object keeps the transaction from idling out (30 s by default).
    let keepalive = ObjectId::new("causet-backup-keepalive", "causet-backup", causet_crdt::CrdtType::CounterPn);
    let mut touched = Instant::now();
    let mut files = Vec::new();
    for p in 0..partitions {
        let mut admin = serving(&source.admins, p, &views)?;
        let mut moved = 0;
        let file = format!("partition-{p}.bin");
        let mut writer = BufWriter::new(
            std::fs::File::create(out.join(&file))
                .with_context(|| format!("creating {}", out.join(&file).display()))?,
        );
        let (mut objects, mut bytes, mut after) = (0u64, 0u64, None);
        // Since when the partition has answered that it has not reached the snapshot yet.
        let mut behind: Option<Instant> = None;
        loop {
            let request = ExportRequest { snapshot: snapshot.clone(), after: after.take(), limit: source.page };
            let body = causet_server::backup::encode(&request);
            let path = format!("/admin/export/{p}");
            let (code, reply) =
                crate::cluster::http_request(admin, "POST", &path, Some(&source.token), &body, Duration::from_secs(60))
                    .with_context(|| format!("POST http://{admin}{path}"))?;
            // 421: the partition's leader changed (replicated partitions); ask the DC again where it is now.
            if code == 421 && moved < LEADER_CHANGES {
                moved += 1;
                after = request.after;
                tokio::time::sleep(Duration::from_millis(200)).await;
                let views = source.admins.iter().map(|&a| view(a)).collect::<anyhow::Result<Vec<_>>>()?;
                admin = serving(&source.admins, p, &views)?;
                continue;
            }
            // 503: the partition has not reached the snapshot yet (its local entry is a clock reading); soon will.
            if code == 503 && behind.get_or_insert_with(Instant::now).elapsed() < NOT_YET_APPLIED {
                after = request.after;
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            if code != 200 {
                bail!("http://{admin}{path} answered {code}: {}", String::from_utf8_lossy(&reply).trim());
            }
            behind = None;
            let page: ExportReply = causet_server::backup::decode(&reply)
                .map_err(|e| anyhow!("http://{admin}{path}: an undecodable page: {e}"))?;
            for entry in &page.objects {
                let frame = postcard::to_allocvec(entry).expect("a Vec grows as needed");
                writer.write_all(&(frame.len() as u32).to_be_bytes())?;
                writer.write_all(&frame)?;
                bytes += 4 + frame.len() as u64;
            }
            objects += page.objects.len() as u64;
            if touched.elapsed() > Duration::from_secs(1) {
                tx.read_one(&keepalive).await.context("the backup's transaction ended (idle timeout?)")?;
                touched = Instant::now();
            }
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        writer.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        progress(&format!("partition {}/{partitions}: {objects} objects, {bytes} bytes", p + 1));
        files.push(PartitionFile { partition: p, file, objects, bytes });
    }
    // The backup read every partition at the snapshot while the transaction held it.
    tx.read_one(&keepalive).await.context("the backup's transaction ended before the backup did")?;
    let manifest = Manifest {
        format: FORMAT,
        dc,
        dcs,
        partitions,
        snapshot: snapshot.entries().iter().map(|t| t.0).collect(),
        started_unix_ms,
        finished_unix_ms: unix_ms(),
        files,
    };
    let tmp = out.join("manifest.json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(&manifest)?)?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, out.join("manifest.json"))?;
    Ok(manifest)
}

/// How many times a backup follows a partition's leader to another node before it gives up.
const LEADER_CHANGES: u32 = 20;

/// How long an export waits for a partition to reach the backup's snapshot (it is usually there within a few
/// milliseconds: the snapshot's local entry is a clock reading of the backup's node).
const NOT_YET_APPLIED: Duration = Duration::from_secs(10);

/// The admin address of the node serving partition `p`, as the nodes' `/status` say (the first that names one).
fn serving(admins: &[SocketAddr], p: u32, views: &[NodeView]) -> anyhow::Result<SocketAddr> {
    let leader = views.iter().find_map(|v| v.leaders.get(&p).copied());
    let found = views.iter().find(|v| Some(v.node) == leader).map(|v| v.admin);
    found.ok_or_else(|| match leader {
        None => anyhow!("no node of the DC names a leader of partition {p} (an election under way?); try again"),
        Some(node) => anyhow!("partition {p} is served by node {node}, whose admin address is not among {admins:?}"),
    })
}

/// `dir` must be new or empty (a backup never mixes with another's files, a restore with another node's data);
/// `into` ends the refusal ("back up into a new directory").
fn require_empty(dir: &Path, into: &str) -> anyhow::Result<()> {
    if dir.exists() && std::fs::read_dir(dir)?.next().is_some() {
        bail!("{} is not empty: {into}", dir.display());
    }
    Ok(())
}

/// `causet backup`: connects to the DC, opens the backup's transaction, backs up, ends the transaction.
pub async fn backup(source: &Source, out: &Path) -> anyhow::Result<Manifest> {
    let mut client =
        Client::connect(source.client).await.with_context(|| format!("connecting to {}", source.client))?;
    let mut tx = client.start_transaction(None).await.context("starting the backup's transaction")?;
    let mut progress = |line: &str| eprintln!("backup: {line}");
    let result = backup_at(&mut tx, source, out, &mut progress).await;
    let _ = tx.abort().await;
    result
}

/// Reads a backup's manifest, refusing an unfinished backup or another format.
pub fn read_manifest(dir: &Path) -> anyhow::Result<Manifest> {
    let path = dir.join("manifest.json");
    let bytes = std::fs::read(&path).with_context(|| {
        format!("reading {} (a backup directory without it is unfinished or not a backup)", path.display())
    })?;
    let manifest: Manifest = serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", path.display()))?;
    if manifest.format != FORMAT {
        bail!("{} is backup format {}; this build reads format {FORMAT}", path.display(), manifest.format);
    }
    Ok(manifest)
}

/// Every object of a backup with its state, checking each file against the manifest.
pub fn read_objects(dir: &Path, manifest: &Manifest) -> anyhow::Result<Vec<(ObjectId, Crdt)>> {
    let mut out = Vec::new();
    for f in &manifest.files {
        let path = dir.join(&f.file);
        let file = std::fs::File::open(&path).with_context(|| format!("opening {}", path.display()))?;
        let size = file.metadata()?.len();
        if size != f.bytes {
            bail!("{} has {size} bytes, the manifest says {}: the backup is damaged", path.display(), f.bytes);
        }
        let mut reader = BufReader::new(file);
        let mut objects = 0;
        let mut len = [0u8; 4];
        loop {
            match reader.read_exact(&mut len) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
            }
            let mut frame = vec![0; u32::from_be_bytes(len) as usize];
            reader.read_exact(&mut frame).with_context(|| format!("{} ends inside a record", path.display()))?;
            let (id, state): (ObjectId, Vec<u8>) =
                postcard::from_bytes(&frame).with_context(|| format!("a damaged record in {}", path.display()))?;
            let state = Crdt::decode(&state).map_err(|e| anyhow!("a damaged state in {}: {e}", path.display()))?;
            if state.ty() != id.ty {
                bail!("{}: an object of type {:?} holds a {:?} state", path.display(), id.ty, state.ty());
            }
            out.push((id, state));
            objects += 1;
        }
        if objects != f.objects {
            bail!("{} holds {objects} objects, the manifest says {}", path.display(), f.objects);
        }
    }
    Ok(out)
}

/// Where a restore writes: node `node` of a DC of `nodes` nodes and `partitions` partitions.
#[derive(Clone, Debug)]
pub struct Target {
    /// The new node's data directory (must not hold data yet).
    pub data_dir: PathBuf,
    /// The node.
    pub node: u16,
    /// Nodes in the restored DC.
    pub nodes: u16,
    /// Partitions in the restored DC (objects are placed anew, so it may differ from the backup's).
    pub partitions: u32,
    /// Copies of each partition in the restored DC (its `replicas`): with more than one, each partition is a new
    /// Raft group whose every replica starts from the same checkpoint.
    pub replicas: u16,
}

/// `causet restore`: writes the backup's objects of every partition the target node holds a replica of, as one
/// checkpoint per partition, into its new data directory. Returns the objects written.
///
/// With `replicas` > 1, every replica of a partition gets the same checkpoint, at log index 0: when the DC starts,
/// each partition is a new Raft group whose members all hold its state already, so they elect a leader and go on
/// with an empty log (no replica has to be caught up by a snapshot).
pub fn restore(backup: &Path, target: &Target) -> anyhow::Result<u64> {
    let manifest = read_manifest(backup)?;
    if target.nodes == 0 || target.node >= target.nodes || target.partitions < u32::from(target.nodes) {
        bail!(
            "node {} of {} nodes with {} partitions: a node index below the node count, and at least a partition per node",
            target.node,
            target.nodes,
            target.partitions
        );
    }
    if target.replicas == 0 || target.replicas > target.nodes {
        bail!(
            "{} replicas of each partition in a DC of {} nodes: between 1 and the nodes",
            target.replicas,
            target.nodes
        );
    }
    require_empty(&target.data_dir, "restore into a new data directory")?;
    let snapshot = manifest.snapshot();
    let dc = DcId(manifest.dc);
    let topology = Topology::new(dc, manifest.dcs, target.partitions, target.nodes).with_replicas(target.replicas);
    let mine: Vec<PartitionId> = topology.partitions_on(target.node).collect();
    let mut objects: BTreeMap<PartitionId, Vec<(ObjectId, ObjectImage)>> =
        mine.iter().map(|&p| (p, Vec::new())).collect();
    let mut written = 0;
    for (id, state) in read_objects(backup, &manifest)? {
        if let Some(list) = objects.get_mut(&id.partition(target.partitions)) {
            list.push((id, ObjectImage { base: state, versions: Vec::new() }));
            written += 1;
        }
    }
    let local = snapshot.get(dc);
    let (store, _durable) = causet_storage::FjallStore::open(&target.data_dir, Default::default())
        .with_context(|| format!("opening a store in {}", target.data_dir.display()))?;
    for (p, objects) in objects {
        let checkpoint = Checkpoint {
            lsn: causet_core::record::Lsn(0),
            // The node's clock starts above everything the backup holds.
            clock: local,
            // Every object's base is its state at the snapshot, so no snapshot below it can be served.
            frontier: snapshot.clone(),
            objects,
            prepared: Vec::new(),
            recent_commits: Vec::new(),
            keep_log_from: None,
            committed_through: local,
            clock_bound: local,
            fenced: Vec::new(),
            // The restored DC owes its peers nothing of the source DC's past (docs/backup.md: it starts a new
            // history from the snapshot; it must not rejoin the source's cluster as the same DC).
            peer_acked: (0..manifest.dcs).filter(|&d| d != manifest.dc).map(|d| (DcId(d), local)).collect(),
            pvc: Some(snapshot.clone()),
            remote_pending: Vec::new(),
            remote_applied: Vec::new(),
            decided: Vec::new(),
            membership: None,
        };
        causet_storage::LogStore::checkpoint(&store, p, checkpoint)
            .with_context(|| format!("writing partition {}'s checkpoint", p.0))?;
    }
    causet_storage::LogStore::close(store).context("flushing the restored store")?;
    Ok(written)
}

/// `causet backup`'s arguments.
#[derive(Clone, Debug, clap::Args)]
pub struct BackupArgs {
    /// Where the backup goes: a new or empty directory.
    #[arg(long)]
    pub out: PathBuf,
    /// Back up a DC of a cluster started by `causet cluster start --dir DIR` (its addresses and token come from
    /// the cluster file).
    #[arg(long, conflicts_with_all = ["client", "admin"])]
    pub cluster_dir: Option<PathBuf>,
    /// With --cluster-dir: the DC.
    #[arg(long, default_value_t = 0)]
    pub dc: u16,
    /// Without --cluster-dir: a client address of the DC (its node runs the backup's transaction).
    #[arg(long, requires = "admin")]
    pub client: Option<SocketAddr>,
    /// Without --cluster-dir: the admin address of every node of the DC, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub admin: Vec<SocketAddr>,
    /// Without --cluster-dir: the DC's admin token [default: $CAUSET_ADMIN_TOKEN].
    #[arg(long)]
    pub token: Option<String>,
    /// Objects per export request.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=causet_server::backup::MAX_PAGE as i64))]
    pub page: u32,
}

/// `causet restore`'s arguments.
#[derive(Clone, Debug, clap::Args)]
pub struct RestoreArgs {
    /// The backup directory (`causet backup --out`).
    #[arg(long)]
    pub from: PathBuf,
    /// The new node's data directory: new or empty.
    #[arg(long)]
    pub data_dir: PathBuf,
    /// The node of the restored DC this data directory is for.
    #[arg(long, default_value_t = 0)]
    pub node: u16,
    /// Nodes in the restored DC [default: 1, a single node holding everything].
    #[arg(long, default_value_t = 1)]
    pub nodes: u16,
    /// Partitions in the restored DC [default: the backup's].
    #[arg(long)]
    pub partitions: Option<u32>,
    /// Copies of each partition in the restored DC, as its nodes' `replicas` will say: restore every node of the DC
    /// with the same value (each gets the partitions it holds a replica of).
    #[arg(long, default_value_t = 1)]
    pub replicas: u16,
}

/// Runs `causet backup`.
pub fn main_backup(args: BackupArgs) -> anyhow::Result<()> {
    let source = match &args.cluster_dir {
        Some(dir) => {
            let file = crate::cluster::load(dir)?;
            let nodes: Vec<_> = file.nodes.iter().filter(|n| n.dc == args.dc).collect();
            let first =
                nodes.first().ok_or_else(|| anyhow!("the cluster in {} has no DC {}", dir.display(), args.dc))?;
            Source {
                client: first.client,
                admins: nodes.iter().map(|n| n.admin).collect(),
                token: file.admin_token.clone(),
                page: args.page,
            }
        }
        None => Source {
            client: args.client.ok_or_else(|| anyhow!("give --cluster-dir, or --client and --admin"))?,
            admins: args.admin.clone(),
            token: (args.token.clone().or_else(|| std::env::var("CAUSET_ADMIN_TOKEN").ok()))
                .ok_or_else(|| anyhow!("give --token or set CAUSET_ADMIN_TOKEN"))?,
            page: args.page,
        },
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let started = Instant::now();
    let manifest = runtime.block_on(backup(&source, &args.out))?;
    println!(
        "backed up DC {} ({} partitions, {} objects, {} bytes) at snapshot {:?} in {:.1} s into {}",
        manifest.dc,
        manifest.partitions,
        manifest.objects(),
        manifest.files.iter().map(|f| f.bytes).sum::<u64>(),
        manifest.snapshot,
        started.elapsed().as_secs_f64(),
        args.out.display()
    );
    Ok(())
}

/// Runs `causet restore`.
pub fn main_restore(args: RestoreArgs) -> anyhow::Result<()> {
    let manifest = read_manifest(&args.from)?;
    let target = Target {
        data_dir: args.data_dir.clone(),
        node: args.node,
        nodes: args.nodes,
        partitions: args.partitions.unwrap_or(manifest.partitions),
        replicas: args.replicas,
    };
    let written = restore(&args.from, &target)?;
    let mut nodes = if target.nodes == 1 {
        String::new()
    } else {
        format!(
            "node = {}\nnodes = [ ... ]  # the {} nodes' replication addresses, as in any DC\n",
            target.node, target.nodes
        )
    };
    if target.replicas > 1 {
        nodes.push_str(&format!("replicas = {}\n", target.replicas));
    }
    println!(
        "restored {written} of the backup's {} objects into {} (node {} of {}). Start it with this configuration \
         (causet start --config FILE; docs/backup.md):\n\ndata_dir = {:?}\ndc = {}\ndcs = {}\npartitions = {}\n{nodes}",
        manifest.objects(),
        args.data_dir.display(),
        target.node,
        target.nodes,
        args.data_dir.display().to_string(),
        manifest.dc,
        manifest.dcs,
        target.partitions,
    );
    Ok(())
}
