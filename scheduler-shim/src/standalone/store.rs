//! The Pod store: what the API server and the kubelet would hold for this one node. Pods come
//! from ordinary YAML; admission resolves priorities (as the API server's Priority plugin does),
//! the kubelet's admission checks the node's allocatable, and the status is set as the kubelet sets
//! it for a running Pod.

use std::collections::BTreeMap;
use std::time::Instant;

use headroom_node_model::{Resources, pod_requests, pod_requests_admitted, qos_class};
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStatus, Node, NodeSpec, NodeStatus, Pod, PodCondition,
    PodStatus,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::events::EventStore;
use super::runtime::PodRuntime;
use super::{NodeConfig, StandaloneError};
use crate::cluster_file::ClusterFile;

/// The built-in PriorityClasses every API server has.
const SYSTEM_PRIORITY_CLASSES: [(&str, i32); 2] = [
    ("system-cluster-critical", 2_000_000_000),
    ("system-node-critical", 2_000_001_000),
];

/// A Pod and what runs it.
#[derive(Debug)]
pub struct StoredPod {
    pub pod: Pod,
    /// `None` for a Pod the kubelet rejected, or while it is being stopped.
    pub runtime: Option<PodRuntime>,
    /// When the pending resize was asked for (the latency of each step is measured from here).
    pub resize_requested_at: Option<Instant>,
    /// The reservation held for this Pod's resize.
    pub reservation: Option<String>,
    /// Chosen as a victim and being stopped: still counted by the kubelet until it is gone, but
    /// no longer offered to the decision core (its room is promised to the preemptor).
    pub terminating: bool,
}

#[derive(Debug, Default)]
pub struct Store {
    /// By `namespace/name`.
    pub pods: BTreeMap<String, StoredPod>,
    pub priority_classes: BTreeMap<String, PriorityClass>,
    pub events: EventStore,
}

pub fn key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

/// `NAME` or `NAMESPACE/NAME` → `namespace/name`.
pub fn pod_key(arg: &str) -> String {
    if arg.contains('/') {
        arg.to_string()
    } else {
        format!("default/{arg}")
    }
}

