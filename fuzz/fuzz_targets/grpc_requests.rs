//! Arbitrary bytes decoded as each `headroom.v1` request, then run through the server's
//! validation. Never a panic; refusals are `Status` errors; what is accepted stays within the
//! node and names no path outside the cgroup roots (cross-checked with the actuator's own
//! path-component rule).
#![no_main]

use headroom_actuator::path::validate_id;
use headroom_node_model::Resources;
use headroom_proto::v1 as pb;
use headroomd::server::validate;
use libfuzzer_sys::fuzz_target;
use prost::Message as _;

const NODE: Resources = Resources::new(8000, 16 << 30);

fn pod_id_ok(id: &str) {
    match id.split_once('/') {
        Some((ns, name)) => {
            assert!(validate_id("namespace", ns).is_ok(), "{id:?}");
            assert!(validate_id("name", name).is_ok(), "{id:?}");
        }
        None => assert!(validate_id("pod uid", id).is_ok(), "{id:?}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, bytes)) = data.split_first() else {
        return;
    };
    match selector % 5 {
        0 => {
            if let Ok(r) = pb::ReserveRequest::decode(bytes) {
                let ok = validate::reservation_id("reservation_id", &r.reservation_id)
                    .and_then(|()| validate::pod_id("pod", &r.pod))
                    .and_then(|()| validate::resource_amount(r.amount.as_ref(), NODE));
                if let Ok(amount) = ok {
                    pod_id_ok(&r.pod);
                    assert!((0..=NODE.cpu_millis).contains(&amount.cpu_millis));
                    assert!((0..=NODE.memory_bytes).contains(&amount.memory_bytes));
                    assert!(amount.cpu_millis > 0 || amount.memory_bytes > 0);
                }
            }
        }
        1 => {
            if let Ok(r) = pb::ReleaseRequest::decode(bytes) {
                let _ = validate::reservation_id("reservation_id", &r.reservation_id);
            }
        }
        2 => {
            if let Ok(r) = pb::ApplyResizeRequest::decode(bytes)
                && let Ok(resize) = validate::resize(&r, NODE)
            {
                assert!(
                    validate_id("pod uid", &resize.pod_uid).is_ok(),
                    "{:?}",
                    resize.pod_uid
                );
                assert!(resize.containers.len() <= validate::MAX_CONTAINERS);
                for c in &resize.containers {
                    assert!(validate_id("container", &c.name).is_ok(), "{:?}", c.name);
                    for v in [c.cpu_request_millis, c.cpu_limit_millis].into_iter().flatten() {
                        // Validated once into unsigned amounts: never above the node.
                        assert!(u64::try_from(NODE.cpu_millis).is_ok_and(|max| v <= max));
                    }
                    for v in [c.memory_request_bytes, c.memory_limit_bytes]
                        .into_iter()
                        .flatten()
                    {
                        assert!(u64::try_from(NODE.memory_bytes).is_ok_and(|max| v <= max));
                    }
                }
            }
        }
        3 => {
            if let Ok(r) = pb::ListPodsRequest::decode(bytes) {
                if validate::pod_uid("pod_uid", &r.pod_uid).is_ok() {
                    assert!(validate_id("pod uid", &r.pod_uid).is_ok());
                }
                let _ = validate::pod_id("namespace", &format!("{}/x", r.namespace));
            }
        }
        _ => {
            let _ = pb::GetHeadroomRequest::decode(bytes);
            let _ = pb::WatchHeadroomRequest::decode(bytes);
            if let Ok(r) = pb::ReserveRequest::decode(bytes) {
                // Whatever decodes re-encodes and decodes to the same message.
                assert_eq!(
                    pb::ReserveRequest::decode(r.encode_to_vec().as_slice()).ok(),
                    Some(r)
                );
            }
        }
    }
});
