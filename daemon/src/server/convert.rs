//! Snapshot (domain) → `headroom.v1` messages.

use std::time::SystemTime;

use headroom_node_model::NodeHeadroom;
use headroom_proto::v1 as pb;

use headroom_common::EventKind;

use crate::pipeline::{
    Figure, KernelEventView, NodeFigures, PodView, Pressure, PsiFigures, ReservationView, Snapshot,
};

/// Wall-clock time as a protobuf `Timestamp`.
pub fn timestamp(t: SystemTime) -> headroom_proto::Timestamp {
    headroom_proto::timestamp(t)
}

fn figure(f: &Option<Figure>) -> Option<pb::Figure> {
    f.map(|f| pb::Figure {
        value: f.value,
        measured_at: Some(timestamp(f.measured_at)),
        stale: f.stale,
    })
}

fn psi(p: &Option<PsiFigures>) -> Option<pb::Psi> {
    p.map(|p| pb::Psi {
        some_avg10: p.some_avg[0],
        some_avg60: p.some_avg[1],
        some_avg300: p.some_avg[2],
        some_total_seconds: p.some_total_seconds,
        full_avg10: p.full_avg[0],
        full_avg60: p.full_avg[1],
        full_avg300: p.full_avg[2],
        full_total_seconds: p.full_total_seconds,
        some_seconds_per_second: p.some_seconds_per_second,
        full_seconds_per_second: p.full_seconds_per_second,
        measured_at: p.measured_at.map(timestamp),
        stale: p.stale,
    })
}

/// One cgroup's signals.
pub fn pressure(p: &Pressure) -> pb::Pressure {
    pb::Pressure {
        cpu_usage_cores: figure(&p.cpu_usage_cores),
        cpu_periods_total: figure(&p.cpu_periods_total),
        cpu_throttled_periods_total: figure(&p.cpu_throttled_periods_total),
        cpu_throttled_seconds_total: figure(&p.cpu_throttled_seconds_total),
        cpu_throttled_ratio: figure(&p.cpu_throttled_ratio),
        cpu_throttled_seconds_per_second: figure(&p.cpu_throttled_seconds_per_second),
        probe_throttle_episodes_per_second: figure(&p.probe_throttle_episodes_per_second),
        probe_throttled_seconds_per_second: figure(&p.probe_throttled_seconds_per_second),
        runq_latency_mean_seconds: figure(&p.runq_latency_mean_seconds),
        memory_usage_bytes: figure(&p.memory_usage_bytes),
        memory_working_set_bytes: figure(&p.memory_working_set_bytes),
        memory_reclaim_stall_seconds_per_second: figure(&p.memory_reclaim_stall_seconds_per_second),
        oom_kills_total: figure(&p.oom_kills_total),
        psi_cpu: psi(&p.psi_cpu),
        psi_memory: psi(&p.psi_memory),
        psi_io: psi(&p.psi_io),
    }
}

/// One Pod.
pub fn pod(p: &PodView) -> pb::PodPressure {
    pb::PodPressure {
        pod: Some(pb::PodRef {
            namespace: p.pod.namespace.clone(),
            name: p.pod.name.clone(),
            uid: p.pod.uid.clone(),
        }),
        pod_cgroup: Some(pressure(&p.pod_cgroup)),
        containers: p
            .containers
            .iter()
            .map(|c| pb::ContainerPressure {
                name: c.name.clone(),
                pressure: Some(pressure(&c.pressure)),
            })
            .collect(),
    }
}

/// Headroom figures.
pub fn node_headroom(h: &NodeHeadroom, measured_at: SystemTime, stale: bool) -> pb::NodeHeadroom {
    pb::NodeHeadroom {
        cpu_millis: Some(pb::ResourceFigures {
            allocatable: h.allocatable.cpu_millis,
            allocated: h.allocated.cpu_millis,
            reserved: h.reserved.cpu_millis,
            headroom: h.headroom.cpu_millis,
        }),
        memory_bytes: Some(pb::ResourceFigures {
            allocatable: h.allocatable.memory_bytes,
            allocated: h.allocated.memory_bytes,
            reserved: h.reserved.memory_bytes,
            headroom: h.headroom.memory_bytes,
        }),
        measured_at: Some(timestamp(measured_at)),
        stale,
    }
}

fn node(n: &NodeFigures) -> pb::NodeHeadroom {
    node_headroom(&n.headroom, n.measured_at, n.stale)
}

/// One reservation.
pub fn reservation(r: &ReservationView) -> pb::Reservation {
    pb::Reservation {
        id: r.id.clone(),
        pod: r.pod.clone(),
        cpu_millis: r.amount.cpu_millis,
        memory_bytes: r.amount.memory_bytes,
        expires_at: Some(timestamp(r.expires_at)),
    }
}

/// One kernel event.
pub fn kernel_event(e: &KernelEventView) -> pb::KernelEvent {
    let kind = match e.kind {
        EventKind::ThrottleBegin => pb::KernelEventKind::ThrottleBegin,
        EventKind::ThrottleEnd => pb::KernelEventKind::ThrottleEnd,
        EventKind::MemcgReclaimStall => pb::KernelEventKind::MemcgReclaimStall,
        EventKind::DirectReclaimStall => pb::KernelEventKind::DirectReclaimStall,
        EventKind::OomKill => pb::KernelEventKind::OomKill,
        EventKind::CgroupMkdir => pb::KernelEventKind::CgroupMkdir,
        EventKind::CgroupRmdir => pb::KernelEventKind::CgroupRmdir,
    };
    pb::KernelEvent {
        sequence: e.sequence,
        kind: kind.into(),
        pod_uid: e.pod_uid.clone().unwrap_or_default(),
        container: e.container.clone().unwrap_or_default(),
        cgroup_hierarchy_id: e.cgroup.hierarchy_id,
        cgroup_id: e.cgroup.id,
        pid: e.pid,
        boottime_ns: e.boottime_ns,
        duration_ns: e.duration_ns,
    }
}

/// A whole snapshot; Pods only if asked.
pub fn snapshot(s: &Snapshot, include_pods: bool) -> pb::HeadroomSnapshot {
    pb::HeadroomSnapshot {
        version: s.version,
        node_name: s.node_name.clone(),
        generated_at: Some(timestamp(s.generated_at)),
        node: Some(node(&s.node)),
        node_pressure: Some(pressure(&s.node_pressure)),
        pods: if include_pods {
            s.pods.iter().map(pod).collect()
        } else {
            Vec::new()
        },
        reservations: s.reservations.iter().map(reservation).collect(),
        pipeline: Some(pb::PipelineStats {
            processed_total: s.stats.processed_total,
            dropped_total: s.stats.dropped_total,
            unattributed_total: s.stats.unattributed_total,
            queue_capacity: s.stats.queue_capacity,
        }),
        kernel_events: s.kernel_events.iter().map(kernel_event).collect(),
    }
}
