//! TLS on the links between nodes and DCs, end to end and in process: a node of DC 1 whose only peer, DC 0, is
//! played by the test. Whoever connects sends the same thing a real DC 0 node would: its hello, then a replication
//! heartbeat that, once applied, raises DC 1's stable snapshot entry for DC 0 (the node has one partition). Plain
//! TCP, TLS without a certificate, a certificate of another CA, a certificate of another cluster signed by the
//! same CA, and a member's certificate used to pose as another member are each refused, with a logged reason, and
//! nothing they sent is applied; the member with its own certificate is accepted and its heartbeat applied.

use causet_core::message::Message;
use causet_core::{Address, DcId, Envelope, PartitionId, Timestamp};
use causet_server::config::ServerConfig;
use causet_server::tls::{LocalCa, PeerIo, PeerTls, TlsConfig};
use causet_server::wan::{PeerAddrs, PeerConfig};
use causet_server::Node;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Every log line of the process, for the refusals' reasons.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// DC 0's hello and a heartbeat from its partition 0: "everything up to `up_to` was sent".
fn hello_and_heartbeat(node: u16, up_to: u64) -> Vec<u8> {
    let envelope = Envelope {
        from: Address::Peer(DcId(0), PartitionId(0)),
        to: Address::Peer(DcId(1), PartitionId(0)),
        msg: Message::Replicate {
            since: Timestamp(0),
            txs: Vec::new(),
            up_to: Timestamp(up_to),
            gc: None,
            away: Vec::new(),
        },
    };
    let body = postcard::to_allocvec(&envelope).expect("encodes");
    let mut bytes = causet_server::wan::Hello { dc: DcId(0), node, addr: None }.encode();
    bytes.extend_from_slice(&(body.len() as u32).to_be_bytes());
    bytes.extend_from_slice(&body);
    bytes
}

/// Sends the hello and heartbeat on `stream`; true if the node then keeps the link open for a second (it closes a
/// refused one at once).
async fn send_and_stays_open(mut stream: Box<dyn PeerIo>, node: u16, up_to: u64) -> bool {
    if stream.write_all(&hello_and_heartbeat(node, up_to)).await.is_err() || stream.flush().await.is_err() {
        return false;
    }
    let mut buf = [0u8; 64];
    // Still open and silent after a second: accepted. EOF or an error: closed on us.
    tokio::time::timeout(Duration::from_secs(1), stream.read(&mut buf)).await.is_err()
}

async fn stable_entry_of_dc0(admin: std::net::SocketAddr) -> u64 {
    let mut s = TcpStream::connect(admin).await.expect("admin connects");
    s.write_all(b"GET /status HTTP/1.0\r\nHost: x\r\n\r\n").await.expect("writes");
    let mut out = String::new();
    s.read_to_string(&mut out).await.expect("reads");
    let body = &out[out.find("\r\n\r\n").expect("headers end") + 4..];
    let status: serde_json::Value = serde_json::from_str(body).expect("json");
    status["stable_snapshot"][0].as_u64().expect("a stable snapshot entry for DC 0")
}

/// A TLS client that trusts the CA in `ca` and has no certificate of its own.
fn trusting(ca: &std::path::Path) -> rustls::ClientConfig {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_file_iter(ca).expect("reads the CA").flatten() {
        roots.add(c).expect("a root");
    }
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth()
}

