//! Faults an operator set through the admin API (cut links, emulated delays, a skewed clock), kept in the data
//! directory so that a restarted node comes back with them: a link an operator cut stays cut until the operator
//! heals it, whether or not the node restarted in between. The file is `faults.json`; it is replaced atomically
//! (written aside, synced, renamed, directory synced) before the change takes effect, so what runs is never
//! ahead of what a restart would restore. A node whose data directory is lost starts with no faults.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// The file's name in the data directory.
pub const FILE: &str = "faults.json";

/// What an operator set, as it would be restored at start.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorFaults {
    /// Peer DCs whose links are cut.
    #[serde(default)]
    pub cut_dcs: BTreeSet<u16>,
    /// Other nodes of this DC whose links are cut.
    #[serde(default)]
    pub cut_nodes: BTreeSet<u16>,
    /// Emulated delays set per peer DC, replacing the configured ones: (delay, jitter), µs.
    #[serde(default)]
    pub delays_us: BTreeMap<u16, (u64, u64)>,
    /// The clock's offset from the system clock, µs.
    #[serde(default)]
    pub clock_offset_us: i64,
}

/// The faults in force and the file that keeps them.
#[derive(Debug)]
pub struct FaultFile {
    path: PathBuf,
    current: Mutex<OperatorFaults>,
}

impl FaultFile {
    /// Reads the faults kept in `data_dir` (none if the file is absent). A file that cannot be read is an error:
    /// starting without it would silently heal what an operator cut.
    pub fn load(data_dir: &Path) -> anyhow::Result<FaultFile> {
        let path = data_dir.join(FILE);
        let current = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).with_context(|| {
                format!(
                    "{} is damaged (it keeps the link cuts, delays and clock offset an operator set); fix it, or \
                     delete it to start with none",
                    path.display()
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => OperatorFaults::default(),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        Ok(FaultFile { path, current: Mutex::new(current) })
    }

    /// The faults in force.
    pub fn current(&self) -> OperatorFaults {
        self.current.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Applies `change` and keeps the result on disk; returns it. If it cannot be kept, nothing changes and the
    /// error says why: the caller must not put the change into effect.
    pub fn change(&self, change: impl FnOnce(&mut OperatorFaults)) -> anyhow::Result<OperatorFaults> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = current.clone();
        change(&mut next);
        if next != *current {
            self.write(&next).with_context(|| format!("keeping the operator's faults in {}", self.path.display()))?;
            *current = next.clone();
        }
        Ok(next)
    }

    fn write(&self, faults: &OperatorFaults) -> std::io::Result<()> {
        let aside = self.path.with_extension("json.new");
        let mut file = std::fs::File::create(&aside)?;
        file.write_all(&serde_json::to_vec_pretty(faults).map_err(std::io::Error::other)?)?;
        file.sync_all()?;
        std::fs::rename(&aside, &self.path)?;
        if let Some(dir) = self.path.parent() {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_survive_a_reload_and_a_damaged_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = FaultFile::load(dir.path()).unwrap();
        assert_eq!(file.current(), OperatorFaults::default());
        file.change(|f| {
            f.cut_dcs.insert(2);
            f.cut_nodes.insert(1);
            f.delays_us.insert(2, (80_000, 5_000));
            f.clock_offset_us = -1_500_000;
        })
        .unwrap();
        file.change(|f| {
            f.cut_nodes.remove(&1);
        })
        .unwrap();
        let again = FaultFile::load(dir.path()).unwrap().current();
        assert_eq!(again.cut_dcs, BTreeSet::from([2]));
        assert!(again.cut_nodes.is_empty());
        assert_eq!(again.delays_us.get(&2), Some(&(80_000, 5_000)));
        assert_eq!(again.clock_offset_us, -1_500_000);

        std::fs::write(dir.path().join(FILE), b"{ not json").unwrap();
        let e = FaultFile::load(dir.path()).unwrap_err();
        assert!(format!("{e:#}").contains("damaged"), "{e:#}");
    }

    #[test]
    fn a_change_that_cannot_be_kept_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone");
        std::fs::create_dir(&gone).unwrap();
        let file = FaultFile::load(&gone).unwrap();
        std::fs::remove_dir(&gone).unwrap();
        assert!(file.change(|f| f.clock_offset_us = 7).is_err());
        assert_eq!(file.current(), OperatorFaults::default());
    }
}
