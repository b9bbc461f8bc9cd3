//! A cluster described as ordinary Kubernetes objects in one multi-document YAML file (Node,
//! PriorityClass, Pod with spec and status, PodDisruptionBudget with status, or a `v1 List` of
//! them), turned into the decision core's input. Every bad document is reported with its number;
//! nothing is used unless the whole file is good.

use std::collections::BTreeMap;

use headroom_node_model::pod::{CONDITION_RESIZE_IN_PROGRESS, CONDITION_RESIZE_PENDING};
use headroom_node_model::{
    ModelError, QuantityError, ResizeState, Resources, parse_cpu_millis, parse_memory_bytes, pod_requests,
    pod_requests_admitted, qos_class, resize_state,
};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;
use thiserror::Error;

use crate::decide::{NodeInput, NodeState, PdbInput, PodInput, PreemptionPolicy, ResizeRequest, messages};
use crate::give_way::GiveWaySettings;
use crate::give_way::annotation::{node_allows, pod_give_way};

/// The built-in PriorityClasses every API server has.
const SYSTEM_PRIORITY_CLASSES: [(&str, i32); 2] = [
    ("system-cluster-critical", 2_000_000_000),
    ("system-node-critical", 2_000_001_000),
];

#[derive(Debug, Clone, Default)]
pub struct ClusterFile {
    pub nodes: Vec<Node>,
    pub priority_classes: Vec<PriorityClass>,
    pub pods: Vec<Pod>,
    pub pdbs: Vec<PodDisruptionBudget>,
    /// The operator's switches for shrinking Pods that offered (not objects of the file).
    pub give_way: GiveWaySettings,
}

