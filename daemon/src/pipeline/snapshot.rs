//! The immutable picture of the node that the aggregator publishes.

use std::{
    sync::Arc,
    time::{Duration, SystemTime},
};

use headroom_common::{CgroupKey, EventKind};
use headroom_node_model::{NodeHeadroom, Resources};

/// A Pod, as the API names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct PodRef {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
}

impl PodRef {
    /// A Pod reference.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>, uid: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
            uid: uid.into(),
        }
    }

    /// Whether `id` names this Pod: its uid, or `namespace/name`.
    pub fn matches(&self, id: &str) -> bool {
        id == self.uid
            || id
                .split_once('/')
                .is_some_and(|(ns, name)| ns == self.namespace && name == self.name)
    }
}

/// One live figure: its value, when it was measured, and whether it is older than the bound.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Figure {
    /// The value, in the unit the field name says.
    pub value: f64,
    /// When it was measured.
    pub measured_at: SystemTime,
    /// Older than the configured staleness bound when the snapshot was built.
    pub stale: bool,
}

/// Pressure stall information of one resource.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct PsiFigures {
    /// `some` averages over 10, 60 and 300 s (percent).
    pub some_avg: [f64; 3],
    /// `some` total, seconds.
    pub some_total_seconds: f64,
    /// `full` averages (percent); zero where the kernel has no `full` line.
    pub full_avg: [f64; 3],
    /// `full` total, seconds.
    pub full_total_seconds: f64,
    /// Rates of the totals between the last two readings.
    pub some_seconds_per_second: f64,
    /// Rate of the `full` total.
    pub full_seconds_per_second: f64,
    /// When it was read.
    pub measured_at: Option<SystemTime>,
    /// Older than the staleness bound.
    pub stale: bool,
}

/// Live signals of one cgroup (or of several merged: a v1 container has a cpu and a memory one).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Pressure {
    /// CPU seconds per second.
    pub cpu_usage_cores: Option<Figure>,
    /// `cpu.stat` `usage_usec` (v2) or `cpuacct.usage` (v1), seconds: a counter for `/metrics`.
    pub cpu_usage_seconds_total: Option<Figure>,
    /// `cpu.stat` `nr_periods`.
    pub cpu_periods_total: Option<Figure>,
    /// `cpu.stat` `nr_throttled`.
    pub cpu_throttled_periods_total: Option<Figure>,
    /// `cpu.stat` throttled time, seconds.
    pub cpu_throttled_seconds_total: Option<Figure>,
    /// Δnr_throttled / Δnr_periods.
    pub cpu_throttled_ratio: Option<Figure>,
    /// Δthrottled time / Δwall time.
    pub cpu_throttled_seconds_per_second: Option<Figure>,
    /// Probe: throttled switch-outs per second.
    pub probe_throttle_episodes_per_second: Option<Figure>,
    /// Probe: throttled seconds per second.
    pub probe_throttled_seconds_per_second: Option<Figure>,
    /// Probe: mean run-queue latency over the last interval.
    pub runq_latency_mean_seconds: Option<Figure>,
    /// Memory usage, bytes.
    pub memory_usage_bytes: Option<Figure>,
    /// Working set (usage − inactive file), bytes.
    pub memory_working_set_bytes: Option<Figure>,
    /// Probe: seconds in memcg + direct reclaim per second.
    pub memory_reclaim_stall_seconds_per_second: Option<Figure>,
    /// OOM kills (largest of the probe's count, the events seen and `memory.events`).
    pub oom_kills_total: Option<Figure>,
    /// `cpu.pressure`.
    pub psi_cpu: Option<PsiFigures>,
    /// `memory.pressure`.
    pub psi_memory: Option<PsiFigures>,
    /// `io.pressure`.
    pub psi_io: Option<PsiFigures>,
}

impl Pressure {
    /// Fills every figure `self` lacks, or has older, from `other` (merging the cgroups of one owner).
    pub fn merge_newer(&mut self, other: &Pressure) {
        fn pick(mine: &mut Option<Figure>, theirs: &Option<Figure>) {
            if let Some(t) = theirs
                && mine.is_none_or(|m| m.measured_at < t.measured_at)
            {
                *mine = Some(*t);
            }
        }
        fn pick_psi(mine: &mut Option<PsiFigures>, theirs: &Option<PsiFigures>) {
            if let Some(t) = theirs
                && mine.is_none_or(|m| m.measured_at < t.measured_at)
            {
                *mine = Some(*t);
            }
        }
        pick(&mut self.cpu_usage_cores, &other.cpu_usage_cores);
        pick(&mut self.cpu_usage_seconds_total, &other.cpu_usage_seconds_total);
        pick(&mut self.cpu_periods_total, &other.cpu_periods_total);
        pick(
            &mut self.cpu_throttled_periods_total,
            &other.cpu_throttled_periods_total,
        );
        pick(
            &mut self.cpu_throttled_seconds_total,
            &other.cpu_throttled_seconds_total,
        );
        pick(&mut self.cpu_throttled_ratio, &other.cpu_throttled_ratio);
        pick(
            &mut self.cpu_throttled_seconds_per_second,
            &other.cpu_throttled_seconds_per_second,
        );
        pick(
            &mut self.probe_throttle_episodes_per_second,
            &other.probe_throttle_episodes_per_second,
        );
        pick(
            &mut self.probe_throttled_seconds_per_second,
            &other.probe_throttled_seconds_per_second,
        );
        pick(
            &mut self.runq_latency_mean_seconds,
            &other.runq_latency_mean_seconds,
        );
        pick(&mut self.memory_usage_bytes, &other.memory_usage_bytes);
        pick(
            &mut self.memory_working_set_bytes,
            &other.memory_working_set_bytes,
        );
        pick(
            &mut self.memory_reclaim_stall_seconds_per_second,
            &other.memory_reclaim_stall_seconds_per_second,
        );
        pick(&mut self.oom_kills_total, &other.oom_kills_total);
        pick_psi(&mut self.psi_cpu, &other.psi_cpu);
        pick_psi(&mut self.psi_memory, &other.psi_memory);
        pick_psi(&mut self.psi_io, &other.psi_io);
    }

