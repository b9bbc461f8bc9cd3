//! Intent records: before the first write of a resize, the planned writes (old and new values)
//! are written to `<dir>/<pod uid>.intent`; after the resize (or its rollback) the record is
//! marked done. A daemon killed in between finds the record on start ([`IntentLog::pending`]) and
//! repairs the cgroups (see `Actuator::recover`).
//!
//! The record only has to outlive the *process*, not the machine: cgroups do not survive a
//! reboot, so a record that a power loss takes with it had nothing left to repair. The page cache
//! outlives a killed process, so no `fdatasync` is needed (it can be asked for with
//! [`IntentLog::set_sync`]). Put the directory on tmpfs (`/run/headroom/intents`).
//!
//! One file per Pod is kept open and rewritten in place with one `pwrite` each way, the file's
//! page staying allocated (an `ftruncate` to zero would free it and the next record pay for a new
//! one):
//!
//! ```text
//! headroom-intent 1 <json length> <crc32 of the json, hex>\n<json>
//! ```
//!
//! Marking the record done overwrites the header's first byte with `-` (`-eadroom-intent …`):
//! anything after the header's first line beyond the stated length is the tail of an older,
//! longer record and is ignored. An empty file also means "nothing in flight". A record torn by a
//! crash while it was being written fails its length or checksum and is discarded: no cgroup write
//! can have happened before it was complete.
//!
//! At start the directory is not trusted: a record file is opened with `O_NOFOLLOW | O_NONBLOCK`
//! (a symlink is not followed, a FIFO cannot block), only a regular file of at most
//! [`MAX_RECORD_BYTES`] is read, and whatever is not a record headroom wrote (another kind of
//! file, an unreadable or oversized one, one whose header or JSON is not headroom's) is renamed
//! to `<name>`[`UNREADABLE_SUFFIX`] beside it, for the operator, and reported
//! ([`IntentLog::set_aside`]). The suffix, rather than a sub-directory, because a rename within
//! the directory needs nothing created first that could itself already be a symlink elsewhere,
//! and the scan ignores names that do not end in [`INTENT_SUFFIX`].

use std::collections::HashMap;
use std::fs::{File, FileType, OpenOptions};
use std::io::{self, Read as _};
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

use crate::path;
use crate::values::Setting;
use headroom_cgroupfs::CgroupDirs;

pub const INTENT_SUFFIX: &str = ".intent";
/// Appended to the name of an entry of the intent directory that is not a usable record, when
/// recovery moves it aside.
pub const UNREADABLE_SUFFIX: &str = ".unreadable";
/// The largest record written, and read at start. A record is a header and, per cgroup of the
/// Pod, its paths and a handful of writes: under 1 KiB a container even with long roots, so a
/// mebibyte holds a Pod of about a thousand containers (the API server's 1.5 MiB object limit
/// allows fewer). Records are read one at a time, so this is also what a hostile file can cost
/// at start.
pub const MAX_RECORD_BYTES: u64 = 1 << 20;
const FORMAT: u32 = 1;
/// The header's first word; a record marked done has its first byte replaced by [`DONE`].
const MAGIC: &[u8] = b"headroom-intent";
const DONE: u8 = b'-';

#[derive(Debug, thiserror::Error)]
pub enum IntentError {
    #[error("create intent directory {}: {source}", path.display())]
    Dir { path: PathBuf, source: io::Error },
    /// Another actuator (a second headroomd or standalone node) holds the directory's lock: two
    /// of them would promise the same room and repair each other's records.
    #[error(
        "intent directory {} is in use by another headroom process (its flock is held); two nodes must not share one",
        path.display()
    )]
    Locked { path: PathBuf },
    #[error("encode the intent record of pod {pod_uid} (a cgroup path that is not UTF-8?): {source}")]
    Encode {
        pod_uid: String,
        source: serde_json::Error,
    },
    #[error("write intent record {}: {source}", path.display())]
    Write { path: PathBuf, source: io::Error },
    #[error("read intent record {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    /// What a crash while the record was written leaves: nothing was written to any cgroup yet.
    #[error("intent record {} is torn (a crash while it was written): {reason}", path.display())]
    Torn { path: PathBuf, reason: String },
    #[error("{} is not an intent record headroom wrote: {reason}", path.display())]
    Corrupt { path: PathBuf, reason: String },
    #[error("{} is a {kind}, not a regular file", path.display())]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("intent record {} is {bytes} bytes or more, over the {MAX_RECORD_BYTES}-byte bound", path.display())]
    TooLarge { path: PathBuf, bytes: u64 },
    #[error("move {} aside to {}: {source}", path.display(), to.display())]
    SetAside {
        path: PathBuf,
        to: PathBuf,
        source: io::Error,
    },
    #[error("remove intent record {}: {source}", path.display())]
    Remove { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Path(#[from] path::PathError),
}

/// One planned write, with the value to restore.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntentWrite {
    /// Index into [`IntentRecord::cgroups`].
    pub cgroup: usize,
    pub previous: Setting,
    pub next: Setting,
}

