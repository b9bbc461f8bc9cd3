//! `kubectl headroom`: what a node's headroom agent decided and sees, where operators look.
//!
//! The shim of each node keeps its decisions on a board (`headroom_shim::kube::board`) and
//! serves it on its metrics port (`/explain?pod=NS/NAME`, `/status`). This plugin finds the agent
//! Pod of the right node and asks it through the API server's `pods/proxy`, so it needs nothing but
//! the operator's kubeconfig (and `get` on `pods/proxy` in the agent's namespace).
//!
//! This file is the pure half: what is shown, from the views. `main.rs` talks to the API server.

use headroom_client::kubectl::{human_duration, table};
use headroom_node_model::{ResizeState, format_cpu_millis, format_memory_bytes};
use headroom_shim::kube::board::{Figures, HeadroomView, NodeView, ResizeView};
use serde::Serialize;

/// The agent's shim serves the board on this named container port.
pub const SHIM_PORT_NAME: &str = "shim-metrics";
/// The agent's shim container.
pub const SHIM_CONTAINER: &str = "headroom-shim";

/// Where a Pod's resize stands, in the kubelet's words (its `PodResize*` conditions).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResizeCondition {
    /// `Deferred`, `Infeasible`, `InProgress`, `Error`, another `PodResizePending` reason, or
    /// `None` when no resize is pending.
    pub state: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl From<&ResizeState> for ResizeCondition {
    fn from(state: &ResizeState) -> Self {
        let (state, message) = match state {
            ResizeState::None => ("None".to_string(), String::new()),
            ResizeState::Deferred { message } => ("Deferred".into(), message.clone()),
            ResizeState::Infeasible { message } => ("Infeasible".into(), message.clone()),
            ResizeState::InProgress => ("InProgress".into(), String::new()),
            ResizeState::Error { message } => ("Error".into(), message.clone()),
            ResizeState::PendingOther { reason, message } => (reason.clone(), message.clone()),
        };
        ResizeCondition { state, message }
    }
}

/// `kubectl headroom explain POD`: everything it shows, as `-o json|yaml` prints it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explained {
    /// `namespace/name`.
    pub pod: String,
    pub node: String,
    /// `namespace/name` of the headroom agent Pod asked.
    pub agent: String,
    pub resize: ResizeCondition,
    /// The shim's latest decision for this Pod; `None` if it has made none since it started.
    pub decision: Option<ResizeView>,
    /// The node's live headroom, as the shim holds it.
    pub headroom: Option<HeadroomView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headroom_missing: Option<String>,
}

fn cpu(m: i64) -> String {
    format_cpu_millis(m)
}

fn memory(b: i64) -> String {
    format_memory_bytes(b)
}

/// Allocatable, allocated, reserved and headroom of both resources, as a table.
pub fn headroom_table(view: &HeadroomView) -> String {
    let row = |name: &str, f: &Figures, fmt: fn(i64) -> String| {
        vec![
            name.to_string(),
            fmt(f.allocatable),
            fmt(f.allocated),
            fmt(f.reserved),
            fmt(f.headroom),
        ]
    };
    table(
        &["RESOURCE", "ALLOCATABLE", "ALLOCATED", "RESERVED", "HEADROOM"],
        &[
            row("cpu", &view.cpu_millis, cpu),
            row("memory", &view.memory_bytes, memory),
        ],
    )
}

fn snapshot_line(view: &HeadroomView) -> String {
    format!(
        "headroomd snapshot {}, {:.1}s old{}",
        view.version,
        view.age_ms as f64 / 1000.0,
        if view.stale { ", STALE" } else { "" }
    )
}

fn age(decided_at: i64, now: i64) -> String {
    human_duration(now.saturating_sub(decided_at))
}

