//! A Pod-level shrink as per-container requests (and limits) — the shape of a `/resize` patch.
//!
//! The Pod-level amount taken is split over the containers in proportion to their requests (the
//! rounding remainder from the biggest). A limit equal to its old request moves with it, so a
//! Guaranteed Pod stays Guaranteed (the API server refuses a resize that changes the QoS class);
//! any other limit is left alone.

use std::collections::BTreeMap;

use headroom_node_model::{
    ResourceName, Resources, format_cpu_millis, format_memory_bytes, parse_cpu_millis, parse_memory_bytes,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::json;

/// The new resources of one container (only the resources that change).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContainerShrink {
    pub name: String,
    pub requests: BTreeMap<String, Quantity>,
    pub limits: BTreeMap<String, Quantity>,
}

fn parse(resource: ResourceName, q: &Quantity) -> Result<i64, String> {
    match resource {
        ResourceName::Cpu => parse_cpu_millis(&q.0),
        ResourceName::Memory => parse_memory_bytes(&q.0),
    }
    .map_err(|e| format!("{resource} {:?}: {e}", q.0))
}

fn quantity(resource: ResourceName, value: i64) -> Quantity {
    Quantity(match resource {
        ResourceName::Cpu => format_cpu_millis(value),
        ResourceName::Memory => format_memory_bytes(value),
    })
}

/// The containers' new resources for taking `from − to` (per resource, where positive) from
/// `pod`. Refuses a Pod whose requests cannot carry it (every container keeps at least 1m / 1
/// byte of what it requested).
pub fn container_shrinks(pod: &Pod, from: Resources, to: Resources) -> Result<Vec<ContainerShrink>, String> {
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let mut out: Vec<ContainerShrink> = containers
        .iter()
        .map(|c| ContainerShrink {
            name: c.name.clone(),
            ..ContainerShrink::default()
        })
        .collect();
    for resource in ResourceName::ALL {
        let take = from.get(resource).saturating_sub(to.get(resource));
        if take <= 0 {
            continue;
        }
        let mut requested = Vec::with_capacity(containers.len());
        for c in containers {
            let resources = c.resources.as_ref();
            let request = resources
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get(resource.as_str()))
                .map(|q| parse(resource, q))
                .transpose()?
                .unwrap_or(0);
            let limit = resources
                .and_then(|r| r.limits.as_ref())
                .and_then(|r| r.get(resource.as_str()))
                .map(|q| parse(resource, q))
                .transpose()?;
            requested.push((request, limit));
        }
        let total: i64 = requested.iter().map(|(r, _)| *r).sum();
        if total <= take {
            return Err(format!(
                "its containers request {} {resource} in all, not more than the {} to take",
                total, take
            ));
        }
        let mut taken: Vec<i64> = requested
            .iter()
            .map(|(r, _)| i64::try_from(i128::from(take) * i128::from(*r) / i128::from(total)).unwrap_or(0))
            .collect();
        let remainder = take - taken.iter().sum::<i64>();
        if let Some(biggest) =
            (0..requested.len()).max_by_key(|&k| (requested[k].0 - taken[k], std::cmp::Reverse(k)))
        {
            taken[biggest] += remainder;
        }
        for (k, ((request, limit), took)) in requested.iter().zip(&taken).enumerate() {
            if *took <= 0 {
                continue;
            }
            let new = request - took;
            if new < 1 {
                return Err(format!(
                    "container {} cannot give {took} of its {request} {resource}",
                    out[k].name
                ));
            }
            out[k]
                .requests
                .insert(resource.as_str().into(), quantity(resource, new));
            if *limit == Some(*request) {
                out[k]
                    .limits
                    .insert(resource.as_str().into(), quantity(resource, new));
            }
        }
    }
    out.retain(|c| !c.requests.is_empty());
    Ok(out)
}

/// The body of `kubectl patch pod … --subresource resize` for these shrinks.
pub fn resize_patch(shrinks: &[ContainerShrink]) -> serde_json::Value {
    let containers: Vec<serde_json::Value> = shrinks
        .iter()
        .map(|c| {
            let mut resources = serde_json::Map::new();
            resources.insert("requests".into(), json!(c.requests));
            if !c.limits.is_empty() {
                resources.insert("limits".into(), json!(c.limits));
            }
            json!({"name": c.name, "resources": resources})
        })
        .collect();
    json!({"spec": {"containers": containers}})
}

/// Writes the shrinks into `pod`'s spec (as the API server does with the patch).
pub fn apply_to(pod: &mut Pod, shrinks: &[ContainerShrink]) {
    let Some(spec) = pod.spec.as_mut() else { return };
    for shrink in shrinks {
        let Some(c) = spec.containers.iter_mut().find(|c| c.name == shrink.name) else {
            continue;
        };
        let resources = c.resources.get_or_insert_with(Default::default);
        let requests = resources.requests.get_or_insert_with(Default::default);
        requests.extend(shrink.requests.clone());
        if !shrink.limits.is_empty() {
            resources
                .limits
                .get_or_insert_with(Default::default)
                .extend(shrink.limits.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn pod(containers: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": containers}}))
            .unwrap()
    }

    #[test]
    fn a_guaranteed_container_keeps_limits_equal_to_requests() {
        let p = pod(json!([{"name": "worker", "resources": {
            "requests": {"cpu": "3", "memory": "500Mi"}, "limits": {"cpu": "3", "memory": "500Mi"}}}]));
        let shrinks = container_shrinks(&p, Resources::new(3000, 0), Resources::new(1000, 0)).unwrap();
        assert_eq!(shrinks.len(), 1);
        assert_eq!(shrinks[0].requests["cpu"], Quantity("1".into()));
        assert_eq!(shrinks[0].limits["cpu"], Quantity("1".into()));
        assert!(!shrinks[0].requests.contains_key("memory"));
        assert_eq!(
            resize_patch(&shrinks),
            json!({"spec": {"containers": [{"name": "worker", "resources": {
                "requests": {"cpu": "1"}, "limits": {"cpu": "1"}}}]}})
        );
    }

    #[test]
    fn taken_in_proportion_and_exactly() {
        let p = pod(json!([
            {"name": "a", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "4"}}},
            {"name": "b", "resources": {"requests": {"cpu": "2"}}},
        ]));
        let shrinks = container_shrinks(&p, Resources::new(3000, 0), Resources::new(1001, 0)).unwrap();
        let mut q = p.clone();
        apply_to(&mut q, &shrinks);
        let total = headroom_node_model::pod_requests(&q).unwrap();
        assert_eq!(total.cpu_millis, 1001);
        // A limit above the request stays.
        assert_eq!(shrinks.iter().find(|c| c.name == "a").unwrap().limits.len(), 0);
    }

    #[test]
    fn refuses_what_the_containers_cannot_give() {
        let p = pod(json!([{"name": "a", "resources": {"requests": {"cpu": "1"}}}]));
        assert!(container_shrinks(&p, Resources::new(2000, 0), Resources::new(500, 0)).is_err());
    }
}