/// The whole resize, in write order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntentRecord {
    pub format: u32,
    pub pod_uid: String,
    /// The Pod's cgroups, listed once (the writes refer to them by index: a smaller record).
    pub cgroups: Vec<CgroupDirs>,
    pub writes: Vec<IntentWrite>,
}

impl IntentRecord {
    pub fn new(pod_uid: &str, cgroups: Vec<CgroupDirs>, writes: Vec<IntentWrite>) -> Self {
        Self {
            format: FORMAT,
            pod_uid: pod_uid.to_owned(),
            cgroups,
            writes,
        }
    }

    /// The bytes of a record file holding this record (header and JSON), as
    /// [`IntentLog::begin`] writes them.
    pub fn file_bytes(&self) -> Result<Vec<u8>, IntentError> {
        let encode_err = |source| IntentError::Encode {
            pod_uid: self.pod_uid.clone(),
            source,
        };
        let mut out = Vec::new();
        let cgroups = EncodedCgroups::new(&self.cgroups).map_err(encode_err)?;
        encode(&self.pod_uid, &cgroups, &self.writes, &mut out).map_err(encode_err)?;
        Ok(out)
    }

    /// The cgroup a write addresses; `None` if the record is inconsistent.
    pub fn cgroup_of(&self, w: &IntentWrite) -> Option<&CgroupDirs> {
        self.cgroups.get(w.cgroup)
    }
}

/// A Pod's cgroups as they appear in its records, encoded once: they change only when the
/// Pod's containers do, and the paths are most of a record's bytes.
#[derive(Debug, Clone)]
pub struct EncodedCgroups {
    json: Vec<u8>,
}

impl EncodedCgroups {
    pub fn new(cgroups: &[CgroupDirs]) -> Result<Self, serde_json::Error> {
        Ok(Self {
            json: serde_json::to_vec(cgroups)?,
        })
    }
}

/// A record found on disk: the Pod uid, and the record or why it cannot be used (a torn record,
/// [`IntentError::Torn`], is the only error here: every other is an [`Unusable`] entry).
pub type Pending = (String, Result<IntentRecord, IntentError>);

/// An entry of the intent directory named like a record that is not one headroom can use: to be
/// moved aside ([`IntentLog::set_aside`]), never deleted or trusted.
#[derive(Debug)]
pub struct Unusable {
    pub path: PathBuf,
    pub error: IntentError,
}

/// What [`IntentLog::pending`] found.
#[derive(Debug, Default)]
pub struct Scan {
    /// Records left in flight, by Pod uid.
    pub pending: Vec<Pending>,
    pub unusable: Vec<Unusable>,
}

impl Scan {
    /// Nothing in flight and nothing unusable.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.unusable.is_empty()
    }
}

/// The directory of intent records, with one open file per Pod.
#[derive(Debug)]
pub struct IntentLog {
    dir: PathBuf,
    /// Open, and locked, for as long as the log lives.
    dir_handle: Flock<File>,
    files: HashMap<String, File>,
    /// `fdatasync` each record (default false: see the module documentation).
    sync: bool,
    /// Reused for each record.
    buffer: Vec<u8>,
}

impl IntentLog {
    pub fn open(dir: &Path) -> Result<Self, IntentError> {
        std::fs::create_dir_all(dir).map_err(|source| IntentError::Dir {
            path: dir.into(),
            source,
        })?;
        let dir_handle = File::open(dir).map_err(|source| IntentError::Dir {
            path: dir.into(),
            source,
        })?;
        let dir_handle = lock_exclusive(dir_handle).map_err(|e| match e {
            LockError::Held => IntentError::Locked { path: dir.into() },
            LockError::Io(source) => IntentError::Dir {
                path: dir.into(),
                source,
            },
        })?;
        Ok(Self {
            dir: dir.to_path_buf(),
            dir_handle,
            files: HashMap::new(),
            sync: false,
            buffer: Vec::with_capacity(4096),
        })
    }

