//! Who owns a cgroup ([`PodResolver`]) and which Pods count against the node ([`PodSource`]).

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::SystemTime,
};

use arc_swap::ArcSwap;
use headroom_common::CgroupKey;
use headroom_node_model::Resources;

use super::snapshot::PodRef;

/// The owner of a cgroup.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CgroupOwner {
    /// The node's root cgroup: node-level signals.
    Node,
    /// A Pod's cgroup (`container: None`) or one of its containers' cgroups.
    Pod {
        /// Which Pod.
        pod: PodRef,
        /// Container name, `None` for the Pod-level cgroup.
        container: Option<String>,
    },
}

/// Maps a cgroup to its owner. Called on the aggregator thread once per new cgroup (and again,
/// rate-limited, for cgroups that had no owner yet), so it may read cgroupfs.
pub trait PodResolver: Send + Sync + 'static {
    /// The owner of `key`, `None` if it belongs to no Pod this node knows.
    fn resolve(&self, key: &CgroupKey) -> Option<CgroupOwner>;
}

/// A fixed map, for tests and for callers that know the mapping up front.
#[derive(Debug, Default)]
pub struct StaticPodResolver {
    map: ArcSwap<HashMap<CgroupKey, CgroupOwner>>,
}

impl StaticPodResolver {
    /// An empty resolver.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces the owner of `key`.
    pub fn insert(&self, key: CgroupKey, owner: CgroupOwner) {
        self.map.rcu(|m| {
            let mut m = HashMap::clone(m);
            m.insert(key, owner.clone());
            m
        });
    }
}

impl PodResolver for StaticPodResolver {
    fn resolve(&self, key: &CgroupKey) -> Option<CgroupOwner> {
        self.map.load().get(key).cloned()
    }
}

impl<T: PodResolver> PodResolver for Arc<T> {
    fn resolve(&self, key: &CgroupKey) -> Option<CgroupOwner> {
        (**self).resolve(key)
    }
}

/// A Pod bound to this node and what it requests (counted as the scheduler counts it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodEntry {
    /// Which Pod.
    pub pod: PodRef,
    /// Requests, as `headroom_node_model::pod_requests` counts them.
    pub requests: Resources,
    /// The part of `requests` that is a pending resize the kubelet has not admitted yet
    /// (`requests` − the admitted size; zero when nothing is pending). The node counts a
    /// resizing Pod at its desired size, as the scheduler does, so that part of a reservation
    /// for this Pod is already held by the count.
    pub pending_resize: Resources,
}

/// The set of Pods on the node, read by the aggregator whenever its generation changes.
#[derive(Clone, Debug)]
pub struct PodSet {
    /// Increases on every change.
    pub generation: u64,
    /// When the set was last known to be current.
    pub as_of: SystemTime,
    /// The Pods.
    pub pods: Arc<[PodEntry]>,
    /// The node's allocatable, when the source knows it (the Kubernetes source reads it from the
    /// Node object); `None`: the configured allocatable applies.
    pub allocatable: Option<Resources>,
}

/// Source of the Pods that count against the node's allocatable.
pub trait PodSource: Send + Sync + 'static {
    /// Cheap: the current generation (the aggregator polls it).
    fn generation(&self) -> u64;
    /// The current set.
    fn pods(&self) -> PodSet;
    /// For a source that follows a live feed (a watch): when the set was last known current —
    /// now while the feed is up, the moment it failed otherwise. `None` (the default): the set is
    /// as current as its [`PodSet::as_of`]. Cheap: called on every snapshot.
    fn live_as_of(&self) -> Option<SystemTime> {
        None
    }
    /// A live feed that has not listed yet, or has failed since: readiness waits for it.
    /// Static sources (the default) are never down.
    fn is_down(&self) -> bool {
        false
    }
}

/// Pods held in memory, set by the standalone backend (or the config).
#[derive(Debug)]
pub struct InMemoryPodSource {
    generation: AtomicU64,
    set: ArcSwap<PodSet>,
    /// Serialises writers (readers never take it), so sets are stored in generation order.
    writer: std::sync::Mutex<()>,
    /// [`PodSource::live_as_of`]: `LIVENESS_UNTRACKED`, `LIVENESS_UP`, or `LIVENESS_DOWN` since
    /// `down_since_nanos` (Unix time).
    liveness: std::sync::atomic::AtomicU8,
    down_since_nanos: AtomicU64,
}

