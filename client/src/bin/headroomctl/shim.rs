//! Subcommands for a running standalone shim (`headroom-shim standalone`), over its control API
//! (`headroom.v1.Standalone`) on `--shim-socket`: `resize`, `events`, `get pods`, `explain`.

use std::path::Path;

use anyhow::Context as _;
use clap::Subcommand;
use headroom_client::kubectl::{human_duration, table};
use headroom_proto::v1::{self as pb, standalone_client::StandaloneClient};

use headroom_client::output::Output;

#[derive(Subcommand)]
pub enum ShimCommand {
    /// Resize a Pod in place, like `kubectl patch pod POD --subresource resize` (standalone shim).
    Resize {
        /// NAME or NAMESPACE/NAME.
        pod: String,
        /// New CPU request (and limit, where the container has one), e.g. 6 or 2500m.
        #[arg(long)]
        cpu: Option<String>,
        /// New memory request (and limit, where the container has one), e.g. 2Gi.
        #[arg(long)]
        memory: Option<String>,
        /// The container; needed when the Pod has more than one.
        #[arg(long, short = 'c')]
        container: Option<String>,
    },
    /// Events, like `kubectl get events` (standalone shim).
    Events {
        /// Only events about this Pod (`--field-selector involvedObject.name=POD`).
        #[arg(long = "for", value_name = "POD")]
        for_pod: Option<String>,
        #[command(flatten)]
        output: Output,
    },
    /// `get pods`: the Pods with their priority and allocated resources (standalone shim).
    Get {
        /// What to list: `pods`.
        #[arg(value_parser = ["pods", "pod", "po"])]
        what: String,
        #[command(flatten)]
        output: Output,
    },
    /// Why a Pod's resize is pending and what preemption would do (standalone shim).
    Explain {
        /// NAME or NAMESPACE/NAME.
        pod: String,
    },
}

fn status(e: tonic::Status) -> anyhow::Error {
    anyhow::anyhow!("headroom-shim: {:?}: {}", e.code(), e.message())
}

pub async fn run(socket: &Path, command: ShimCommand) -> anyhow::Result<()> {
    let channel = headroom_client::connect_uds(socket).await.with_context(|| {
        format!(
            "connect to headroom-shim at {} (is `headroom-shim standalone` running? --shim-socket?)",
            socket.display()
        )
    })?;
    let mut c = StandaloneClient::new(channel);
    match command {
        ShimCommand::Resize {
            pod,
            cpu,
            memory,
            container,
        } => {
            anyhow::ensure!(cpu.is_some() || memory.is_some(), "give --cpu and/or --memory");
            let r = c
                .resize(pb::ResizePodRequest {
                    pod: pod.clone(),
                    cpu: cpu.unwrap_or_default(),
                    memory: memory.unwrap_or_default(),
                    container: container.unwrap_or_default(),
                })
                .await
                .map_err(status)?
                .into_inner();
            let name = pod.rsplit('/').next().unwrap_or(&pod);
            match r.status.as_str() {
                "Completed" => println!("pod/{name} resized (generation {})", r.generation),
                other => println!("pod/{name} patched; resize {other}: {}", r.message),
            }
        }
        ShimCommand::Events { for_pod, output } => {
            let name = for_pod.map(|p| p.rsplit('/').next().unwrap_or(&p).to_string());
            let r = c
                .list_events(pb::ListEventsRequest {
                    involved_object_name: name.unwrap_or_default(),
                })
                .await
                .map_err(status)?
                .into_inner();
            if r.events.is_empty() && output.document(&r)?.is_none() {
                println!("No resources found in default namespace.");
            } else {
                output.print(&r, |wide| events_table(&r, wide))?;
            }
        }
        ShimCommand::Get { what: _, output } => {
            let r = c
                .get_pods(pb::GetPodsRequest {})
                .await
                .map_err(status)?
                .into_inner();
            output.print(&r, |wide| pods_table(&r, wide))?;
        }
        ShimCommand::Explain { pod } => {
            let r = c
                .explain(pb::ExplainRequest { pod })
                .await
                .map_err(status)?
                .into_inner();
            println!("{}", r.text);
        }
    }
    Ok(())
}

/// `kubectl get events` (`-o wide`: kubectl's extra SOURCE, FIRST SEEN and COUNT).
fn events_table(r: &pb::ListEventsResponse, wide: bool) -> String {
    let now = r.now.map_or(0, |t| t.seconds);
    let header: &[&str] = if wide {
        &[
            "LAST SEEN",
            "TYPE",
            "REASON",
            "OBJECT",
            "SOURCE",
            "MESSAGE",
            "FIRST SEEN",
            "COUNT",
        ]
    } else {
        &["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    };
    let rows: Vec<Vec<String>> = r
        .events
        .iter()
        .map(|e| {
            let first = e.first_timestamp.map_or(now, |t| t.seconds);
            let last = e.last_timestamp.map_or(first, |t| t.seconds);
            let mut row = vec![
                human_duration(now - last),
                e.r#type.clone(),
                e.reason.clone(),
                e.object.clone(),
            ];
            if wide {
                row.extend([
                    e.source.clone(),
                    e.message.clone(),
                    human_duration(now - first),
                    e.count.to_string(),
                ]);
            } else {
                row.push(e.message.clone());
            }
            row
        })
        .collect();
    table(header, &rows)
}

/// `get pods` (`-o wide`: the namespace, uid and the containers' processes too).
fn pods_table(r: &pb::GetPodsResponse, wide: bool) -> String {
    let mut header = vec!["NAME", "PRIORITY", "CPU REQ", "ALLOCATED CPU", "MEMORY", "STATUS"];
    if wide {
        header.extend(["NAMESPACE", "UID", "PIDS"]);
    }
    let rows: Vec<Vec<String>> = r
        .pods
        .iter()
        .map(|p| {
            let status = match p.resize.as_str() {
                "" => p.phase.clone(),
                resize => format!("{} (resize {resize})", p.phase),
            };
            let memory = if p.memory_request == p.allocated_memory || p.allocated_memory.is_empty() {
                p.memory_request.clone()
            } else {
                format!("{} (allocated {})", p.memory_request, p.allocated_memory)
            };
            let mut row = vec![
                p.name.clone(),
                p.priority.to_string(),
                p.cpu_request.clone(),
                p.allocated_cpu.clone(),
                memory,
                status,
            ];
            if wide {
                row.extend([
                    p.namespace.clone(),
                    p.uid.clone(),
                    p.pids.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
                ]);
            }
            row
        })
        .collect();
    table(&header, &rows)
}
