//! The reading of one cgroup's files into a pipeline record (the parsers are cgroupfs's).
use std::{path::Path, time::Instant};

use headroom_cgroupfs::{CgroupVersion, cpu, cpuacct, memory, pressure};
use headroom_common::CgroupKey;

use crate::pipeline::CgroupFiles;

/// Reads what the pipeline needs from the cgroup `dir` of the cpu and/or memory controller.
/// Missing or unreadable files (the cgroup vanished) leave their part `None`.
pub fn read_cgroup_files(
    key: CgroupKey,
    dir: &Path,
    version: CgroupVersion,
    cpu: bool,
    memory: bool,
    cpuacct_dir: Option<&Path>,
) -> CgroupFiles {
    let mut files = CgroupFiles::new(key, Instant::now());
    if cpu {
        files.cpu = cpu::read_stat(dir, version).map(|mut stat| {
            if let Some(usage) = cpuacct_dir.and_then(cpuacct::read_usage_ns) {
                stat.usage_ns = usage;
            }
            stat
        });
        files.psi_cpu = pressure::read(dir, pressure::CPU);
    }
    if memory {
        files.memory = memory::read_stat(dir, version);
        if version == CgroupVersion::V2 {
            files.oom_kills = memory::read_oom_kills(dir);
            files.psi_memory = pressure::read(dir, pressure::MEMORY);
            files.psi_io = pressure::read(dir, pressure::IO);
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vanished_cgroup_reads_as_absent() {
        let files = read_cgroup_files(
            CgroupKey::new(1, 2),
            Path::new("/nonexistent/cgroup"),
            CgroupVersion::V1,
            true,
            true,
            None,
        );
        assert!(files.cpu.is_none() && files.memory.is_none());
    }
}
