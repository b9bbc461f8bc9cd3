//! `headroom-shim demo`: the seed's tutorial ("Kubernetes v1.37: Scheduler Preemption for In-Place
//! Pod Resize", steps 2-5) end to end on this machine, with real cgroups and real processes.

use std::io::Write;
use std::time::{Duration, Instant};

use headroom_node_model::pod::CONDITION_RESIZE_IN_PROGRESS;

use super::events::{row, table};
use super::latency::Step;
use super::run::{RunConfig, Running, start};
use super::{DEMO_MANIFEST, StandaloneError, verify};

const LOW: &str = "default/low-priority-pod";
const HIGH: &str = "default/high-priority-pod";

fn io(e: std::io::Error) -> StandaloneError {
    StandaloneError::Invalid(format!("writing the demo output: {e}"))
}

/// What the demo saw, for callers that check it.
#[derive(Debug, Clone, Default)]
pub struct DemoReport {
    pub allocated_cpu: String,
    pub victim_pids: Vec<u32>,
}

/// Starts the node, runs the tutorial, prints it to `out`, and always cleans up.
pub async fn run(cfg: RunConfig, out: &mut (dyn Write + Send)) -> Result<DemoReport, StandaloneError> {
    let running = start(cfg).await?;
    let result = tutorial(&running, out).await;
    let stopped = running.stop().await;
    let report = result?;
    stopped?;
    writeln!(
        out,
        "\ncleanup: every Pod process stopped and every cgroup created removed"
    )
    .map_err(io)?;
    Ok(report)
}

