//! The node model's arithmetic on Pod JSON as the API server returns it (fixtures/*.json).
#![allow(clippy::unwrap_used)]

use headroom_node_model::{
    ModelError, QosClass, ResizeState, Resources, node_headroom, pod_requests, qos_class, resize_state,
};
use k8s_openapi::api::core::v1::Pod;

const MI: i64 = 1 << 20;
const GI: i64 = 1 << 30;

fn fixture(name: &str) -> Pod {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn seed_deferred_resize_counts_the_desired_six_cpus() {
    let pod = fixture("seed-high-priority-deferred.json");
    assert_eq!(pod_requests(&pod).unwrap(), Resources::new(6000, GI));
    assert_eq!(
        resize_state(&pod),
        ResizeState::Deferred {
            message: "Node didn't have enough resource: cpu, requested: 6000, used: 3950, capacity: 8000"
                .into()
        }
    );
    assert_eq!(qos_class(&pod), QosClass::Guaranteed);
}

#[test]
fn seed_node_headroom_matches_the_kubelet_message() {
    // Node 8 CPU; other pods use 3950m (the kubelet's "used"); the resizing pod counts 6000m.
    let pod = fixture("seed-high-priority-deferred.json");
    let allocated = Resources::new(3950, 0)
        .checked_add(pod_requests(&pod).unwrap())
        .unwrap();
    let h = node_headroom(Resources::new(8000, 16 * GI), allocated, Resources::ZERO);
    assert_eq!(h.headroom.cpu_millis, 8000 - 3950 - 6000);
}

#[test]
fn infeasible_resize_ignores_the_desired_spec() {
    let pod = fixture("infeasible-memory.json");
    assert!(resize_state(&pod).is_infeasible());
    assert_eq!(pod_requests(&pod).unwrap(), Resources::new(500, GI));

    // The same pod, had the kubelet Deferred it instead, is charged the desired 4500Mi.
    let mut deferred = pod.clone();
    let conditions = deferred.status.as_mut().unwrap().conditions.as_mut().unwrap();
    conditions[0].reason = Some("Deferred".into());
    assert!(resize_state(&deferred).is_deferred());
    assert_eq!(pod_requests(&deferred).unwrap(), Resources::new(500, 4500 * MI));
}

#[test]
fn in_progress_decrease_counts_the_not_yet_actuated_actual() {
    let pod = fixture("in-progress-decrease.json");
    assert_eq!(resize_state(&pod), ResizeState::InProgress);
    assert_eq!(pod_requests(&pod).unwrap(), Resources::new(2000, 768 * MI));
}

#[test]
fn in_progress_error_is_reported_with_its_message() {
    let pod = fixture("in-progress-error.json");
    match resize_state(&pod) {
        ResizeState::Error { message } => assert!(message.contains("below current usage"), "{message}"),
        other => panic!("expected Error, got {other:?}"),
    }
    assert_eq!(pod_requests(&pod).unwrap(), Resources::new(250, 512 * MI));
    assert_eq!(qos_class(&pod), QosClass::Burstable);
}

#[test]
fn init_containers_sidecars_and_overhead() {
    let pod = fixture("init-and-sidecars.json");
    // cpu: running = web 1 + envoy 0.5 = 1.5; init peak = migrate 2 (before the sidecar starts),
    // warm-cache 1 + envoy 0.5 = 1.5; max = 2; + overhead 250m.
    // memory: running = 256Mi + 128Mi; init peak = warm-cache 512Mi + envoy 128Mi = 640Mi; + 120Mi.
    assert_eq!(pod_requests(&pod).unwrap(), Resources::new(2250, 760 * MI));
    assert_eq!(resize_state(&pod), ResizeState::None);

    // Without the sidecar flag envoy is an ordinary init container: no longer part of the running sum.
    let mut plain = pod.clone();
    plain.spec.as_mut().unwrap().init_containers.as_mut().unwrap()[1].restart_policy = None;
    assert_eq!(
        pod_requests(&plain).unwrap(),
        Resources::new(2000 + 250, 512 * MI + 120 * MI)
    );
}

#[test]
fn pod_level_resources_override_the_container_sum() {
    let pod = fixture("pod-level-resources.json");
    assert!(resize_state(&pod).is_deferred());
    // cpu: pod-level desired 3 > allocated 2; memory: shrinking from 3Gi, still actual 3Gi.
    assert_eq!(pod_requests(&pod).unwrap(), Resources::new(3000, 3 * GI));

    let mut no_pod_level = pod.clone();
    no_pod_level.spec.as_mut().unwrap().resources = None;
    assert_eq!(
        pod_requests(&no_pod_level).unwrap(),
        Resources::new(750, 512 * MI)
    );
}

#[test]
fn best_effort_counts_zero() {
    let pod = fixture("best-effort.json");
    assert_eq!(pod_requests(&pod).unwrap(), Resources::ZERO);
    assert_eq!(qos_class(&pod), QosClass::BestEffort);
}

#[test]
fn qos_computed_from_spec_matches_the_api_servers() {
    for name in [
        "seed-high-priority-deferred.json",
        "infeasible-memory.json",
        "in-progress-error.json",
        "init-and-sidecars.json",
        "best-effort.json",
    ] {
        let pod = fixture(name);
        let recorded = qos_class(&pod);
        let mut unrecorded = pod.clone();
        unrecorded.status.as_mut().unwrap().qos_class = None;
        assert_eq!(qos_class(&unrecorded), recorded, "{name}");
    }
}

#[test]
fn garbage_quantity_is_a_typed_error_naming_the_container() {
    let mut pod = fixture("seed-high-priority-deferred.json");
    let requests = pod.spec.as_mut().unwrap().containers[0]
        .resources
        .as_mut()
        .unwrap()
        .requests
        .as_mut()
        .unwrap();
    requests.insert(
        "cpu".into(),
        k8s_openapi::apimachinery::pkg::api::resource::Quantity("-6".into()),
    );
    let err = pod_requests(&pod).unwrap_err();
    assert!(matches!(err, ModelError::InvalidQuantity { .. }));
    assert!(err.to_string().contains("container app"), "{err}");
}

#[test]
fn limits_only_defaults_requests_to_limits() {
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "l"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1500m", "memory": "1G"}}}]}
    }))
    .unwrap();
    assert_eq!(pod_requests(&pod).unwrap(), Resources::new(1500, 1_000_000_000));
    assert_eq!(qos_class(&pod), QosClass::Guaranteed);
}
