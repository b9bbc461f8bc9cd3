//! The cgroup and /proc parsers, fed arbitrary text: cgroupfs's `cpu.stat`/PSI/flat-keyed
//! parsers, its mountinfo and /proc/cgroups readers and its value parsers reached through its
//! public file interface (the fuzz input is written into a v2 and a v1 cgroup
//! directory on a temporary tree and read back as every knob).
#![no_main]

use std::{path::PathBuf, sync::OnceLock};

use headroom_cgroupfs::values::Knob;
use headroom_cgroupfs::{Cgroup as _, CgroupDirs, CgroupVersion, cpu, memory, pressure, setup};
use libfuzzer_sys::fuzz_target;

struct Trees {
    _tmp: tempfile::TempDir,
    v2: PathBuf,
    v1_cpu: PathBuf,
    v1_memory: PathBuf,
}

fn trees() -> &'static Trees {
    static TREES: OnceLock<Trees> = OnceLock::new();
    TREES.get_or_init(|| {
        let tmp = tempfile::tempdir().expect("tempdir");
        let v2 = tmp.path().join("v2");
        let v1_cpu = tmp.path().join("cpu");
        let v1_memory = tmp.path().join("memory");
        for d in [&v2, &v1_cpu, &v1_memory] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        Trees {
            _tmp: tmp,
            v2,
            v1_cpu,
            v1_memory,
        }
    })
}

const V2_FILES: &[&str] = &[
    "cpu.weight",
    "cpu.max",
    "memory.max",
    "memory.current",
    "cpu.stat",
];
const V1_CPU_FILES: &[&str] = &["cpu.shares", "cpu.cfs_quota_us", "cpu.cfs_period_us", "cpu.stat"];
const V1_MEMORY_FILES: &[&str] = &["memory.limit_in_bytes", "memory.usage_in_bytes"];

fn actuator_reads(data: &[u8]) {
    let t = trees();
    for (dir, names) in [
        (&t.v2, V2_FILES),
        (&t.v1_cpu, V1_CPU_FILES),
        (&t.v1_memory, V1_MEMORY_FILES),
    ] {
        for name in names {
            std::fs::write(dir.join(name), data).expect("write fuzz input");
        }
    }
    for dirs in [
        CgroupDirs::V2 { dir: t.v2.clone() },
        CgroupDirs::V1 {
            cpu: t.v1_cpu.clone(),
            memory: t.v1_memory.clone(),
        },
    ] {
        let mut cg = dirs.open();
        for knob in Knob::ALL {
            let _ = cg.read(knob);
        }
        let _ = cg.memory_usage();
        let _ = cg.cpu_stat();
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    match selector % 8 {
        0 => {
            let _ = cpu::parse_cpu_stat(&text, CgroupVersion::V1);
            let _ = cpu::parse_cpu_stat(&text, CgroupVersion::V2);
        }
        1 => {
            if let Some(psi) = pressure::parse_psi(&text) {
                let _ = psi.some.avg10 + psi.some.avg60 + psi.some.avg300;
            }
        }
        2 => {
            let key = text.split_whitespace().next().unwrap_or("nr_periods");
            let _ = headroom_cgroupfs::flat_keyed(&text, key);
            let _ = memory::working_set(u64::MAX, &text, CgroupVersion::V1);
            let _ = memory::working_set(0, &text, CgroupVersion::V2);
        }
        3 => {
            let _ = setup::parse_cgroup_mounts(&text);
            for line in text.lines() {
                let _ = headroomd::cgroups::parse_pod_path(line);
            }
        }
        4 => {
            let _ = setup::parse_proc_cgroups(&text);
        }
        5 => {
            // Both tables from one input: split at the first NUL.
            let (a, b) = text.split_once('\0').unwrap_or((&text, ""));
            if let Ok(h) = setup::CgroupHost::from_v1_tables(a, b) {
                assert!(!h.hierarchies().is_empty());
            }
        }
        _ => actuator_reads(rest),
    }
});
