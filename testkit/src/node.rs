//! One real node beside a [`ControlPlane`]: containerd v2 with runc and the CNI bridge, a local
//! OCI registry (crane's) that containerd uses as its mirror, and the kubelet v1.37.2.
//!
//! The node is this host, not a guest: a TCG guest with `-smp 8` runs the kubelet and
//! containerd an order of magnitude slower than the host (see `real-kernels-in-vms`), and every
//! timing this node exists for would measure the emulator. The host is cgroup v1 hybrid, so the
//! kubelet runs with `failCgroupV1: false`; a pure cgroup v2 node is left to the kernel matrix.
//! Everything listens on 127.0.0.1 or a Unix socket; Pods get addresses on a bridge of their
//! own (`hr-cni0`, 10.244.77.0/24), reachable from this host only.
//!
//! Dropping the [`Node`] removes every Pod through the CRI (`crictl rmp`), stops the programs,
//! unmounts what they mounted, removes the `kubepods` cgroups and the bridge, and puts back the
//! kernel settings the kubelet and the bridge plugin changed.
use std::{
    fs,
    net::Ipv4Addr,
    os::unix::ffi::OsStrExt,
    path::{Path, PathBuf},
    process::Command,
    thread,
    time::{Duration, Instant},
};

use thiserror::Error;

use crate::{
    ControlPlane,
    control_plane::{Credentials, RESIZE_PREEMPTION_GATE, write_kubeconfig},
    images, pki,
    supervisor::{self, Supervisor},
};

pub use crate::pki::NODE_NAME;

/// The containerd release the node runs (also pinned in `k8s/node/go.mod`).
pub const CONTAINERD_VERSION: &str = "v2.4.2";

/// The bridge the CNI plugin makes for the node's Pods.
pub const BRIDGE: &str = "hr-cni0";
const POD_SUBNET: &str = "10.244.77.0/24";
/// The host's address on [`BRIDGE`] (the subnet's gateway, never given to a Pod).
pub const POD_GATEWAY: Ipv4Addr = Ipv4Addr::new(10, 244, 77, 1);

/// Programs of `cargo xtask build-node` (`target/node/<containerd version>/`).
const NODE_PROGRAMS: &[&str] = &[
    "containerd",
    "containerd-shim-runc-v2",
    "runc",
    "ctr",
    "crictl",
    "crane",
    "bridge",
    "host-local",
    "loopback",
];

/// Kernel settings the kubelet (`protectKernelDefaults: false`) and the bridge plugin change on
/// the host; put back when the node is dropped.
const TOUCHED_SYSCTLS: &[&str] = &[
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    "net/ipv4/ip_forward",
];

#[derive(Debug, Error)]
pub enum NodeError {
    #[error("{what} is not at {path}: {how}")]
    Missing {
        what: String,
        path: PathBuf,
        how: String,
    },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} failed ({status}):\n{stderr}")]
    Command {
        what: String,
        status: String,
        stderr: String,
    },
    #[error(
        "{component} did not become ready within {waited:?} ({waiting_for}); last lines of its log:\n{log_tail}"
    )]
    NotReady {
        component: String,
        waiting_for: String,
        waited: Duration,
        log_tail: String,
    },
    #[error("{component} exited ({status}); last lines of its log:\n{log_tail}")]
    Exited {
        component: String,
        status: String,
        log_tail: String,
    },
    #[error("the node needs root (containerd, the kubelet and cgroupfs)")]
    NotRoot,
}

#[derive(Clone, Debug)]
pub struct NodeOptions {
    /// The kubelet's `InPlacePodVerticalScalingSchedulerPreemption` (with it on, the kubelet
    /// leaves a critical Pod's Deferred resize to the scheduler instead of preempting itself).
    pub resize_preemption_gate: bool,
    /// How long each program may take to become ready.
    pub start_timeout: Duration,
}

impl Default for NodeOptions {
    fn default() -> Self {
        NodeOptions {
            resize_preemption_gate: false,
            start_timeout: Duration::from_secs(120),
        }
    }
}

