//! The files a collector reads of one cgroup every cycle (`cpu.stat`, usage, `memory.stat`,
//! `memory.events`, the PSI files), kept open between reads.
//!
//! Opening a cgroup file walks kernfs and allocates a seq_file; re-reading an open one is one
//! `pread(2)`. At a 100 ms cycle over every Pod's cgroups the opens were most of the daemon's
//! CPU. An open file pins its cgroup in the kernel (after `rmdir` too) until it is closed, so
//! the owner drops a [`StatFiles`] as soon as its cgroup leaves the index, and can ask for files
//! that close after each read ([`StatFiles::close_after_each_read`]) when it holds enough.

use std::path::Path;

use crate::file::CgFile;
use crate::{CgroupVersion, CpuStat, MemoryStat, PsiReading, cpu, cpuacct, flat_keyed, memory, pressure};

/// One reading of a cgroup's files; a part is `None` when its file is missing or unreadable.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StatReadings {
    /// `cpu.stat`, with v1's usage from `cpuacct.usage`.
    pub cpu: Option<CpuStat>,
    /// `cpu.pressure`.
    pub psi_cpu: Option<PsiReading>,
    /// Usage and `memory.stat`.
    pub memory: Option<MemoryStat>,
    /// v2 `memory.events` `oom_kill`.
    pub oom_kills: Option<u64>,
    /// v2 `memory.pressure`.
    pub psi_memory: Option<PsiReading>,
    /// v2 `io.pressure`.
    pub psi_io: Option<PsiReading>,
}

/// Reads before a file found missing is looked for again: PSI files are absent on kernels or
/// hierarchies without PSI, and a failed open per cycle is a kernfs walk for nothing.
const RETRY_MISSING_AFTER: u32 = 100;

/// A file that may be absent for good (a PSI file, `cpuacct.usage`).
#[derive(Debug)]
struct Optional {
    file: CgFile,
    /// Reads left before a missing file is tried again (0: try now).
    skip: u32,
}

impl Optional {
    fn new(dir: &Path, name: &str) -> Self {
        Self {
            file: CgFile::new(dir, name),
            skip: 0,
        }
    }

    fn read<'b>(&mut self, buf: &'b mut Vec<u8>) -> Option<&'b str> {
        if self.skip > 0 {
            self.skip -= 1;
            return None;
        }
        match self.file.read_to(buf) {
            Ok(text) => Some(text),
            Err(e) => {
                if e.is_not_found() {
                    self.skip = RETRY_MISSING_AFTER;
                }
                None
            }
        }
    }
}

#[derive(Debug)]
struct CpuFiles {
    stat: CgFile,
    pressure: Optional,
    /// v1: `cpuacct.usage` of the same cgroup in the cpuacct hierarchy.
    cpuacct_usage: Option<Optional>,
}

#[derive(Debug)]
struct MemoryFiles {
    usage: CgFile,
    stat: CgFile,
    /// v2 only: `memory.events`, `memory.pressure`, `io.pressure`.
    events: Option<CgFile>,
    pressure: Option<Optional>,
    io_pressure: Option<Optional>,
}

/// The collector's files of one cgroup, opened on first read.
#[derive(Debug)]
pub struct StatFiles {
    version: CgroupVersion,
    cpu: Option<CpuFiles>,
    memory: Option<MemoryFiles>,
    keep_open: bool,
}

impl StatFiles {
    /// The files of the cgroup `dir`: the cpu controller's when `cpu` (with v1's
    /// `cpuacct.usage` in `cpuacct_dir`), the memory controller's when `memory`. They stay open
    /// between reads unless [`StatFiles::close_after_each_read`] says otherwise.
    pub fn new(
        dir: &Path,
        version: CgroupVersion,
        cpu: bool,
        memory: bool,
        cpuacct_dir: Option<&Path>,
    ) -> Self {
        let v2 = version == CgroupVersion::V2;
        Self {
            version,
            cpu: cpu.then(|| CpuFiles {
                stat: CgFile::new(dir, cpu::STAT),
                pressure: Optional::new(dir, pressure::CPU),
                cpuacct_usage: cpuacct_dir.map(|d| Optional::new(d, cpuacct::USAGE)),
            }),
            memory: memory.then(|| MemoryFiles {
                usage: CgFile::new(dir, memory::usage_file(version)),
                stat: CgFile::new(dir, memory::STAT),
                events: v2.then(|| CgFile::new(dir, memory::EVENTS)),
                pressure: v2.then(|| Optional::new(dir, pressure::MEMORY)),
                io_pressure: v2.then(|| Optional::new(dir, pressure::IO)),
            }),
            keep_open: true,
        }
    }

