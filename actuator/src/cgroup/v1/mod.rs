//! cgroup v1: `cpu` and `memory` are separate hierarchies, so one cgroup is two directories.

mod cpu;
mod memory;

use std::path::PathBuf;

use super::{CgroupDirs, CgroupError, CgroupFiles, CgroupVersion, CpuStat};
use crate::values::{Knob, Setting};

#[derive(Debug)]
pub struct V1Cgroup {
    cpu_dir: PathBuf,
    memory_dir: PathBuf,
    cpu: cpu::Cpu,
    memory: memory::Memory,
}

impl V1Cgroup {
    pub fn new(cpu_dir: PathBuf, memory_dir: PathBuf) -> Self {
        Self {
            cpu: cpu::Cpu::new(&cpu_dir),
            memory: memory::Memory::new(&memory_dir),
            cpu_dir,
            memory_dir,
        }
    }
}

impl CgroupFiles for V1Cgroup {
    fn version(&self) -> CgroupVersion {
        CgroupVersion::V1
    }

    fn read(&mut self, knob: Knob) -> Result<Setting, CgroupError> {
        match knob {
            Knob::CpuRequest => self.cpu.read_shares().map(Setting::CpuRequest),
            Knob::CpuMax => self.cpu.read_max().map(Setting::CpuMax),
            Knob::MemoryMax => self.memory.read_limit().map(Setting::MemoryMax),
        }
    }

    fn write(&mut self, setting: &Setting) -> Result<(), CgroupError> {
        match setting {
            Setting::CpuRequest(r) => self.cpu.write_shares(*r),
            Setting::CpuMax(m) => self.cpu.write_max(*m),
            Setting::MemoryMax(m) => self.memory.write_limit(*m),
        }
    }

    fn memory_usage(&mut self) -> Result<u64, CgroupError> {
        self.memory.usage()
    }

    fn cpu_stat(&mut self) -> Result<CpuStat, CgroupError> {
        self.cpu.stat()
    }

    fn file(&self, knob: Knob) -> PathBuf {
        match knob {
            Knob::CpuRequest => self.cpu_dir.join(cpu::SHARES),
            Knob::CpuMax => self.cpu_dir.join(cpu::QUOTA),
            Knob::MemoryMax => self.memory_dir.join(memory::LIMIT),
        }
    }

    fn dirs(&self) -> CgroupDirs {
        CgroupDirs::V1 {
            cpu: self.cpu_dir.clone(),
            memory: self.memory_dir.clone(),
        }
    }
}