    /// `fdatasync` every record and every "done" mark. Not needed for what the records are for
    /// (surviving the daemon, not the machine); for directories whose records should survive a
    /// power loss for inspection.
    pub fn set_sync(&mut self, sync: bool) {
        self.sync = sync;
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path_for(&self, pod_uid: &str) -> Result<PathBuf, IntentError> {
        path::validate_id("pod uid", pod_uid)?;
        Ok(self.dir.join(format!("{pod_uid}{INTENT_SUFFIX}")))
    }

    /// The Pod's open record file. A handle whose name no longer leads to it (unlinked by an
    /// operator or a tmp cleaner, renamed, replaced) is reopened: records written to a file
    /// nobody can find would switch crash safety off silently.
    fn file(&mut self, pod_uid: &str) -> Result<&File, IntentError> {
        let path = self.path_for(pod_uid)?;
        if let Some(file) = self.files.get(pod_uid)
            && !still_named(file, &path)
        {
            tracing::warn!(path = %path.display(), "intent record was removed or replaced under headroom; reopening it");
            self.files.remove(pod_uid);
        }
        if !self.files.contains_key(pod_uid) {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&path)
                .map_err(|source| IntentError::Write {
                    path: path.clone(),
                    source,
                })?;
            // The new directory entry must be durable too.
            self.dir_handle.sync_all().map_err(|source| IntentError::Write {
                path: path.clone(),
                source,
            })?;
            self.files.insert(pod_uid.to_owned(), file);
        }
        self.files.get(pod_uid).ok_or(IntentError::Write {
            path,
            source: io::Error::other("intent file vanished"),
        })
    }

    /// Writes the record (and syncs it if asked); returns once a killed process would leave it
    /// behind complete.
    pub fn begin(&mut self, record: &IntentRecord) -> Result<(), IntentError> {
        let cgroups = EncodedCgroups::new(&record.cgroups).map_err(|source| IntentError::Encode {
            pod_uid: record.pod_uid.clone(),
            source,
        })?;
        self.begin_encoded(&record.pod_uid, &cgroups, &record.writes)
    }

    /// [`Self::begin`] with the Pod's cgroups encoded beforehand (`writes` refer to them by
    /// index, as in [`IntentRecord`]).
    pub fn begin_encoded(
        &mut self,
        pod_uid: &str,
        cgroups: &EncodedCgroups,
        writes: &[IntentWrite],
    ) -> Result<(), IntentError> {
        let mut buffer = std::mem::take(&mut self.buffer);
        let encoded = encode(pod_uid, cgroups, writes, &mut buffer);
        let sync = self.sync;
        if encoded.is_ok() && buffer.len() as u64 > MAX_RECORD_BYTES {
            let bytes = buffer.len() as u64;
            self.buffer = buffer;
            // Recovery would refuse it: refuse it now, before any cgroup is written.
            return Err(IntentError::TooLarge {
                path: self.path_for(pod_uid)?,
                bytes,
            });
        }
        let path = self.path_for(pod_uid)?;
        let result = match encoded {
            Err(e) => Err(IntentError::Write {
                path,
                source: io::Error::other(e),
            }),
            Ok(()) => self.file(pod_uid).and_then(|file| {
                file.write_all_at(&buffer, 0)
                    .and_then(|()| if sync { file.sync_data() } else { Ok(()) })
                    .map_err(|source| IntentError::Write { path, source })
            }),
        };
        self.buffer = buffer;
        result
    }

    /// Marks the Pod as having nothing in flight (overwrites the record header's first byte).
    pub fn clear(&mut self, pod_uid: &str) -> Result<(), IntentError> {
        let sync = self.sync;
        let path = self.path_for(pod_uid)?;
        let file = self.file(pod_uid)?;
        file.write_all_at(&[DONE], 0)
            .and_then(|()| if sync { file.sync_data() } else { Ok(()) })
            .map_err(|source| IntentError::Write { path, source })
    }

    /// Removes the Pod's record file (Pod gone, or recovery done).
    pub fn remove(&mut self, pod_uid: &str) -> Result<(), IntentError> {
        let path = self.path_for(pod_uid)?;
        self.files.remove(pod_uid);
        remove_file(&path)?;
        self.dir_handle
            .sync_all()
            .map_err(|source| IntentError::Remove { path, source })
    }

