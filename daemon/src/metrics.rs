//! Prometheus `/metrics`, read from the newest snapshot (and the probes' newest report) at scrape
//! time.
//!
//! Every name starts with `headroom_`: scraped beside the kubelet's cAdvisor, a name of cAdvisor's
//! own (`container_*`) would be summed with it by prometheus-adapter's default rules and double
//! `kubectl top` and HPA figures. Counters are cumulative in base units (`_seconds_total`,
//! `_total`); rates are left to PromQL. The run-queue latency is a histogram built from the
//! probes' own log2 buckets. Stale gauges are left out (a scrape must not present an old reading
//! as current); counters are exported with their last known value.

use std::{collections::BTreeMap, fmt::Write as _, sync::Arc, time::Duration};

use headroom_common::{CgroupStats, RUNQ_HIST_BUCKETS};
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric as _, NoLabelSet},
    metrics::{MetricType, counter::ConstCounter, gauge::ConstGauge},
    registry::Registry,
};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::{TcpListener, TcpStream},
};

use crate::{
    collector::ProbeReportCell,
    pipeline::{CgroupOwner, Figure, PodResolver, Pressure, PsiFigures, Snapshot, SnapshotReader},
    server::ConnectionStats,
};

type Labels = [(&'static str, String); 3];

/// Name (without `_total`, which the encoder adds to counters), help, whether it is a counter,
/// and how to read it from a cgroup's signals.
type FamilySpec = (&'static str, &'static str, bool, fn(&Pressure) -> Option<f64>);

/// The metric families of every cgroup (Pod and container), as `/metrics` names them. Public so
/// that the documentation test can check docs/operations.md against it.
pub const CONTAINER_FAMILIES: [FamilySpec; 13] = [
    (
        "headroom_container_cpu_usage_seconds",
        "CPU time consumed (cpu.stat usage), seconds.",
        true,
        |p| total(&p.cpu_usage_seconds_total),
    ),
    (
        "headroom_container_cpu_periods",
        "CFS enforcement periods elapsed (cpu.stat nr_periods).",
        true,
        |p| total(&p.cpu_periods_total),
    ),
    (
        "headroom_container_cpu_throttled_periods",
        "CFS periods in which the cgroup was throttled (cpu.stat nr_throttled).",
        true,
        |p| total(&p.cpu_throttled_periods_total),
    ),
    (
        "headroom_container_cpu_throttled_seconds",
        "Time the cgroup was throttled (cpu.stat throttled time), seconds.",
        true,
        |p| total(&p.cpu_throttled_seconds_total),
    ),
    (
        "headroom_container_oom_kills",
        "OOM kills in the cgroup (probes, events and memory.events, whichever saw most).",
        true,
        |p| total(&p.oom_kills_total),
    ),
    (
        "headroom_container_pressure_cpu_waiting_seconds",
        "Time some tasks waited for CPU (PSI some), seconds.",
        true,
        |p| psi(&p.psi_cpu, false),
    ),
    (
        "headroom_container_pressure_cpu_stalled_seconds",
        "Time all tasks stalled on CPU (PSI full), seconds.",
        true,
        |p| psi(&p.psi_cpu, true),
    ),
    (
        "headroom_container_pressure_memory_waiting_seconds",
        "Time some tasks waited for memory (PSI some), seconds.",
        true,
        |p| psi(&p.psi_memory, false),
    ),
    (
        "headroom_container_pressure_memory_stalled_seconds",
        "Time all tasks stalled on memory (PSI full), seconds.",
        true,
        |p| psi(&p.psi_memory, true),
    ),
    (
        "headroom_container_pressure_io_waiting_seconds",
        "Time some tasks waited for I/O (PSI some), seconds.",
        true,
        |p| psi(&p.psi_io, false),
    ),
    (
        "headroom_container_pressure_io_stalled_seconds",
        "Time all tasks stalled on I/O (PSI full), seconds.",
        true,
        |p| psi(&p.psi_io, true),
    ),
    (
        "headroom_container_memory_working_set_bytes",
        "Working set (usage minus inactive file), bytes.",
        false,
        |p| fresh(&p.memory_working_set_bytes),
    ),
    (
        "headroom_container_memory_usage_bytes",
        "Memory usage, bytes.",
        false,
        |p| fresh(&p.memory_usage_bytes),
    ),
];

/// Name (without `_total`), help, and how to read a counter from a probe-map value.
type ProbeFamilySpec = (&'static str, &'static str, fn(&CgroupStats) -> f64);

/// Families read from the probes' per-cgroup map (cumulative, summed over CPUs).
pub const PROBE_CONTAINER_FAMILIES: [ProbeFamilySpec; 3] = [
    (
        "headroom_container_memory_reclaim_stall_seconds",
        "Time tasks stalled in memcg limit reclaim and direct reclaim (probes), seconds.",
        |s| (s.memcg_reclaim_stall_ns.saturating_add(s.direct_reclaim_stall_ns)) as f64 / 1e9,
    ),
    (
        "headroom_container_cpu_throttle_episodes",
        "Times a task was switched out because its cgroup was throttled (probes).",
        |s| s.throttle_episodes as f64,
    ),
    (
        "headroom_container_probe_throttled_seconds",
        "Time tasks spent throttled, as the probes measure it, seconds.",
        |s| s.throttled_ns as f64 / 1e9,
    ),
];

/// The run-queue latency histogram's name.
pub const RUNQ_HISTOGRAM: &str = "headroom_container_runq_latency_seconds";

/// Upper bounds of the exported run-queue buckets, as exponents of 2 nanoseconds: every second
/// log2 bucket of the kernel's 32, from 1.024 µs to 1.07 s (fewer series per container than all
/// 32, every bound still a kernel bucket edge, so no sample is split between two buckets).
const RUNQ_LE_EXPONENTS: [usize; 11] = [10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30];

/// `(le, count in (previous le, le])` for the encoder, which accumulates them, from the kernel's
/// buckets (`i` counts waits in `[2^i, 2^(i+1))` ns; the last one also everything longer).
/// Returns the buckets and the total count (the `+Inf` bucket).
fn runq_buckets(hist: &[u64; RUNQ_HIST_BUCKETS]) -> (Vec<(f64, u64)>, u64) {
    let mut out = Vec::with_capacity(RUNQ_LE_EXPONENTS.len() + 1);
    let mut next = 0usize;
    let mut total = 0u64;
    for &e in &RUNQ_LE_EXPONENTS {
        // Waits below 2^e ns are buckets 0..e (bucket e-1 ends at 2^e).
        let in_range: u64 = hist[next..e].iter().fold(0u64, |a, &b| a.saturating_add(b));
        total = total.saturating_add(in_range);
        out.push(((1u64 << e) as f64 / 1e9, in_range));
        next = e;
    }
    let rest: u64 = hist[next..].iter().fold(0u64, |a, &b| a.saturating_add(b));
    total = total.saturating_add(rest);
    out.push((f64::INFINITY, rest));
    (out, total)
}

struct SnapshotCollector {
    reader: SnapshotReader,
    probes: Option<(Arc<dyn PodResolver>, ProbeReportCell)>,
}

impl std::fmt::Debug for SnapshotCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SnapshotCollector")
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

/// The probes' per-cgroup counters, added up per (namespace, pod, container) of their owners.
fn probe_rows(
    snapshot: &Snapshot,
    resolver: &dyn PodResolver,
    report: &crate::collector::ProbeReport,
) -> BTreeMap<(String, String, String), CgroupStats> {
    let mut rows: BTreeMap<(String, String, String), CgroupStats> = BTreeMap::new();
    for (key, stats) in &report.stats {
        let Some(CgroupOwner::Pod { pod, container }) = resolver.resolve(key) else {
            continue;
        };
        // Only Pods the snapshot serves: a cgroup of a Pod already gone is not reported.
        if !snapshot.pods.iter().any(|p| p.pod == pod) {
            continue;
        }
        let row = rows
            .entry((
                pod.namespace.clone(),
                pod.name.clone(),
                container.unwrap_or_default(),
            ))
            .or_insert(CgroupStats::ZERO);
        crate::probes::add_stats(row, stats);
    }
    rows
}

impl SnapshotCollector {
    fn encode_probes(
        &self,
        encoder: &mut DescriptorEncoder<'_>,
        s: &Snapshot,
    ) -> Result<(), std::fmt::Error> {
        let Some((resolver, cell)) = &self.probes else {
            return Ok(());
        };
        let report = cell.load();
        scalar(
            encoder,
            "headroom_probes_loaded",
            "1 when the eBPF probes are loaded.",
            false,
            if report.loaded { 1.0 } else { 0.0 },
        )?;
        scalar(
            encoder,
            "headroom_probe_programs_attached",
            "eBPF programs attached to their tracepoints.",
            false,
            report.programs_attached as f64,
        )?;
        scalar(
            encoder,
            "headroom_probe_programs",
            "eBPF programs in the probe object (attached or not).",
            false,
            report.programs_total as f64,
        )?;
        scalar(
            encoder,
            "headroom_probe_events_dropped",
            "Probe events lost because the ring buffer was full.",
            true,
            report.health.events_dropped as f64,
        )?;
        scalar(
            encoder,
            "headroom_probe_events",
            "Probe events read from the ring buffer (with headroom_probe_events_dropped, all the probes emitted).",
            true,
            report.resolution.events_received as f64,
        )?;
        scalar(
            encoder,
            "headroom_probe_events_unresolved",
            "Probe events, and cgroups of the counter map (each once), whose cgroup id the cgroup index did not hold even after a re-scan of cgroupfs.",
            true,
            report.resolution.unresolved as f64,
        )?;
        scalar(
            encoder,
            "headroom_probe_cgroup_rescans",
            "Walks of cgroupfs made because a cgroup came or went or a probe named an id the index lacked.",
            true,
            report.resolution.rescans as f64,
        )?;
        scalar(
            encoder,
            "headroom_probe_map_full",
            "Counter updates lost because the per-cgroup map was full (sized at load: --max-cgroups).",
            true,
            report.health.stats_dropped as f64,
        )?;
        scalar(
            encoder,
            "headroom_probe_map_memory_bytes",
            "Kernel memory of all probe maps, as the kernel accounts it (fdinfo memlock).",
            false,
            report.map_memory_bytes as f64,
        )?;
        scalar(
            encoder,
            "headroom_probe_map_cgroups",
            "Cgroups the per-cgroup probe maps hold (sized at load; a full map counts in headroom_probe_map_full).",
            false,
            f64::from(report.map_cgroups),
        )?;
        scalar(
            encoder,
            "headroom_probe_read_failures",
            "Kernel reads in the probes that failed (a pointer chain broke mid-read).",
            true,
            report.health.read_failures as f64,
        )?;
        let rows = probe_rows(s, resolver.as_ref(), &report);
        if rows.is_empty() {
            return Ok(());
        }
        let labels = |(ns, pod, c): &(String, String, String)| -> Labels {
            [
                ("namespace", ns.clone()),
                ("pod", pod.clone()),
                ("container", c.clone()),
            ]
        };
        for (name, help, get) in PROBE_CONTAINER_FAMILIES {
            let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (key, stats) in &rows {
                ConstCounter::new(get(stats)).encode(metric.encode_family(&labels(key))?)?;
            }
        }
        let mut metric = encoder.encode_descriptor(
            RUNQ_HISTOGRAM,
            "Run-queue latency (enqueued to switched in), from the probes' log2 buckets, seconds.",
            None,
            MetricType::Histogram,
        )?;
        for (key, stats) in &rows {
            let (buckets, count) = runq_buckets(&stats.runq_hist);
            metric
                .encode_family(&labels(key))?
                .encode_histogram::<NoLabelSet>(stats.runq_total_ns as f64 / 1e9, count, &buckets, None)?;
        }
        Ok(())
    }
}

impl Collector for SnapshotCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let s: Arc<Snapshot> = self.reader.load();
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
        for (name, help, counter, get) in CONTAINER_FAMILIES {
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
        self.encode_probes(&mut encoder, &s)?;
        // The build as a constant 1 with labels, the usual way to join it onto other series.
        let mut info = encoder.encode_descriptor(
            "headroom_build_info",
            "The headroomd build: version and commit.",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(1).encode(info.encode_family(&[
            ("version", env!("CARGO_PKG_VERSION")),
            ("commit", crate::GIT_COMMIT),
        ])?)?;
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
            "headroom_node_stale",
            "1 while the node figures are older than the staleness bound (the Pod source is down).",
            false,
            if s.node.stale { 1.0 } else { 0.0 },
        )?;
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
            self.reader.dropped() as f64,
        )?;
        scalar(
            &mut encoder,
            "headroom_pipeline_queued",
            "Records waiting in the pipeline queue for the aggregator (at most the queue's capacity).",
            false,
            self.reader.queued() as f64,
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

/// The Unix socket's accept loop ([`crate::server::connections`]), live.
#[derive(Debug)]
struct ConnectionCollector(Arc<ConnectionStats>);

impl Collector for ConnectionCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let c = &self.0;
        for (name, help, counter, value) in [
            (
                "headroom_grpc_connections",
                "Connections open on the gRPC Unix socket (handshaking or served).",
                false,
                c.open(),
            ),
            (
                "headroom_grpc_connections_accepted",
                "Connections accepted on the gRPC Unix socket.",
                true,
                c.accepted_total(),
            ),
            (
                "headroom_grpc_connections_over_cap",
                "Connections closed at once: server.max_connections were open.",
                true,
                c.over_cap_total(),
            ),
            (
                "headroom_grpc_connections_handshake_failed",
                "Connections closed without the HTTP/2 preface in time (or with something else).",
                true,
                c.handshake_failed_total(),
            ),
            (
                "headroom_grpc_accept_out_of_fds",
                "Accepts that failed for want of file descriptors (EMFILE, ENFILE).",
                true,
                c.out_of_fds_total(),
            ),
        ] {
            scalar(&mut encoder, name, help, counter, value as f64)?;
        }
        Ok(())
    }
}

/// The registry with the snapshot collector.
pub struct Metrics {
    registry: Registry,
}

impl Metrics {
    /// Metrics read from `reader` at scrape time.
    pub fn new(reader: SnapshotReader) -> Self {
        Self::build(SnapshotCollector { reader, probes: None })
    }

    /// Metrics read from `reader`, plus the probes' health and per-cgroup counters (run-queue
    /// histogram, reclaim stalls), each cgroup attributed through `resolver`.
    pub fn with_probes(
        reader: SnapshotReader,
        resolver: Arc<dyn PodResolver>,
        report: ProbeReportCell,
    ) -> Self {
        Self::build(SnapshotCollector {
            reader,
            probes: Some((resolver, report)),
        })
    }

    fn build(collector: SnapshotCollector) -> Self {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(collector));
        Self { registry }
    }

    /// Also the gRPC socket's connection counters.
    pub fn with_connections(mut self, stats: Arc<ConnectionStats>) -> Self {
        self.registry
            .register_collector(Box::new(ConnectionCollector(stats)));
        self
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
        self, CgroupFiles, CpuStat, InMemoryPodSource, MemoryStat, PipelineConfig, PodRef, StaticPodResolver,
    };

    fn pipeline_with(key: CgroupKey) -> (pipeline::PipelineHandle, SnapshotReader, Arc<StaticPodResolver>) {
        let resolver = Arc::new(StaticPodResolver::new());
        let pod = PodRef::new("ns1", "web", "u1");
        resolver.insert(
            key,
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
            resolver.clone(),
            Arc::new(InMemoryPodSource::default()),
        )
        .unwrap();
        (handle, reader, resolver)
    }

    async fn scrape(metrics: Metrics) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(serve(listener, Arc::new(metrics)));
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut body = String::new();
        s.read_to_string(&mut body).await.unwrap();
        server.abort();
        assert!(body.starts_with("HTTP/1.1 200 OK"), "{body}");
        body
    }

    #[tokio::test]
    async fn own_prefix_counters_and_labels_over_http() {
        let key = CgroupKey::new(0, 5);
        let (handle, reader, _) = pipeline_with(key);
        let mut f = CgroupFiles::new(key, Instant::now());
        f.readings.cpu = Some(CpuStat {
            usage_ns: 2_500_000_000,
            nr_periods: 10,
            nr_throttled: 3,
            throttled_ns: 1_500_000_000,
        });
        f.readings.memory = Some(MemoryStat {
            usage_bytes: 2048,
            working_set_bytes: 1024,
        });
        handle.sender().send(f.into()).unwrap();
        while reader.load().stats.processed_total < 1 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let body = scrape(Metrics::new(reader)).await;
        for line in [
            r#"headroom_container_cpu_usage_seconds_total{namespace="ns1",pod="web",container="app"} 2.5"#,
            r#"headroom_container_cpu_periods_total{namespace="ns1",pod="web",container="app"} 10"#,
            r#"headroom_container_cpu_throttled_periods_total{namespace="ns1",pod="web",container="app"} 3"#,
            r#"headroom_container_cpu_throttled_seconds_total{namespace="ns1",pod="web",container="app"} 1.5"#,
            r#"headroom_container_memory_working_set_bytes{namespace="ns1",pod="web",container="app"} 1024"#,
            "headroom_node_headroom_cpu_cores 4.0",
            "headroom_pipeline_dropped_total 0",
            format!(
                r#"headroom_build_info{{version="{}",commit="{}"}} 1"#,
                env!("CARGO_PKG_VERSION"),
                crate::GIT_COMMIT
            )
            .as_str(),
            "# EOF",
        ] {
            assert!(body.contains(line), "missing {line:?} in:\n{body}");
        }
        // Every sample carries the project's prefix (none collides with cAdvisor's), and no
        // pre-computed rate is exported.
        for line in body
            .lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with("HTTP") && l.contains(' '))
        {
            if line.contains(':') && !line.contains('{') {
                continue; // HTTP headers
            }
            assert!(line.starts_with("headroom_"), "foreign name: {line}");
            assert!(
                !line.contains("per_second") && !line.contains("_ratio") && !line.contains("_cores{"),
                "a rate: {line}"
            );
        }
    }

    #[test]
    fn runq_buckets_follow_the_kernel_log2_edges() {
        let mut hist = [0u64; RUNQ_HIST_BUCKETS];
        hist[0] = 1; // [1, 2) ns
        hist[9] = 2; // [512, 1024) ns: below 1.024 µs
        hist[10] = 4; // [1024, 2048) ns: le=4.096 µs
        hist[19] = 8; // [2^19, 2^20) ns: le=2^20 ns
        hist[31] = 16; // >= 2^31 ns: +Inf only
        let (buckets, count) = runq_buckets(&hist);
        assert_eq!(count, 31);
        assert_eq!(buckets.len(), RUNQ_LE_EXPONENTS.len() + 1);
        assert_eq!(buckets[0], (1024e-9, 3));
        assert_eq!(buckets[1], (4096e-9, 4));
        assert_eq!(buckets[5], ((1u64 << 20) as f64 / 1e9, 8));
        assert_eq!(buckets.last().copied(), Some((f64::INFINITY, 16)));
        assert_eq!(buckets.iter().map(|b| b.1).sum::<u64>(), count);
    }

    #[tokio::test]
    async fn runq_histogram_and_probe_health_from_the_probe_report() {
        use crate::collector::ProbeReport;
        let key = CgroupKey::new(0, 7);
        let (handle, reader, resolver) = pipeline_with(key);
        // The snapshot serves the Pod once any reading of it arrived.
        let mut f = CgroupFiles::new(key, Instant::now());
        f.readings.memory = Some(MemoryStat {
            usage_bytes: 1,
            working_set_bytes: 1,
        });
        handle.sender().send(f.into()).unwrap();
        while reader.load().pods.is_empty() {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let mut stats = CgroupStats::ZERO;
        stats.runq_hist[12] = 5; // [4096, 8192) ns
        stats.runq_hist[25] = 1; // ~33 ms
        stats.runq_count = 6;
        stats.runq_total_ns = 40_000_000;
        stats.memcg_reclaim_stall_ns = 1_000_000_000;
        stats.direct_reclaim_stall_ns = 500_000_000;
        let report = ProbeReport {
            loaded: true,
            programs_attached: 6,
            programs_total: 7,
            health: crate::probes::ProbeHealth {
                events_dropped: 3,
                stats_dropped: 2,
                read_failures: 1,
            },
            map_memory_bytes: 4096,
            map_cgroups: 256,
            read_error: None,
            resolution: crate::collector::CgroupResolution {
                events_received: 40,
                unresolved: 5,
                rescans: 2,
            },
            updated_at: Some(Instant::now()),
            stats: [(key, stats)].into_iter().collect(),
        };
        let cell = Arc::new(arc_swap::ArcSwap::from_pointee(report));
        let body = scrape(Metrics::with_probes(reader, resolver, cell)).await;
        let l = r#"namespace="ns1",pod="web",container="app""#;
        for line in [
            "# TYPE headroom_container_runq_latency_seconds histogram".to_string(),
            format!(r#"headroom_container_runq_latency_seconds_bucket{{le="0.000004096",{l}}} 0"#),
            format!(r#"headroom_container_runq_latency_seconds_bucket{{le="0.000016384",{l}}} 5"#),
            format!(r#"headroom_container_runq_latency_seconds_bucket{{le="0.067108864",{l}}} 6"#),
            format!(r#"headroom_container_runq_latency_seconds_bucket{{le="+Inf",{l}}} 6"#),
            format!(r#"headroom_container_runq_latency_seconds_count{{{l}}} 6"#),
            format!(r#"headroom_container_runq_latency_seconds_sum{{{l}}} 0.04"#),
            format!(r#"headroom_container_memory_reclaim_stall_seconds_total{{{l}}} 1.5"#),
            "headroom_probe_events_dropped_total 3".to_string(),
            "headroom_probe_map_full_total 2".to_string(),
            "headroom_probe_events_total 40".to_string(),
            "headroom_probe_events_unresolved_total 5".to_string(),
            "headroom_probe_cgroup_rescans_total 2".to_string(),
            "headroom_pipeline_queued 0".to_string(),
            "headroom_probe_read_failures_total 1".to_string(),
            "headroom_probe_map_memory_bytes 4096".to_string(),
            "headroom_probe_map_cgroups 256".to_string(),
            "headroom_probe_programs_attached 6".to_string(),
            "headroom_probe_programs 7".to_string(),
            "headroom_probes_loaded 1".to_string(),
        ] {
            assert!(body.contains(&line), "missing {line:?} in:\n{body}");
        }
    }
}
