//! headroomd, over its Unix socket, for the Kubernetes backend: its reservation ledger
//! ([`HeadroomdLedger`]: `Reserve`, `Release`) and its live headroom ([`LiveHeadroom`]: a
//! `WatchHeadroom` subscription that keeps the newest snapshot, and `GetHeadroom` to refresh one
//! that is too old). The calls go through [`headroom_client::Headroomd`], as headroomctl's and the
//! standalone backend's do.
//!
//! Freshness: a snapshot's age is `now − generated_at`, the time headroomd built it. On a node
//! headroomd's collector feeds the pipeline every 100 ms, so a live headroomd publishes a new
//! snapshot at least that often; an old `generated_at` means a stalled pipeline or a headroomd that
//! is gone, and nobody is evicted on it.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use headroom_node_model::Resources;
use headroom_proto::v1 as pb;
use thiserror::Error;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument as _;

pub use headroom_client::{Headroomd, HeadroomdError, RPC_TIMEOUT};

use super::Metrics;
use super::reservations::{BoxFuture, ReservationError, Reservations, Reserve};
use crate::decide::PodInput;

/// `WatchHeadroom`'s `min_interval_ms`: at most ten snapshots a second reach the shim.
pub const WATCH_MIN_INTERVAL: Duration = Duration::from_millis(100);
/// Reconnect backoff of the `WatchHeadroom` subscription: doubles from the first to the last.
pub const WATCH_BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(5));

// === The ledger ===

/// Reservations in headroomd's ledger. headroomd refuses one that its live headroom cannot hold
/// (`RESOURCE_EXHAUSTED`) or whose Pod it does not know, and drops each at its TTL.
pub struct HeadroomdLedger {
    headroomd: Headroomd,
    held: Mutex<BTreeSet<String>>,
}

impl HeadroomdLedger {
    pub fn new(headroomd: Headroomd) -> Self {
        HeadroomdLedger {
            headroomd,
            held: Mutex::default(),
        }
    }

    fn held_ids(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Reservations for HeadroomdLedger {
    fn reserve(&self, r: Reserve) -> BoxFuture<'_, Result<(), ReservationError>> {
        Box::pin(async move {
            let request = pb::ReserveRequest {
                reservation_id: r.id.clone(),
                pod: r.pod_uid.clone(),
                amount: Some(pb::ResourceAmount {
                    cpu_millis: Some(r.amount.cpu_millis),
                    memory_bytes: Some(r.amount.memory_bytes),
                    ..pb::ResourceAmount::default()
                }),
                ttl_seconds: u32::try_from(r.ttl.as_secs().max(1)).unwrap_or(u32::MAX),
                releasing_pod_uids: r.releasing_pod_uids.clone(),
            };
            let result = self.headroomd.reserve(request).await;
            match result {
                Ok(reply) => {
                    let headroom = reply
                        .node
                        .as_ref()
                        .and_then(|n| n.cpu_millis.as_ref())
                        .map(|c| c.headroom);
                    tracing::info!(id = %r.id, pod = %r.pod, amount = %r.amount, cpu_headroom_millis = ?headroom, "reserved in headroomd's ledger");
                    self.held_ids().insert(r.id);
                    Ok(())
                }
                // The id is `<uid>:<generation>`: a shim before this one (restarted mid-resize)
                // reserved for this same resize attempt. The room is promised to it already.
                Err(HeadroomdError::Status {
                    code: tonic::Code::AlreadyExists,
                    ..
                }) => {
                    tracing::info!(id = %r.id, pod = %r.pod, "adopting the reservation an earlier shim made for this resize");
                    self.held_ids().insert(r.id);
                    Ok(())
                }
                Err(e) if e.is_unreachable() => Err(ReservationError::Unreachable(e.to_string())),
                Err(e) => Err(ReservationError::Refused(format!("headroomd: {e}"))),
            }
        })
    }

    fn release(&self, id: &str) -> BoxFuture<'_, ()> {
        let id = id.to_string();
        Box::pin(async move {
            self.held_ids().remove(&id);
            match self.headroomd.release(&id).await {
                Ok(_) => tracing::info!(%id, "released in headroomd's ledger"),
                Err(HeadroomdError::Status {
                    code: tonic::Code::NotFound,
                    ..
                }) => tracing::info!(%id, "already gone from headroomd's ledger (expired)"),
                Err(error) => {
                    tracing::warn!(%id, %error, "release failed; headroomd drops the reservation at its TTL")
                }
            }
        })
    }

    fn held(&self) -> Vec<String> {
        self.held_ids().iter().cloned().collect()
    }

    fn kind(&self) -> &'static str {
        "headroomd"
    }
}

// === Live headroom ===

