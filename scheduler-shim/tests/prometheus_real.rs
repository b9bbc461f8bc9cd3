//! A real Prometheus (Debian's `prometheus` and `promtool`, installed by `cargo xtask test`'s
//! setup) against headroom's metrics and alerts:
//!
//! - `promtool check rules` and `promtool test rules` on the chart's alerts, with fixtures that fire
//!   each alert and fixtures that must not (`daemon/tests/prometheus/alerts_test.yaml`), and the
//!   plain PrometheusRule carries exactly the chart's groups;
//! - Prometheus scrapes a real headroomd (the daemon `headroomd serve` assembles, probes required,
//!   real cgroups, a busy Pod) and the real `headroom-shim` binary; every metric
//!   docs/operations.md names is there with the documented type, and every panel of the chart's
//!   Grafana dashboard returns a series.
//!
//! A missing `prometheus` or `promtool` fails these tests; nothing here skips.
#![allow(clippy::unwrap_used)]

use std::{
    collections::{BTreeMap, BTreeSet},
    io::{Read as _, Write as _},
    net::{SocketAddr, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use headroomd::{
    config::Config,
    node::{NodeOptions, ProbeMode},
};
use serde_json::Value;

const SHIM: &str = env!("CARGO_BIN_EXE_headroom-shim");

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn tool(name: &str) -> PathBuf {
    for dir in ["/usr/bin", "/usr/local/bin", "/usr/sbin"] {
        let p = Path::new(dir).join(name);
        if p.is_file() {
            return p;
        }
    }
    panic!(
        "{name} not found: `cargo xtask test` installs Debian's prometheus package (apt-get install prometheus)"
    );
}

fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

#[test]
fn promtool_checks_and_unit_tests_the_alerts() {
    let promtool = tool("promtool");
    let tmp = tempfile::tempdir().unwrap();
    let rules = workspace().join("deploy/helm/headroom/files/alerts.yaml");
    std::fs::copy(&rules, tmp.path().join("alerts.yaml")).unwrap();
    std::fs::copy(
        workspace().join("daemon/tests/prometheus/alerts_test.yaml"),
        tmp.path().join("alerts_test.yaml"),
    )
    .unwrap();
    let checked = run_ok(
        Command::new(&promtool)
            .arg("check")
            .arg("rules")
            .arg(tmp.path().join("alerts.yaml")),
    );
    assert!(checked.contains("SUCCESS"), "{checked}");
    run_ok(
        Command::new(&promtool)
            .current_dir(tmp.path())
            .args(["test", "rules", "alerts_test.yaml"]),
    );

    // Every alert has a fixture that fires it and one that must not.
    let groups: Value = serde_yaml::from_str(&std::fs::read_to_string(&rules).unwrap()).unwrap();
    let alerts: BTreeSet<String> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .filter_map(|r| r["alert"].as_str().map(String::from))
        .collect();
    let fixtures: Value = serde_yaml::from_str(
        &std::fs::read_to_string(workspace().join("daemon/tests/prometheus/alerts_test.yaml")).unwrap(),
    )
    .unwrap();
    let (mut fires, mut quiet) = (BTreeSet::new(), BTreeSet::new());
    for test in fixtures["tests"].as_array().unwrap() {
        for case in test["alert_rule_test"].as_array().unwrap() {
            let name = case["alertname"].as_str().unwrap().to_string();
            if case["exp_alerts"].as_array().is_some_and(|a| !a.is_empty()) {
                fires.insert(name);
            } else {
                quiet.insert(name);
            }
        }
    }
    assert_eq!(fires, alerts, "an alert without a firing fixture");
    assert_eq!(quiet, alerts, "an alert without a quiet fixture");

    // The plain PrometheusRule is the same groups.
    let plain: Value = serde_yaml::from_str(
        &std::fs::read_to_string(workspace().join("deploy/kubernetes/monitoring/prometheusrule.yaml"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(plain["kind"], "PrometheusRule");
    assert_eq!(plain["spec"]["groups"], groups["groups"]);

    // docs/operations.md's alerts section names exactly these alerts.
    let docs = std::fs::read_to_string(workspace().join("docs/operations.md")).unwrap();
    let section = &docs[docs.find("Alerts (").unwrap()..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let documented: BTreeSet<String> = section
        .split('`')
        .filter(|w| w.starts_with("Headroom") && w.chars().all(|c| c.is_ascii_alphanumeric()))
        .map(String::from)
        .collect();
    assert_eq!(
        documented, alerts,
        "docs/operations.md and the PrometheusRule disagree"
    );
}

// === A real Prometheus scraping a real headroomd and the real shim ===

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A Pod-shaped cgroup in headroom's standalone layout, removed on drop (after its tasks left).
struct PodCgroups {
    dirs: Vec<PathBuf>,
}

impl Drop for PodCgroups {
    fn drop(&mut self) {
        for d in self.dirs.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
    }
}

fn v2() -> bool {
    Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
}

/// `pod<uid>/app` under every hierarchy headroom reads (cpu and memory on v1, the one tree on
/// v2), with a 20 % CPU quota so that throttling counters move.
fn make_pod(uid: &str) -> (PodCgroups, Vec<PathBuf>) {
    let roots: Vec<PathBuf> = if v2() {
        vec![PathBuf::from("/sys/fs/cgroup/headroom")]
    } else {
        vec![
            PathBuf::from("/sys/fs/cgroup/cpu/headroom"),
            PathBuf::from("/sys/fs/cgroup/memory/headroom"),
        ]
    };
    let mut dirs = Vec::new();
    let mut apps = Vec::new();
    for root in roots {
        std::fs::create_dir_all(&root).unwrap();
        if v2() {
            let _ = std::fs::write(root.join("cgroup.subtree_control"), "+cpu +memory");
        }
        let pod = root.join(format!("pod{uid}"));
        std::fs::create_dir(&pod).unwrap();
        dirs.push(pod.clone());
        if v2() {
            let _ = std::fs::write(pod.join("cgroup.subtree_control"), "+cpu +memory");
        }
        let app = pod.join("app");
        std::fs::create_dir(&app).unwrap();
        dirs.push(app.clone());
        if v2() {
            std::fs::write(app.join("cpu.max"), "20000 100000").unwrap();
        } else if app.join("cpu.cfs_quota_us").exists() {
            std::fs::write(app.join("cpu.cfs_quota_us"), "20000").unwrap();
        }
        apps.push(app);
    }
    (PodCgroups { dirs }, apps)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Prometheus answers `/-/ready` with 200 once its TSDB is open (503 before).
fn prometheus_ready(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(2)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    if write!(
        s,
        "GET /-/ready HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .is_err()
    {
        return false;
    }
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    raw.starts_with(b"HTTP/1.1 200")
}

/// GET `path` from Prometheus's HTTP API; the JSON body.
fn api(addr: SocketAddr, path: &str) -> Value {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        dechunk(body)
    } else {
        body.to_string()
    };
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {head}\n{body}"))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        body = &rest[n + 2..];
    }
    out
}

fn query(addr: SocketAddr, promql: &str) -> Vec<Value> {
    let v = api(addr, &format!("/api/v1/query?query={}", percent_encode(promql)));
    assert_eq!(v["status"], "success", "{promql}: {v}");
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

/// `{a,b}` expanded (several groups allowed); label lists like `{outcome}` dropped.
fn expand(name: &str) -> Vec<String> {
    let Some(open) = name.find('{') else {
        return vec![name.to_string()];
    };
    let close = open + name[open..].find('}').unwrap();
    let (head, inner, tail) = (&name[..open], &name[open + 1..close], &name[close + 1..]);
    if !inner.contains(',') {
        return expand(&format!("{head}{tail}"));
    }
    inner
        .split(',')
        .flat_map(|alt| expand(&format!("{head}{alt}{tail}")))
        .collect()
}

/// Metric name → type, from the tables of docs/operations.md's metrics section.
fn documented_metrics() -> BTreeMap<String, String> {
    let docs = std::fs::read_to_string(workspace().join("docs/operations.md")).unwrap();
    let start = docs.find("## Metrics and what to alert on").unwrap();
    let section = &docs[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let mut out = BTreeMap::new();
    for line in section.lines().filter(|l| l.starts_with("| `headroom_")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (names, kind) = (cells[1], cells[2]);
        for name in names.split('`').filter(|w| w.starts_with("headroom_")) {
            for n in expand(name) {
                out.insert(n, kind.to_string());
            }
        }
    }
    assert!(out.len() > 30, "the docs' metric tables were not found: {out:?}");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_prometheus_scrapes_headroomd_and_the_shim() {
    let prometheus = tool("prometheus");
    assert!(
        nix::unistd::geteuid().is_root(),
        "needs root: real cgroups and the eBPF probes"
    );
    assert!(
        workspace().join("target/bpf/headroom-probes.o").exists(),
        "the probes are not built (cargo xtask build-ebpf)"
    );
    let tmp = tempfile::tempdir().unwrap();

    // headroomd, assembled as `headroomd serve` assembles it, with /metrics on 127.0.0.1.
    let daemon_port = free_port();
    let mut config = Config::default();
    config.server.socket_path = tmp.path().join("headroomd.sock");
    config.metrics_listen = Some(format!("127.0.0.1:{daemon_port}").parse().unwrap());
    config.pipeline.node_name = "prom-node".into();
    let mut options = NodeOptions::new(config);
    options.probes = ProbeMode::Required;
    options.intent_dir = tmp.path().join("intents");
    let node = headroomd::node::start(options).await.unwrap();

    // A busy Pod.
    let uid = format!("{:08x}-0000-4000-8000-00000000beef", std::process::id());
    let (pod, apps) = make_pod(&uid);
    let busy = Killed(
        Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    for app in &apps {
        std::fs::write(app.join("cgroup.procs"), busy.0.id().to_string()).unwrap();
    }

    // The shim, as the DaemonSet runs it, against an API server that is not there: it serves its
    // metrics (watch errors counting) all the same.
    let shim_port = free_port();
    let kubeconfig = tmp.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}\nusers:\n- name: u\n  user: {token: t}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n",
    )
    .unwrap();
    let _shim = Killed(
        Command::new(SHIM)
            .args(["kube", "--node-name", "prom-node", "--ledger", "local"])
            .arg(format!("--metrics-addr=127.0.0.1:{shim_port}"))
            .env("KUBECONFIG", &kubeconfig)
            .env("RUST_LOG", "error")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );

    // Prometheus, scraping both every second.
    let prom_port = free_port();
    let prom_addr: SocketAddr = format!("127.0.0.1:{prom_port}").parse().unwrap();
    std::fs::write(
        tmp.path().join("prometheus.yml"),
        format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nscrape_configs:\n  - job_name: headroomd\n    static_configs: [{{targets: ['127.0.0.1:{daemon_port}']}}]\n  - job_name: headroom-shim\n    static_configs: [{{targets: ['127.0.0.1:{shim_port}']}}]\n"
        ),
    )
    .unwrap();
    let _prom = Killed(
        Command::new(&prometheus)
            .arg(format!(
                "--config.file={}",
                tmp.path().join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                tmp.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address={prom_addr}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );

    // Both targets up, the Pod seen by the probes, and a few samples for every rate().
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ready = prometheus_ready(prom_addr)
            && query(prom_addr, "up == 1").len() == 2
            && !query(
                prom_addr,
                "count_over_time(headroom_container_runq_latency_seconds_count[1m]) > 4",
            )
            .is_empty();
        if ready {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus never had both targets and the Pod's samples"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // Every documented metric, with its documented type.
    let metadata = api(prom_addr, "/api/v1/metadata");
    let types: BTreeMap<String, String> = metadata["data"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v[0]["type"].as_str().unwrap_or_default().to_string()))
        .collect();
    let mut missing = Vec::new();
    for (name, kind) in documented_metrics() {
        // PSI is per cgroup on cgroup v2 only: on a v1 host these are rightly absent.
        if name.contains("_pressure_") && !v2() {
            assert!(query(prom_addr, &name).is_empty(), "{name} on cgroup v1?");
            continue;
        }
        // OOM kills appear once there was one (no OOM in this test).
        if name == "headroom_container_oom_kills_total" {
            continue;
        }
        let selector = if kind == "histogram" {
            format!("{name}_count")
        } else {
            name.clone()
        };
        if query(prom_addr, &selector).is_empty() {
            missing.push(format!("{name}: no series"));
            continue;
        }
        let family = name.strip_suffix("_total").unwrap_or(&name);
        let got = types.get(&name).or_else(|| types.get(family));
        if got.map(String::as_str) != Some(kind.as_str()) {
            missing.push(format!("{name}: documented {kind}, Prometheus says {got:?}"));
        }
    }

    // Every dashboard panel's query returns a series.
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(workspace().join("deploy/helm/headroom/files/dashboard.json")).unwrap(),
    )
    .unwrap();
    let mut empty_panels = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            if query(prom_addr, expr).is_empty() {
                empty_panels.push(format!("{}: {expr}", panel["title"]));
            }
        }
    }
    drop(busy);
    drop(pod);
    node.shutdown().await.unwrap();
    assert!(
        missing.is_empty(),
        "documented metrics not as documented:\n{}",
        missing.join("\n")
    );
    assert!(
        empty_panels.is_empty(),
        "dashboard panels without a series:\n{}",
        empty_panels.join("\n")
    );
}
