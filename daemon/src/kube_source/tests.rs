//! The mapping on API objects as the API server serves them (fields a kubelet-registered Node and
//! scheduled Pods really carry).
#![allow(clippy::unwrap_used)]

use super::*;
use serde_json::{Value, json};

fn node_json() -> Value {
    json!({
        "kind": "Node", "apiVersion": "v1",
        "metadata": {
            "name": "node-a", "uid": "b1f0c2d3-4e5f-4a6b-8c7d-9e0f1a2b3c4d", "resourceVersion": "901",
            "creationTimestamp": "2026-06-30T08:00:00Z",
            "labels": {"kubernetes.io/hostname": "node-a", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"}
        },
        "spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"]},
        "status": {
            "capacity": {"cpu": "4", "ephemeral-storage": "101430960Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": "16283636Ki", "pods": "110"},
            "allocatable": {"cpu": "3920m", "ephemeral-storage": "93478772582", "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": "13134516Ki", "pods": "110"},
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": "2026-07-01T10:00:00Z", "lastTransitionTime": "2026-06-30T08:00:00Z", "reason": "KubeletHasSufficientMemory", "message": "kubelet has sufficient memory available"},
                {"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-07-01T10:00:00Z", "lastTransitionTime": "2026-06-30T08:00:10Z", "reason": "KubeletReady", "message": "kubelet is posting ready status"}
            ],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.11"}, {"type": "Hostname", "address": "node-a"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": "5c2a", "systemUUID": "5c2a", "bootID": "0d6e", "kernelVersion": "6.8.0-45-generic",
                "osImage": "Ubuntu 24.04.1 LTS", "containerRuntimeVersion": "containerd://2.0.0",
                "kubeletVersion": "v1.34.0", "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"
            }
        }
    })
}

fn container(name: &str, cpu: &str, memory: &str) -> Value {
    json!({
        "name": name, "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": memory}},
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent"
    })
}

fn pod_json(name: &str, uid: &str, phase: &str, containers: Vec<Value>) -> Value {
    json!({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {
            "name": name, "namespace": "default", "uid": uid, "resourceVersion": "1001",
            "creationTimestamp": "2026-07-01T10:00:00Z", "labels": {"app": name}
        },
        "spec": {
            "containers": containers,
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "nodeName": "node-a", "schedulerName": "default-scheduler",
            "priority": 0, "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority"
        },
        "status": {"phase": phase, "hostIP": "10.0.0.11", "podIP": "10.244.1.7", "qosClass": "Burstable", "startTime": "2026-07-01T10:00:01Z"}
    })
}

fn pod(v: Value) -> Pod {
    serde_json::from_value(v).unwrap()
}

#[test]
fn node_allocatable_is_read_from_status_allocatable() {
    let node: Node = serde_json::from_value(node_json()).unwrap();
    // Allocatable, not capacity: 3920m and 13134516Ki.
    assert_eq!(
        node_allocatable(&node).unwrap(),
        Resources::new(3_920, 13_134_516 * 1024)
    );
}

#[test]
fn node_without_or_with_bad_allocatable_is_an_error_not_a_panic() {
    let mut v = node_json();
    v["status"]["allocatable"]
        .as_object_mut()
        .unwrap()
        .remove("memory");
    let e = node_allocatable(&serde_json::from_value(v).unwrap()).unwrap_err();
    assert!(
        e.to_string().contains("status.allocatable.memory is missing"),
        "{e}"
    );

    let mut v = node_json();
    v["status"]["allocatable"]["cpu"] = json!("lots");
    let e = node_allocatable(&serde_json::from_value(v).unwrap()).unwrap_err();
    assert!(e.to_string().contains("status.allocatable.cpu \"lots\""), "{e}");

    let mut v = node_json();
    v.as_object_mut().unwrap().remove("status");
    assert!(node_allocatable(&serde_json::from_value(v).unwrap()).is_err());
}