async fn tutorial(running: &Running, out: &mut (dyn Write + Send)) -> Result<DemoReport, StandaloneError> {
    let node = &running.node;
    let grace = node.config.grace_period_override;
    writeln!(
        out,
        "node {}: allocatable cpu {}, memory {}",
        node.config.name,
        headroom_node_model::format_cpu_millis(node.config.allocatable.cpu_millis),
        headroom_node_model::format_memory_bytes(node.config.allocatable.memory_bytes)
    )
    .map_err(io)?;
    writeln!(out, "\n$ kubectl apply -f preemption-demo.yaml").map_err(io)?;
    for line in node.apply_manifest(DEMO_MANIFEST)? {
        writeln!(out, "{line}").map_err(io)?;
    }

    // Both Pods run as soon as apply returns (their processes are started synchronously).
    let (victim_pids, victim_dirs, victim_uid, resizer_pids) = {
        let store = node.store();
        let low = store
            .pods
            .get(LOW)
            .ok_or_else(|| StandaloneError::NotFound(format!("{LOW} was not created")))?;
        let high = store
            .pods
            .get(HIGH)
            .ok_or_else(|| StandaloneError::NotFound(format!("{HIGH} was not created")))?;
        let (Some(low_rt), Some(high_rt)) = (&low.runtime, &high.runtime) else {
            return Err(StandaloneError::Invalid(
                "the demo Pods did not both start".into(),
            ));
        };
        let dirs = low_rt
            .cgroups()
            .pod_dirs()
            .map_err(|e| StandaloneError::Invalid(e.to_string()))?;
        writeln!(out, "\n$ kubectl get pods").map_err(io)?;
        writeln!(out, "NAME                READY   STATUS    RESTARTS   AGE").map_err(io)?;
        for p in [high, low] {
            let name = p.pod.metadata.name.as_deref().unwrap_or_default();
            writeln!(out, "{name:<19} 1/1     Running   0          0s").map_err(io)?;
        }
        let uid = low.pod.metadata.uid.clone().unwrap_or_default();
        (low_rt.pids(), dirs, uid, high_rt.pids())
    };

    writeln!(
        out,
        "\n$ kubectl patch pod high-priority-pod --subresource resize --patch \\\n  \
         '{{\"spec\":{{\"containers\":[{{\"name\":\"app\", \"resources\":{{\"requests\":{{\"cpu\":\"6\"}}, \"limits\":{{\"cpu\":\"6\"}}}}}}]}}}}'"
    )
    .map_err(io)?;
    let result = node.resize(HIGH, Some("app"), Some("6"), None).await?;
    writeln!(
        out,
        "pod/high-priority-pod patched (kubelet: {} {})",
        result.status, result.message
    )
    .map_err(io)?;

    // The shim loop takes it from here; wait for the kubelet's ResizeCompleted.
    let deadline = Instant::now() + grace.unwrap_or(super::DEFAULT_GRACE_PERIOD) + Duration::from_secs(30);
    loop {
        let done = {
            let store = node.store();
            let pod = store.pods.get(HIGH).map(|p| &p.pod);
            let in_progress = pod
                .and_then(|p| p.status.as_ref()?.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == CONDITION_RESIZE_IN_PROGRESS));
            let allocated = pod.and_then(|p| {
                let status = p.status.as_ref()?.container_statuses.as_ref()?.first()?;
                status
                    .allocated_resources
                    .as_ref()?
                    .get("cpu")
                    .map(|q| q.0.clone())
            });
            allocated.as_deref() == Some("6") && !in_progress
        };
        if done {
            break;
        }
        if Instant::now() > deadline {
            return Err(StandaloneError::Invalid(
                "the resize did not complete in time; see `events` above".into(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }

    let now = jiff::Timestamp::now();
    for (n, name) in [(1, "low-priority-pod"), (2, "high-priority-pod")] {
        writeln!(
            out,
            "\n({n}) $ kubectl get events --field-selector involvedObject.name={name}"
        )
        .map_err(io)?;
        let rows: Vec<_> = node
            .store()
            .events
            .list(Some(name))
            .iter()
            .map(|e| row(e, now))
            .collect();
        writeln!(out, "{}", table(&rows)).map_err(io)?;
    }

    let (allocated, high_uid) = {
        let store = node.store();
        let pod = store.pods.get(HIGH).map(|p| p.pod.clone()).unwrap_or_default();
        let cpu = pod
            .status
            .as_ref()
            .and_then(|s| {
                s.container_statuses
                    .as_ref()?
                    .first()?
                    .allocated_resources
                    .clone()
            })
            .and_then(|a| a.get("cpu").map(|q| q.0.clone()))
            .unwrap_or_default();
        (cpu, pod.metadata.uid.unwrap_or_default())
    };
    writeln!(
        out,
        "\n(3) $ kubectl get pod high-priority-pod -o jsonpath='{{.status.containerStatuses[0].allocatedResources.cpu}}{{\"\\n\"}}'\n{allocated}"
    )
    .map_err(io)?;

    writeln!(out, "\ncgroups and processes:").map_err(io)?;
    if let Some((path, value)) = verify::cpu_limit_file(&node.config.roots, &high_uid, "app") {
        writeln!(out, "resizer cpu limit: {} = {value}", path.display()).map_err(io)?;
    }
    let pids: Vec<String> = victim_pids.iter().map(u32::to_string).collect();
    let alive: Vec<&String> = pids
        .iter()
        .filter(|p| std::path::Path::new(&format!("/proc/{p}")).exists())
        .collect();
    writeln!(
        out,
        "victim pids: {} (still alive: {})",
        pids.join(" "),
        alive.len()
    )
    .map_err(io)?;
    for dir in victim_dirs.paths() {
        let state = if dir.exists() { "STILL PRESENT" } else { "removed" };
        writeln!(out, "victim cgroup: {} {state}", dir.display()).map_err(io)?;
    }
    writeln!(out, "victim uid: {victim_uid}").map_err(io)?;
    let pids: Vec<String> = resizer_pids.iter().map(u32::to_string).collect();
    writeln!(out, "resizer pids: {} (stopped at cleanup)", pids.join(" ")).map_err(io)?;

    writeln!(out, "\n(4) latency of each step:").map_err(io)?;
    for l in node.latencies() {
        for step in Step::ALL {
            let value = l
                .get(step)
                .map_or("-".to_string(), |ns| format!("{:.3} ms", ns as f64 / 1e6));
            writeln!(out, "  {:<20} {:<52} {value:>12}", step.name(), step.describe()).map_err(io)?;
        }
        let total = l
            .total_ns
            .map_or("-".to_string(), |ns| format!("{:.3} ms", ns as f64 / 1e6));
        writeln!(
            out,
            "  {:<20} {:<52} {total:>12}",
            "total", "resize requested -> verified"
        )
        .map_err(io)?;
    }
    Ok(DemoReport {
        allocated_cpu: allocated,
        victim_pids,
    })
}
