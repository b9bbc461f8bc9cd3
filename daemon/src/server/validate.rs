//! Checks on everything that arrives from the network, each failure a `Status` with a message
//! that names the field and the rule.

use headroom_node_model::{Resources, parse_cpu_millis, parse_memory_bytes};
use headroom_proto::v1 as pb;
use tonic::Status;

use super::actuator::{ContainerResize, PodLevelResize, ResizeRequest};

/// Longest reservation id.
pub const MAX_ID_LEN: usize = 128;
/// Most containers in one resize.
pub const MAX_CONTAINERS: usize = 64;
/// Most `releasing_pod_uids` in one reservation (a node runs at most a few hundred Pods).
pub const MAX_RELEASING: usize = 256;

fn invalid(msg: impl Into<String>) -> Status {
    Status::invalid_argument(msg)
}

/// Shows at most 64 characters of untrusted text, escaped.
pub fn shown(s: &str) -> String {
    let cut: String = s.chars().take(64).collect();
    if cut.len() < s.len() {
        format!("{cut:?}…")
    } else {
        format!("{cut:?}")
    }
}

/// A reservation id: 1–128 of `[A-Za-z0-9._:-]`.
pub fn reservation_id(field: &str, id: &str) -> Result<(), Status> {
    if id.is_empty() {
        return Err(invalid(format!("{field} is empty")));
    }
    if id.len() > MAX_ID_LEN {
        return Err(invalid(format!(
            "{field} is {} bytes long; at most {MAX_ID_LEN}",
            id.len()
        )));
    }
    if !id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'))
    {
        return Err(invalid(format!(
            "{field} {} may only contain [A-Za-z0-9._:-]",
            shown(id)
        )));
    }
    Ok(())
}

/// A Pod uid: 1–64 of `[A-Za-z0-9_-]` (it becomes part of a cgroup path, so no `/` or `.`).
pub fn pod_uid(field: &str, uid: &str) -> Result<(), Status> {
    if uid.is_empty() {
        return Err(invalid(format!("{field} is empty")));
    }
    if uid.len() > 64
        || !uid
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(invalid(format!(
            "{field} {} is not a Pod uid (1-64 characters of [A-Za-z0-9_-])",
            shown(uid)
        )));
    }
    Ok(())
}

fn dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// A Pod named by uid or `namespace/name`.
pub fn pod_id(field: &str, id: &str) -> Result<(), Status> {
    match id.split_once('/') {
        Some((ns, name)) if dns_subdomain(ns) && dns_subdomain(name) && ns.len() <= 63 => Ok(()),
        Some(_) => Err(invalid(format!(
            "{field} {} is not a valid namespace/name",
            shown(id)
        ))),
        None => pod_uid(field, id),
    }
}

/// `ReserveRequest.releasing_pod_uids`: at most [`MAX_RELEASING`] Pod uids, none of them the
/// reserved Pod itself; duplicates are collapsed. Uids the daemon does not count are not an error
/// (a victim may be gone already): the aggregator ignores them.
pub fn releasing_pod_uids(uids: &[String], reserved_pod: &str) -> Result<Vec<String>, Status> {
    if uids.len() > MAX_RELEASING {
        return Err(invalid(format!(
            "releasing_pod_uids has {} entries; at most {MAX_RELEASING}",
            uids.len()
        )));
    }
    let mut out: Vec<String> = Vec::with_capacity(uids.len());
    for (i, uid) in uids.iter().enumerate() {
        pod_uid(&format!("releasing_pod_uids[{i}]"), uid)?;
        if uid == reserved_pod {
            return Err(invalid(format!(
                "releasing_pod_uids[{i}] is the reserved Pod itself"
            )));
        }
        if !out.contains(uid) {
            out.push(uid.clone());
        }
    }
    Ok(out)
}

/// A container name: a DNS-1123 label.
pub fn container_name(field: &str, name: &str) -> Result<(), Status> {
    if name.len() <= 63 && dns_subdomain(name) && !name.contains('.') {
        Ok(())
    } else {
        Err(invalid(format!(
            "{field} {} is not a container name (DNS-1123 label)",
            shown(name)
        )))
    }
}

/// A non-negative amount that does not exceed the node's allocatable (checked once, here).
pub fn amount(field: &str, unit: &str, value: i64, allocatable: i64) -> Result<i64, Status> {
    if value < 0 {
        return Err(invalid(format!(
            "{field} is {value}{unit}: negative amounts are refused"
        )));
    }
    if value > allocatable {
        return Err(invalid(format!(
            "{field} is {value}{unit}, more than the node's allocatable {allocatable}{unit}"
        )));
    }
    Ok(value)
}