/// A running node. See the module documentation.
pub struct Node {
    kubectl: PathBuf,
    admin_kubeconfig: PathBuf,
    node_bin: PathBuf,
    kubelet_bin: PathBuf,
    // Dropped before the folder: the programs stop before their data goes.
    programs: Supervisor,
    dir: tempfile::TempDir,
    registry: String,
    start_timeout: Duration,
    sysctls: Vec<(PathBuf, String)>,
    kubelet_healthz_port: u16,
    /// Set by [`start_cluster`]: the bridge it made before the control plane.
    bridge: Option<PodBridge>,
    /// Whether this node mounted bpffs (then it unmounts it when dropped).
    mounted_bpffs: bool,
}

/// Where systemd mounts bpffs on every distribution's node.
const BPFFS: &str = "/sys/fs/bpf";

/// Whether `path` is a mount point (in this mount namespace).
fn is_mount_point(path: &str) -> bool {
    fs::read_to_string("/proc/self/mountinfo")
        .is_ok_and(|info| info.lines().any(|line| line.split(' ').nth(4) == Some(path)))
}

/// The Pods' bridge made ahead of the CNI plugin (which adopts an existing bridge and its
/// gateway address), so that kube-apiserver can listen on [`POD_GATEWAY`] before the first Pod
/// exists: this node has no kube-proxy, and its Pods (headroom's DaemonSet) reach the API server
/// there, as on a kube-proxy-less node. Removed when dropped.
pub struct PodBridge(());

impl PodBridge {
    pub fn create() -> Result<PodBridge, NodeError> {
        // A bridge left by a killed run would refuse the address.
        delete_bridge();
        let bridge = PodBridge(());
        let gateway = format!("{POD_GATEWAY}/24");
        for args in [
            &["link", "add", BRIDGE, "type", "bridge"][..],
            &["addr", "add", &gateway, "dev", BRIDGE],
            &["link", "set", BRIDGE, "up"],
        ] {
            images::run(Command::new("ip").args(args), &format!("ip {}", args.join(" ")))?;
        }
        Ok(bridge)
    }
}

impl Drop for PodBridge {
    fn drop(&mut self) {
        delete_bridge();
    }
}

fn delete_bridge() {
    let _ = Command::new("ip").args(["link", "delete", BRIDGE]).output();
}

impl Node {
    /// Starts the registry (with the busybox images pushed), containerd and the kubelet, and
    /// waits until the Node is Ready and untainted.
    pub fn start(plane: &ControlPlane, options: NodeOptions) -> Result<Node, NodeError> {
        start_with_bins(plane, &bin_dir(), options)
    }

    /// `127.0.0.1:PORT`: the registry containerd pulls every image from.
    pub fn registry(&self) -> &str {
        &self.registry
    }

    /// containerd's CRI socket.
    pub fn containerd_socket(&self) -> PathBuf {
        self.dir.path().join("containerd/containerd.sock")
    }

    /// The kubelet's root directory.
    pub fn kubelet_dir(&self) -> PathBuf {
        self.dir.path().join("kubelet")
    }

    /// A scratch folder that lives as long as the node.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The last lines of `registry`, `containerd` or `kubelet`'s log.
    pub fn log_tail(&self, program: &str, lines: usize) -> String {
        self.programs.log_tail(program, lines)
    }

    /// The Pod-level cgroups (`kubepods/…/pod<uid>`) in every hierarchy now: what the kubelet
    /// has not (yet) removed.
    pub fn pod_cgroups(&self) -> Vec<PathBuf> {
        fn pods_under(dir: &Path, found: &mut Vec<PathBuf>) {
            for child in fs::read_dir(dir).into_iter().flatten().flatten() {
                let path = child.path();
                if !child.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                if child.file_name().to_string_lossy().starts_with("pod") {
                    found.push(path);
                } else {
                    pods_under(&path, found);
                }
            }
        }
        let mut found = Vec::new();
        for root in kubepods_roots() {
            pods_under(&root, &mut found);
        }
        found
    }

    /// `crictl` against this node's containerd.
    pub fn crictl(&self) -> Command {
        let mut cmd = Command::new(self.node_bin.join("crictl"));
        cmd.arg("--runtime-endpoint")
            .arg(format!("unix://{}", self.containerd_socket().display()))
            .arg("--timeout=20s");
        cmd
    }