/// One bad document (numbered from 1, in file order).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("document {index}: {message}")]
pub struct DocumentError {
    pub index: usize,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ClusterFileError {
    #[error("{} bad document(s); nothing was used:\n{}", .0.len(), join_lines(.0))]
    Documents(Vec<DocumentError>),
    #[error("the file is {bytes} bytes, more than the {max} taken")]
    TooLarge { bytes: usize, max: usize },
    #[error(
        "line {line}: flow collections ([ or {{) nested more than {max} deep; refused before parsing (the YAML parser's time grows with the square of the nesting)"
    )]
    TooDeep { line: usize, max: usize },
    #[error("pod {0} is not in the cluster file")]
    PodNotFound(String),
    #[error("pod {pod} is on node {node:?}, which is not in the cluster file")]
    NodeNotFound { pod: String, node: String },
    #[error("pod {0} has no spec.nodeName and the file does not hold exactly one Node")]
    Unassigned(String),
    #[error("node {node}: status.allocatable.{resource} is missing")]
    NoAllocatable { node: String, resource: &'static str },
    #[error("node {node}: status.allocatable.{resource}: {source}")]
    BadAllocatable {
        node: String,
        resource: &'static str,
        source: QuantityError,
    },
    #[error("pod {pod}: priorityClassName {class:?} does not exist")]
    UnknownPriorityClass { pod: String, class: String },
    #[error("pod {pod}: {message}")]
    BadResize { pod: String, message: String },
    #[error("PodDisruptionBudget {pdb}: selector: {message}")]
    BadSelector { pdb: String, message: String },
    #[error(transparent)]
    Model(#[from] ModelError),
}

fn join_lines(errors: &[DocumentError]) -> String {
    errors
        .iter()
        .map(|e| format!("  {e}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Largest cluster file taken (a node's objects are far smaller; `kubectl get -o yaml` of 1,000
/// Pods is about 10 MiB).
pub const MAX_FILE_BYTES: usize = 16 << 20;
/// Most objects in one file: a node runs at most a few hundred Pods (the kubelet's default
/// `maxPods` is 110).
pub const MAX_OBJECTS: usize = 5_000;
/// Most containers (init, regular, ephemeral) in one Pod. The API server sets no number, but a
/// Pod is one etcd object of at most 1.5 MiB; beyond this it is an attack, not a workload, and
/// each container is a process on a standalone node.
pub const MAX_CONTAINERS_PER_POD: usize = 128;
/// Deepest `[`/`{` nesting taken. A Kubernetes object written all in flow style (JSON) nests
/// about ten deep; libyaml's scanner costs O(depth) per token, so 200 KB of `[` took 17 s.
pub const MAX_FLOW_DEPTH: usize = 64;

/// The first line where `[`/`{` nesting, outside quotes and comments, passes `max`: a cheap
/// approximation of the parser's flow depth (a bracket inside a plain scalar counts too). It
/// follows quotes as the scanner does (`''` and `\"` escapes included), so quoted closers cannot
/// cancel real openers; a quote inside a block scalar (`|`, `>`) can still hide what follows it
/// (docs/reliability.md, entry 10).
fn flow_depth_exceeded(text: &str, max: usize) -> Option<usize> {
    let (mut depth, mut line) = (0usize, 1usize);
    let (mut single, mut double, mut comment, mut escaped) = (false, false, false, false);
    let mut previous = '\n';
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\n' {
            line += 1;
            comment = false;
        } else if comment {
        } else if double {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => double = false,
                _ => {}
            }
        } else if single {
            if c == '\'' {
                // `''` is a quote inside the scalar, not its end.
                if chars.peek() == Some(&'\'') {
                    chars.next();
                } else {
                    single = false;
                }
            }
        } else {
            match c {
                '#' if previous.is_whitespace() => comment = true,
                // A quote opens a scalar only where a token starts (`it's` is plain text).
                '"' if token_start(previous) => double = true,
                '\'' if token_start(previous) => single = true,
                '[' | '{' => {
                    depth += 1;
                    if depth > max {
                        return Some(line);
                    }
                }
                ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        previous = c;
    }
    None
}

fn token_start(previous: char) -> bool {
    previous.is_whitespace() || matches!(previous, '[' | '{' | ',' | ':' | '-' | '?')
}

/// Parses every document; any error in any document fails the whole file. Objects of a kind
/// are keyed by namespace and name, as in the API server: a second one with the same name is
/// refused, and so is a Pod with two containers of one name.
pub fn parse_cluster(text: &str) -> Result<ClusterFile, ClusterFileError> {
    if text.len() > MAX_FILE_BYTES {
        return Err(ClusterFileError::TooLarge {
            bytes: text.len(),
            max: MAX_FILE_BYTES,
        });
    }
    if let Some(line) = flow_depth_exceeded(text, MAX_FLOW_DEPTH) {
        return Err(ClusterFileError::TooDeep {
            line,
            max: MAX_FLOW_DEPTH,
        });
    }
    let mut cluster = ClusterFile::default();
    let mut errors = Vec::new();
    let mut seen = Seen::default();
    for (i, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let index = i + 1;
        if seen.objects >= MAX_OBJECTS {
            errors.push(DocumentError {
                index,
                message: format!("more than {MAX_OBJECTS} objects in one file"),
            });
            break;
        }
        match serde_yaml::Value::deserialize(document) {
            Ok(serde_yaml::Value::Null) => {} // an empty document ("---" at the end)
            Ok(value) => add_object(&mut cluster, value, index, &mut errors, &mut seen),
            Err(e) => {
                errors.push(DocumentError {
                    index,
                    message: format!("not YAML: {e}"),
                });
                break; // the YAML stream cannot be resynchronised after a syntax error
            }
        }
    }
    if errors.is_empty() {
        Ok(cluster)
    } else {
        Err(ClusterFileError::Documents(errors))
    }
}

/// Objects met so far: how many, and the document each (kind, namespace, name) came from.
#[derive(Default)]
struct Seen {
    objects: usize,
    names: std::collections::HashMap<(String, String, String), usize>,
}

impl Seen {
    /// `Err` naming the earlier document when the object's kind, namespace and name were seen.
    fn first(&mut self, kind: &str, value: &serde_yaml::Value, index: usize) -> Result<(), String> {
        let meta = |field: &str| {
            value
                .get("metadata")
                .and_then(|m| m.get(field))
                .and_then(|v| v.as_str())
                .map(str::to_string)
        };
        let Some(name) = meta("name") else {
            return Ok(()); // reported as invalid by the typed parse, or nameless (Node lists)
        };
        // Pods and PDBs without a namespace are in "default", as kubectl apply puts them.
        let namespace = match kind {
            "Pod" | "PodDisruptionBudget" => meta("namespace").unwrap_or_else(|| "default".into()),
            _ => String::new(),
        };
        let shown = if namespace.is_empty() {
            name.clone()
        } else {
            format!("{namespace}/{name}")
        };
        match self.names.entry((kind.to_string(), namespace, name)) {
            std::collections::hash_map::Entry::Occupied(e) => Err(format!(
                "duplicate {kind} {shown} (document {} has it too)",
                e.get()
            )),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(index);
                Ok(())
            }
        }
    }
}

/// A Pod's containers as the API server validates them before the typed parse: at most
/// [`MAX_CONTAINERS_PER_POD`], names unique across init, regular and ephemeral containers.
fn check_containers(value: &serde_yaml::Value) -> Result<(), String> {
    let mut names: Vec<&str> = Vec::new();
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        let Some(items) = value
            .get("spec")
            .and_then(|s| s.get(list))
            .and_then(|c| c.as_sequence())
        else {
            continue;
        };
        for (i, c) in items.iter().enumerate() {
            if names.len() >= MAX_CONTAINERS_PER_POD {
                return Err(format!(
                    "more than {MAX_CONTAINERS_PER_POD} containers in one Pod"
                ));
            }
            let Some(name) = c.get("name").and_then(|n| n.as_str()) else {
                continue; // the typed parse names what is missing
            };
            // The API server's field error for it.
            if names.contains(&name) {
                return Err(format!("spec.{list}[{i}].name: Duplicate value: {name:?}"));
            }
            names.push(name);
        }
    }
    Ok(())
}

fn add_object(
    cluster: &mut ClusterFile,
    value: serde_yaml::Value,
    index: usize,
    errors: &mut Vec<DocumentError>,
    seen: &mut Seen,
) {
    let field = |name: &str| {
        value
            .get(name)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string()
    };
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    if kind != "List" {
        seen.objects += 1;
    }
    let mut error = |message: String| errors.push(DocumentError { index, message });
    if matches!(
        kind.as_str(),
        "Node" | "Pod" | "PriorityClass" | "PodDisruptionBudget"
    ) {
        if let Err(e) = seen.first(&kind, &value, index) {
            return error(e);
        }
        if kind == "Pod"
            && let Err(e) = check_containers(&value)
        {
            return error(e);
        }
    }
    fn typed<T: serde::de::DeserializeOwned>(value: serde_yaml::Value, kind: &str) -> Result<T, String> {
        serde_yaml::from_value(value).map_err(|e| format!("invalid {kind}: {e}"))
    }
    match (api_version.as_str(), kind.as_str()) {
        ("v1", "Node") => match typed(value, &kind) {
            Ok(node) => cluster.nodes.push(node),
            Err(e) => error(e),
        },
        ("v1", "Pod") => match typed(value, &kind) {
            Ok(pod) => cluster.pods.push(pod),
            Err(e) => error(e),
        },
        ("scheduling.k8s.io/v1", "PriorityClass") => match typed(value, &kind) {
            Ok(class) => cluster.priority_classes.push(class),
            Err(e) => error(e),
        },
        ("policy/v1", "PodDisruptionBudget") => match typed(value, &kind) {
            Ok(pdb) => cluster.pdbs.push(pdb),
            Err(e) => error(e),
        },
        ("v1", "List") => match value.get("items").and_then(|v| v.as_sequence()) {
            Some(items) => {
                for item in items.clone() {
                    if seen.objects >= MAX_OBJECTS {
                        errors.push(DocumentError {
                            index,
                            message: format!("more than {MAX_OBJECTS} objects in one file"),
                        });
                        return;
                    }
                    add_object(cluster, item, index, errors, seen);
                }
            }
            None => error("v1 List without items".to_string()),
        },
        ("", _) | (_, "") => error("not a Kubernetes object: apiVersion and kind are required".to_string()),
        _ => error(format!(
            "unsupported kind {api_version}/{kind} (expected v1 Node, v1 Pod, scheduling.k8s.io/v1 PriorityClass, policy/v1 PodDisruptionBudget or v1 List)"
        )),
    }
}

/// The resize to plan: a Pod and, optionally, new requests for one of its containers. Without
/// `cpu` and `memory` the Pod's spec is taken as the desired resources (the resize already asked
/// for with `kubectl patch --subresource resize`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResizeSpec {
    pub namespace: String,
    pub name: String,
    pub container: Option<String>,
    pub cpu: Option<String>,
    pub memory: Option<String>,
}