fn tls_for(ca: &LocalCa, dir: &std::path::Path, cluster: &str, dc: u16, node: u16) -> TlsConfig {
    ca.write_cluster(dir, cluster, &[(dc, node)]).expect("writes certificates").remove(0).1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_member_with_its_own_certificate_can_open_a_link() {
    let logs = Logs::default();
    let writer = logs.clone();
    tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).init();
    tokio::time::timeout(Duration::from_secs(60), async {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let certs = dir.path().join("alpha");
        let ca = LocalCa::create().expect("a CA");
        let node_tls = tls_for(&ca, &certs, "alpha", 1, 0);
        let member = tls_for(&ca, &dir.path().join("member"), "alpha", 0, 0);
        let other_cluster = tls_for(&ca, &dir.path().join("beta"), "beta", 0, 0);
        let stranger_ca = LocalCa::create().expect("another CA");
        let mut wrong_ca = tls_for(&stranger_ca, &dir.path().join("stranger"), "alpha", 0, 0);

        let config = ServerConfig {
            data_dir: dir.path().join("data"),
            client_bind: "127.0.0.1:0".parse().expect("address"),
            admin_bind: "127.0.0.1:0".parse().expect("address"),
            replication_bind: "127.0.0.1:0".parse().expect("address"),
            partitions: 1,
            dc: 1,
            dcs: 2,
            // DC 0 is the test; the node's own link to it goes nowhere.
            peers: vec![PeerConfig {
                dc: 0,
                addr: PeerAddrs::One("127.0.0.1:9".parse().expect("address")),
                delay_ms: 0,
                jitter_ms: 0,
            }],
            tls: Some(node_tls.clone()),
            ..ServerConfig::default()
        };
        let node = Node::start(config).await.expect("the node starts");
        let addr = node.replication_addr.expect("a replication port");
        let up_to = 5_000_000u64;
        assert!(stable_entry_of_dc0(node.admin_addr).await < up_to);

        // A stranger speaking plain TCP.
        let tcp = TcpStream::connect(addr).await.expect("connects");
        assert!(!send_and_stays_open(Box::new(tcp), 0, up_to).await, "plain TCP was accepted");
        // TLS with no certificate of its own.
        let anonymous = trusting(&node_tls.ca);
        let name = rustls::pki_types::ServerName::try_from("dc1-n0.alpha").expect("a name");
        let tcp = TcpStream::connect(addr).await.expect("connects");
        let anonymous = tokio_rustls::TlsConnector::from(Arc::new(anonymous)).connect(name, tcp).await;
        if let Ok(stream) = anonymous {
            // TLS 1.3 finishes the client's side before the server has checked the (missing) certificate.
            assert!(
                !send_and_stays_open(Box::new(stream), 0, up_to).await,
                "a link without a certificate was accepted"
            );
        }
        // A certificate of another CA, naming the right member. (It must trust the node's CA to get this far.)
        wrong_ca.ca = node_tls.ca.clone();
        let refused = |tls: &TlsConfig| PeerTls::load(tls).expect("loads");
        let attempt = |tls: PeerTls, hello_node: u16| async move {
            let tcp = TcpStream::connect(addr).await.expect("connects");
            match tls.connect(tcp, 1, 0).await {
                Ok(stream) => send_and_stays_open(stream, hello_node, up_to).await,
                Err(_) => false,
            }
        };
        assert!(!attempt(refused(&wrong_ca), 0).await, "a certificate of another CA was accepted");
        // A certificate of another cluster, signed by the same CA.
        let mut beta = other_cluster.clone();
        beta.cluster = "alpha".into(); // It expects to talk to the alpha node, but names dc0-n0.beta itself.
        assert!(!attempt(refused(&beta), 0).await, "a certificate of another cluster was accepted");
        // A member posing as another member: DC 0 node 0's certificate, announcing node 1.
        assert!(!attempt(refused(&member), 1).await, "a member posing as another was accepted");
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(stable_entry_of_dc0(node.admin_addr).await < up_to, "a refused link's heartbeat was applied");

        // The member itself: accepted, and its heartbeat applied.
        assert!(attempt(refused(&member), 0).await, "the member's own link was refused");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while stable_entry_of_dc0(node.admin_addr).await < up_to {
            assert!(tokio::time::Instant::now() < deadline, "the member's heartbeat was never applied");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        node.shutdown().await.expect("shuts down");

        let logs = logs.text();
        assert!(logs.matches("refused a link").count() >= 5, "every refusal is logged with its reason:\n{logs}");
        assert!(logs.contains("does not name dc0-n1.alpha"), "the impersonation's reason:\n{logs}");
        assert!(logs.contains("the TLS handshake failed"), "{logs}");
    })
    .await
    .expect("the test finished in time");
}

/// With `[client_tls]`, the client port speaks AntidoteDB's protocol inside TLS: a static update and a static read
/// go through; a client speaking plain TCP gets no answer and is disconnected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_port_serves_tls_when_configured() {
    use causet_core::coordinator::{ClientRequest, ClientResponse, ReadFrom};
    use causet_core::ObjectId;
    use causet_crdt::{CrdtType, Op, Value};
    use causet_wire::{decode_frame, decode_reply, encode_request, ReplyKind, Request};
    tokio::time::timeout(Duration::from_secs(60), async {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let ca = LocalCa::create().expect("a CA");
        let member = tls_for(&ca, &dir.path().join("certs"), "shop", 0, 0);
        let config = ServerConfig {
            data_dir: dir.path().join("data"),
            client_bind: "127.0.0.1:0".parse().expect("address"),
            admin_bind: "127.0.0.1:0".parse().expect("address"),
            partitions: 2,
            client_tls: Some(causet_server::tls::ClientTlsConfig {
                cert: member.cert.clone(),
                key: member.key.clone(),
            }),
            ..ServerConfig::default()
        };
        let node = Node::start(config).await.expect("the node starts");

        let client = trusting(&member.ca);
        let name = rustls::pki_types::ServerName::try_from("dc0-n0.shop").expect("a name");
        let tcp = TcpStream::connect(node.client_addr).await.expect("connects");
        let mut tls = tokio_rustls::TlsConnector::from(Arc::new(client)).connect(name, tcp).await.expect("handshake");
        let object = ObjectId::new("visits", "tls", CrdtType::CounterPn);
        let mut ask = async |request: ClientRequest| {
            let kind = ReplyKind::of(&request);
            tls.write_all(&encode_request(&Request::Client(request)).expect("encodes")).await.expect("writes");
            let mut buf = bytes::BytesMut::new();
            loop {
                if let Some(frame) = decode_frame(&mut buf, 1 << 20).expect("a frame") {
                    return decode_reply(&kind, &frame).expect("decodes").expect("succeeds");
                }
                assert!(tls.read_buf(&mut buf).await.expect("reads") > 0, "the node closed the session");
            }
        };
        let update = ClientRequest::StaticUpdate { clock: None, updates: vec![(object.clone(), Op::Increment(3))] };
        assert!(matches!(ask(update).await, ClientResponse::Committed { .. }));
        let read = ClientRequest::StaticRead { clock: None, objects: vec![object], reads: ReadFrom::Leader };
        match ask(read).await {
            ClientResponse::StaticValues { values, .. } => assert_eq!(values, vec![Value::Counter(3)]),
            other => panic!("{other:?}"),
        }

        // Plain TCP on a TLS port: its bytes are not a handshake; the node hangs up without an answer.
        let mut plain = TcpStream::connect(node.client_addr).await.expect("connects");
        let frame = encode_request(&Request::GetConnectionDescriptor).expect("encodes");
        plain.write_all(&frame).await.expect("writes");
        let mut buf = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(15), plain.read_to_end(&mut buf)).await;
        assert!(read.is_ok(), "the node kept a plain connection open on its TLS port");
        assert!(decode_frame(&mut bytes::BytesMut::from(&buf[..]), 1 << 20).ok().flatten().is_none(), "{buf:?}");
        node.shutdown().await.expect("shuts down");
    })
    .await
    .expect("the test finished in time");
}
