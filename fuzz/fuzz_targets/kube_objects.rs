//! What the API server sends, as the watches receive it: a watch event line
//! (`{"type": …, "object": …}`) or a bare object, decoded as a Pod or a Node with
//! k8s-openapi's types, then read the way headroom reads them: the kubelet's resize conditions
//! and `allocatedResources` (the Kubernetes backend's view of a resize), the Pod's requests as the
//! scheduler counts them, headroomd's Pod entry and the Node's allocatable. Never a panic, and
//! the readings agree with one another.
#![no_main]

use headroom_node_model::{ResizeState, pod_requests, pod_requests_admitted, resize_state};
use headroom_shim::kube::reconcile::resize_completed;
use headroomd::kube_source::{node_allocatable, pod_entry};
use k8s_openapi::api::core::v1::{Node, Pod};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    // A watch event carries the object under "object"; a list item or GET is the object itself.
    let object = value.get("object").cloned().unwrap_or(value);
    if let Ok(pod) = serde_json::from_value::<Pod>(object.clone()) {
        let state = resize_state(&pod);
        // A resize the kubelet still holds (pending or in progress) is never complete.
        if !matches!(state, ResizeState::None) {
            assert!(!resize_completed(&pod), "completed while {state:?}");
        }
        let requests = pod_requests(&pod);
        let _ = pod_requests_admitted(&pod);
        if let Ok(Some(entry)) = pod_entry(&pod) {
            // What headroomd counts is never negative: a parsed amount is a request.
            assert!(
                entry.requests.cpu_millis >= 0 && entry.requests.memory_bytes >= 0,
                "{entry:?}"
            );
            assert!(requests.is_ok(), "counted a Pod whose requests do not parse");
        }
    }
    if let Ok(node) = serde_json::from_value::<Node>(object)
        && let Ok(allocatable) = node_allocatable(&node)
    {
        assert!(
            allocatable.cpu_millis >= 0 && allocatable.memory_bytes >= 0,
            "{allocatable:?}"
        );
    }
});
