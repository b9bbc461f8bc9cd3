//! The host's cgroup setup, detected under an injected mount root (normally `/sys/fs/cgroup`):
//! unified (v2), hybrid (v1 controllers plus a controller-less cgroup2 at `unified/`, as on
//! this project's machines) or legacy (v1 only), and the hierarchies that hold the cpu,
//! cpuacct and memory controllers.
use std::path::{Path, PathBuf};

use headroom_common::UNIFIED_HIERARCHY_ID;

use crate::{CgroupError, CgroupVersion};

/// Where cgroups are mounted unless configured otherwise.
pub const DEFAULT_MOUNT: &str = "/sys/fs/cgroup";

/// How the host mounts cgroups (youki's terms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupSetup {
    /// The mount root is cgroup2: controllers live there.
    Unified,
    /// tmpfs with v1 controller hierarchies plus a controller-less cgroup2 at `unified/`.
    Hybrid,
    /// tmpfs with v1 controller hierarchies only.
    Legacy,
}

impl CgroupSetup {
    /// Where the cpu and memory controllers are: v2 only on a unified host.
    pub const fn controller_version(self) -> CgroupVersion {
        match self {
            Self::Unified => CgroupVersion::V2,
            Self::Hybrid | Self::Legacy => CgroupVersion::V1,
        }
    }
}

/// Detects the setup of the cgroup mount at `mount_root` (normally `/sys/fs/cgroup`) by `statfs`.
pub fn detect_setup(mount_root: &Path) -> Result<CgroupSetup, CgroupError> {
    use nix::sys::statfs::{CGROUP2_SUPER_MAGIC, statfs};
    let fs = statfs(mount_root).map_err(|source| CgroupError::Statfs {
        path: mount_root.into(),
        source,
    })?;
    if fs.filesystem_type() == CGROUP2_SUPER_MAGIC {
        return Ok(CgroupSetup::Unified);
    }
    let unified = mount_root.join("unified");
    match statfs(&unified) {
        Ok(u) if u.filesystem_type() == CGROUP2_SUPER_MAGIC => Ok(CgroupSetup::Hybrid),
        _ => Ok(CgroupSetup::Legacy),
    }
}

/// Whether `dir` is on a cgroup (v1) or cgroup2 file system, not a test tree on tmpfs or ext4.
pub fn is_cgroupfs(dir: &Path) -> bool {
    use nix::sys::statfs::{CGROUP_SUPER_MAGIC, CGROUP2_SUPER_MAGIC, statfs};
    statfs(dir).is_ok_and(|fs| {
        fs.filesystem_type() == CGROUP_SUPER_MAGIC || fs.filesystem_type() == CGROUP2_SUPER_MAGIC
    })
}

/// Why the cgroup layout could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// A file under /proc or /sys could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The kernel's reason.
        source: std::io::Error,
    },
    /// A controller the probes need has no mounted hierarchy.
    #[error("no cgroup v1 hierarchy is mounted for the `{0}` controller and /sys/fs/cgroup is not cgroup2")]
    ControllerNotMounted(&'static str),
    /// The mount root could not be inspected.
    #[error(transparent)]
    Setup(#[from] CgroupError),
}

/// One cgroup hierarchy: its id (as the probes key it) and where it is mounted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hierarchy {
    /// `cgroup_root.hierarchy_id`; [`UNIFIED_HIERARCHY_ID`] for cgroup2.
    pub id: u32,
    /// Mount point.
    pub mount: PathBuf,
}

/// The cgroup layout the probes and the index need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupHost {
    /// The version of the cpu and memory controllers (how the probes attribute tasks).
    pub version: CgroupVersion,
    /// Hierarchy holding the cpu controller.
    pub cpu: Hierarchy,
    /// Hierarchy holding the memory controller.
    pub memory: Hierarchy,
    /// v1 only: where the cpuacct controller is mounted (CPU usage lives there, at the same
    /// relative path as in the cpu hierarchy); the cpu mount itself when they are co-mounted.
    pub cpuacct: Option<PathBuf>,
}

impl CgroupHost {
    /// Detects the layout of the cgroup mount at `mount_root` (normally `/sys/fs/cgroup`); on
    /// v1 the hierarchies come from this process's `/proc/cgroups` and mountinfo.
    pub fn detect(mount_root: &Path) -> Result<Self, HostError> {
        if detect_setup(mount_root)? == CgroupSetup::Unified {
            let unified = Hierarchy {
                id: UNIFIED_HIERARCHY_ID,
                mount: mount_root.to_path_buf(),
            };
            return Ok(Self {
                version: CgroupVersion::V2,
                cpu: unified.clone(),
                memory: unified,
                cpuacct: None,
            });
        }
        let proc_cgroups = read("/proc/cgroups")?;
        let mountinfo = read("/proc/self/mountinfo")?;
        Self::from_v1_tables(&proc_cgroups, &mountinfo)
    }

