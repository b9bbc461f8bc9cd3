//! The reservation ledger on disk, so that a restarted headroomd still holds the room it promised
//! to in-flight resizes (their victims may already be gone, and that room must not go to anyone
//! else). Each expiry is on the wall clock: `Instant`s do not survive a process. It lives in the
//! intent directory, whose flock makes this daemon its only writer, under a name the intent scan
//! ignores.
//!
//! A reservation is answered only once it is on disk, so the write is on the path of every
//! preemption. The file therefore has a fixed size and two slots, and each save overwrites the
//! older slot in place and `fdatasync`s it: no new inode, no rename and no directory update to
//! flush (a replaced file costs a journal commit; on this project's test disk p50 0.35 against
//! 0.07 ms, p99 4.4 against 0.8 ms; command in docs/reliability.md, entry 14). A save torn by a
//! crash fails its length or checksum and the other slot, the last save that returned, is read
//! instead. Each slot is
//!
//! ```text
//! headroom-ledger 1 <sequence> <json length> <crc32 of the json, hex>\n<json>
//! ```
//!
//! with the highest intact sequence winning. A `reservations.json` left by an earlier headroomd
//! (one JSON file replaced whole) is read when there is no ledger file yet, and removed after
//! the first save.

use std::{
    fs::{File, OpenOptions},
    io::Read as _,
    os::unix::fs::{FileExt as _, OpenOptionsExt as _},
    path::{Path, PathBuf},
    time::{Duration, Instant, SystemTime},
};

use headroom_node_model::{Reservation, ReservationLedger, Resources};
use serde::{Deserialize, Serialize};

/// The file's name in the intent directory.
pub const RESERVATIONS_FILE: &str = "reservations.ledger";
/// An earlier headroomd's file (one JSON document, replaced whole), read once on upgrade.
pub const LEGACY_RESERVATIONS_FILE: &str = "reservations.json";
/// One slot: a header and the ledger's JSON. About 150 bytes a reservation, so some 1,700
/// reservations, far beyond one per Pod of a node (the kubelet's `maxPods` is 110 by default).
pub const SLOT_BYTES: usize = 256 << 10;
const FILE_BYTES: u64 = 2 * SLOT_BYTES as u64;
/// The legacy file's bound: larger than any honest ledger, small enough to read at once.
const MAX_LEGACY_BYTES: u64 = 4 << 20;
const VERSION: u32 = 1;
const MAGIC: &str = "headroom-ledger";

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
#[derive(Debug)]
pub struct ReservationsFile {
    path: PathBuf,
    /// Open for saving, with the sequence of its newest intact slot; opened at the first save.
    open: Option<(File, u64)>,
}

impl ReservationsFile {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            open: None,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn legacy_path(&self) -> PathBuf {
        self.path.with_file_name(LEGACY_RESERVATIONS_FILE)
    }

    /// Writes `ledger`'s reservations over the older slot and flushes it; `wall` maps their
    /// expiries to the wall clock. When this returns `Ok` the ledger survives a crash; when it
    /// fails, the previous save is still what a restart reads.
    pub fn save(
        &mut self,
        ledger: &ReservationLedger,
        wall: impl Fn(Instant) -> SystemTime,
    ) -> Result<(), ReservationsFileError> {
        let write_error = |source| ReservationsFileError::Write {
            path: self.path.clone(),
            source,
        };
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
        let json = serde_json::to_vec(&on_disk).map_err(|e| write_error(std::io::Error::other(e)))?;
        let (file, sequence) = match self.open.take() {
            Some(open) => open,
            None => self.open_for_saving()?,
        };
        let next = sequence + 1;
        let mut slot = format!(
            "{MAGIC} {VERSION} {next} {} {:08x}\n",
            json.len(),
            crc32fast::hash(&json)
        )
        .into_bytes();
        slot.extend_from_slice(&json);
        let written = if slot.len() > SLOT_BYTES {
            Err(std::io::Error::other(format!(
                "{} reservations take {} bytes, more than a slot's {SLOT_BYTES}",
                ledger.len(),
                slot.len()
            )))
        } else {
            file.write_all_at(&slot, slot_offset(next))
                .and_then(|()| file.sync_data())
        };
        // The file stays open either way; the sequence moves on only with a save that returned.
        self.open = Some((file, if written.is_ok() { next } else { sequence }));
        written.map_err(write_error)?;
        if next == 1 {
            // Upgraded: the new file holds everything the old one did.
            let _ = std::fs::remove_file(self.legacy_path());
        }
        Ok(())
    }

