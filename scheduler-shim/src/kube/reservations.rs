//! Room promised to a resize from the decision on, so that nothing else takes what its victims
//! free. In the cluster the resizing Pod's desired requests already count against the node in every
//! later decision (the scheduler's `max(desired, allocated, actual)`); the reservation is what makes
//! headroomd's live headroom say the same until the kubelet has allocated the resize.
//!
//! [`LocalLedger`] keeps the reservations in this process (`headroom_node_model::ReservationLedger`);
//! a client of headroomd's ledger implements the same trait.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use headroom_node_model::{LedgerError, ReservationLedger, Resources};

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One reservation to make.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reserve {
    /// Unique per resize attempt: `<pod uid>/<generation>`.
    pub id: String,
    /// `namespace/name` of the resizing Pod.
    pub pod: String,
    /// The extra room: requested − admitted.
    pub amount: Resources,
    /// The room the node has for it once the victims are gone.
    pub available: Resources,
    pub ttl: Duration,
}

pub trait Reservations: Send + Sync {
    fn reserve(&self, request: Reserve) -> BoxFuture<'_, Result<(), LedgerError>>;
    /// Releases `id`; unknown ids are fine (already released or expired).
    fn release(&self, id: &str) -> BoxFuture<'_, ()>;
    /// Ids currently held.
    fn held(&self) -> Vec<String>;
}

/// Reservations kept in this process.
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
    fn reserve(&self, r: Reserve) -> BoxFuture<'_, Result<(), LedgerError>> {
        let now = Instant::now();
        let mut ledger = self.ledger();
        ledger.expire(now);
        let result = ledger.reserve(r.id, r.pod, r.amount, now + r.ttl, now, r.available);
        drop(ledger);
        Box::pin(async move { result })
    }

    fn release(&self, id: &str) -> BoxFuture<'_, ()> {
        self.ledger().release(id);
        Box::pin(async {})
    }

    fn held(&self) -> Vec<String> {
        self.ledger().iter().map(|r| r.id.clone()).collect()
    }
}
