//! The files headroomd reads back after a crash, as a crash, a full disk or a hostile local user
//! could leave them: an intent record (`<uid>.intent`) and the reservation ledger
//! (`reservations.ledger`, and the `reservations.json` an earlier headroomd left). Never a panic; a file is taken whole or refused whole.
#![no_main]

use std::{
    path::PathBuf,
    sync::OnceLock,
    time::{Instant, SystemTime},
};

use headroom_actuator::intent::IntentLog;
use headroom_node_model::ReservationLedger;
use headroomd::pipeline::reservations_file::{LEGACY_RESERVATIONS_FILE, RESERVATIONS_FILE, ReservationsFile};
use libfuzzer_sys::fuzz_target;

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &DIR.get_or_init(|| {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("intents");
        std::fs::create_dir(&path).expect("mkdir");
        (tmp, path)
    })
    .1
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let dir = dir();
    if selector % 2 == 0 {
        let record = dir.join("0123-fuzz.intent");
        std::fs::write(&record, rest).expect("write record");
        let log = IntentLog::open(dir).expect("open the intent directory");
        if let Ok(scan) = log.pending() {
            // A record is either in flight (and names its Pod) or set aside, never both.
            assert!(
                scan.pending.len() + scan.unusable.len() <= 1,
                "one file, {scan:?}"
            );
        }
        drop(log);
        let _ = std::fs::remove_file(&record);
    } else {
        let file = ReservationsFile::new(dir.join(RESERVATIONS_FILE));
        // Odd selectors below 128 write the ledger file, the others the earlier JSON file.
        let written = if selector < 128 {
            file.path().to_path_buf()
        } else {
            dir.join(LEGACY_RESERVATIONS_FILE)
        };
        std::fs::write(&written, rest).expect("write ledger");
        let mut ledger = ReservationLedger::new();
        match file.load(&mut ledger, Instant::now(), SystemTime::now()) {
            Ok(restored) => assert_eq!(restored.kept, ledger.len()),
            Err(_) => assert!(ledger.is_empty(), "a refused file left reservations behind"),
        }
        let _ = std::fs::remove_file(&written);
    }
});