    /// Opens the file, creating it (both slots zeroed, on disk, with its directory entry) if
    /// it is not there, and finds the sequence to continue from.
    fn open_for_saving(&self) -> Result<(File, u64), ReservationsFileError> {
        let write_error = |source| ReservationsFileError::Write {
            path: self.path.clone(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&self.path)
            .map_err(write_error)?;
        let meta = file.metadata().map_err(write_error)?;
        if !meta.file_type().is_file() {
            return Err(ReservationsFileError::Invalid {
                path: self.path.clone(),
                reason: "not a regular file".into(),
            });
        }
        let sequence = if meta.len() == 0 {
            // Zeros written, not a sparse `set_len`: the slots' blocks are allocated now, so a
            // save's `fdatasync` has no allocation to flush.
            file.write_all_at(&vec![0; FILE_BYTES as usize], 0)
                .and_then(|()| file.sync_all())
                .and_then(|()| sync_parent(&self.path))
                .map_err(write_error)?;
            0
        } else {
            let bytes =
                read_bounded(&mut file, FILE_BYTES).map_err(|source| ReservationsFileError::Read {
                    path: self.path.clone(),
                    source,
                })?;
            newest_slot(&bytes)
                .map_err(|reason| ReservationsFileError::Invalid {
                    path: self.path.clone(),
                    reason,
                })?
                .map_or(0, |(sequence, _)| sequence)
        };
        Ok((file, sequence))
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
        let (path, bound) = match std::fs::symlink_metadata(&self.path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (self.legacy_path(), MAX_LEGACY_BYTES),
            _ => (self.path.clone(), FILE_BYTES),
        };
        let read_error = |source| ReservationsFileError::Read {
            path: path.clone(),
            source,
        };
        let invalid = |reason: String| ReservationsFileError::Invalid {
            path: path.clone(),
            reason,
        };
        let mut file = match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(&path)
        {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Restored::default()),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(invalid("a symbolic link, not a regular file".into()));
            }
            Err(e) => return Err(read_error(e)),
            Ok(f) => f,
        };
        let meta = file.metadata().map_err(read_error)?;
        if !meta.file_type().is_file() {
            return Err(invalid("not a regular file".into()));
        }
        if meta.len() > bound {
            return Err(invalid(format!("{} bytes, more than {bound}", meta.len())));
        }
        let bytes = read_bounded(&mut file, bound).map_err(read_error)?;
        let on_disk: OnDisk = if path == self.path {
            match newest_slot(&bytes).map_err(invalid)? {
                None => return Ok(Restored::default()),
                Some((_, json)) => serde_json::from_slice(json).map_err(|e| invalid(e.to_string()))?,
            }
        } else {
            serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?
        };
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
    pub fn set_aside(&mut self) -> std::io::Result<PathBuf> {
        self.open = None;
        let path = if self.path.exists() {
            self.path.clone()
        } else {
            self.legacy_path()
        };
        let mut aside = path.clone().into_os_string();
        aside.push(".bad");
        let aside = PathBuf::from(aside);
        std::fs::rename(&path, &aside)?;
        Ok(aside)
    }
}

fn slot_offset(sequence: u64) -> u64 {
    (sequence % 2) * SLOT_BYTES as u64
}

/// The newest intact slot of the file's bytes: its sequence and JSON. `Ok(None)` for a file
/// with no slot written yet (all zeros: created, then nothing saved); an error when neither
/// slot is intact and something was written.
fn newest_slot(bytes: &[u8]) -> Result<Option<(u64, &[u8])>, String> {
    let mut newest: Option<(u64, &[u8])> = None;
    let mut problems = Vec::new();
    for (index, slot) in bytes.chunks(SLOT_BYTES).take(2).enumerate() {
        match decode_slot(slot) {
            Ok(None) => {}
            Ok(Some((sequence, json))) => {
                if slot_offset(sequence) != (index * SLOT_BYTES) as u64 {
                    problems.push(format!(
                        "slot {index}: sequence {sequence} belongs in the other slot"
                    ));
                } else if newest.is_none_or(|(n, _)| sequence > n) {
                    newest = Some((sequence, json));
                }
            }
            Err(why) => problems.push(format!("slot {index}: {why}")),
        }
    }
    match newest {
        Some(found) => Ok(Some(found)),
        None if problems.is_empty() => Ok(None),
        None => Err(format!("no intact slot ({})", problems.join("; "))),
    }
}