/// The decision core's input for `resize`, from the cluster's objects.
pub fn node_state_for(
    cluster: &ClusterFile,
    resize: &ResizeSpec,
) -> Result<(NodeState, ResizeRequest), ClusterFileError> {
    let key = format!("{}/{}", resize.namespace, resize.name);
    let target = cluster
        .pods
        .iter()
        .find(|p| {
            namespace_of(p) == resize.namespace && p.metadata.name.as_deref() == Some(resize.name.as_str())
        })
        .ok_or_else(|| ClusterFileError::PodNotFound(key.clone()))?;
    let node = node_of(cluster, target, &key)?;
    let node_name = node.metadata.name.clone().unwrap_or_default();
    let node_input = node_input(node)?;

    let overridden = resize.cpu.is_some() || resize.memory.is_some();
    let desired = if overridden {
        with_new_requests(target, resize, &key)?
    } else {
        target.clone()
    };
    // The resize as asked, without a stale verdict on an earlier generation.
    let requested = pod_requests(&without_resize_conditions(&desired))?;
    let state = resize_state(target);
    // The kubelet refuses any resize of a static Pod, a decrease too, before its other checks.
    // Its other kubelet-only reasons (swap, a Guaranteed Pod under a static CPU or Memory Manager
    // policy) rest on the kubelet's configuration, which no object of the file holds: only a
    // verdict the kubelet already wrote tells them.
    let reported_infeasible = match (&state, overridden) {
        _ if is_static_pod(target) => Some(messages::STATIC_POD.to_string()),
        (ResizeState::Infeasible { message }, false) => Some(message.clone()),
        _ => None,
    };
    let pending_since = target
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == CONDITION_RESIZE_PENDING))
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0);
    let request = ResizeRequest {
        namespace: resize.namespace.clone(),
        name: resize.name.clone(),
        requested,
        admitted: pod_requests_admitted(target)?,
        reported_infeasible,
        pending_since,
    };

    // Overlapping PDBs are counted down in this order and a Pod stops at the first one violated:
    // upstream takes its lister's (unordered) order; namespace/name makes `plan` and the shim,
    // whose reflector store is unordered too, decide alike every time.
    let mut pdbs: Vec<&PodDisruptionBudget> = cluster.pdbs.iter().collect();
    pdbs.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    let pdb_inputs = pdbs
        .iter()
        .map(|p| PdbInput {
            namespace: p.metadata.namespace.clone().unwrap_or_else(|| "default".into()),
            name: p.metadata.name.clone().unwrap_or_default(),
            disruptions_allowed: p.status.as_ref().and_then(|s| s.disruptions_allowed).unwrap_or(0),
        })
        .collect();

    let mut pods = Vec::new();
    for pod in &cluster.pods {
        let is_target = std::ptr::eq(pod, target);
        // Only Pods bound here are on the node (the resizing one is, wherever `node_of` put it);
        // a Pod nominated here and not yet bound counts as upstream counts nominated Pods.
        let nominated = match pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            _ if is_target => false,
            Some(name) if name == node_name => false,
            Some(_) => continue,
            None if nominated_to(pod) == Some(node_name.as_str()) => true,
            None => continue,
        };
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        // The scheduler does not count terminal Pods.
        if matches!(phase, Some("Succeeded" | "Failed")) {
            continue;
        }
        let mut input = pod_input(cluster, pod, &pdbs)?;
        input.nominated = nominated;
        if is_target {
            input.requests = request.requested;
        }
        pods.push(input);
    }
    let mut policy = cluster.give_way.policy;
    match node_allows(node) {
        Ok(allowed) => policy.enabled &= allowed,
        Err(why) => {
            tracing::warn!(node = %node_name, "{why}");
            policy.enabled = false;
        }
    }
    let state = NodeState {
        node: node_input,
        pods,
        pdbs: pdb_inputs,
        reserved: Resources::ZERO,
        give_way: policy,
    };
    Ok((state, request))
}