/// A snapshot as the shim holds it.
#[derive(Clone, Debug)]
pub struct Latest {
    pub snapshot: pb::HeadroomSnapshot,
    /// `snapshot.generated_at` (the Unix epoch when absent: never fresh).
    pub generated_at: SystemTime,
}

impl Latest {
    fn new(snapshot: pb::HeadroomSnapshot) -> Self {
        let generated_at = snapshot
            .generated_at
            .and_then(headroom_proto::system_time)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        Latest {
            snapshot,
            generated_at,
        }
    }

    /// How old it is at `now` (zero if headroomd's clock is ahead).
    pub fn age(&self, now: SystemTime) -> Duration {
        now.duration_since(self.generated_at).unwrap_or(Duration::ZERO)
    }
}

/// Why nobody may be evicted on the live headroom.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum NotFresh {
    /// headroomd answers, but with a snapshot older than the bound (its pipeline is stalled).
    #[error(
        "headroomd's newest headroom snapshot (version {version}) is {:.3}s old, over the {:.3}s bound, and GetHeadroom returned nothing newer",
        age.as_secs_f64(),
        bound.as_secs_f64()
    )]
    Stale {
        age: Duration,
        bound: Duration,
        version: u64,
    },
    /// No fresh snapshot and headroomd cannot be asked for one.
    #[error("headroomd is unreachable and no headroom snapshot within the {:.3}s bound is held: {reason}", bound.as_secs_f64())]
    Unreachable { bound: Duration, reason: String },
}

impl NotFresh {
    /// For metrics and logs.
    pub fn label(&self) -> &'static str {
        match self {
            NotFresh::Stale { .. } => "stale",
            NotFresh::Unreachable { .. } => "unreachable",
        }
    }
}

struct Shared {
    headroomd: Headroomd,
    latest: watch::Sender<Option<Arc<Latest>>>,
    metrics: Arc<Metrics>,
}

impl Shared {
    /// Keeps `latest` unless an even newer snapshot is held already.
    fn offer(&self, latest: Latest) {
        let latest = Arc::new(latest);
        self.latest.send_if_modified(|held| {
            if held
                .as_ref()
                .is_none_or(|h| latest.generated_at >= h.generated_at)
            {
                *held = Some(latest.clone());
                true
            } else {
                false
            }
        });
    }
}

