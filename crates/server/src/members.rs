//! The nodes of this DC and where each accepts links: the configuration's `nodes`, and the nodes that joined while
//! the DC ran. A node started with `join` and an index one past the DC's last announces itself in the hello of its
//! links ([`crate::wan::Hello`], which carries the address its own configuration gives it); a node that hears it
//! admits it ([`Members::admit`]), records the DC's addresses in its data directory, opens a link back and tells
//! its shards that the DC grew (`causet_core::topology::Topology::grow`). A restart with the configuration the
//! node had before keeps the nodes that joined since, from its data directory.
//!
//! Nodes join one at a time, in index order: a node whose index is further on is refused (its link retries, and is
//! admitted once the nodes before it are). A node keeps its index for good, also once retired.

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

/// Records the DC's addresses, by node index, durably (the store's `set_members`).
pub type Keep = Box<dyn Fn(&[SocketAddr]) -> anyhow::Result<()> + Send + Sync>;

/// The nodes of this DC, shared by the links and the admin API.
#[derive(Clone)]
pub struct Members {
    inner: Arc<Inner>,
}

struct Inner {
    addrs: RwLock<Vec<SocketAddr>>,
    keep: Keep,
}

impl std::fmt::Debug for Members {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Members").field("addrs", &self.addrs()).finish()
    }
}

/// What [`Members::admit`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// The node was a member already.
    Known,
    /// The node joined: the DC now has this many nodes.
    Joined(u16),
}

impl Members {
    /// The configuration's nodes, followed by those the data directory recorded beyond them (nodes that joined
    /// while the DC ran). Where both name a node, the configuration's address wins (a node may have moved). Records
    /// the result if it differs from what was recorded.
    pub fn new(configured: &[SocketAddr], recorded: Vec<SocketAddr>, keep: Keep) -> anyhow::Result<Self> {
        let mut addrs = configured.to_vec();
        addrs.extend(recorded.iter().skip(configured.len()).copied());
        if addrs != recorded {
            keep(&addrs)?;
        }
        Ok(Self { inner: Arc::new(Inner { addrs: RwLock::new(addrs), keep }) })
    }

    /// How many nodes the DC has (retired ones included): at least one, this node (a DC of one node may be
    /// configured without `nodes`, and list no address).
    pub fn count(&self) -> u16 {
        let listed = self.inner.addrs.read().unwrap_or_else(|e| e.into_inner()).len();
        u16::try_from(listed.max(1)).unwrap_or(u16::MAX)
    }

    /// Every node's address, by node index.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.inner.addrs.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Node `node` announced itself on a link, reachable at `addr`. The next node after the DC's last joins:
    /// recorded durably before this returns. A node the DC has is known (whatever address it gives: the
    /// configuration names its members). Refused: a node further on (nodes join in index order), one without an
    /// address, or one at another member's address.
    pub fn admit(&self, node: u16, addr: Option<SocketAddr>) -> Result<Admission, String> {
        let mut addrs = self.inner.addrs.write().unwrap_or_else(|e| e.into_inner());
        let count = addrs.len();
        if usize::from(node) < count {
            return Ok(Admission::Known);
        }
        if usize::from(node) > count {
            return Err(format!(
                "node {node} announced itself, but this DC has nodes 0..{count}: nodes join one at a time, in index \
                 order (node {count} first)"
            ));
        }
        let Some(addr) = addr else {
            return Err(format!("node {node} announced itself without the address it accepts links on"));
        };
        if let Some(other) = addrs.iter().position(|a| *a == addr) {
            return Err(format!("node {node} announced address {addr}, which is node {other}'s"));
        }
        addrs.push(addr);
        if let Err(e) = (self.inner.keep)(&addrs) {
            addrs.pop();
            return Err(format!("node {node} could not be recorded as a member: {e:#}"));
        }
        Ok(Admission::Joined(u16::try_from(addrs.len()).unwrap_or(u16::MAX)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    /// Members over a record the test can read and make fail.
    fn members(configured: &[SocketAddr], recorded: Vec<SocketAddr>) -> (Members, Arc<Mutex<Option<Vec<SocketAddr>>>>) {
        let kept = Arc::new(Mutex::new(None));
        let sink = kept.clone();
        let keep: Keep = Box::new(move |a| {
            let mut kept = sink.lock().unwrap();
            anyhow::ensure!(a.len() < 6, "the disk is full");
            *kept = Some(a.to_vec());
            Ok(())
        });
        (Members::new(configured, recorded, keep).unwrap(), kept)
    }

    #[test]
    fn nodes_join_in_index_order_and_each_is_recorded_before_it_counts() {
        let (m, kept) = members(&[addr(1), addr(2), addr(3)], Vec::new());
        assert_eq!(kept.lock().unwrap().as_deref(), Some(&[addr(1), addr(2), addr(3)][..]), "the first record");
        assert_eq!(m.admit(1, Some(addr(9))), Ok(Admission::Known), "a member, whatever address it gives");
        assert_eq!(m.addrs()[1], addr(2));
        assert!(m.admit(4, Some(addr(5))).unwrap_err().contains("node 3 first"));
        assert!(m.admit(3, None).is_err(), "a newcomer must say where it listens");
        assert!(m.admit(3, Some(addr(2))).unwrap_err().contains("node 1's"));
        assert_eq!(m.admit(3, Some(addr(4))), Ok(Admission::Joined(4)));
        assert_eq!(kept.lock().unwrap().as_deref(), Some(&[addr(1), addr(2), addr(3), addr(4)][..]));
        assert_eq!(m.admit(3, Some(addr(4))), Ok(Admission::Known), "announcing again changes nothing");
        assert_eq!(m.admit(4, Some(addr(5))), Ok(Admission::Joined(5)));
        // A node that cannot be recorded does not join.
        assert!(m.admit(5, Some(addr(6))).unwrap_err().contains("the disk is full"));
        assert_eq!(m.count(), 5);
    }

    #[test]
    fn a_restart_with_the_old_configuration_keeps_the_nodes_that_joined() {
        let recorded = vec![addr(1), addr(2), addr(3), addr(4)];
        let (m, kept) = members(&[addr(1), addr(2), addr(3)], recorded.clone());
        assert_eq!(m.addrs(), recorded);
        assert_eq!(*kept.lock().unwrap(), None, "nothing new to record");
        // The configuration's address wins for a node both name.
        let (m, kept) = members(&[addr(1), addr(7)], recorded);
        assert_eq!(m.addrs(), vec![addr(1), addr(7), addr(3), addr(4)]);
        assert_eq!(kept.lock().unwrap().as_deref(), Some(&m.addrs()[..]));
    }
}