    /// Pushes `layer` (a tarball of a root filesystem) to the node's registry as another image.
    pub fn push_image(&self, layer: &Path, spec: &images::ImageSpec<'_>) -> Result<(), NodeError> {
        images::push(&self.node_bin.join("crane"), &self.registry, layer, spec)
    }

    /// Stops the kubelet: SIGKILL, as a crash ends it, or SIGTERM. Its Pods keep running.
    pub fn stop_kubelet(&mut self, crash: bool) {
        if crash {
            self.programs.kill("kubelet");
        } else {
            self.programs.stop("kubelet");
        }
    }

    /// Stops containerd; its shims, and so the containers, keep running.
    pub fn stop_containerd(&mut self) {
        self.programs.stop("containerd");
    }

    /// Starts the kubelet (again) on the node's state and waits until it answers its health
    /// check and the Node is Ready without taints.
    pub fn start_kubelet(&mut self) -> Result<(), NodeError> {
        let dir = self.kubelet_dir();
        let mut cmd = Command::new(&self.kubelet_bin);
        cmd.arg(format!("--config={}", dir.join("config.json").display()))
            .arg(format!("--kubeconfig={}", dir.join("kubeconfig").display()))
            .arg(format!("--root-dir={}", dir.display()))
            .arg(format!("--cert-dir={}", dir.join("pki").display()))
            .arg(format!("--hostname-override={NODE_NAME}"))
            .arg("--v=2")
            .env("PATH", self.path_env());
        self.spawn("kubelet", &mut cmd)?;
        // A restarted kubelet finds its Node still Ready: its own health check says it is back.
        let healthz = format!("127.0.0.1:{}", self.kubelet_healthz_port);
        self.wait_until(
            "kubelet",
            "its /healthz and the Node Ready without taints",
            |node| http_ok(&healthz, "/healthz") && node.ready_and_untainted(),
        )
    }

    /// Starts containerd (again) on the node's state and waits until it answers the CRI.
    pub fn start_containerd(&mut self) -> Result<(), NodeError> {
        let config = self.dir.path().join("containerd/config.toml");
        let mut cmd = Command::new(self.node_bin.join("containerd"));
        cmd.arg("--config").arg(&config).env("PATH", self.path_env());
        self.spawn("containerd", &mut cmd)?;
        self.wait_until("containerd", "`crictl info` to answer", |node| {
            node.crictl()
                .arg("info")
                .output()
                .is_ok_and(|out| out.status.success())
        })
    }

    /// bpffs at /sys/fs/bpf with shared propagation, as systemd leaves every node: a Pod that
    /// mounts it `HostToContainer` (headroom's DaemonSet does) is refused by containerd when the
    /// host's mount is private ("is mounted on /sys but it is not a shared or slave mount"), and
    /// this machine boots without systemd, /sys private and no bpffs.
    fn mount_bpffs(&mut self) -> Result<(), NodeError> {
        use nix::mount::{MsFlags, mount};
        let failed = |what: &str, e: nix::errno::Errno| NodeError::Io {
            what: format!("{what} {BPFFS}"),
            source: std::io::Error::from(e),
        };
        if !is_mount_point(BPFFS) {
            mount(
                Some("bpf"),
                BPFFS,
                Some("bpf"),
                MsFlags::empty(),
                Some("mode=0700"),
            )
            .map_err(|e| failed("mount bpffs on", e))?;
            self.mounted_bpffs = true;
        }
        mount(
            None::<&str>,
            BPFFS,
            None::<&str>,
            MsFlags::MS_SHARED,
            None::<&str>,
        )
        .map_err(|e| failed("make shared", e))
    }

