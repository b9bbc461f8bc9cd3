//! A decision in sentences a person understands (`headroomctl explain POD`, `plan` without `--json`).

use headroom_node_model::{ResourceName, Resources, format_cpu_millis, format_memory_bytes};

use crate::decide::{Decision, Outcome};
use crate::give_way::{LiveFigures, Shrink};

fn amount(resource: ResourceName, value: i64) -> String {
    match resource {
        ResourceName::Cpu => format!("{} CPU", format_cpu_millis(value)),
        ResourceName::Memory => format!("{} memory", format_memory_bytes(value)),
    }
}

fn short_of(decision: &Decision) -> Vec<String> {
    let total = decision.used.saturating_add(decision.requested);
    total
        .insufficient(&decision.allocatable)
        .into_iter()
        .map(|r| {
            format!(
                "it asks for {}, the rest of the node uses {}, and the node has {} allocatable",
                amount(r, decision.requested.get(r)),
                amount(r, decision.used.get(r)),
                amount(r, decision.allocatable.get(r)),
            )
        })
        .collect()
}

fn shrink_line(shrinks: &[Shrink]) -> Option<String> {
    if shrinks.is_empty() {
        return None;
    }
    let each: Vec<String> = shrinks
        .iter()
        .map(|s| {
            format!(
                "{} (priority {}) from {} to {}",
                s.key(),
                s.priority,
                s.from,
                s.to
            )
        })
        .collect();
    let plural = if shrinks.len() == 1 { "Pod" } else { "Pods" };
    Some(format!(
        "Shrinking {} lower-priority {plural} in place, as they offered — {} — frees {}.",
        shrinks.len(),
        each.join(", "),
        shrinks
            .iter()
            .map(Shrink::freed)
            .fold(Resources::ZERO, Resources::saturating_add)
    ))
}

fn live_text(live: &LiveFigures) -> String {
    let mut parts = Vec::new();
    if let Some(u) = live.cpu_usage_millis {
        parts.push(format!("cpu usage {}", format_cpu_millis(u)));
    }
    if let Some(t) = live.cpu_throttled_permille {
        parts.push(format!("throttled {}.{}% of periods", t / 10, t % 10));
    }
    if let Some(w) = live.memory_working_set_bytes {
        parts.push(format!("working set {}", format_memory_bytes(w)));
    }
    if parts.is_empty() {
        "no fresh live figures".into()
    } else {
        parts.join(", ")
    }
}

/// One line per Pod that offered to give way: what happened to it and the live figures used.
fn give_way_lines(decision: &Decision) -> Vec<String> {
    decision
        .give_way
        .iter()
        .map(|n| {
            format!(
                "  {}/{}: {} (live: {})",
                n.namespace,
                n.name,
                n.reason,
                live_text(&n.live)
            )
        })
        .collect()
}