/// One slot: `Ok(None)` if never written (starts with a zero byte), its sequence and JSON if
/// intact, why not otherwise (a torn save, or not headroom's).
fn decode_slot(slot: &[u8]) -> Result<Option<(u64, &[u8])>, String> {
    if slot.first().is_none_or(|&b| b == 0) {
        return Ok(None);
    }
    let newline = slot
        .iter()
        .take(128)
        .position(|&b| b == b'\n')
        .ok_or("no header line")?;
    let header = String::from_utf8_lossy(&slot[..newline]);
    let words: Vec<&str> = header.split(' ').collect();
    let [MAGIC, version, sequence, len, crc] = words[..] else {
        return Err(format!("not a ledger header: {header:?}"));
    };
    if version != "1" {
        return Err(format!("unknown ledger format {version:?}"));
    }
    let (Ok(sequence), Ok(len), Ok(crc)) = (
        sequence.parse::<u64>(),
        len.parse::<usize>(),
        u32::from_str_radix(crc, 16),
    ) else {
        return Err(format!("bad sequence, length or checksum in {header:?}"));
    };
    let json = slot
        .get(newline + 1..)
        .and_then(|rest| rest.get(..len))
        .ok_or_else(|| format!("{len} bytes of JSON announced, the slot is shorter"))?;
    if crc32fast::hash(json) != crc {
        return Err("checksum mismatch".into());
    }
    Ok(Some((sequence, json)))
}

