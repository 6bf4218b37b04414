//! Links between nodes: one outgoing TCP connection per node of every peer DC, carrying the partitions'
//! replication messages, and one per other node of this DC, carrying the DC's own traffic (reads, two-phase commit,
//! stabilization) between nodes. Messages are encoded envelopes framed by a 4-byte big-endian length; the emulated
//! WAN delay applies at the sender, on links to other DCs only.
//!
//! A link opens with a hello ([`Hello`]): the sender's DC and node, and the address it accepts links on. A node
//! that hears from the next node of its own DC admits it as a member ([`crate::members`]). With TLS configured
//! ([`crate::tls`]), every link is a mutually authenticated TLS session, the hello travels inside it, and a node
//! accepts a link only from the member its certificate names.
//!
//! Each link is FIFO: a message leaves no earlier than the one before it, whatever its jitter. A link that breaks
//! drops what it held and reconnects with backoff; the replication protocol notices the gap and resends. An
//! operator (or a test) can cut a link, heal it, and change its delay through the admin API.

use crate::faults::FaultFile;
use crate::members::{Admission, Members};
use crate::routes::{Routes, ShardInput};
use crate::shutdown::stopped;
use crate::tls::{PeerIo, PeerTls};
use bytes::{Buf, BufMut, BytesMut};
use causet_core::{Address, DcId, Envelope, Message};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

/// Largest replication frame accepted from a peer.
const MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;
/// Most messages waiting on one link; beyond it, messages are dropped (the protocol resends) and counted.
const LINK_QUEUE: usize = 100_000;

/// What a link says first: the sender's DC and node (two big-endian `u16`), then the address it accepts links on
/// (a length byte and that many bytes of text; length 0 when it has none to give). A node of the receiver's own DC
/// that the receiver does not know yet joins it with that address ([`Members::admit`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The sender's DC.
    pub dc: DcId,
    /// The sender's node index inside its DC.
    pub node: u16,
    /// Where the sender accepts links.
    pub addr: Option<SocketAddr>,
}

impl Hello {
    /// The hello's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let addr = self.addr.map(|a| a.to_string()).unwrap_or_default();
        let mut out = Vec::with_capacity(5 + addr.len());
        out.extend_from_slice(&self.dc.0.to_be_bytes());
        out.extend_from_slice(&self.node.to_be_bytes());
        out.push(u8::try_from(addr.len()).expect("an address is shorter than 256 bytes"));
        out.extend_from_slice(addr.as_bytes());
        out
    }

    /// Reads a hello from the start of a link.
    pub async fn read(socket: &mut (impl AsyncReadExt + Unpin)) -> anyhow::Result<Hello> {
        let dc = DcId(socket.read_u16().await?);
        let node = socket.read_u16().await?;
        let mut addr = vec![0; usize::from(socket.read_u8().await?)];
        socket.read_exact(&mut addr).await?;
        let addr = if addr.is_empty() {
            None
        } else {
            let text = std::str::from_utf8(&addr).map_err(|_| anyhow::anyhow!("a hello's address is not text"))?;
            Some(text.parse().map_err(|e| anyhow::anyhow!("a hello's address {text:?}: {e}"))?)
        };
        Ok(Hello { dc, node, addr })
    }
}

/// One address, or one per node of a multi-node DC.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PeerAddrs {
    /// A DC of one node.
    One(SocketAddr),
    /// Every node of the DC, by node index.
    Nodes(Vec<SocketAddr>),
}

impl PeerAddrs {
    /// The nodes' addresses, by node index.
    pub fn nodes(&self) -> Vec<SocketAddr> {
        match self {
            PeerAddrs::One(a) => vec![*a],
            PeerAddrs::Nodes(v) => v.clone(),
        }
    }
}

/// A peer DC, as configured.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerConfig {
    /// The peer's DC index.
    pub dc: u16,
    /// The replication address of the peer's node, or of each of its nodes (a list, by node index).
    pub addr: PeerAddrs,
    /// Emulated one-way delay to this peer, ms (0: none).
    #[serde(default)]
    pub delay_ms: u64,
    /// Emulated jitter, ms: each message waits an extra uniform 0..jitter (FIFO is kept).
    #[serde(default)]
    pub jitter_ms: u64,
}