/// Explains `decision` for the Pod `pod` (`namespace/name`).
pub fn explain(pod: &str, decision: &Decision) -> String {
    let mut lines = Vec::new();
    let why = short_of(decision).join("; ");
    match decision.outcome {
        Outcome::Fits => lines.push(format!(
            "The resize of {pod} fits on the node as it is: nobody needs to be evicted, the kubelet can apply it."
        )),
        Outcome::Infeasible => {
            lines.push(format!("The resize of {pod} can never fit on this node, so it is Infeasible ({}).", decision.message));
            lines.push("Infeasible resizes never preempt anyone: lower the request or move the Pod to a bigger node.".into());
        }
        // Both are reported whether or not the resize fits, as the scheduler reports them.
        Outcome::Disabled if why.is_empty() => {
            lines.push(format!("The resize of {pod} fits on the node as it is: the kubelet can apply it, nobody needs to be evicted."));
            lines.push("The node has switched resize preemption off (spec.podPreemptionPolicy.disableResizePreemption); the scheduler reports that whether or not a resize fits.".into());
        }
        Outcome::Disabled => {
            lines.push(format!("The resize of {pod} is pending because the node is full: {why}."));
            lines.push("The node has switched resize preemption off (spec.podPreemptionPolicy.disableResizePreemption), so nobody will be evicted for it; it waits until room frees up.".into());
        }
        Outcome::NotEligible if why.is_empty() => {
            lines.push(format!("The resize of {pod} fits on the node as it is: the kubelet can apply it, nobody needs to be evicted."));
            lines.push(format!("{pod} has preemptionPolicy: Never; the scheduler reports that first on a node that switched resize preemption off, whether or not a resize fits."));
        }
        Outcome::NotEligible => {
            lines.push(format!("The resize of {pod} is pending because the node is full: {why}."));
            lines.push(format!("{pod} has preemptionPolicy: Never, so it does not evict other Pods; it waits until room frees up."));
        }
        Outcome::Deferred => {
            lines.push(format!("The resize of {pod} is pending (Deferred) because the node is full: {why}."));
            lines.push("Even evicting every Pod of lower priority on this node would not make enough room, so nobody is evicted; the resize waits.".into());
        }
        Outcome::Shrink => {
            lines.push(format!("The resize of {pod} is pending (Deferred) because the node is full: {why}."));
            lines.extend(shrink_line(&decision.shrinks));
            lines.push("Nobody is evicted; the resize is admitted once the shrinks are actuated.".into());
        }
        Outcome::Preempt => {
            lines.push(format!("The resize of {pod} is pending (Deferred) because the node is full: {why}."));
            lines.extend(shrink_line(&decision.shrinks));
            let names: Vec<String> = decision
                .victims
                .iter()
                .map(|v| {
                    let leaving = if v.terminating { ", already terminating: not evicted again" } else { "" };
                    format!("{}/{} (priority {}{leaving})", v.namespace, v.name, v.priority)
                })
                .collect();
            let plural = if names.len() == 1 { "Pod" } else { "Pods" };
            lines.push(format!(
                "Evicting {} lower-priority {plural} — {} — frees {}, enough for the resize; every other lower-priority Pod can stay.",
                names.len(),
                names.join(", "),
                decision.victims.iter().fold(Resources::ZERO, |sum, v| sum.saturating_add(v.requests))
            ));
            if decision.pdb_violations > 0 {
                lines.push(format!(
                    "{} of them is protected by a PodDisruptionBudget that allows no more disruptions; no choice avoided that.",
                    decision.pdb_violations
                ));
            }
        }
    }
    let notes = give_way_lines(decision);
    if !notes.is_empty() {
        lines.push("Pods that offered to give way in place:".into());
        lines.extend(notes);
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preempt_names_the_victim_and_the_shortfall() {
        let decision = crate::decide::fixtures::seed_decision(Outcome::Preempt);
        let text = explain("default/high-priority-pod", &decision);
        assert!(
            text.contains("it asks for 6 CPU, the rest of the node uses 3950m CPU"),
            "{text}"
        );
        assert!(
            text.contains("default/low-priority-pod (priority 1000)"),
            "{text}"
        );
        assert!(text.contains("frees cpu=3 memory=500Mi"), "{text}");
    }

    #[test]
    fn a_terminating_victim_is_said_to_be_leaving_already() {
        let mut decision = crate::decide::fixtures::seed_decision(Outcome::Preempt);
        decision.victims[0].terminating = true;
        let text = explain("default/high-priority-pod", &decision);
        assert!(
            text.contains("default/low-priority-pod (priority 1000, already terminating: not evicted again)"),
            "{text}"
        );
    }

    #[test]
    fn a_disabled_node_with_a_fitting_resize_says_it_fits() {
        let mut decision = crate::decide::fixtures::seed_decision(Outcome::Disabled);
        let full = explain("default/high-priority-pod", &decision);
        assert!(full.contains("because the node is full"), "{full}");
        decision.requested.cpu_millis = decision.allocatable.cpu_millis - decision.used.cpu_millis;
        let fits = explain("default/high-priority-pod", &decision);
        assert!(fits.contains("fits on the node as it is"), "{fits}");
        assert!(fits.contains("disableResizePreemption"), "{fits}");
    }
}
