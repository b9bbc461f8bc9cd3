//! Where Pod cgroups live, and the standalone Pod cgroup helper.
//!
//! Standalone layout (the scheduler shim and the demo create real Pods with [`PodCgroups`]):
//! - v1: `<mount>/<controller>/headroom/pod<uid>/<container>` in each of the cpu and memory hierarchies;
//! - v2: `<mount>/headroom/pod<uid>/<container>`.
//!
//! The "Pod cgroup roots" ([`Roots`]) default to `<controller root>/headroom` and are injectable;
//! every path below them is built from validated ids ([`crate::path`]).

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::path::{self, PathError};
use crate::plan;
use crate::values::{CgroupValues, Knob, PodValues};
use headroom_cgroupfs::file::{CgFile, NumBuf};
use headroom_cgroupfs::{
    AnyCgroup, Cgroup, CgroupDirs, CgroupError, CgroupSetup, CgroupVersion, detect_setup,
};

pub use headroom_cgroupfs::setup::DEFAULT_MOUNT;
/// Name of the standalone root below each controller root.
pub const STANDALONE_DIR: &str = "headroom";

/// The configured Pod cgroup roots; every write headroom makes is below them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Roots {
    V1 { cpu: PathBuf, memory: PathBuf },
    V2 { dir: PathBuf },
}

impl Roots {
    /// `<mount>/{cpu,memory}/<name>` (v1 controllers) or `<mount>/<name>` (unified).
    pub fn standalone(mount_root: &Path, setup: CgroupSetup, name: &str) -> Self {
        match setup.controller_version() {
            CgroupVersion::V1 => Self::V1 {
                cpu: mount_root.join("cpu").join(name),
                memory: mount_root.join("memory").join(name),
            },
            CgroupVersion::V2 => Self::V2 {
                dir: mount_root.join(name),
            },
        }
    }

    /// Detects `/sys/fs/cgroup` and returns the default standalone roots.
    pub fn detect_standalone() -> Result<Self, CgroupError> {
        let mount = Path::new(DEFAULT_MOUNT);
        Ok(Self::standalone(mount, detect_setup(mount)?, STANDALONE_DIR))
    }

    pub fn version(&self) -> CgroupVersion {
        match self {
            Self::V1 { .. } => CgroupVersion::V1,
            Self::V2 { .. } => CgroupVersion::V2,
        }
    }

    pub fn validate(&self) -> Result<(), PathError> {
        self.dirs().paths().into_iter().try_for_each(path::validate_root)
    }

    /// The roots themselves.
    pub fn dirs(&self) -> CgroupDirs {
        match self {
            Self::V1 { cpu, memory } => CgroupDirs::V1 {
                cpu: cpu.clone(),
                memory: memory.clone(),
            },
            Self::V2 { dir } => CgroupDirs::V2 { dir: dir.clone() },
        }
    }

