//! One interface over cgroup v1 and v2: a narrow trait ([`CgroupFiles`]), a module per version
//! with a file per controller, enum dispatch ([`AnyCgroup`]) and `statfs` detection. The cgroup
//! root is always injected, so tests run on temporary trees.

pub mod v1;
pub mod v2;

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::path::PathError;
use crate::values::{Knob, Setting};

/// A cgroup filesystem error; every variant names the file and keeps the kernel's reason.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("open {}: {source}", path.display())]
    Open { path: PathBuf, source: io::Error },
    #[error("write `{value}` to {}: {source}", path.display())]
    Write {
        path: PathBuf,
        value: String,
        source: io::Error,
    },
    #[error("read {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("parse {}: unexpected content `{content}`", path.display())]
    Parse { path: PathBuf, content: String },
    #[error("create {}: {source}", path.display())]
    Create { path: PathBuf, source: io::Error },
    #[error("remove {}: {source}", path.display())]
    Remove { path: PathBuf, source: io::Error },
    #[error("remove {}: still has processes {pids:?} (v1 refuses to remove a cgroup with tasks)", path.display())]
    Busy { path: PathBuf, pids: Vec<u32> },
    #[error("statfs {}: {source}", path.display())]
    Statfs { path: PathBuf, source: nix::Error },
    #[error("{setting} cannot be written to a cgroup {version:?} cgroup")]
    Unsupported {
        setting: Setting,
        version: CgroupVersion,
    },
    #[error(transparent)]
    Path(#[from] PathError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CgroupVersion {
    V1,
    V2,
}

/// How the host mounts cgroups (youki's terms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupSetup {
    /// `/sys/fs/cgroup` is cgroup2: controllers live there.
    Unified,
    /// tmpfs with v1 controller hierarchies plus a controller-less cgroup2 at `unified/`.
    Hybrid,
    /// tmpfs with v1 controller hierarchies only.
    Legacy,
}

impl CgroupSetup {
    /// Where the cpu and memory controllers are: v2 only on a unified host.
    pub const fn controller_version(self) -> CgroupVersion {
        match self {
            Self::Unified => CgroupVersion::V2,
            Self::Hybrid | Self::Legacy => CgroupVersion::V1,
        }
    }
}

/// Detects the setup of the cgroup mount at `mount_root` (normally `/sys/fs/cgroup`) by `statfs`.
pub fn detect_setup(mount_root: &Path) -> Result<CgroupSetup, CgroupError> {
    use nix::sys::statfs::{CGROUP2_SUPER_MAGIC, statfs};
    let fs = statfs(mount_root).map_err(|source| CgroupError::Statfs {
        path: mount_root.into(),
        source,
    })?;
    if fs.filesystem_type() == CGROUP2_SUPER_MAGIC {
        return Ok(CgroupSetup::Unified);
    }
    let unified = mount_root.join("unified");
    match statfs(&unified) {
        Ok(u) if u.filesystem_type() == CGROUP2_SUPER_MAGIC => Ok(CgroupSetup::Hybrid),
        _ => Ok(CgroupSetup::Legacy),
    }
}

/// `cpu.stat` bandwidth counters (v1 `nr_periods nr_throttled throttled_time` (ns);
/// v2 `nr_periods nr_throttled throttled_usec`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuStat {
    pub nr_periods: u64,
    pub nr_throttled: u64,
    pub throttled_ns: u64,
}

/// The narrow seam between the actuator and the kernel: one cgroup (a Pod's or a container's).
pub trait CgroupFiles {
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
            Self::V1 { cpu, memory } => AnyCgroup::V1(v1::V1Cgroup::new(cpu.clone(), memory.clone())),
            Self::V2 { dir } => AnyCgroup::V2(v2::V2Cgroup::new(dir.clone())),
        }
    }
}

/// Enum dispatch over the two versions.
#[derive(Debug)]
pub enum AnyCgroup {
    V1(v1::V1Cgroup),
    V2(v2::V2Cgroup),
}

