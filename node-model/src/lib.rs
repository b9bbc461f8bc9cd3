//! Pure node arithmetic for headroom: Kubernetes quantities, Pod requests counted as the scheduler
//! counts them (a resizing Pod at `max(desired, allocated, actual)`), node headroom
//! (`allocatable − allocated − reserved`) and the reservation ledger. No I/O, no clocks: time is
//! passed in.

pub mod headroom;
pub mod ledger;
pub mod pod;
pub mod quantity;
pub mod resources;

pub use headroom::{NodeHeadroom, extra_room_needed, node_headroom, room_once_gone};
pub use ledger::{LedgerError, Reservation, ReservationLedger};
pub use pod::{
    ModelError, QosClass, ResizeState, pod_requests, pod_requests_admitted, qos_class, resize_state,
};
pub use quantity::{
    QuantityError, format_cpu_millis, format_memory_bytes, parse_cpu_millis, parse_memory_bytes,
};
pub use resources::{ResourceName, Resources};