/// The text of `kubectl headroom explain`, at `now` (Unix seconds).
pub fn explain_text(e: &Explained, now: i64) -> String {
    let mut out = String::new();
    let resize = if e.resize.message.is_empty() {
        e.resize.state.clone()
    } else {
        format!("{}: {}", e.resize.state, e.resize.message)
    };
    out.push_str(&format!("Pod:       {}\n", e.pod));
    out.push_str(&format!("Node:      {} (agent {})\n", e.node, e.agent));
    out.push_str(&format!("Resize:    {resize}\n"));
    match &e.decision {
        None => out.push_str(&format!(
            "Decision:  none: the shim on {} has decided nothing for this Pod since it started (it decides Deferred resizes only)\n",
            e.node
        )),
        Some(d) => {
            out.push_str(&format!(
                "Decision:  {}, {} ago (generation {}): {}\n\n",
                d.decision.outcome.as_str(),
                age(d.decided_at, now),
                d.generation,
                d.stage.summary()
            ));
            out.push_str(&d.explanation);
            out.push('\n');
            if !d.decision.victims.is_empty() {
                let rows: Vec<Vec<String>> = d
                    .decision
                    .victims
                    .iter()
                    .map(|v| {
                        vec![
                            format!("{}/{}", v.namespace, v.name),
                            v.priority.to_string(),
                            v.requests.to_string(),
                            if v.violates_pdb { "violated" } else { "-" }.to_string(),
                        ]
                    })
                    .collect();
                out.push('\n');
                out.push_str(&table(&["VICTIM", "PRIORITY", "REQUESTS", "PDB"], &rows));
                out.push('\n');
            }
        }
    }
    out.push('\n');
    match (&e.headroom, &e.headroom_missing) {
        (Some(h), _) => {
            out.push_str(&format!("Node headroom ({}):\n", snapshot_line(h)));
            out.push_str(&headroom_table(h));
            out.push('\n');
        }
        (None, why) => out.push_str(&format!(
            "Node headroom: unknown ({})\n",
            why.as_deref().unwrap_or("the agent did not say")
        )),
    }
    out
}

/// The text of `kubectl headroom status NODE`, at `now` (Unix seconds).
pub fn status_text(agent: &str, view: &NodeView, now: i64, wide: bool) -> String {
    let mut out = format!(
        "Node:      {} (agent {}{})\n",
        view.node,
        agent,
        if view.dry_run {
            ", dry run: evicts nobody"
        } else {
            ""
        }
    );
    match (&view.headroom, &view.headroom_missing) {
        (Some(h), _) => {
            out.push_str(&format!("Headroom:  {}\n\n", snapshot_line(h)));
            out.push_str(&headroom_table(h));
            out.push('\n');
            if !h.reservations.is_empty() {
                let rows: Vec<Vec<String>> = h
                    .reservations
                    .iter()
                    .map(|r| {
                        vec![
                            r.pod.clone(),
                            cpu(r.cpu_millis),
                            memory(r.memory_bytes),
                            r.id.clone(),
                        ]
                    })
                    .collect();
                out.push('\n');
                out.push_str(&table(&["RESERVED FOR", "CPU", "MEMORY", "ID"], &rows));
                out.push('\n');
            }
        }
        (None, why) => out.push_str(&format!(
            "Headroom:  unknown ({})\n",
            why.as_deref().unwrap_or("the agent did not say")
        )),
    }
    out.push('\n');
    if view.resizes.is_empty() {
        out.push_str("No resize decided since the shim started.\n");
        return out;
    }
    let mut header = vec!["RESIZE", "OUTCOME", "VICTIMS", "STAGE", "AGE"];
    if wide {
        header.extend(["GENERATION", "UID"]);
    }
    let rows: Vec<Vec<String>> = view
        .resizes
        .iter()
        .map(|r| {
            let victims: Vec<String> = r
                .decision
                .victims
                .iter()
                .map(|v| format!("{}/{}", v.namespace, v.name))
                .collect();
            let mut row = vec![
                r.pod.clone(),
                r.decision.outcome.as_str().to_string(),
                if victims.is_empty() {
                    "<none>".into()
                } else {
                    victims.join(",")
                },
                r.stage.summary(),
                age(r.decided_at, now),
            ];
            if wide {
                row.extend([r.generation.to_string(), r.uid.clone()]);
            }
            row
        })
        .collect();
    out.push_str(&table(&header, &rows));
    out.push('\n');
    out
}

