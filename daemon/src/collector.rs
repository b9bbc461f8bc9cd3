//! The probe and cgroupfs readers that feed the pipeline.
//!
//! One thread, one cycle per interval: drain the probes' ring buffer, read their per-cgroup
//! counters (sending only what changed), re-walk cgroupfs when cgroups came or went, and read
//! the files of every Pod cgroup. Sending never blocks: a full queue drops and counts.
use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use arc_swap::ArcSwap;
use headroom_common::{CgroupKey, CgroupStats, EventKind};
use tracing::{debug, info_span, warn};

use crate::{
    cgroups::{CgroupHost, CgroupIndex, files::read_cgroup_files},
    pipeline::{CgroupSample, PipelineInput, PipelineSender},
    probes::Probes,
};

/// Tuning of the collector.
#[derive(Clone, Debug)]
pub struct CollectorConfig {
    /// Time between cycles.
    pub interval: Duration,
    /// cgroupfs is walked again at least this often, even without mkdir/rmdir events (the
    /// probes may be absent, or an event may have been dropped).
    pub rewalk_every: Duration,
}

impl Default for CollectorConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_millis(100),
            rewalk_every: Duration::from_secs(10),
        }
    }
}

/// A running collector; stops and joins on drop.
pub struct Collector {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Collector {
    /// Starts the collector thread. `probes` may be `None` (not root, no BTF): cgroup files
    /// are still read, so the node model and cAdvisor-style figures keep working.
    pub fn spawn(
        probes: Option<Probes>,
        host: CgroupHost,
        index: Arc<ArcSwap<CgroupIndex>>,
        sender: PipelineSender,
        config: CollectorConfig,
    ) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let stop_flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("headroom-collector".into())
            .spawn(move || {
                let mut state = State {
                    probes,
                    host,
                    index,
                    sender,
                    last_sent: HashMap::new(),
                    dirty: true,
                };
                let mut last_walk = Instant::now();
                while !stop_flag.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    if last_walk.elapsed() >= config.rewalk_every {
                        state.dirty = true;
                    }
                    if state.dirty {
                        last_walk = Instant::now();
                    }
                    state.cycle();
                    std::thread::sleep(config.interval.saturating_sub(started.elapsed()));
                }
            })?;
        Ok(Self {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

struct State {
    probes: Option<Probes>,
    host: CgroupHost,
    index: Arc<ArcSwap<CgroupIndex>>,
    sender: PipelineSender,
    last_sent: HashMap<CgroupKey, CgroupStats>,
    dirty: bool,
}

impl State {
    fn cycle(&mut self) {
        let _span = info_span!("collect").entered();
        self.drain_events();
        if self.dirty {
            self.index
                .store(Arc::new(CgroupIndex::build(&self.host.hierarchies())));
            self.dirty = false;
        }
        self.send_probe_counters();
        self.send_cgroup_files();
    }

    fn drain_events(&mut self) {
        let Some(probes) = self.probes.as_mut() else {
            return;
        };
        let now = Instant::now();
        let sender = &self.sender;
        let mut dirty = false;
        let mut removed = Vec::new();
        let malformed = probes.drain_events(|event| {
            if event.kind == EventKind::CgroupMkdir as u32 || event.kind == EventKind::CgroupRmdir as u32 {
                dirty = true;
            }
            if event.kind == EventKind::CgroupRmdir as u32 {
                removed.push(event.cgroup);
            }
            let _ = sender.send(PipelineInput::Event(event, now));
        });
        if malformed > 0 {
            warn!(malformed, "skipped malformed probe events");
        }
        // A removed cgroup's counters are final: forget them here and in the kernel map, or
        // both grow with every Pod the node ever ran.
        for key in removed {
            probes.forget_cgroup(&key);
            self.last_sent.remove(&key);
        }
        self.dirty |= dirty;
    }

    fn send_probe_counters(&mut self) {
        let Some(probes) = self.probes.as_ref() else {
            return;
        };
        let stats = match probes.read_stats() {
            Ok(stats) => stats,
            Err(e) => {
                warn!("cannot read probe counters: {e}");
                return;
            }
        };
        let at = Instant::now();
        for (key, value) in stats {
            if self.last_sent.get(&key) == Some(&value) {
                continue;
            }
            if self
                .sender
                .send(PipelineInput::Sample(CgroupSample {
                    key,
                    stats: value,
                    at,
                }))
                .is_ok()
            {
                self.last_sent.insert(key, value);
            }
        }
    }

    fn send_cgroup_files(&self) {
        let index = self.index.load();
        let cpuacct_mount = PathBuf::from("/sys/fs/cgroup/cpuacct");
        for hierarchy in self.host.hierarchies() {
            let cpu = hierarchy.id == self.host.cpu.id;
            let memory = hierarchy.id == self.host.memory.id;
            for (key, info) in index
                .iter()
                .filter(|(k, i)| k.hierarchy_id == hierarchy.id && i.pod.is_some())
            {
                // v1 keeps CPU usage in the separate cpuacct hierarchy, at the same path.
                let cpuacct = (self.host.mode == headroom_common::CgroupMode::Legacy && cpu)
                    .then(|| cpuacct_mount.join(info.relative.trim_start_matches('/')))
                    .filter(|dir| dir.exists());
                let files =
                    read_cgroup_files(*key, &info.path, self.host.mode, cpu, memory, cpuacct.as_deref());
                if files.cpu.is_none() && files.memory.is_none() {
                    debug!(path = %info.path.display(), "cgroup vanished before its files were read");
                    continue;
                }
                let _ = self.sender.send(PipelineInput::CgroupFiles(files));
            }
        }
    }
}
