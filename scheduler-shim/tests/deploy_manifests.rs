//! Every manifest under deploy/kubernetes parses into the k8s-openapi `v1_37` types, loses no field
//! in a round trip (k8s-openapi ignores unknown fields, so a misspelt field would otherwise pass
//! silently), and the DaemonSet is what the docs say it is. The Helm chart is rendered with
//! `helm template` by an ignored test (its reason is printed on every run: no Helm binary can be
//! installed here) that runs with `--include-ignored` where Helm exists; meanwhile the chart is
//! checked statically (every `.Values` path a template uses exists in values.yaml and the other
//! way round).
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use serde::Deserialize;
use serde_json::Value;

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

/// Documents of a multi-document YAML text, as JSON values (empty documents skipped).
fn documents(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| serde_yaml::Value::deserialize(d).unwrap())
        .filter(|v| !v.is_null())
        .map(|v| serde_json::to_value(v).unwrap())
        .collect()
}

/// Paths present in `original` but missing after the typed round trip.
fn lost_fields(original: &Value, typed: &Value, path: &str, lost: &mut Vec<String>) {
    match (original, typed) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                let p = format!("{path}.{k}");
                match b.get(k) {
                    Some(w) => lost_fields(v, w, &p, lost),
                    None => lost.push(p),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                lost.push(format!("{path}[] length {} != {}", a.len(), b.len()));
            }
            for (i, (v, w)) in a.iter().zip(b).enumerate() {
                lost_fields(v, w, &format!("{path}[{i}]"), lost);
            }
        }
        _ => {}
    }
}

fn round_trip<T: serde::de::DeserializeOwned + serde::Serialize>(doc: &Value) -> Result<Value, String> {
    let typed: T = serde_json::from_value(doc.clone()).map_err(|e| e.to_string())?;
    let back = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    let mut lost = Vec::new();
    lost_fields(doc, &back, "", &mut lost);
    if lost.is_empty() {
        Ok(back)
    } else {
        Err(format!("fields unknown to k8s-openapi v1_37: {lost:?}"))
    }
}

/// Parses one document by its kind; `Err` names what is wrong.
fn check_document(doc: &Value) -> Result<String, String> {
    let kind = doc["kind"].as_str().unwrap_or_default();
    let api_version = doc["apiVersion"].as_str().unwrap_or_default();
    match (api_version, kind) {
        ("v1", "Namespace") => round_trip::<Namespace>(doc),
        ("v1", "ServiceAccount") => round_trip::<ServiceAccount>(doc),
        ("v1", "Service") => round_trip::<Service>(doc),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => round_trip::<ClusterRole>(doc),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => round_trip::<ClusterRoleBinding>(doc),
        ("scheduling.k8s.io/v1", "PriorityClass") => round_trip::<PriorityClass>(doc),
        ("apps/v1", "DaemonSet") => round_trip::<DaemonSet>(doc),
        _ => Err(format!("unexpected kind {api_version}/{kind}")),
    }
    .map(|_| kind.to_string())
}

fn plain_manifests() -> Vec<(String, Value)> {
    let dir = deploy_dir().join("kubernetes");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no manifests in {}", dir.display());
    files
        .iter()
        .flat_map(|f| {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            documents(&std::fs::read_to_string(f).unwrap())
                .into_iter()
                .map(move |d| (name.clone(), d))
        })
        .collect()
}

#[test]
fn every_manifest_parses_into_v1_37_types_without_losing_a_field() {
    let mut kinds = BTreeSet::new();
    for (file, doc) in plain_manifests() {
        match check_document(&doc) {
            Ok(kind) => {
                kinds.insert(kind);
            }
            Err(e) => panic!("{file}: {e}"),
        }
    }
    let expected: BTreeSet<String> = [
        "ClusterRole",
        "ClusterRoleBinding",
        "DaemonSet",
        "Namespace",
        "Service",
        "ServiceAccount",
    ]
    .map(String::from)
    .into();
    assert_eq!(kinds, expected);
}

#[test]
fn a_misspelt_field_fails_the_round_trip() {
    let doc = documents(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\nspec:\n  selector: {}\n  template:\n    spec:\n      hostPid: true\n      containers: []\n",
    );
    let err = check_document(&doc[0]).expect_err("hostPid (for hostPID) must be caught");
    assert!(err.contains(".spec.template.spec.hostPid"), "{err}");
}

fn typed<T: serde::de::DeserializeOwned>(kind: &str) -> T {
    let (_, doc) = plain_manifests()
        .into_iter()
        .find(|(_, d)| d["kind"] == kind)
        .unwrap();
    serde_json::from_value(doc).unwrap()
}