    /// Every non-empty record in the directory, and every entry named like a record that is not
    /// a usable one. Reads only regular files, through no symlink, at most
    /// [`MAX_RECORD_BYTES`] each; a FIFO, device, socket or directory is never read.
    pub fn pending(&self) -> Result<Scan, IntentError> {
        let entries = std::fs::read_dir(&self.dir).map_err(|source| IntentError::Read {
            path: self.dir.clone(),
            source,
        })?;
        let mut scan = Scan::default();
        for entry in entries {
            let entry = entry.map_err(|source| IntentError::Read {
                path: self.dir.clone(),
                source,
            })?;
            let name = entry.file_name();
            let Some(uid) = name.to_str().and_then(|n| n.strip_suffix(INTENT_SUFFIX)) else {
                continue;
            };
            let path = entry.path();
            let unusable = |error| Unusable {
                path: path.clone(),
                error,
            };
            // Not a name headroom writes: its record could never be removed by uid either.
            if let Err(e) = path::validate_id("pod uid", uid) {
                scan.unusable.push(unusable(e.into()));
                continue;
            }
            let bytes = match entry
                .file_type()
                .map_err(|source| IntentError::Read {
                    path: path.clone(),
                    source,
                })
                .and_then(|kind| read_record_file(&path, kind))
            {
                Ok(b) => b,
                Err(e) => {
                    scan.unusable.push(unusable(e));
                    continue;
                }
            };
            match decode(&bytes) {
                Decoded::Nothing => {}
                Decoded::Torn(reason) => scan
                    .pending
                    .push((uid.to_owned(), Err(IntentError::Torn { path, reason }))),
                Decoded::Corrupt(reason) => {
                    scan.unusable.push(unusable(IntentError::Corrupt {
                        path: path.clone(),
                        reason,
                    }));
                }
                Decoded::Record(r) => {
                    if r.format != FORMAT
                        || r.pod_uid != uid
                        || r.writes.iter().any(|w| w.cgroup >= r.cgroups.len())
                    {
                        let reason = format!("format {} for pod {}", r.format, r.pod_uid);
                        scan.unusable.push(unusable(IntentError::Corrupt {
                            path: path.clone(),
                            reason,
                        }));
                    } else {
                        scan.pending.push((uid.to_owned(), Ok(*r)));
                    }
                }
            }
        }
        scan.pending.sort_by(|a, b| a.0.cmp(&b.0));
        scan.unusable.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(scan)
    }

    /// Renames an entry of the directory to `<name>.unreadable` (`.unreadable.1`, … if taken),
    /// beside it; returns the new path. A symlink, FIFO or directory is moved as it is, never
    /// followed or opened.
    pub fn set_aside(&mut self, path: &Path) -> Result<PathBuf, IntentError> {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let mut to = self.dir.join(format!("{name}{UNREADABLE_SUFFIX}"));
        // Check then rename: the start is the only writer of this directory.
        for n in 1..=100 {
            if to.symlink_metadata().is_err() {
                break;
            }
            to = self.dir.join(format!("{name}{UNREADABLE_SUFFIX}.{n}"));
        }
        std::fs::rename(path, &to)
            .and_then(|()| self.dir_handle.sync_all())
            .map_err(|source| IntentError::SetAside {
                path: path.into(),
                to: to.clone(),
                source,
            })?;
        // A handle kept open for that name now points at the moved file.
        if let Some(uid) = name.strip_suffix(INTENT_SUFFIX) {
            self.files.remove(uid);
        }
        Ok(to)
    }
}

/// `flock(LOCK_EX | LOCK_NB)`: held as long as the returned handle is open, and released by the
/// kernel when the process dies however it dies, so a SIGKILLed predecessor never leaves it
/// stale (a lock file with a pid in it would).
pub(crate) fn lock_exclusive(file: File) -> Result<Flock<File>, LockError> {
    Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(_, errno)| match errno {
        nix::errno::Errno::EWOULDBLOCK => LockError::Held,
        other => LockError::Io(io::Error::from(other)),
    })
}

/// Why [`lock_exclusive`] failed.
pub(crate) enum LockError {
    /// Another open file holds the lock: another actuator on the same directory.
    Held,
    Io(io::Error),
}