/// At most `bound` bytes of `file` (a file that grew past its checked size is cut there).
fn read_bounded(file: &mut File, bound: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    file.take(bound).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Flushes `path`'s directory entry (a new file's name is metadata of its directory).
fn sync_parent(path: &Path) -> std::io::Result<()> {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    File::open(parent.unwrap_or(Path::new("."))).and_then(|d| d.sync_all())
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

    fn reserve_cpu(ledger: &mut ReservationLedger, id: &str, cpu: i64, now: Instant) {
        let reserved = ledger.reserve(
            id,
            "ns/p",
            Resources::new(cpu, 1 << 20),
            now + Duration::from_secs(60),
            now,
            Resources::new(100_000, 1 << 40),
        );
        assert!(reserved.is_ok(), "{reserved:?}");
    }

    fn ids(file: &ReservationsFile, now: Instant, wall: SystemTime) -> Vec<String> {
        let mut back = ReservationLedger::new();
        file.load(&mut back, now, wall).unwrap();
        back.iter().map(|r| r.id.clone()).collect()
    }

    /// A slot as headroomd writes it, with `json` as its ledger.
    fn slot(sequence: u64, json: &str) -> Vec<u8> {
        let mut bytes = format!(
            "{MAGIC} 1 {sequence} {} {:08x}\n",
            json.len(),
            crc32fast::hash(json.as_bytes())
        )
        .into_bytes();
        bytes.extend_from_slice(json.as_bytes());
        bytes
    }

    #[test]
    fn a_saved_ledger_comes_back_with_its_time_left_and_without_what_expired_meanwhile() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = ReservationsFile::new(dir.path().join(RESERVATIONS_FILE));
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
        assert_eq!(std::fs::metadata(file.path()).unwrap().len(), FILE_BYTES);

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

        // An empty ledger is saved as such; a missing file is an empty ledger.
        file.save(&ReservationLedger::new(), to_wall).unwrap();
        assert!(ids(&file, later, later_wall).is_empty());
        std::fs::remove_file(file.path()).unwrap();
        let restored = file
            .load(&mut ReservationLedger::new(), later, later_wall)
            .unwrap();
        assert_eq!(restored.kept, 0);
    }

    #[test]
    fn a_save_torn_by_a_crash_leaves_the_one_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = ReservationsFile::new(dir.path().join(RESERVATIONS_FILE));
        let (now, wall) = (Instant::now(), SystemTime::now());
        let to_wall = |i: Instant| wall + i.duration_since(now);
        let mut ledger = ReservationLedger::new();
        reserve_cpu(&mut ledger, "first", 100, now);
        file.save(&ledger, to_wall).unwrap();
        reserve_cpu(&mut ledger, "second", 200, now);
        file.save(&ledger, to_wall).unwrap();
        assert_eq!(ids(&file, now, wall), ["first", "second"]);

        // The second save (sequence 2, the first slot) cut short, as a crash mid-write would.
        let bytes = std::fs::read(file.path()).unwrap();
        let header_end = bytes.iter().position(|&b| b == b'\n').unwrap();
        let torn = std::fs::OpenOptions::new().write(true).open(file.path()).unwrap();
        torn.write_all_at(b"\0\0\0\0", (header_end + 10) as u64).unwrap();
        assert_eq!(ids(&file, now, wall), ["first"]);

        // A successor continues after the newest intact save, over the torn slot.
        let mut successor = ReservationsFile::new(file.path());
        reserve_cpu(&mut ledger, "third", 300, now);
        successor.save(&ledger, to_wall).unwrap();
        assert_eq!(ids(&file, now, wall), ["first", "second", "third"]);
        let sequence = |slot: &[u8]| decode_slot(slot).unwrap().unwrap().0;
        let bytes = std::fs::read(file.path()).unwrap();
        assert_eq!(sequence(&bytes[..SLOT_BYTES]), 2, "the torn slot written again");
        assert_eq!(sequence(&bytes[SLOT_BYTES..]), 1);
    }

    #[test]
    fn a_malformed_file_is_an_error_that_takes_nothing_and_can_be_set_aside() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = ReservationsFile::new(dir.path().join(RESERVATIONS_FILE));
        let (now, wall) = (Instant::now(), SystemTime::now());
        let far = unix_ms(wall) + 60_000;
        let good = format!(
            r#"{{"id":"a","pod":"ns/p","amount":{{"cpu_millis":1,"memory_bytes":0}},"expires_at_unix_ms":{far}}}"#
        );
        // Sequence 2 is the first slot's.
        let mut torn = slot(2, &format!(r#"{{"version":1,"reservations":[{good}]}}"#));
        torn.truncate(torn.len() - 3);
        for (bytes, expect) in [
            (b"{}\n".to_vec(), "not a ledger header"),
            (torn, "slot is shorter"),
            (
                slot(2, &format!(r#"{{"version":2,"reservations":[{good}]}}"#)),
                "version 2",
            ),
            (
                slot(
                    2,
                    &format!(r#"{{"version":1,"reservations":[{good}],"extra":1}}"#),
                ),
                "unknown field",
            ),
            (
                slot(1, r#"{"version":1,"reservations":[]}"#),
                "belongs in the other slot",
            ),
        ] {
            std::fs::write(file.path(), &bytes).unwrap();
            let mut ledger = ReservationLedger::new();
            let e = file.load(&mut ledger, now, wall).unwrap_err().to_string();
            assert!(
                e.contains(expect) && e.contains(RESERVATIONS_FILE),
                "{expect}: {e}"
            );
            assert!(ledger.is_empty(), "{expect}: half a file was taken");
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
        std::fs::remove_dir(file.path()).unwrap();
        std::os::unix::fs::symlink("/dev/zero", file.path()).unwrap();
        let e = file
            .load(&mut ReservationLedger::new(), now, wall)
            .unwrap_err()
            .to_string();
        assert!(e.contains("symbolic link"), "{e}");
    }

    #[test]
    fn an_earlier_headroomds_json_file_is_taken_and_replaced_at_the_first_save() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = ReservationsFile::new(dir.path().join(RESERVATIONS_FILE));
        let (now, wall) = (Instant::now(), SystemTime::now());
        let far = unix_ms(wall) + 60_000;
        let legacy = dir.path().join(LEGACY_RESERVATIONS_FILE);
        std::fs::write(
            &legacy,
            format!(
                r#"{{"version":1,"reservations":[{{"id":"old","pod":"ns/p","amount":{{"cpu_millis":5,"memory_bytes":0}},"expires_at_unix_ms":{far}}}]}}"#
            ),
        )
        .unwrap();
        let mut ledger = ReservationLedger::new();
        assert_eq!(file.load(&mut ledger, now, wall).unwrap().kept, 1);
        file.save(&ledger, |i| wall + i.duration_since(now)).unwrap();
        assert!(
            !legacy.exists(),
            "the old file is gone once the new one holds its reservations"
        );
        assert_eq!(ids(&file, now, wall), ["old"]);
    }

    #[test]
    fn a_save_that_cannot_write_leaves_the_previous_one_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = ReservationsFile::new(dir.path().join(RESERVATIONS_FILE));
        let (now, wall) = (Instant::now(), SystemTime::now());
        let to_wall = |i: Instant| wall + i.duration_since(now);
        let mut ledger = ReservationLedger::new();
        reserve_cpu(&mut ledger, "a", 1, now);
        file.save(&ledger, to_wall).unwrap();
        // More reservations than a slot holds: refused, and the file still reads as before.
        for n in 0..3000 {
            reserve_cpu(&mut ledger, &format!("bulk-{n:04}-{}", "x".repeat(40)), 1, now);
        }
        let e = file.save(&ledger, to_wall).unwrap_err();
        assert!(e.to_string().contains("more than a slot's"), "{e}");
        assert_eq!(ids(&file, now, wall), ["a"]);
    }
}