/// The state of one outgoing link, shared with the admin API.
#[derive(Debug)]
pub struct LinkState {
    /// The peer DC (this node's own DC for a link inside the DC).
    pub dc: DcId,
    /// The peer node inside its DC.
    pub node: u16,
    /// Where it is.
    pub addr: SocketAddr,
    /// Emulated delay, µs.
    pub delay_us: AtomicU64,
    /// Emulated jitter, µs.
    pub jitter_us: AtomicU64,
    /// Cut by an operator: nothing is sent, nothing received from that DC.
    pub cut: AtomicBool,
    /// Connected right now.
    pub connected: AtomicBool,
    /// Messages sent.
    pub sent: AtomicU64,
    /// Bytes of frames sent.
    pub sent_bytes: AtomicU64,
    /// Messages dropped (cut, queue full, connection lost).
    pub dropped: AtomicU64,
}

/// A link's state as `/status` shows it.
#[derive(Clone, Debug, Serialize)]
pub struct LinkStatus {
    /// The peer DC.
    pub dc: u16,
    /// The peer node.
    pub node: u16,
    /// Its address.
    pub addr: String,
    /// Connected.
    pub connected: bool,
    /// Cut by an operator.
    pub cut: bool,
    /// Emulated delay, ms.
    pub delay_ms: f64,
    /// Emulated jitter, ms.
    pub jitter_ms: f64,
    /// Messages sent.
    pub sent: u64,
    /// Bytes of frames sent.
    pub sent_bytes: u64,
    /// Messages dropped.
    pub dropped: u64,
}

impl LinkState {
    /// The status view.
    pub fn status(&self) -> LinkStatus {
        LinkStatus {
            dc: self.dc.0,
            node: self.node,
            addr: self.addr.to_string(),
            connected: self.connected.load(Ordering::Relaxed),
            cut: self.cut.load(Ordering::Relaxed),
            delay_ms: self.delay_us.load(Ordering::Relaxed) as f64 / 1000.0,
            jitter_ms: self.jitter_us.load(Ordering::Relaxed) as f64 / 1000.0,
            sent: self.sent.load(Ordering::Relaxed),
            sent_bytes: self.sent_bytes.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
        }
    }
}

/// A message waiting on a link, with the time it was handed over.
type Queued = (tokio::time::Instant, Envelope);

/// A link's queue and state.
type Link = (mpsc::Sender<Queued>, Arc<LinkState>);

/// Outgoing links by (DC, node).
type LinkMap = BTreeMap<(DcId, u16), Link>;

/// Where shards hand messages for other nodes: of other DCs, or of this DC. Which node a message goes to is the
/// sending node's decision ([`causet_core::node::Layout::locate`]); a link only carries it. Links to other DCs can be added while
/// the node runs (AntidoteDB's `ApbConnectToDCs`).
#[derive(Clone, Debug)]
pub struct Wan {
    inner: Arc<WanInner>,
}

#[derive(Debug)]
struct WanInner {
    local: DcId,
    node: u16,
    /// Outgoing links by (DC, node).
    links: RwLock<LinkMap>,
    /// Peer DCs whose links were added (how many nodes each has is the topology's business).
    peer_dcs: Mutex<BTreeSet<DcId>>,
    stop: watch::Receiver<bool>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// TLS for every link, when configured.
    tls: Option<PeerTls>,
    /// What an operator cut or delayed, kept across restarts; links take it on when they are added.
    faults: Arc<FaultFile>,
    /// This DC's nodes and their addresses.
    members: Members,
}

impl Wan {
    /// Starts a link task per configured peer node, and per other node of this DC (`members`, by node index,
    /// this node's own entry included).
    pub fn start(
        local: DcId,
        node: u16,
        members: Members,
        peers: &[PeerConfig],
        tls: Option<PeerTls>,
        faults: Arc<FaultFile>,
        stop: watch::Receiver<bool>,
    ) -> Wan {
        let wan = Wan {
            inner: Arc::new(WanInner {
                local,
                node,
                links: RwLock::new(BTreeMap::new()),
                peer_dcs: Mutex::new(BTreeSet::new()),
                stop,
                tasks: Mutex::new(Vec::new()),
                tls,
                faults,
                members: members.clone(),
            }),
        };
        for (n, addr) in members.addrs().into_iter().enumerate() {
            if n != usize::from(node) {
                wan.add_link(local, n as u16, addr, 0, 0);
            }
        }
        for peer in peers {
            wan.add_peer(peer);
        }
        wan
    }