    fn below(&self, components: &[(&'static str, &str)]) -> Result<CgroupDirs, PathError> {
        Ok(match self {
            Self::V1 { cpu, memory } => CgroupDirs::V1 {
                cpu: path::confined_join(cpu, components)?,
                memory: path::confined_join(memory, components)?,
            },
            Self::V2 { dir } => CgroupDirs::V2 {
                dir: path::confined_join(dir, components)?,
            },
        })
    }

    /// `<root>/pod<uid>`.
    pub fn pod_dirs(&self, pod_uid: &str) -> Result<CgroupDirs, PathError> {
        path::validate_id("pod uid", pod_uid)?;
        self.below(&[("pod uid", &format!("pod{pod_uid}"))])
    }

    /// `<root>/pod<uid>/<container>`.
    pub fn container_dirs(&self, pod_uid: &str, container: &str) -> Result<CgroupDirs, PathError> {
        path::validate_id("pod uid", pod_uid)?;
        self.below(&[("pod uid", &format!("pod{pod_uid}")), ("container", container)])
    }

    /// Lexically below these roots (same version, no `..`).
    pub fn contains(&self, dirs: &CgroupDirs) -> bool {
        match (self, dirs) {
            (Self::V1 { cpu, memory }, CgroupDirs::V1 { cpu: c, memory: m }) => {
                path::is_within(cpu, c) && path::is_within(memory, m)
            }
            (Self::V2 { dir }, CgroupDirs::V2 { dir: d }) => path::is_within(dir, d),
            _ => false,
        }
    }

    /// Refuses `dirs` unless they are below the roots and reached without symlinks.
    pub fn check(&self, dirs: &CgroupDirs) -> Result<(), PathError> {
        if !self.contains(dirs) {
            let path = dirs.paths().first().map(|p| p.to_path_buf()).unwrap_or_default();
            return Err(PathError::OutsideRoots { path });
        }
        for (root, dir) in self.dirs().paths().into_iter().zip(dirs.paths()) {
            path::check_no_symlinks(root, dir)?;
        }
        Ok(())
    }
}

fn mkdir(dir: &Path) -> Result<bool, CgroupError> {
    match std::fs::create_dir(dir) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(source) => Err(CgroupError::Create {
            path: dir.to_path_buf(),
            source,
        }),
    }
}

/// Reads the pids in `dir/cgroup.procs` (empty if the cgroup is gone).
pub fn cgroup_pids(dir: &Path) -> Result<Vec<u32>, CgroupError> {
    let path = dir.join("cgroup.procs");
    match std::fs::read_to_string(&path) {
        Ok(s) => Ok(s.lines().filter_map(|l| l.trim().parse().ok()).collect()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(source) => Err(CgroupError::Read { path, source }),
    }
}

/// `rmdir` a cgroup; on cgroupfs waits up to `wait` for exiting tasks (v1 refuses to remove a
/// cgroup that still has tasks: EBUSY). Off cgroupfs (test trees) removes the directory tree.
fn remove_cgroup_dir(dir: &Path, wait: Duration) -> Result<(), CgroupError> {
    if !dir.exists() {
        return Ok(());
    }
    if !headroom_cgroupfs::setup::is_cgroupfs(dir) {
        return std::fs::remove_dir_all(dir)
            .or_else(|e| {
                if e.kind() == io::ErrorKind::NotFound {
                    Ok(())
                } else {
                    Err(e)
                }
            })
            .map_err(|source| CgroupError::Remove {
                path: dir.to_path_buf(),
                source,
            });
    }
    let deadline = std::time::Instant::now() + wait;
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                if std::time::Instant::now() >= deadline {
                    return Err(CgroupError::Busy {
                        path: dir.to_path_buf(),
                        pids: cgroup_pids(dir)?,
                    });
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(source) => {
                return Err(CgroupError::Remove {
                    path: dir.to_path_buf(),
                    source,
                });
            }
        }
    }
}

/// A standalone Pod's cgroups: `pod<uid>` with one child per container.
#[derive(Debug, Clone)]
pub struct PodCgroups {
    roots: Roots,
    uid: String,
    containers: Vec<String>,
}

impl PodCgroups {
    /// Names an existing (or future) Pod's cgroups; validates every id.
    pub fn open(roots: &Roots, pod_uid: &str, containers: &[&str]) -> Result<Self, CgroupError> {
        roots.validate()?;
        roots.pod_dirs(pod_uid)?;
        for c in containers {
            roots.container_dirs(pod_uid, c)?;
        }
        Ok(Self {
            roots: roots.clone(),
            uid: pod_uid.to_owned(),
            containers: containers.iter().map(|c| (*c).to_owned()).collect(),
        })
    }

