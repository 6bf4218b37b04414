//! Geo-replication on real processes: three `causet start` processes on loopback, one per DC, linked with an
//! emulated WAN delay. Causality and atomicity across DCs, a link cut and heal with convergence, a DC killed and
//! caught up after restart.

use causet_client::VectorClock;
use causet_client::{Client, Set, ValueExt};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "geo-test-token";
const DELAY_MS: u64 = 20;

struct Dc {
    dc: u16,
    client: SocketAddr,
    admin: SocketAddr,
    config: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

impl Dc {
    fn spawn(&mut self) {
        let log = std::fs::File::create(&self.log).expect("a log file");
        let child = Command::new(env!("CARGO_BIN_EXE_causet"))
            .arg("start")
            .arg("--config")
            .arg(&self.config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("a second handle"))
            .stderr(log)
            .env("NO_COLOR", "1")
            .spawn()
            .expect("causet starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect_timeout(&self.client, Duration::from_millis(100)).is_err() {
            assert!(Instant::now() < deadline, "DC {} did not start; log:\n{}", self.dc, self.log_tail());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines().rev().take(30).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    fn admin_post(&self, path: &str) -> String {
        self.admin("POST", path)
    }

    fn admin(&self, method: &str, path: &str) -> String {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(self.admin).expect("admin connects");
        write!(s, "{method} {path} HTTP/1.0\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 0\r\n\r\n")
            .expect("writes");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("reads");
        out
    }
}

impl Drop for Dc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A free port none of `taken` (below the kernel's range for outgoing connections: a port the kernel hands out
/// may be handed out again, to a node's connection, before the DC binds it — a DC once failed to start so).
fn free_port(taken: &[u16]) -> u16 {
    causet::cluster::free_port(taken).expect("a free port")
}

/// Each partition keeps at most this many unacknowledged transactions in memory: small, so that a DC that was
/// cut off or down is caught up from the senders' logs, read back.
const WINDOW: usize = 4;

fn cluster(dir: &Path, dcs: u16) -> Vec<Dc> {
    cluster_with(dir, dcs, true, |_| 4)
}

/// Starts `dcs` DCs; with `linked`, each knows its peers from its configuration, else they start unconnected.
fn cluster_with(dir: &Path, dcs: u16, linked: bool, partitions: impl Fn(u16) -> u32) -> Vec<Dc> {
    start_dcs(dir, dcs, linked, partitions, "")
}

/// [`cluster_with`], each DC's configuration ending with `extra` (a TOML table).
fn start_dcs(dir: &Path, dcs: u16, linked: bool, partitions: impl Fn(u16) -> u32, extra: &str) -> Vec<Dc> {
    std::fs::create_dir_all(dir).expect("the cluster's directory");
    let mut picked = Vec::new();
    let ports: Vec<[u16; 3]> = (0..dcs)
        .map(|_| {
            [(); 3].map(|()| {
                let port = free_port(&picked);
                picked.push(port);
                port
            })
        })
        .collect();
    let mut out = Vec::new();
    for dc in 0..dcs {
        let [client, admin, replication] = ports[dc as usize];
        let mut peers = String::new();
        for p in (0..dcs).filter(|p| *p != dc && linked) {
            peers.push_str(&format!(
                "\n[[peers]]\ndc = {p}\naddr = \"127.0.0.1:{}\"\ndelay_ms = {DELAY_MS}\n",
                ports[p as usize][2]
            ));
        }
        let config = dir.join(format!("dc{dc}.toml"));
        std::fs::write(
            &config,
            format!(
                "data_dir = \"{}\"\nclient_bind = \"127.0.0.1:{client}\"\nadmin_bind = \"127.0.0.1:{admin}\"\n\
                 replication_bind = \"127.0.0.1:{replication}\"\ndc = {dc}\ndcs = {dcs}\npartitions = {}\n\
                 admin_token = \"{TOKEN}\"\ncheckpoint_interval_s = 1\nreplication_window = {WINDOW}\n{peers}\n{extra}",
                dir.join(format!("dc{dc}")).display(),
                partitions(dc)
            ),
        )
        .expect("writes the config");
        let mut d = Dc {
            dc,
            client: format!("127.0.0.1:{client}").parse().expect("address"),
            admin: format!("127.0.0.1:{admin}").parse().expect("address"),
            config,
            log: dir.join(format!("dc{dc}.log")),
            child: None,
        };
        d.spawn();
        out.push(d);
    }
    out
}

/// Reads the sets at a DC in one snapshot until `done` holds for what it reads (bounded).
async fn read_until(
    addr: SocketAddr,
    sets: &[Set],
    clock: Option<&VectorClock>,
    done: impl Fn(&[Vec<Vec<u8>>]) -> bool,
) -> Vec<Vec<Vec<u8>>> {
    let mut client = Client::connect(addr).await.expect("connects");
    let objects: Vec<_> = sets.iter().map(|s| s.key().clone()).collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let snapshot = match client.static_read(clock, &objects).await {
            Ok((values, _)) => {
                values.iter().map(|v| v.as_set().map(|s| s.to_vec()).unwrap_or_default()).collect::<Vec<_>>()
            }
            Err(e) if Instant::now() < deadline => {
                // A start waits for the DC to catch up with the clock and may time out meanwhile.
                let _ = e;
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            Err(e) => panic!("reads at {addr} kept failing: {e}"),
        };
        if done(&snapshot) || Instant::now() >= deadline {
            return snapshot;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn has(set: &[Vec<u8>], elem: &str) -> bool {
    set.iter().any(|e| e == elem.as_bytes())
}

#[test]
fn three_dcs_causality_atomicity_cuts_and_catch_up() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut dcs = cluster(dir.path(), 3);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
    rt.block_on(async {
        let (x, y, z) = (Set::aw("x", "geo"), Set::aw("y", "geo"), Set::aw("z", "geo"));

        // Causality and atomicity: at DC 0, write x, then (after seeing x) y and z in one transaction. At DC 1, any
        // snapshot that has y has x (causality) and z (atomicity).
        let mut writer = Client::connect(dcs[0].client).await.expect("connects");
        for i in 0..20 {
            writer.static_update(None, vec![x.add(format!("x{i}"))]).await.expect("writes x");
            writer
                .static_update(None, vec![y.add(format!("y{i}")), z.add(format!("z{i}"))])
                .await
                .expect("writes y, z");
        }
        let mut seen_y = 0;
        let deadline = Instant::now() + Duration::from_secs(20);
        while seen_y < 20 && Instant::now() < deadline {
            let snap = read_until(dcs[1].client, &[y.clone(), x.clone(), z.clone()], None, |_| true).await;
            for i in 0..20 {
                if has(&snap[0], &format!("y{i}")) {
                    assert!(has(&snap[1], &format!("x{i}")), "DC 1 shows y{i} without x{i}, written before it");
                    assert!(
                        has(&snap[2], &format!("z{i}")),
                        "DC 1 shows y{i} without z{i}, written atomically with it"
                    );
                }
            }
            seen_y = snap[0].len();
        }
        assert_eq!(seen_y, 20, "every write of DC 0 became visible at DC 1");

        // A session that moves to another DC keeps its guarantees (Cure §IV-C): with the clock of its writes at
        // DC 0, its first read at DC 2 waits until DC 2 has them.
        let moved = Set::aw("moved", "geo");
        let clock = writer.static_update(None, vec![moved.add("before-move")]).await.expect("writes at DC 0");
        let mut at_2 = Client::connect(dcs[2].client).await.expect("connects to DC 2");
        let (values, _) = at_2.static_read(Some(&clock), &[moved.key().clone()]).await.expect("reads at DC 2");
        let seen = values[0].as_set().map(|s| s.to_vec()).unwrap_or_default();
        assert!(has(&seen, "before-move"), "the moved session did not read its own write at DC 2: {seen:?}");

        // A cut link: DC 0 and DC 2 stop talking; DC 0 and DC 1 keep making each other's writes visible
        // (AntidoteDB #204), and after the heal DC 2 converges.
        assert!(dcs[0].admin_post("/admin/links/2/cut").contains("cut"));
        assert!(dcs[2].admin_post("/admin/links/0/cut").contains("cut"));
        let during = Set::aw("during-cut", "geo");
        let clock = writer.static_update(None, vec![during.add("a")]).await.expect("writes during the cut");
        let at_1 = read_until(dcs[1].client, std::slice::from_ref(&during), None, |s| has(&s[0], "a")).await;
        assert!(has(&at_1[0], "a"), "DC 1 sees DC 0's write while the link to DC 2 is cut");
        assert!(dcs[0].admin_post("/admin/links/2/heal").contains("healed"));
        assert!(dcs[2].admin_post("/admin/links/0/heal").contains("healed"));
        let at_2 = read_until(dcs[2].client, std::slice::from_ref(&during), Some(&clock), |s| has(&s[0], "a")).await;
        assert!(has(&at_2[0], "a"), "DC 2 caught up after the heal");

        // A DC killed and restarted catches up by itself (AntidoteDB #420).
        dcs[2].kill();
        let missed = Set::aw("while-down", "geo");
        let mut last = None;
        for i in 0..30 {
            last = Some(writer.static_update(None, vec![missed.add(format!("m{i}"))]).await.expect("writes"));
        }
        dcs[2].spawn();
        let clock = last.expect("commits happened");
        let caught = read_until(dcs[2].client, std::slice::from_ref(&missed), Some(&clock), |s| s[0].len() == 30).await;
        assert_eq!(caught[0].len(), 30, "the restarted DC caught up; log:\n{}", dcs[2].log_tail());

        // A sender that crashes while a peer is cut off: what the peer lacks is beyond the window, in the sender's
        // log, and the restarted sender (its window empty) reads it back from the log its checkpoints kept.
        assert!(dcs[0].admin_post("/admin/links/2/cut").contains("cut"));
        assert!(dcs[2].admin_post("/admin/links/0/cut").contains("cut"));
        let behind = Set::aw("sender-crashed", "geo");
        for i in 0..30 {
            writer.static_update(None, vec![behind.add(format!("s{i}"))]).await.expect("writes during the cut");
        }
        assert!(
            dcs[0].admin("GET", "/status").contains("\"replication_spilled\":true"),
            "what DC 2 lacks outgrew DC 0's window of {WINDOW}, into the log"
        );
        // Past a checkpoint (every second), so that the log the checkpoint keeps is what the restart finds.
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        dcs[0].kill();
        dcs[0].spawn();
        // The restarted DC 0 kept the operator's cut (faults.json): heal both ends.
        assert!(dcs[0].admin("GET", "/status").contains("\"cut\":true"), "the cut survived DC 0's restart");
        assert!(dcs[0].admin_post("/admin/links/2/heal").contains("healed"));
        assert!(dcs[2].admin_post("/admin/links/0/heal").contains("healed"));
        let mut writer = Client::connect(dcs[0].client).await.expect("reconnects to the restarted DC 0");
        let clock = writer.static_update(None, vec![behind.add("after-restart")]).await.expect("writes after restart");
        let caught = read_until(dcs[2].client, std::slice::from_ref(&behind), Some(&clock), |s| s[0].len() == 31).await;
        assert_eq!(caught[0].len(), 31, "DC 2 got what the crashed sender logged; log:\n{}", dcs[0].log_tail());

        // Convergence: every DC returns the same values for everything written.
        let all = [x.clone(), y.clone(), z.clone(), during.clone(), missed.clone(), behind.clone()];
        let mut views = Vec::new();
        for d in &dcs {
            views.push(read_until(d.client, &all, Some(&clock), |_| true).await);
        }
        assert!(views.windows(2).all(|w| w[0] == w[1]), "the DCs diverged: {views:?}");
    });
}

#[test]
fn dcs_connect_through_antidotes_cluster_management_messages_with_clear_errors() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    // DC 2 runs another number of partitions: connecting it must be refused with a clear message.
    let dcs = cluster_with(dir.path(), 3, false, |dc| if dc == 2 { 8 } else { 4 });
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    rt.block_on(async {
        let mut clients = Vec::new();
        for d in &dcs {
            clients.push(Client::connect(d.client).await.expect("connects"));
        }
        let mut descriptors = Vec::new();
        for c in clients.iter_mut() {
            descriptors.push(c.connection_descriptor().await.expect("a descriptor"));
        }
        let mismatch = clients[0].connect_dcs(descriptors.clone()).await.expect_err("partition counts differ");
        assert!(mismatch.to_string().contains("partition counts differ"), "{mismatch}");

        // Unreachable: DC 1's descriptor, after DC 1 is gone.
        let mut unreachable = cluster_with(&dir.path().join("other"), 2, false, |_| 4);
        let mut c = Client::connect(unreachable[1].client).await.expect("connects");
        let gone = c.connection_descriptor().await.expect("a descriptor");
        unreachable[1].kill();
        let mut c0 = Client::connect(unreachable[0].client).await.expect("connects");
        let err = c0.connect_dcs(vec![gone]).await.expect_err("unreachable");
        assert!(err.to_string().contains("cannot be reached"), "{err}");

        // DCs 0 and 1 agree: connect them both ways through the protocol, then replicate.
        for c in clients.iter_mut().take(2) {
            c.connect_dcs(descriptors[..2].to_vec()).await.expect("connects the DCs");
        }
        let s = Set::aw("connected", "geo");
        let clock = clients[0].static_update(None, vec![s.add("hello")]).await.expect("writes");
        let at_1 = read_until(dcs[1].client, std::slice::from_ref(&s), Some(&clock), |v| has(&v[0], "hello")).await;
        assert!(has(&at_1[0], "hello"), "DC 1 sees DC 0's write after connecting through the protocol");
    });
}

/// Partial replication on real processes: DCs 0 and 1 form one ring and DC 2 another, so each object of bucket
/// `r` lives at DC 2 and at one of DCs 0 and 1. A DC reads what it does not hold from its ring's holder, at its
/// transaction's snapshot: its own writes, and transactions that mix both buckets, atomically.
#[test]
fn objects_placed_by_rings_are_read_where_they_live_and_stay_causal_and_atomic() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let placement = "[placement]\nrings = [[0, 1], [2]]\nbuckets = [\"r\"]\n";
    let dcs = start_dcs(dir.path(), 3, true, |_| 4, placement);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
    rt.block_on(async {
        // Eight objects: with four partitions dealt over a ring of two, DC 0 holds some and DC 1 the others.
        let ringed: Vec<Set> = (0..8).map(|i| Set::aw(format!("r{i}"), "r")).collect();
        let full = Set::aw("f", "full");
        let mut c0 = Client::connect(dcs[0].client).await.expect("connects to DC 0");
        let ops = ringed.iter().map(|s| s.add("a")).chain([full.add("a")]);
        let clock = c0.static_update(None, ops.collect::<Vec<_>>()).await.expect("writes at DC 0");
        // Read-your-writes at DC 0, also for the objects only DC 1 and DC 2 hold: each read waits at the holder
        // until DC 0's transaction is there.
        let mut all = ringed.clone();
        all.push(full.clone());
        let keys: Vec<_> = all.iter().map(|s| s.key().clone()).collect();
        let (values, _) = c0.static_read(Some(&clock), &keys).await.expect("reads at DC 0");
        for (s, v) in all.iter().zip(&values) {
            assert!(has(v.as_set().expect("a set"), "a"), "DC 0 reads its own write to {:?}", s.key());
        }
        // An interactive transaction at DC 1 reads objects of both buckets and writes both; DC 2 sees all of it or
        // none of it.
        let mut c1 = Client::connect(dcs[1].client).await.expect("connects to DC 1");
        let mut tx = c1.start_transaction(Some(&clock)).await.expect("starts at DC 1");
        let seen = tx.read(&keys).await.expect("reads at DC 1");
        assert!(seen.iter().all(|v| has(v.as_set().expect("a set"), "a")), "DC 1 reads DC 0's write: {seen:?}");
        let ops: Vec<_> = all.iter().map(|s| s.add("b")).collect();
        tx.update(ops).await.expect("updates at DC 1");
        let clock = tx.commit().await.expect("commits at DC 1");
        let at_2 = read_until(dcs[2].client, &all, None, |s| s.iter().any(|v| has(v, "b"))).await;
        assert!(at_2.iter().all(|v| has(v, "a") && has(v, "b")), "DC 2 sees DC 1's transaction whole: {at_2:?}");
        let at_0 = read_until(dcs[0].client, &all, Some(&clock), |_| true).await;
        assert!(at_0.iter().all(|v| has(v, "b")), "DC 0 reads DC 1's transaction after it: {at_0:?}");
        // A bounded counter of a bucket placed by rings is updated only where it is held.
        let bounded = (0..8).map(|i| causet_client::Counter::bounded(format!("b{i}"), "r"));
        let mut refused = 0;
        for b in bounded {
            if let Err(e) = c0.static_update(None, vec![b.increment(1)]).await {
                assert!(e.to_string().contains("does not hold it"), "{e}");
                refused += 1;
            }
        }
        assert!((1..8).contains(&refused), "DC 0 holds some of eight counters and not others: {refused} refused");
    });
}
