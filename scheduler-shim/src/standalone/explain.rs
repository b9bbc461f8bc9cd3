//! `headroomctl explain POD`: the decision core run on the store as it is now, in sentences
//! (`crate::explain`), plus where the resize stands.

use headroom_node_model::{ResizeState, resize_state};

use super::node::StandaloneNode;
use super::{StandaloneError, resize};
use crate::cluster_file::{ResizeSpec, node_state_for};
use crate::decide::decide;

/// `(outcome, text)` for the Pod `key` (`namespace/name`); outcome "none" without a pending resize.
pub fn explain_pod(node: &StandaloneNode, key: &str) -> Result<(String, String), StandaloneError> {
    let store = node.store();
    let stored = store
        .pods
        .get(key)
        .ok_or_else(|| StandaloneError::NotFound(format!("pods {key:?} not found")))?;
    let state = resize_state(&stored.pod);
    let pending = match &state {
        ResizeState::None => !resize::allocated_equals_spec(&stored.pod),
        ResizeState::InProgress | ResizeState::Error { .. } => false,
        _ => true,
    };
    if !pending {
        let words = match state {
            ResizeState::InProgress => "is being applied to its cgroups right now".to_string(),
            ResizeState::Error { message } => {
                format!("was allocated but writing the cgroups failed: {message}")
            }
            _ => "has no pending resize: what it asks for is what the node allocated".to_string(),
        };
        return Ok(("none".into(), format!("{key} {words}.")));
    }
    if stored.reservation.is_some() {
        let victims: Vec<&str> = store
            .pods
            .iter()
            .filter(|(_, p)| p.terminating)
            .map(|(k, _)| k.as_str())
            .collect();
        return Ok((
            "preempt".into(),
            format!(
                "Preemption for the resize of {key} is under way: room is reserved for it, and {} {} being \
                 stopped; the kubelet applies the resize as soon as they are gone.",
                if victims.is_empty() {
                    "the victims".to_string()
                } else {
                    victims.join(", ")
                },
                if victims.len() == 1 { "is" } else { "are" }
            ),
        ));
    }
    let (namespace, name) = key.split_once('/').unwrap_or(("default", key));
    let spec = ResizeSpec {
        namespace: namespace.into(),
        name: name.into(),
        ..ResizeSpec::default()
    };
    let (node_state, request) = node_state_for(&store.cluster(&node.config), &spec)?;
    let decision = decide(&node_state, &request)?;
    let mut text = crate::explain::explain(key, &decision);
    if let ResizeState::Deferred { message } | ResizeState::Infeasible { message } = &state {
        text.push_str(&format!("\nThe kubelet's condition says: {message}"));
    }
    Ok((decision.outcome.as_str().to_string(), text))
}
