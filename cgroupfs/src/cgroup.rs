//! One cgroup (a Pod's or a container's) behind a narrow trait ([`Cgroup`]): a v1
//! implementation over two hierarchies, a v2 one over one directory, and enum dispatch
//! ([`AnyCgroup`]). The directories are always given, so tests run on temporary trees.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cpu::{self, CpuStat, V1Cpu, V2Cpu};
use crate::memory::{self, V1Memory, V2Memory};
use crate::values::{Knob, Setting};
use crate::{CgroupError, CgroupVersion};

/// The files of one cgroup that the actuator reads and writes.
pub trait Cgroup {
    fn version(&self) -> CgroupVersion;
    /// Reads the value the kernel holds now.
    fn read(&mut self, knob: Knob) -> Result<Setting, CgroupError>;
    /// Writes one value (on v1 `CpuMax` may touch the period file first if the period changes).
    fn write(&mut self, setting: &Setting) -> Result<(), CgroupError>;
    /// Current memory usage in bytes (v1 `memory.usage_in_bytes`, v2 `memory.current`).
    fn memory_usage(&mut self) -> Result<u64, CgroupError>;
    fn cpu_stat(&mut self) -> Result<CpuStat, CgroupError>;
    /// The file that holds `knob` (for messages).
    fn file(&self, knob: Knob) -> PathBuf;
    /// The directories of this cgroup (one per hierarchy on v1).
    fn dirs(&self) -> CgroupDirs;
}

/// Where one cgroup lives; serialisable so intent records can name it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CgroupDirs {
    V1 { cpu: PathBuf, memory: PathBuf },
    V2 { dir: PathBuf },
}

impl CgroupDirs {
    pub fn version(&self) -> CgroupVersion {
        match self {
            Self::V1 { .. } => CgroupVersion::V1,
            Self::V2 { .. } => CgroupVersion::V2,
        }
    }

    pub fn paths(&self) -> Vec<&Path> {
        match self {
            Self::V1 { cpu, memory } => vec![cpu, memory],
            Self::V2 { dir } => vec![dir],
        }
    }

    /// Handles on this cgroup's files; files are opened on first use and kept open.
    pub fn open(&self) -> AnyCgroup {
        match self {
            Self::V1 { cpu, memory } => AnyCgroup::V1(V1Cgroup::new(cpu.clone(), memory.clone())),
            Self::V2 { dir } => AnyCgroup::V2(V2Cgroup::new(dir.clone())),
        }
    }
}

/// cgroup v1: `cpu` and `memory` are separate hierarchies, so one cgroup is two directories.
#[derive(Debug)]
pub struct V1Cgroup {
    cpu_dir: PathBuf,
    memory_dir: PathBuf,
    cpu: V1Cpu,
    memory: V1Memory,
}

impl V1Cgroup {
    pub fn new(cpu_dir: PathBuf, memory_dir: PathBuf) -> Self {
        Self {
            cpu: V1Cpu::new(&cpu_dir),
            memory: V1Memory::new(&memory_dir),
            cpu_dir,
            memory_dir,
        }
    }
}

impl Cgroup for V1Cgroup {
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
            Knob::CpuRequest => self.cpu_dir.join(cpu::V1_SHARES),
            Knob::CpuMax => self.cpu_dir.join(cpu::V1_QUOTA),
            Knob::MemoryMax => self.memory_dir.join(memory::V1_LIMIT),
        }
    }

    fn dirs(&self) -> CgroupDirs {
        CgroupDirs::V1 {
            cpu: self.cpu_dir.clone(),
            memory: self.memory_dir.clone(),
        }
    }
}

/// cgroup v2: one directory per cgroup.
#[derive(Debug)]
pub struct V2Cgroup {
    dir: PathBuf,
    cpu: V2Cpu,
    memory: V2Memory,
}

impl V2Cgroup {
    pub fn new(dir: PathBuf) -> Self {
        Self {
            cpu: V2Cpu::new(&dir),
            memory: V2Memory::new(&dir),
            dir,
        }
    }
}

impl Cgroup for V2Cgroup {
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
            Knob::CpuRequest => cpu::V2_WEIGHT,
            Knob::CpuMax => cpu::V2_MAX,
            Knob::MemoryMax => memory::V2_MAX,
        })
    }

    fn dirs(&self) -> CgroupDirs {
        CgroupDirs::V2 {
            dir: self.dir.clone(),
        }
    }
}

/// Enum dispatch over the two versions.
#[derive(Debug)]
pub enum AnyCgroup {
    V1(V1Cgroup),
    V2(V2Cgroup),
}

macro_rules! dispatch {
    ($self:ident, $c:ident => $e:expr) => {
        match $self {
            AnyCgroup::V1($c) => $e,
            AnyCgroup::V2($c) => $e,
        }
    };
}

impl Cgroup for AnyCgroup {
    fn version(&self) -> CgroupVersion {
        dispatch!(self, c => c.version())
    }
    fn read(&mut self, knob: Knob) -> Result<Setting, CgroupError> {
        dispatch!(self, c => c.read(knob))
    }
    fn write(&mut self, setting: &Setting) -> Result<(), CgroupError> {
        dispatch!(self, c => c.write(setting))
    }
    fn memory_usage(&mut self) -> Result<u64, CgroupError> {
        dispatch!(self, c => c.memory_usage())
    }
    fn cpu_stat(&mut self) -> Result<CpuStat, CgroupError> {
        dispatch!(self, c => c.cpu_stat())
    }
    fn file(&self, knob: Knob) -> PathBuf {
        dispatch!(self, c => c.file(knob))
    }
    fn dirs(&self) -> CgroupDirs {
        dispatch!(self, c => c.dirs())
    }
}
