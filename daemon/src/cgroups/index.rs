//! Maps the probes' cgroup keys (hierarchy id, kernfs id = directory inode) to paths and Pods.
use std::{
    collections::HashMap,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use headroom_common::CgroupKey;

use super::{Hierarchy, PodCgroup, parse_pod_path_under};

/// What headroom knows about one cgroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupInfo {
    /// Absolute path of the cgroup directory.
    pub path: PathBuf,
    /// Path relative to its hierarchy's root, starting with `/`.
    pub relative: String,
    /// The Pod (and container) it belongs to, when the path says so.
    pub pod: Option<PodCgroup>,
}

/// A snapshot of the cgroup trees. Rebuilt when the probes report `cgroup_mkdir`/`rmdir`.
#[derive(Clone, Debug, Default)]
pub struct CgroupIndex {
    by_key: HashMap<CgroupKey, CgroupInfo>,
    /// Directories that vanished or could not be read during the walk (not an error:
    /// cgroups come and go while we look).
    pub skipped: usize,
}

impl CgroupIndex {
    /// Walks every hierarchy. Unreadable or vanished directories are counted, not fatal.
    pub fn build(hierarchies: &[&Hierarchy]) -> Self {
        Self::build_with(hierarchies, &[])
    }

    /// As [`Self::build`], with Pods also recognised under `pod_roots` (a standalone node's
    /// configured cgroup root).
    pub fn build_with(hierarchies: &[&Hierarchy], pod_roots: &[String]) -> Self {
        let mut index = Self::default();
        for hierarchy in hierarchies {
            index.walk(hierarchy, &hierarchy.mount, 0, pod_roots);
        }
        index
    }

    fn walk(&mut self, hierarchy: &Hierarchy, dir: &Path, depth: usize, pod_roots: &[String]) {
        // Kubelet trees are at most 5 deep; the bound keeps a symlink loop or a hostile
        // tree from recursing without end.
        if depth > 32 {
            self.skipped += 1;
            return;
        }
        let Ok(meta) = std::fs::symlink_metadata(dir) else {
            self.skipped += 1;
            return;
        };
        let relative = dir
            .strip_prefix(&hierarchy.mount)
            .map_or_else(|_| "/".to_string(), |rel| format!("/{}", rel.to_string_lossy()));
        let relative = if relative == "/" {
            relative
        } else {
            relative.trim_end_matches('/').to_string()
        };
        let pod = parse_pod_path_under(&relative, pod_roots);
        self.by_key.insert(
            CgroupKey::new(hierarchy.id, meta.ino()),
            CgroupInfo {
                path: dir.to_path_buf(),
                relative,
                pod,
            },
        );
        let Ok(entries) = std::fs::read_dir(dir) else {
            self.skipped += 1;
            return;
        };
        for entry in entries {
            let Ok(entry) = entry else {
                self.skipped += 1;
                continue;
            };
            // `file_type` does not follow symlinks: a link is never a cgroup.
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                self.walk(hierarchy, &entry.path(), depth + 1, pod_roots);
            }
        }
    }

    /// The cgroup behind a probe key, if it existed at the last walk.
    pub fn get(&self, key: &CgroupKey) -> Option<&CgroupInfo> {
        self.by_key.get(key)
    }

    /// Every entry.
    pub fn iter(&self) -> impl Iterator<Item = (&CgroupKey, &CgroupInfo)> {
        self.by_key.iter()
    }

    /// Consumes the index, yielding every entry.
    pub fn into_entries(self) -> impl Iterator<Item = (CgroupKey, CgroupInfo)> {
        self.by_key.into_iter()
    }

    /// Number of cgroups known.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Whether no cgroup is known.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// Every cgroup of a Pod (all hierarchies, Pod level and containers).
    pub fn pod_cgroups<'a>(
        &'a self,
        pod_uid: &'a str,
    ) -> impl Iterator<Item = (&'a CgroupKey, &'a CgroupInfo)> {
        self.by_key
            .iter()
            .filter(move |(_, info)| info.pod.as_ref().is_some_and(|p| p.pod_uid == pod_uid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "97dba925-6b5f-4e2f-99f9-d51c30016586";
    const UID_: &str = "97dba925_6b5f_4e2f_99f9_d51c30016586";

    fn ino(path: &Path) -> u64 {
        std::fs::metadata(path).expect("stat").ino()
    }

    /// Builds a fake hierarchy with `dirs` and checks every Pod directory maps back.
    fn check_layout(hierarchy_id: u32, dirs: &[String], expect_container: &str) {
        let tmp = tempfile::tempdir().expect("tempdir");
        for dir in dirs {
            std::fs::create_dir_all(tmp.path().join(dir.trim_start_matches('/'))).expect("mkdir");
        }
        // Noise a real tree has: files, a symlink, system slices.
        std::fs::write(tmp.path().join("cgroup.procs"), "1\n").expect("write");
        std::fs::create_dir_all(tmp.path().join("system.slice/containerd.service")).expect("mkdir");
        std::os::unix::fs::symlink(tmp.path(), tmp.path().join("loop")).expect("symlink");
        let hierarchy = Hierarchy {
            id: hierarchy_id,
            mount: tmp.path().to_path_buf(),
        };
        let index = CgroupIndex::build(&[&hierarchy]);
        let container_dir = tmp
            .path()
            .join(dirs.last().expect("dirs").trim_start_matches('/'));
        let info = index
            .get(&CgroupKey::new(hierarchy_id, ino(&container_dir)))
            .expect("container indexed");
        let pod = info.pod.as_ref().expect("pod recognised");
        assert_eq!(pod.pod_uid, UID);
        assert_eq!(pod.container.as_deref(), Some(expect_container));
        let system = index
            .get(&CgroupKey::new(
                hierarchy_id,
                ino(&tmp.path().join("system.slice")),
            ))
            .expect("system");
        assert_eq!(system.pod, None);
        // Same inode, other hierarchy: a different cgroup (v1 ids collide across hierarchies).
        assert!(
            index
                .get(&CgroupKey::new(hierarchy_id + 1, ino(&container_dir)))
                .is_none()
        );
        assert_eq!(index.pod_cgroups(UID).count(), 2);
    }

    #[test]
    fn v1_cgroupfs_driver_tree() {
        check_layout(
            4,
            &[
                format!("/kubepods/burstable/pod{UID}"),
                format!("/kubepods/burstable/pod{UID}/abc123"),
            ],
            "abc123",
        );
    }

    #[test]
    fn v1_systemd_driver_tree() {
        let pod = format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice");
        check_layout(
            1,
            &[pod.clone(), format!("{pod}/cri-containerd-abc123.scope")],
            "abc123",
        );
    }

    #[test]
    fn v2_systemd_driver_tree_crio() {
        let pod = format!("/kubepods.slice/kubepods-pod{UID_}.slice");
        check_layout(0, &[pod.clone(), format!("{pod}/crio-def456.scope")], "def456");
    }

    #[test]
    fn v2_docker_and_headroom_trees() {
        let pod = format!("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice");
        check_layout(0, &[pod.clone(), format!("{pod}/docker-0a1b.scope")], "0a1b");
        check_layout(
            0,
            &[format!("/headroom/pod{UID}"), format!("/headroom/pod{UID}/app")],
            "app",
        );
    }

    #[test]
    fn vanished_root_is_counted_not_fatal() {
        let hierarchy = Hierarchy {
            id: 1,
            mount: PathBuf::from("/nonexistent/headroom/cgroup"),
        };
        let index = CgroupIndex::build(&[&hierarchy]);
        assert!(index.is_empty());
        assert_eq!(index.skipped, 1);
    }
}