macro_rules! dispatch {
    ($self:ident, $c:ident => $e:expr) => {
        match $self {
            AnyCgroup::V1($c) => $e,
            AnyCgroup::V2($c) => $e,
        }
    };
}

impl CgroupFiles for AnyCgroup {
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

/// One cgroup interface file, opened lazily (`O_NOFOLLOW`, no `O_CREAT`) and kept open: a
/// `pwrite(2)` on an open cgroup file costs about a microsecond, open+write+close ten times that.
/// Reads and writes use separate handles (`O_RDONLY`, `O_WRONLY`), each opened on first use.
#[derive(Debug)]
pub(crate) struct CgFile {
    path: PathBuf,
    reader: Option<File>,
    writer: Option<File>,
    /// Not on cgroupfs (a test tree on tmpfs/ext4): truncate after each write so that a shorter
    /// value does not leave the tail of the previous one behind.
    truncate: bool,
}

fn on_cgroupfs(file: &File) -> bool {
    use nix::sys::statfs::{CGROUP_SUPER_MAGIC, CGROUP2_SUPER_MAGIC, fstatfs};
    fstatfs(file).is_ok_and(|fs| {
        fs.filesystem_type() == CGROUP_SUPER_MAGIC || fs.filesystem_type() == CGROUP2_SUPER_MAGIC
    })
}

fn open(path: &Path, write: bool) -> Result<File, CgroupError> {
    OpenOptions::new()
        .read(!write)
        .write(write)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|source| CgroupError::Open {
            path: path.to_path_buf(),
            source,
        })
}

/// Longest value file we parse in one read (cpu.stat on v1 is ~150 bytes).
const READ_BUF: usize = 1024;

impl CgFile {
    pub(crate) fn new(dir: &Path, name: &str) -> Self {
        Self {
            path: dir.join(name),
            reader: None,
            writer: None,
            truncate: false,
        }
    }

    /// Writes `value` at offset 0 (cgroupfs takes each write(2) as one value).
    pub(crate) fn write(&mut self, value: &[u8]) -> Result<(), CgroupError> {
        if self.writer.is_none() {
            let file = open(&self.path, true)?;
            self.truncate = !on_cgroupfs(&file);
            self.writer = Some(file);
        }
        let Some(file) = self.writer.as_ref() else {
            return Ok(());
        };
        let result = file.write_at(value, 0).and_then(|n| {
            if n != value.len() {
                return Err(io::Error::new(io::ErrorKind::WriteZero, "short write"));
            }
            if self.truncate {
                file.set_len(n as u64)
            } else {
                Ok(())
            }
        });
        if let Err(source) = result {
            // Drop the handle: the cgroup may have been removed.
            self.writer = None;
            return Err(CgroupError::Write {
                path: self.path.clone(),
                value: String::from_utf8_lossy(value).into_owned(),
                source,
            });
        }
        Ok(())
    }

    /// Reads the whole file from offset 0 into `buf` and returns it trimmed.
    pub(crate) fn read<'b>(&mut self, buf: &'b mut [u8; READ_BUF]) -> Result<&'b str, CgroupError> {
        if self.reader.is_none() {
            self.reader = Some(open(&self.path, false)?);
        }
        let Some(file) = self.reader.as_ref() else {
            return Ok("");
        };
        let mut len = 0;
        loop {
            match file.read_at(&mut buf[len..], len as u64) {
                Ok(0) => break,
                Ok(n) => {
                    len += n;
                    // A short read is the whole value: cgroupfs (seq_file) fills the buffer up
                    // to the end of the file in one read. Saves the read(2) that returns 0.
                    if len == buf.len() || n < buf.len() - (len - n) {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => {
                    self.reader = None;
                    return Err(CgroupError::Read {
                        path: self.path.clone(),
                        source,
                    });
                }
            }
        }
        match std::str::from_utf8(&buf[..len]) {
            Ok(s) => Ok(s.trim()),
            Err(_) => Err(CgroupError::Parse {
                path: self.path.clone(),
                content: String::from_utf8_lossy(&buf[..len]).into_owned(),
            }),
        }
    }

    pub(crate) fn read_u64(&mut self) -> Result<u64, CgroupError> {
        let mut buf = [0u8; READ_BUF];
        let s = self.read(&mut buf)?;
        s.parse().map_err(|_| CgroupError::Parse {
            path: self.path.clone(),
            content: s.to_owned(),
        })
    }

    pub(crate) fn read_i64(&mut self) -> Result<i64, CgroupError> {
        let mut buf = [0u8; READ_BUF];
        let s = self.read(&mut buf)?;
        s.parse().map_err(|_| CgroupError::Parse {
            path: self.path.clone(),
            content: s.to_owned(),
        })
    }

    pub(crate) fn parse_error(&self, content: &str) -> CgroupError {
        CgroupError::Parse {
            path: self.path.clone(),
            content: content.to_owned(),
        }
    }
}

