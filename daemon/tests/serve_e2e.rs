//! headroomd as it runs on a node: the real binary with the probes loaded, a throttled
//! workload in a Pod-shaped cgroup, and a `WatchHeadroom` subscriber that must see that Pod's
//! throttling rise within one second of the workload starting.
#![allow(clippy::unwrap_used)]

mod support;

use std::{
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use headroom_client::headroom_client;
use headroom_proto::v1::{GetHeadroomRequest, WatchHeadroomRequest};
use support::{TestCgroup, skip_reason, spawn_in, stop};

const HEADROOMD: &str = env!("CARGO_BIN_EXE_headroomd");

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.0.id() as i32),
            nix::sys::signal::SIGTERM,
        );
        let _ = self.0.wait();
    }
}

async fn wait_for_socket(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(mut client) = headroom_client(path).await
            && client.get_headroom(GetHeadroomRequest::default()).await.is_ok()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("headroomd did not start serving on {}", path.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_headroom_sees_a_pod_throttle_within_one_second() {
    // One test in this binary, and cargo runs test binaries one after another: no lock needed.
    if skip_reason("watch_headroom_sees_a_pod_throttle").is_some() {
        return;
    }
    if !headroom_testkit::gate::privileged(
        "watch_headroom_sees_a_pod_throttle",
        headroom_testkit::gate::no_probes(support::PROBE_OBJECT),
    ) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let socket = tmp.path().join("headroomd.sock");
    let daemon = Daemon(
        Command::new(HEADROOMD)
            .args(["serve", "--probes", "required", "--metrics-listen", ""])
            .arg("--socket")
            .arg(&socket)
            .arg("--intent-dir")
            .arg(tmp.path().join("intents"))
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for_socket(&socket).await;

    // A Pod in headroom's standalone layout, with a unique uid; 10% CPU quota.
    let uid = format!(
        "{:08x}-0000-4000-8000-{:012x}",
        std::process::id(),
        Instant::now().elapsed().as_nanos() as u64 & 0xffff_ffff_ffff
    );
    let root = Path::new("/sys/fs/cgroup/cpu/headroom");
    std::fs::create_dir_all(root).unwrap();
    let pod = TestCgroup {
        path: root.join(format!("pod{uid}")),
    };
    std::fs::create_dir(&pod.path).unwrap();
    let container = TestCgroup {
        path: pod.path.join("app"),
    };
    std::fs::create_dir(&container.path).unwrap();
    container.write("cpu.cfs_quota_us", "10000");

    let mut client = headroom_client(&socket).await.unwrap();
    let mut stream = client
        .watch_headroom(WatchHeadroomRequest {
            include_pods: true,
            min_interval_ms: 0,
        })
        .await
        .unwrap()
        .into_inner();
    // Let the collector index the new cgroups before the clock starts.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let busy = spawn_in(&[&container], "sh -c 'while :; do :; done'");
    let mut seen = None;
    while started.elapsed() < Duration::from_secs(3) {
        let Ok(Some(snapshot)) = tokio::time::timeout(Duration::from_secs(3), stream.message())
            .await
            .unwrap()
        else {
            break;
        };
        let throttled = snapshot
            .pods
            .iter()
            .filter(|p| p.pod.as_ref().is_some_and(|r| r.uid == uid))
            .any(|p| {
                p.containers.iter().any(|c| {
                    c.pressure.as_ref().is_some_and(|pr| {
                        pr.cpu_throttled_ratio
                            .as_ref()
                            .is_some_and(|f| f.value > 0.5 && !f.stale)
                    })
                })
            });
        if throttled {
            seen = Some(started.elapsed());
            break;
        }
    }
    stop(busy);
    drop(container);
    drop(pod);
    drop(daemon);
    let seen = seen.expect("the subscriber never saw the Pod's throttling rise");
    eprintln!("throttling visible to the WatchHeadroom subscriber after {seen:?}");
    assert!(
        seen <= Duration::from_secs(1),
        "throttling became visible only after {seen:?}"
    );
}
