//! `StatFiles` on the host's real cgroupfs (v1 or v2, whichever this is): a kept-open file read
//! again from offset 0 shows the kernel's value now, not the text of its first read (cgroupfs
//! files are seq_files, and a `pread` at 0 regenerates them); a cgroup whose files are held open
//! can still be removed, and reading it afterwards is "absent", not an error or a panic. Runs on
//! this host (v1 hybrid) and in `cargo xtask vm-test`'s pure v2 guest.
#![allow(clippy::unwrap_used)]

use std::{
    path::Path,
    time::{Duration, Instant},
};

use headroom_cgroupfs::{CgroupHost, CgroupVersion, StatFiles};
use headroom_testkit::{
    gate,
    scratch::{TestCgroup, spawn_in, stop},
};

const MOUNT: &str = "/sys/fs/cgroup";
const MIB: u64 = 1 << 20;

fn host(test: &str) -> Option<CgroupHost> {
    let detected = CgroupHost::detect(Path::new(MOUNT));
    let reason =
        gate::not_root().or_else(|| detected.as_ref().err().map(|e| format!("no cgroup setup: {e}")));
    if !gate::privileged(test, reason) {
        return None;
    }
    detected.ok()
}

#[test]
fn a_kept_open_file_reads_the_kernels_value_now_and_its_cgroup_can_still_be_removed() {
    let Some(host) = host("a_kept_open_file_reads_the_kernels_value_now_and_its_cgroup_can_still_be_removed")
    else {
        return;
    };
    let cgroup = TestCgroup::create(&host.memory.mount, "stats-real");
    let v2 = host.version == CgroupVersion::V2;
    let mut files = StatFiles::new(&cgroup.path, host.version, v2, true, None);
    let mut buf = Vec::new();
    let before = files.read(&mut buf).memory.unwrap().usage_bytes;
    let open = files.open_files();
    assert!(open >= 2, "usage and memory.stat are held open ({open})");

    // 16 MiB written to a file from inside the cgroup is charged to it (page cache, or shmem
    // where the temporary directory is tmpfs), and stays charged while nothing reclaims it.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("charged");
    let writer = spawn_in(
        &[&cgroup],
        &format!(
            "head -c {} /dev/zero > '{}' && sleep 60",
            16 * MIB,
            file.display()
        ),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let usage_file = if v2 {
        "memory.current"
    } else {
        "memory.usage_in_bytes"
    };
    while cgroup.read(usage_file).trim().parse::<u64>().unwrap() < before + 16 * MIB {
        assert!(
            Instant::now() < deadline,
            "16 MiB never charged to {}",
            cgroup.path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let after = files.read(&mut buf).memory.unwrap();
    assert!(
        after.usage_bytes >= before + 16 * MIB,
        "the kept-open usage file read {} bytes, {} before the 16 MiB",
        after.usage_bytes,
        before
    );
    assert_eq!(files.open_files(), open, "read through the same descriptors");
    stop(writer);
    std::fs::remove_file(&file).unwrap();

    // Removed with its files still open: rmdir succeeds, and the next read finds nothing.
    let path = cgroup.path.clone();
    drop(cgroup);
    assert!(
        !path.exists(),
        "{} removed while its files were open",
        path.display()
    );
    let gone = files.read(&mut buf);
    assert_eq!(gone.memory, None);
    assert_eq!(gone.cpu, None);
}
