//! cgroup v2: one directory per cgroup; `cpu.weight`, `cpu.max`, `memory.max`.

mod cpu;
mod memory;

use std::path::PathBuf;

use super::{CgroupDirs, CgroupError, CgroupFiles, CgroupVersion, CpuStat};
use crate::values::{Knob, Setting};

#[derive(Debug)]
pub struct V2Cgroup {
    dir: PathBuf,
    cpu: cpu::Cpu,
    memory: memory::Memory,
}

impl V2Cgroup {
    pub fn new(dir: PathBuf) -> Self {
        Self {
            cpu: cpu::Cpu::new(&dir),
            memory: memory::Memory::new(&dir),
            dir,
        }
    }
}

impl CgroupFiles for V2Cgroup {
    fn version(&self) -> CgroupVersion {
        CgroupVersion::V2
    }

    fn read(&mut self, knob: Knob) -> Result<Setting, CgroupError> {
        match knob {
            Knob::CpuRequest => self.cpu.read_weight().map(Setting::CpuRequest),
            Knob::CpuMax => self.cpu.read_max().map(Setting::CpuMax),
            Knob::MemoryMax => self.memory.read_max().map(Setting::MemoryMax),
        }
    }

    fn write(&mut self, setting: &Setting) -> Result<(), CgroupError> {
        match setting {
            Setting::CpuRequest(r) => self.cpu.write_weight(*r),
            Setting::CpuMax(m) => self.cpu.write_max(*m),
            Setting::MemoryMax(m) => self.memory.write_max(*m),
        }
    }

    fn memory_usage(&mut self) -> Result<u64, CgroupError> {
        self.memory.current()
    }

    fn cpu_stat(&mut self) -> Result<CpuStat, CgroupError> {
        self.cpu.stat()
    }

    fn file(&self, knob: Knob) -> PathBuf {
        self.dir.join(match knob {
            Knob::CpuRequest => cpu::WEIGHT,
            Knob::CpuMax => cpu::MAX,
            Knob::MemoryMax => memory::MAX,
        })
    }

    fn dirs(&self) -> CgroupDirs {
        CgroupDirs::V2 {
            dir: self.dir.clone(),
        }
    }
}
