//! Every manifest under deploy/kubernetes parses into the k8s-openapi `v1_37` types, loses no field
//! in a round trip (k8s-openapi ignores unknown fields, so a misspelt field would otherwise pass
//! silently), and the DaemonSet is what the docs say it is. The Helm chart is checked with the
//! real Helm (`helm lint --strict`, `helm template`, its values schema), built from its Go module by
//! `cargo xtask build-helm`, and its rendered objects pass `kubectl apply --dry-run=server`
//! against a real kube-apiserver; it is also checked statically (every `.Values` path a template
//! uses exists in values.yaml and the other way round).
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service, ServiceAccount};
use k8s_openapi::api::flowcontrol::v1::FlowSchema;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
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
        ("v1", "ConfigMap") => round_trip::<ConfigMap>(doc),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => round_trip::<ClusterRole>(doc),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => round_trip::<ClusterRoleBinding>(doc),
        ("rbac.authorization.k8s.io/v1", "Role") => round_trip::<Role>(doc),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => round_trip::<RoleBinding>(doc),
        ("scheduling.k8s.io/v1", "PriorityClass") => round_trip::<PriorityClass>(doc),
        ("apps/v1", "DaemonSet") => round_trip::<DaemonSet>(doc),
        ("flowcontrol.apiserver.k8s.io/v1", "FlowSchema") => round_trip::<FlowSchema>(doc),
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
        "FlowSchema",
        "Namespace",
        "Role",
        "RoleBinding",
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
    assert_eq!(added, ["BPF", "PERFMON"]);
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

fn helm(args: &[&str]) -> std::process::Output {
    headroom_testkit::helm::command().args(args).output().unwrap()
}

