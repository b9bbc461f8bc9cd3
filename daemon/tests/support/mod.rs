//! Helpers for the kernel tests: the probes' gate, records for the kernel support table, and
//! (from the test kit) a throwaway cgroup per test.
#![allow(dead_code, clippy::unwrap_used)]

use std::{io::Write, path::Path, sync::Mutex};

/// Serialises the kernel tests of one binary: they measure timing and share the machine.
pub static KERNEL: Mutex<()> = Mutex::new(());

pub use headroom_testkit::scratch::{TestCgroup, spawn_in, stop};

/// headroomd's probe object, as `daemon/build.rs` embeds it.
pub const PROBE_OBJECT: &[u8] = headroomd::probes::PROBE_OBJECT;

/// Returns `Some(reason)` when the probes cannot load here (not root, no BTF, not built),
/// through the project's one privileged-test gate (a failure where they must run).
pub fn skip_reason(test: &str) -> Option<String> {
    let reason = headroom_testkit::gate::no_probes(PROBE_OBJECT);
    if headroom_testkit::gate::privileged(test, reason.clone()) {
        None
    } else {
        reason
    }
}

/// Prints a record line for the kernel support table (`cargo xtask test` collects them from
/// the guest's console, and on the host from `$HEADROOM_FIGURES`, since libtest captures
/// the output of passing tests).
pub fn record(line: &str) {
    eprintln!("{line}");
    if let Some(path) = std::env::var_os("HEADROOM_FIGURES") {
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut file| writeln!(file, "{line}"));
        if let Err(e) = written {
            eprintln!("cannot append to {}: {e}", Path::new(&path).display());
        }
    }
}

/// One probe-versus-kernel comparison. `what` is free text and comes last on the line.
pub fn figure(
    test: &str,
    what: &str,
    probe: impl std::fmt::Display,
    kernel: impl std::fmt::Display,
    tolerance: &str,
) {
    let word = |v: String| v.replace(' ', "_");
    record(&format!(
        "headroom-figure test={test} probe={} kernel={} tolerance={} what={what}",
        word(probe.to_string()),
        word(kernel.to_string()),
        word(tolerance.to_owned())
    ));
}

/// The cgroup layout as the kernel support table names it.
pub fn cgroup_layout() -> &'static str {
    let v2 = |path: &str| {
        nix::sys::statfs::statfs(path)
            .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::CGROUP2_SUPER_MAGIC)
    };
    if v2("/sys/fs/cgroup") {
        "v2"
    } else if v2("/sys/fs/cgroup/unified") {
        "v1-hybrid"
    } else {
        "v1"
    }
}

/// Marks `test` as passed: call after its last assertion.
pub fn passed(test: &str) {
    record(&format!("headroom-passed test={test}"));
}

/// `uname -r`.
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into())
}

/// Whether `a` is within `tolerance` (a fraction) of `b`.
pub fn within(actual: f64, expected: f64, tolerance: f64) -> bool {
    (actual - expected).abs() <= expected * tolerance
}