    /// Every Pod cgroup under the roots (`pod<uid>`, in any hierarchy), with the container
    /// cgroups found in it, sorted by uid: what an earlier run left if none is running now.
    /// Entries whose names are not valid ids are skipped: nothing headroom made is named so.
    pub fn found_under(roots: &Roots) -> Result<Vec<Self>, CgroupError> {
        let mut found: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
            std::collections::BTreeMap::new();
        let subdirs = |dir: &Path| -> Result<Vec<String>, CgroupError> {
            let entries = match std::fs::read_dir(dir) {
                Ok(e) => e,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(source) => {
                    return Err(CgroupError::Read {
                        path: dir.to_path_buf(),
                        source,
                    });
                }
            };
            Ok(entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .filter_map(|e| e.file_name().into_string().ok())
                .collect())
        };
        for root in roots.dirs().paths() {
            for name in subdirs(root)? {
                let Some(uid) = name.strip_prefix("pod") else {
                    continue;
                };
                if roots.pod_dirs(uid).is_err() {
                    continue;
                }
                let containers = found.entry(uid.to_string()).or_default();
                for c in subdirs(&root.join(&name))? {
                    if roots.container_dirs(uid, &c).is_ok() {
                        containers.insert(c);
                    }
                }
            }
        }
        found
            .into_iter()
            .map(|(uid, containers)| {
                let names: Vec<&str> = containers.iter().map(String::as_str).collect();
                Self::open(roots, &uid, &names)
            })
            .collect()
    }

    /// Creates the roots (if missing), the Pod cgroup and its container cgroups, then writes
    /// `initial` (in the kubelet's order). Existing directories are reused. On failure, what was
    /// created is removed again.
    pub fn create(
        roots: &Roots,
        pod_uid: &str,
        containers: &[&str],
        initial: Option<&PodValues>,
    ) -> Result<Self, CgroupError> {
        let this = Self::open(roots, pod_uid, containers)?;
        for root in roots.dirs().paths() {
            mkdir(root)?;
            path::check_no_symlinks(root.parent().unwrap_or(Path::new("/")), root)?;
        }
        let result = this.create_inner(initial);
        if let Err(e) = result {
            let _ = this.remove();
            return Err(e);
        }
        Ok(this)
    }

    fn create_inner(&self, initial: Option<&PodValues>) -> Result<(), CgroupError> {
        let pod = self.pod_dirs()?;
        self.roots.check(&pod)?;
        if let CgroupDirs::V2 { dir } = self.roots.dirs() {
            enable_v2_controllers(&dir)?;
        }
        for d in pod.paths() {
            mkdir(d)?;
        }
        if let CgroupDirs::V2 { dir } = &pod {
            enable_v2_controllers(dir)?;
        }
        for c in &self.containers {
            let dirs = self.container_dirs(c)?;
            self.roots.check(&dirs)?;
            for d in dirs.paths() {
                mkdir(d)?;
            }
        }
        if let Some(initial) = initial {
            self.write_values(initial)?;
        }
        Ok(())
    }

    /// Writes `values` without rollback (creation time): current values are read, then written
    /// in the planned order.
    fn write_values(&self, desired: &PodValues) -> Result<(), CgroupError> {
        let mut pod = self.pod_dirs()?.open();
        let mut cgs = Vec::new();
        let mut current = PodValues {
            pod: read_values(&mut pod, &desired.pod)?,
            containers: Vec::new(),
        };
        for (name, want) in &desired.containers {
            let mut cg = self.container_dirs(name)?.open();
            current
                .containers
                .push((name.clone(), read_values(&mut cg, want)?));
            cgs.push(cg);
        }
        let plan = plan::plan(&current, desired).map_err(|e| CgroupError::Create {
            path: self
                .pod_dirs()
                .map(|d| d.paths()[0].to_path_buf())
                .unwrap_or_default(),
            source: io::Error::new(io::ErrorKind::InvalidInput, e.to_string()),
        })?;
        for w in &plan.writes {
            match w.target {
                plan::Target::Pod => pod.write(&w.next)?,
                plan::Target::Container(i) => match cgs.get_mut(i) {
                    Some(cg) => cg.write(&w.next)?,
                    None => continue,
                },
            }
        }
        Ok(())
    }

    pub fn uid(&self) -> &str {
        &self.uid
    }

    pub fn roots(&self) -> &Roots {
        &self.roots
    }

    pub fn containers(&self) -> &[String] {
        &self.containers
    }

