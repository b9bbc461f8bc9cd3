//! The seed's preemption as a decision (the tutorial on an 8-CPU node: high-priority-pod asks
//! for 6 CPU, low-priority-pod's 3 CPU must go), for the tests of what shows decisions: the
//! sentences, the board, the HTTP routes and `kubectl headroom`.

use headroom_node_model::Resources;

use super::{Decision, Outcome, Victim};

/// `outcome` with low-priority-pod (priority 1000, cpu=3 memory=500Mi) as the one victim, for a
/// resize to 6 CPU and 1 GiB next to 3950m used on an 8-CPU, 16 GiB node.
pub fn seed_decision(outcome: Outcome) -> Decision {
    Decision {
        outcome,
        victims: vec![Victim {
            namespace: "default".into(),
            name: "low-priority-pod".into(),
            uid: "uid-low-priority-pod".into(),
            priority: 1000,
            violates_pdb: false,
            requests: Resources::new(3000, 500 << 20),
            terminating: false,
        }],
        message: String::new(),
        requested: Resources::new(6000, 1 << 30),
        used: Resources::new(3950, 1 << 30),
        allocatable: Resources::new(8000, 16 << 30),
        pdb_violations: 0,
        shrinks: vec![],
        give_way: vec![],
    }
}
