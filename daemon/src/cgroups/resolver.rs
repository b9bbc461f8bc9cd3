//! [`PodResolver`] over cgroupfs: the probes' cgroup keys to the Pods that own them.
use std::sync::Arc;

use arc_swap::ArcSwap;
use headroom_common::CgroupKey;

use super::CgroupIndex;
use crate::pipeline::{CgroupOwner, PodResolver, PodSource, snapshot::PodRef};

/// Resolves through the latest [`CgroupIndex`] (swapped in by the collector without locks),
/// naming Pods from the node's Pod source when it knows them.
pub struct CgroupfsResolver {
    index: Arc<ArcSwap<CgroupIndex>>,
    pods: Arc<dyn PodSource>,
}

impl CgroupfsResolver {
    /// A resolver reading `index` and naming Pods from `pods`.
    pub fn new(index: Arc<ArcSwap<CgroupIndex>>, pods: Arc<dyn PodSource>) -> Self {
        Self { index, pods }
    }
}

impl PodResolver for CgroupfsResolver {
    fn resolve(&self, key: &CgroupKey) -> Option<CgroupOwner> {
        let index = self.index.load();
        let info = index.get(key)?;
        if info.relative == "/" {
            return Some(CgroupOwner::Node);
        }
        let cgroup = info.pod.as_ref()?;
        // A Pod the Pod source does not list is still reported, named by its uid: its
        // pressure is real even before the API server (or the manifest) names it.
        let pod = self
            .pods
            .pods()
            .pods
            .iter()
            .find(|entry| entry.pod.uid == cgroup.pod_uid)
            .map_or_else(
                || PodRef::new("", cgroup.pod_uid.clone(), cgroup.pod_uid.clone()),
                |e| e.pod.clone(),
            );
        Some(CgroupOwner::Pod {
            pod,
            container: cgroup.container.clone(),
        })
    }
}
