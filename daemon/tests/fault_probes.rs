//! A daemon whose probes cannot load still serves, and says why: `headroomd serve --probes
//! if-available` run as an unprivileged user (via `setpriv`), so the kernel refuses every probe.
//! (Per-program attach failures are kept apart by `Probes::load`, which attaches each program on
//! its own and records its error in `Probes::programs`; `probes_kernel.rs` checks they all attach
//! on this kernel.)
#![allow(clippy::unwrap_used)]

use std::{
    io::Read as _,
    os::unix::fs::PermissionsExt as _,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use headroom_proto::v1 as pb;

const HEADROOMD: &str = env!("CARGO_BIN_EXE_headroomd");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_probes_the_daemon_serves_and_says_why() {
    // Root drops to nobody (setpriv).
    if !headroom_testkit::gate::privileged(
        "without_probes_the_daemon_serves_and_says_why",
        headroom_testkit::gate::not_root(),
    ) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let socket = tmp.path().join("headroomd.sock");
    let mut child = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            HEADROOMD,
            "serve",
        ])
        .args(["--probes", "if-available", "--metrics-listen", ""])
        .args(["--allocatable-cpu", "2", "--allocatable-memory", "1Gi"])
        .arg("--socket")
        .arg(&socket)
        .arg("--intent-dir")
        .arg(tmp.path().join("intents"))
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !socket.exists() {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            panic!("headroomd exited without probes ({status}):\n{err}");
        }
        assert!(Instant::now() < deadline, "no socket within 20 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let served = async {
        let mut c = headroom_client::headroom_client(&socket).await?;
        c.get_headroom(pb::GetHeadroomRequest::default())
            .await
            .map(tonic::Response::into_inner)
            .map_err(anyhow::Error::from)
    }
    .await;
    // setpriv execs headroomd: the child's pid is the daemon's.
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::SIGTERM).unwrap();
    // Waited for off the runtime, so that the dropped client's connection closes meanwhile.
    let (status, err) = tokio::task::spawn_blocking(move || {
        let status = child.wait().unwrap();
        let mut err = String::new();
        child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        (status, err)
    })
    .await
    .unwrap();
    let snapshot = served.unwrap_or_else(|e| panic!("GetHeadroom failed: {e}\n{err}"));
    assert_eq!(snapshot.node.unwrap().cpu_millis.unwrap().allocatable, 2000);
    assert!(
        err.contains("serving without eBPF probes") && err.contains("needs root"),
        "the log says why there are no probes:\n{err}"
    );
    assert!(status.success(), "clean shutdown on SIGTERM: {status}\n{err}");
}