/// A random RFC 4122 version 4 UUID, as the API server assigns `metadata.uid`.
pub fn new_uid() -> String {
    let mut b = [0u8; 16];
    let random =
        std::fs::File::open("/dev/urandom").and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b));
    if random.is_err() {
        // Unique is what matters here, not unpredictable.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        b = (nanos ^ (u128::from(std::process::id()) << 64)).to_le_bytes();
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

fn condition(type_: &str, now: &Time) -> PodCondition {
    PodCondition {
        type_: type_.into(),
        status: "True".into(),
        last_transition_time: Some(now.clone()),
        observed_generation: Some(1),
        ..PodCondition::default()
    }
}

impl Store {
    /// `spec.priority` and `spec.preemptionPolicy` from the Pod's PriorityClass (or the global
    /// default), as the API server's Priority admission plugin writes them.
    fn resolve_priority(&self, pod: &mut Pod) -> Result<(), StandaloneError> {
        let key = key(pod);
        let Some(spec) = pod.spec.as_mut() else {
            return Err(StandaloneError::Invalid(format!("pod {key}: no spec")));
        };
        let class = match spec.priority_class_name.as_deref() {
            Some(name) => match self.priority_classes.get(name) {
                Some(c) => Some((c.value.unwrap_or(0), c.preemption_policy.clone())),
                None => SYSTEM_PRIORITY_CLASSES
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| (*v, None))
                    .map(Some)
                    .ok_or_else(|| {
                        StandaloneError::Invalid(format!(
                            "pod {key}: no PriorityClass with name {name} was found"
                        ))
                    })?,
            },
            None => self
                .priority_classes
                .values()
                .find(|c| c.global_default == Some(true))
                .map(|c| (c.value.unwrap_or(0), c.preemption_policy.clone())),
        };
        let (value, policy) = class.unwrap_or((0, None));
        spec.priority = Some(value);
        if spec.preemption_policy.is_none() {
            spec.preemption_policy = Some(policy.unwrap_or_else(|| "PreemptLowerPriority".into()));
        }
        Ok(())
    }

    /// The Pods counted against the node, with what the kubelet admitted for them.
    pub fn admitted_total(&self, except: Option<&str>) -> Result<Resources, StandaloneError> {
        let mut sum = Resources::ZERO;
        for (k, p) in &self.pods {
            if Some(k.as_str()) == except || (p.runtime.is_none() && !p.terminating) {
                continue;
            }
            sum = sum.saturating_add(pod_requests_admitted(&p.pod)?);
        }
        Ok(sum)
    }

    /// Creates a Pod: API server admission, the kubelet's admission against the node, then cgroups,
    /// processes and a Running status. A Pod the node cannot fit is stored `Failed` (`OutOf<res>`).
    pub fn create_pod(&mut self, mut pod: Pod, node: &NodeConfig) -> Result<String, StandaloneError> {
        let name = pod.metadata.name.clone().filter(|n| !n.is_empty());
        let Some(name) = name else {
            return Err(StandaloneError::Invalid("a Pod without metadata.name".into()));
        };
        pod.metadata.namespace.get_or_insert_with(|| "default".into());
        let key = key(&pod);
        if self.pods.contains_key(&key) {
            return Ok(format!("pod/{name} unchanged"));
        }
        self.resolve_priority(&mut pod)?;
        let uid = new_uid();
        let now = Time(jiff::Timestamp::now());
        pod.metadata = ObjectMeta {
            uid: Some(uid.clone()),
            generation: Some(1),
            creation_timestamp: Some(now.clone()),
            ..pod.metadata
        };
        if let Some(spec) = pod.spec.as_mut() {
            spec.node_name = Some(node.name.clone());
        }
        let requests = pod_requests(&pod)?;
        let used = self.admitted_total(None)?;
        if let Some(resource) = used
            .saturating_add(requests)
            .insufficient(&node.allocatable)
            .first()
        {
            // The kubelet's admission failure: the Pod is rejected, nothing runs.
            pod.status = Some(PodStatus {
                phase: Some("Failed".into()),
                reason: Some(format!("OutOf{resource}")),
                message: Some(format!(
                    "Pod was rejected: {}",
                    crate::decide::deferred_message(*resource, requests, used, node.allocatable)
                )),
                ..PodStatus::default()
            });
            self.pods.insert(key, stored(pod, None));
            return Ok(format!(
                "pod/{name} created (rejected by the node: OutOf{resource})"
            ));
        }
        if let crate::give_way::GiveWay::Invalid(why) =
            crate::give_way::annotation::pod_give_way(&pod, requests, false)
        {
            // Accepted (an annotation never fails admission), but never shrunk; say so on the Pod.
            self.events.record(
                &pod,
                super::events::reasons::WARNING,
                crate::give_way::REASON_INVALID,
                format!("{why}; this Pod is never shrunk in place until it is fixed"),
                "headroom-shim",
            );
        }
        let runtime = PodRuntime::start(&node.roots, &pod, &uid)?;
        pod.status = Some(running_status(&pod, &runtime, &now));
        self.pods.insert(key, stored(pod, Some(runtime)));
        Ok(format!("pod/{name} created"))
    }

    /// The objects as the decision core's `cluster_file` reads them, with this machine as the Node.
    pub fn cluster(&self, node: &NodeConfig) -> ClusterFile {
        let mut allocatable = BTreeMap::new();
        allocatable.insert(
            "cpu".into(),
            Quantity(format!("{}m", node.allocatable.cpu_millis)),
        );
        allocatable.insert(
            "memory".into(),
            Quantity(node.allocatable.memory_bytes.to_string()),
        );
        ClusterFile {
            nodes: vec![Node {
                metadata: ObjectMeta {
                    name: Some(node.name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(NodeSpec::default()),
                status: Some(NodeStatus {
                    capacity: Some(allocatable.clone()),
                    allocatable: Some(allocatable),
                    ..NodeStatus::default()
                }),
            }],
            priority_classes: self.priority_classes.values().cloned().collect(),
            pods: self
                .pods
                .values()
                .filter(|p| p.runtime.is_some() && !p.terminating)
                .map(|p| p.pod.clone())
                .collect(),
            pdbs: Vec::new(),
            give_way: node.give_way.clone(),
        }
    }
}

fn stored(pod: Pod, runtime: Option<PodRuntime>) -> StoredPod {
    StoredPod {
        pod,
        runtime,
        resize_requested_at: None,
        reservation: None,
        terminating: false,
    }
}

/// The status the kubelet reports for a Pod whose containers all run.
fn running_status(pod: &Pod, runtime: &PodRuntime, now: &Time) -> PodStatus {
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let pids = runtime.pids();
    let statuses = containers
        .iter()
        .enumerate()
        .map(|(i, c)| ContainerStatus {
            name: c.name.clone(),
            image: c.image.clone().unwrap_or_default(),
            image_id: String::new(),
            container_id: pids.get(i).map(|pid| format!("headroom://{pid}")),
            ready: true,
            started: Some(true),
            restart_count: 0,
            state: Some(ContainerState {
                running: Some(ContainerStateRunning {
                    started_at: Some(now.clone()),
                }),
                ..ContainerState::default()
            }),
            // allocatedResources holds requests only; resources what the runtime reports.
            allocated_resources: c.resources.as_ref().and_then(|r| r.requests.clone()),
            resources: c.resources.clone(),
            ..ContainerStatus::default()
        })
        .collect();
    PodStatus {
        phase: Some("Running".into()),
        conditions: Some(
            ["PodScheduled", "Initialized", "ContainersReady", "Ready"]
                .iter()
                .map(|t| condition(t, now))
                .collect(),
        ),
        qos_class: Some(format!("{:?}", qos_class(pod))),
        start_time: Some(now.clone()),
        container_statuses: Some(statuses),
        observed_generation: Some(1),
        ..PodStatus::default()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn uids_look_like_the_api_servers() {
        let (a, b) = (new_uid(), new_uid());
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
        assert!(a.chars().all(|c| c.is_ascii_hexdigit() || c == '-'), "{a}");
    }

    #[test]
    fn unknown_priority_class_is_refused() {
        let store = Store::default();
        let mut pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"priorityClassName": "nope", "containers": []}
        }))
        .unwrap();
        let err = store.resolve_priority(&mut pod).unwrap_err();
        assert!(
            err.to_string().contains("no PriorityClass with name nope"),
            "{err}"
        );
    }
}