/// `helm template` of the chart with `extra` flags; the rendered YAML text.
fn render(extra: &[&str]) -> String {
    let chart = deploy_dir().join("helm/headroom");
    let mut args = vec![
        "template",
        "headroom",
        chart.to_str().unwrap(),
        "--namespace",
        "headroom-system",
        "--kube-version",
        "v1.37.2",
    ];
    args.extend_from_slice(extra);
    let out = helm(&args);
    assert!(
        out.status.success(),
        "helm template {extra:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn helm_lint_passes_strict() {
    let chart = deploy_dir().join("helm/headroom");
    let out = helm(&[
        "lint",
        "--strict",
        "--kube-version",
        "v1.37.2",
        chart.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "helm lint: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_values_schema_refuses_a_typo() {
    let chart = deploy_dir().join("helm/headroom");
    for (set, names) in [
        ("shim.dryrun=true", "dryrun"),
        ("serviceMonitor.enable=true", "enable"),
        ("tolerations=foo", "tolerations"),
        ("shim.preemption=evict", "preemption"),
    ] {
        let out = helm(&[
            "template",
            "x",
            chart.to_str().unwrap(),
            "--kube-version",
            "v1.37.2",
            "--set",
            set,
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "--set {set} must be refused");
        assert!(stderr.contains(names), "--set {set}: {stderr}");
    }
}

/// The first rendered object of `kind`, typed.
fn rendered_of<T: serde::de::DeserializeOwned>(rendered: &[Value], kind: &str) -> T {
    let doc = rendered.iter().find(|d| d["kind"] == kind).unwrap();
    serde_json::from_value(doc.clone()).unwrap()
}

#[test]
fn helm_chart_renders_the_same_objects() {
    let rendered = documents(&render(&["--set", "namespace.create=true"]));
    let mut kinds = BTreeSet::new();
    for doc in &rendered {
        kinds.insert(check_document(doc).unwrap_or_else(|e| panic!("rendered {}: {e}", doc["kind"])));
    }
    let mut plain: BTreeSet<String> = plain_manifests()
        .iter()
        .map(|(_, d)| d["kind"].as_str().unwrap().to_string())
        .collect();
    // The dashboard ConfigMap is the chart's own (the plain manifests have no Grafana).
    plain.insert("ConfigMap".into());
    assert_eq!(kinds, plain);
    // The release is named `headroom` here, as the plain FlowSchema is.
    let flow_schema: FlowSchema = rendered_of(&rendered, "FlowSchema");
    let plain_flow_schema: FlowSchema = typed("FlowSchema");
    assert_eq!(flow_schema.metadata.name, plain_flow_schema.metadata.name);
    assert_eq!(flow_schema.spec, plain_flow_schema.spec);
    let ds: DaemonSet = rendered_of(&rendered, "DaemonSet");
    let plain_ds: DaemonSet = typed("DaemonSet");
    let (pod, plain_pod) = (
        ds.spec.template.spec.as_ref().unwrap(),
        plain_ds.spec.template.spec.as_ref().unwrap(),
    );
    assert_eq!(pod.priority_class_name, plain_pod.priority_class_name);
    assert_eq!(ds.spec.update_strategy, plain_ds.spec.update_strategy);
    for (c, p) in pod.containers.iter().zip(&plain_pod.containers) {
        assert_eq!(c.args, p.args, "{}", c.name);
        assert_eq!(c.liveness_probe, p.liveness_probe, "{}", c.name);
        assert_eq!(c.readiness_probe, p.readiness_probe, "{}", c.name);
        assert_eq!(
            c.termination_message_policy, p.termination_message_policy,
            "{}",
            c.name
        );
    }
}

fn daemonset_of(text: &str) -> DaemonSet {
    serde_json::from_value(
        documents(text)
            .into_iter()
            .find(|d| d["kind"] == "DaemonSet")
            .unwrap(),
    )
    .unwrap()
}

#[test]
fn helm_config_affinity_annotations_volumes_strategy_and_relabelings() {
    let values = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        values.path(),
        r#"
config: |
  [server]
  socket_mode = "0600"
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
        - matchExpressions: [{key: example.com/pool, operator: In, values: [batch]}]
podAnnotations: {example.com/team: platform}
extraVolumes: [{name: tls, secret: {secretName: headroom-tls}}]
headroomd:
  extraVolumeMounts: [{name: tls, mountPath: /etc/headroom/tls, readOnly: true}]
updateStrategy: {type: OnDelete}
serviceMonitor:
  enabled: true
  metricRelabelings: [{action: labeldrop, regex: container_id}]
"#,
    )
    .unwrap();
    let text = render(&["-f", values.path().to_str().unwrap()]);
    let docs = documents(&text);
    let config = docs
        .iter()
        .find(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == "headroom-config")
        .expect("config renders a ConfigMap");
    assert!(
        config["data"]["headroomd.toml"]
            .as_str()
            .unwrap()
            .contains("socket_mode = \"0600\"")
    );
    let ds = daemonset_of(&text);
    let template = &ds.spec.template;
    let annotations = template.metadata.as_ref().unwrap().annotations.clone().unwrap();
    let checksum = annotations
        .get("checksum/config")
        .expect("checksum/config")
        .clone();
    assert_eq!(
        annotations.get("example.com/team").map(String::as_str),
        Some("platform")
    );
    let pod = template.spec.as_ref().unwrap();
    assert!(pod.affinity.as_ref().unwrap().node_affinity.is_some());
    let volumes: Vec<&str> = pod
        .volumes
        .as_ref()
        .unwrap()
        .iter()
        .map(|v| v.name.as_str())
        .collect();
    assert!(
        volumes.contains(&"tls") && volumes.contains(&"config"),
        "{volumes:?}"
    );
    let daemon = &pod.containers[0];
    assert!(
        daemon
            .args
            .as_ref()
            .unwrap()
            .contains(&"--config=/etc/headroom/headroomd.toml".to_string())
    );
    let mounts: Vec<&str> = daemon
        .volume_mounts
        .as_ref()
        .unwrap()
        .iter()
        .map(|m| m.mount_path.as_str())
        .collect();
    assert!(
        mounts.contains(&"/etc/headroom/tls") && mounts.contains(&"/etc/headroom"),
        "{mounts:?}"
    );
    assert_eq!(
        ds.spec.update_strategy.as_ref().unwrap().type_.as_deref(),
        Some("OnDelete")
    );
    let sm = docs.iter().find(|d| d["kind"] == "ServiceMonitor").unwrap();
    for endpoint in sm["spec"]["endpoints"].as_array().unwrap() {
        assert_eq!(endpoint["relabelings"][0]["targetLabel"], "node", "{endpoint}");
        assert_eq!(
            endpoint["metricRelabelings"][0]["action"], "labeldrop",
            "{endpoint}"
        );
    }
    // Another config, another checksum: the Pods roll.
    let changed = render(&[
        "-f",
        values.path().to_str().unwrap(),
        "--set-string",
        "config=[server]\nsocket_mode = \"0660\"",
    ]);
    let other = daemonset_of(&changed)
        .spec
        .template
        .metadata
        .unwrap()
        .annotations
        .unwrap()["checksum/config"]
        .clone();
    assert_ne!(checksum, other);
    // No config: no ConfigMap, no flag, no checksum.
    let bare = daemonset_of(&render(&[]));
    let t = bare.spec.template;
    assert!(
        !t.metadata
            .unwrap()
            .annotations
            .unwrap()
            .contains_key("checksum/config")
    );
    assert!(
        !t.spec.unwrap().containers[0]
            .args
            .as_ref()
            .unwrap()
            .iter()
            .any(|a| a.starts_with("--config"))
    );
}

/// The rendered chart is accepted by a real kube-apiserver v1.37.2 (`kubectl apply
/// --dry-run=server`: admission, validation and defaulting, nothing stored). The Namespace is
/// created for real first (a dry-run Namespace does not exist for the objects in it). The
/// ServiceMonitor and PrometheusRule are left out: their CRDs are not part of Kubernetes.
#[test]
fn rendered_chart_passes_server_side_dry_run() {
    let plane = headroom_testkit::ControlPlane::start(headroom_testkit::ControlPlaneOptions::default())
        .unwrap_or_else(|e| panic!("the real control plane must start: {e}"));
    let ns = deploy_dir().join("kubernetes/namespace.yaml");
    plane.kubectl_ok(&["apply", "-f", ns.to_str().unwrap()]).unwrap();
    let values = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        values.path(),
        "config: |\n  [server]\n  socket_mode = \"0600\"\nextraVolumes: [{name: tls, secret: {secretName: headroom-tls}}]\n",
    )
    .unwrap();
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        file.path(),
        render(&[
            "--set",
            "namespace.create=true",
            "-f",
            values.path().to_str().unwrap(),
        ]),
    )
    .unwrap();
    let out = plane
        .kubectl_ok(&["apply", "--dry-run=server", "-f", file.path().to_str().unwrap()])
        .unwrap_or_else(|e| panic!("kubectl apply --dry-run=server: {e}"));
    for object in [
        "daemonset.apps/headroom",
        "configmap/headroom-config",
        "configmap/headroom-dashboard",
        "clusterrole.rbac.authorization.k8s.io/headroom-shim",
        "service/headroom-metrics",
    ] {
        assert!(
            out.contains(object) && out.contains("(server dry run)"),
            "{object} missing in:\n{out}"
        );
    }
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