/// One row per node of `kubectl headroom status` without a node.
pub fn nodes_text(nodes: &[(String, Result<NodeView, String>)]) -> String {
    let rows: Vec<Vec<String>> = nodes
        .iter()
        .map(|(agent, view)| match view {
            Ok(v) => {
                let (cpu_free, memory_free, age) = match &v.headroom {
                    Some(h) => (
                        cpu(h.cpu_millis.headroom),
                        memory(h.memory_bytes.headroom),
                        format!("{:.1}s", h.age_ms as f64 / 1000.0),
                    ),
                    None => ("<unknown>".into(), "<unknown>".into(), "<none>".into()),
                };
                vec![
                    v.node.clone(),
                    agent.clone(),
                    cpu_free,
                    memory_free,
                    v.resizes.len().to_string(),
                    age,
                ]
            }
            Err(why) => vec![
                "<unreachable>".into(),
                agent.clone(),
                "-".into(),
                "-".into(),
                "-".into(),
                why.clone(),
            ],
        })
        .collect();
    table(
        &[
            "NODE",
            "AGENT",
            "CPU HEADROOM",
            "MEMORY HEADROOM",
            "RESIZES",
            "SNAPSHOT AGE",
        ],
        &rows,
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use headroom_shim::Outcome;
    use headroom_shim::kube::board::Stage;

    fn view() -> ResizeView {
        let decision = headroom_shim::decide::fixtures::seed_decision(Outcome::Preempt);
        ResizeView {
            pod: "default/high-priority-pod".into(),
            uid: "u-high".into(),
            generation: 2,
            decided_at: 1_000,
            explanation: headroom_shim::explain::explain("default/high-priority-pod", &decision),
            decision,
            stage: Stage::Actuated { after_ms: 1_240 },
        }
    }

    fn headroom() -> HeadroomView {
        HeadroomView {
            version: 9,
            age_ms: 300,
            stale: false,
            cpu_millis: Figures {
                allocatable: 8000,
                allocated: 5650,
                reserved: 0,
                headroom: 2350,
            },
            memory_bytes: Figures {
                allocatable: 16 << 30,
                allocated: 1 << 30,
                reserved: 0,
                headroom: 15 << 30,
            },
            reservations: vec![],
        }
    }

    #[test]
    fn explain_shows_the_kubelet_state_the_decision_its_victims_and_the_headroom() {
        let e = Explained {
            pod: "default/high-priority-pod".into(),
            node: "node-a".into(),
            agent: "headroom-system/headroom-x".into(),
            resize: (&ResizeState::None).into(),
            decision: Some(view()),
            headroom: Some(headroom()),
            headroom_missing: None,
        };
        let text = explain_text(&e, 1_150);
        for want in [
            "Resize:    None",
            "Decision:  preempt, 2m30s ago (generation 2): actuated 1.2s after preempting",
            "Evicting 1 lower-priority Pod",
            "default/low-priority-pod   1000       cpu=3 memory=500Mi   -",
            "headroomd snapshot 9, 0.3s old",
            "cpu        8             5650m       0          2350m",
        ] {
            assert!(text.contains(want), "{want:?} not in\n{text}");
        }
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(json["decision"]["stage"]["phase"], "actuated");
        assert_eq!(json["resize"]["state"], "None");
    }

    #[test]
    fn explain_without_a_decision_or_headroom_says_why() {
        let e = Explained {
            pod: "default/x".into(),
            node: "node-a".into(),
            agent: "headroom-system/headroom-x".into(),
            resize: (&ResizeState::Deferred {
                message: "Node didn't have enough resource: cpu".into(),
            })
                .into(),
            decision: None,
            headroom: None,
            headroom_missing: Some("no snapshot from headroomd yet".into()),
        };
        let text = explain_text(&e, 0);
        assert!(
            text.contains("Resize:    Deferred: Node didn't have enough resource: cpu"),
            "{text}"
        );
        assert!(text.contains("has decided nothing for this Pod"), "{text}");
        assert!(
            text.contains("unknown (no snapshot from headroomd yet)"),
            "{text}"
        );
    }

    #[test]
    fn status_lists_every_resize_and_wide_adds_its_identity() {
        let view = NodeView {
            node: "node-a".into(),
            dry_run: true,
            headroom: Some(headroom()),
            headroom_missing: None,
            resizes: vec![view()],
        };
        let text = status_text("headroom-system/headroom-x", &view, 1_005, false);
        assert!(text.contains("dry run: evicts nobody"), "{text}");
        assert!(
            text.contains("default/high-priority-pod   preempt   default/low-priority-pod   actuated 1.2s after preempting   5s"),
            "{text}"
        );
        assert!(!text.contains("u-high"));
        assert!(status_text("a", &view, 1_005, true).contains("u-high"));
        let rows = nodes_text(&[
            ("headroom-system/headroom-x".into(), Ok(view.clone())),
            (
                "headroom-system/headroom-y".into(),
                Err("503 Service Unavailable".into()),
            ),
        ]);
        let cells: Vec<Vec<&str>> = rows.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(
            cells[1][..5],
            ["node-a", "headroom-system/headroom-x", "2350m", "15Gi", "1"],
            "{rows}"
        );
        assert_eq!(
            cells[2][..2],
            ["<unreachable>", "headroom-system/headroom-y"],
            "{rows}"
        );
    }
}