const LIVENESS_UNTRACKED: u8 = 0;
const LIVENESS_UP: u8 = 1;
const LIVENESS_DOWN: u8 = 2;

impl Default for InMemoryPodSource {
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

impl InMemoryPodSource {
    /// A source holding `pods`.
    pub fn new(pods: Vec<PodEntry>) -> Self {
        Self {
            generation: AtomicU64::new(1),
            set: ArcSwap::from_pointee(PodSet {
                generation: 1,
                as_of: SystemTime::now(),
                pods: pods.into(),
                allocatable: None,
            }),
            writer: std::sync::Mutex::new(()),
            liveness: std::sync::atomic::AtomicU8::new(LIVENESS_UNTRACKED),
            down_since_nanos: AtomicU64::new(0),
        }
    }

    /// Sets the node's allocatable (`None`: the configured one applies).
    pub fn set_allocatable(&self, allocatable: Option<Resources>) {
        let _writer = self
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let current = self.set.load_full();
        if current.allocatable != allocatable {
            self.store_with(current.pods.to_vec(), allocatable);
        }
    }

    /// Whether the feed behind this set is up (its watch listed and not failing since). From the
    /// first call on, [`PodSource::live_as_of`] reports it: now while up, else the moment it last
    /// went down (or this call, if it never was up).
    pub fn set_live(&self, up: bool) {
        if up {
            self.liveness.store(LIVENESS_UP, Ordering::Release);
        } else if self.liveness.swap(LIVENESS_DOWN, Ordering::AcqRel) != LIVENESS_DOWN {
            let nanos = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
            self.down_since_nanos.store(nanos, Ordering::Release);
        }
    }

    /// Replaces the whole set.
    pub fn set(&self, pods: Vec<PodEntry>) {
        let _writer = self
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.store(pods);
    }

    /// Replaces the set unless it holds exactly `pods` already (same entries, same order): a
    /// feed that re-reads everything on every event bumps the generation only on a change.
    /// Whether it replaced the set.
    pub fn set_if_changed(&self, pods: Vec<PodEntry>) -> bool {
        let _writer = self
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *self.set.load().pods == *pods {
            return false;
        }
        self.store(pods);
        true
    }

    fn store(&self, pods: Vec<PodEntry>) {
        let allocatable = self.set.load().allocatable;
        self.store_with(pods, allocatable);
    }

    fn store_with(&self, pods: Vec<PodEntry>, allocatable: Option<Resources>) {
        let generation = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        self.set.store(Arc::new(PodSet {
            generation,
            as_of: SystemTime::now(),
            pods: pods.into(),
            allocatable,
        }));
    }

    /// Adds a Pod or replaces the one with the same uid.
    pub fn upsert(&self, entry: PodEntry) {
        let _writer = self
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let current = self.set.load_full();
        let mut pods: Vec<PodEntry> = current
            .pods
            .iter()
            .filter(|p| p.pod.uid != entry.pod.uid)
            .cloned()
            .collect();
        pods.push(entry);
        self.store(pods);
    }

    /// Removes the Pod with this uid; whether it was there.
    pub fn remove(&self, uid: &str) -> bool {
        let _writer = self
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let current = self.set.load_full();
        let pods: Vec<PodEntry> = current
            .pods
            .iter()
            .filter(|p| p.pod.uid != uid)
            .cloned()
            .collect();
        let removed = pods.len() != current.pods.len();
        if removed {
            self.store(pods);
        }
        removed
    }
}

impl PodSource for InMemoryPodSource {
    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
    fn is_down(&self) -> bool {
        self.liveness.load(Ordering::Acquire) == LIVENESS_DOWN
    }

    fn pods(&self) -> PodSet {
        PodSet::clone(&self.set.load())
    }

    fn live_as_of(&self) -> Option<SystemTime> {
        match self.liveness.load(Ordering::Acquire) {
            LIVENESS_UNTRACKED => None,
            LIVENESS_UP => Some(SystemTime::now()),
            _ => Some(
                SystemTime::UNIX_EPOCH
                    + std::time::Duration::from_nanos(self.down_since_nanos.load(Ordering::Acquire)),
            ),
        }
    }
}

impl<T: PodSource> PodSource for Arc<T> {
    fn generation(&self) -> u64 {
        (**self).generation()
    }

    fn pods(&self) -> PodSet {
        (**self).pods()
    }

    fn live_as_of(&self) -> Option<SystemTime> {
        (**self).live_as_of()
    }
}
