//! `headroomctl`: talk to headroomd over its Unix socket.
//!
//! - `headroom`: one snapshot of node headroom.
//! - `watch`: stream snapshots as they change.
//! - `pods`: per-Pod pressure.
//!
//! Every listing takes `-o json|yaml|wide` (`headroom_client::output`).
//! - `top`: live terminal view (ratatui) of node headroom and the most throttled / pressured Pods.
//! - `resize`, `events`, `get pods`, `explain`: a running standalone shim, on `--shim-socket`
//!   (see `shim.rs`).

#[path = "headroomctl/shim.rs"]
mod shim;

use std::{collections::HashMap, path::PathBuf, time::Duration};

use anyhow::Context as _;
use clap::{CommandFactory as _, Parser, Subcommand};
use headroom_client::cli_docs;
use headroom_client::kubectl::table;
use headroom_client::output::Output;
use headroom_proto::v1::{self as pb, headroom_client::HeadroomClient};
use tonic::transport::Channel;

#[derive(Parser)]
#[command(
    name = "headroomctl",
    version = headroom_client::VERSION,
    about = "Query headroomd: node headroom, per-Pod pressure, live view"
)]
struct Cli {
    /// headroomd's Unix socket.
    #[arg(long, global = true, default_value = "/run/headroom/headroomd.sock")]
    socket: PathBuf,
    /// The standalone shim's Unix socket (`resize`, `events`, `get pods`, `explain`).
    #[arg(long, global = true, default_value = "/run/headroom/shim.sock")]
    shim_socket: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print one snapshot of node headroom.
    Headroom {
        #[command(flatten)]
        output: Output,
    },
    /// Stream node headroom as it changes (`-o json`: one object per line; `-o yaml`: one
    /// document each).
    Watch {
        /// At most one update per this many milliseconds.
        #[arg(long, default_value_t = 0)]
        min_interval_ms: u32,
        /// Stop after this many updates (0: never).
        #[arg(long, default_value_t = 0)]
        count: u64,
        #[command(flatten)]
        output: Output,
    },
    /// Per-Pod pressure.
    Pods {
        /// Only this namespace.
        #[arg(long, short = 'n', default_value = "")]
        namespace: String,
        #[command(flatten)]
        output: Output,
    },
    /// Live view: node headroom and the most throttled / pressured Pods, with sparklines.
    Top {
        /// Pods shown.
        #[arg(long, default_value_t = 15)]
        rows: usize,
    },
    /// gRPC health of headroomd (`grpc.health.v1`): exit 0 when SERVING (the DaemonSet's
    /// liveness and readiness probe).
    Health {
        /// Service to check ("" = the server as a whole).
        #[arg(long, default_value = "")]
        service: String,
    },
    /// This headroomctl's version and headroomd's (from its `headroom-version` response header),
    /// as `kubectl version` prints them.
    Version {
        #[command(flatten)]
        output: Output,
    },
    #[command(flatten)]
    Shim(shim::ShimCommand),
    /// Print a shell completion script (bash, zsh, fish), as `kubectl completion` does.
    Completion(cli_docs::CompletionArgs),
    /// Write the man pages (roff) into DIR; `cargo xtask man` puts them in target/man/.
    #[command(hide = true)]
    Man(cli_docs::ManArgs),
}

fn fig(f: &Option<pb::Figure>) -> Option<f64> {
    f.as_ref().map(|f| f.value)
}

fn res(r: &Option<pb::ResourceFigures>) -> pb::ResourceFigures {
    r.unwrap_or_default()
}

fn cpu(millis: i64) -> String {
    format!("{millis}m")
}

fn mib(bytes: i64) -> String {
    format!("{}Mi", bytes / (1 << 20))
}

/// The columns of `headroom` and `watch`: one row per snapshot.
fn snapshot_header(wide: bool) -> Vec<&'static str> {
    let mut h = vec![
        "NODE",
        "CPU HEADROOM",
        "CPU ALLOCATABLE",
        "MEMORY HEADROOM",
        "MEMORY ALLOCATABLE",
        "RESERVATIONS",
        "STALE",
    ];
    if wide {
        h.extend([
            "CPU ALLOCATED",
            "CPU RESERVED",
            "MEMORY ALLOCATED",
            "MEMORY RESERVED",
            "VERSION",
            "DROPPED",
        ]);
    }
    h
}