    /// Builds the v1 layout from `/proc/cgroups` and `/proc/self/mountinfo` text.
    pub fn from_v1_tables(proc_cgroups: &str, mountinfo: &str) -> Result<Self, HostError> {
        let ids = parse_proc_cgroups(proc_cgroups);
        let mounts = parse_cgroup_mounts(mountinfo);
        let find = |controller: &'static str| -> Result<Hierarchy, HostError> {
            let id = ids
                .iter()
                .find(|(name, id)| name == controller && *id != 0)
                .map(|(_, id)| *id)
                .ok_or(HostError::ControllerNotMounted(controller))?;
            let mount = mounts
                .iter()
                .find(|(_, options)| options.iter().any(|o| o == controller))
                .map(|(mount, _)| mount.clone())
                .ok_or(HostError::ControllerNotMounted(controller))?;
            Ok(Hierarchy { id, mount })
        };
        let cpuacct = mounts
            .iter()
            .find(|(_, options)| options.iter().any(|o| o == "cpuacct"))
            .map(|(mount, _)| mount.clone());
        Ok(Self {
            version: CgroupVersion::V1,
            cpu: find("cpu")?,
            memory: find("memory")?,
            cpuacct,
        })
    }

    /// The distinct hierarchies (one on v2, usually two on v1).
    pub fn hierarchies(&self) -> Vec<&Hierarchy> {
        if self.cpu == self.memory {
            vec![&self.cpu]
        } else {
            vec![&self.cpu, &self.memory]
        }
    }
}

fn read(path: &str) -> Result<String, HostError> {
    std::fs::read_to_string(path).map_err(|source| HostError::Read {
        path: path.into(),
        source,
    })
}

/// `(controller, hierarchy id)` rows of `/proc/cgroups` (header and malformed lines skipped).
pub fn parse_proc_cgroups(text: &str) -> Vec<(String, u32)> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let name = fields.next()?;
            let id = fields.next()?.parse().ok()?;
            Some((name.to_string(), id))
        })
        .collect()
}

/// `(mount point, super options)` of every cgroup v1 mount in a mountinfo table.
pub fn parse_cgroup_mounts(mountinfo: &str) -> Vec<(PathBuf, Vec<String>)> {
    mountinfo
        .lines()
        .filter_map(|line| {
            // "36 25 0:31 / /sys/fs/cgroup/cpu rw,relatime shared:13 - cgroup cgroup rw,cpu"
            let (left, right) = line.split_once(" - ")?;
            let mut right = right.split_whitespace();
            if right.next()? != "cgroup" {
                return None;
            }
            let super_options = right.nth(1)?;
            let mount = left.split_whitespace().nth(4)?;
            Some((
                PathBuf::from(unescape_mount(mount)),
                super_options.split(',').map(str::to_string).collect(),
            ))
        })
        .collect()
}

/// mountinfo escapes space, tab, newline and backslash as octal `\NNN`.
fn unescape_mount(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = (bytes[i] == b'\\' && i + 4 <= bytes.len())
            .then(|| std::str::from_utf8(&bytes[i + 1..i + 4]).ok())
            .flatten()
            .and_then(|digits| u8::from_str_radix(digits, 8).ok());
        if let Some(code) = octal {
            out.push(code);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROC_CGROUPS: &str = "#subsys_name\thierarchy\tnum_cgroups\tenabled\n\
        cpuset\t3\t1\t1\ncpu\t1\t1\t1\ncpuacct\t2\t1\t1\nmemory\t4\t45\t1\nnet_cls\t0\t1\t1\n";
    const MOUNTINFO: &str = "\
25 1 0:23 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
26 25 0:24 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
27 25 0:25 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n\
28 25 0:26 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
29 25 0:27 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

    #[test]
    fn hybrid_layout_from_tables() {
        let host = CgroupHost::from_v1_tables(PROC_CGROUPS, MOUNTINFO).expect("layout");
        assert_eq!(host.version, CgroupVersion::V1);
        assert_eq!(
            host.cpu,
            Hierarchy {
                id: 1,
                mount: "/sys/fs/cgroup/cpu".into()
            }
        );
        assert_eq!(
            host.memory,
            Hierarchy {
                id: 4,
                mount: "/sys/fs/cgroup/memory".into()
            }
        );
        assert_eq!(host.hierarchies().len(), 2);
        assert_eq!(host.cpuacct, Some(PathBuf::from("/sys/fs/cgroup/cpuacct")));
    }

    #[test]
    fn co_mounted_cpu_cpuacct_is_found_by_option_not_by_path() {
        let mountinfo = "26 25 0:24 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n\
            28 25 0:26 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
        let host = CgroupHost::from_v1_tables(PROC_CGROUPS, mountinfo).expect("layout");
        assert_eq!(host.cpu.mount, PathBuf::from("/sys/fs/cgroup/cpu,cpuacct"));
        assert_eq!(host.cpuacct, Some(host.cpu.mount.clone()));
    }

    #[test]
    fn missing_controller_is_a_clear_error() {
        let err = CgroupHost::from_v1_tables("memory\t4\t1\t1\n", MOUNTINFO).expect_err("no cpu");
        assert_eq!(
            err.to_string(),
            "no cgroup v1 hierarchy is mounted for the `cpu` controller and /sys/fs/cgroup is not cgroup2"
        );
    }

    #[test]
    fn detects_this_host_or_tmp() {
        // A tmpfs/ext4 directory without `unified/` is "legacy" (no cgroup2 anywhere).
        let tmp = tempfile::tempdir().expect("tempdir");
        assert_eq!(detect_setup(tmp.path()).expect("statfs"), CgroupSetup::Legacy);
        assert!(detect_setup(Path::new("/nonexistent-headroom")).is_err());
    }

    #[test]
    fn escaped_mount_points() {
        let mounts = parse_cgroup_mounts("1 2 0:1 / /a\\040b rw - cgroup cgroup rw,cpu\n");
        assert_eq!(mounts[0].0, PathBuf::from("/a b"));
    }

    #[test]
    fn detect_on_this_machine() {
        let host = CgroupHost::detect(Path::new("/sys/fs/cgroup")).expect("this machine has cgroups");
        assert!(host.cpu.mount.exists());
        assert!(
            host.memory.mount.join("memory.limit_in_bytes").exists() || host.version == CgroupVersion::V2
        );
    }
}
