//! The one table of every Kubernetes API call the backend makes.
//!
//! Each call site goes through [`ApiCall::run`] (requests) or [`ApiCall::check`] (watchers) with
//! one of the constants below and the verb it performs, so the code cannot make a call that is not
//! in [`API_CALLS`]: a verb missing from its entry is refused ([`super::KubeError::NotInRbacTable`])
//! before the request is sent. `deploy/kubernetes/rbac.yaml` and the Helm chart's
//! `templates/rbac.yaml` are checked against this table by `tests/deploy_rbac.rs`, and
//! `tests/kube_flow.rs` checks every request the backend sends against it.

use std::future::Future;

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use tracing::Instrument as _;

use super::KubeError;

/// RBAC verbs, spelled as in a `PolicyRule`.
pub mod verb {
    pub const LIST: &str = "list";
    pub const WATCH: &str = "watch";
    pub const DELETE: &str = "delete";
    pub const PATCH: &str = "patch";
    pub const CREATE: &str = "create";
}

/// One (API group, resource, subresource) and the verbs the backend uses on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApiCall {
    /// API group (`""` for the core group).
    pub group: &'static str,
    /// Resource (plural), as in RBAC.
    pub resource: &'static str,
    pub subresource: Option<&'static str>,
    pub verbs: &'static [&'static str],
    /// Why the backend needs it (shown in the docs and the RBAC comments).
    pub why: &'static str,
}

impl ApiCall {
    /// The entry for Kubernetes type `K`, its group and plural taken from k8s-openapi, so the table
    /// cannot misspell them.
    const fn of<K: k8s_openapi::Resource>(
        subresource: Option<&'static str>,
        verbs: &'static [&'static str],
        why: &'static str,
    ) -> Self {
        ApiCall {
            group: K::GROUP,
            resource: K::URL_PATH_SEGMENT,
            subresource,
            verbs,
            why,
        }
    }

    /// `resource` or `resource/subresource`, as RBAC spells it.
    pub fn rbac_resource(&self) -> String {
        match self.subresource {
            Some(sub) => format!("{}/{sub}", self.resource),
            None => self.resource.to_string(),
        }
    }

    /// Refuses a verb that is not in this entry.
    pub fn check(&'static self, verb: &'static str) -> Result<(), KubeError> {
        if self.verbs.contains(&verb) {
            Ok(())
        } else {
            Err(KubeError::NotInRbacTable {
                group: self.group,
                resource: self.rbac_resource(),
                verb,
            })
        }
    }

    /// Runs one API request under a `kube_api` span, after checking that this entry allows `verb`.
    pub async fn run<T, F>(&'static self, verb: &'static str, request: F) -> Result<T, KubeError>
    where
        F: Future<Output = Result<T, kube::Error>>,
    {
        self.check(verb)?;
        let span = tracing::debug_span!(
            "kube_api",
            group = self.group,
            resource = %self.rbac_resource(),
            verb,
        );
        request.instrument(span).await.map_err(|source| KubeError::Api {
            verb,
            resource: self.rbac_resource(),
            source: Box::new(source),
        })
    }
}

