//! `-o json|yaml|wide` on headroomctl's listings of headroomd (`headroom`, `watch`, `pods`): the
//! real binary against an in-process headroomd (the test kit's, its real pipeline and gRPC
//! server) that knows one Pod whose container was throttled. JSON and YAML are parsed back into
//! the proto's messages through their own serde impls (pbjson), so a field the output dropped or
//! renamed fails here.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use headroom_common::CgroupKey;
use headroom_node_model::Resources;
use headroom_proto::v1 as pb;
use headroom_testkit::headroomd::{HeadroomdSetup, InProcessHeadroomd, cpu_files};
use headroomd::pipeline::{CgroupOwner, PodEntry, PodRef};

const HEADROOMCTL: &str = env!("CARGO_BIN_EXE_headroomctl");

async fn headroomctl(socket: &Path, args: &[&str]) -> String {
    let (socket, args) = (
        socket.to_path_buf(),
        args.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
    );
    tokio::task::spawn_blocking(move || {
        let out = Command::new(HEADROOMCTL)
            .arg("--socket")
            .arg(&socket)
            .args(&args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "headroomctl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    })
    .await
    .unwrap()
}

/// The container's throttled ratio in a listing, parsed back from the output.
fn ratio(pods: &[pb::PodPressure]) -> Option<f64> {
    pods.iter()
        .flat_map(|p| &p.containers)
        .find_map(|c| c.pressure.as_ref()?.cpu_throttled_ratio.as_ref().map(|f| f.value))
}

async fn daemon() -> InProcessHeadroomd {
    let pod = PodRef::new("default", "web-1", "uid-1");
    let d = InProcessHeadroomd::start(HeadroomdSetup {
        allocatable: Resources::new(8000, 16 << 30),
        cgroups: vec![(
            CgroupKey::new(0, 11),
            CgroupOwner::Pod {
                pod: pod.clone(),
                container: Some("app".into()),
            },
        )],
        pods: vec![PodEntry {
            pod,
            requests: Resources::new(1000, 1 << 30),
            pending_resize: Resources::ZERO,
        }],
        ..HeadroomdSetup::default()
    })
    .await;
    // 10 periods, 8 of them throttled, between two readings.
    let t0 = Instant::now();
    let tx = d.pipeline().sender();
    tx.send(cpu_files(11, t0, 100, 0)).unwrap();
    tx.send(cpu_files(11, t0 + Duration::from_millis(100), 110, 8))
        .unwrap();
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_as_json_yaml_table_and_wide() {
    let d = daemon().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let json = loop {
        let text = headroomctl(&d.socket, &["pods", "-o", "json"]).await;
        let r: pb::ListPodsResponse = serde_json::from_str(&text).unwrap();
        if ratio(&r.pods).is_some() || Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let from_json: pb::ListPodsResponse = serde_json::from_str(&json).unwrap();
    assert_eq!(from_json.pods.len(), 1, "{json}");
    let pod = from_json.pods[0].pod.clone().unwrap();
    assert_eq!(
        (pod.namespace.as_str(), pod.name.as_str(), pod.uid.as_str()),
        ("default", "web-1", "uid-1")
    );
    assert_eq!(from_json.pods[0].containers[0].name, "app");
    assert!((ratio(&from_json.pods).unwrap() - 0.8).abs() < 1e-9, "{json}");
    // The proto3 JSON mapping: lowerCamelCase names, 64-bit integers as strings, RFC 3339 times,
    // and every scalar field even at its default value (a figure the daemon has no source for is
    // an absent message, which the mapping leaves out).
    let raw: serde_json::Value = serde_json::from_str(&json).unwrap();
    let pressure = &raw["pods"][0]["containers"][0]["pressure"];
    assert_eq!(pressure["cpuThrottledRatio"]["value"], 0.8, "{json}");
    assert_eq!(pressure["cpuThrottledRatio"]["stale"], false, "{json}");
    assert!(
        pressure["cpuThrottledRatio"]["measuredAt"]
            .as_str()
            .unwrap()
            .contains('T'),
        "{json}"
    );
    assert!(raw["version"].is_string(), "uint64 as a string: {json}");

    let yaml = headroomctl(&d.socket, &["pods", "-o", "yaml"]).await;
    let from_yaml: pb::ListPodsResponse = serde_yaml::from_str(&yaml).unwrap();
    assert_eq!(from_yaml.pods[0].pod, from_json.pods[0].pod, "{yaml}");
    assert!((ratio(&from_yaml.pods).unwrap() - 0.8).abs() < 1e-9, "{yaml}");

    let table = headroomctl(&d.socket, &["pods"]).await;
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("NAMESPACE   NAME    CPU"), "{table}");
    assert!(!lines[0].contains("UID"), "{table}");
    assert!(lines[1].starts_with("default     web-1"), "{table}");
    assert!(lines[1].contains("80.0%"), "{table}");
    assert!(lines[1].contains("48Mi"), "{table}");
    let wide = headroomctl(&d.socket, &["pods", "-o", "wide"]).await;
    let lines: Vec<&str> = wide.lines().collect();
    assert!(
        lines[0].contains("UID") && lines[0].contains("CONTAINERS"),
        "{wide}"
    );
    assert!(lines[1].contains("uid-1") && lines[1].contains("app"), "{wide}");
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headroom_and_watch_as_json_yaml_table_and_wide() {
    let d = daemon().await;
    let json = headroomctl(&d.socket, &["headroom", "-o", "json"]).await;
    let s: pb::HeadroomSnapshot = serde_json::from_str(&json).unwrap();
    assert_eq!(s.node_name, "test-node");
    let cpu = s.node.unwrap().cpu_millis.unwrap();
    assert_eq!(
        (cpu.allocatable, cpu.allocated, cpu.headroom),
        (8000, 1000, 7000),
        "{json}"
    );
    let raw: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        raw["node"]["cpuMillis"]["reserved"], "0",
        "a default value is still printed: {json}"
    );

    let yaml = headroomctl(&d.socket, &["headroom", "-o", "yaml"]).await;
    let y: pb::HeadroomSnapshot = serde_yaml::from_str(&yaml).unwrap();
    assert_eq!(y.node.unwrap().memory_bytes.unwrap().allocated, 1 << 30, "{yaml}");

    let table = headroomctl(&d.socket, &["headroom"]).await;
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 2, "{table}");
    assert!(
        lines[0].starts_with("NODE        CPU HEADROOM   CPU ALLOCATABLE"),
        "{table}"
    );
    assert!(
        lines[1].starts_with("test-node   7000m          8000m"),
        "{table}"
    );
    assert!(lines[1].contains("15360Mi"), "{table}");
    let wide = headroomctl(&d.socket, &["headroom", "-o", "wide"]).await;
    assert!(
        wide.lines().next().unwrap().ends_with("VERSION   DROPPED"),
        "{wide}"
    );
    assert!(
        wide.lines().nth(1).unwrap().contains("1000m"),
        "allocated: {wide}"
    );

    // A stream: one JSON object per line, one YAML document per message.
    let stream = headroomctl(&d.socket, &["watch", "--count", "2", "-o", "json"]).await;
    let lines: Vec<&str> = stream.lines().collect();
    assert_eq!(lines.len(), 2, "{stream}");
    for line in lines {
        let s: pb::HeadroomSnapshot = serde_json::from_str(line).unwrap();
        assert_eq!(s.node_name, "test-node");
    }
    let stream = headroomctl(&d.socket, &["watch", "--count", "1", "-o", "yaml"]).await;
    let docs: Vec<pb::HeadroomSnapshot> = serde_yaml::Deserializer::from_str(&stream)
        .map(|doc| serde::Deserialize::deserialize(doc).unwrap())
        .collect();
    assert_eq!(docs.len(), 1, "{stream}");
    assert_eq!(docs[0].node_name, "test-node");
    let stream = headroomctl(&d.socket, &["watch", "--count", "2"]).await;
    let lines: Vec<&str> = stream.lines().collect();
    assert_eq!(lines.len(), 3, "a header, then a row per message: {stream}");
    assert!(
        lines[0].starts_with("NODE") && lines[2].starts_with("test-node"),
        "{stream}"
    );
    d.shutdown().await;
}

/// `headroomctl version` asks headroomd (its `headroom-version` header) and names both commits;
/// without a server it prints its own and fails, naming the socket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_names_the_client_and_the_server() {
    let d = daemon().await;
    let json: serde_json::Value =
        serde_json::from_str(&headroomctl(&d.socket, &["version", "-o", "json"]).await).unwrap();
    assert_eq!(json["clientVersion"], headroom_client::VERSION);
    assert_eq!(json["serverVersion"], headroomd::VERSION);
    assert!(headroom_client::VERSION.contains("(commit "));
    let text = headroomctl(&d.socket, &["version"]).await;
    assert_eq!(
        text.trim(),
        format!(
            "Client Version: {}\nServer Version: {}",
            headroom_client::VERSION,
            headroomd::VERSION
        )
    );
    let missing = d.socket.with_extension("gone");
    let out = Command::new(HEADROOMCTL)
        .arg("--socket")
        .arg(&missing)
        .arg("version")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("Client Version:"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&missing.display().to_string()), "{stderr}");
}