    fn start_registry(&mut self) -> Result<(), NodeError> {
        let port = free_port()?;
        let storage = self.dir.path().join("registry");
        fs::create_dir_all(&storage).map_err(io("create the registry's folder"))?;
        let mut cmd = images::registry_serve(
            &self.node_bin.join("crane"),
            &format!("127.0.0.1:{port}"),
            &storage,
        );
        self.spawn("registry", &mut cmd)?;
        self.registry = format!("127.0.0.1:{port}");
        let address = self.registry.clone();
        self.wait_until("registry", "its /v2/ to answer", |_| {
            std::net::TcpStream::connect(&address).is_ok()
        })?;
        let layers = self.dir.path().join("images");
        fs::create_dir_all(&layers).map_err(io("create images"))?;
        let layer = images::busybox_layer(&layers)?;
        for spec in [&images::NGINX, &images::PAUSE, &images::BUSYBOX_IMAGE] {
            self.push_image(&layer, spec)?;
        }
        Ok(())
    }

    fn write_containerd_config(&self) -> Result<PathBuf, NodeError> {
        let dir = self.dir.path().join("containerd");
        let hosts = dir.join("certs.d");
        // Every registry an unmodified manifest names resolves through the local one.
        for upstream in ["docker.io", "registry.k8s.io", "example.invalid"] {
            let host_dir = hosts.join(upstream);
            fs::create_dir_all(&host_dir).map_err(io("create certs.d"))?;
            let server = if upstream == "docker.io" {
                "https://registry-1.docker.io".to_string()
            } else {
                format!("https://{upstream}")
            };
            fs::write(
                host_dir.join("hosts.toml"),
                format!(
                    "server = \"{server}\"\n\n[host.\"http://{}\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
                    self.registry
                ),
            )
            .map_err(io("write hosts.toml"))?;
        }
        let cni_conf = self.dir.path().join("cni/net.d");
        fs::create_dir_all(&cni_conf).map_err(io("create cni/net.d"))?;
        let conflist = serde_json::json!({
            "cniVersion": "1.0.0",
            "name": "headroom",
            "plugins": [{
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": true,
                "ipMasq": false,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_SUBNET}]],
                    "dataDir": self.dir.path().join("cni/ipam"),
                },
            }],
        });
        fs::write(cni_conf.join("10-headroom.conflist"), conflist.to_string())
            .map_err(io("write the CNI conflist"))?;
        let path = |p: &Path| p.display().to_string();
        let config = format!(
            r#"version = 4
root = "{root}"
state = "{state}"
imports = []

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = "{pause}"
    [plugins.'io.containerd.cri.v1.images'.registry]
      config_path = "{hosts}"

  [plugins.'io.containerd.cri.v1.runtime']
    enable_selinux = false
    # Lowering a process's oom_score_adj (the kubelet asks -998 for sandboxes, -997 for
    # Guaranteed containers) needs CAP_SYS_RESOURCE, which this machine's root lacks.
    restrict_oom_score_adj = {restrict_oom}
    netns_mounts_under_state_dir = true
    cdi_spec_dirs = []
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = "{runc}"
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["{cni_bin}"]
      conf_dir = "{cni_conf}"

  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"

  # NRI's socket is a fixed host path (/var/run/nri): nothing here uses it.
  [plugins.'io.containerd.nri.v1.nri']
    disable = true

  [plugins.'io.containerd.internal.v1.opt']
    path = "{opt}"

  [plugins.'io.containerd.server.v1.grpc']
    address = "{socket}"

  [plugins.'io.containerd.server.v1.ttrpc']
    address = "{socket}.ttrpc"
"#,
            root = path(&dir.join("root")),
            state = path(&dir.join("state")),
            socket = path(&dir.join("containerd.sock")),
            pause = images::PAUSE_IMAGE,
            hosts = path(&hosts),
            runc = path(&self.node_bin.join("runc")),
            cni_bin = path(&self.node_bin),
            cni_conf = path(&cni_conf),
            opt = path(&dir.join("opt")),
            restrict_oom = !has_capability(CAP_SYS_RESOURCE),
        );
        let file = dir.join("config.toml");
        fs::write(&file, config).map_err(io("write containerd's config"))?;
        Ok(file)
    }

    fn write_kubelet_config(&mut self, plane: &ControlPlane, options: &NodeOptions) -> Result<(), NodeError> {
        let dir = self.kubelet_dir();
        fs::create_dir_all(&dir).map_err(io("create the kubelet's folder"))?;
        write_kubeconfig(
            &dir.join("kubeconfig"),
            plane.server(),
            &plane.dir().join(pki::CA_CERT),
            Credentials::Certificate {
                cert: plane.dir().join(pki::KUBELET_CERT),
                key: plane.dir().join(pki::KUBELET_KEY),
            },
        )
        .map_err(|e| NodeError::Io {
            what: "write the kubelet's kubeconfig".to_string(),
            source: std::io::Error::other(e.to_string()),
        })?;
        self.kubelet_healthz_port = free_port()?;
        let config = serde_json::json!({
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": "127.0.0.1",
            "port": free_port()?,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": self.kubelet_healthz_port,
            "authentication": {
                "anonymous": {"enabled": false},
                "webhook": {"enabled": true},
                "x509": {"clientCAFile": plane.dir().join(pki::CA_CERT)},
            },
            "authorization": {"mode": "Webhook"},
            // This host is cgroup v1 hybrid (see the module documentation).
            "failCgroupV1": false,
            "cgroupDriver": "cgroupfs",
            "failSwapOn": false,
            "containerRuntimeEndpoint": format!("unix://{}", self.containerd_socket().display()),
            "podLogsDir": self.dir.path().join("pod-logs"),
            "clusterDomain": "cluster.local",
            "featureGates": {RESIZE_PREEMPTION_GATE: options.resize_preemption_gate},
            // The host's disk is shared with the build and with other machines: in one CI run the
            // kubelet's eviction manager reclaimed ephemeral-storage under the old 1 % thresholds,
            // the node was tainted with disk pressure and nothing scheduled. "0%" is the kubelet's own way to turn a signal off
            // (eviction/helpers.go); with mergeDefaultEvictionSettings false (its default) the
            // signals not named stay off too. A really full disk still fails the test, loudly
            // (ENOSPC), rather than as a Pod left Pending.
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "0%",
                "imagefs.available": "0%",
                "nodefs.inodesFree": "0%",
                "imagefs.inodesFree": "0%",
            },
            "imageGCHighThresholdPercent": 100,
            "nodeStatusUpdateFrequency": "4s",
            "serializeImagePulls": false,
        });
        fs::write(dir.join("config.json"), config.to_string()).map_err(io("write the kubelet's config"))
    }

    fn ready_and_untainted(&self) -> bool {
        let out = Command::new(&self.kubectl)
            .arg("--kubeconfig")
            .arg(&self.admin_kubeconfig)
            .args([
                "get",
                "node",
                NODE_NAME,
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}/{.spec.taints}",
            ])
            .output();
        out.is_ok_and(|out| out.status.success() && out.stdout == b"True/")
    }

    fn path_env(&self) -> std::ffi::OsString {
        let mut path = self.node_bin.clone().into_os_string();
        path.push(":");
        path.push(std::env::var_os("PATH").unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into()));
        path
    }

    fn spawn(&mut self, name: &str, cmd: &mut Command) -> Result<(), NodeError> {
        self.programs.spawn(name, cmd).map_err(|source| NodeError::Io {
            what: format!("start {name}"),
            source,
        })
    }

    fn wait_until(
        &mut self,
        name: &str,
        waiting_for: &str,
        mut ready: impl FnMut(&Node) -> bool,
    ) -> Result<(), NodeError> {
        let deadline = Instant::now() + self.start_timeout;
        loop {
            if let Some(exited) = self.programs.exited() {
                return Err(NodeError::Exited {
                    component: exited.name,
                    status: exited.status,
                    log_tail: exited.log_tail,
                });
            }
            if ready(self) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(NodeError::NotReady {
                    component: name.to_string(),
                    waiting_for: waiting_for.to_string(),
                    waited: self.start_timeout,
                    log_tail: self.programs.log_tail(name, 30),
                });
            }
            thread::sleep(Duration::from_millis(200));
        }
    }

    /// Every Pod sandbox removed through the CRI (containers stopped, CNI torn down), while
    /// containerd still runs.
    fn remove_pods(&self) {
        if self.programs.is_running("containerd") {
            let _ = self.crictl().args(["rmp", "--all", "--force"]).output();
        }
    }

    /// containerd's shims outlive it by design; whatever of ours is left is killed.
    fn kill_leftover_shims(&self) {
        let marker = self.dir.path().as_os_str().as_bytes();
        let Ok(entries) = fs::read_dir("/proc") else {
            return;
        };
        for entry in entries.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            let Ok(cmdline) = fs::read(entry.path().join("cmdline")) else {
                continue;
            };
            if contains(&cmdline, b"containerd-shim") && contains(&cmdline, marker) {
                kill(pid);
            }
        }
    }
}