/// Whether `path` (not followed) is still the file `file` has open.
fn still_named(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    match (file.metadata(), path.symlink_metadata()) {
        (Ok(open), Ok(named)) => open.nlink() > 0 && open.dev() == named.dev() && open.ino() == named.ino(),
        _ => false,
    }
}

/// The bytes of a record file, if it is a regular file (reached through no symlink) of at most
/// [`MAX_RECORD_BYTES`]. `kind` is the directory entry's type (not followed): a FIFO or device is
/// not even opened; `O_NONBLOCK` covers one swapped in since, and `fstat` checks again.
fn read_record_file(path: &Path, kind: FileType) -> Result<Vec<u8>, IntentError> {
    if !kind.is_file() {
        return Err(IntentError::NotRegular {
            path: path.into(),
            kind: kind_name(kind),
        });
    }
    let read_err = |source| IntentError::Read {
        path: path.into(),
        source,
    };
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(read_err)?;
    let meta = file.metadata().map_err(read_err)?;
    if !meta.file_type().is_file() {
        return Err(IntentError::NotRegular {
            path: path.into(),
            kind: kind_name(meta.file_type()),
        });
    }
    if meta.len() > MAX_RECORD_BYTES {
        return Err(IntentError::TooLarge {
            path: path.into(),
            bytes: meta.len(),
        });
    }
    // The size can be a lie (or grow): never read more than the bound, plus one byte to tell.
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(MAX_RECORD_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > MAX_RECORD_BYTES {
        return Err(IntentError::TooLarge {
            path: path.into(),
            bytes: bytes.len() as u64,
        });
    }
    Ok(bytes)
}

fn kind_name(kind: FileType) -> &'static str {
    if kind.is_dir() {
        "directory"
    } else if kind.is_symlink() {
        "symbolic link"
    } else if kind.is_fifo() {
        "FIFO"
    } else if kind.is_socket() {
        "socket"
    } else if kind.is_char_device() {
        "character device"
    } else if kind.is_block_device() {
        "block device"
    } else {
        "special file"
    }
}

/// Header line plus the JSON of an [`IntentRecord`], into `out` (cleared first).
fn encode(
    pod_uid: &str,
    cgroups: &EncodedCgroups,
    writes: &[IntentWrite],
    out: &mut Vec<u8>,
) -> Result<(), serde_json::Error> {
    use std::io::Write as _;
    out.clear();
    // The header has a fixed width, so the JSON can be written once, behind it.
    const HEADER: usize = MAGIC.len() + " 1 0000000000 00000000\n".len();
    out.resize(HEADER, b' ');
    // `IntentRecord`'s JSON, with the Pod's cgroups spliced in already encoded (a test checks
    // that this is byte for byte what serde makes of the record).
    write!(out, "{{\"format\":{FORMAT},\"pod_uid\":").map_err(serde_json::Error::io)?;
    serde_json::to_writer(&mut *out, pod_uid)?;
    out.extend_from_slice(b",\"cgroups\":");
    out.extend_from_slice(&cgroups.json);
    out.extend_from_slice(b",\"writes\":");
    serde_json::to_writer(&mut *out, writes)?;
    out.push(b'}');
    let json = &out[HEADER..];
    let (len, crc) = (json.len(), crc32fast::hash(json));
    let mut header = &mut out[..HEADER];
    header
        .write_all(MAGIC)
        .and_then(|()| writeln!(header, " {FORMAT} {len:010} {crc:08x}"))
        .map_err(serde_json::Error::io)
}

enum Decoded {
    /// Empty file, or a record marked done.
    Nothing,
    /// A headroom header whose record is cut short or fails its checksum: a crash mid-write.
    Torn(String),
    /// Not what headroom writes.
    Corrupt(String),
    Record(Box<IntentRecord>),
}

