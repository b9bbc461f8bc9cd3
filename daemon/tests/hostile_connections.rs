//! Connections that never become gRPC clients, against headroomd's real server on a real Unix
//! socket: silent ones and half a preface are closed after the handshake deadline, a health RPC
//! is answered while many are open, connections over the cap are closed at once, and running out
//! of file descriptors does not spin the accept loop. The server runs in a child process (this
//! test binary again, as `child_server`), so that its file descriptors (`/proc/<pid>/fd`), CPU
//! time (`/proc/<pid>/stat`) and open-file limit are its own, not the clients'.
#![allow(clippy::unwrap_used)]

use std::{
    io::{BufRead as _, BufReader, Read as _, Write as _},
    os::unix::net::UnixStream,
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use headroom_testkit::headroomd::{HeadroomdSetup, InProcessHeadroomd};
use headroomd::server::{ConnectionLimits, connections::HTTP2_PREFACE};
use nix::sys::resource::{Resource, getrlimit, setrlimit};
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};

/// Set in the child: the directory to put its socket in.
const CHILD_DIR: &str = "HEADROOM_CONNECTIONS_CHILD_DIR";
const CHILD_CAP: &str = "HEADROOM_CONNECTIONS_CHILD_CAP";
const CHILD_DEADLINE_MS: &str = "HEADROOM_CONNECTIONS_CHILD_DEADLINE_MS";
/// File descriptors the child may open beyond those it has once serving (its RLIMIT_NOFILE).
const CHILD_FD_SPARE: &str = "HEADROOM_CONNECTIONS_CHILD_FD_SPARE";
/// Child mode: lower the soft limit, call `raise_open_file_limit`, print the limits.
const CHILD_RAISE: &str = "HEADROOM_CONNECTIONS_CHILD_RAISE";

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| v.parse().unwrap())
}

fn fd_count(pid: &str) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count()
}

/// Runs only as the child of the tests below: headroomd with the given limits, until stdin
/// closes (the parent's test ended, however it ended).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_server() {
    if std::env::var_os(CHILD_RAISE).is_some() {
        let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
        setrlimit(Resource::RLIMIT_NOFILE, 256, hard).unwrap();
        let (old, new) = headroomd::server::connections::raise_open_file_limit().unwrap();
        let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
        println!("RAISED old={old} new={new} soft={soft} hard={hard}");
        return;
    }
    let Some(dir) = std::env::var_os(CHILD_DIR) else {
        return;
    };
    let _ = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .with_env_filter("headroomd=info")
        .try_init();
    let d = InProcessHeadroomd::start(HeadroomdSetup {
        connections: ConnectionLimits {
            max_connections: env_u64(CHILD_CAP).unwrap() as usize,
            handshake_timeout: Duration::from_millis(env_u64(CHILD_DEADLINE_MS).unwrap()),
        },
        dir: Some(tempfile::tempdir_in(dir).unwrap()),
        ..HeadroomdSetup::default()
    })
    .await;
    let mut limit = 0;
    if let Some(spare) = env_u64(CHILD_FD_SPARE) {
        let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
        limit = fd_count("self") as u64 + spare;
        setrlimit(Resource::RLIMIT_NOFILE, limit, hard).unwrap();
    }
    println!("READY {} {limit}", d.socket.display());
    tokio::task::spawn_blocking(|| std::io::stdin().read_to_end(&mut Vec::new()))
        .await
        .unwrap()
        .unwrap();
    drop(d);
}

