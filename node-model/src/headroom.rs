//! `headroom = allocatable − allocated − reserved`, per resource.

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

#[cfg(test)]
mod tests {
    use super::*;

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