/// The annotation the kubelet puts on a static Pod's copy in the API server.
pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// The annotation naming where the kubelet got a Pod from (`api`, `file`, `http`).
pub const SOURCE_ANNOTATION: &str = "kubernetes.io/config.source";

/// The kubelet's `IsStaticPod` (a `kubernetes.io/config.source` other than `api`), or the static
/// Pod's mirror as the API server shows it (`kubernetes.io/config.mirror`).
pub fn is_static_pod(pod: &Pod) -> bool {
    let annotations = pod.metadata.annotations.as_ref();
    let annotation = |key: &str| annotations.and_then(|a| a.get(key));
    annotation(MIRROR_ANNOTATION).is_some() || annotation(SOURCE_ANNOTATION).is_some_and(|s| s != "api")
}

/// `status.nominatedNodeName`, where the scheduler means to place a Pod once preemption made room.
pub fn nominated_to(pod: &Pod) -> Option<&str> {
    pod.status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
        .filter(|n| !n.is_empty())
}

fn namespace_of(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("default")
}

fn node_of<'a>(cluster: &'a ClusterFile, pod: &Pod, key: &str) -> Result<&'a Node, ClusterFileError> {
    match pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
        Some(name) => cluster
            .nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(name))
            .ok_or_else(|| ClusterFileError::NodeNotFound {
                pod: key.to_string(),
                node: name.to_string(),
            }),
        None => match cluster.nodes.as_slice() {
            [only] => Ok(only),
            _ => Err(ClusterFileError::Unassigned(key.to_string())),
        },
    }
}

fn node_input(node: &Node) -> Result<NodeInput, ClusterFileError> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
    let get = |resource: &'static str| {
        allocatable
            .and_then(|a| a.get(resource))
            .ok_or_else(|| ClusterFileError::NoAllocatable {
                node: name.clone(),
                resource,
            })
    };
    let bad = |resource, source| ClusterFileError::BadAllocatable {
        node: name.clone(),
        resource,
        source,
    };
    let cpu = parse_cpu_millis(&get("cpu")?.0).map_err(|e| bad("cpu", e))?;
    let memory = parse_memory_bytes(&get("memory")?.0).map_err(|e| bad("memory", e))?;
    let disable_resize_preemption = node
        .spec
        .as_ref()
        .and_then(|s| s.pod_preemption_policy.as_ref())
        .and_then(|p| p.disable_resize_preemption.clone())
        .unwrap_or_default();
    Ok(NodeInput {
        name,
        allocatable: Resources::new(cpu, memory),
        disable_resize_preemption,
    })
}