fn snapshot_row(s: &pb::HeadroomSnapshot, wide: bool) -> Vec<String> {
    let n = s.node.unwrap_or_default();
    let (c, m) = (res(&n.cpu_millis), res(&n.memory_bytes));
    let mut row = vec![
        s.node_name.clone(),
        cpu(c.headroom),
        cpu(c.allocatable),
        mib(m.headroom),
        mib(m.allocatable),
        s.reservations.len().to_string(),
        n.stale.to_string(),
    ];
    if wide {
        row.extend([
            cpu(c.allocated),
            cpu(c.reserved),
            mib(m.allocated),
            mib(m.reserved),
            s.version.to_string(),
            s.pipeline.unwrap_or_default().dropped_total.to_string(),
        ]);
    }
    row
}

fn snapshot_table(s: &pb::HeadroomSnapshot, wide: bool) -> String {
    table(&snapshot_header(wide), &[snapshot_row(s, wide)])
}

/// The worst of the Pod cgroup and its containers for one figure.
fn worst(p: &pb::PodPressure, get: fn(&pb::Pressure) -> Option<f64>) -> Option<f64> {
    p.pod_cgroup
        .as_ref()
        .into_iter()
        .chain(p.containers.iter().filter_map(|c| c.pressure.as_ref()))
        .filter_map(get)
        .reduce(f64::max)
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or_else(|| "-".to_owned(), f)
}

fn pods_table(pods: &[pb::PodPressure], wide: bool) -> String {
    let mut header = vec![
        "NAMESPACE",
        "NAME",
        "CPU",
        "THROTTLED",
        "THROTTLED S/S",
        "WORKING SET",
        "RECLAIM S/S",
        "OOM KILLS",
    ];
    if wide {
        header.extend(["UID", "CONTAINERS", "RUNQ LATENCY", "PSI CPU", "PSI MEMORY"]);
    }
    let rows: Vec<Vec<String>> = pods
        .iter()
        .map(|p| {
            let r = p.pod.clone().unwrap_or_default();
            let mut row = vec![
                r.namespace,
                r.name,
                opt(worst(p, |x| fig(&x.cpu_usage_cores)), |v| format!("{v:.2}")),
                opt(worst(p, |x| fig(&x.cpu_throttled_ratio)), |v| {
                    format!("{:.1}%", v * 100.0)
                }),
                opt(worst(p, |x| fig(&x.cpu_throttled_seconds_per_second)), |v| {
                    format!("{v:.3}")
                }),
                opt(worst(p, |x| fig(&x.memory_working_set_bytes)), |v| {
                    format!("{:.0}Mi", v / 1048576.0)
                }),
                opt(
                    worst(p, |x| fig(&x.memory_reclaim_stall_seconds_per_second)),
                    |v| format!("{v:.3}"),
                ),
                opt(worst(p, |x| fig(&x.oom_kills_total)), |v| format!("{v:.0}")),
            ];
            if wide {
                row.extend([
                    r.uid,
                    p.containers
                        .iter()
                        .map(|c| c.name.as_str())
                        .collect::<Vec<_>>()
                        .join(","),
                    opt(worst(p, |x| fig(&x.runq_latency_mean_seconds)), |v| {
                        format!("{:.0}us", v * 1e6)
                    }),
                    opt(worst(p, |x| x.psi_cpu.map(|m| m.some_avg10)), |v| {
                        format!("{v:.1}%")
                    }),
                    opt(worst(p, |x| x.psi_memory.map(|m| m.some_avg10)), |v| {
                        format!("{v:.1}%")
                    }),
                ]);
            }
            row
        })
        .collect();
    table(&header, &rows)
}

async fn client(socket: &PathBuf) -> anyhow::Result<HeadroomClient<Channel>> {
    headroom_client::headroom_client(socket).await.with_context(|| {
        format!(
            "connect to headroomd at {} (is it running? --socket?)",
            socket.display()
        )
    })
}

fn status(e: tonic::Status) -> anyhow::Error {
    anyhow::anyhow!("headroomd: {:?}: {}", e.code(), e.message())
}