    pub fn pod_dirs(&self) -> Result<CgroupDirs, PathError> {
        self.roots.pod_dirs(&self.uid)
    }

    pub fn container_dirs(&self, container: &str) -> Result<CgroupDirs, PathError> {
        self.roots.container_dirs(&self.uid, container)
    }

    /// `container`'s `cgroup.procs` files (one per hierarchy on v1), open for writing: a process
    /// about to exec writes `0` to each to move itself in, so that nothing it forks starts
    /// outside its cgroup.
    pub fn procs_files(&self, container: &str) -> Result<Vec<std::fs::File>, CgroupError> {
        let dirs = self.container_dirs(container)?;
        self.roots.check(&dirs)?;
        dirs.paths()
            .into_iter()
            .map(|d| {
                let path = d.join("cgroup.procs");
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .map_err(|source| CgroupError::Open { path, source })
            })
            .collect()
    }

    /// Moves `pid` into `container`'s cgroup (in every hierarchy on v1).
    pub fn add_process(&self, container: &str, pid: u32) -> Result<(), CgroupError> {
        let dirs = self.container_dirs(container)?;
        self.roots.check(&dirs)?;
        for d in dirs.paths() {
            CgFile::new(d, "cgroup.procs").write(NumBuf::new().push_u64(u64::from(pid)).as_bytes())?;
        }
        Ok(())
    }

    /// Every process in the Pod (container cgroups and the Pod cgroup itself), in every
    /// hierarchy (on v1 a process moved in from outside may be in only one), once each.
    pub fn pids(&self) -> Result<Vec<u32>, CgroupError> {
        let mut pids = std::collections::BTreeSet::new();
        for d in self.pod_dirs()?.paths() {
            pids.extend(cgroup_pids(d)?);
        }
        for c in &self.containers {
            for d in self.container_dirs(c)?.paths() {
                pids.extend(cgroup_pids(d)?);
            }
        }
        Ok(pids.into_iter().collect())
    }

    /// Removes the container cgroups, then the Pod cgroup. Killing the processes is the
    /// caller's job; exiting tasks are waited for up to a second, after which a cgroup that
    /// still has tasks yields [`CgroupError::Busy`] with their pids.
    pub fn remove(&self) -> Result<(), CgroupError> {
        let wait = Duration::from_secs(1);
        for c in &self.containers {
            for d in self.container_dirs(c)?.paths() {
                remove_cgroup_dir(d, wait)?;
            }
        }
        for d in self.pod_dirs()?.paths() {
            remove_cgroup_dir(d, wait)?;
        }
        Ok(())
    }
}

fn read_values(cg: &mut AnyCgroup, want: &CgroupValues) -> Result<CgroupValues, CgroupError> {
    let mut v = CgroupValues::default();
    for knob in Knob::ALL {
        if want.get(knob).is_some() {
            v.set(cg.read(knob)?);
        }
    }
    Ok(v)
}

/// v2 "no internal processes": controllers are enabled for the children of our own cgroups.
fn enable_v2_controllers(dir: &Path) -> Result<(), CgroupError> {
    CgFile::new(dir, "cgroup.subtree_control").write(b"+cpu +memory")
}

/// A throwaway set of v1 roots (`<mount>/{cpu,memory}/<prefix>-<pid>-<seq>-<nanos>`) for tests and
/// benchmarks. On drop, every process left inside is SIGKILLed and the tree removed, so a
/// failing test still cleans up.
#[derive(Debug)]
pub struct ScratchRoots {
    roots: Roots,
}

impl ScratchRoots {
    pub fn create_v1(mount_root: &Path, prefix: &str) -> Result<Self, CgroupError> {
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("{prefix}-{}-{seq}-{nanos}", std::process::id());
        let roots = Roots::standalone(mount_root, CgroupSetup::Legacy, &name);
        roots.validate()?;
        let this = Self { roots };
        for d in this.roots.dirs().paths() {
            mkdir(d)?;
        }
        Ok(this)
    }

