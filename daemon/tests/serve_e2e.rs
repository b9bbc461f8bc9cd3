//! headroomd as it runs on a node: the real binary with the probes loaded, a throttled
//! workload in a Pod-shaped cgroup, and a `WatchHeadroom` subscriber that must see that Pod's
//! throttling rise within one second of the workload starting, and its throttle episodes'
//! kernel events (stamped on CLOCK_BOOTTIME) with `--kernel-events push` and `poll` alike.
#![allow(clippy::unwrap_used)]

mod support;

use std::{
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use headroom_client::headroom_client;
use headroom_proto::v1::{GetHeadroomRequest, KernelEventKind, WatchHeadroomRequest};
use support::{TestCgroup, skip_reason, spawn_in, stop};

const HEADROOMD: &str = env!("CARGO_BIN_EXE_headroomd");

use headroom_testkit::process::TerminatedOnDrop as Daemon;

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

/// One headroomd (and one throttled workload) at a time: they share the CPUs and the probes.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A Pod in headroom's standalone layout with a unique uid, its container limited to 10% CPU:
/// the uid, the Pod's cgroup and the container's (removed on drop, container first).
fn throttled_pod() -> (String, TestCgroup, TestCgroup) {
    let uid = format!(
        "{:08x}-0000-4000-8000-{:012x}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            & 0xffff_ffff_ffff
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
    (uid, pod, container)
}

fn start_headroomd(dir: &Path, kernel_events: &str) -> Daemon {
    Daemon(
        Command::new(HEADROOMD)
            .args(["serve", "--probes", "required", "--metrics-listen", ""])
            .args(["--kernel-events", kernel_events])
            .arg("--socket")
            .arg(dir.join("headroomd.sock"))
            .arg("--intent-dir")
            .arg(dir.join("intents"))
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// The Pod's first throttle episode reaches a `WatchHeadroom` subscriber as a kernel event named
/// with its Pod, stamped by the kernel on CLOCK_BOOTTIME: not after the subscriber received it,
/// and within the same second (push: milliseconds; poll: at the next 100 ms cycle).
async fn throttle_begin_reaches_the_subscriber(test: &str, kernel_events: &str) {
    let _serial = SERIAL.lock().await;
    if skip_reason(test).is_some() {
        return;
    }
    if !headroom_testkit::gate::privileged(test, headroom_testkit::gate::no_probes(support::PROBE_OBJECT)) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let daemon = start_headroomd(tmp.path(), kernel_events);
    let socket = tmp.path().join("headroomd.sock");
    wait_for_socket(&socket).await;
    let (uid, pod, container) = throttled_pod();
    let mut client = headroom_client(&socket).await.unwrap();
    let mut stream = client
        .watch_headroom(WatchHeadroomRequest {
            include_pods: false,
            min_interval_ms: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let busy = spawn_in(&[&container], "sh -c 'while :; do :; done'");
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while seen.len() < 5 && Instant::now() < deadline {
        let Ok(Some(snapshot)) = tokio::time::timeout(Duration::from_secs(3), stream.message())
            .await
            .unwrap()
        else {
            break;
        };
        let received = headroomd::probes::boottime_ns();
        for e in snapshot.kernel_events {
            if e.pod_uid == uid
                && e.container == "app"
                && e.kind == KernelEventKind::ThrottleBegin as i32
                && !seen.iter().any(|(s, _, _)| *s == e.sequence)
            {
                seen.push((e.sequence, e.boottime_ns, received));
            }
        }
    }
    stop(busy);
    drop(container);
    drop(pod);
    drop(daemon);
    assert!(
        !seen.is_empty(),
        "{test}: no throttle-begin event of Pod {uid} reached the subscriber"
    );
    for &(sequence, stamp, received) in &seen {
        eprintln!(
            "{test}: event {sequence} received {:.3} ms after the kernel stamped it",
            received.saturating_sub(stamp) as f64 / 1e6
        );
        assert!(stamp <= received, "stamped {stamp} after its receipt {received}");
        assert!(
            received - stamp < 1_000_000_000,
            "stamped {stamp}, received {received}: not within a second"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushed_throttle_begin_reaches_a_subscriber_stamped_on_boottime() {
    throttle_begin_reaches_the_subscriber("pushed_throttle_begin", "push").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polled_throttle_begin_still_reaches_a_subscriber() {
    throttle_begin_reaches_the_subscriber("polled_throttle_begin", "poll").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_headroom_sees_a_pod_throttle_within_one_second() {
    let _serial = SERIAL.lock().await;
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
    let daemon = start_headroomd(tmp.path(), "push");
    wait_for_socket(&socket).await;
    let (uid, pod, container) = throttled_pod();

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