    /// This DC's nodes.
    pub fn members(&self) -> &Members {
        &self.inner.members
    }

    /// Node `node` of this DC announced itself, reachable at `addr`: if it is the DC's next node, it joins (it
    /// is recorded, and a link to it opens). `Ok(Some(count))` when it joined (the DC now has `count` nodes).
    pub fn admit_member(&self, node: u16, addr: Option<SocketAddr>) -> Result<Option<u16>, String> {
        match self.inner.members.admit(node, addr)? {
            Admission::Known => Ok(None),
            Admission::Joined(count) => {
                let addr = addr.expect("a node joins with its address");
                self.add_link(self.inner.local, node, addr, 0, 0);
                info!(node, %addr, nodes = count, "a node joined this DC");
                Ok(Some(count))
            }
        }
    }

    /// Adds links to every node of a peer DC unless the DC has links already; returns whether it added them.
    pub fn add_peer(&self, peer: &PeerConfig) -> bool {
        let addrs = peer.addr.nodes();
        if addrs.is_empty() || !self.inner.peer_dcs.lock().unwrap_or_else(|e| e.into_inner()).insert(DcId(peer.dc)) {
            return false;
        }
        for (n, addr) in addrs.into_iter().enumerate() {
            self.add_link(DcId(peer.dc), n as u16, addr, peer.delay_ms, peer.jitter_ms);
        }
        true
    }

    fn add_link(&self, dc: DcId, node: u16, addr: SocketAddr, delay_ms: u64, jitter_ms: u64) {
        let faults = self.inner.faults.current();
        let (delay_us, jitter_us) = faults.delays_us.get(&dc.0).copied().unwrap_or((delay_ms * 1000, jitter_ms * 1000));
        let cut =
            if dc == self.inner.local { faults.cut_nodes.contains(&node) } else { faults.cut_dcs.contains(&dc.0) };
        if cut {
            tracing::warn!(dc = dc.0, node, "the link stays cut, as an operator left it before this node restarted");
        }
        let mut links = self.inner.links.write().unwrap_or_else(|e| e.into_inner());
        let (tx, rx) = mpsc::channel(LINK_QUEUE);
        let state = Arc::new(LinkState {
            dc,
            node,
            addr,
            delay_us: AtomicU64::new(delay_us),
            jitter_us: AtomicU64::new(jitter_us),
            cut: AtomicBool::new(cut),
            connected: AtomicBool::new(false),
            sent: AtomicU64::new(0),
            sent_bytes: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        });
        let me = self.inner.members.addrs().get(usize::from(self.inner.node)).copied();
        let hello = Hello { dc: self.inner.local, node: self.inner.node, addr: me };
        let task = tokio::spawn(run_link(hello, state.clone(), rx, self.inner.tls.clone(), self.inner.stop.clone()));
        self.inner.tasks.lock().unwrap_or_else(|e| e.into_inner()).push(task);
        links.insert((dc, node), (tx, state));
    }

    /// The faults an operator set, kept across restarts.
    pub fn faults(&self) -> &FaultFile {
        &self.inner.faults
    }

    /// Cuts (`true`) or heals every link to a peer DC, once the change is kept on disk; `Ok(false)` if there is
    /// no link to that DC.
    pub fn cut_dc(&self, dc: DcId, cut: bool) -> anyhow::Result<bool> {
        let links = self.links_to(dc);
        if links.is_empty() {
            return Ok(false);
        }
        self.inner.faults.change(|f| {
            if cut {
                f.cut_dcs.insert(dc.0);
            } else {
                f.cut_dcs.remove(&dc.0);
            }
        })?;
        for l in links {
            l.cut.store(cut, Ordering::Relaxed);
        }
        Ok(true)
    }

    /// Cuts (`true`) or heals the link to another node of this DC, once the change is kept on disk; `Ok(false)`
    /// if there is no such node.
    pub fn cut_member(&self, node: u16, cut: bool) -> anyhow::Result<bool> {
        let Some(link) = self.member_link(node) else { return Ok(false) };
        self.inner.faults.change(|f| {
            if cut {
                f.cut_nodes.insert(node);
            } else {
                f.cut_nodes.remove(&node);
            }
        })?;
        link.cut.store(cut, Ordering::Relaxed);
        Ok(true)
    }