/// The child serving headroomd; killed on drop.
struct Server {
    child: Child,
    pid: String,
    socket: PathBuf,
    /// RLIMIT_NOFILE of the child, when lowered.
    fd_limit: u64,
    log: Arc<Mutex<String>>,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(cap: usize, deadline: Duration, fd_spare: Option<u64>) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", "child_server", "--nocapture", "--test-threads=1"])
            .env(CHILD_DIR, dir.path())
            .env(CHILD_CAP, cap.to_string())
            .env(CHILD_DEADLINE_MS, deadline.as_millis().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(spare) = fd_spare {
            cmd.env(CHILD_FD_SPARE, spare.to_string());
        }
        let mut child = cmd.spawn().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let (stderr, sink) = (child.stderr.take().unwrap(), log.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let mut log = sink.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let ready = loop {
            let mut line = String::new();
            assert!(
                stdout.read_line(&mut line).unwrap() > 0,
                "the child exited before it served:\n{}",
                log.lock().unwrap()
            );
            // libtest prints `test child_server ... ` on the same line first.
            if let Some((_, rest)) = line.split_once("READY ") {
                break rest.trim().to_owned();
            }
        };
        let (socket, limit) = ready.rsplit_once(' ').unwrap();
        Server {
            pid: child.id().to_string(),
            child,
            socket: socket.into(),
            fd_limit: limit.parse().unwrap(),
            log,
            _dir: dir,
        }
    }

    fn fds(&self) -> usize {
        fd_count(&self.pid)
    }

    /// User and system CPU time of the child so far, in clock ticks.
    fn cpu_ticks(&self) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).unwrap();
        // After the command name in parentheses: state is field 3, utime 14, stime 15.
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    }

    fn log_lines(&self, needle: &str) -> usize {
        self.log
            .lock()
            .unwrap()
            .lines()
            .filter(|l| l.contains(needle))
            .count()
    }

    /// The server's fd count once it has settled after start.
    async fn baseline(&self) -> usize {
        let mut last = self.fds();
        for _ in 0..10 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let now = self.fds();
            if now == last {
                break;
            }
            last = now;
        }
        last
    }

    fn silent(&self) -> UnixStream {
        UnixStream::connect(&self.socket).unwrap()
    }

    /// Half the HTTP/2 preface, then nothing.
    fn half_preface(&self) -> UnixStream {
        let mut s = self.silent();
        s.write_all(&HTTP2_PREFACE[..12]).unwrap();
        s
    }

    async fn health(&self, within: Duration) -> Result<ServingStatus, String> {
        let check = async {
            let channel = headroom_client::connect_uds(&self.socket)
                .await
                .map_err(|e| format!("connect: {e}"))?;
            let r = HealthClient::new(channel)
                .check(HealthCheckRequest {
                    service: String::new(),
                })
                .await
                .map_err(|e| format!("check: {e}"))?;
            Ok(ServingStatus::try_from(r.into_inner().status).unwrap_or(ServingStatus::Unknown))
        };
        tokio::time::timeout(within, check)
            .await
            .map_err(|_| format!("no answer within {within:?}"))?
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn wait_until(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    done()
}

/// Whether the server closed `s` (end of file or reset) within `within`.
fn closed_by_server(s: &mut UnixStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 256];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

#[tokio::test]
async fn silent_connections_and_half_prefaces_are_closed_after_the_deadline() {
    let server = Server::start(256, Duration::from_secs(1), None);
    let base = server.baseline().await;
    let mut clients: Vec<UnixStream> = (0..30).map(|_| server.silent()).collect();
    clients.extend((0..30).map(|_| server.half_preface()));
    assert!(
        wait_until(Duration::from_secs(5), || server.fds() >= base + 60).await,
        "the server did not accept 60 connections: {} fds, {base} at start",
        server.fds()
    );
    for (i, c) in clients.iter_mut().enumerate() {
        assert!(
            closed_by_server(c, Duration::from_secs(5)),
            "connection {i} still open 5 s after the 1 s deadline"
        );
    }
    assert!(
        wait_until(Duration::from_secs(5), || server.fds() <= base).await,
        "the server holds {} fds, {base} at start",
        server.fds()
    );
    // Connections that speak HTTP/2 are served as before.
    assert_eq!(
        server.health(Duration::from_secs(5)).await,
        Ok(ServingStatus::Serving)
    );
}

#[tokio::test]
async fn health_answers_while_many_silent_connections_are_open() {
    let server = Server::start(256, Duration::from_secs(60), None);
    let base = server.baseline().await;
    let clients: Vec<UnixStream> = (0..200).map(|_| server.silent()).collect();
    assert!(
        wait_until(Duration::from_secs(5), || server.fds() >= base + 200).await,
        "the server did not accept 200 connections: {} fds, {base} at start",
        server.fds()
    );
    for _ in 0..3 {
        assert_eq!(
            server.health(Duration::from_secs(2)).await,
            Ok(ServingStatus::Serving)
        );
    }
    assert!(
        server.fds() >= base + 200,
        "the silent connections are still open"
    );
    drop(clients);
}

#[tokio::test]
async fn connections_over_the_cap_are_closed_at_once() {
    let server = Server::start(16, Duration::from_secs(60), None);
    let base = server.baseline().await;
    let held: Vec<UnixStream> = (0..16).map(|_| server.silent()).collect();
    assert!(
        wait_until(Duration::from_secs(5), || server.fds() >= base + 16).await,
        "the server did not accept 16 connections: {} fds, {base} at start",
        server.fds()
    );
    for i in 0..5 {
        let mut extra = server.silent();
        assert!(
            closed_by_server(&mut extra, Duration::from_secs(2)),
            "connection {} over the cap of 16 was kept",
            i + 1
        );
    }
    assert_eq!(server.fds(), base + 16, "never more than the cap");
    // One WARN for the five (rate-limited).
    assert!(
        wait_until(Duration::from_secs(2), || server
            .log_lines("server.max_connections are open")
            == 1)
        .await,
        "expected one WARN:\n{}",
        server.log.lock().unwrap()
    );
    drop(held);
    assert!(
        wait_until(Duration::from_secs(5), || server.fds() <= base).await,
        "closed connections were not released: {} fds, {base} at start",
        server.fds()
    );
    assert_eq!(
        server.health(Duration::from_secs(5)).await,
        Ok(ServingStatus::Serving)
    );
}

#[tokio::test]
async fn running_out_of_file_descriptors_does_not_spin_the_accept_loop() {
    let server = Server::start(256, Duration::from_secs(1), Some(24));
    let base = server.baseline().await;
    // More silent connections than the server has descriptors left: the rest wait in the
    // listen backlog, and each accept fails with EMFILE while the first ones are held.
    let _clients: Vec<UnixStream> = (0..100).map(|_| server.silent()).collect();
    assert!(
        wait_until(Duration::from_secs(5), || server.fds() as u64
            >= server.fd_limit - 1)
        .await,
        "the server did not reach its fd limit {}: {} fds",
        server.fd_limit,
        server.fds()
    );
    let ticks = server.cpu_ticks();
    let window = Instant::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let used = server.cpu_ticks() - ticks;
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .unwrap()
        .unwrap() as u64;
    let share = used as f64 / hz as f64 / window.elapsed().as_secs_f64();
    println!(
        "server CPU while out of file descriptors: {:.1} % of a core",
        share * 100.0
    );
    assert!(
        share < 0.2,
        "the server used {:.0} % of a core out of descriptors",
        share * 100.0
    );
    // The silent connections are closed one deadline after another; then health is answered.
    assert_eq!(
        server.health(Duration::from_secs(20)).await,
        Ok(ServingStatus::Serving)
    );
    assert!(
        wait_until(Duration::from_secs(10), || server.fds() <= base).await,
        "the server holds {} fds, {base} at start",
        server.fds()
    );
    assert_eq!(
        server.log_lines("accept on the gRPC socket failed"),
        1,
        "one WARN (rate-limited):\n{}",
        server.log.lock().unwrap()
    );
}

#[test]
fn the_open_file_soft_limit_is_raised_to_the_hard_limit() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_server", "--nocapture", "--test-threads=1"])
        .env(CHILD_RAISE, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.find("RAISED ").map(|at| l[at..].trim()))
        .unwrap_or_else(|| panic!("no result from the child:\n{stdout}"));
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    assert!(hard > 256, "this test needs a hard limit above 256");
    assert_eq!(line, format!("RAISED old=256 new={hard} soft={hard} hard={hard}"));
}