    /// Every file is closed again after each read (for a reader beyond its owner's cap).
    pub fn close_after_each_read(&mut self) {
        self.keep_open = false;
        self.close();
    }

    /// Every file of the set, once.
    fn files(&self) -> impl Iterator<Item = &CgFile> {
        let cpu = self.cpu.iter().flat_map(|c| {
            [
                Some(&c.stat),
                Some(&c.pressure.file),
                c.cpuacct_usage.as_ref().map(|u| &u.file),
            ]
        });
        let memory = self.memory.iter().flat_map(|m| {
            [
                Some(&m.usage),
                Some(&m.stat),
                m.events.as_ref(),
                m.pressure.as_ref().map(|p| &p.file),
                m.io_pressure.as_ref().map(|p| &p.file),
            ]
        });
        cpu.chain(memory).flatten()
    }

    /// The most files this set holds open at once.
    pub fn capacity(&self) -> usize {
        self.files().count()
    }

    /// Whether files stay open between reads.
    pub fn keeps_open(&self) -> bool {
        self.keep_open
    }

    /// Files open now.
    pub fn open_files(&self) -> usize {
        self.files().filter(|f| f.is_open()).count()
    }

    /// Reads every file; `buf` is a scratch buffer the caller keeps between reads.
    pub fn read(&mut self, buf: &mut Vec<u8>) -> StatReadings {
        let version = self.version;
        let mut r = StatReadings::default();
        if let Some(c) = &mut self.cpu {
            r.cpu = c
                .stat
                .read_to(buf)
                .ok()
                .and_then(|text| cpu::parse_cpu_stat(text, version));
            if let (Some(stat), Some(usage)) = (&mut r.cpu, &mut c.cpuacct_usage)
                && let Some(ns) = usage.read(buf).and_then(|t| t.parse().ok())
            {
                stat.usage_ns = ns;
            }
            r.psi_cpu = c.pressure.read(buf).and_then(pressure::parse_psi);
        }
        if let Some(m) = &mut self.memory {
            let usage = m.usage.read_to(buf).ok().and_then(|t| t.parse().ok());
            r.memory = usage.map(|usage| {
                let stat = m.stat.read_to(buf).unwrap_or_default();
                memory::working_set(usage, stat, version)
            });
            if let Some(events) = &mut m.events {
                r.oom_kills = events.read_to(buf).ok().and_then(|t| flat_keyed(t, "oom_kill"));
            }
            r.psi_memory = m
                .pressure
                .as_mut()
                .and_then(|p| p.read(buf))
                .and_then(pressure::parse_psi);
            r.psi_io = m
                .io_pressure
                .as_mut()
                .and_then(|p| p.read(buf))
                .and_then(pressure::parse_psi);
        }
        if !self.keep_open {
            self.close();
        }
        r
    }