    /// Sets the emulated delay and jitter of every link to a peer DC, once the change is kept on disk; `Ok(false)`
    /// if there is no link to that DC.
    pub fn set_delay(&self, dc: DcId, delay_us: u64, jitter_us: u64) -> anyhow::Result<bool> {
        let links = self.links_to(dc);
        if links.is_empty() {
            return Ok(false);
        }
        self.inner.faults.change(|f| {
            f.delays_us.insert(dc.0, (delay_us, jitter_us));
        })?;
        for l in links {
            l.delay_us.store(delay_us, Ordering::Relaxed);
            l.jitter_us.store(jitter_us, Ordering::Relaxed);
        }
        Ok(true)
    }

    /// Queues a message for another node of this DC.
    pub fn send_member(&self, node: u16, envelope: Envelope) {
        self.send_to(self.inner.local, node, envelope);
    }

    /// Queues a message for a node's link (of another DC, or of this one); a full queue or a cut link drops it
    /// (the protocol resends).
    pub fn send_to(&self, dc: DcId, node: u16, envelope: Envelope) {
        let links = self.read_links();
        let Some((queue, state)) = links.get(&(dc, node)) else { return };
        // The emulated delay counts from now: messages queued behind a waiting one keep their own due times.
        let sent_at = tokio::time::Instant::now();
        if state.cut.load(Ordering::Relaxed) || queue.try_send((sent_at, envelope)).is_err() {
            state.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The links, for reading (a panic elsewhere while the lock was held leaves the map whole: every change to it
    /// is one insert).
    fn read_links(&self) -> std::sync::RwLockReadGuard<'_, LinkMap> {
        self.inner.links.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The states of the links to a DC's nodes in `links` (none for this node's own DC: only links between DCs are
    /// cut or delayed).
    fn links_in<'a>(&self, links: &'a LinkMap, dc: DcId) -> impl Iterator<Item = &'a Arc<LinkState>> + use<'a> {
        let local = self.inner.local;
        links.range((dc, 0)..=(dc, u16::MAX)).filter(move |_| dc != local).map(|(_, (_, s))| s)
    }

    /// The state of the link to another node of this DC in `links`, if there is such a node.
    fn member_in<'a>(&self, links: &'a LinkMap, node: u16) -> Option<&'a Arc<LinkState>> {
        links.get(&(self.inner.local, node)).map(|(_, s)| s)
    }

    /// Every link's state.
    pub fn links(&self) -> Vec<Arc<LinkState>> {
        self.read_links().values().map(|(_, s)| s.clone()).collect()
    }

    /// The links to a DC's nodes (none for this node's own DC: only links between DCs are cut or delayed).
    pub fn links_to(&self, dc: DcId) -> Vec<Arc<LinkState>> {
        self.links_in(&self.read_links(), dc).cloned().collect()
    }

    /// The link to another node of this DC, if there is such a node.
    pub fn member_link(&self, node: u16) -> Option<Arc<LinkState>> {
        self.member_in(&self.read_links(), node).cloned()
    }

    /// Whether an operator cut the link to another node of this DC. Asked for every message that arrives, so it
    /// looks under the lock rather than cloning the link out.
    pub fn is_member_cut(&self, node: u16) -> bool {
        self.member_in(&self.read_links(), node).is_some_and(|s| s.cut.load(Ordering::Relaxed))
    }

    /// Whether an operator cut the links to a DC. Asked for every message that arrives, so it looks under the lock
    /// rather than collecting the links as [`Wan::links_to`] does.
    pub fn is_cut(&self, dc: DcId) -> bool {
        self.links_in(&self.read_links(), dc).any(|s| s.cut.load(Ordering::Relaxed))
    }

    /// Stops every link task.
    pub async fn stop(&self) {
        let tasks = std::mem::take(&mut *self.inner.tasks.lock().unwrap_or_else(|e| e.into_inner()));
        for t in tasks {
            t.abort();
            let _ = t.await;
        }
    }
}

