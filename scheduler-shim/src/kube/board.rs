//! What this node's shim decided, for people: `/status` and `/explain?pod=NS/NAME` on the metrics
//! port, read by `kubectl headroom` through the API server's `pods/proxy`.
//!
//! The board keeps the latest decision of each resizing Pod (bounded: the oldest are forgotten
//! first) and what became of it, and renders headroomd's live headroom at the moment it is asked.
//! The views are plain serde types so that the plugin reads exactly what the shim wrote.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use headroom_proto::v1 as pb;
use serde::{Deserialize, Serialize};

use super::LiveHeadroom;
use crate::decide::Decision;

/// Resizes remembered; a node rarely has more resizing Pods than this at once.
pub const REMEMBERED: usize = 128;

/// Where a decided resize stands now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase", tag = "phase")]
pub enum Stage {
    /// Decided; nothing (more) to do for it, or waiting on the next step.
    Decided,
    /// Dry run: the victims were named in a `WouldPreemptForResize` Event, nobody was evicted.
    WouldPreempt,
    /// Not preempting: headroomd's headroom was not fresh.
    Blocked { why: String },
    /// A preemption step failed (the victim could not be removed, the room not reserved).
    Failed { why: String },
    /// Victims removed; waiting for the kubelet to actuate the resize.
    Preempted,
    /// The kubelet actuated it this long after the victims were removed.
    Actuated { after_ms: u64 },
    /// Not actuated within `--resize-timeout-seconds`; the room was released.
    TimedOut,
    /// The resizing Pod went away first.
    Abandoned,
    /// A higher-priority resize arrived before any eviction; the room went to it.
    Replanned { by: String },
}

impl Stage {
    /// One line for a table cell.
    pub fn summary(&self) -> String {
        match self {
            Stage::Decided => "decided".into(),
            Stage::WouldPreempt => "would preempt (dry run)".into(),
            Stage::Blocked { why } => format!("blocked: {why}"),
            Stage::Failed { why } => format!("failed: {why}"),
            Stage::Preempted => "preempted, waiting for the kubelet".into(),
            Stage::Actuated { after_ms } => {
                format!("actuated {:.1}s after preempting", *after_ms as f64 / 1000.0)
            }
            Stage::TimedOut => "timed out, room released".into(),
            Stage::Abandoned => "pod went away, room released".into(),
            Stage::Replanned { by } => format!("gave the room to {by}"),
        }
    }
}

/// One resizing Pod's latest decision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResizeView {
    /// `namespace/name`.
    pub pod: String,
    pub uid: String,
    /// The Pod's generation the decision was for (a new resize is a new generation).
    pub generation: i64,
    /// Seconds since the Unix epoch.
    pub decided_at: i64,
    /// The decision in sentences (the text `headroomctl explain` prints standalone).
    pub explanation: String,
    pub decision: Decision,
    pub stage: Stage,
}

/// A node's figures from headroomd's newest snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeadroomView {
    pub version: u64,
    /// How old the snapshot was when this was rendered.
    pub age_ms: u64,
    /// headroomd marks its figures stale when the Pod source stopped answering.
    pub stale: bool,
    pub cpu_millis: Figures,
    pub memory_bytes: Figures,
    pub reservations: Vec<ReservationView>,
}

/// headroom = allocatable − allocated − reserved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Figures {
    pub allocatable: i64,
    pub allocated: i64,
    pub reserved: i64,
    pub headroom: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReservationView {
    pub id: String,
    pub pod: String,
    pub cpu_millis: i64,
    pub memory_bytes: i64,
}

/// `/status`: the node as its shim sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeView {
    pub node: String,
    pub dry_run: bool,
    /// `None` without headroomd (`--ledger local`) or before its first snapshot.
    pub headroom: Option<HeadroomView>,
    /// Why `headroom` is absent, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headroom_missing: Option<String>,
    /// Newest decision first.
    pub resizes: Vec<ResizeView>,
}

fn figures(f: Option<&pb::ResourceFigures>) -> Figures {
    f.map(|f| Figures {
        allocatable: f.allocatable,
        allocated: f.allocated,
        reserved: f.reserved,
        headroom: f.headroom,
    })
    .unwrap_or_default()
}

/// The views of one headroomd snapshot at `now`.
pub fn headroom_view(
    snapshot: &pb::HeadroomSnapshot,
    generated_at: SystemTime,
    now: SystemTime,
) -> HeadroomView {
    let node = snapshot.node.as_ref();
    HeadroomView {
        version: snapshot.version,
        age_ms: now
            .duration_since(generated_at)
            .unwrap_or(Duration::ZERO)
            .as_millis()
            .try_into()
            .unwrap_or(u64::MAX),
        stale: node.is_some_and(|n| n.stale),
        cpu_millis: figures(node.and_then(|n| n.cpu_millis.as_ref())),
        memory_bytes: figures(node.and_then(|n| n.memory_bytes.as_ref())),
        reservations: snapshot
            .reservations
            .iter()
            .map(|r| ReservationView {
                id: r.id.clone(),
                pod: r.pod.clone(),
                cpu_millis: r.cpu_millis,
                memory_bytes: r.memory_bytes,
            })
            .collect(),
    }
}

fn unix_seconds(at: SystemTime) -> i64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// The shim's decisions, shared by the reconciler (which writes) and the HTTP server (which reads).
pub struct Board {
    node: String,
    dry_run: bool,
    live: Option<Arc<LiveHeadroom>>,
    resizes: Mutex<BTreeMap<String, ResizeView>>,
}

impl Board {
    pub fn new(node: impl Into<String>, dry_run: bool, live: Option<Arc<LiveHeadroom>>) -> Self {
        Board {
            node: node.into(),
            dry_run,
            live,
            resizes: Mutex::new(BTreeMap::new()),
        }
    }

