//! Prometheus `/metrics`, named as cAdvisor and the kubelet name them (base units, `_total`
//! counters, `namespace`/`pod`/`container` labels), read from the newest snapshot at scrape time.
//!
//! Stale gauges are left out (a scrape must not present an old reading as current); counters are
//! cumulative and are exported with their last known value.

use std::{fmt::Write as _, sync::Arc, time::Duration};

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric as _},
    metrics::{MetricType, counter::ConstCounter, gauge::ConstGauge},
    registry::Registry,
};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::{TcpListener, TcpStream},
};

use crate::pipeline::{Figure, Pressure, PsiFigures, Snapshot, SnapshotReader};

type Labels = [(&'static str, String); 3];

/// Name, help, whether it is a counter, and how to read it from a cgroup's signals.
type FamilySpec = (&'static str, &'static str, bool, fn(&Pressure) -> Option<f64>);

#[derive(Debug)]
struct SnapshotCollector {
    reader: SnapshotReaderDebug,
}

/// `SnapshotReader` is not `Debug`; the collector trait wants it.
struct SnapshotReaderDebug(SnapshotReader);

impl std::fmt::Debug for SnapshotReaderDebug {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SnapshotReader")
    }
}

/// Series of one cgroup-level metric.
struct Family<'a> {
    name: &'static str,
    help: &'static str,
    counter: bool,
    get: fn(&Pressure) -> Option<f64>,
    rows: &'a [(Labels, &'a Pressure)],
}

fn fresh(f: &Option<Figure>) -> Option<f64> {
    f.filter(|f| !f.stale).map(|f| f.value)
}

fn total(f: &Option<Figure>) -> Option<f64> {
    f.map(|f| f.value)
}

fn psi(p: &Option<PsiFigures>, full: bool) -> Option<f64> {
    p.map(|p| {
        if full {
            p.full_total_seconds
        } else {
            p.some_total_seconds
        }
    })
}

fn encode_family(encoder: &mut DescriptorEncoder<'_>, f: &Family<'_>) -> Result<(), std::fmt::Error> {
    let values: Vec<(&Labels, f64)> = f
        .rows
        .iter()
        .filter_map(|(l, p)| (f.get)(p).map(|v| (l, v)))
        .collect();
    if values.is_empty() {
        return Ok(());
    }
    let kind = if f.counter {
        MetricType::Counter
    } else {
        MetricType::Gauge
    };
    let mut metric = encoder.encode_descriptor(f.name, f.help, None, kind)?;
    for (labels, value) in values {
        let family = metric.encode_family(labels)?;
        if f.counter {
            ConstCounter::new(value.max(0.0)).encode(family)?;
        } else {
            ConstGauge::new(value).encode(family)?;
        }
    }
    Ok(())
}

fn scalar(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    counter: bool,
    value: f64,
) -> Result<(), std::fmt::Error> {
    let kind = if counter {
        MetricType::Counter
    } else {
        MetricType::Gauge
    };
    let metric = encoder.encode_descriptor(name, help, None, kind)?;
    if counter {
        ConstCounter::new(value).encode(metric)
    } else {
        ConstGauge::new(value).encode(metric)
    }
}