/// How many bytes of frames a link gathers into one write, at most (a single larger frame is written whole).
const BATCH_BYTES: usize = 256 * 1024;

/// Appends an envelope's frame (length, then body) to `batch`; returns whether it was encodable.
fn append_frame(batch: &mut Vec<u8>, envelope: &Envelope) -> bool {
    let Ok(body) = postcard::to_allocvec(envelope) else { return false };
    batch.put_u32(body.len() as u32);
    batch.extend_from_slice(&body);
    true
}

/// A small deterministic-enough jitter source without a global random generator: splitmix64 over a counter.
fn jitter(state: &mut u64, max_us: u64) -> u64 {
    if max_us == 0 {
        return 0;
    }
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) % (max_us + 1)
}

async fn run_link(
    hello: Hello,
    state: Arc<LinkState>,
    mut queue: mpsc::Receiver<Queued>,
    tls: Option<PeerTls>,
    mut stop: watch::Receiver<bool>,
) {
    let mut backoff = Duration::from_millis(50);
    let mut rng =
        u64::from(hello.dc.0) << 48 | u64::from(hello.node) << 32 | u64::from(state.dc.0) << 16 | u64::from(state.node);
    let hello = hello.encode();
    loop {
        if *stop.borrow() {
            return;
        }
        let stream = tokio::select! {
            s = open(state.addr, tls.as_ref(), state.dc.0, state.node) => s,
            _ = stopped(&mut stop) => return,
        };
        let mut stream = match stream {
            Ok(s) => s,
            Err(e) => {
                if e.kind() == std::io::ErrorKind::ConnectionRefused {
                    debug!(peer = state.dc.0, error = %e, "cannot reach the peer DC yet");
                } else {
                    warn!(peer = state.dc.0, node = state.node, addr = %state.addr, error = %e, "cannot open a link");
                }
                // Messages queued meanwhile are moot: the protocol resends after the gap.
                while let Ok(_dropped) = queue.try_recv() {
                    state.dropped.fetch_add(1, Ordering::Relaxed);
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
                continue;
            }
        };
        if stream.write_all(&hello).await.is_err() {
            continue;
        }
        backoff = Duration::from_millis(50);
        state.connected.store(true, Ordering::Relaxed);
        info!(peer = state.dc.0, node = state.node, addr = %state.addr, "connected to a peer node");
        let mut last_due = tokio::time::Instant::now();
        // A message taken from the queue that was not due yet when the batch before it left.
        let mut next: Option<Queued> = None;
        let mut batch: Vec<u8> = Vec::new();
        loop {
            let (sent_at, envelope) = match next.take() {
                Some(queued) => queued,
                None => tokio::select! {
                    e = queue.recv() => match e { Some(e) => e, None => return },
                    _ = stopped(&mut stop) => return,
                },
            };
            if state.cut.load(Ordering::Relaxed) {
                state.dropped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let mut due_of = |sent_at: tokio::time::Instant| {
                let delay =
                    state.delay_us.load(Ordering::Relaxed) + jitter(&mut rng, state.jitter_us.load(Ordering::Relaxed));
                // FIFO: never before the previous message.
                let due = (sent_at + Duration::from_micros(delay)).max(last_due);
                last_due = due;
                due
            };
            // Tokio's timer rounds a deadline up to its next millisecond tick, even one already past: a message that
            // is due (every message on a link with no delay) leaves without sleeping.
            let due = due_of(sent_at);
            if due > tokio::time::Instant::now() {
                tokio::time::sleep_until(due).await;
            }
            // One write for this message and every queued one that is due by now: fewer system calls and segments
            // when many partitions and groups talk to one node at once.
            batch.clear();
            let mut count = 0;
            count += u64::from(append_frame(&mut batch, &envelope));
            while batch.len() < BATCH_BYTES {
                let Ok((sent_at, envelope)) = queue.try_recv() else { break };
                if state.cut.load(Ordering::Relaxed) {
                    state.dropped.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                if due_of(sent_at) > tokio::time::Instant::now() {
                    next = Some((sent_at, envelope));
                    break;
                }
                count += u64::from(append_frame(&mut batch, &envelope));
            }
            if let Err(e) = stream.write_all(&batch).await {
                warn!(peer = state.dc.0, error = %e, "the link to the peer DC broke; reconnecting");
                state.dropped.fetch_add(count, Ordering::Relaxed);
                break;
            }
            state.sent.fetch_add(count, Ordering::Relaxed);
            state.sent_bytes.fetch_add(batch.len() as u64, Ordering::Relaxed);
        }
        state.connected.store(false, Ordering::Relaxed);
    }
}

/// Opens a link's connection: TCP, then TLS when configured (the peer must hold node `node` of DC `dc`'s
/// certificate).
async fn open(addr: SocketAddr, tls: Option<&PeerTls>, dc: u16, node: u16) -> std::io::Result<Box<dyn PeerIo>> {
    let tcp = TcpStream::connect(addr).await?;
    let _ = tcp.set_nodelay(true);
    match tls {
        None => Ok(Box::new(tcp)),
        Some(tls) => tls.connect(tcp, dc, node).await,
    }
}

/// Accepts links from peer DCs' nodes and from this DC's other nodes, and hands their messages to the shards that
/// own the receivers. With TLS, a connection that does not complete a handshake with a certificate of the cluster's
/// CA, or whose certificate does not name the member its hello announces, is refused and logged, before any of its
/// messages is read.
pub async fn accept_peers(listener: TcpListener, routes: Routes, wan: Wan, mut stop: watch::Receiver<bool>) {
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stopped(&mut stop) => return,
        };
        let Ok((socket, peer)) = accepted else { continue };
        let _ = socket.set_nodelay(true);
        let (routes, wan, stop) = (routes.clone(), wan.clone(), stop.clone());
        tokio::spawn(async move {
            let (stream, peer_cert): (Box<dyn PeerIo>, _) = match &wan.inner.tls {
                None => (Box::new(socket), None),
                Some(tls) => match tls.accept(socket).await {
                    Ok((stream, cert)) => (stream, Some(cert)),
                    Err(e) => return warn!(%peer, error = %e, "refused a link: the TLS handshake failed"),
                },
            };
            if let Err(e) = serve_peer(stream, peer_cert, routes, wan, stop).await {
                debug!(%peer, error = %e, "a peer link closed");
            }
        });
    }
}

async fn serve_peer(
    mut socket: Box<dyn PeerIo>,
    peer_cert: Option<rustls::pki_types::CertificateDer<'static>>,
    routes: Routes,
    wan: Wan,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let hello = Hello::read(&mut socket).await?;
    let (origin, origin_node) = (hello.dc, hello.node);
    if let (Some(tls), Some(cert)) = (&wan.inner.tls, &peer_cert) {
        if let Err(reason) = tls.check_member(cert, origin.0, origin_node) {
            warn!(reason, "refused a link: its certificate does not name the member it announced");
            anyhow::bail!(reason);
        }
    }
    let (topology, layout) = (&routes.topology, routes.layout);
    let dcs = topology.dcs();
    anyhow::ensure!(origin.0 < dcs, "a peer announced DC {} of {dcs}", origin.0);
    let member = origin == topology.dc();
    anyhow::ensure!(!member || origin_node != layout.node, "a node announced itself as this node ({origin_node})");
    if member {
        match wan.admit_member(origin_node, hello.addr) {
            Ok(None) => {}
            // The shards learn that the DC grew before any message of the new node reaches them.
            Ok(Some(count)) => routes.broadcast(|| ShardInput::DcNodes(origin, count)).await,
            Err(why) => {
                warn!(node = origin_node, addr = ?hello.addr, why, "refused a link from a node of this DC");
                anyhow::bail!(why);
            }
        }
    }
    let mut buf = BytesMut::with_capacity(64 * 1024);
    loop {
        while buf.len() >= 4 {
            let len = u32::from_be_bytes(buf[..4].try_into().expect("four bytes")) as usize;
            anyhow::ensure!(len <= MAX_FRAME_BYTES, "a peer frame of {len} bytes is over the limit");
            if buf.len() < 4 + len {
                buf.reserve(4 + len - buf.len());
                break;
            }
            buf.advance(4);
            let body = buf.split_to(len);
            let envelope: Envelope = postcard::from_bytes(&body)?;
            if member {
                // A cut link drops what arrives too, so a cut is symmetric even if only one side was told.
                if wan.is_member_cut(origin_node) {
                    continue;
                }
                // Traffic inside the DC: to a partition, coordinator or the stabilizer of this node, between a
                // partition's replicas, or another DC's replication traffic a replica passes on to its leader.
                let passed_on = matches!(envelope.to, Address::Peer(dc, _) if dc == routes.dc());
                let from_peer = matches!(envelope.from, Address::Peer(..));
                let to_peer = matches!(envelope.to, Address::Peer(..));
                if (to_peer || from_peer) && !(routes.replicated() && passed_on) {
                    continue;
                }
                routes.deliver(envelope).await;
                continue;
            }
            // A cut link drops what arrives too, so a cut is symmetric even if only one side was told.
            if wan.is_cut(origin) {
                continue;
            }
            if !admitted_from_dc(&envelope, origin, routes.dc()) {
                continue;
            }
            if let Address::Peer(_, partition) = envelope.to {
                if !routes.serves(partition) {
                    continue;
                }
            }
            routes.deliver(envelope).await;
        }
        let n = tokio::select! {
            n = socket.read_buf(&mut buf) => n?,
            _ = stopped(&mut stop) => return Ok(()),
        };
        if n == 0 {
            return Ok(());
        }
    }
}

/// Whether a message that arrived on a link from DC `origin` may enter this DC (`local`): replication between
/// partitions, a write buffer's questions and answers between coordinators (`coordinator::tokens`), and a read of
/// an object only some DCs hold (partial replication), from a coordinator there to a partition here and its
/// answer back. Each names the DC that opened the link as its sender's.
fn admitted_from_dc(envelope: &Envelope, origin: DcId, local: DcId) -> bool {
    match (envelope.from, envelope.to, &envelope.msg) {
        (Address::Peer(from, _), Address::Peer(to, _), _) => from == origin && to == local,
        (
            Address::DcCoordinator(from, _),
            Address::DcCoordinator(to, _),
            Message::FlushBuffer { .. } | Message::BufferFlushed { .. },
        ) => from == origin && to == local,
        (Address::DcCoordinator(from, _), Address::Peer(to, _), Message::Read { .. } | Message::Fetch { .. }) => {
            from == origin && to == local
        }
        (
            Address::Peer(from, _),
            Address::DcCoordinator(to, _),
            Message::ReadReply { .. } | Message::Fetched { .. },
        ) => from == origin && to == local,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causet_core::message::ReplicaMessage;
    use causet_core::Message;

    #[tokio::test]
    async fn a_hello_reads_back_as_written_and_a_bad_address_is_an_error() {
        for addr in [None, Some("127.0.0.2:7003".parse().unwrap()), Some("[::1]:65535".parse().unwrap())] {
            let hello = Hello { dc: DcId(2), node: 300, addr };
            let bytes = hello.encode();
            assert_eq!(Hello::read(&mut bytes.as_slice()).await.unwrap(), hello);
        }
        let mut bad = Hello { dc: DcId(0), node: 1, addr: None }.encode();
        bad.pop();
        bad.extend_from_slice(&[4, b'n', b'o', b'p', b'e']);
        assert!(Hello::read(&mut bad.as_slice()).await.unwrap_err().to_string().contains("\"nope\""));
        let short = &Hello { dc: DcId(0), node: 1, addr: Some("127.0.0.1:1".parse().unwrap()) }.encode()[..8];
        assert!(Hello::read(&mut &short[..]).await.is_err(), "a hello cut short");
    }

    #[test]
    fn a_link_from_another_dc_admits_replication_buffer_questions_and_reads_of_objects_held_here() {
        use causet_core::{CoordinatorId, PartitionId, TxId};
        let (here, there, third) = (DcId(0), DcId(1), DcId(2));
        let c = CoordinatorId::compose(0, 0, 0);
        let p = PartitionId(3);
        let tx = TxId { dc: there, coordinator: c, seq: 1 };
        let read = Message::Read { tx, request: 1, snapshot: Default::default(), objects: vec![], nearest: false };
        let reply = Message::ReadReply { tx, request: 1, result: Ok(vec![]) };
        let admitted =
            |from, to, msg: &Message| admitted_from_dc(&Envelope { from, to, msg: msg.clone() }, there, here);
        let heartbeat = Message::ReplicateAck { up_to: Default::default(), gap: false };
        assert!(admitted(Address::Peer(there, p), Address::Peer(here, p), &heartbeat));
        assert!(!admitted(Address::Peer(third, p), Address::Peer(here, p), &heartbeat), "sender of another DC");
        assert!(admitted(Address::DcCoordinator(there, c), Address::Peer(here, p), &read));
        assert!(admitted(Address::Peer(there, p), Address::DcCoordinator(here, c), &reply));
        assert!(!admitted(Address::DcCoordinator(there, c), Address::Peer(third, p), &read), "for another DC");
        assert!(!admitted(Address::DcCoordinator(there, c), Address::Peer(here, p), &reply), "only reads go there");
        let prepare = Message::Abort { tx };
        assert!(!admitted(Address::DcCoordinator(there, c), Address::Peer(here, p), &prepare), "no 2PC across DCs");
        assert!(!admitted(Address::Coordinator(c), Address::Partition(p), &read), "traffic inside a DC");
        let flush = Message::FlushBuffer { query: 1 };
        assert!(admitted(Address::DcCoordinator(there, c), Address::DcCoordinator(here, c), &flush));
    }

    fn envelope(k: u64) -> Envelope {
        Envelope {
            from: Address::Stabilizer,
            to: Address::Stabilizer,
            msg: Message::Replica(ReplicaMessage::Leader {
                term: k,
                membership: Default::default(),
                conf_index: Default::default(),
            }),
        }
    }

    /// Reads the hello, then frames until `count` envelopes arrived; returns each one's term and when it came.
    async fn receive(socket: &mut TcpStream, count: usize) -> Vec<(u64, tokio::time::Instant)> {
        Hello::read(socket).await.expect("a hello");
        let mut out = Vec::new();
        while out.len() < count {
            let len = socket.read_u32().await.expect("a frame length") as usize;
            let mut body = vec![0u8; len];
            socket.read_exact(&mut body).await.expect("a frame");
            let e: Envelope = postcard::from_bytes(&body).expect("an envelope");
            let Message::Replica(ReplicaMessage::Leader { term, .. }) = e.msg else { panic!("another message") };
            out.push((term, tokio::time::Instant::now()));
        }
        out
    }

    /// Messages queued faster than they leave go out gathered into few writes: every one arrives, in order, none
    /// before its emulated delay, and the link counts them all sent; a cut drops them instead.
    #[tokio::test]
    async fn a_link_delivers_every_queued_message_in_order_and_none_before_its_delay() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let addr = listener.local_addr().expect("an address");
        let (_stop_tx, stop) = watch::channel(false);
        let (tx, rx) = mpsc::channel(LINK_QUEUE);
        let state = Arc::new(LinkState {
            dc: DcId(1),
            node: 0,
            addr,
            delay_us: AtomicU64::new(20_000),
            jitter_us: AtomicU64::new(0),
            cut: AtomicBool::new(false),
            connected: AtomicBool::new(false),
            sent: AtomicU64::new(0),
            sent_bytes: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        });
        let hello = Hello { dc: DcId(0), node: 0, addr: None };
        let link = tokio::spawn(run_link(hello, state.clone(), rx, None, stop));
        let (mut socket, _) = listener.accept().await.expect("the link connects");
        let start = tokio::time::Instant::now();
        for k in 0..2_000 {
            tx.send((tokio::time::Instant::now(), envelope(k))).await.expect("queued");
        }
        let received =
            tokio::time::timeout(Duration::from_secs(10), receive(&mut socket, 2_000)).await.expect("in time");
        let terms: Vec<u64> = received.iter().map(|(t, _)| *t).collect();
        assert_eq!(terms, (0..2_000).collect::<Vec<_>>(), "every message, in order");
        assert!(received.iter().all(|(_, at)| *at >= start + Duration::from_millis(20)), "one arrived early");
        assert_eq!(state.sent.load(Ordering::Relaxed), 2_000);
        // Cut: what is queued now is dropped, not sent.
        state.cut.store(true, Ordering::Relaxed);
        for k in 0..10 {
            tx.send((tokio::time::Instant::now(), envelope(k))).await.expect("queued");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!((state.sent.load(Ordering::Relaxed), state.dropped.load(Ordering::Relaxed)), (2_000, 10));
        link.abort();
    }
}
