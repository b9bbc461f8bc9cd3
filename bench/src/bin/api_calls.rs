//! The API server's own time on a preemptor's two calls, by how they are sent. On one real
//! control plane (v1.37.2), each repetition marks a fresh Pod `DisruptionTarget` (a strategic
//! merge patch of `pods/status`) and deletes it with a UID precondition, as the shim does, over
//! one of four transports in turn:
//! - ours: the shim's client (`headroom_shim::kube::client::http2_client`: HTTP/2, JSON answers);
//! - peer: kube-rs's own client (HTTP/1.1, JSON answers);
//! - details: each of the two asking for protobuf answers, as client-go does for core types.
//!
//! Times come from the audit log (`requestReceivedTimestamp` → `ResponseComplete`), the clock the
//! `kube_node` benchmark reads "the API server's own time" on. hyper's HTTP/2 client opens a
//! stream in its connection task and sends a request's body from another task once the stream
//! is open, so the HEADERS and DATA frames leave in two writes; the API server's clock starts at
//! the first. HTTP/1.1 writes head and body together. Both run as headroom's ServiceAccount, at
//! the priority level `deploy/kubernetes/flowschema.yaml` gives it.
use std::{collections::BTreeMap, path::Path, time::Instant};

use anyhow::{Context, Result, bail};
use hdrhistogram::Histogram;
use headroom_bench::{
    BenchArgs, Comparison, Summary, new_histogram, print_comparison, tokio_runtime, write_json,
};
use headroom_testkit::{ControlPlane, ControlPlaneOptions};
use http_body_util::BodyExt as _;

const NAMESPACE: &str = "bench";

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Transport {
    Http2,
    Http1,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Answer {
    Json,
    Protobuf,
}

impl Answer {
    fn accept(self) -> &'static str {
        match self {
            Answer::Json => "application/json",
            Answer::Protobuf => "application/vnd.kubernetes.protobuf, application/json",
        }
    }
}

type Variant = (Transport, Answer);