/// Formats an integer into a stack buffer (no allocation on the write path).
pub(crate) struct NumBuf {
    buf: [u8; 48],
    len: usize,
}

impl NumBuf {
    pub(crate) fn new() -> Self {
        Self { buf: [0; 48], len: 0 }
    }

    pub(crate) fn push_str(&mut self, s: &str) -> &mut Self {
        let end = (self.len + s.len()).min(self.buf.len());
        self.buf[self.len..end].copy_from_slice(&s.as_bytes()[..end - self.len]);
        self.len = end;
        self
    }

    pub(crate) fn push_u64(&mut self, mut v: u64) -> &mut Self {
        let mut tmp = [0u8; 20];
        let mut i = tmp.len();
        loop {
            i -= 1;
            tmp[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        let digits = &tmp[i..];
        let end = (self.len + digits.len()).min(self.buf.len());
        self.buf[self.len..end].copy_from_slice(&digits[..end - self.len]);
        self.len = end;
        self
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// Parses flat-keyed files such as `cpu.stat` (`key value` per line).
pub(crate) fn parse_cpu_stat(content: &str, throttled_key: &str, throttled_scale: u64) -> CpuStat {
    let mut stat = CpuStat::default();
    for line in content.lines() {
        let mut it = line.split_ascii_whitespace();
        let (Some(k), Some(v)) = (it.next(), it.next()) else {
            continue;
        };
        let Ok(v) = v.parse::<u64>() else { continue };
        match k {
            "nr_periods" => stat.nr_periods = v,
            "nr_throttled" => stat.nr_throttled = v,
            k if k == throttled_key => stat.throttled_ns = v.saturating_mul(throttled_scale),
            _ => {}
        }
    }
    stat
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbuf_formats() {
        let mut b = NumBuf::new();
        b.push_u64(0).push_str(" ").push_u64(u64::MAX);
        assert_eq!(b.as_bytes(), b"0 18446744073709551615");
    }

    #[test]
    fn cpu_stat_parses_both_formats() {
        let v1 = "nr_periods 10\nnr_throttled 4\nthrottled_time 123456\n";
        assert_eq!(
            parse_cpu_stat(v1, "throttled_time", 1),
            CpuStat {
                nr_periods: 10,
                nr_throttled: 4,
                throttled_ns: 123_456
            }
        );
        let v2 = "usage_usec 5\nnr_periods 3\nnr_throttled 1\nthrottled_usec 7\n";
        assert_eq!(parse_cpu_stat(v2, "throttled_usec", 1000).throttled_ns, 7000);
    }

    #[test]
    fn detects_this_host_or_tmp() {
        // A tmpfs/ext4 directory without `unified/` is "legacy" (no cgroup2 anywhere).
        let tmp = tempfile::tempdir().expect("tempdir");
        assert_eq!(detect_setup(tmp.path()).expect("statfs"), CgroupSetup::Legacy);
        assert!(detect_setup(Path::new("/nonexistent-headroom")).is_err());
    }
}