fn decode(bytes: &[u8]) -> Decoded {
    match bytes.first() {
        None | Some(&DONE) => return Decoded::Nothing,
        Some(_) => {}
    }
    let Some(newline) = bytes.iter().position(|&b| b == b'\n') else {
        return Decoded::Corrupt("no header line".into());
    };
    let header = String::from_utf8_lossy(&bytes[..newline]);
    let mut words = header.split(' ');
    let (magic, format, len, crc) = (words.next(), words.next(), words.next(), words.next());
    if magic.map(str::as_bytes) != Some(MAGIC) || words.next().is_some() {
        return Decoded::Corrupt(format!("not an intent record header: {header:?}"));
    }
    if format != Some("1") {
        return Decoded::Corrupt(format!("unknown intent record format {format:?}"));
    }
    let (Some(len), Some(crc)) = (
        len.and_then(|l| l.parse::<usize>().ok()),
        crc.and_then(|c| u32::from_str_radix(c, 16).ok()),
    ) else {
        return Decoded::Corrupt(format!("bad length or checksum in {header:?}"));
    };
    let Some(json) = bytes.get(newline + 1..).and_then(|rest| rest.get(..len)) else {
        return Decoded::Torn(format!(
            "record is {} bytes, header says {len}",
            bytes.len() - newline - 1
        ));
    };
    if crc32fast::hash(json) != crc {
        return Decoded::Torn("checksum mismatch".into());
    }
    match serde_json::from_slice(json) {
        Ok(r) => Decoded::Record(Box::new(r)),
        Err(e) => Decoded::Corrupt(e.to_string()),
    }
}