#[test]
fn daemonset_runs_both_containers_with_least_privilege() {
    let ds: DaemonSet = typed("DaemonSet");
    let pod = ds.spec.template.spec.unwrap();
    let names: Vec<&str> = pod.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["headroomd", "headroom-shim"]);
    assert_eq!(pod.host_pid, Some(false));
    assert_eq!(pod.host_network, Some(false));
    // The kubelet never evicts system-node-critical Pods (a user-defined class, even at 1e9, is
    // evicted under node pressure); no PriorityClass of headroom's own is shipped.
    assert_eq!(pod.priority_class_name.as_deref(), Some("system-node-critical"));
    for container in &pod.containers {
        assert_eq!(
            container.termination_message_policy.as_deref(),
            Some("FallbackToLogsOnError"),
            "{}: a refusal at start must show in kubectl describe pod",
            container.name
        );
    }
    let sa: ServiceAccount = typed("ServiceAccount");
    assert_eq!(pod.service_account_name, sa.metadata.name);
    assert_eq!(
        pod.node_selector
            .unwrap()
            .get("kubernetes.io/os")
            .map(String::as_str),
        Some("linux")
    );

    let volumes: BTreeMap<String, _> = pod
        .volumes
        .unwrap()
        .into_iter()
        .map(|v| (v.name.clone(), v))
        .collect();
    for container in &pod.containers {
        let env = container.env.as_ref().unwrap();
        let node = env.iter().find(|e| e.name == "NODE_NAME").expect("NODE_NAME");
        let field = node
            .value_from
            .as_ref()
            .and_then(|v| v.field_ref.as_ref())
            .unwrap();
        assert_eq!(field.field_path, "spec.nodeName", "{}", container.name);
        assert!(
            container
                .args
                .as_ref()
                .unwrap()
                .iter()
                .any(|a| a == "--node-name=$(NODE_NAME)")
        );
        let resources = container.resources.as_ref().unwrap();
        for list in [&resources.requests, &resources.limits] {
            let list = list.as_ref().unwrap();
            assert!(
                list.contains_key("cpu") && list.contains_key("memory"),
                "{}",
                container.name
            );
        }
        let sc = container.security_context.as_ref().unwrap();
        assert_ne!(sc.privileged, Some(true), "{}", container.name);
        assert_eq!(sc.allow_privilege_escalation, Some(false));
        assert_eq!(sc.read_only_root_filesystem, Some(true));
        let caps = sc.capabilities.as_ref().unwrap();
        assert_eq!(caps.drop.as_deref(), Some(&["ALL".to_string()][..]));
        let mounts = container.volume_mounts.as_ref().unwrap();
        assert!(
            mounts.iter().any(|m| m.mount_path == "/run/headroom"),
            "{}: shared socket dir",
            container.name
        );
    }
    let daemon = &pod.containers[0];
    let added = daemon
        .security_context
        .as_ref()
        .unwrap()
        .capabilities
        .as_ref()
        .unwrap()
        .add
        .clone()
        .unwrap();
    assert_eq!(added, ["BPF", "PERFMON", "SYS_RESOURCE"]);
    let shim = &pod.containers[1];
    assert_eq!(
        shim.security_context
            .as_ref()
            .unwrap()
            .capabilities
            .as_ref()
            .unwrap()
            .add,
        None
    );

    let mounts: BTreeMap<&str, _> = daemon
        .volume_mounts
        .as_ref()
        .unwrap()
        .iter()
        .map(|m| (m.mount_path.as_str(), m))
        .collect();
    for (path, read_only) in [
        ("/sys/fs/cgroup", false),
        ("/sys/kernel/btf", true),
        ("/sys/kernel/tracing", true),
        ("/sys/fs/bpf", false),
    ] {
        let mount = mounts
            .get(path)
            .unwrap_or_else(|| panic!("headroomd mounts {path}"));
        assert_eq!(mount.read_only.unwrap_or(false), read_only, "{path}");
        let host = volumes[&mount.name]
            .host_path
            .as_ref()
            .unwrap_or_else(|| panic!("{path} is a hostPath"));
        assert_eq!(host.path, path);
    }
    let run = &volumes[&mounts["/run/headroom"].name];
    assert!(run.empty_dir.is_some(), "the socket directory is Pod-private");

    // Probes: exec `headroomctl health` on the socket for headroomd, HTTP on the shim's port.
    for probe in [
        &daemon.readiness_probe,
        &daemon.liveness_probe,
        &daemon.startup_probe,
    ] {
        let command = probe
            .as_ref()
            .unwrap()
            .exec
            .as_ref()
            .unwrap()
            .command
            .clone()
            .unwrap();
        assert_eq!(command[..2], ["/usr/local/bin/headroomctl", "health"]);
    }
    // Liveness is not readiness: a lost watch makes the Pod unready, never restarts it.
    let service_of = |probe: &Option<k8s_openapi::api::core::v1::Probe>| {
        let command = probe
            .as_ref()
            .unwrap()
            .exec
            .as_ref()
            .unwrap()
            .command
            .clone()
            .unwrap();
        command
            .iter()
            .find_map(|a| a.strip_prefix("--service=").map(String::from))
            .unwrap_or_default()
    };
    assert_eq!(service_of(&daemon.readiness_probe), "");
    assert_eq!(
        service_of(&daemon.liveness_probe),
        headroomd::readiness::LIVENESS_SERVICE
    );
    assert_eq!(
        service_of(&daemon.startup_probe),
        headroomd::readiness::LIVENESS_SERVICE
    );
    assert!(shim.readiness_probe.as_ref().unwrap().http_get.is_some());
    let port_names = |c: &k8s_openapi::api::core::v1::Container| -> Vec<String> {
        c.ports
            .as_ref()
            .unwrap()
            .iter()
            .filter_map(|p| p.name.clone())
            .collect()
    };
    assert_eq!(port_names(daemon), ["metrics"]);

    let svc: Service = typed("Service");
    for port in svc.spec.unwrap().ports.unwrap() {
        let target = match port.target_port.unwrap() {
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(s) => s,
            other => panic!("targetPort by name, got {other:?}"),
        };
        assert!(
            port_names(daemon).contains(&target) || port_names(shim).contains(&target),
            "{target}"
        );
    }
}