fn pod_input(
    cluster: &ClusterFile,
    pod: &Pod,
    pdbs: &[&PodDisruptionBudget],
) -> Result<PodInput, ClusterFileError> {
    let namespace = namespace_of(pod).to_string();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let key = format!("{namespace}/{name}");
    let spec = pod.spec.as_ref();
    let class_name = spec.and_then(|s| s.priority_class_name.as_deref());
    let class = match class_name {
        Some(class_name) => Some(find_priority_class(cluster, class_name).ok_or_else(|| {
            ClusterFileError::UnknownPriorityClass {
                pod: key.clone(),
                class: class_name.to_string(),
            }
        })?),
        None => cluster
            .priority_classes
            .iter()
            .find(|c| c.global_default == Some(true))
            .map(|c| (c.value.unwrap_or(0), c.preemption_policy.clone())),
    };
    // The API server's Priority admission writes spec.priority; trust it when present.
    let priority = spec
        .and_then(|s| s.priority)
        .or(class.as_ref().map(|c| c.0))
        .unwrap_or(0);
    let policy = spec
        .and_then(|s| s.preemption_policy.clone())
        .or(class.and_then(|c| c.1));
    let preemption_policy = if policy.as_deref() == Some("Never") {
        PreemptionPolicy::Never
    } else {
        PreemptionPolicy::PreemptLowerPriority
    };

    let labels = pod.metadata.labels.clone().unwrap_or_default();
    let mut matching = Vec::new();
    for (index, pdb) in pdbs.iter().enumerate() {
        let pdb_namespace = pdb.metadata.namespace.as_deref().unwrap_or("default");
        let already_disrupted = pdb
            .status
            .as_ref()
            .and_then(|s| s.disrupted_pods.as_ref())
            .is_some_and(|d| d.contains_key(&name));
        // As filterPodsWithPDBViolation: no labels or an empty selector never matches, and a Pod
        // the API server already counted as disrupted does not count twice.
        if pdb_namespace != namespace || labels.is_empty() || already_disrupted {
            continue;
        }
        let selector = pdb.spec.as_ref().and_then(|s| s.selector.as_ref());
        let pdb_key = format!(
            "{pdb_namespace}/{}",
            pdb.metadata.name.as_deref().unwrap_or_default()
        );
        if let Some(selector) = selector
            && selector_matches(selector, &labels).map_err(|message| ClusterFileError::BadSelector {
                pdb: pdb_key,
                message,
            })?
        {
            matching.push(index);
        }
    }

    let requests = pod_requests(pod)?;
    let give_way = pod_give_way(
        pod,
        requests,
        cluster.give_way.off_namespaces.contains(&namespace),
    );
    Ok(PodInput {
        namespace,
        name,
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        priority,
        preemption_policy,
        start_time: pod
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0),
        requests,
        qos: Some(qos_class(pod)),
        pdbs: matching,
        give_way,
        live: Default::default(),
        nominated: false,
        terminating: pod.metadata.deletion_timestamp.is_some(),
    })
}

fn find_priority_class(cluster: &ClusterFile, name: &str) -> Option<(i32, Option<String>)> {
    cluster
        .priority_classes
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(name))
        .map(|c| (c.value.unwrap_or(0), c.preemption_policy.clone()))
        .or_else(|| {
            SYSTEM_PRIORITY_CLASSES
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v, None))
        })
}