/// A [`pb::ResourceAmount`]: each resource as a number or a Kubernetes quantity, not both.
pub fn resource_amount(a: Option<&pb::ResourceAmount>, allocatable: Resources) -> Result<Resources, Status> {
    let Some(a) = a else {
        return Err(invalid("amount is missing"));
    };
    let cpu = match (a.cpu_millis, a.cpu.as_str()) {
        (Some(_), q) if !q.is_empty() => return Err(invalid("amount: give cpu_millis or cpu, not both")),
        (Some(m), _) => m,
        (None, "") => 0,
        (None, q) => parse_cpu_millis(q).map_err(|e| invalid(format!("amount.cpu: {e}")))?,
    };
    let memory = match (a.memory_bytes, a.memory.as_str()) {
        (Some(_), q) if !q.is_empty() => {
            return Err(invalid("amount: give memory_bytes or memory, not both"));
        }
        (Some(b), _) => b,
        (None, "") => 0,
        (None, q) => parse_memory_bytes(q).map_err(|e| invalid(format!("amount.memory: {e}")))?,
    };
    let cpu = amount("amount.cpu", "m", cpu, allocatable.cpu_millis)?;
    let memory = amount("amount.memory", " bytes", memory, allocatable.memory_bytes)?;
    if cpu == 0 && memory == 0 {
        return Err(invalid("amount is zero: nothing to reserve"));
    }
    Ok(Resources::new(cpu, memory))
}

/// An optional resize amount, validated by [`amount`] into the unsigned type the actuator takes.
fn opt(field: String, unit: &str, v: Option<i64>, allocatable: i64) -> Result<Option<u64>, Status> {
    v.map(|v| amount(&field, unit, v, allocatable).map(i64::unsigned_abs))
        .transpose()
}

fn request_le_limit(what: &str, request: Option<u64>, limit: Option<u64>) -> Result<(), Status> {
    if let (Some(r), Some(l)) = (request, limit)
        && r > l
    {
        return Err(invalid(format!("{what}: request {r} is greater than limit {l}")));
    }
    Ok(())
}

