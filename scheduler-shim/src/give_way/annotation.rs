//! The opt-in: `headroom.io/give-way` on a Pod, e.g. `cpu=1,memory=256Mi` (floors of the Pod's
//! total requests) or `cpu=50%` (a floor as a share of its requests when the plan is made).
//! The same annotation on a Node with the value `off` switches shrinking off on that node.

use headroom_node_model::{Resources, parse_cpu_millis, parse_memory_bytes};
use k8s_openapi::api::core::v1::{Node, Pod};

use super::{GiveWay, Offer};

pub const ANNOTATION: &str = "headroom.io/give-way";

/// Longer values are refused unread: nothing legitimate needs more.
const MAX_LEN: usize = 256;

fn annotation_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Option<&str> {
    meta.annotations.as_ref()?.get(ANNOTATION).map(String::as_str)
}

/// Reads an offer against the Pod's current requests (for `%` floors).
pub fn parse_offer(value: &str, requests: Resources) -> Result<Offer, String> {
    if value.len() > MAX_LEN {
        return Err(format!("longer than {MAX_LEN} characters"));
    }
    let mut offer = Offer::default();
    for part in value.split(',').map(str::trim) {
        if part.is_empty() {
            continue;
        }
        let (resource, amount) = part
            .split_once('=')
            .ok_or_else(|| format!("{part:?}: expected resource=floor, e.g. cpu=1 or memory=50%"))?;
        let (resource, amount) = (resource.trim(), amount.trim());
        let (slot, current, parse): (&mut Option<i64>, i64, fn(&str) -> _) = match resource {
            "cpu" => (&mut offer.cpu_floor_millis, requests.cpu_millis, parse_cpu_millis),
            "memory" => (
                &mut offer.memory_floor_bytes,
                requests.memory_bytes,
                parse_memory_bytes,
            ),
            other => return Err(format!("{other:?}: only cpu and memory can be offered")),
        };
        if slot.is_some() {
            return Err(format!("{resource} is given twice"));
        }
        let floor = match amount.strip_suffix('%') {
            Some(percent) => {
                let percent: i64 = percent
                    .trim()
                    .parse()
                    .map_err(|_| format!("{resource}={amount}: a share is a whole number of percent"))?;
                if !(1..=100).contains(&percent) {
                    return Err(format!("{resource}={amount}: a share is between 1% and 100%"));
                }
                // Rounded up: the floor never lets the Pod go below the share it named.
                current.saturating_mul(percent).saturating_add(99) / 100
            }
            None => parse(amount).map_err(|e| format!("{resource}={amount}: {e}"))?,
        };
        if floor <= 0 {
            return Err(format!("{resource}={amount}: a floor must be positive"));
        }
        *slot = Some(floor);
    }
    if offer.cpu_floor_millis.is_none() && offer.memory_floor_bytes.is_none() {
        return Err("offers nothing: name cpu, memory or both".into());
    }
    Ok(offer)
}

/// What `pod` (with Pod-level `requests`) offers; `namespace_off` when an operator switched
/// shrinking off for its namespace.
pub fn pod_give_way(pod: &Pod, requests: Resources, namespace_off: bool) -> GiveWay {
    let Some(value) = annotation_of(&pod.metadata) else {
        return GiveWay::NotOffered;
    };
    match parse_offer(value, requests) {
        Err(why) => GiveWay::Invalid(format!("annotation {ANNOTATION}={value:?}: {why}")),
        Ok(_) if namespace_off => GiveWay::NamespaceOff,
        Ok(offer) => GiveWay::Offered(offer),
    }
}

/// Whether `node` allows shrinking; `Err` for a value other than `on` or `off` (the node is then
/// treated as off: a typo must not start shrinking Pods).
pub fn node_allows(node: &Node) -> Result<bool, String> {
    match annotation_of(&node.metadata).map(str::trim) {
        None | Some("on") => Ok(true),
        Some("off") => Ok(false),
        Some(other) => Err(format!(
            "node annotation {ANNOTATION}={other:?}: only \"on\" and \"off\" are understood; shrinking is off on this node"
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const MI: i64 = 1 << 20;

    #[test]
    fn floors_absolute_and_as_shares() {
        let requests = Resources::new(3000, 500 * MI);
        assert_eq!(
            parse_offer("cpu=1, memory=256Mi", requests).unwrap(),
            Offer {
                cpu_floor_millis: Some(1000),
                memory_floor_bytes: Some(256 * MI)
            }
        );
        assert_eq!(
            parse_offer("cpu=50%", requests).unwrap(),
            Offer {
                cpu_floor_millis: Some(1500),
                memory_floor_bytes: None
            }
        );
        // Rounded up, never below the share.
        assert_eq!(
            parse_offer("cpu=33%", Resources::new(1001, 0))
                .unwrap()
                .cpu_floor_millis,
            Some(331)
        );
    }

    #[test]
    fn malformed_offers_say_why() {
        let r = Resources::new(1000, MI);
        for (value, expect) in [
            ("", "offers nothing"),
            ("cpu", "expected resource=floor"),
            ("gpu=1", "only cpu and memory"),
            ("cpu=1,cpu=2", "twice"),
            ("cpu=abc", "cpu=abc"),
            ("cpu=0", "positive"),
            ("memory=0%", "between 1% and 100%"),
            ("memory=150%", "between 1% and 100%"),
            ("memory=1.5%", "whole number"),
        ] {
            let e = parse_offer(value, r).unwrap_err();
            assert!(e.contains(expect), "{value:?}: {e}");
        }
        assert!(
            parse_offer(&"cpu=1,".repeat(100), r)
                .unwrap_err()
                .contains("longer than")
        );
    }

    #[test]
    fn pods_and_nodes() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "annotations": {ANNOTATION: "cpu=nope"}}
        }))
        .unwrap();
        let GiveWay::Invalid(why) = pod_give_way(&pod, Resources::ZERO, false) else {
            panic!("not refused")
        };
        assert!(
            why.starts_with("annotation headroom.io/give-way=\"cpu=nope\""),
            "{why}"
        );
        assert_eq!(
            pod_give_way(&Pod::default(), Resources::ZERO, false),
            GiveWay::NotOffered
        );

        let node = |v: &str| -> Node {
            serde_json::from_value(serde_json::json!({"metadata": {"annotations": {ANNOTATION: v}}})).unwrap()
        };
        assert_eq!(node_allows(&Node::default()), Ok(true));
        assert_eq!(node_allows(&node("off")), Ok(false));
        assert!(node_allows(&node("of")).is_err());
    }
}