/// Whether `GET path` on `address` answers 200 (the kubelet's plain-HTTP health check).
fn http_ok(address: &str, path: &str) -> bool {
    use std::io::{Read as _, Write as _};
    let Ok(mut stream) = std::net::TcpStream::connect(address) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if write!(stream, "GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").is_err() {
        return false;
    }
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply);
    reply.starts_with("HTTP/1.0 200") || reply.starts_with("HTTP/1.1 200")
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

fn kill(pid: i32) {
    // SAFETY: kill(2) has no memory effects; at worst the pid names a process that just exited.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // The kubelet first, so it does not restart what is being removed.
        self.programs.stop("kubelet");
        self.remove_pods();
        self.programs.stop_all();
        self.kill_leftover_shims();
        unmount_under(self.dir.path());
        remove_kubepods_cgroups();
        delete_bridge();
        if self.mounted_bpffs {
            let _ = nix::mount::umount2(BPFFS, nix::mount::MntFlags::MNT_DETACH);
        }
        remove_container_log_links(self.dir.path());
        for (path, value) in &self.sysctls {
            let _ = fs::write(path, value);
        }
    }
}

#[derive(Debug, Error)]
pub enum ClusterError {
    #[error("the control plane: {0}")]
    ControlPlane(#[from] crate::ControlPlaneError),
    #[error("the node: {0}")]
    Node(#[from] NodeError),
}

/// A one-node cluster: the control plane with kube-scheduler and the controllers a node needs,
/// and a [`Node`] beside it; `resize_preemption` is the gate of both the scheduler and the
/// kubelet (on: upstream preempts; off: headroom-shim's job).
pub fn start_cluster(resize_preemption: bool) -> Result<(ControlPlane, Node), ClusterError> {
    let bridge = PodBridge::create()?;
    let plane = ControlPlane::start(crate::ControlPlaneOptions {
        apiserver_address: POD_GATEWAY,
        scheduler: Some(if resize_preemption {
            crate::SchedulerGate::On
        } else {
            crate::SchedulerGate::Off
        }),
        node_controllers: true,
        ..crate::ControlPlaneOptions::default()
    })?;
    let mut node = Node::start(
        &plane,
        NodeOptions {
            resize_preemption_gate: resize_preemption,
            ..NodeOptions::default()
        },
    )?;
    node.bridge = Some(bridge);
    Ok((plane, node))
}

/// [`Node::start`] with the node's programs taken from `node_bin` (the kubelet from the
/// control plane's folder).
pub fn start_with_bins(
    plane: &ControlPlane,
    node_bin: &Path,
    options: NodeOptions,
) -> Result<Node, NodeError> {
    // SAFETY: geteuid(2) has no side effects.
    if unsafe { libc::geteuid() } != 0 {
        return Err(NodeError::NotRoot);
    }
    for program in NODE_PROGRAMS {
        let path = node_bin.join(program);
        if !path.is_file() {
            return Err(NodeError::Missing {
                what: format!("{program} (containerd {CONTAINERD_VERSION}'s node programs)"),
                path,
                how: "run `cargo xtask build-node` (or set HEADROOM_NODE_BIN)".to_string(),
            });
        }
    }
    let kubelet_bin = plane.bin().join("kubelet");
    if !kubelet_bin.is_file() {
        return Err(NodeError::Missing {
            what: "kubelet".to_string(),
            path: kubelet_bin,
            how: "run `cargo xtask build-k8s`".to_string(),
        });
    }
    let dir = tempfile::Builder::new()
        .prefix("headroom-node-")
        .tempdir()
        .map_err(io("create the node's folder"))?;
    let sysctls = TOUCHED_SYSCTLS
        .iter()
        .filter_map(|name| {
            let path = Path::new("/proc/sys").join(name);
            fs::read_to_string(&path).ok().map(|value| (path, value))
        })
        .collect();
    let mut node = Node {
        kubectl: plane.bin().join("kubectl"),
        admin_kubeconfig: plane.admin_kubeconfig().to_path_buf(),
        node_bin: node_bin.to_path_buf(),
        kubelet_bin,
        programs: Supervisor::new(dir.path()),
        dir,
        registry: String::new(),
        start_timeout: options.start_timeout,
        sysctls,
        kubelet_healthz_port: 0,
        bridge: None,
        mounted_bpffs: false,
    };
    node.mount_bpffs()?;
    node.start_registry()?;
    node.write_containerd_config()?;
    node.start_containerd()?;
    node.write_kubelet_config(plane, &options)?;
    node.start_kubelet()?;
    Ok(node)
}

/// Where `cargo xtask build-node` puts the node's programs, or `HEADROOM_NODE_BIN`.
pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("HEADROOM_NODE_BIN") {
        return PathBuf::from(dir);
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new("."))
        .join("target/node")
        .join(CONTAINERD_VERSION)
}

/// Detaches every mount under `dir` (the kubelet's volumes, containerd's overlays and network
/// namespaces), deepest first.
fn unmount_under(dir: &Path) {
    let Ok(mountinfo) = fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let mut points: Vec<PathBuf> = mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|point| PathBuf::from(point.replace("\\040", " ")))
        .filter(|point| point.starts_with(dir))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for point in points {
        let _ = nix::mount::umount2(&point, nix::mount::MntFlags::MNT_DETACH);
    }
}

