//! The reservation ledger on disk, so that a restarted headroomd still holds the room it promised
//! to in-flight resizes (their victims may already be gone, and that room must not go to anyone
//! else). One small JSON file, replaced whole (write, fsync, rename), with each expiry on the
//! wall clock: `Instant`s do not survive a process. It lives in the intent directory, whose flock
//! makes this daemon its only writer, under a name the intent scan ignores.

use std::{
    io::Write as _,
    path::{Path, PathBuf},
    time::{Duration, Instant, SystemTime},
};

use headroom_node_model::{Reservation, ReservationLedger, Resources};
use serde::{Deserialize, Serialize};

/// The file's name in the intent directory.
pub const RESERVATIONS_FILE: &str = "reservations.json";
/// Larger than any honest ledger (thousands of reservations), small enough to read at once.
const MAX_FILE_BYTES: u64 = 4 << 20;
const VERSION: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum ReservationsFileError {
    #[error("write {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: {reason}")]
    Invalid { path: PathBuf, reason: String },
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct OnDisk {
    version: u32,
    reservations: Vec<Entry>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    id: String,
    pod: String,
    amount: Resources,
    /// Milliseconds since the Unix epoch.
    expires_at_unix_ms: u64,
}

/// What a load found: the reservations taken back, and those it dropped (expired while the
/// daemon was down, or refused by the ledger), each with why.
#[derive(Debug, Default)]
pub struct Restored {
    pub kept: usize,
    pub dropped: Vec<(String, String)>,
}

/// The ledger's file.
#[derive(Debug, Clone)]
pub struct ReservationsFile {
    path: PathBuf,
}

impl ReservationsFile {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Replaces the file with `ledger`'s reservations; `wall` maps their expiries to the wall
    /// clock. An empty ledger removes the file. Either the old file or the new one is there
    /// afterwards, never a torn one.
    pub fn save(
        &self,
        ledger: &ReservationLedger,
        wall: impl Fn(Instant) -> SystemTime,
    ) -> Result<(), ReservationsFileError> {
        let write_error = |source| ReservationsFileError::Write {
            path: self.path.clone(),
            source,
        };
        if ledger.is_empty() {
            return match std::fs::remove_file(&self.path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(write_error(e)),
                _ => Ok(()),
            };
        }
        let on_disk = OnDisk {
            version: VERSION,
            reservations: ledger
                .iter()
                .map(|r| Entry {
                    id: r.id.clone(),
                    pod: r.pod.clone(),
                    amount: r.amount,
                    expires_at_unix_ms: unix_ms(wall(r.expires_at)),
                })
                .collect(),
        };
        let bytes = serde_json::to_vec(&on_disk).map_err(|e| write_error(std::io::Error::other(e)))?;
        let tmp = self.path.with_extension("json.tmp");
        let written = (|| {
            let mut file = std::fs::File::create(&tmp)?;
            file.write_all(&bytes)?;
            file.sync_all()?;
            std::fs::rename(&tmp, &self.path)
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(write_error(e));
        }
        Ok(())
    }

    /// Takes the file's live reservations into `ledger`, at `now` (`now_wall` on the wall
    /// clock). No file is an empty ledger; an unreadable or malformed one is an error and
    /// nothing of it is taken.
    pub fn load(
        &self,
        ledger: &mut ReservationLedger,
        now: Instant,
        now_wall: SystemTime,
    ) -> Result<Restored, ReservationsFileError> {
        let read_error = |source| ReservationsFileError::Read {
            path: self.path.clone(),
            source,
        };
        let invalid = |reason: String| ReservationsFileError::Invalid {
            path: self.path.clone(),
            reason,
        };
        let meta = match std::fs::symlink_metadata(&self.path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Restored::default()),
            Err(e) => return Err(read_error(e)),
            Ok(m) => m,
        };
        if !meta.file_type().is_file() {
            return Err(invalid("not a regular file".into()));
        }
        if meta.len() > MAX_FILE_BYTES {
            return Err(invalid(format!(
                "{} bytes, more than {MAX_FILE_BYTES}",
                meta.len()
            )));
        }
        let bytes = std::fs::read(&self.path).map_err(read_error)?;
        let on_disk: OnDisk = serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;
        if on_disk.version != VERSION {
            return Err(invalid(format!(
                "version {}, this headroomd reads {VERSION}",
                on_disk.version
            )));
        }
        let now_ms = unix_ms(now_wall);
        let mut restored = Restored::default();
        for entry in on_disk.reservations {
            let left = Duration::from_millis(entry.expires_at_unix_ms.saturating_sub(now_ms));
            if left.is_zero() {
                restored
                    .dropped
                    .push((entry.id, "expired while headroomd was down".into()));
                continue;
            }
            let reservation = Reservation {
                id: entry.id,
                pod: entry.pod,
                amount: entry.amount,
                expires_at: now + left,
            };
            let id = reservation.id.clone();
            match ledger.restore(reservation, now) {
                Ok(()) => restored.kept += 1,
                Err(e) => restored.dropped.push((id, e.to_string())),
            }
        }
        Ok(restored)
    }

    /// Moves a file that could not be loaded aside (`<name>.bad`), so the next save does not
    /// overwrite what an operator may want to read.
    pub fn set_aside(&self) -> std::io::Result<PathBuf> {
        let aside = self.path.with_extension("json.bad");
        std::fs::rename(&self.path, &aside)?;
        Ok(aside)
    }
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn ledger_with(entries: &[(&str, i64, Duration)], now: Instant) -> ReservationLedger {
        let mut ledger = ReservationLedger::new();
        for (id, cpu, ttl) in entries {
            let reserved = ledger.reserve(
                *id,
                "ns/p",
                Resources::new(*cpu, 1 << 20),
                now + *ttl,
                now,
                Resources::new(100_000, 1 << 40),
            );
            assert!(reserved.is_ok(), "{reserved:?}");
        }
        ledger
    }

    #[test]
    fn a_saved_ledger_comes_back_with_its_time_left_and_without_what_expired_meanwhile() {
        let dir = tempfile::tempdir().unwrap();
        let file = ReservationsFile::new(dir.path().join(RESERVATIONS_FILE));
        let (now, wall) = (Instant::now(), SystemTime::now());
        let to_wall = |i: Instant| wall + i.duration_since(now);
        let ledger = ledger_with(
            &[
                ("long", 1500, Duration::from_secs(60)),
                ("short", 700, Duration::from_secs(2)),
            ],
            now,
        );
        file.save(&ledger, to_wall).unwrap();

        // "Restarted" ten seconds later: the short one expired while down.
        let (later, later_wall) = (now + Duration::from_secs(10), wall + Duration::from_secs(10));
        let mut back = ReservationLedger::new();
        let restored = file.load(&mut back, later, later_wall).unwrap();
        assert_eq!(restored.kept, 1);
        assert_eq!(restored.dropped.len(), 1, "{:?}", restored.dropped);
        assert_eq!(restored.dropped[0].0, "short");
        let long = back.get("long").unwrap();
        assert_eq!(long.amount, Resources::new(1500, 1 << 20));
        assert_eq!(long.pod, "ns/p");
        let left = long.expires_at.duration_since(later);
        assert!(
            left > Duration::from_secs(49) && left <= Duration::from_secs(50),
            "{left:?}"
        );

        // An empty ledger leaves no file; a missing file is an empty ledger.
        file.save(&ReservationLedger::new(), to_wall).unwrap();
        assert!(!file.path().exists());
        let restored = file
            .load(&mut ReservationLedger::new(), later, later_wall)
            .unwrap();
        assert_eq!(restored.kept, 0);
    }

    #[test]
    fn a_malformed_file_is_an_error_that_takes_nothing_and_can_be_set_aside() {
        let dir = tempfile::tempdir().unwrap();
        let file = ReservationsFile::new(dir.path().join(RESERVATIONS_FILE));
        let (now, wall) = (Instant::now(), SystemTime::now());
        let far = unix_ms(wall) + 60_000;
        let good = format!(
            r#"{{"id":"a","pod":"ns/p","amount":{{"cpu_millis":1,"memory_bytes":0}},"expires_at_unix_ms":{far}}}"#
        );
        for (text, expect) in [
            (format!(r#"{{"version":1,"reservations":[{good},"#), "EOF"),
            (format!(r#"{{"version":2,"reservations":[{good}]}}"#), "version 2"),
            (
                format!(r#"{{"version":1,"reservations":[{good}],"extra":1}}"#),
                "unknown field",
            ),
        ] {
            std::fs::write(file.path(), &text).unwrap();
            let mut ledger = ReservationLedger::new();
            let e = file.load(&mut ledger, now, wall).unwrap_err().to_string();
            assert!(e.contains(expect) && e.contains(RESERVATIONS_FILE), "{text}: {e}");
            assert!(ledger.is_empty(), "{text}: half a file was taken");
        }
        let aside = file.set_aside().unwrap();
        assert!(aside.exists() && !file.path().exists());

        // Not a regular file: refused without reading it.
        std::fs::create_dir(file.path()).unwrap();
        let e = file
            .load(&mut ReservationLedger::new(), now, wall)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a regular file"), "{e}");
    }

    #[test]
    fn a_save_that_cannot_write_leaves_the_previous_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        let file = ReservationsFile::new(dir.path().join(RESERVATIONS_FILE));
        let (now, wall) = (Instant::now(), SystemTime::now());
        let to_wall = |i: Instant| wall + i.duration_since(now);
        file.save(&ledger_with(&[("a", 1, Duration::from_secs(60))], now), to_wall)
            .unwrap();
        let before = std::fs::read(file.path()).unwrap();
        // The temporary file's name is taken by a directory: the write fails before the rename.
        std::fs::create_dir(file.path().with_extension("json.tmp")).unwrap();
        let e = file
            .save(&ledger_with(&[("b", 2, Duration::from_secs(60))], now), to_wall)
            .unwrap_err();
        assert!(e.to_string().starts_with("write "), "{e}");
        assert_eq!(std::fs::read(file.path()).unwrap(), before);
    }
}
