//! A cluster file (the objects `kubectl get pods,nodes,pdb,priorityclasses -A -o yaml` prints,
//! one YAML document each or a `List`) loaded into a real API server: objects created without
//! their server-set fields, then each Node's and Pod's `status` written through the status
//! subresource, as a kubelet would. PDB status is left to the disruption controller.
use serde_json::Value;
use thiserror::Error;

use crate::control_plane::{ControlPlane, ControlPlaneError};

#[derive(Debug, Error)]
pub enum LoadError {
    #[error("cluster file is not YAML: {0}")]
    Yaml(String),
    #[error("cluster file object #{index} has no {field}")]
    Missing { index: usize, field: &'static str },
    #[error(transparent)]
    Kubectl(#[from] ControlPlaneError),
}

/// Creation order: what others refer to first.
fn rank(kind: &str) -> u8 {
    match kind {
        "Namespace" => 0,
        "PriorityClass" => 1,
        "Node" => 2,
        "PodDisruptionBudget" => 3,
        "Pod" => 5,
        _ => 4,
    }
}

/// Loads `yaml` into `plane`; returns the objects as loaded (`kind`, namespace, name).
pub fn load_cluster_file(
    plane: &ControlPlane,
    yaml: &str,
) -> Result<Vec<(String, Option<String>, String)>, LoadError> {
    let mut objects = Vec::new();
    for document in serde_yaml::Deserializer::from_str(yaml) {
        let value: Value = serde::Deserialize::deserialize(document)
            .map_err(|e: serde_yaml::Error| LoadError::Yaml(e.to_string()))?;
        match value {
            Value::Null => {}
            Value::Object(ref map) if map.get("kind").and_then(Value::as_str) == Some("List") => {
                if let Some(Value::Array(items)) = map.get("items") {
                    objects.extend(items.iter().cloned());
                }
            }
            other => objects.push(other),
        }
    }
    let mut prepared = Vec::new();
    for (index, object) in objects.into_iter().enumerate() {
        let kind = object
            .get("kind")
            .and_then(Value::as_str)
            .ok_or(LoadError::Missing { index, field: "kind" })?
            .to_string();
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .ok_or(LoadError::Missing {
                index,
                field: "metadata.name",
            })?
            .to_string();
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .map(str::to_string);
        prepared.push((kind, namespace, name, object));
    }
    prepared.sort_by_key(|(kind, ..)| rank(kind));

    let existing = plane.kubectl_ok(&["get", "namespaces", "-o", "name"])?;
    let mut namespaces: Vec<String> = prepared
        .iter()
        .filter_map(|(_, namespace, ..)| namespace.clone())
        .filter(|ns| !existing.lines().any(|line| line == format!("namespace/{ns}")))
        .collect();
    namespaces.sort();
    namespaces.dedup();
    for namespace in &namespaces {
        if !prepared
            .iter()
            .any(|(kind, _, name, _)| kind == "Namespace" && name == namespace)
        {
            plane.kubectl_ok(&["create", "namespace", namespace])?;
        }
    }

    let mut statuses = Vec::new();
    let mut items = Vec::new();
    for (kind, namespace, name, mut object) in prepared {
        let status = object.as_object_mut().and_then(|map| map.remove("status"));
        strip_server_fields(&mut object);
        if let Some(status) = status
            && matches!(kind.as_str(), "Node" | "Pod")
        {
            statuses.push((kind.clone(), namespace.clone(), name.clone(), status));
        }
        items.push((kind, namespace, name, object));
    }
    // One `create` per object keeps the order (a PriorityClass before the Pods that name it).
    for (_, _, _, object) in &items {
        plane.kubectl_stdin(&["create", "-f", "-"], &object.to_string())?;
    }
    for (kind, namespace, name, status) in statuses {
        let patch = serde_json::json!({ "status": status }).to_string();
        let resource = kind.to_lowercase();
        let mut args = vec![
            "patch",
            resource.as_str(),
            name.as_str(),
            "--subresource=status",
            "--type=merge",
            "-p",
            patch.as_str(),
        ];
        if let Some(namespace) = namespace.as_deref() {
            args.extend(["-n", namespace]);
        }
        plane.kubectl_ok(&args)?;
    }
    Ok(items
        .into_iter()
        .map(|(kind, namespace, name, _)| (kind, namespace, name))
        .collect())
}

/// Fields the API server sets (or, for `spec.priority`, computes from the PriorityClass).
fn strip_server_fields(object: &mut Value) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
            "generation",
            "selfLink",
        ] {
            metadata.remove(field);
        }
        if let Some(Value::Array(owners)) = metadata.get_mut("ownerReferences") {
            // Owners do not exist in the test cluster; the garbage collector would delete
            // their dependants.
            owners.clear();
        }
    }
    let has_class = object.pointer("/spec/priorityClassName").is_some();
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut)
        && has_class
    {
        spec.remove("priority");
    }
}
