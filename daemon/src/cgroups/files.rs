//! The collector's cgroup files: one kept-open [`StatFiles`] per Pod cgroup of the index,
//! dropped as soon as its cgroup leaves the index, within a cap on open descriptors.
use std::{collections::HashMap, sync::Arc, time::Instant};

use headroom_cgroupfs::StatFiles;
use headroom_common::CgroupKey;

use super::{CgroupHost, CgroupIndex};
use crate::pipeline::CgroupFiles;

/// Open descriptors the collector keeps at most by default: about 150 Pods of four cgroups on
/// v2 (seven files each), far below the raised open-file limit (the gRPC listeners' share is
/// `server.max_connections`).
pub const DEFAULT_MAX_OPEN_FILES: usize = 4096;

/// `wanted`, but at most a quarter of the open-file soft limit: under a hard limit of 4,096 (an
/// old systemd default), kept-open cgroup files must not take the descriptors the gRPC
/// listeners and the actuator need.
fn open_file_budget(wanted: usize) -> usize {
    use nix::sys::resource::{Resource, getrlimit};
    let soft = getrlimit(Resource::RLIMIT_NOFILE).map_or(1024, |(soft, _)| soft);
    budget_under(wanted, soft)
}

fn budget_under(wanted: usize, soft_limit: u64) -> usize {
    wanted.min(usize::try_from(soft_limit / 4).unwrap_or(usize::MAX))
}

/// Every Pod cgroup's [`StatFiles`], for the index it was last synchronised with.
pub struct CgroupFileReaders {
    readers: HashMap<CgroupKey, StatFiles>,
    /// The index the readers were made for (compared by pointer: the collector replaces the
    /// index whole when it re-walks).
    index: Option<Arc<CgroupIndex>>,
    /// Files the kept-open readers may hold; readers beyond it close after each read.
    max_open_files: usize,
    buf: Vec<u8>,
}

impl CgroupFileReaders {
    /// Readers that keep at most `max_open_files` open, and at most a quarter of the process's
    /// open-file soft limit.
    pub fn new(max_open_files: usize) -> Self {
        Self {
            readers: HashMap::new(),
            index: None,
            max_open_files: open_file_budget(max_open_files),
            buf: Vec::new(),
        }
    }

    /// Files open now.
    pub fn open_files(&self) -> usize {
        self.readers.values().map(StatFiles::open_files).sum()
    }

    /// Makes the readers those of `index`'s Pod cgroups: gone cgroups' files are closed, new
    /// ones get readers (kept open while the cap allows).
    fn sync(&mut self, host: &CgroupHost, index: &Arc<CgroupIndex>) {
        if self.index.as_ref().is_some_and(|i| Arc::ptr_eq(i, index)) {
            return;
        }
        self.readers
            .retain(|key, _| index.get(key).is_some_and(|i| i.pod.is_some()));
        let mut kept: usize = self
            .readers
            .values()
            .filter(|r| r.keeps_open())
            .map(StatFiles::capacity)
            .sum();
        for hierarchy in host.hierarchies() {
            let cpu = hierarchy.id == host.cpu.id;
            let memory = hierarchy.id == host.memory.id;
            for (key, info) in index
                .iter()
                .filter(|(k, i)| k.hierarchy_id == hierarchy.id && i.pod.is_some())
            {
                if self.readers.contains_key(key) {
                    continue;
                }
                // v1 keeps CPU usage in the cpuacct hierarchy, at the same path.
                let cpuacct = host
                    .cpuacct
                    .as_ref()
                    .filter(|_| cpu)
                    .map(|mount| mount.join(info.relative.trim_start_matches('/')))
                    .filter(|dir| dir.exists());
                let mut reader = StatFiles::new(&info.path, host.version, cpu, memory, cpuacct.as_deref());
                if kept + reader.capacity() <= self.max_open_files {
                    kept += reader.capacity();
                } else {
                    reader.close_after_each_read();
                }
                self.readers.insert(*key, reader);
            }
        }
        self.index = Some(index.clone());
    }