/// A whole `ApplyResize` request.
pub fn resize(r: &pb::ApplyResizeRequest, allocatable: Resources) -> Result<ResizeRequest, Status> {
    pod_uid("pod_uid", &r.pod_uid)?;
    if r.containers.len() > MAX_CONTAINERS {
        return Err(invalid(format!(
            "{} containers; at most {MAX_CONTAINERS}",
            r.containers.len()
        )));
    }
    if r.containers.is_empty() && r.pod.is_none() {
        return Err(invalid(
            "nothing to resize: no containers and no pod-level resources",
        ));
    }
    let mut containers = Vec::with_capacity(r.containers.len());
    for (i, c) in r.containers.iter().enumerate() {
        container_name(&format!("containers[{i}].name"), &c.name)?;
        if containers.iter().any(|x: &ContainerResize| x.name == c.name) {
            return Err(invalid(format!(
                "containers[{i}]: container {:?} appears twice",
                c.name
            )));
        }
        let f = |n: &str| format!("containers[{i}].{n}");
        let out = ContainerResize {
            name: c.name.clone(),
            cpu_request_millis: opt(
                f("cpu_request_millis"),
                "m",
                c.cpu_request_millis,
                allocatable.cpu_millis,
            )?,
            cpu_limit_millis: opt(
                f("cpu_limit_millis"),
                "m",
                c.cpu_limit_millis,
                allocatable.cpu_millis,
            )?,
            memory_request_bytes: opt(
                f("memory_request_bytes"),
                " bytes",
                c.memory_request_bytes,
                allocatable.memory_bytes,
            )?,
            memory_limit_bytes: opt(
                f("memory_limit_bytes"),
                " bytes",
                c.memory_limit_bytes,
                allocatable.memory_bytes,
            )?,
        };
        request_le_limit(&f("cpu"), out.cpu_request_millis, out.cpu_limit_millis)?;
        request_le_limit(&f("memory"), out.memory_request_bytes, out.memory_limit_bytes)?;
        containers.push(out);
    }
    let pod = match &r.pod {
        None => None,
        Some(p) => {
            let out = PodLevelResize {
                cpu_request_millis: opt(
                    "pod.cpu_request_millis".into(),
                    "m",
                    p.cpu_request_millis,
                    allocatable.cpu_millis,
                )?,
                cpu_limit_millis: opt(
                    "pod.cpu_limit_millis".into(),
                    "m",
                    p.cpu_limit_millis,
                    allocatable.cpu_millis,
                )?,
                memory_request_bytes: opt(
                    "pod.memory_request_bytes".into(),
                    " bytes",
                    p.memory_request_bytes,
                    allocatable.memory_bytes,
                )?,
                memory_limit_bytes: opt(
                    "pod.memory_limit_bytes".into(),
                    " bytes",
                    p.memory_limit_bytes,
                    allocatable.memory_bytes,
                )?,
            };
            request_le_limit("pod.cpu", out.cpu_request_millis, out.cpu_limit_millis)?;
            request_le_limit("pod.memory", out.memory_request_bytes, out.memory_limit_bytes)?;
            Some(out)
        }
    };
    let reservation_id = if r.reservation_id.is_empty() {
        None
    } else {
        reservation_id("reservation_id", &r.reservation_id)?;
        Some(r.reservation_id.clone())
    };
    Ok(ResizeRequest {
        pod_uid: r.pod_uid.clone(),
        containers,
        pod,
        reservation_id,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const NODE: Resources = Resources::new(8000, 16 << 30);

    #[test]
    fn identifiers_that_could_leave_the_cgroup_root_are_refused() {
        for bad in ["", "../etc", "a/b/c", "uid.with.dots", "x\0y", &"a".repeat(65)] {
            assert!(pod_uid("pod_uid", bad).is_err(), "{bad:?}");
        }
        assert!(pod_uid("pod_uid", "0d9a6c7e-1c2f-4a7b-9a55-3d2f1e0b9c11").is_ok());
        assert!(pod_id("pod", "default/web-0").is_ok());
        assert!(pod_id("pod", "default/../x").is_err());
        assert!(pod_id("pod", "Default/x").is_err());
        assert!(container_name("c", "app").is_ok());
        assert!(container_name("c", "a.b").is_err());
        assert!(reservation_id("id", "resize-1:cpu").is_ok());
        assert!(reservation_id("id", "a b").is_err());
    }

    #[test]
    fn amounts_numbers_or_quantities_never_negative_or_absurd() {
        let a = |cpu: Option<i64>, q: &str| pb::ResourceAmount {
            cpu_millis: cpu,
            cpu: q.into(),
            ..Default::default()
        };
        assert_eq!(
            resource_amount(Some(&a(None, "500m")), NODE).unwrap(),
            Resources::new(500, 0)
        );
        assert_eq!(
            resource_amount(Some(&a(Some(2000), "")), NODE).unwrap(),
            Resources::new(2000, 0)
        );
        let msg = resource_amount(Some(&a(Some(-1), "")), NODE)
            .unwrap_err()
            .message()
            .to_owned();
        assert!(msg.contains("negative"), "{msg}");
        let msg = resource_amount(Some(&a(None, "-1")), NODE)
            .unwrap_err()
            .message()
            .to_owned();
        assert!(msg.contains("negative"), "{msg}");
        let msg = resource_amount(Some(&a(None, "1E30")), NODE)
            .unwrap_err()
            .message()
            .to_owned();
        assert!(msg.contains("too large") || msg.contains("allocatable"), "{msg}");
        let msg = resource_amount(Some(&a(Some(9000), "")), NODE)
            .unwrap_err()
            .message()
            .to_owned();
        assert!(msg.contains("allocatable"), "{msg}");
        assert!(resource_amount(Some(&a(Some(1), "1")), NODE).is_err());
        assert!(resource_amount(Some(&a(None, "lots")), NODE).is_err());
        assert!(resource_amount(None, NODE).is_err());
        assert!(resource_amount(Some(&a(None, "")), NODE).is_err(), "zero amount");
    }

    #[test]
    fn resize_requests_are_checked_field_by_field() {
        let c = pb::ContainerResources {
            name: "app".into(),
            cpu_request_millis: Some(2000),
            cpu_limit_millis: Some(1000),
            ..Default::default()
        };
        let r = pb::ApplyResizeRequest {
            pod_uid: "uid-1".into(),
            containers: vec![c.clone()],
            ..Default::default()
        };
        let msg = resize(&r, NODE).unwrap_err().message().to_owned();
        assert!(
            msg.contains("containers[0].cpu") && msg.contains("greater than limit"),
            "{msg}"
        );
        let ok = pb::ContainerResources {
            cpu_limit_millis: Some(4000),
            ..c.clone()
        };
        let r = pb::ApplyResizeRequest {
            containers: vec![ok.clone()],
            ..r
        };
        assert_eq!(
            resize(&r, NODE).unwrap().containers[0].cpu_limit_millis,
            Some(4000)
        );
        let dup = pb::ApplyResizeRequest {
            containers: vec![ok.clone(), ok],
            ..r.clone()
        };
        assert!(resize(&dup, NODE).unwrap_err().message().contains("twice"));
        let empty = pb::ApplyResizeRequest {
            pod_uid: "uid-1".into(),
            ..Default::default()
        };
        assert!(
            resize(&empty, NODE)
                .unwrap_err()
                .message()
                .contains("nothing to resize")
        );
    }
}
