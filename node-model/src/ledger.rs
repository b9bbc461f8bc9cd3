//! Reservation ledger: room promised to in-flight resizes, so that the room freed by evicting
//! victims is not taken by anything else before the kubelet allocates the resize. Time is passed in,
//! so the ledger is pure and testable.

use std::collections::BTreeMap;
use std::time::Instant;

use thiserror::Error;

use crate::Resources;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reservation {
    pub id: String,
    /// `namespace/name` of the Pod the room is promised to.
    pub pod: String,
    pub amount: Resources,
    pub expires_at: Instant,
}

impl Reservation {
    pub fn is_live(&self, now: Instant) -> bool {
        self.expires_at > now
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LedgerError {
    #[error("reservation {0:?} already exists")]
    DuplicateId(String),
    #[error("reservation amount {0} is negative")]
    NegativeAmount(Resources),
    #[error("reservation {id:?} would already be expired")]
    AlreadyExpired { id: String },
    #[error("reservation of {requested} does not fit: {available} available, {reserved} already reserved")]
    InsufficientHeadroom {
        requested: Resources,
        available: Resources,
        reserved: Resources,
    },
}

/// Reservations by id. Expired entries stop counting at once (`total`) and are removed by `expire`.
#[derive(Clone, Debug, Default)]
pub struct ReservationLedger {
    reservations: BTreeMap<String, Reservation>,
}

impl ReservationLedger {
    pub fn new() -> Self {
        Self::default()
    }

    /// Promises `amount` to `pod` until `expires_at`.
    ///
    /// `available` is the room before this ledger's reservations (`allocatable − allocated`); the
    /// reservation is refused if, together with the reservations still live at `now`, it would exceed
    /// it — two resizes can never be promised the same room. An id that is still present (even if
    /// expired but not yet `expire`d) is refused.
    pub fn reserve(
        &mut self,
        id: impl Into<String>,
        pod: impl Into<String>,
        amount: Resources,
        expires_at: Instant,
        now: Instant,
        available: Resources,
    ) -> Result<(), LedgerError> {
        let id = id.into();
        if self.reservations.contains_key(&id) {
            return Err(LedgerError::DuplicateId(id));
        }
        if !Resources::ZERO.fits_within(&amount) {
            return Err(LedgerError::NegativeAmount(amount));
        }
        if expires_at <= now {
            return Err(LedgerError::AlreadyExpired { id });
        }
        let reserved = self.total(now);
        let insufficient = || LedgerError::InsufficientHeadroom {
            requested: amount,
            available,
            reserved,
        };
        let wanted = reserved.checked_add(amount).ok_or_else(insufficient)?;
        if !wanted.fits_within(&available) {
            return Err(insufficient());
        }
        let pod = pod.into();
        self.reservations.insert(
            id.clone(),
            Reservation {
                id,
                pod,
                amount,
                expires_at,
            },
        );
        Ok(())
    }

    /// Takes back a reservation made before a restart. The room was promised then, so it is not
    /// fitted against today's headroom again (a node that shrank meanwhile shows a deficit rather
    /// than a broken promise); a duplicate, negative or expired one is refused as by `reserve`.
    pub fn restore(&mut self, reservation: Reservation, now: Instant) -> Result<(), LedgerError> {
        if self.reservations.contains_key(&reservation.id) {
            return Err(LedgerError::DuplicateId(reservation.id));
        }
        if !Resources::ZERO.fits_within(&reservation.amount) {
            return Err(LedgerError::NegativeAmount(reservation.amount));
        }
        if !reservation.is_live(now) {
            return Err(LedgerError::AlreadyExpired { id: reservation.id });
        }
        self.reservations.insert(reservation.id.clone(), reservation);
        Ok(())
    }

    /// Releases a reservation (resize completed or failed); `None` if unknown.
    pub fn release(&mut self, id: &str) -> Option<Reservation> {
        self.reservations.remove(id)
    }

    /// Removes and returns the reservations expired at `now`.
    pub fn expire(&mut self, now: Instant) -> Vec<Reservation> {
        let expired: Vec<String> = self
            .reservations
            .values()
            .filter(|r| !r.is_live(now))
            .map(|r| r.id.clone())
            .collect();
        expired
            .into_iter()
            .filter_map(|id| self.reservations.remove(&id))
            .collect()
    }

    /// Sum of the reservations live at `now` (saturating; amounts are bounded by `available` anyway).
    pub fn total(&self, now: Instant) -> Resources {
        self.reservations
            .values()
            .filter(|r| r.is_live(now))
            .fold(Resources::ZERO, |sum, r| sum.saturating_add(r.amount))
    }

    /// How much of the live reservations (and of `adding`, one about to be made) the Pods' own
    /// counts already hold: a Pod counted at its desired size (as the scheduler counts a
    /// resizing Pod) holds `pending_resize(pod)` of its reservations itself, at most once per
    /// Pod, so that part is not room taken twice.
    pub fn held_by_counts(
        &self,
        now: Instant,
        adding: Option<(&str, Resources)>,
        pending_resize: impl Fn(&str) -> Resources,
    ) -> Resources {
        let mut per_pod: BTreeMap<&str, Resources> = BTreeMap::new();
        let live = self
            .reservations
            .values()
            .filter(|r| r.is_live(now))
            .map(|r| (r.pod.as_str(), r.amount));
        for (pod, amount) in live.chain(adding) {
            let sum = per_pod.entry(pod).or_insert(Resources::ZERO);
            *sum = sum.saturating_add(amount);
        }
        per_pod.into_iter().fold(Resources::ZERO, |held, (pod, amount)| {
            held.saturating_add(amount.min(pending_resize(pod)))
        })
    }

    /// All reservations (live or not yet expired out), ordered by id.
    pub fn iter(&self) -> impl Iterator<Item = &Reservation> {
        self.reservations.values()
    }

    pub fn get(&self, id: &str) -> Option<&Reservation> {
        self.reservations.get(id)
    }

    pub fn len(&self) -> usize {
        self.reservations.len()
    }

    pub fn is_empty(&self) -> bool {
        self.reservations.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_restored_reservation_counts_even_beyond_todays_room_but_not_twice_or_expired() {
        let now = Instant::now();
        let later = now + Duration::from_secs(30);
        let restored = |id: &str, cpu: i64, expires_at: Instant| Reservation {
            id: id.into(),
            pod: "ns/p".into(),
            amount: Resources::new(cpu, 0),
            expires_at,
        };
        let mut ledger = ReservationLedger::new();
        // Promised before the restart: kept although no headroom is checked.
        assert_eq!(ledger.restore(restored("r1", 3000, later), now), Ok(()));
        assert_eq!(ledger.total(now), Resources::new(3000, 0));
        assert_eq!(
            ledger.restore(restored("r1", 1, later), now),
            Err(LedgerError::DuplicateId("r1".into()))
        );
        assert!(matches!(
            ledger.restore(restored("r2", -1, later), now),
            Err(LedgerError::NegativeAmount(_))
        ));
        assert!(matches!(
            ledger.restore(restored("r3", 1, now), now),
            Err(LedgerError::AlreadyExpired { .. })
        ));
        assert_eq!(ledger.len(), 1);
        // And it takes room from new reservations like any other.
        let refused = ledger.reserve(
            "r4",
            "ns/q",
            Resources::new(2000, 0),
            later,
            now,
            Resources::new(4000, 0),
        );
        assert!(
            matches!(refused, Err(LedgerError::InsufficientHeadroom { .. })),
            "{refused:?}"
        );
    }

    #[test]
    fn a_pods_pending_resize_holds_its_reservations_once() {
        let now = Instant::now();
        let later = now + Duration::from_secs(30);
        let plenty = Resources::new(10_000, 0);
        let mut ledger = ReservationLedger::new();
        for (id, pod, cpu) in [("a1", "a", 1500), ("a2", "a", 1000), ("b", "b", 700)] {
            let reserved = ledger.reserve(id, pod, Resources::new(cpu, 0), later, now, plenty);
            assert!(reserved.is_ok(), "{reserved:?}");
        }
        let pending = |pod: &str| match pod {
            "a" => Resources::new(2000, 0),
            _ => Resources::ZERO,
        };
        // a: 2500 reserved, 2000 of it pending in its count; b holds nothing.
        assert_eq!(ledger.held_by_counts(now, None, pending), Resources::new(2000, 0));
        // An addition for a Pod already fully credited gets nothing more.
        let more = Some(("a", Resources::new(500, 0)));
        assert_eq!(ledger.held_by_counts(now, more, pending), Resources::new(2000, 0));
        // Expired reservations hold nothing.
        assert_eq!(ledger.held_by_counts(later, None, pending), Resources::ZERO);
    }

    #[test]
    fn refuses_double_promise_and_expires() {
        let now = Instant::now();
        let later = now + Duration::from_secs(30);
        let available = Resources::new(2000, 1 << 30);
        let mut ledger = ReservationLedger::new();
        ledger
            .reserve("r1", "default/a", Resources::new(1500, 0), later, now, available)
            .expect("fits");
        let err = ledger.reserve("r2", "default/b", Resources::new(1000, 0), later, now, available);
        assert!(
            matches!(err, Err(LedgerError::InsufficientHeadroom { .. })),
            "{err:?}"
        );
        assert_eq!(
            ledger.reserve("r1", "default/b", Resources::new(1, 0), later, now, available),
            Err(LedgerError::DuplicateId("r1".into()))
        );
        assert!(
            ledger
                .reserve("r3", "x/y", Resources::new(-1, 0), later, now, available)
                .is_err()
        );
        assert!(
            ledger
                .reserve("r4", "x/y", Resources::new(1, 0), now, now, available)
                .is_err()
        );
        assert_eq!(ledger.total(now), Resources::new(1500, 0));
        assert_eq!(ledger.total(later), Resources::ZERO);
        let expired = ledger.expire(later);
        assert_eq!(expired.len(), 1);
        assert!(ledger.is_empty());
        ledger
            .reserve("r2", "default/b", Resources::new(1000, 0), later, now, available)
            .expect("fits now");
        assert_eq!(ledger.release("r2").map(|r| r.pod), Some("default/b".to_string()));
        assert_eq!(ledger.release("r2"), None);
    }
}