    /// Whether any figure is present.
    pub fn is_empty(&self) -> bool {
        *self == Pressure::default()
    }
}

/// One container of a Pod.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ContainerView {
    /// Container name.
    pub name: String,
    /// Its signals.
    pub pressure: Pressure,
}

/// One Pod: its own cgroup and its containers.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct PodView {
    /// Which Pod.
    pub pod: PodRef,
    /// Requests as the Pod source counts them (zero when the Pod is only known from cgroups).
    pub requests: Resources,
    /// The Pod-level cgroup.
    pub pod_cgroup: Pressure,
    /// Containers, sorted by name.
    pub containers: Vec<ContainerView>,
}

/// A reservation as served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReservationView {
    /// Caller-chosen id.
    pub id: String,
    /// The Pod it is for.
    pub pod: String,
    /// Amount promised.
    pub amount: Resources,
    /// When it expires.
    pub expires_at: SystemTime,
}

/// Health of the pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PipelineStats {
    /// Records taken off the queue.
    pub processed_total: u64,
    /// Records dropped because the queue was full.
    pub dropped_total: u64,
    /// Samples of cgroups no Pod (or the node) is known to own.
    pub unattributed_total: u64,
    /// Queue capacity.
    pub queue_capacity: u64,
}

/// One kernel event as served: what the probes pushed, attributed to its cgroup's owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelEventView {
    /// One more for every event the aggregator received.
    pub sequence: u64,
    /// What happened.
    pub kind: EventKind,
    /// The cgroup it happened in.
    pub cgroup: CgroupKey,
    /// Its Pod's uid, if a Pod owns it (known when the event was applied).
    pub pod_uid: Option<String>,
    /// Its container, if it is a container's cgroup.
    pub container: Option<String>,
    /// The task's process (task events), else 0.
    pub pid: u32,
    /// When the kernel saw it (CLOCK_BOOTTIME, nanoseconds).
    pub boottime_ns: u64,
    /// Episode or stall length (throttle end, reclaim stalls), nanoseconds; else 0.
    pub duration_ns: u64,
}

/// Node headroom with its provenance.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeFigures {
    /// allocatable − allocated − reserved, per resource.
    pub headroom: NodeHeadroom,
    /// When the Pod set was last read from the Pod source.
    pub measured_at: SystemTime,
    /// The Pod source is older than the staleness bound.
    pub stale: bool,
}

/// An immutable, consistent picture of the node. Readers get it as an `Arc` without locking.
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    /// Increases with every publication.
    pub version: u64,
    /// Node name (config).
    pub node_name: String,
    /// When it was built.
    pub generated_at: SystemTime,
    /// Staleness bound used.
    pub stale_after: Duration,
    /// Node headroom.
    pub node: NodeFigures,
    /// The node's root cgroup.
    pub node_pressure: Pressure,
    /// Pods, sorted by namespace, name, uid.
    pub pods: Vec<PodView>,
    /// Live reservations, sorted by id.
    pub reservations: Vec<ReservationView>,
    /// Pipeline health.
    pub stats: PipelineStats,
    /// The last [`KERNEL_EVENTS_KEPT`] kernel events, oldest first (shared between snapshots
    /// until a new one arrives).
    pub kernel_events: Arc<[KernelEventView]>,
}

/// Kernel events a snapshot carries: the newest this many, not only those since the previous
/// snapshot, because a watcher is handed the newest snapshot and skips the ones published
/// while it was busy (`WatchHeadroom`'s `min_interval_ms`, a slow reader): a window lets it
/// still see the events of those, and the `sequence` numbers say which it saw already.
pub const KERNEL_EVENTS_KEPT: usize = 64;

impl Snapshot {
    /// The Pod named by `id` (uid or `namespace/name`).
    pub fn pod(&self, id: &str) -> Option<&PodView> {
        self.pods.iter().find(|p| p.pod.matches(id))
    }
}
