//! Room promised to a resize from the decision on, so that nothing else takes what its victims
//! free. In the cluster the resizing Pod's desired requests already count against the node in every
//! later decision (the scheduler's `max(desired, allocated, actual)`); the reservation is what makes
//! headroomd's live headroom say the same until the kubelet has allocated the resize.
//!
//! Two implementations of [`Reservations`]:
//! - [`super::headroomd::HeadroomdLedger`]: headroomd's ledger over its Unix socket (`Reserve`,
//!   `Release`), the default. headroomd checks each reservation against its own live figures and
//!   expires it after its TTL, which also covers a shim that crashed while holding it.
//! - [`LocalLedger`]: `headroom_node_model::ReservationLedger` in this process, only when the shim
//!   is explicitly told to run without headroomd (`--ledger=local`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use headroom_node_model::{LedgerError, ReservationLedger, Resources};
use thiserror::Error;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One reservation to make.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reserve {
    /// Unique per resize attempt: `<pod uid>:<generation>` (headroomd allows `[A-Za-z0-9._:-]`).
    pub id: String,
    /// `namespace/name` of the resizing Pod.
    pub pod: String,
    /// Its uid (what headroomd's ledger is told: it knows Pods by uid from their cgroups).
    pub pod_uid: String,
    /// The extra room: requested − admitted.
    pub amount: Resources,
    /// The room the node has for it once the victims are gone, by the decision's count. The
    /// [`LocalLedger`] checks against it; headroomd checks against its own live figures, and the
    /// shim asks headroomd again while this says the room is there.
    pub available: Resources,
    pub ttl: Duration,
    /// Uids of the victims evicted for this room: headroomd counts the node as if they were gone
    /// (they are leaving; the reservation holds their room until they are).
    pub releasing_pod_uids: Vec<String>,
}

/// Why a reservation was not made.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ReservationError {
    /// The ledger said no: not enough room, a Pod it does not know, a caller it does not allow.
    #[error("{0}")]
    Refused(String),
    /// The ledger could not be asked (headroomd not listening, not answering in time).
    #[error("headroomd unreachable: {0}")]
    Unreachable(String),
}

impl From<LedgerError> for ReservationError {
    fn from(e: LedgerError) -> Self {
        ReservationError::Refused(e.to_string())
    }
}

/// Where the Kubernetes backend keeps reservations.
pub trait Reservations: Send + Sync {
    fn reserve(&self, request: Reserve) -> BoxFuture<'_, Result<(), ReservationError>>;
    /// Releases `id`; unknown ids are fine (already released or expired). Failures are logged:
    /// the reservation then ends at its TTL.
    fn release(&self, id: &str) -> BoxFuture<'_, ()>;
    /// Ids this process currently holds.
    fn held(&self) -> Vec<String>;
    /// Where they are kept, for logs: `headroomd` or `in-process`.
    fn kind(&self) -> &'static str;
}

/// Reservations kept in this process: nobody else (headroomd included) sees them.
#[derive(Default)]
pub struct LocalLedger {
    ledger: Mutex<ReservationLedger>,
}

impl LocalLedger {
    fn ledger(&self) -> std::sync::MutexGuard<'_, ReservationLedger> {
        self.ledger.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Reservations for LocalLedger {
    fn reserve(&self, r: Reserve) -> BoxFuture<'_, Result<(), ReservationError>> {
        let now = Instant::now();
        let mut ledger = self.ledger();
        ledger.expire(now);
        let result = ledger
            .reserve(r.id, r.pod, r.amount, now + r.ttl, now, r.available)
            .map_err(ReservationError::from);
        drop(ledger);
        Box::pin(async move { result })
    }

    fn release(&self, id: &str) -> BoxFuture<'_, ()> {
        self.ledger().release(id);
        Box::pin(async {})
    }

    fn held(&self) -> Vec<String> {
        let now = Instant::now();
        self.ledger()
            .iter()
            .filter(|r| r.is_live(now))
            .map(|r| r.id.clone())
            .collect()
    }

    fn kind(&self) -> &'static str {
        "in-process"
    }
}