#[test]
fn plain_pod_counts_the_sum_of_its_containers() {
    let p = pod(pod_json(
        "web",
        "11111111-1111-4111-8111-111111111111",
        "Running",
        vec![
            container("app", "250m", "256Mi"),
            container("log", "500m", "512Mi"),
        ],
    ));
    let entry = pod_entry(&p).unwrap().unwrap();
    assert_eq!(
        entry.pod,
        PodRef::new("default", "web", "11111111-1111-4111-8111-111111111111")
    );
    assert_eq!(entry.requests, Resources::new(750, 768 << 20));
}

#[test]
fn init_and_sidecar_containers_count_as_the_scheduler_counts_them() {
    let mut v = pod_json(
        "batch",
        "22222222-2222-4222-8222-222222222222",
        "Running",
        vec![container("app", "500m", "256Mi")],
    );
    let mut sidecar = container("proxy", "100m", "64Mi");
    sidecar["restartPolicy"] = json!("Always");
    v["spec"]["initContainers"] = json!([sidecar, container("migrate", "1", "1Gi")]);
    let entry = pod_entry(&pod(v)).unwrap().unwrap();
    // Steady state: sidecar + app = 600m, 320Mi. While `migrate` runs: it + the sidecar started
    // before it = 1100m, 1088Mi. The Pod needs the larger of the two.
    assert_eq!(entry.requests, Resources::new(1_100, 1_088 << 20));
}

#[test]
fn resizing_pod_counts_the_larger_of_desired_and_admitted() {
    let uid = "33333333-3333-4333-8333-333333333333";
    let mut v = pod_json("resizer", uid, "Running", vec![container("app", "2", "1Gi")]);
    v["status"]["conditions"] = json!([
        {"type": "Ready", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-07-01T10:00:03Z"},
        {"type": "PodResizePending", "status": "True", "reason": "Deferred",
         "message": "Node didn't have enough resource: cpu, requested: 2000, used: 3500, capacity: 3920",
         "lastProbeTime": null, "lastTransitionTime": "2026-07-01T10:05:00Z", "observedGeneration": 2}
    ]);
    v["status"]["containerStatuses"] = json!([{
        "name": "app", "ready": true, "restartCount": 0, "started": true,
        "image": "registry.k8s.io/pause:3.10", "imageID": "registry.k8s.io/pause@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a",
        "containerID": "containerd://3333", "state": {"running": {"startedAt": "2026-07-01T10:00:02Z"}},
        "allocatedResources": {"cpu": "1", "memory": "1Gi"},
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "1Gi"}}
    }]);
    let p = pod(v);
    assert!(resize_state_is_deferred(&p));
    let entry = pod_entry(&p).unwrap().unwrap();
    // The scheduler charges a Deferred resize at its desired size (2 CPUs), not the admitted 1.
    assert_eq!(entry.requests, Resources::new(2_000, 1 << 30));
}

fn resize_state_is_deferred(p: &Pod) -> bool {
    headroom_node_model::resize_state(p).is_deferred()
}

#[test]
fn terminal_pods_do_not_count() {
    for phase in ["Succeeded", "Failed"] {
        let p = pod(pod_json(
            "job",
            "44444444-4444-4444-8444-444444444444",
            phase,
            vec![container("app", "1", "1Gi")],
        ));
        assert!(is_terminal(&p));
        assert_eq!(pod_entry(&p).unwrap(), None, "{phase}");
    }
    for phase in ["Pending", "Running", "Unknown"] {
        let p = pod(pod_json(
            "job",
            "44444444-4444-4444-8444-444444444444",
            phase,
            vec![container("app", "1", "1Gi")],
        ));
        assert!(pod_entry(&p).unwrap().is_some(), "{phase} counts");
    }
}