    fn resizes(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, ResizeView>> {
        // A poisoned lock only means a panic mid-update; the map itself stays consistent.
        self.resizes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new decision for `pod` replaces its older one.
    pub fn decided(&self, pod: &str, uid: &str, generation: i64, decision: &Decision, at: SystemTime) {
        let view = ResizeView {
            pod: pod.to_string(),
            uid: uid.to_string(),
            generation,
            decided_at: unix_seconds(at),
            explanation: crate::explain::explain(pod, decision),
            decision: decision.clone(),
            stage: Stage::Decided,
        };
        let mut resizes = self.resizes();
        resizes.insert(pod.to_string(), view);
        while resizes.len() > REMEMBERED {
            let oldest = resizes
                .iter()
                .min_by_key(|(_, v)| v.decided_at)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(key) => resizes.remove(&key),
                None => break,
            };
        }
    }

    /// What became of `pod`'s latest decision (ignored if none is held).
    pub fn staged(&self, pod: &str, stage: Stage) {
        if let Some(view) = self.resizes().get_mut(pod) {
            view.stage = stage;
        }
    }

    /// The latest decision for `pod`.
    pub fn explain(&self, pod: &str) -> Option<ResizeView> {
        self.resizes().get(pod).cloned()
    }

    /// Everything, rendered at `now`.
    pub fn status(&self, now: SystemTime) -> NodeView {
        let (headroom, headroom_missing) = match &self.live {
            None => (
                None,
                Some("this shim runs with --ledger local: no headroomd, no live headroom".to_string()),
            ),
            Some(live) => match live.latest() {
                Some(latest) => (
                    Some(headroom_view(&latest.snapshot, latest.generated_at, now)),
                    None,
                ),
                None => (
                    None,
                    Some("no snapshot from headroomd yet (is it running? see the shim's log)".to_string()),
                ),
            },
        };
        let mut resizes: Vec<ResizeView> = self.resizes().values().cloned().collect();
        resizes.sort_by(|a, b| b.decided_at.cmp(&a.decided_at).then(a.pod.cmp(&b.pod)));
        NodeView {
            node: self.node.clone(),
            dry_run: self.dry_run,
            headroom,
            headroom_missing,
            resizes,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::decide::Outcome;

    fn decision(outcome: Outcome) -> Decision {
        crate::decide::fixtures::seed_decision(outcome)
    }

    #[test]
    fn the_latest_decision_and_its_stage_are_kept_and_round_trip_through_json() {
        let board = Board::new("node-a", false, None);
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        board.decided("default/high", "u1", 1, &decision(Outcome::Deferred), t0);
        board.decided(
            "default/high",
            "u1",
            2,
            &decision(Outcome::Preempt),
            t0 + Duration::from_secs(5),
        );
        board.staged("default/high", Stage::Actuated { after_ms: 1_250 });
        board.staged("default/unknown", Stage::TimedOut);
        let view = board.explain("default/high").unwrap();
        assert_eq!((view.generation, view.decision.outcome), (2, Outcome::Preempt));
        assert_eq!(view.stage.summary(), "actuated 1.2s after preempting");
        assert!(
            view.explanation
                .contains("default/low-priority-pod (priority 1000)"),
            "{}",
            view.explanation
        );
        assert!(board.explain("default/unknown").is_none());

        let status = board.status(t0);
        assert!(status.headroom.is_none());
        assert!(status.headroom_missing.unwrap().contains("--ledger local"));
        let json = serde_json::to_string(&board.status(t0)).unwrap();
        let back: NodeView = serde_json::from_str(&json).unwrap();
        assert_eq!(back, board.status(t0));
        assert!(
            json.contains(r#""stage":{"phase":"actuated","afterMs":1250}"#),
            "{json}"
        );
    }

    #[test]
    fn the_oldest_decisions_are_forgotten_first() {
        let board = Board::new("node-a", false, None);
        for i in 0..(REMEMBERED as u64 + 3) {
            let at = SystemTime::UNIX_EPOCH + Duration::from_secs(10 + i);
            board.decided(&format!("ns/p{i}"), "u", 1, &decision(Outcome::Fits), at);
        }
        let status = board.status(SystemTime::now());
        assert_eq!(status.resizes.len(), REMEMBERED);
        assert_eq!(status.resizes[0].pod, format!("ns/p{}", REMEMBERED + 2));
        assert!(board.explain("ns/p0").is_none() && board.explain("ns/p2").is_none());
        assert!(board.explain("ns/p3").is_some());
    }

    #[test]
    fn headroom_comes_from_the_snapshot_with_its_age() {
        let snapshot = pb::HeadroomSnapshot {
            version: 7,
            node: Some(pb::NodeHeadroom {
                cpu_millis: Some(pb::ResourceFigures {
                    allocatable: 8000,
                    allocated: 5650,
                    reserved: 100,
                    headroom: 2250,
                }),
                stale: true,
                ..Default::default()
            }),
            reservations: vec![pb::Reservation {
                id: "r1".into(),
                pod: "default/high".into(),
                cpu_millis: 100,
                ..Default::default()
            }],
            ..Default::default()
        };
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        let view = headroom_view(&snapshot, at, at + Duration::from_millis(350));
        assert_eq!((view.version, view.age_ms, view.stale), (7, 350, true));
        assert_eq!(view.cpu_millis.headroom, 2250);
        assert_eq!(view.memory_bytes, Figures::default());
        assert_eq!(view.reservations[0].pod, "default/high");
        // headroomd's clock ahead of ours is no age, not a panic.
        assert_eq!(
            headroom_view(&snapshot, at, at - Duration::from_secs(1)).age_ms,
            0
        );
    }
}
