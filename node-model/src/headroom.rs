//! `headroom = allocatable − allocated − reserved`, per resource, and the two figures a
//! preemption is made of: the room left once some Pods have gone, and the extra room a resize
//! needs. Every crate that reckons node room calls these.

use serde::{Deserialize, Serialize};

use crate::Resources;

/// The node's room, per resource. `headroom` is negative when the node is overcommitted (for
/// example a resize was allocated while reservations were outstanding); it is reported, not hidden.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeHeadroom {
    pub allocatable: Resources,
    pub allocated: Resources,
    pub reserved: Resources,
    pub headroom: Resources,
}

/// Saturating: absurd inputs give an extreme figure instead of a panic.
pub fn node_headroom(allocatable: Resources, allocated: Resources, reserved: Resources) -> NodeHeadroom {
    NodeHeadroom {
        allocatable,
        allocated,
        reserved,
        headroom: allocatable.saturating_sub(allocated).saturating_sub(reserved),
    }
}

/// The room of a node once the Pods holding `leaving` have gone: `allocatable − (allocated −
/// leaving)`, saturating.
pub fn room_once_gone(allocatable: Resources, allocated: Resources, leaving: Resources) -> Resources {
    allocatable.saturating_sub(allocated.saturating_sub(leaving))
}

/// The extra room a resize from `admitted` to `requested` needs, per resource; nothing for a
/// resource that shrinks.
pub fn extra_room_needed(admitted: Resources, requested: Resources) -> Resources {
    requested.saturating_sub(admitted).max(Resources::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_once_gone_and_extra_room_needed() {
        let room = room_once_gone(
            Resources::new(8000, 16 << 30),
            Resources::new(7950, 3 << 30),
            Resources::new(2000, 1 << 30),
        );
        assert_eq!(room, Resources::new(2050, 14 << 30));
        assert_eq!(
            extra_room_needed(Resources::new(2000, 2 << 30), Resources::new(4000, 1 << 30)),
            Resources::new(2000, 0)
        );
    }

    #[test]
    fn seed_node() {
        // The seed's 8-CPU node with 3950m used by other pods and the 4-CPU high-priority pod.
        let h = node_headroom(
            Resources::new(8000, 16 << 30),
            Resources::new(7950, 3 << 30),
            Resources::ZERO,
        );
        assert_eq!(h.headroom, Resources::new(50, 13 << 30));
        let h = node_headroom(
            Resources::new(8000, 0),
            Resources::new(7950, 0),
            Resources::new(2000, 0),
        );
        assert_eq!(h.headroom.cpu_millis, -1950);
        let h = node_headroom(
            Resources::new(i64::MIN, 0),
            Resources::new(i64::MAX, 0),
            Resources::ZERO,
        );
        assert_eq!(h.headroom.cpu_millis, i64::MIN);
    }
}
