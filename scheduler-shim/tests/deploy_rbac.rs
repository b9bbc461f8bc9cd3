//! RBAC grants exactly what the code calls: the `(group, resource, verb)` set derived from
//! `headroom_shim::kube::rbac::API_CALLS` (the table every call site goes through) must equal what
//! deploy/kubernetes/rbac.yaml and the Helm chart's templates/rbac.yaml grant — nothing more,
//! nothing less, no wildcards.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::Path;

use headroom_shim::kube::rbac::{API_CALLS, required_grants};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule};
use serde::Deserialize;

type Grants = BTreeSet<(String, String, String)>;

fn grants(rules: &[PolicyRule]) -> Grants {
    let mut out = Grants::new();
    for rule in rules {
        assert!(
            rule.non_resource_urls.is_none() && rule.resource_names.is_none(),
            "unexpected rule {rule:?}"
        );
        for group in rule.api_groups.as_deref().unwrap_or_default() {
            for resource in rule.resources.as_deref().unwrap_or_default() {
                for verb in &rule.verbs {
                    assert!(
                        ![group, resource, verb].contains(&&"*".to_string()),
                        "wildcard in {rule:?}"
                    );
                    out.insert((group.clone(), resource.clone(), verb.clone()));
                }
            }
        }
    }
    out
}

fn compare(source: &str, granted: &Grants) {
    compare_with(source, granted, &required_grants(), "rbac::API_CALLS");
}

fn daemon_grants() -> Grants {
    headroomd::kube_source::API_GRANTS
        .iter()
        .map(|(g, r, v)| (g.to_string(), r.to_string(), v.to_string()))
        .collect()
}

fn compare_with(source: &str, granted: &Grants, required: &Grants, table: &str) {
    let extra: Vec<_> = granted.difference(required).collect();
    let missing: Vec<_> = required.difference(granted).collect();
    assert!(
        extra.is_empty() && missing.is_empty(),
        "{source} disagrees with {table}:\n  granted but never called: {extra:?}\n  called but not granted: {missing:?}"
    );
}

fn docs(path: &Path) -> Vec<serde_yaml::Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde_yaml::Value::deserialize(d).unwrap())
        .collect()
}

fn deploy() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

#[test]
fn table_covers_what_the_issue_names() {
    let required = required_grants();
    for (group, resource, verb) in [
        ("", "pods", "delete"),
        ("", "pods", "watch"),
        ("", "pods/status", "patch"),
        ("", "pods/eviction", "create"),
        ("", "pods/resize", "patch"),
        ("", "nodes", "watch"),
        ("scheduling.k8s.io", "priorityclasses", "watch"),
        ("policy", "poddisruptionbudgets", "list"),
        ("events.k8s.io", "events", "create"),
    ] {
        assert!(
            required.contains(&(group.into(), resource.into(), verb.into())),
            "{group} {resource} {verb}"
        );
    }
    assert_eq!(API_CALLS.len(), 10);
}

#[test]
fn plain_rbac_yaml_grants_exactly_the_api_calls() {
    let docs = docs(&deploy().join("kubernetes/rbac.yaml"));
    let named = |kind: &str, name: &str| {
        docs.iter()
            .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name}"))
            .clone()
    };
    let role: ClusterRole = serde_yaml::from_value(named("ClusterRole", "headroom-shim")).unwrap();
    compare(
        "deploy/kubernetes/rbac.yaml",
        &grants(role.rules.as_deref().unwrap()),
    );
    let daemon: ClusterRole = serde_yaml::from_value(named("ClusterRole", "headroom-daemon")).unwrap();
    compare_with(
        "deploy/kubernetes/rbac.yaml (headroom-daemon)",
        &grants(daemon.rules.as_deref().unwrap()),
        &daemon_grants(),
        "headroomd::kube_source::API_GRANTS",
    );
    let daemon_binding: ClusterRoleBinding =
        serde_yaml::from_value(named("ClusterRoleBinding", "headroom-daemon")).unwrap();
    assert_eq!(Some(daemon_binding.role_ref.name), daemon.metadata.name);
    let subject = &daemon_binding.subjects.unwrap()[0];
    assert_eq!(
        (
            subject.kind.as_str(),
            subject.name.as_str(),
            subject.namespace.as_deref()
        ),
        ("ServiceAccount", "headroom", Some("headroom-system"))
    );
    assert_eq!(
        docs.iter().filter(|d| d["kind"] == "ClusterRole").count(),
        2,
        "the shim's role and headroomd's"
    );
    let binding: ClusterRoleBinding =
        serde_yaml::from_value(named("ClusterRoleBinding", "headroom-shim")).unwrap();
    assert_eq!(Some(binding.role_ref.name), role.metadata.name);
    let subject = &binding.subjects.unwrap()[0];
    assert_eq!(
        (subject.kind.as_str(), subject.name.as_str()),
        ("ServiceAccount", "headroom")
    );
    assert_eq!(subject.namespace.as_deref(), Some("headroom-system"));
}

#[test]
fn helm_rbac_template_grants_exactly_the_api_calls() {
    // The rules block of the template is plain YAML (no template actions), so it is read as is;
    // `helm template` is not needed for this check.
    let text = std::fs::read_to_string(deploy().join("helm/headroom/templates/rbac.yaml")).unwrap();
    // One rules block per ClusterRole, in order: the shim's, then headroomd's.
    let blocks: Vec<Vec<PolicyRule>> = text
        .match_indices("\nrules:\n")
        .map(|(start, _)| {
            let block: String = text[start + 1..]
                .lines()
                .take_while(|l| !l.starts_with("---"))
                .filter(|l| !l.trim_start().starts_with('#'))
                .collect::<Vec<_>>()
                .join("\n");
            assert!(
                !block.contains("{{"),
                "the rules block must stay free of template actions:\n{block}"
            );
            #[derive(Deserialize)]
            struct Rules {
                rules: Vec<PolicyRule>,
            }
            serde_yaml::from_str::<Rules>(&block).unwrap().rules
        })
        .collect();
    assert_eq!(blocks.len(), 2, "the shim's role and headroomd's");
    compare("deploy/helm/headroom/templates/rbac.yaml", &grants(&blocks[0]));
    compare_with(
        "deploy/helm/headroom/templates/rbac.yaml (daemon)",
        &grants(&blocks[1]),
        &daemon_grants(),
        "headroomd::kube_source::API_GRANTS",
    );
}

#[test]
fn a_grant_too_many_is_caught() {
    let mut granted = required_grants();
    granted.insert(("".into(), "secrets".into(), "get".into()));
    let result = std::panic::catch_unwind(|| compare("test", &granted));
    assert!(result.is_err(), "an extra grant must fail the comparison");
    let mut granted = required_grants();
    granted.pop_first();
    assert!(
        std::panic::catch_unwind(|| compare("test", &granted)).is_err(),
        "a missing grant must fail"
    );
}