impl Collector for SnapshotCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let s: Arc<Snapshot> = self.reader.0.load();
        let mut rows: Vec<(Labels, &Pressure)> = Vec::new();
        for pod in &s.pods {
            let labels = |container: &str| {
                [
                    ("namespace", pod.pod.namespace.clone()),
                    ("pod", pod.pod.name.clone()),
                    ("container", container.to_owned()),
                ]
            };
            rows.push((labels(""), &pod.pod_cgroup));
            for c in &pod.containers {
                rows.push((labels(&c.name), &c.pressure));
            }
        }
        let families: [FamilySpec; 16] = [
            (
                "container_cpu_cfs_periods",
                "Number of elapsed enforcement period intervals.",
                true,
                |p| total(&p.cpu_periods_total),
            ),
            (
                "container_cpu_cfs_throttled_periods",
                "Number of throttled period intervals.",
                true,
                |p| total(&p.cpu_throttled_periods_total),
            ),
            (
                "container_cpu_cfs_throttled_seconds",
                "Total time duration the container has been throttled.",
                true,
                |p| total(&p.cpu_throttled_seconds_total),
            ),
            (
                "container_oom_events",
                "Count of out of memory events observed for the container.",
                true,
                |p| total(&p.oom_kills_total),
            ),
            (
                "container_pressure_cpu_waiting_seconds",
                "Total time tasks waited for CPU (PSI some).",
                true,
                |p| psi(&p.psi_cpu, false),
            ),
            (
                "container_pressure_cpu_stalled_seconds",
                "Total time all tasks stalled on CPU (PSI full).",
                true,
                |p| psi(&p.psi_cpu, true),
            ),
            (
                "container_pressure_memory_waiting_seconds",
                "Total time tasks waited for memory (PSI some).",
                true,
                |p| psi(&p.psi_memory, false),
            ),
            (
                "container_pressure_memory_stalled_seconds",
                "Total time all tasks stalled on memory (PSI full).",
                true,
                |p| psi(&p.psi_memory, true),
            ),
            (
                "container_pressure_io_waiting_seconds",
                "Total time tasks waited for I/O (PSI some).",
                true,
                |p| psi(&p.psi_io, false),
            ),
            (
                "container_pressure_io_stalled_seconds",
                "Total time all tasks stalled on I/O (PSI full).",
                true,
                |p| psi(&p.psi_io, true),
            ),
            (
                "container_memory_working_set_bytes",
                "Current working set in bytes.",
                false,
                |p| fresh(&p.memory_working_set_bytes),
            ),
            (
                "container_memory_usage_bytes",
                "Current memory usage in bytes.",
                false,
                |p| fresh(&p.memory_usage_bytes),
            ),
            (
                "headroom_container_cpu_usage_cores",
                "CPU usage over the last interval, cores.",
                false,
                |p| fresh(&p.cpu_usage_cores),
            ),
            (
                "headroom_container_cpu_throttled_ratio",
                "Throttled periods / periods over the last interval.",
                false,
                |p| fresh(&p.cpu_throttled_ratio),
            ),
            (
                "headroom_container_memory_reclaim_stall_seconds_per_second",
                "Seconds spent in memcg and direct reclaim per second (probes).",
                false,
                |p| fresh(&p.memory_reclaim_stall_seconds_per_second),
            ),
            (
                "headroom_container_runq_latency_mean_seconds",
                "Mean run-queue latency over the last interval (probes).",
                false,
                |p| fresh(&p.runq_latency_mean_seconds),
            ),
        ];
        for (name, help, counter, get) in families {
            encode_family(
                &mut encoder,
                &Family {
                    name,
                    help,
                    counter,
                    get,
                    rows: &rows,
                },
            )?;
        }
        let h = &s.node.headroom;
        let cores = |m: i64| m as f64 / 1000.0;
        for (what, r) in [
            ("allocatable", h.allocatable),
            ("allocated", h.allocated),
            ("reserved", h.reserved),
            ("headroom", h.headroom),
        ] {
            let help = format!("Node {what}: CPU cores.");
            scalar(
                &mut encoder,
                &format!("headroom_node_{what}_cpu_cores"),
                &help,
                false,
                cores(r.cpu_millis),
            )?;
            let help = format!("Node {what}: memory bytes.");
            scalar(
                &mut encoder,
                &format!("headroom_node_{what}_memory_bytes"),
                &help,
                false,
                r.memory_bytes as f64,
            )?;
        }
        scalar(
            &mut encoder,
            "headroom_reservations",
            "Live reservations.",
            false,
            s.reservations.len() as f64,
        )?;
        scalar(
            &mut encoder,
            "headroom_pipeline_dropped",
            "Records dropped because the pipeline queue was full.",
            true,
            self.reader.0.dropped() as f64,
        )?;
        scalar(
            &mut encoder,
            "headroom_pipeline_processed",
            "Records processed by the aggregator.",
            true,
            s.stats.processed_total as f64,
        )?;
        scalar(
            &mut encoder,
            "headroom_pipeline_unattributed",
            "Samples of cgroups that no Pod is known to own.",
            true,
            s.stats.unattributed_total as f64,
        )?;
        scalar(
            &mut encoder,
            "headroom_snapshot_version",
            "Version of the newest snapshot.",
            false,
            s.version as f64,
        )
    }
}

/// The registry with the snapshot collector.
pub struct Metrics {
    registry: Registry,
}

impl Metrics {
    /// Metrics read from `reader` at scrape time.
    pub fn new(reader: SnapshotReader) -> Self {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(SnapshotCollector {
            reader: SnapshotReaderDebug(reader),
        }));
        Self { registry }
    }

    /// OpenMetrics text.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