/// `metav1.LabelSelectorAsSelector(...).Matches(labels)`; an empty selector matches nothing here
/// (the preemption code skips `selector.Empty()`).
pub fn selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> Result<bool, String> {
    let match_labels = selector.match_labels.as_ref().filter(|m| !m.is_empty());
    let expressions = selector.match_expressions.as_deref().unwrap_or_default();
    if match_labels.is_none() && expressions.is_empty() {
        return Ok(false);
    }
    for (key, value) in match_labels.into_iter().flatten() {
        if labels.get(key) != Some(value) {
            return Ok(false);
        }
    }
    for requirement in expressions {
        let values = requirement.values.as_deref().unwrap_or_default();
        let label = labels.get(&requirement.key);
        let ok = match requirement.operator.as_str() {
            "In" => label.is_some_and(|l| values.contains(l)),
            "NotIn" => label.is_none_or(|l| !values.contains(l)),
            "Exists" => label.is_some(),
            "DoesNotExist" => label.is_none(),
            other => {
                return Err(format!(
                    "unknown operator {other:?} for key {:?}",
                    requirement.key
                ));
            }
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The Pod with one container's requests (and limits, where set) changed, as
/// `kubectl patch --subresource resize` would leave its spec.
fn with_new_requests(pod: &Pod, resize: &ResizeSpec, key: &str) -> Result<Pod, ClusterFileError> {
    let bad = |message: String| ClusterFileError::BadResize {
        pod: key.to_string(),
        message,
    };
    let mut pod = pod.clone();
    let Some(spec) = pod.spec.as_mut() else {
        return Err(bad("has no spec".into()));
    };
    let container = match (&resize.container, spec.containers.len()) {
        (Some(name), _) => spec
            .containers
            .iter_mut()
            .find(|c| &c.name == name)
            .ok_or_else(|| bad(format!("has no container {name:?}")))?,
        (None, 1) => &mut spec.containers[0],
        (None, n) => return Err(bad(format!("has {n} containers; say which one with --container"))),
    };
    let resources = container.resources.get_or_insert_with(Default::default);
    for (resource, value, parse) in [
        (
            "cpu",
            &resize.cpu,
            parse_cpu_millis as fn(&str) -> Result<i64, QuantityError>,
        ),
        ("memory", &resize.memory, parse_memory_bytes),
    ] {
        let Some(value) = value else { continue };
        parse(value).map_err(|e| bad(format!("--{resource} {value:?}: {e}")))?;
        resources
            .requests
            .get_or_insert_with(Default::default)
            .insert(resource.into(), Quantity(value.clone()));
        if let Some(limit) = resources.limits.as_mut().and_then(|l| l.get_mut(resource)) {
            *limit = Quantity(value.clone());
        }
    }
    Ok(pod)
}

fn without_resize_conditions(pod: &Pod) -> Pod {
    let mut pod = pod.clone();
    if let Some(status) = pod.status.as_mut() {
        if let Some(conditions) = status.conditions.as_mut() {
            conditions
                .retain(|c| c.type_ != CONDITION_RESIZE_PENDING && c.type_ != CONDITION_RESIZE_IN_PROGRESS);
        }
        status.resize = None;
    }
    pod
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn bad_documents_are_all_reported_and_nothing_is_used() {
        let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: ok}\nspec: {containers: []}\n---\napiVersion: apps/v1\nkind: Deployment\n---\nkind: Pod\n---\napiVersion: v1\nkind: Node\nspec: {taints: 7}\n---\n";
        let Err(ClusterFileError::Documents(errors)) = parse_cluster(text) else {
            panic!("accepted")
        };
        let indexes: Vec<usize> = errors.iter().map(|e| e.index).collect();
        assert_eq!(indexes, [2, 3, 4], "{errors:?}");
        assert!(errors[0].message.contains("apps/v1/Deployment"));
    }

    #[test]
    fn deep_flow_nesting_is_refused_before_the_parser_sees_it() {
        // 200 KB of `[` took libyaml 17 s; refused at once, with the line.
        let deep = format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  x: {}",
            "[".repeat(200_000)
        );
        let e = parse_cluster(&deep).expect_err("refused");
        assert_eq!(
            e,
            ClusterFileError::TooDeep {
                line: 5,
                max: MAX_FLOW_DEPTH
            }
        );
        // An apostrophe in plain text opens no quote that could hide the brackets after it.
        let hidden = format!("a: it's\nb: {}", "[".repeat(MAX_FLOW_DEPTH + 1));
        assert!(matches!(
            parse_cluster(&hidden),
            Err(ClusterFileError::TooDeep { line: 2, .. })
        ));
        // `''` inside single quotes does not end them: its closers cannot cancel real openers.
        let escaped = format!("a: {}", "[ 'x'']' ".repeat(MAX_FLOW_DEPTH + 1));
        assert!(matches!(
            parse_cluster(&escaped),
            Err(ClusterFileError::TooDeep { line: 1, .. })
        ));
        // Brackets in quoted scalars and comments are text, and ordinary flow style parses.
        let text = format!(
            "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {{name: \"{}\"}}  # {}\nvalue: 7\ndescription: '{}'\n",
            "a",
            "[".repeat(100),
            "{".repeat(100)
        );
        let cluster = parse_cluster(&text).expect("quoted and commented brackets are text");
        assert_eq!(cluster.priority_classes.len(), 1);
    }

    #[test]
    fn duplicate_objects_and_container_names_are_refused_as_the_api_server_does() {
        let pod = |name: &str, containers: &str| {
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec: {{containers: [{containers}]}}\n---\n"
            )
        };
        let text = [
            pod("a", "{name: app}"),
            pod("b", "{name: app}, {name: side}, {name: app}"),
            pod("a", "{name: x}"),
            "apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: other}\nspec: {containers: [{name: app}]}\n".into(),
        ]
        .concat();
        let Err(ClusterFileError::Documents(errors)) = parse_cluster(&text) else {
            panic!("accepted")
        };
        let found: Vec<(usize, &str)> = errors.iter().map(|e| (e.index, e.message.as_str())).collect();
        assert_eq!(
            found,
            [
                (2, "spec.containers[2].name: Duplicate value: \"app\""),
                (3, "duplicate Pod default/a (document 1 has it too)"),
            ]
        );
    }

    #[test]
    fn a_pod_with_too_many_containers_and_a_file_with_too_many_objects_are_refused() {
        let containers: Vec<String> = (0..=MAX_CONTAINERS_PER_POD)
            .map(|i| format!("{{name: c{i}}}"))
            .collect();
        let text = format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: big}}\nspec: {{containers: [{}]}}\n",
            containers.join(", ")
        );
        let Err(ClusterFileError::Documents(errors)) = parse_cluster(&text) else {
            panic!("accepted")
        };
        assert!(
            errors[0].message.contains("more than 128 containers"),
            "{errors:?}"
        );

        let many: String = (0..=MAX_OBJECTS)
            .map(|i| format!("apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {{name: p{i}}}\nvalue: 1\n---\n"))
            .collect();
        let Err(ClusterFileError::Documents(errors)) = parse_cluster(&many) else {
            panic!("accepted")
        };
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].index, MAX_OBJECTS + 1);

        let huge = " ".repeat(MAX_FILE_BYTES + 1);
        assert!(matches!(
            parse_cluster(&huge),
            Err(ClusterFileError::TooLarge { .. })
        ));
    }

    /// A one-node cluster (4 CPU, 8 GiB) with `pods`, each `(name, priority, cpu, extra)` where
    /// `extra` is YAML merged into the Pod (`metadata`, `spec` and `status` keys replace).
    pub(crate) fn tiny_cluster(pods: &[(&str, i32, &str, &str)]) -> ClusterFile {
        let mut text = String::from(
            "apiVersion: v1\nkind: Node\nmetadata: {name: node-a}\nstatus: {allocatable: {cpu: '4', memory: 8Gi}}\n",
        );
        for (name, priority, cpu, extra) in pods {
            let mut pod: serde_yaml::Value = serde_yaml::from_str(&format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default, uid: uid-{name}, labels: {{app: {name}}}}}\nspec: {{nodeName: node-a, priority: {priority}, containers: [{{name: app, resources: {{requests: {{cpu: '{cpu}', memory: 1Gi}}}}}}]}}\nstatus: {{phase: Running, startTime: '2026-09-10T09:58:30Z'}}\n"
            ))
            .unwrap();
            if !extra.is_empty() {
                let extra: serde_yaml::Mapping = serde_yaml::from_str(extra).unwrap();
                for (k, v) in extra {
                    pod[k.as_str().unwrap()] = v;
                }
            }
            text.push_str("---\n");
            text.push_str(&serde_yaml::to_string(&pod).unwrap());
        }
        parse_cluster(&text).unwrap()
    }

    use crate::decide::Outcome;

    fn plan(cluster: &ClusterFile, name: &str, cpu: &str) -> crate::decide::Decision {
        let spec = ResizeSpec {
            namespace: "default".into(),
            name: name.into(),
            cpu: Some(cpu.into()),
            ..Default::default()
        };
        let (state, request) = node_state_for(cluster, &spec).unwrap();
        crate::decide::decide(&state, &request).unwrap()
    }

    #[test]
    fn a_static_pod_is_never_resized_in_place_so_its_resize_is_infeasible() {
        let mirror = "{metadata: {name: etcd, namespace: default, annotations: {kubernetes.io/config.mirror: abc, kubernetes.io/config.source: file}}}";
        let from_file =
            "{metadata: {name: etcd, namespace: default, annotations: {kubernetes.io/config.source: file}}}";
        let from_api =
            "{metadata: {name: etcd, namespace: default, annotations: {kubernetes.io/config.source: api}}}";
        for (extra, is_static) in [(mirror, true), (from_file, true), (from_api, false), ("", false)] {
            let cluster = tiny_cluster(&[("etcd", 1000, "1", extra), ("low", 1, "2", "")]);
            // A resize that needs an eviction, and a decrease (which the kubelet refuses too).
            for cpu in ["3", "500m"] {
                let d = plan(&cluster, "etcd", cpu);
                if is_static {
                    assert_eq!(
                        (d.outcome, d.message.as_str()),
                        (
                            crate::decide::Outcome::Infeasible,
                            "In-place resize of static-pods is not supported"
                        ),
                        "{extra} {cpu}"
                    );
                } else {
                    assert_ne!(d.outcome, crate::decide::Outcome::Infeasible, "{extra} {cpu}");
                }
            }
        }
    }

    #[test]
    fn only_bound_pods_are_on_the_node_and_nominated_ones_count_by_priority() {
        let unbound = |priority: i32, nominated: &str| {
            format!(
                "{{spec: {{priority: {priority}, containers: [{{name: app, resources: {{requests: {{cpu: '1', memory: 1Gi}}}}}}]}}, status: {{phase: Pending{nominated}}}}}"
            )
        };
        let to_here = ", nominatedNodeName: node-a";
        let to_elsewhere = ", nominatedNodeName: node-b";
        // (pending Pod's priority, its nomination) → outcome, victims of a resize of p 1 → 3 CPU
        // next to low (1 CPU) on 4 CPU.
        let cases = [
            (1, "", Outcome::Fits, vec![]),
            (100, "", Outcome::Fits, vec![]),
            (100, to_elsewhere, Outcome::Fits, vec![]),
            (1, to_here, Outcome::Fits, vec![]),
            (100, to_here, Outcome::Preempt, vec!["default/low".to_string()]),
        ];
        for (priority, nomination, outcome, victims) in cases {
            let pending = unbound(priority, nomination);
            let cluster = tiny_cluster(&[
                ("p", 100, "1", ""),
                ("low", 1, "1", ""),
                ("pending", priority, "1", &pending),
            ]);
            let d = plan(&cluster, "p", "3");
            assert_eq!((d.outcome, d.victim_keys()), (outcome, victims), "{pending}");
        }
    }

    #[test]
    fn a_pod_the_api_server_already_counted_as_disrupted_does_not_count_against_that_pdb() {
        // Room for p at 3 CPU means one of the two 1-CPU Pods goes; both are in a PDB that
        // allows nothing, so the less important (b) would go. Once a is in the PDB's
        // status.disruptedPods (an eviction of it is under way) it no longer violates, and
        // non-violating candidates are reprieved last: a goes instead.
        for (disrupted, victim) in [("{}", "default/b"), ("{a: '2026-09-10T10:00:00Z'}", "default/a")] {
            let mut cluster = tiny_cluster(&[
                ("p", 100, "2", ""),
                (
                    "a",
                    10,
                    "1",
                    "{metadata: {name: a, namespace: default, uid: uid-a, labels: {app: web}}, status: {phase: Running, startTime: '2026-09-10T09:00:00Z'}}",
                ),
                (
                    "b",
                    10,
                    "1",
                    "{metadata: {name: b, namespace: default, uid: uid-b, labels: {app: web}}}",
                ),
            ]);
            let pdb = format!(
                "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {{name: web, namespace: default}}\nspec: {{selector: {{matchLabels: {{app: web}}}}}}\nstatus: {{disruptionsAllowed: 0, currentHealthy: 2, desiredHealthy: 2, expectedPods: 2, disruptedPods: {disrupted}}}\n"
            );
            cluster.pdbs = parse_cluster(&pdb).unwrap().pdbs;
            let d = plan(&cluster, "p", "3");
            assert_eq!(d.victim_keys(), [victim.to_string()], "disruptedPods {disrupted}");
        }
    }

    #[test]
    fn pdbs_are_counted_down_in_namespace_and_name_order_whatever_order_they_come_in() {
        let pdb = |name: &str| {
            let text = format!(
                "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {{name: {name}, namespace: default}}\nspec: {{selector: {{matchLabels: {{app: p}}}}}}\nstatus: {{disruptionsAllowed: 1}}\n"
            );
            parse_cluster(&text).unwrap().pdbs.remove(0)
        };
        let mut cluster = tiny_cluster(&[("p", 100, "1", "")]);
        cluster.pdbs = vec![pdb("zz"), pdb("aa"), pdb("mm")];
        let spec = ResizeSpec {
            namespace: "default".into(),
            name: "p".into(),
            ..Default::default()
        };
        let (state, _) = node_state_for(&cluster, &spec).unwrap();
        let names: Vec<&str> = state.pdbs.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["aa", "mm", "zz"]);
        assert_eq!(state.pods[0].pdbs, [0, 1, 2]);
    }

    #[test]
    fn yaml_syntax_error_is_reported() {
        let Err(ClusterFileError::Documents(errors)) = parse_cluster("apiVersion: v1\nkind: [Pod\n") else {
            panic!("accepted")
        };
        assert_eq!(errors[0].index, 1);
    }

    #[test]
    fn selectors() {
        let labels: BTreeMap<String, String> = [("app".to_string(), "web".to_string())].into();
        let sel: LabelSelector =
            serde_json::from_value(serde_json::json!({"matchLabels": {"app": "web"}})).unwrap();
        assert_eq!(selector_matches(&sel, &labels), Ok(true));
        let sel: LabelSelector = serde_json::from_value(serde_json::json!({
            "matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}))
        .unwrap();
        assert_eq!(selector_matches(&sel, &labels), Ok(false));
        assert_eq!(selector_matches(&LabelSelector::default(), &labels), Ok(false));
        let sel: LabelSelector = serde_json::from_value(serde_json::json!({
            "matchExpressions": [{"key": "app", "operator": "Near"}]}))
        .unwrap();
        assert!(selector_matches(&sel, &labels).is_err());
    }
}