// === Helm ===

fn helm_binary() -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join("helm"))
        .find(|p| p.is_file())
}

/// Ignored by default, so that `cargo test` prints the reason on every run: Helm is not packaged in
/// Debian, on crates.io, PyPI (as a binary) or npm, the only registries these machines reach (see
/// deploy/helm/headroom/README.md). Where Helm is installed: `cargo test -p headroom-shim --test
/// deploy_manifests -- --include-ignored`. Without Helm the chart is still checked statically
/// (`helm_values_and_templates_agree`, and `deploy_rbac.rs` for its RBAC rules).
#[test]
#[ignore = "needs a `helm` binary, which no registry reachable here provides; the plain YAML is the tested source"]
fn helm_chart_renders_the_same_objects() {
    let chart = deploy_dir().join("helm/headroom");
    let helm = helm_binary().expect("no `helm` binary on PATH: `helm template` cannot run here");
    let out = std::process::Command::new(helm)
        .args(["template", "headroom"])
        .arg(&chart)
        .args(["--namespace", "headroom-system", "--set", "namespace.create=true"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rendered = documents(&String::from_utf8_lossy(&out.stdout));
    let mut kinds = BTreeSet::new();
    for doc in &rendered {
        kinds.insert(check_document(doc).unwrap_or_else(|e| panic!("rendered {}: {e}", doc["kind"])));
    }
    let plain: BTreeSet<String> = plain_manifests()
        .iter()
        .map(|(_, d)| d["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds, plain);
}

/// `.Values.a.b.c` paths used by the templates.
fn values_used(text: &str) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    for (i, _) in text.match_indices(".Values.") {
        let rest = &text[i + ".Values.".len()..];
        let path: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '_')
            .collect();
        used.insert(path.trim_end_matches('.').to_string());
    }
    used
}

fn value_paths(value: &serde_yaml::Value, prefix: &str, out: &mut BTreeSet<String>) {
    if let serde_yaml::Value::Mapping(map) = value {
        for (k, v) in map {
            let path = if prefix.is_empty() {
                k.as_str().unwrap().to_string()
            } else {
                format!("{prefix}.{}", k.as_str().unwrap())
            };
            out.insert(path.clone());
            value_paths(v, &path, out);
        }
    }
}

#[test]
fn helm_values_and_templates_agree() {
    let chart = deploy_dir().join("helm/headroom");
    let values: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(chart.join("values.yaml")).unwrap()).unwrap();
    let mut defined = BTreeSet::new();
    value_paths(&values, "", &mut defined);
    let mut used = BTreeSet::new();
    for entry in std::fs::read_dir(chart.join("templates")).unwrap() {
        used.extend(values_used(
            &std::fs::read_to_string(entry.unwrap().path()).unwrap(),
        ));
    }
    let undefined: Vec<&String> = used.iter().filter(|u| !defined.contains(*u)).collect();
    assert!(
        undefined.is_empty(),
        "templates use values not in values.yaml: {undefined:?}"
    );
    // Every leaf value is used (a map used whole, e.g. with toYaml, covers its children).
    let unused: Vec<&String> = defined
        .iter()
        .filter(|d| {
            !used
                .iter()
                .any(|u| *d == u || d.starts_with(&format!("{u}.")) || u.starts_with(&format!("{d}.")))
        })
        .collect();
    assert!(unused.is_empty(), "values.yaml keys no template uses: {unused:?}");
}