    pub fn roots(&self) -> &Roots {
        &self.roots
    }
}

fn collect_dirs(dir: &Path, out: &mut Vec<PathBuf>) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                collect_dirs(&e.path(), out);
            }
        }
    }
    out.push(dir.to_path_buf());
}

impl Drop for ScratchRoots {
    fn drop(&mut self) {
        for root in self.roots.dirs().paths() {
            let mut dirs = Vec::new();
            collect_dirs(root, &mut dirs); // children first
            for d in &dirs {
                for pid in cgroup_pids(d).unwrap_or_default() {
                    if let Ok(pid) = i32::try_from(pid) {
                        let _ = nix::sys::signal::kill(
                            nix::unistd::Pid::from_raw(pid),
                            nix::sys::signal::SIGKILL,
                        );
                    }
                }
            }
            for d in &dirs {
                if let Err(e) = remove_cgroup_dir(d, Duration::from_secs(2)) {
                    eprintln!("scratch cgroup cleanup: {e}");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standalone_layout() {
        let r = Roots::standalone(Path::new("/sys/fs/cgroup"), CgroupSetup::Hybrid, STANDALONE_DIR);
        assert_eq!(
            r.container_dirs("u1", "app").expect("dirs"),
            CgroupDirs::V1 {
                cpu: "/sys/fs/cgroup/cpu/headroom/podu1/app".into(),
                memory: "/sys/fs/cgroup/memory/headroom/podu1/app".into()
            }
        );
        let r2 = Roots::standalone(Path::new("/sys/fs/cgroup"), CgroupSetup::Unified, STANDALONE_DIR);
        assert_eq!(
            r2.pod_dirs("u1").expect("dirs"),
            CgroupDirs::V2 {
                dir: "/sys/fs/cgroup/headroom/podu1".into()
            }
        );
        assert!(r.pod_dirs("../x").is_err());
        assert!(r.container_dirs("u1", "..").is_err());
        assert!(r.container_dirs("u1", "a/b").is_err());
        assert!(!r.contains(&CgroupDirs::V2 {
            dir: "/sys/fs/cgroup/headroom/x".into()
        }));
        assert!(!r.contains(&CgroupDirs::V1 {
            cpu: "/sys/fs/cgroup/cpu/headroom/../../x".into(),
            memory: "/sys/fs/cgroup/memory/headroom/x".into()
        }));
    }

    #[test]
    fn open_refuses_escapes() {
        let r = Roots::V2 { dir: "/tmp/x".into() };
        assert!(PodCgroups::open(&r, "ok", &["a", "..", "b"]).is_err());
        assert!(PodCgroups::open(&r, "a\0b", &["a"]).is_err());
        assert!(PodCgroups::open(&Roots::V2 { dir: "rel".into() }, "u", &["a"]).is_err());
    }

    #[test]
    fn pods_left_under_the_roots_are_found_in_every_hierarchy() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let roots = Roots::V1 {
            cpu: tmp.path().join("cpu/r"),
            memory: tmp.path().join("memory/r"),
        };
        assert!(PodCgroups::found_under(&roots).expect("no roots").is_empty());
        for d in [
            "cpu/r/poda/app",
            "cpu/r/poda/side",
            "memory/r/poda/app",
            "memory/r/podb/x",
        ] {
            std::fs::create_dir_all(tmp.path().join(d)).expect("mkdir");
        }
        // Not ours: no `pod` prefix, a file, a name that is no valid id.
        std::fs::create_dir_all(tmp.path().join("cpu/r/other")).expect("mkdir");
        std::fs::write(tmp.path().join("cpu/r/podfile"), b"").expect("write");
        std::fs::create_dir_all(tmp.path().join("cpu/r/pod")).expect("mkdir");
        let found = PodCgroups::found_under(&roots).expect("found");
        let listed: Vec<(&str, Vec<String>)> =
            found.iter().map(|p| (p.uid(), p.containers().to_vec())).collect();
        assert_eq!(
            listed,
            vec![
                ("a", vec!["app".to_string(), "side".to_string()]),
                ("b", vec!["x".to_string()])
            ]
        );
    }
}