/// headroomd's live headroom: the newest `WatchHeadroom` snapshot, kept by a background task that
/// reconnects with backoff when the stream fails. The task ends when this is dropped.
pub struct LiveHeadroom {
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl Drop for LiveHeadroom {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl LiveHeadroom {
    /// Subscribes in the background (inside a Tokio runtime).
    pub fn start(headroomd: Headroomd, metrics: Arc<Metrics>) -> Arc<Self> {
        let (latest, _) = watch::channel(None);
        let shared = Arc::new(Shared {
            headroomd,
            latest,
            metrics,
        });
        let span = tracing::info_span!("headroomd_watch", socket = %shared.headroomd.socket().display());
        let task = tokio::spawn(subscribe(shared.clone()).instrument(span));
        Arc::new(LiveHeadroom { shared, task })
    }

    /// The newest snapshot held, however old.
    pub fn latest(&self) -> Option<Arc<Latest>> {
        self.shared.latest.borrow().clone()
    }

    /// Waits for a snapshot newer than `version` until `until`; its version, or `None` at the
    /// deadline (or once the subscription is gone).
    pub async fn newer_than(&self, version: u64, until: tokio::time::Instant) -> Option<u64> {
        let mut updates = self.shared.latest.subscribe();
        loop {
            let held = updates.borrow_and_update().as_ref().map(|l| l.snapshot.version);
            if let Some(newer) = held.filter(|&v| v > version) {
                return Some(newer);
            }
            match tokio::time::timeout_at(until, updates.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return None,
            }
        }
    }

    /// The newest snapshot if it is at most `bound` old; otherwise one from `GetHeadroom`, if that
    /// one is. Anything else is a reason not to evict.
    pub async fn fresh(&self, bound: Duration) -> Result<Arc<Latest>, NotFresh> {
        if let Some(latest) = self.latest()
            && latest.age(SystemTime::now()) <= bound
        {
            return Ok(latest);
        }
        let refreshed = self.shared.headroomd.get_headroom(true).await;
        let error = match refreshed {
            Ok(snapshot) => {
                self.shared.offer(Latest::new(snapshot));
                None
            }
            Err(e) => Some(e),
        };
        let now = SystemTime::now();
        match (self.latest(), error) {
            // The subscription may have delivered a fresh one meanwhile.
            (Some(latest), _) if latest.age(now) <= bound => Ok(latest),
            (Some(latest), None) => Err(NotFresh::Stale {
                age: latest.age(now),
                bound,
                version: latest.snapshot.version,
            }),
            (None, None) => Err(NotFresh::Unreachable {
                bound,
                reason: "GetHeadroom returned no snapshot".into(),
            }),
            (_, Some(e)) => Err(NotFresh::Unreachable {
                bound,
                reason: e.to_string(),
            }),
        }
    }
}

/// The subscription: keeps the newest snapshot; on a failed or ended stream waits (100 ms,
/// doubling to 5 s, back to 100 ms after a snapshot arrives) and subscribes again.
async fn subscribe(shared: Arc<Shared>) {
    let (first, max) = WATCH_BACKOFF;
    let mut backoff = first;
    loop {
        let outcome: Result<std::convert::Infallible, HeadroomdError> = async {
            let request = pb::WatchHeadroomRequest {
                // Each Pod's live figures: shrink-before-evict rests on them.
                include_pods: true,
                min_interval_ms: u32::try_from(WATCH_MIN_INTERVAL.as_millis()).unwrap_or(u32::MAX),
            };
            let mut stream = shared.headroomd.watch_headroom(request).await?;
            tracing::info!("subscribed to WatchHeadroom");
            loop {
                match stream.message().await {
                    Ok(Some(snapshot)) => {
                        backoff = first;
                        shared.offer(Latest::new(snapshot));
                    }
                    Ok(None) => {
                        return Err(HeadroomdError::Status {
                            rpc: "WatchHeadroom",
                            code: tonic::Code::Unavailable,
                            message: "stream ended".into(),
                        });
                    }
                    Err(s) => return Err(HeadroomdError::status("WatchHeadroom", &s)),
                }
            }
        }
        .await;
        let error = match outcome {
            Ok(never) => match never {},
            Err(e) => e,
        };
        shared.metrics.headroomd_stream_error();
        shared.headroomd.forget().await;
        tracing::warn!(%error, retry_in_ms = backoff.as_millis() as u64, "WatchHeadroom failed; subscribing again");
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(max);
    }
}

/// Room headroomd's ledger promises that the decision does not count yet: reservations whose Pod
/// is none of `pods` (the node's Pods, by uid or `namespace/name`). A Pod on the node is counted at
/// `max(desired, allocated, actual)` already, so the room reserved for its resize is in that count
/// (this is [`crate::decide::NodeState::reserved`]'s definition; the standalone node, whose every
/// reservation is for one of its Pods, always has zero).
pub fn unaccounted_reservations(snapshot: &pb::HeadroomSnapshot, pods: &[PodInput]) -> Resources {
    snapshot
        .reservations
        .iter()
        .filter(|r| {
            !pods
                .iter()
                .any(|p| r.pod == p.uid || r.pod.split_once('/').is_some_and(|(ns, name)| p.is(ns, name)))
        })
        .fold(Resources::ZERO, |sum, r| {
            sum.saturating_add(Resources::new(r.cpu_millis.max(0), r.memory_bytes.max(0)))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_reservations_for_pods_off_the_node_count() {
        let pods = vec![PodInput {
            namespace: "default".into(),
            name: "high".into(),
            uid: "uid-high".into(),
            ..PodInput::default()
        }];
        let reservation = |pod: &str, cpu| pb::Reservation {
            id: format!("{pod}:1").replace('/', "-"),
            pod: pod.into(),
            cpu_millis: cpu,
            memory_bytes: 1 << 20,
            expires_at: None,
        };
        let snapshot = pb::HeadroomSnapshot {
            reservations: vec![
                reservation("uid-high", 2000),
                reservation("default/high", 500),
                reservation("uid-elsewhere", 300),
                reservation("other/pod", 200),
            ],
            ..pb::HeadroomSnapshot::default()
        };
        assert_eq!(
            unaccounted_reservations(&snapshot, &pods),
            Resources::new(500, 2 << 20)
        );
    }

    #[test]
    fn age_is_measured_from_generated_at() {
        let now = SystemTime::now();
        let latest = Latest::new(pb::HeadroomSnapshot {
            generated_at: Some(headroom_proto::timestamp(now - Duration::from_secs(3))),
            ..pb::HeadroomSnapshot::default()
        });
        assert_eq!(latest.age(now), Duration::from_secs(3));
        let ahead = Latest::new(pb::HeadroomSnapshot {
            generated_at: Some(headroom_proto::timestamp(now + Duration::from_secs(1))),
            ..pb::HeadroomSnapshot::default()
        });
        assert_eq!(ahead.age(now), Duration::ZERO);
        let missing = Latest::new(pb::HeadroomSnapshot::default());
        assert!(missing.age(now) > Duration::from_secs(3600));
    }
}