async fn health(socket: &std::path::Path, service: String) -> anyhow::Result<()> {
    use tonic_health::pb::{
        HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
    };
    let channel = headroom_client::connect_uds(socket)
        .await
        .with_context(|| format!("connect to headroomd at {}", socket.display()))?;
    let response = tokio::time::timeout(
        Duration::from_secs(5),
        HealthClient::new(channel).check(HealthCheckRequest {
            service: service.clone(),
        }),
    )
    .await
    .context("health check timed out after 5 s")??
    .into_inner();
    let status = ServingStatus::try_from(response.status).unwrap_or(ServingStatus::Unknown);
    println!("{}", status.as_str_name());
    anyhow::ensure!(
        status == ServingStatus::Serving,
        "headroomd is not serving ({service:?}: {})",
        status.as_str_name()
    );
    Ok(())
}

/// `headroomctl version -o json|yaml`.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Versions {
    client_version: String,
    server_version: Option<String>,
}

async fn version(socket: &std::path::Path, output: Output) -> anyhow::Result<()> {
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
    let server = async {
        let channel = headroom_client::connect_uds(socket)
            .await
            .with_context(|| format!("connect to headroomd at {}", socket.display()))?;
        let response = tokio::time::timeout(
            Duration::from_secs(5),
            HealthClient::new(channel).check(HealthCheckRequest::default()),
        )
        .await
        .context("headroomd did not answer within 5 s")??;
        let header = response
            .metadata()
            .get(headroom_client::VERSION_HEADER)
            .context("headroomd sent no headroom-version header (a version before 0.1.0 with it)")?;
        anyhow::Ok(header.to_str().unwrap_or("<not text>").to_string())
    }
    .await;
    let versions = Versions {
        client_version: headroom_client::VERSION.to_string(),
        server_version: server.as_ref().ok().cloned(),
    };
    output.print(&versions, |_| {
        let mut text = format!("Client Version: {}", versions.client_version);
        if let Some(v) = &versions.server_version {
            text.push_str(&format!("\nServer Version: {v}"));
        }
        text
    })?;
    server.map(drop)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // The standalone shim's commands talk to the shim, not to headroomd.
    let command = match cli.command {
        Command::Shim(command) => return shim::run(&cli.shim_socket, command).await,
        Command::Health { service } => return health(&cli.socket, service).await,
        Command::Version { output } => return version(&cli.socket, output).await,
        Command::Completion(args) => {
            cli_docs::print_completion(Cli::command(), args);
            return Ok(());
        }
        Command::Man(args) => return Ok(cli_docs::write_man_pages(Cli::command(), &args.dir).map(drop)?),
        other => other,
    };
    let mut c = client(&cli.socket).await?;
    match command {
        Command::Headroom { output } => {
            let s = c
                .get_headroom(pb::GetHeadroomRequest { include_pods: false })
                .await
                .map_err(status)?
                .into_inner();
            output.print(&s, |wide| snapshot_table(&s, wide))?;
        }
        Command::Watch {
            min_interval_ms,
            count,
            output,
        } => {
            let mut stream = c
                .watch_headroom(pb::WatchHeadroomRequest {
                    include_pods: false,
                    min_interval_ms,
                })
                .await
                .map_err(status)?
                .into_inner();
            let mut seen = 0;
            while let Some(s) = stream.message().await.map_err(status)? {
                match output.stream_item(&s)? {
                    Some(text) => println!("{text}"),
                    // kubectl get -w: the header once, then a row per change.
                    None => {
                        let text = snapshot_table(&s, output.wide());
                        let text = if seen == 0 {
                            text.as_str()
                        } else {
                            text.split_once('\n').map_or("", |(_, row)| row)
                        };
                        println!("{text}");
                    }
                }
                seen += 1;
                if count != 0 && seen >= count {
                    break;
                }
            }
        }
        Command::Pods { namespace, output } => {
            let r = c
                .list_pods(pb::ListPodsRequest {
                    namespace,
                    pod_uid: String::new(),
                })
                .await
                .map_err(status)?
                .into_inner();
            output.print(&r, |wide| pods_table(&r.pods, wide))?;
        }
        Command::Top { rows } => top::run(c, rows).await?,
        Command::Shim(_)
        | Command::Health { .. }
        | Command::Version { .. }
        | Command::Completion(_)
        | Command::Man(_) => {} // returned above
    }
    Ok(())
}

mod top {
    //! The live view.
    use std::collections::VecDeque;