/// The counters behind `/metrics`, in this process: a held connection, one over the cap, one
/// silent past the deadline. (Two workers: the test blocks one reading.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_accept_loop_counts_what_it_refuses_and_closes() {
    let d = InProcessHeadroomd::start(HeadroomdSetup {
        connections: ConnectionLimits {
            max_connections: 2,
            handshake_timeout: Duration::from_millis(300),
        },
        ..HeadroomdSetup::default()
    })
    .await;
    let stats = d.server().connections().clone();
    let _held = [
        UnixStream::connect(&d.socket).unwrap(),
        UnixStream::connect(&d.socket).unwrap(),
    ];
    assert!(wait_until(Duration::from_secs(5), || stats.open() == 2).await);
    let mut over = UnixStream::connect(&d.socket).unwrap();
    assert!(closed_by_server(&mut over, Duration::from_secs(2)));
    assert!(
        wait_until(Duration::from_secs(5), || stats.handshake_failed_total() == 2
            && stats.open() == 0)
        .await,
        "the held ones are closed at the deadline: {stats:?}"
    );
    let metrics = headroomd::metrics::Metrics::new(d.reader.clone())
        .with_connections(stats)
        .encode()
        .unwrap();
    for line in [
        "headroom_grpc_connections 0.0",
        "headroom_grpc_connections_accepted_total 3.0",
        "headroom_grpc_connections_over_cap_total 1.0",
        "headroom_grpc_connections_handshake_failed_total 2.0",
        "headroom_grpc_accept_out_of_fds_total 0.0",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line:?} missing:\n{metrics}");
    }
}