    /// Reads every Pod cgroup of `index` and hands each reading to `send`; a cgroup whose files
    /// are all unreadable (removed since the walk) is skipped.
    pub fn read_all(
        &mut self,
        host: &CgroupHost,
        index: &Arc<CgroupIndex>,
        mut send: impl FnMut(CgroupFiles),
    ) {
        self.sync(host, index);
        for (key, reader) in &mut self.readers {
            let readings = reader.read(&mut self.buf);
            if readings.cpu.is_none() && readings.memory.is_none() {
                tracing::debug!(?key, "cgroup vanished before its files were read");
                continue;
            }
            send(CgroupFiles {
                readings,
                ..CgroupFiles::new(*key, Instant::now())
            });
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::path::Path;

    use headroom_cgroupfs::CgroupVersion;

    use super::*;
    use crate::cgroups::Hierarchy;

    fn pod_cgroup(root: &Path, uid: &str) -> std::path::PathBuf {
        let dir = root.join(format!("kubepods.slice/kubepods-pod{uid}.slice"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("cpu.stat"),
            "usage_usec 1\nnr_periods 1\nnr_throttled 0\nthrottled_usec 0\n",
        )
        .unwrap();
        std::fs::write(dir.join("memory.current"), "100\n").unwrap();
        dir
    }

    #[test]
    fn the_budget_is_a_quarter_of_the_open_file_limit_at_most() {
        assert_eq!(budget_under(DEFAULT_MAX_OPEN_FILES, 4096), 1024);
        assert_eq!(
            budget_under(DEFAULT_MAX_OPEN_FILES, 1 << 20),
            DEFAULT_MAX_OPEN_FILES
        );
        assert_eq!(budget_under(100, 0), 0);
        assert_eq!(
            budget_under(DEFAULT_MAX_OPEN_FILES, u64::MAX),
            DEFAULT_MAX_OPEN_FILES
        );
    }

    #[test]
    fn readers_follow_the_index_and_keep_files_open_up_to_the_cap() {
        let tmp = tempfile::tempdir().unwrap();
        let unified = Hierarchy {
            id: 0,
            mount: tmp.path().to_path_buf(),
        };
        let host = CgroupHost {
            version: CgroupVersion::V2,
            cpu: unified.clone(),
            memory: unified,
            cpuacct: None,
        };
        let a = pod_cgroup(tmp.path(), "0b5e3f2a_1c1d_4e7f_9a0b_000000000001");
        pod_cgroup(tmp.path(), "0b5e3f2a_1c1d_4e7f_9a0b_000000000002");
        let index = Arc::new(CgroupIndex::build(&host.hierarchies()));
        assert_eq!(index.iter().filter(|(_, i)| i.pod.is_some()).count(), 2);

        // Room for one Pod cgroup's seven files: the other reads with transient opens.
        let mut readers = CgroupFileReaders::new(7);
        let mut read = Vec::new();
        readers.read_all(&host, &index, |f| read.push(f));
        assert_eq!(read.len(), 2);
        assert!(
            read.iter()
                .all(|f| f.readings.cpu.is_some() && f.readings.memory.is_some())
        );
        // Of each Pod cgroup only cpu.stat and memory.current exist here: the kept reader
        // holds those two open, the other none.
        assert_eq!(readers.readers.values().filter(|r| r.keeps_open()).count(), 1);
        assert_eq!(readers.open_files(), 2);

        // The cgroup leaves the index: its files are closed (a kept-open file would pin it).
        std::fs::remove_dir_all(&a).unwrap();
        let index = Arc::new(CgroupIndex::build(&host.hierarchies()));
        read.clear();
        readers.read_all(&host, &index, |f| read.push(f));
        assert_eq!(read.len(), 1);
        assert_eq!(readers.readers.len(), 1);
        assert!(readers.open_files() <= 2);
    }
}