/// Pods of this node (field selector `spec.nodeName=<node>`) and Pods nominated to it
/// (`status.nominatedNodeName=<node>`), into reflectors.
pub const PODS_WATCH: ApiCall = ApiCall::of::<Pod>(
    None,
    &[verb::LIST, verb::WATCH],
    "Pods of this node (field selector spec.nodeName) and Pods nominated to it (status.nominatedNodeName) into reflector stores",
);
/// The scheduler's preemption: a graceful delete with a UID precondition.
pub const PODS_DELETE: ApiCall = ApiCall::of::<Pod>(
    None,
    &[verb::DELETE],
    "graceful delete of a victim with a UID precondition, as the scheduler preempts",
);
/// `DisruptionTarget=True` (reason `PreemptionByScheduler`) before the delete.
pub const PODS_STATUS_PATCH: ApiCall = ApiCall::of::<Pod>(
    Some("status"),
    &[verb::PATCH],
    "DisruptionTarget condition on a victim before it is deleted",
);
/// Shrink before evict: a lower-priority Pod that offered gives way in place through `/resize`.
pub const PODS_RESIZE_PATCH: ApiCall = ApiCall::of::<Pod>(
    Some("resize"),
    &[verb::PATCH],
    "shrink before evict: lower-priority Pods that offered (headroom.io/give-way) are resized in place",
);
/// The Eviction API, only with `--preemption=eviction`.
pub const PODS_EVICTION_CREATE: ApiCall = ApiCall {
    group: "",
    resource: <Pod as k8s_openapi::Resource>::URL_PATH_SEGMENT,
    subresource: Some("eviction"),
    verbs: &[verb::CREATE],
    why: "Eviction API instead of the delete (--preemption=eviction); honours PDBs",
};
/// This node (field selector `metadata.name=<node>`): allocatable and `podPreemptionPolicy`, live.
pub const NODES_WATCH: ApiCall = ApiCall::of::<Node>(
    None,
    &[verb::LIST, verb::WATCH],
    "this node's allocatable and spec.podPreemptionPolicy, live",
);
/// Namespaces, for the per-namespace opt-out label.
pub const NAMESPACES_WATCH: ApiCall = ApiCall::of::<Namespace>(
    None,
    &[verb::LIST, verb::WATCH],
    "per-namespace opt-out label headroom.io/preemption=disabled",
);
pub const PRIORITY_CLASSES_WATCH: ApiCall = ApiCall::of::<PriorityClass>(
    None,
    &[verb::LIST, verb::WATCH],
    "priorities and preemptionPolicy of PriorityClasses",
);
pub const PDBS_WATCH: ApiCall = ApiCall::of::<PodDisruptionBudget>(
    None,
    &[verb::LIST, verb::WATCH],
    "PodDisruptionBudgets (status.disruptionsAllowed) for victim selection",
);
/// Events as the scheduler posts them (`events.k8s.io/v1`).
pub const EVENTS_CREATE: ApiCall = ApiCall::of::<Event>(
    None,
    &[verb::CREATE],
    "Events: Preempted on victims, the shim's own on resizing Pods",
);

/// Every API call the backend makes. RBAC must grant exactly these.
pub const API_CALLS: &[ApiCall] = &[
    PODS_WATCH,
    PODS_DELETE,
    PODS_STATUS_PATCH,
    PODS_RESIZE_PATCH,
    PODS_EVICTION_CREATE,
    NODES_WATCH,
    NAMESPACES_WATCH,
    PRIORITY_CLASSES_WATCH,
    PDBS_WATCH,
    EVENTS_CREATE,
];

/// `(group, resource[/subresource], verb)` for every call in [`API_CALLS`], sorted: what RBAC must
/// grant.
pub fn required_grants() -> std::collections::BTreeSet<(String, String, String)> {
    API_CALLS
        .iter()
        .flat_map(|call| {
            call.verbs
                .iter()
                .map(move |verb| (call.group.to_string(), call.rbac_resource(), verb.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_and_resources_come_from_the_types() {
        assert_eq!((PODS_WATCH.group, PODS_WATCH.resource), ("", "pods"));
        assert_eq!(
            (PRIORITY_CLASSES_WATCH.group, PRIORITY_CLASSES_WATCH.resource),
            ("scheduling.k8s.io", "priorityclasses")
        );
        assert_eq!(
            (PDBS_WATCH.group, PDBS_WATCH.resource),
            ("policy", "poddisruptionbudgets")
        );
        assert_eq!(
            (EVENTS_CREATE.group, EVENTS_CREATE.resource),
            ("events.k8s.io", "events")
        );
        assert_eq!(PODS_EVICTION_CREATE.rbac_resource(), "pods/eviction");
    }

    #[test]
    fn a_verb_outside_the_table_is_refused() {
        assert!(PODS_DELETE.check(verb::DELETE).is_ok());
        let err = PODS_DELETE
            .check(verb::PATCH)
            .expect_err("patch on pods is not in the table");
        assert!(err.to_string().contains("pods"), "{err}");
    }
}