const MAX_REQUEST_HEAD: usize = 8 * 1024;

async fn answer(mut stream: TcpStream, metrics: &Metrics) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > MAX_REQUEST_HEAD {
            return respond(
                &mut stream,
                "431 Request Header Fields Too Large",
                "text/plain",
                "too large\n",
            )
            .await;
        }
    }
    let line = buf.split(|b| *b == b'\r').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split(' ');
    let (method, target) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    let path = target.split('?').next().unwrap_or_default();
    match (method, path) {
        ("GET", "/metrics") => match metrics.encode() {
            Ok(body) => {
                respond(
                    &mut stream,
                    "200 OK",
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    &body,
                )
                .await
            }
            Err(_) => {
                respond(
                    &mut stream,
                    "500 Internal Server Error",
                    "text/plain",
                    "encoding failed\n",
                )
                .await
            }
        },
        (_, "/metrics") => respond(&mut stream, "405 Method Not Allowed", "text/plain", "GET only\n").await,
        _ => respond(&mut stream, "404 Not Found", "text/plain", "try /metrics\n").await,
    }
}

async fn respond(
    stream: &mut TcpStream,
    status: &str,
    content_type: &str,
    body: &str,
) -> std::io::Result<()> {
    let mut head = String::new();
    let _ = write!(
        head,
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

/// Serves `GET /metrics` on `listener` until the task is dropped or aborted.
pub async fn serve(listener: TcpListener, metrics: Arc<Metrics>) {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "metrics serving on /metrics");
    }
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "metrics accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let span = tracing::debug_span!("metrics_scrape", %peer);
            let _e = span.enter();
            match tokio::time::timeout(Duration::from_secs(10), answer(stream, &metrics)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::debug!(error = %e, "metrics request failed"),
                Err(_) => tracing::debug!("metrics request timed out"),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::time::Instant;

    use headroom_common::CgroupKey;
    use headroom_node_model::Resources;

    use super::*;
    use crate::pipeline::{
        self, CgroupFiles, CgroupOwner, CpuStat, InMemoryPodSource, MemoryStat, PipelineConfig, PodRef,
        StaticPodResolver,
    };

    #[tokio::test]
    async fn cadvisor_names_and_labels_over_http() {
        let resolver = Arc::new(StaticPodResolver::new());
        let pod = PodRef::new("ns1", "web", "u1");
        resolver.insert(
            CgroupKey::new(0, 5),
            CgroupOwner::Pod {
                pod,
                container: Some("app".into()),
            },
        );
        let (handle, reader) = pipeline::spawn(
            PipelineConfig {
                allocatable: Resources::new(4000, 8 << 30),
                ..PipelineConfig::default()
            },
            resolver,
            Arc::new(InMemoryPodSource::default()),
        )
        .unwrap();
        let mut f = CgroupFiles::new(CgroupKey::new(0, 5), Instant::now());
        f.cpu = Some(CpuStat {
            usage_ns: 1,
            nr_periods: 10,
            nr_throttled: 3,
            throttled_ns: 1_500_000_000,
        });
        f.memory = Some(MemoryStat {
            usage_bytes: 2048,
            working_set_bytes: 1024,
        });
        handle.sender().send(f.into()).unwrap();
        while reader.load().stats.processed_total < 1 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(serve(listener, Arc::new(Metrics::new(reader))));
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut body = String::new();
        s.read_to_string(&mut body).await.unwrap();
        server.abort();
        assert!(body.starts_with("HTTP/1.1 200 OK"), "{body}");
        for line in [
            r#"container_cpu_cfs_periods_total{namespace="ns1",pod="web",container="app"} 10"#,
            r#"container_cpu_cfs_throttled_periods_total{namespace="ns1",pod="web",container="app"} 3"#,
            r#"container_cpu_cfs_throttled_seconds_total{namespace="ns1",pod="web",container="app"} 1.5"#,
            r#"container_memory_working_set_bytes{namespace="ns1",pod="web",container="app"} 1024"#,
            "headroom_node_headroom_cpu_cores 4.0",
            "headroom_pipeline_dropped_total 0",
            "# EOF",
        ] {
            assert!(body.contains(line), "missing {line:?} in:\n{body}");
        }
    }
}