fn remove_file(path: &Path) -> Result<(), IntentError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(IntentError::Remove {
            path: path.into(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::MemoryMax;

    fn encode_record(r: &IntentRecord, out: &mut Vec<u8>) -> Result<(), IntentError> {
        *out = r.file_bytes()?;
        Ok(())
    }

    #[test]
    fn spliced_encoding_is_serdes_encoding() {
        let mut r = record("u1");
        r.cgroups.push(CgroupDirs::V1 {
            cpu: "/sys/fs/cgroup/cpu/k/pod\"q".into(),
            memory: "/sys/fs/cgroup/memory/k/pod".into(),
        });
        let mut out = Vec::new();
        encode_record(&r, &mut out).expect("encode");
        let newline = out.iter().position(|&b| b == b'\n').expect("header");
        assert_eq!(&out[newline + 1..], serde_json::to_vec(&r).expect("json"));
    }

    fn record(uid: &str) -> IntentRecord {
        IntentRecord::new(
            uid,
            vec![CgroupDirs::V2 {
                dir: "/r/podu/c".into(),
            }],
            vec![IntentWrite {
                cgroup: 0,
                previous: Setting::MemoryMax(MemoryMax::Max),
                next: Setting::MemoryMax(MemoryMax::Bytes(4096)),
            }],
        )
    }

    #[test]
    fn begin_clear_pending() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut log = IntentLog::open(tmp.path()).expect("open");
        log.begin(&record("u1")).expect("begin");
        log.begin(&record("u2")).expect("begin");
        log.clear("u2").expect("clear");
        let pending = log.pending().expect("pending").pending;
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].0, "u1");
        assert_eq!(pending[0].1.as_ref().expect("parses"), &record("u1"));
        log.remove("u1").expect("remove");
        assert!(log.pending().expect("pending").pending.is_empty());
        assert!(log.begin(&record("../evil")).is_err());
    }

    #[test]
    fn torn_record_is_reported_not_trusted() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let log = IntentLog::open(tmp.path()).expect("open");
        let mut full = Vec::new();
        encode_record(&record("u1"), &mut full).expect("encode");
        std::fs::write(tmp.path().join("u1.intent"), &full[..full.len() - 5]).expect("write");
        let pending = log.pending().expect("pending").pending;
        assert!(
            matches!(&pending[0].1, Err(IntentError::Torn { reason, .. }) if reason.contains("header says")),
            "{pending:?}"
        );
        // A bare JSON record (no header) is not trusted either.
        let json = serde_json::to_vec(&record("u1")).expect("json");
        std::fs::write(tmp.path().join("u1.intent"), json).expect("write");
        let scan = log.pending().expect("pending");
        assert!(scan.pending.is_empty(), "{scan:?}");
        assert!(
            matches!(
                &scan.unusable[..],
                [Unusable {
                    error: IntentError::Corrupt { .. },
                    ..
                }]
            ),
            "{scan:?}"
        );
    }

    #[test]
    fn new_prefix_over_old_tail_fails_the_checksum() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let log = IntentLog::open(tmp.path()).expect("open");
        let (mut old, mut new) = (Vec::new(), Vec::new());
        let mut longer = record("u1");
        longer.writes.push(longer.writes[0].clone());
        encode_record(&longer, &mut old).expect("encode");
        encode_record(&record("u1"), &mut new).expect("encode");
        // The new record's header and half its JSON landed, the rest is the old record's.
        let cut = new.len() / 2;
        let mut torn = new[..cut].to_vec();
        torn.extend_from_slice(&old[cut..]);
        std::fs::write(tmp.path().join("u1.intent"), torn).expect("write");
        let pending = log.pending().expect("pending").pending;
        assert!(
            matches!(&pending[0].1, Err(IntentError::Torn { reason, .. }) if reason.contains("checksum")),
            "{pending:?}"
        );
    }

    #[test]
    fn shorter_record_over_longer_one_and_done_mark() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut log = IntentLog::open(tmp.path()).expect("open");
        let mut longer = record("u1");
        longer.writes.push(longer.writes[0].clone());
        log.begin(&longer).expect("begin");
        log.clear("u1").expect("clear");
        assert!(
            log.pending().expect("pending").pending.is_empty(),
            "done mark means nothing in flight"
        );
        // The file still holds the longer record's tail behind the shorter one.
        log.begin(&record("u1")).expect("begin");
        let on_disk = std::fs::read(tmp.path().join("u1.intent")).expect("read");
        let mut shorter = Vec::new();
        encode_record(&record("u1"), &mut shorter).expect("encode");
        assert!(on_disk.len() > shorter.len());
        let pending = log.pending().expect("pending").pending;
        assert_eq!(pending[0].1.as_ref().expect("parses"), &record("u1"));
        // Synced mode writes the same bytes.
        log.set_sync(true);
        log.begin(&longer).expect("begin");
        assert_eq!(
            log.pending().expect("pending").pending[0]
                .1
                .as_ref()
                .expect("parses"),
            &longer
        );
    }

    #[test]
    fn a_record_over_the_bound_is_refused_before_anything_is_written() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut log = IntentLog::open(tmp.path()).expect("open");
        let mut huge = record("u1");
        let long = "c".repeat(usize::try_from(MAX_RECORD_BYTES).expect("usize"));
        huge.cgroups.push(CgroupDirs::V2 { dir: long.into() });
        let err = log.begin(&huge).expect_err("over the bound");
        assert!(matches!(err, IntentError::TooLarge { .. }), "{err}");
        assert!(!tmp.path().join("u1.intent").exists(), "no file written");
        // The log still works.
        log.begin(&record("u1")).expect("begin");
        assert_eq!(log.pending().expect("pending").pending.len(), 1);
    }

    #[test]
    fn a_second_log_on_one_directory_is_refused_until_the_first_is_gone() {
        let tmp = tempfile::tempdir().expect("tmp");
        let first = IntentLog::open(tmp.path()).expect("open");
        let second = IntentLog::open(tmp.path()).expect_err("a second log on the same directory");
        assert!(matches!(second, IntentError::Locked { .. }), "{second}");
        assert!(
            second.to_string().contains("two nodes must not share one"),
            "{second}"
        );
        drop(first);
        IntentLog::open(tmp.path()).expect("the lock goes with its holder");
    }

    #[test]
    fn a_record_unlinked_under_the_log_is_written_where_recovery_finds_it() {
        let tmp = tempfile::tempdir().expect("tmp");
        let mut log = IntentLog::open(tmp.path()).expect("open");
        log.begin(&record("u1")).expect("begin");
        log.clear("u1").expect("clear");
        let path = log.path_for("u1").expect("path");
        // A tmp cleaner (or an operator) removes the idle record; the next resize begins.
        std::fs::remove_file(&path).expect("unlink");
        log.begin(&record("u1")).expect("begin after unlink");
        let pending = log.pending().expect("pending").pending;
        assert_eq!(
            pending.len(),
            1,
            "the record must be on disk under its name: {pending:?}"
        );
        // Renamed away (a second node's recovery setting it aside): the same.
        log.clear("u1").expect("clear");
        std::fs::rename(&path, tmp.path().join("moved")).expect("rename");
        log.begin(&record("u1")).expect("begin after rename");
        assert_eq!(log.pending().expect("pending").pending.len(), 1);
    }

    #[test]
    fn a_write_error_names_the_record_once() {
        let tmp = tempfile::tempdir().expect("tmp");
        let mut log = IntentLog::open(tmp.path()).expect("open");
        // The record's name is taken by a directory: opening it for writing fails.
        std::fs::create_dir(tmp.path().join("u1.intent")).expect("mkdir");
        let e = log
            .begin(&record("u1"))
            .expect_err("a directory is no record")
            .to_string();
        assert_eq!(e.matches("write intent record").count(), 1, "{e}");
        assert!(e.contains("u1.intent"), "{e}");
    }
}