#[test]
fn pod_entries_keeps_the_counted_ones_and_never_undercounts_unreadable_ones() {
    let ok = pod(pod_json(
        "web",
        "11111111-1111-4111-8111-111111111111",
        "Running",
        vec![container("app", "250m", "256Mi")],
    ));
    let done = pod(pod_json(
        "job",
        "44444444-4444-4444-8444-444444444444",
        "Succeeded",
        vec![container("app", "1", "1Gi")],
    ));
    let bad = pod(pod_json(
        "bad",
        "55555555-5555-4555-8555-555555555555",
        "Running",
        vec![container("app", "a lot", "1Gi")],
    ));
    assert!(matches!(pod_entry(&bad), Err(KubeSourceError::Requests { .. })));
    let entries = pod_entries([&ok, &done, &bad]);
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].requests, Resources::new(250, 256 << 20));
    assert_eq!(entries[1].pod.name, "bad");
    assert_eq!(entries[1].requests, Resources::new(i64::MAX, i64::MAX));
}

#[test]
fn node_name_comes_from_the_flag_then_node_name_env() {
    assert_eq!(resolve_node_name(Some("a"), Some("b".into())).unwrap(), "a");
    assert_eq!(resolve_node_name(None, Some("b".into())).unwrap(), "b");
    assert!(matches!(
        resolve_node_name(None, Some(String::new())),
        Err(KubeSourceError::NoNodeName)
    ));
    assert!(matches!(
        resolve_node_name(None, None),
        Err(KubeSourceError::NoNodeName)
    ));
}

#[test]
fn only_a_pod_set_that_counts_differently_reaches_the_sink() {
    let sink = InMemoryPodSource::default();
    // What `on_pods` was told, in order: each set it saw, as uids.
    let told = Arc::new(std::sync::Mutex::new(Vec::<Vec<String>>::new()));
    let on_pods: OnPods = {
        let told = told.clone();
        Arc::new(move |pods| {
            let uids = pods.iter().map(|p| p.pod.uid.clone()).collect();
            told.lock().unwrap().push(uids);
        })
    };
    let hand_on = |pods: &[Value]| {
        let pods: Vec<Pod> = pods.iter().cloned().map(pod).collect();
        let before = sink.generation();
        let changed = super::hand_on(&sink, pod_entries(&pods), Some(&on_pods));
        assert_eq!(changed, sink.generation() > before);
        sink.generation()
    };
    let a = pod_json(
        "a",
        "aaaaaaaa-0000-4000-8000-000000000001",
        "Running",
        vec![container("app", "1", "1Gi")],
    );
    let b = pod_json(
        "b",
        "bbbbbbbb-0000-4000-8000-000000000002",
        "Running",
        vec![container("app", "500m", "256Mi")],
    );
    let first = hand_on(&[a.clone(), b.clone()]);
    // The same Pods in the other order, then with a status condition the kubelet wrote
    // (a Deferred mark): the node counts nothing new.
    assert_eq!(hand_on(&[b.clone(), a.clone()]), first);
    let mut marked = a.clone();
    marked["status"]["conditions"] =
        json!([{"type": "PodResizePending", "status": "True", "reason": "Deferred"}]);
    assert_eq!(hand_on(&[marked.clone(), b.clone()]), first);
    // A resize the node counts, and a Pod gone: each is a new set.
    let mut resized = marked;
    resized["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("1500m");
    let after_resize = hand_on(&[resized.clone(), b]);
    assert!(after_resize > first);
    let counted: Vec<Resources> = sink.pods().pods.iter().map(|e| e.requests).collect();
    assert!(counted.contains(&Resources::new(1_500, 1 << 30)), "{counted:?}");
    assert!(hand_on(&[resized]) > after_resize);
    assert_eq!(sink.pods().pods.len(), 1);
    // Told once per new set (the first, the resize, the Pod gone), never for the rest.
    let a_uid = "aaaaaaaa-0000-4000-8000-000000000001".to_string();
    let b_uid = "bbbbbbbb-0000-4000-8000-000000000002".to_string();
    assert_eq!(
        *told.lock().unwrap(),
        vec![
            vec![a_uid.clone(), b_uid.clone()],
            vec![a_uid.clone(), b_uid],
            vec![a_uid]
        ]
    );
}