    use ratatui::{
        Terminal,
        backend::CrosstermBackend,
        crossterm::{
            event::{self, Event, KeyCode},
            execute,
            terminal::{EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode},
        },
        layout::{Constraint, Direction, Layout},
        style::{Color, Modifier, Style},
        widgets::{Block, Borders, Cell, Gauge, Paragraph, Row, Sparkline, Table},
    };

    use super::*;

    const HISTORY: usize = 120;

    struct State {
        snapshot: Option<pb::HeadroomSnapshot>,
        cpu_headroom: VecDeque<u64>,
        mem_headroom: VecDeque<u64>,
        throttle: HashMap<String, VecDeque<u64>>,
    }

    fn push(q: &mut VecDeque<u64>, v: u64) {
        if q.len() == HISTORY {
            q.pop_front();
        }
        q.push_back(v);
    }

    impl State {
        fn update(&mut self, s: pb::HeadroomSnapshot) {
            let n = s.node.unwrap_or_default();
            push(
                &mut self.cpu_headroom,
                res(&n.cpu_millis).headroom.max(0).unsigned_abs(),
            );
            push(
                &mut self.mem_headroom,
                (res(&n.memory_bytes).headroom.max(0) >> 20).unsigned_abs(),
            );
            for p in &s.pods {
                let uid = p.pod.as_ref().map(|r| r.uid.clone()).unwrap_or_default();
                let v = worst(p, |x| fig(&x.cpu_throttled_ratio)).unwrap_or(0.0);
                push(self.throttle.entry(uid).or_default(), (v * 1000.0) as u64);
            }
            self.snapshot = Some(s);
        }
    }

