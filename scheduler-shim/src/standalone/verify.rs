//! The kubelet's "allocated == actual" check after a resize, done on the cgroup files themselves:
//! every value the resize wrote is read back from the kernel and compared.

use headroom_actuator::convert::pod_values;
use headroom_actuator::values::{CgroupValues, Knob, MemoryMax, Setting};
use headroom_actuator::{ConversionConfig, KubeResources, Roots};
use headroom_cgroupfs::{Cgroup, CgroupDirs};

/// Memory limits are rounded down to the page size by the actuator and the kernel.
const PAGE_SLACK: u64 = 64 * 1024;

fn same(want: Setting, got: Setting) -> bool {
    match (want, got) {
        (Setting::MemoryMax(MemoryMax::Bytes(w)), Setting::MemoryMax(MemoryMax::Bytes(g))) => {
            w.abs_diff(g) < PAGE_SLACK
        }
        _ => want == got,
    }
}

fn check(dirs: &CgroupDirs, want: &CgroupValues, what: &str) -> Result<(), String> {
    let mut cg = dirs.open();
    for knob in Knob::ALL {
        let Some(w) = want.get(knob) else { continue };
        let got = cg.read(knob).map_err(|e| format!("{what}: {e}"))?;
        if !same(w, got) {
            return Err(format!(
                "{what}: {} is {got:?}, want {w:?}",
                cg.file(knob).display()
            ));
        }
    }
    Ok(())
}

/// Reads back the Pod's and its containers' cgroup values and compares them with `containers`.
pub fn cgroups_match(roots: &Roots, uid: &str, containers: &[(String, KubeResources)]) -> Result<(), String> {
    let want = pod_values(containers, None, roots.version(), &ConversionConfig::default());
    let pod = roots.pod_dirs(uid).map_err(|e| e.to_string())?;
    check(&pod, &want.pod, "pod cgroup")?;
    for (name, values) in &want.containers {
        let dirs = roots.container_dirs(uid, name).map_err(|e| e.to_string())?;
        check(&dirs, values, &format!("container {name}"))?;
    }
    Ok(())
}

/// The CPU limit file of a container and what it holds (`cpu.cfs_quota_us` on v1, `cpu.max` on
/// v2), for people and tests.
pub fn cpu_limit_file(roots: &Roots, uid: &str, container: &str) -> Option<(std::path::PathBuf, String)> {
    let dirs = roots.container_dirs(uid, container).ok()?;
    let path = match &dirs {
        CgroupDirs::V1 { cpu, .. } => cpu.join("cpu.cfs_quota_us"),
        CgroupDirs::V2 { dir } => dir.join("cpu.max"),
    };
    let text = std::fs::read_to_string(&path).ok()?;
    Some((path, text.trim().to_string()))
}
