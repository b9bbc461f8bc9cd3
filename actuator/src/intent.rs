//! Intent records: before the first write of a resize, the planned writes (old and new values)
//! are written and synced to `<dir>/<pod uid>.intent`; after the resize (or its rollback) the
//! record is emptied. A daemon killed in between finds the record on start ([`IntentLog::pending`])
//! and repairs the cgroups (see `Actuator::recover`).
//!
//! The record only has to outlive the *process*: cgroups do not survive a reboot. Put the
//! directory on tmpfs (`/run/headroom/intents`), where `fdatasync` costs nothing; on a disk it
//! costs a journal commit per resize. One file per Pod is kept open and rewritten in place
//! (`pwrite` + `ftruncate` + `fdatasync`): an empty file means "nothing in flight". A record torn
//! by a crash while it was being written does not parse and is discarded: no cgroup write can
//! have happened before it was complete.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cgroup::CgroupDirs;
use crate::path;
use crate::values::Setting;

pub const INTENT_SUFFIX: &str = ".intent";
const FORMAT: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum IntentError {
    #[error("create intent directory {}: {source}", path.display())]
    Dir { path: PathBuf, source: io::Error },
    #[error("write intent record {}: {source}", path.display())]
    Write { path: PathBuf, source: io::Error },
    #[error("read intent record {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("intent record {} is torn or not an intent record: {reason}", path.display())]
    Corrupt { path: PathBuf, reason: String },
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

    /// The cgroup a write addresses; `None` if the record is inconsistent.
    pub fn cgroup_of(&self, w: &IntentWrite) -> Option<&CgroupDirs> {
        self.cgroups.get(w.cgroup)
    }
}

/// A record found on disk: the Pod uid, and the record or why it cannot be used.
pub type Pending = (String, Result<IntentRecord, IntentError>);

/// The directory of intent records, with one open file per Pod.
#[derive(Debug)]
pub struct IntentLog {
    dir: PathBuf,
    dir_handle: File,
    files: HashMap<String, File>,
    /// Pods whose record file is known to be empty (cleared by us): `begin` needs no truncate.
    empty: std::collections::HashSet<String>,
    /// `fdatasync` each record (default true).
    sync: bool,
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
        Ok(Self {
            dir: dir.to_path_buf(),
            dir_handle,
            files: HashMap::new(),
            empty: Default::default(),
            sync: true,
        })
    }

    /// Skip `fdatasync` (only for benchmarks that want to see its cost separately).
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

    fn file(&mut self, pod_uid: &str) -> Result<&File, IntentError> {
        if !self.files.contains_key(pod_uid) {
            let path = self.path_for(pod_uid)?;
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
            self.dir_handle
                .sync_all()
                .map_err(|source| IntentError::Write { path, source })?;
            self.files.insert(pod_uid.to_owned(), file);
        }
        let path = self.dir.clone();
        self.files.get(pod_uid).ok_or(IntentError::Write {
            path,
            source: io::Error::other("intent file vanished"),
        })
    }

    /// Writes (and syncs) the record; returns once it is durable.
    pub fn begin(&mut self, record: &IntentRecord) -> Result<(), IntentError> {
        let uid = record.pod_uid.as_str();
        let bytes = serde_json::to_vec(record).map_err(|e| IntentError::Write {
            path: self.dir.join(uid),
            source: io::Error::other(e),
        })?;
        let sync = self.sync;
        // After our own `clear` the file is empty, so the record needs no truncation behind it.
        let truncate = !self.empty.remove(uid);
        let file = self.file(uid)?;
        let result = file
            .write_all_at(&bytes, 0)
            .and_then(|()| {
                if truncate {
                    file.set_len(bytes.len() as u64)
                } else {
                    Ok(())
                }
            })
            .and_then(|()| if sync { file.sync_data() } else { Ok(()) });
        result.map_err(|source| IntentError::Write {
            path: self.dir.join(uid),
            source,
        })
    }

    /// Marks the Pod as having nothing in flight (empties its record).
    pub fn clear(&mut self, pod_uid: &str) -> Result<(), IntentError> {
        let sync = self.sync;
        let file = self.file(pod_uid)?;
        let result = file
            .set_len(0)
            .and_then(|()| if sync { file.sync_data() } else { Ok(()) });
        result.map_err(|source| IntentError::Write {
            path: self.dir.join(pod_uid),
            source,
        })?;
        if !self.empty.contains(pod_uid) {
            self.empty.insert(pod_uid.to_owned());
        }
        Ok(())
    }

    /// Removes the Pod's record file (Pod gone, or recovery done).
    pub fn remove(&mut self, pod_uid: &str) -> Result<(), IntentError> {
        let path = self.path_for(pod_uid)?;
        self.files.remove(pod_uid);
        self.empty.remove(pod_uid);
        remove_file(&path)?;
        self.dir_handle
            .sync_all()
            .map_err(|source| IntentError::Remove { path, source })
    }

    /// Every non-empty record in the directory: `(pod uid, record or why it cannot be used)`.
    pub fn pending(&self) -> Result<Vec<Pending>, IntentError> {
        let entries = std::fs::read_dir(&self.dir).map_err(|source| IntentError::Read {
            path: self.dir.clone(),
            source,
        })?;
        let mut out = Vec::new();
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
            let bytes = match std::fs::read(&path) {
                Ok(b) => b,
                Err(source) => {
                    out.push((uid.to_owned(), Err(IntentError::Read { path, source })));
                    continue;
                }
            };
            if bytes.is_empty() {
                continue;
            }
            let parsed = serde_json::from_slice::<IntentRecord>(&bytes)
                .map_err(|e| IntentError::Corrupt {
                    path: path.clone(),
                    reason: e.to_string(),
                })
                .and_then(|r| {
                    if r.format != FORMAT
                        || r.pod_uid != uid
                        || r.writes.iter().any(|w| w.cgroup >= r.cgroups.len())
                    {
                        Err(IntentError::Corrupt {
                            path,
                            reason: format!("format {} for pod {}", r.format, r.pod_uid),
                        })
                    } else {
                        Ok(r)
                    }
                });
            out.push((uid.to_owned(), parsed));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
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
        let pending = log.pending().expect("pending");
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].0, "u1");
        assert_eq!(pending[0].1.as_ref().expect("parses"), &record("u1"));
        log.remove("u1").expect("remove");
        assert!(log.pending().expect("pending").is_empty());
        assert!(log.begin(&record("../evil")).is_err());
    }

    #[test]
    fn torn_record_is_reported_not_trusted() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let log = IntentLog::open(tmp.path()).expect("open");
        let full = serde_json::to_vec(&record("u1")).expect("json");
        std::fs::write(tmp.path().join("u1.intent"), &full[..full.len() / 2]).expect("write");
        let pending = log.pending().expect("pending");
        assert!(matches!(pending[0].1, Err(IntentError::Corrupt { .. })));
    }
}
