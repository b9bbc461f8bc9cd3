//! What a `WatchHeadroom` subscriber that stops reading costs headroomd (issue 17, defect 6).
//!
//! The subscribers are raw HTTP/2 clients on the Unix socket that send one call with the largest
//! flow-control windows HTTP/2 allows (as grpc clients with BDP probing end up with) and then
//! never read: the worst case for the server's buffering. headroomd runs in this process, so a
//! counting allocator sees exactly the heap it holds for them; the kernel's socket buffers are not
//! in the figure (docs/reliability.md gives both).
#![allow(clippy::unwrap_used)]

mod api_common;

use std::{
    alloc::{GlobalAlloc, Layout, System},
    io::Write as _,
    os::unix::net::UnixStream,
    sync::atomic::{AtomicIsize, Ordering},
    time::{Duration, Instant},
};

use api_common::{cpu_files, key, pod_ref};
use headroom_node_model::Resources;
use headroom_proto::v1 as pb;
use headroom_testkit::headroomd::{HeadroomdSetup, InProcessHeadroomd};
use headroomd::pipeline::{CgroupOwner, PodEntry};
use prost::Message as _;

struct Counting;

/// The counted heap once the server has stopped moving bytes into its buffers: two readings
/// 200 ms apart within `tolerance` of each other, or whatever it is after 5 s (a loaded machine
/// writes slower).
async fn settled_heap(tolerance: isize) -> isize {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last = LIVE.load(Ordering::Relaxed);
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = LIVE.load(Ordering::Relaxed);
        if (now - last).abs() <= tolerance || Instant::now() > deadline {
            return now;
        }
        last = now;
    }
}

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const PODS: u32 = 1000;
const SUBSCRIBERS: usize = 16;
/// Snapshots published while the subscribers are stalled.
const ROUNDS: u64 = 40;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// HPACK "literal header field without indexing, new name", no Huffman (RFC 7541 §6.2.2).
fn header(block: &mut Vec<u8>, name: &str, value: &str) {
    block.push(0);
    block.push(name.len() as u8);
    block.extend_from_slice(name.as_bytes());
    block.push(value.len() as u8);
    block.extend_from_slice(value.as_bytes());
}

/// Opens one `WatchHeadroom(include_pods)` call with maximal windows and never reads.
fn stalled_subscriber(socket: &std::path::Path) -> UnixStream {
    let mut s = UnixStream::connect(socket).unwrap();
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    // SETTINGS_INITIAL_WINDOW_SIZE = 2^31 - 1, and the connection window raised to match.
    out.extend(frame(4, 0, 0, &[0, 4, 0x7f, 0xff, 0xff, 0xff]));
    out.extend(frame(8, 0, 0, &(0x7fff_ffffu32 - 65_535).to_be_bytes()));
    let mut block = Vec::new();
    header(&mut block, ":method", "POST");
    header(&mut block, ":scheme", "http");
    header(&mut block, ":path", "/headroom.v1.Headroom/WatchHeadroom");
    header(&mut block, ":authority", "localhost");
    header(&mut block, "content-type", "application/grpc");
    header(&mut block, "te", "trailers");
    out.extend(frame(1, 0x4, 1, &block));
    let request = pb::WatchHeadroomRequest {
        include_pods: true,
        ..Default::default()
    }
    .encode_to_vec();
    let mut message = vec![0];
    message.extend_from_slice(&(request.len() as u32).to_be_bytes());
    message.extend_from_slice(&request);
    out.extend(frame(0, 0x1, 1, &message));
    s.write_all(&out).unwrap();
    s
}

async fn next_version(d: &InProcessHeadroomd, after: u64, round: u64) -> u64 {
    let at = Instant::now();
    let batch = (0..PODS)
        .map(|n| cpu_files(u64::from(n) + 1000, at, 100 * (round + 1), round))
        .collect();
    d.pipeline().sender().send_batch(batch).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = d.reader.load().version;
        if v > after {
            return v;
        }
        assert!(Instant::now() < deadline, "no new snapshot after round {round}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_subscriber_holds_a_bounded_few_snapshots() {
    let d = InProcessHeadroomd::start(HeadroomdSetup {
        node_name: "test-node".into(),
        allocatable: Resources::new(1_000_000, 1 << 40),
        cgroups: (0..PODS)
            .map(|n| {
                let owner = CgroupOwner::Pod {
                    pod: pod_ref(n),
                    container: Some("app".into()),
                };
                (key(u64::from(n) + 1000), owner)
            })
            .collect(),
        pods: (0..PODS)
            .map(|n| PodEntry {
                pod: pod_ref(n),
                requests: Resources::new(100, 64 << 20),
                pending_resize: Resources::ZERO,
            })
            .collect(),
        socket: "headroomd.sock".into(),
        ..HeadroomdSetup::default()
    })
    .await;
    let mut version = next_version(&d, 0, 0).await;
    let snapshot_bytes = {
        let mut c = headroom_client::headroom_client(&d.socket).await.unwrap();
        let s = c
            .get_headroom(pb::GetHeadroomRequest { include_pods: true })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(s.pods.len(), PODS as usize);
        s.encoded_len() as isize
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = LIVE.load(Ordering::Relaxed);
    let subscribers: Vec<UnixStream> = (0..SUBSCRIBERS).map(|_| stalled_subscriber(&d.socket)).collect();
    let mut at_round_10 = 0;
    for round in 1..=ROUNDS {
        version = next_version(&d, version, round).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        if round == 10 {
            at_round_10 = settled_heap(snapshot_bytes / 4).await - before;
        }
    }
    let held = settled_heap(snapshot_bytes / 4).await - before;
    let per_subscriber = held / SUBSCRIBERS as isize;
    let ratio = per_subscriber as f64 / snapshot_bytes as f64;
    println!(
        "stalled subscriber: {per_subscriber} bytes of headroomd heap each after {ROUNDS} snapshots of {snapshot_bytes} bytes ({ratio:.1} snapshots; {PODS} Pods); after 10: {}",
        at_round_10 / SUBSCRIBERS as isize
    );
    assert_eq!(
        d.server().watchers(),
        SUBSCRIBERS,
        "every stalled subscriber is still open"
    );
    // What is held stops growing once HTTP/2's buffer is full: the 30 snapshots published since
    // the 10th add at most one per subscriber (a buffer not quite full at the 10th), where a
    // stream that queued every version would add 30.
    assert!(
        held - at_round_10 <= snapshot_bytes * SUBSCRIBERS as isize,
        "a stalled subscriber's cost grew from {} to {per_subscriber} bytes between snapshot 10 and {ROUNDS}",
        at_round_10 / SUBSCRIBERS as isize
    );
    // The bound docs/reliability.md states: h2's per-stream send buffer (400 KiB, hyper's
    // default) and a few encoded messages around it (the one h2 is writing, the one in hand),
    // each in an allocation up to twice its size. The old eager stream held 35 snapshots.
    let bound = 7 * snapshot_bytes + (400 << 10);
    assert!(
        per_subscriber <= bound,
        "a stalled subscriber holds {per_subscriber} bytes ({ratio:.1} snapshots), over the bound of {bound}"
    );
    drop(subscribers);
    d.shutdown().await;
}
