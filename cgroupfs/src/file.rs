//! One cgroup interface file kept open, and numbers formatted without allocating: the write
//! path of a resize is a few `pwrite(2)` calls and nothing else.
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::CgroupError;

/// One cgroup interface file, opened lazily (`O_NOFOLLOW`, no `O_CREAT`) and kept open: a
/// `pwrite(2)` on an open cgroup file costs about a microsecond, open+write+close ten times that.
/// Reads and writes use separate handles (`O_RDONLY`, `O_WRONLY`), each opened on first use.
#[derive(Debug)]
pub struct CgFile {
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
pub const READ_BUF: usize = 1024;

/// Longest file [`CgFile::read_to`] reads (v2 `memory.stat` is about 2 KiB): a bound on what a
/// file that is not cgroupfs's could make it allocate.
pub const MAX_READ: usize = 64 * 1024;

impl CgFile {
    pub fn new(dir: &Path, name: &str) -> Self {
        Self {
            path: dir.join(name),
            reader: None,
            writer: None,
            truncate: false,
        }
    }

    /// Writes `value` at offset 0 (cgroupfs takes each write(2) as one value).
    pub fn write(&mut self, value: &[u8]) -> Result<(), CgroupError> {
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
    pub fn read<'b>(&mut self, buf: &'b mut [u8; READ_BUF]) -> Result<&'b str, CgroupError> {
        let (len, _) = self.read_into_at(buf, 0)?;
        self.text(&buf[..len])
    }

    /// Reads the whole file from offset 0 into `buf`, grown as the file needs (`memory.stat`
    /// outgrows [`READ_BUF`]), and returns it trimmed. `buf` is meant to be reused: a kept
    /// buffer makes a read two system calls at most, and no allocation.
    pub fn read_to<'b>(&mut self, buf: &'b mut Vec<u8>) -> Result<&'b str, CgroupError> {
        let mut len = 0;
        loop {
            if len >= MAX_READ {
                return Err(CgroupError::Read {
                    path: self.path.clone(),
                    source: io::Error::new(
                        io::ErrorKind::FileTooLarge,
                        "longer than 64 KiB: not a cgroup file",
                    ),
                });
            }
            if buf.len() < len + READ_BUF {
                buf.resize(len + READ_BUF, 0);
            }
            let filled = self.read_into_at(&mut buf[len..], len as u64)?;
            len += filled.0;
            if !filled.1 {
                break;
            }
        }
        self.text(&buf[..len])
    }

    /// Closes the read handle: the next read opens the file again. A kept-open file pins its
    /// cgroup in the kernel until it is closed, after the cgroup is removed too.
    pub fn close(&mut self) {
        self.reader = None;
    }

    /// Whether a read handle is open.
    pub fn is_open(&self) -> bool {
        self.reader.is_some()
    }

    /// Reads into `buf` from `offset` until the end of the file or of `buf`: the bytes read,
    /// and whether `buf` filled (so more may follow).
    fn read_into_at(&mut self, buf: &mut [u8], offset: u64) -> Result<(usize, bool), CgroupError> {
        if self.reader.is_none() {
            self.reader = Some(open(&self.path, false)?);
        }
        let Some(file) = self.reader.as_ref() else {
            return Ok((0, false));
        };
        let mut len = 0;
        while len < buf.len() {
            match file.read_at(&mut buf[len..], offset + len as u64) {
                Ok(0) => break,
                Ok(n) => {
                    len += n;
                    // A short read is the whole value: cgroupfs (seq_file) fills the buffer up
                    // to the end of the file in one read. Saves the read(2) that returns 0.
                    if len < buf.len() {
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
        Ok((len, len == buf.len()))
    }

    fn text<'b>(&self, bytes: &'b [u8]) -> Result<&'b str, CgroupError> {
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.trim()),
            Err(_) => Err(CgroupError::Parse {
                path: self.path.clone(),
                content: String::from_utf8_lossy(bytes).into_owned(),
            }),
        }
    }

    pub fn read_u64(&mut self) -> Result<u64, CgroupError> {
        let mut buf = [0u8; READ_BUF];
        let s = self.read(&mut buf)?;
        s.parse().map_err(|_| CgroupError::Parse {
            path: self.path.clone(),
            content: s.to_owned(),
        })
    }

    pub fn read_i64(&mut self) -> Result<i64, CgroupError> {
        let mut buf = [0u8; READ_BUF];
        let s = self.read(&mut buf)?;
        s.parse().map_err(|_| CgroupError::Parse {
            path: self.path.clone(),
            content: s.to_owned(),
        })
    }

    pub fn parse_error(&self, content: &str) -> CgroupError {
        CgroupError::Parse {
            path: self.path.clone(),
            content: content.to_owned(),
        }
    }
}

/// Formats an integer into a stack buffer (no allocation on the write path).
pub struct NumBuf {
    buf: [u8; 48],
    len: usize,
}

impl NumBuf {
    pub fn new() -> Self {
        Self { buf: [0; 48], len: 0 }
    }

    pub fn push_str(&mut self, s: &str) -> &mut Self {
        let end = (self.len + s.len()).min(self.buf.len());
        self.buf[self.len..end].copy_from_slice(&s.as_bytes()[..end - self.len]);
        self.len = end;
        self
    }

    pub fn push_u64(&mut self, mut v: u64) -> &mut Self {
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

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Default for NumBuf {
    fn default() -> Self {
        Self::new()
    }
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
}