    fn close(&mut self) {
        if let Some(c) = &mut self.cpu {
            c.stat.close();
            c.pressure.file.close();
            c.cpuacct_usage.iter_mut().for_each(|u| u.file.close());
        }
        if let Some(m) = &mut self.memory {
            m.usage.close();
            m.stat.close();
            m.events.iter_mut().for_each(CgFile::close);
            for psi in [&mut m.pressure, &mut m.io_pressure].into_iter().flatten() {
                psi.file.close();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const PSI: &str = "some avg10=1.50 avg60=0.20 avg300=0.00 total=12345\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=7\n";

    fn v2_tree(dir: &Path) {
        let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
        write(
            "cpu.stat",
            "usage_usec 5\nnr_periods 10\nnr_throttled 2\nthrottled_usec 300\n",
        );
        write("cpu.pressure", PSI);
        write("memory.current", "4096\n");
        // Longer than one read buffer, with the key the working set needs at the end.
        let filler: String = (0..200).map(|i| format!("key_{i} {i}\n")).collect();
        write("memory.stat", &format!("{filler}inactive_file 1024\n"));
        write("memory.events", "low 0\nhigh 0\nmax 1\noom 1\noom_kill 3\n");
        write("memory.pressure", PSI);
        write("io.pressure", PSI);
    }

    #[test]
    fn a_v2_cgroup_reads_whole_and_its_files_stay_open_between_reads() {
        let tmp = tempfile::tempdir().unwrap();
        v2_tree(tmp.path());
        let mut files = StatFiles::new(tmp.path(), CgroupVersion::V2, true, true, None);
        assert_eq!(files.capacity(), 7);
        let mut buf = Vec::new();
        let r = files.read(&mut buf);
        assert_eq!(
            r.cpu.map(|c| (c.usage_ns, c.nr_throttled, c.throttled_ns)),
            Some((5000, 2, 300_000))
        );
        assert_eq!(
            r.memory.map(|m| (m.usage_bytes, m.working_set_bytes)),
            Some((4096, 3072))
        );
        assert_eq!(r.oom_kills, Some(3));
        assert!(r.psi_cpu.is_some() && r.psi_memory.is_some() && r.psi_io.is_some());
        assert_eq!(files.open_files(), 7);

        // Kept open: a value written since is read through the same handle.
        std::fs::write(tmp.path().join("memory.current"), "8192\n").unwrap();
        assert_eq!(files.read(&mut buf).memory.map(|m| m.usage_bytes), Some(8192));
    }

    #[test]
    fn files_not_kept_open_are_closed_after_each_read() {
        let tmp = tempfile::tempdir().unwrap();
        v2_tree(tmp.path());
        let mut files = StatFiles::new(tmp.path(), CgroupVersion::V2, true, true, None);
        files.close_after_each_read();
        let r = files.read(&mut Vec::new());
        assert!(r.cpu.is_some() && r.memory.is_some());
        assert_eq!(files.open_files(), 0);
    }

    #[test]
    fn a_missing_psi_file_is_not_looked_for_every_read_and_a_removed_cgroup_reads_as_absent() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("pod");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(
            dir.join("cpu.stat"),
            "nr_periods 1\nnr_throttled 0\nthrottled_time 0\n",
        )
        .unwrap();
        let acct = tmp.path().join("acct");
        std::fs::create_dir(&acct).unwrap();
        std::fs::write(acct.join("cpuacct.usage"), "77\n").unwrap();
        let mut files = StatFiles::new(&dir, CgroupVersion::V1, true, false, Some(&acct));
        let mut buf = Vec::new();
        assert_eq!(files.read(&mut buf).cpu.map(|c| c.usage_ns), Some(77));
        // v1 without PSI: the next reads do not try `cpu.pressure` again, even once it appears.
        std::fs::write(dir.join("cpu.pressure"), PSI).unwrap();
        assert!(files.read(&mut buf).psi_cpu.is_none());
        for _ in 0..RETRY_MISSING_AFTER {
            files.read(&mut buf);
        }
        assert!(
            files.read(&mut buf).psi_cpu.is_some(),
            "looked for again after a while"
        );

        std::fs::remove_dir_all(&dir).unwrap();
        // A kept-open file of a plain directory still reads after removal; cgroupfs answers
        // ENODEV. Reopening fails either way once the handle is dropped.
        files.close();
        assert_eq!(files.read(&mut buf).cpu, None);
    }

    #[test]
    fn a_file_longer_than_any_cgroup_file_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(
            tmp.path().join("memory.stat"),
            vec![b'x'; crate::file::MAX_READ + 1],
        )
        .unwrap();
        let mut file = CgFile::new(tmp.path(), memory::STAT);
        let err = file.read_to(&mut Vec::new()).unwrap_err();
        assert!(err.to_string().contains("longer than 64 KiB"), "{err}");
    }
}
