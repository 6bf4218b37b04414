//! Cluster management over the client protocol: AntidoteDB's `ApbCreateDC`, `ApbGetConnectionDescriptor` and
//! `ApbConnectToDCs`.

use crate::routes::ShardInput;
use crate::NodeState;
use causet_wire::encoding::DcDescriptor;

/// `ApbCreateDC`: a DC's nodes are fixed by its configuration (`node`, `nodes`), because partitions are placed by
/// node index; asking for a DC of as many nodes as it has succeeds, any other shape is refused with the reason.
pub fn create_dc(nodes: &[String], configured: u16) -> Result<Option<Vec<u8>>, String> {
    if nodes.len().max(1) != usize::from(configured) {
        return Err(format!(
            "a DC of {} nodes was asked for, but this DC is configured with {configured}: a DC's nodes are set by \
             each node's `nodes` list (see docs/configuration.md), not formed at run time",
            nodes.len()
        ));
    }
    Ok(None)
}

/// `ApbGetConnectionDescriptor`: what another DC needs to replicate with this one.
pub fn descriptor(state: &NodeState) -> Result<Vec<u8>, String> {
    let c = &state.config;
    let Some(addr) = state.replication_addr else {
        return Err("this node runs a single DC (dcs = 1): start every DC with `dcs` and its own `dc` index to \
                    connect DCs"
            .into());
    };
    let d = DcDescriptor {
        dc: causet_core::DcId(c.dc),
        dcs: c.dcs,
        partitions: c.partitions,
        // The DC's nodes, those that joined it while it ran included.
        addresses: match state.wan.members().addrs() {
            members if members.is_empty() => vec![addr.to_string()],
            members => members.iter().map(|a| a.to_string()).collect(),
        },
    };
    d.encode().map_err(|e| format!("cannot encode the descriptor: {e}"))
}

/// `ApbConnectToDCs`: starts replicating with every described DC that is not this one, after checking that the
/// DCs agree on their shape and can be reached.
pub async fn connect_dcs(state: &NodeState, descriptors: Vec<DcDescriptor>) -> Result<(), String> {
    let c = &state.config;
    let descriptors: Vec<DcDescriptor> = descriptors.into_iter().filter(|d| d.dc.0 != c.dc || d.dcs != c.dcs).collect();
    if descriptors.is_empty() {
        return Ok(()); // Nothing but this DC: nothing to connect.
    }
    if state.replication_addr.is_none() {
        return Err(format!(
            "this node runs a single DC (dcs = 1) and cannot connect to {} other DCs: start every DC with `dcs` and \
             its own `dc` index",
            descriptors.len()
        ));
    }
    let mut peers = Vec::new();
    for d in descriptors {
        if d.dc.0 >= c.dcs {
            return Err(format!("DC {} is outside this cluster's {} DCs", d.dc.0, c.dcs));
        }
        if d.dcs != c.dcs {
            return Err(format!("DC {} was configured for {} DCs, this DC (DC {}) for {}", d.dc.0, d.dcs, c.dc, c.dcs));
        }
        if d.partitions != c.partitions {
            return Err(format!(
                "partition counts differ: DC {} has {}, this DC (DC {}) has {}; every DC must run the same number",
                d.dc.0, d.partitions, c.dc, c.partitions
            ));
        }
        if d.addresses.is_empty() {
            return Err(format!("the descriptor of DC {} names no address", d.dc.0));
        }
        let mut addrs = Vec::new();
        for addr in &d.addresses {
            let addr: std::net::SocketAddr =
                addr.parse().map_err(|_| format!("DC {}'s address {addr:?} is not host:port", d.dc.0))?;
            let reach =
                tokio::time::timeout(std::time::Duration::from_secs(3), tokio::net::TcpStream::connect(addr)).await;
            if !matches!(reach, Ok(Ok(_))) {
                return Err(format!("DC {} cannot be reached at {addr}", d.dc.0));
            }
            addrs.push(addr);
        }
        let addr = crate::wan::PeerAddrs::Nodes(addrs);
        peers.push(crate::wan::PeerConfig { dc: d.dc.0, addr, delay_ms: 0, jitter_ms: 0 });
    }
    for p in &peers {
        if state.wan.add_peer(p) {
            tracing::info!(peer = p.dc, addrs = ?p.addr.nodes(), "connected to a DC through ApbConnectToDCs");
            // The shards route to the new DC's nodes from now on.
            let (dc, nodes) = (causet_core::DcId(p.dc), p.addr.nodes().len() as u16);
            state.routes.broadcast(|| ShardInput::DcNodes(dc, nodes)).await;
        }
    }
    Ok(())
}
