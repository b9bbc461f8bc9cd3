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

/// One writer per node: a second actuating headroomd on the same cgroup roots is refused at
/// start, naming the lock, while `--actuation off` observers run beside it, serve, answer
/// `ApplyResize` with `UNIMPLEMENTED`, and leave no intent directory behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observers_run_beside_the_one_actuating_daemon() {
    let test = "observers_run_beside_the_one_actuating_daemon";
    let _serial = SERIAL.lock().await;
    if !headroom_testkit::gate::privileged(test, headroom_testkit::gate::not_root()) {
        return;
    }
    // The roots are locked only where they exist.
    let roots = headroom_actuator::Roots::detect_standalone().unwrap();
    for root in roots.dirs().paths() {
        std::fs::create_dir_all(root).unwrap();
    }
    let tmp = tempfile::tempdir().unwrap();
    let serve = |name: &str, actuation: &str| {
        Command::new(HEADROOMD)
            .args([
                "serve",
                "--probes",
                "off",
                "--metrics-listen",
                "",
                "--actuation",
                actuation,
            ])
            .arg("--socket")
            .arg(tmp.path().join(format!("{name}.sock")))
            .arg("--intent-dir")
            .arg(tmp.path().join(format!("{name}-intents")))
            .stdout(Stdio::null())
            .stderr(if name == "second-writer" {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .spawn()
            .unwrap()
    };
    let _writer = Daemon(serve("writer", "on"));
    wait_for_socket(&tmp.path().join("writer.sock")).await;
    let observers = [
        Daemon(serve("observer-1", "off")),
        Daemon(serve("observer-2", "off")),
    ];
    // A Pod the observers know (by its cgroup), so the request gets as far as the actuator.
    let (uid, pod, container) = throttled_pod();
    let resize = headroom_proto::v1::ApplyResizeRequest {
        pod_uid: uid.clone(),
        containers: vec![headroom_proto::v1::ContainerResources {
            name: "app".into(),
            cpu_request_millis: Some(200),
            cpu_limit_millis: Some(200),
            ..Default::default()
        }],
        ..Default::default()
    };
    for name in ["observer-1", "observer-2"] {
        wait_for_socket(&tmp.path().join(format!("{name}.sock"))).await;
        let mut client = headroom_client(&tmp.path().join(format!("{name}.sock")))
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let e = loop {
            let e = client.apply_resize(resize.clone()).await.unwrap_err();
            // Until the collector has indexed the Pod's cgroup.
            if e.code() != tonic::Code::NotFound || Instant::now() > deadline {
                break e;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(e.code(), tonic::Code::Unimplemented, "{name}: {e:?}");
        assert_eq!(
            std::fs::read_to_string(container.path.join("cpu.cfs_quota_us"))
                .unwrap()
                .trim(),
            "10000",
            "{name} wrote the container's cgroup"
        );
        assert!(
            !tmp.path().join(format!("{name}-intents")).exists(),
            "{name} made an intent directory"
        );
    }

    let second = serve("second-writer", "on");
    let out = tokio::task::spawn_blocking(move || second.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a second actuating daemon started: {stderr}"
    );
    assert!(
        stderr.contains("in use by another headroom process"),
        "the refusal does not say why: {stderr}"
    );
    drop(observers);
    drop(container);
    drop(pod);
}

/// The room promised to in-flight resizes outlives a crash of headroomd: a daemon SIGKILLed
/// with two reservations comes back holding the one still live (with its expiry) and not the
/// one that expired while it was down, and refuses what no longer fits beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reservations_outlive_a_headroomd_crash() {
    use headroom_proto::v1::{ReleaseRequest, ReserveRequest, ResourceAmount};
    let test = "reservations_outlive_a_headroomd_crash";
    let _serial = SERIAL.lock().await;
    if !headroom_testkit::gate::privileged(test, headroom_testkit::gate::not_root()) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let socket = tmp.path().join("headroomd.sock");
    let intents = tmp.path().join("intents");
    let start = || {
        Daemon(
            Command::new(HEADROOMD)
                .args(["serve", "--probes", "off", "--metrics-listen", ""])
                .args(["--allocatable-cpu", "4", "--allocatable-memory", "8Gi"])
                .arg("--socket")
                .arg(&socket)
                .arg("--intent-dir")
                .arg(&intents)
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        )
    };
    let cpu = |millis: i64| ResourceAmount {
        cpu_millis: Some(millis),
        ..Default::default()
    };
    let reserve = |id: &str, millis: i64, ttl_seconds: u32| ReserveRequest {
        reservation_id: id.into(),
        pod: String::new(),
        amount: Some(cpu(millis)),
        ttl_seconds,
        releasing_pod_uids: Vec::new(),
    };
    // A Pod the node knows (by its cgroup), for the reservations to be for.
    let (uid, pod, container) = throttled_pod();

    let mut first = start();
    wait_for_socket(&socket).await;
    let mut client = headroom_client(&socket).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match client
            .reserve(ReserveRequest {
                pod: uid.clone(),
                ..reserve("keep", 1500, 300)
            })
            .await
        {
            Ok(_) => break,
            // Until the collector has indexed the Pod's cgroup.
            Err(e) if e.code() == tonic::Code::NotFound && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("reserve: {e:?}"),
        }
    }
    let brief_made = Instant::now();
    client
        .reserve(ReserveRequest {
            pod: uid.clone(),
            ..reserve("brief", 500, 1)
        })
        .await
        .unwrap();
    first.0.kill().unwrap();
    first.0.wait().unwrap();
    drop(client);
    tokio::time::sleep(Duration::from_millis(1200).saturating_sub(brief_made.elapsed())).await;

    let _second = start();
    wait_for_socket(&socket).await;
    let mut client = headroom_client(&socket).await.unwrap();
    let snapshot = client
        .get_headroom(GetHeadroomRequest::default())
        .await
        .unwrap()
        .into_inner();
    let ids: Vec<&str> = snapshot.reservations.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["keep"], "the restarted daemon holds {ids:?}");
    let keep = &snapshot.reservations[0];
    assert_eq!((keep.pod.as_str(), keep.cpu_millis), (uid.as_str(), 1500));
    let left = keep.expires_at.unwrap().seconds
        - std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
    assert!(
        (290..=300).contains(&left),
        "expires in {left} s, not about 300 s"
    );
    let figures = snapshot.node.unwrap().cpu_millis.unwrap();
    assert_eq!((figures.reserved, figures.headroom), (1500, 2500));
    // The room it holds is not promised again.
    let e = client
        .reserve(ReserveRequest {
            pod: uid.clone(),
            ..reserve("more", 3000, 60)
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e:?}");
    client
        .release(ReleaseRequest {
            reservation_id: "keep".into(),
        })
        .await
        .unwrap();
    // Released: what a restart reads back is an empty ledger.
    let file = headroomd::pipeline::reservations_file::ReservationsFile::new(
        intents.join(headroomd::pipeline::reservations_file::RESERVATIONS_FILE),
    );
    let mut back = headroom_node_model::ReservationLedger::new();
    let restored = file
        .load(&mut back, std::time::Instant::now(), std::time::SystemTime::now())
        .unwrap();
    assert_eq!(
        (restored.kept, back.len()),
        (0, 0),
        "the released reservation is still on disk"
    );
    drop(container);
    drop(pod);
}