/// A histogram per call (`mark`, `delete`) and variant.
type Timings = BTreeMap<(&'static str, Variant), Histogram<u64>>;

const VARIANTS: [Variant; 4] = [
    (Transport::Http2, Answer::Json),
    (Transport::Http1, Answer::Json),
    (Transport::Http2, Answer::Protobuf),
    (Transport::Http1, Answer::Protobuf),
];

fn label(call: &str, (transport, answer): Variant) -> String {
    let transport = match transport {
        Transport::Http2 => "HTTP/2 (shim)",
        Transport::Http1 => "HTTP/1.1 (kube-rs)",
    };
    let answer = match answer {
        Answer::Json => "JSON",
        Answer::Protobuf => "protobuf",
    };
    format!("{call}, {transport}, {answer}")
}

fn main() -> Result<()> {
    let args = BenchArgs::parse_args();
    let per_variant = if args.quick { 10 } else { 100 };
    let pods = per_variant * VARIANTS.len();
    let plane =
        ControlPlane::start(ControlPlaneOptions::default()).context("start the real control plane")?;
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes");
    for manifest in ["namespace.yaml", "rbac.yaml", "flowschema.yaml"] {
        plane.kubectl_ok(&["apply", "-f", &deploy.join(manifest).display().to_string()])?;
    }
    plane.kubectl_ok(&["create", "namespace", NAMESPACE])?;
    let uids = create_pods(&plane, pods)?;
    let kubeconfig = plane.service_account_kubeconfig("headroom-system", "headroom")?;
    let Some(runtime) = tokio_runtime("api-calls") else {
        bail!("no Tokio runtime");
    };
    let round_trips = runtime.block_on(run(&kubeconfig, &uids))?;
    let user = "system:serviceaccount:headroom-system:headroom";
    // The API server writes a call's audit line as it answers it; the last ones may lag.
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    let calls = loop {
        let calls: Vec<_> = plane
            .pod_calls()
            .into_iter()
            .filter(|c| c.user == user && c.namespace == NAMESPACE)
            .collect();
        if calls.len() >= 2 * pods || Instant::now() > deadline {
            break calls;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    if calls.len() != 2 * pods {
        bail!("the audit log has {} of the {} calls made", calls.len(), 2 * pods);
    }
    let mut server: Timings = BTreeMap::new();
    for call in &calls {
        let Some(i) = call
            .name
            .strip_prefix("victim-")
            .and_then(|s| s.parse::<usize>().ok())
        else {
            bail!("an audited call on an unexpected Pod: {}", call.name);
        };
        if !(200..300).contains(&call.code) {
            bail!("{} {} answered {}", call.verb, call.name, call.code);
        }
        let kind = match (call.verb.as_str(), call.subresource.as_str()) {
            ("patch", "status") => "mark",
            ("delete", "") => "delete",
            other => bail!("an unexpected call: {other:?}"),
        };
        record(&mut server, kind, VARIANTS[i % VARIANTS.len()], call.own_time())?;
    }
    let summary = |kind: &str, variant: Variant| -> Result<Summary> {
        let h = server.get(&(kind, variant)).context("no calls of a variant")?;
        Ok(Summary::from_histogram(
            &format!("server: {}", label(kind, variant)),
            h,
        ))
    };
    let mut comparison =
        Comparison::new("api_calls", summary("mark", VARIANTS[0])?).with_peer(summary("mark", VARIANTS[1])?);
    for kind in ["mark", "delete"] {
        for variant in VARIANTS {
            if kind == "mark" && variant.1 == Answer::Json {
                continue;
            }
            comparison.details.push(summary(kind, variant)?);
        }
    }
    for ((kind, variant), h) in &round_trips {
        comparison.details.push(Summary::from_histogram(
            &format!("client: {}", label(kind, *variant)),
            h,
        ));
    }
    comparison.notes.push(format!(
        "{per_variant} Pods per transport, taken in turn; ours = the mark over the shim's HTTP/2 client, peer = over kube-rs's HTTP/1.1 client; the API server's own time from its audit log"
    ));
    print_comparison(&comparison);
    let path = write_json(&args.out, &comparison)?;
    println!("wrote {}", path.display());
    Ok(())
}

/// `n` Pods bound to a node nobody runs (no kubelet: they stay Pending), their uids in order.
fn create_pods(plane: &ControlPlane, n: usize) -> Result<Vec<String>> {
    let items: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            serde_json::json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": format!("victim-{i}"), "namespace": NAMESPACE, "labels": {"app": "victim"}},
                "spec": {
                    "nodeName": "nowhere",
                    "containers": [{
                        "name": "app",
                        "image": "nginx",
                        "resources": {
                            "requests": {"cpu": "100m", "memory": "64Mi"},
                            "limits": {"cpu": "100m", "memory": "64Mi"}
                        }
                    }]
                }
            })
        })
        .collect();
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    let out = plane.kubectl_stdin(
        &[
            "create",
            "-f",
            "-",
            "-o",
            "jsonpath={.metadata.name} {.metadata.uid}{\"\\n\"}",
        ],
        &list.to_string(),
    )?;
    let by_name: BTreeMap<&str, &str> = out
        .lines()
        .filter_map(|l| l.split_once(char::is_whitespace))
        .collect();
    let uids = (0..n)
        .map(|i| {
            by_name
                .get(format!("victim-{i}").as_str())
                .map(|uid| uid.trim().to_owned())
                .with_context(|| format!("no uid for victim-{i} in kubectl's answer"))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(uids)
}

async fn run(kubeconfig: &Path, uids: &[String]) -> Result<Timings> {
    use kube::config::{KubeConfigOptions, Kubeconfig};
    let config = kube::Config::from_custom_kubeconfig(
        Kubeconfig::read_from(kubeconfig).context("read the kubeconfig")?,
        &KubeConfigOptions::default(),
    )
    .await
    .context("client configuration")?;
    let http2 = headroom_shim::kube::client::http2_client(config.clone()).context("HTTP/2 client")?;
    let http1 = kube::Client::try_from(config).context("HTTP/1.1 client")?;
    let mut round_trips: Timings = BTreeMap::new();
    for (i, uid) in uids.iter().enumerate() {
        let variant = VARIANTS[i % VARIANTS.len()];
        let client = match variant.0 {
            Transport::Http2 => &http2,
            Transport::Http1 => &http1,
        };
        let name = format!("victim-{i}");
        let mark = serde_json::json!({"status": {"conditions": [{
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": "api_calls benchmark",
            "lastTransitionTime": jiff::Timestamp::now().to_string(),
        }]}});
        let options =
            serde_json::json!({"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}});
        let path = format!("/api/v1/namespaces/{NAMESPACE}/pods/{name}");
        let patch = "application/strategic-merge-patch+json";
        let calls = [
            ("mark", http::Method::PATCH, format!("{path}/status"), patch, mark),
            ("delete", http::Method::DELETE, path, "application/json", options),
        ];
        for (kind, method, path, content_type, body) in calls {
            let sent = request(method, path, content_type, variant.1, &body)?;
            let took = call(client, sent)
                .await
                .with_context(|| format!("{kind} {name}"))?;
            record(&mut round_trips, kind, variant, took)?;
        }
        // About the pace of preemptions in `kube_node`: the API server is not kept busy.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    Ok(round_trips)
}

fn record(into: &mut Timings, kind: &'static str, variant: Variant, took: std::time::Duration) -> Result<()> {
    into.entry((kind, variant))
        .or_insert_with(new_histogram)
        .record(headroom_bench::ns(took))
        .context("record")
}

/// A request with a JSON body, asking for `answer`.
fn request(
    method: http::Method,
    path: String,
    content_type: &str,
    answer: Answer,
    body: &serde_json::Value,
) -> Result<http::Request<kube::client::Body>> {
    Ok(http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, content_type)
        .header(http::header::ACCEPT, answer.accept())
        .body(kube::client::Body::from(body.to_string().into_bytes()))?)
}

/// One call, its answer read to the end; an error unless it succeeded.
async fn call(
    client: &kube::Client,
    request: http::Request<kube::client::Body>,
) -> Result<std::time::Duration> {
    let started = Instant::now();
    let response = client.send(request).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    let took = started.elapsed();
    if !status.is_success() {
        bail!("{status}: {}", String::from_utf8_lossy(&body));
    }
    Ok(took)
}