    struct Restore;
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = disable_raw_mode();
            let _ = execute!(std::io::stdout(), LeaveAlternateScreen);
        }
    }

    pub(super) async fn run(mut c: HeadroomClient<Channel>, rows: usize) -> anyhow::Result<()> {
        let mut stream = c
            .watch_headroom(pb::WatchHeadroomRequest {
                include_pods: true,
                min_interval_ms: 250,
            })
            .await
            .map_err(status)?
            .into_inner();
        enable_raw_mode()?;
        let _restore = Restore;
        execute!(std::io::stdout(), EnterAlternateScreen)?;
        let mut terminal = Terminal::new(CrosstermBackend::new(std::io::stdout()))?;
        let mut state = State {
            snapshot: None,
            cpu_headroom: VecDeque::new(),
            mem_headroom: VecDeque::new(),
            throttle: HashMap::new(),
        };
        let (keys_tx, mut keys) = tokio::sync::mpsc::unbounded_channel();
        std::thread::spawn(move || {
            while let Ok(ev) = event::read() {
                if let Event::Key(k) = ev
                    && keys_tx.send(k.code).is_err()
                {
                    break;
                }
            }
        });
        loop {
            terminal.draw(|f| draw(f, &state, rows))?;
            tokio::select! {
                msg = stream.message() => match msg.map_err(status)? {
                    Some(s) => state.update(s),
                    None => anyhow::bail!("headroomd closed the stream"),
                },
                Some(key) = keys.recv() => if matches!(key, KeyCode::Char('q') | KeyCode::Esc) { break },
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
        Ok(())
    }

    fn draw(f: &mut ratatui::Frame<'_>, st: &State, rows: usize) {
        let area = f.area();
        let parts = Layout::default()
            .direction(Direction::Vertical)
            .constraints([Constraint::Length(3), Constraint::Length(6), Constraint::Min(5)])
            .split(area);
        let Some(s) = &st.snapshot else {
            f.render_widget(Paragraph::new("waiting for headroomd… (q to quit)"), area);
            return;
        };
        let n = s.node.unwrap_or_default();
        let (cpu, mem) = (res(&n.cpu_millis), res(&n.memory_bytes));
        let ratio = |r: pb::ResourceFigures| {
            if r.allocatable > 0 {
                ((r.allocated + r.reserved) as f64 / r.allocatable as f64).clamp(0.0, 1.0)
            } else {
                0.0
            }
        };
        let top = Layout::default()
            .direction(Direction::Horizontal)
            .constraints([Constraint::Percentage(50), Constraint::Percentage(50)])
            .split(parts[0]);
        f.render_widget(
            Gauge::default()
                .block(Block::default().borders(Borders::ALL).title(format!(
                    " {} cpu: {}m free of {}m{} ",
                    s.node_name,
                    cpu.headroom,
                    cpu.allocatable,
                    if n.stale { " STALE" } else { "" }
                )))
                .gauge_style(Style::default().fg(Color::Cyan))
                .ratio(ratio(cpu)),
            top[0],
        );
        f.render_widget(
            Gauge::default()
                .block(Block::default().borders(Borders::ALL).title(format!(
                    " memory: {} MiB free of {} MiB ",
                    mem.headroom >> 20,
                    mem.allocatable >> 20
                )))
                .gauge_style(Style::default().fg(Color::Magenta))
                .ratio(ratio(mem)),
            top[1],
        );
        let sparks = Layout::default()
            .direction(Direction::Horizontal)
            .constraints([Constraint::Percentage(50), Constraint::Percentage(50)])
            .split(parts[1]);
        let cpu_hist: Vec<u64> = st.cpu_headroom.iter().copied().collect();
        let mem_hist: Vec<u64> = st.mem_headroom.iter().copied().collect();
        f.render_widget(
            Sparkline::default()
                .block(Block::default().borders(Borders::ALL).title(" cpu headroom (m) "))
                .data(&cpu_hist)
                .style(Style::default().fg(Color::Cyan)),
            sparks[0],
        );
        f.render_widget(
            Sparkline::default()
                .block(
                    Block::default()
                        .borders(Borders::ALL)
                        .title(" memory headroom (MiB) "),
                )
                .data(&mem_hist)
                .style(Style::default().fg(Color::Magenta)),
            sparks[1],
        );
        let mut pods: Vec<&pb::PodPressure> = s.pods.iter().collect();
        let score = |p: &pb::PodPressure| {
            worst(p, |x| fig(&x.cpu_throttled_ratio)).unwrap_or(0.0) * 10.0
                + worst(p, |x| fig(&x.memory_reclaim_stall_seconds_per_second)).unwrap_or(0.0)
                + worst(p, |x| x.psi_memory.map(|m| m.some_avg10 / 100.0)).unwrap_or(0.0)
        };
        pods.sort_by(|a, b| score(b).total_cmp(&score(a)));
        let spark = |uid: &str| -> String {
            const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
            st.throttle
                .get(uid)
                .map(|h| {
                    h.iter()
                        .rev()
                        .take(30)
                        .rev()
                        .map(|v| BARS[((*v as usize) * 7 / 1000).min(7)])
                        .collect()
                })
                .unwrap_or_default()
        };
        let table_rows: Vec<Row<'_>> = pods
            .iter()
            .take(rows)
            .map(|p| {
                let r = p.pod.clone().unwrap_or_default();
                Row::new(vec![
                    Cell::from(format!("{}/{}", r.namespace, r.name)),
                    Cell::from(opt(worst(p, |x| fig(&x.cpu_usage_cores)), |v| format!("{v:.2}"))),
                    Cell::from(opt(worst(p, |x| fig(&x.cpu_throttled_ratio)), |v| {
                        format!("{:.1}%", v * 100.0)
                    })),
                    Cell::from(spark(&r.uid)),
                    Cell::from(opt(worst(p, |x| fig(&x.memory_working_set_bytes)), |v| {
                        format!("{:.0}", v / 1048576.0)
                    })),
                    Cell::from(opt(
                        worst(p, |x| fig(&x.memory_reclaim_stall_seconds_per_second)),
                        |v| format!("{v:.3}"),
                    )),
                    Cell::from(opt(worst(p, |x| fig(&x.oom_kills_total)), |v| format!("{v:.0}"))),
                ])
            })
            .collect();
        let header = Row::new([
            "POD",
            "CPU",
            "THROTTLE",
            "THROTTLE (last 30)",
            "WSET MiB",
            "RECLAIM s/s",
            "OOM",
        ])
        .style(Style::default().add_modifier(Modifier::BOLD));
        f.render_widget(
            Table::new(
                table_rows,
                [
                    Constraint::Min(30),
                    Constraint::Length(6),
                    Constraint::Length(9),
                    Constraint::Length(32),
                    Constraint::Length(9),
                    Constraint::Length(12),
                    Constraint::Length(4),
                ],
            )
            .header(header)
            .block(Block::default().borders(Borders::ALL).title(format!(
                " most throttled / pressured pods — v{} dropped {} — q quits ",
                s.version,
                s.pipeline.unwrap_or_default().dropped_total
            ))),
            parts[2],
        );
    }
}