/// The kubelet's `kubepods` tree in every cgroup hierarchy, removed leaves first, after killing
/// whatever still runs in it (a container whose shim was killed).
fn remove_kubepods_cgroups() {
    let roots = kubepods_roots();
    for _ in 0..50 {
        let mut left = false;
        for root in &roots {
            left |= !remove_cgroup_tree(root);
        }
        if !left {
            return;
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// The kubelet's `kubepods` cgroup in each v1 hierarchy and on v2, those that exist.
fn kubepods_roots() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = fs::read_dir("/sys/fs/cgroup")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path().join("kubepods"))
        .collect();
    roots.push(PathBuf::from("/sys/fs/cgroup/kubepods"));
    // `cpu` and `cpuacct` are links to `cpu,cpuacct`: each hierarchy once.
    let mut roots: Vec<PathBuf> = roots
        .into_iter()
        .filter_map(|r| fs::canonicalize(r).ok())
        .filter(|r| r.is_dir())
        .collect();
    roots.sort();
    roots.dedup();
    roots
}

/// Whether `dir` is gone.
fn remove_cgroup_tree(dir: &Path) -> bool {
    if let Ok(children) = fs::read_dir(dir) {
        for child in children.flatten() {
            if child.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroup_tree(&child.path());
            }
        }
    }
    if let Ok(procs) = fs::read_to_string(dir.join("cgroup.procs")) {
        for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
            kill(pid);
        }
    }
    fs::remove_dir(dir).is_ok() || !dir.exists()
}

/// The kubelet links each container's log into `/var/log/containers` (a fixed path); the links
/// into this node's folder go with it.
fn remove_container_log_links(dir: &Path) {
    let Ok(links) = fs::read_dir("/var/log/containers") else {
        return;
    };
    for link in links.flatten() {
        if fs::read_link(link.path()).is_ok_and(|target| target.starts_with(dir)) {
            let _ = fs::remove_file(link.path());
        }
    }
}

const CAP_SYS_RESOURCE: u32 = 24;

/// Whether this process holds `capability` (its bit in `CapEff`).
fn has_capability(capability: u32) -> bool {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("CapEff:"))
                .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << capability) != 0)
}

fn free_port() -> Result<u16, NodeError> {
    supervisor::free_port().map_err(io("find a free port"))
}

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> NodeError {
    move |source| NodeError::Io {
        what: what.to_string(),
        source,
    }
}
