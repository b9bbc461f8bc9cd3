//! etcd, kube-apiserver, kube-controller-manager and (optionally) kube-scheduler, the real
//! upstream programs, on 127.0.0.1 with a throw-away data directory and PKI. Dropping the
//! [`ControlPlane`] stops every component and removes the directory. With a node whose Pods talk
//! to the API server (headroom's DaemonSet), kube-apiserver listens on the Pod bridge's gateway
//! instead, an address on a bridge of the tests' own that leads nowhere beyond this host.
//!
//! No kubelet runs: a test plays the node's part by writing Pod status itself, as upstream's
//! own scheduler integration tests do.
use std::{
    fs,
    net::Ipv4Addr,
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    thread,
    time::{Duration, Instant},
};

use thiserror::Error;

use crate::{
    pki,
    supervisor::{self, Supervisor},
};

/// The Kubernetes release the programs must be (`k8s/go.mod`).
pub const KUBERNETES_VERSION: &str = "v1.37.2";

/// The alpha gate behind upstream's preemption for Deferred resizes.
pub const RESIZE_PREEMPTION_GATE: &str = "InPlacePodVerticalScalingSchedulerPreemption";

#[derive(Debug, Error)]
pub enum ControlPlaneError {
    #[error(
        "{program} {KUBERNETES_VERSION} is not built at {path}: run `cargo xtask build-k8s` \
         (or set HEADROOM_K8S_BIN to the folder holding it)"
    )]
    NotBuilt { program: String, path: PathBuf },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("making the control plane's certificates: {0}")]
    Pki(String),
    #[error("{component} did not become ready within {waited:?}; last lines of its log:\n{log_tail}")]
    NotReady {
        component: String,
        waited: Duration,
        log_tail: String,
    },
    #[error("{component} exited during start-up ({status}); last lines of its log:\n{log_tail}")]
    Exited {
        component: String,
        status: String,
        log_tail: String,
    },
    #[error("`kubectl {args}` failed ({status}):\n{stderr}")]
    Kubectl {
        args: String,
        status: String,
        stderr: String,
    },
}

/// Whether kube-scheduler runs, and with resize preemption on or off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedulerGate {
    /// Upstream's resize preemption on: the reference headroom is held against.
    On,
    /// kube-scheduler runs without resize preemption (headroom-shim does that job).
    Off,
}

#[derive(Clone, Debug)]
pub struct ControlPlaneOptions {
    /// `None`: no kube-scheduler at all.
    pub scheduler: Option<SchedulerGate>,
    /// The disruption controller computes PDBs' `disruptionsAllowed`; the service-account and
    /// namespace controllers make `default` service accounts and finish namespace deletion.
    pub controller_manager: bool,
    /// The controllers a cluster with a real kubelet needs as well (see [`crate::node`]): node
    /// lifecycle (it lifts the `not-ready` taint a new Node is born with), the root CA publisher
    /// (every Pod's service-account volume mounts `kube-root-ca.crt`), DaemonSets, ReplicaSets,
    /// Deployments and Pod garbage collection.
    pub node_controllers: bool,
    /// The address kube-apiserver listens on and advertises: 127.0.0.1, or the gateway of the
    /// node's Pod bridge when Pods must reach it (see [`crate::node::PodBridge`]).
    pub apiserver_address: Ipv4Addr,
    /// More kube-apiserver flags (e.g. `--etcd-compaction-interval=2s`, so that a watch can be
    /// made to expire).
    pub apiserver_args: Vec<String>,
    /// How long each component may take to become ready.
    pub start_timeout: Duration,
}

impl Default for ControlPlaneOptions {
    fn default() -> Self {
        ControlPlaneOptions {
            scheduler: None,
            controller_manager: true,
            node_controllers: false,
            apiserver_address: Ipv4Addr::LOCALHOST,
            apiserver_args: Vec::new(),
            start_timeout: Duration::from_secs(90),
        }
    }
}

/// A running control plane. See the module documentation.
pub struct ControlPlane {
    bin: PathBuf,
    // Dropped before the folder (fields drop in order): the data lives until they are gone.
    components: Supervisor,
    dir: tempfile::TempDir,
    server: String,
    admin_kubeconfig: PathBuf,
    scheduler_kubeconfig: PathBuf,
    start_timeout: Duration,
    apiserver_port: u16,
    apiserver_address: Ipv4Addr,
    apiserver_args: Vec<String>,
    /// etcd's client and peer ports, kept across its restarts.
    etcd_ports: (u16, u16),
    /// Set once etcd runs.
    etcd_url: String,
}

/// kube-apiserver's audit policy: the calls that preempt a Pod or write its status (a Pod's
/// `eviction` subresource, its `status` writes, Pod deletes), nothing else, so that a test can
/// count evictions as the API server saw them (Events can be lost with the process that was to
/// write them) and a benchmark can time a preemption on the server's clock.
const AUDIT_POLICY: &str = "audit-policy.yaml";
const AUDIT_LOG: &str = "audit.log";
const AUDIT_POLICY_YAML: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  resources:
  - group: \"\"
    resources: [pods/eviction, pods/status]
  verbs: [create, patch, update]
- level: Metadata
  resources:
  - group: \"\"
    resources: [pods]
  verbs: [delete]
- level: None
";

/// One call on a Pod as kube-apiserver's audit log has it (the policy above).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodCall {
    pub namespace: String,
    pub name: String,
    /// `""` for the Pod itself, `status`, `eviction`.
    pub subresource: String,
    /// `patch`, `update`, `create`, `delete`.
    pub verb: String,
    /// Who asked (`user.username`).
    pub user: String,
    pub code: u16,
    /// When the API server received the request, and when it had answered.
    pub received: jiff::Timestamp,
    pub completed: jiff::Timestamp,
}

impl PodCall {
    /// The API server's own time on the call, received to answered.
    pub fn own_time(&self) -> std::time::Duration {
        audit_span(self.received, self.completed)
    }
}

/// The time between two of the audit log's timestamps (zero if the API server's clock stepped
/// back in between).
pub fn audit_span(from: jiff::Timestamp, to: jiff::Timestamp) -> std::time::Duration {
    std::time::Duration::try_from(to.duration_since(from)).unwrap_or_default()
}

/// One call to the Eviction API, from kube-apiserver's audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvictionCall {
    pub namespace: String,
    pub name: String,
    /// Who asked (`user.username`).
    pub user: String,
    /// The HTTP status answered: 201 evicted, 429 refused by a PDB, …
    pub code: u16,
}

impl ControlPlane {
    /// Every Eviction API call answered so far, oldest first (the audit log; lines that do not
    /// parse are skipped: the API server may be writing the last one).
    pub fn eviction_calls(&self) -> Vec<EvictionCall> {
        self.pod_calls()
            .into_iter()
            .filter(|call| call.subresource == "eviction")
            .map(|call| EvictionCall {
                namespace: call.namespace,
                name: call.name,
                user: call.user,
                code: call.code,
            })
            .collect()
    }

    /// Every audited call on a Pod answered so far, oldest first (lines that do not parse are
    /// skipped: the API server may be writing the last one).
    pub fn pod_calls(&self) -> Vec<PodCall> {
        let text = std::fs::read_to_string(self.dir().join(AUDIT_LOG)).unwrap_or_default();
        text.lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|event| event["stage"] == "ResponseComplete")
            .filter_map(|event| {
                let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
                let at = |key: &str| event[key].as_str()?.parse::<jiff::Timestamp>().ok();
                Some(PodCall {
                    namespace: text(&event["objectRef"]["namespace"]),
                    name: text(&event["objectRef"]["name"]),
                    subresource: text(&event["objectRef"]["subresource"]),
                    verb: text(&event["verb"]),
                    user: text(&event["user"]["username"]),
                    code: event["responseStatus"]["code"]
                        .as_u64()
                        .and_then(|c| u16::try_from(c).ok())
                        .unwrap_or(0),
                    received: at("requestReceivedTimestamp")?,
                    completed: at("stageTimestamp")?,
                })
            })
            .collect()
    }

    /// Starts etcd, kube-apiserver and what `options` asks for, and waits until each is ready.
    pub fn start(options: ControlPlaneOptions) -> Result<ControlPlane, ControlPlaneError> {
        start_with_bin(&bin_dir(), options)
    }

    /// `https://ADDRESS:PORT` ([`ControlPlaneOptions::apiserver_address`]).
    pub fn server(&self) -> &str {
        &self.server
    }

    /// A kubeconfig of the built-in superuser (`system:masters`).
    pub fn admin_kubeconfig(&self) -> &Path {
        &self.admin_kubeconfig
    }

    /// The folder of the upstream programs.
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// A scratch folder that lives as long as the control plane.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `kubectl` as the administrator.
    pub fn kubectl(&self) -> Command {
        self.kubectl_as(&self.admin_kubeconfig)
    }

    /// `kubectl` with another kubeconfig.
    pub fn kubectl_as(&self, kubeconfig: &Path) -> Command {
        let mut cmd = Command::new(self.bin.join("kubectl"));
        cmd.arg("--kubeconfig").arg(kubeconfig);
        cmd
    }

    /// Runs `kubectl ARGS` as the administrator; its stdout, or an error with its stderr.
    pub fn kubectl_ok(&self, args: &[&str]) -> Result<String, ControlPlaneError> {
        run_kubectl(self.kubectl().args(args), args)
    }

    /// Runs `kubectl ARGS` as the administrator with `stdin` as its input (`-f -`).
    pub fn kubectl_stdin(&self, args: &[&str], stdin: &str) -> Result<String, ControlPlaneError> {
        use std::io::Write as _;
        let mut child = self
            .kubectl()
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| io("start kubectl", source))?;
        if let Some(mut input) = child.stdin.take() {
            input
                .write_all(stdin.as_bytes())
                .map_err(|source| io("write kubectl's input", source))?;
        }
        let output = child
            .wait_with_output()
            .map_err(|source| io("wait for kubectl", source))?;
        kubectl_result(output, args)
    }

    /// `kubectl get KIND NAME -n NAMESPACE -o json` as the administrator, or `None` when it
    /// does not exist (or cannot be read).
    pub fn get_json(&self, kind: &str, namespace: &str, name: &str) -> Option<serde_json::Value> {
        let out = self
            .kubectl()
            .args(["get", kind, name, "-n", namespace, "-o", "json"])
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        serde_json::from_slice(&out.stdout).ok()
    }

    /// Whether the Pod `namespace/name` runs with its first container ready.
    pub fn pod_running(&self, namespace: &str, name: &str) -> bool {
        self.get_json("pod", namespace, name).is_some_and(|pod| {
            pod["status"]["phase"] == "Running" && pod["status"]["containerStatuses"][0]["ready"] == true
        })
    }

    /// The Events whose involved object is `name` in `namespace`, oldest first.
    pub fn events_of(&self, namespace: &str, name: &str) -> Vec<serde_json::Value> {
        let Ok(out) = self.kubectl_ok(&[
            "get",
            "events",
            "-n",
            namespace,
            "--field-selector",
            &format!("involvedObject.name={name}"),
            "--sort-by=.metadata.creationTimestamp",
            "-o",
            "json",
        ]) else {
            return Vec::new();
        };
        serde_json::from_str::<serde_json::Value>(&out)
            .ok()
            .and_then(|list| list["items"].as_array().cloned())
            .unwrap_or_default()
    }

    /// A kubeconfig that authenticates as the ServiceAccount `namespace/name` with a token from
    /// the TokenRequest API, so RBAC applies to whoever uses it.
    pub fn service_account_kubeconfig(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<PathBuf, ControlPlaneError> {
        let token = self.kubectl_ok(&["create", "token", name, "-n", namespace, "--duration=2h"])?;
        let path = self.dir.path().join(format!("{namespace}-{name}.kubeconfig"));
        write_kubeconfig(
            &path,
            &self.server,
            &self.dir.path().join(pki::CA_CERT),
            Credentials::Token(token.trim().to_string()),
        )?;
        Ok(path)
    }

    /// Starts kube-scheduler (or restarts it with another gate).
    pub fn start_scheduler(&mut self, gate: SchedulerGate) -> Result<(), ControlPlaneError> {
        self.stop("kube-scheduler");
        let enabled = gate == SchedulerGate::On;
        let mut cmd = Command::new(self.bin.join("kube-scheduler"));
        cmd.arg(format!("--kubeconfig={}", self.scheduler_kubeconfig.display()))
            .arg("--leader-elect=false")
            .arg("--secure-port=0")
            .arg(format!("--feature-gates={RESIZE_PREEMPTION_GATE}={enabled}"))
            .arg("--v=2");
        self.spawn("kube-scheduler", &mut cmd)?;
        // Without a serving port, readiness shows in the log: the informers synced and the
        // scheduling loop started.
        self.wait_for_log("kube-scheduler", "Starting Kubernetes Scheduler")
    }

    /// The process id of a running component (`kube-apiserver`, `kube-scheduler`, `etcd`, …).
    pub fn pid(&self, name: &str) -> Option<u32> {
        self.components.pid(name)
    }

    /// Stops one component (no-op when it is not running).
    pub fn stop(&mut self, name: &str) {
        self.components.stop(name);
    }

    /// The last lines of a component's log.
    pub fn log_tail(&self, name: &str, lines: usize) -> String {
        self.components.log_tail(name, lines)
    }

    /// Stops kube-apiserver, waits `down`, and starts it again on the same port and etcd, until
    /// it is ready: what its clients see of an API server upgrade or crash (their watches end
    /// and resume, or re-list on 410 Gone).
    pub fn restart_apiserver(&mut self, down: Duration) -> Result<(), ControlPlaneError> {
        self.stop("kube-apiserver");
        thread::sleep(down);
        self.start_apiserver()
    }

    /// Starts etcd again (after `stop("etcd")`) on the same ports and data, and waits until
    /// kube-apiserver is ready on it. While etcd is away the API server stays up and its clients
    /// see an etcd outage: writes and consistent reads fail or hang, watches go quiet.
    pub fn start_etcd_again(&mut self) -> Result<(), ControlPlaneError> {
        self.start_etcd()?;
        self.wait_until_ready("kube-apiserver", |plane| {
            plane.kubectl_succeeds(&["get", "--raw=/readyz", "--request-timeout=2s"])
        })
    }

    fn start_etcd_and_apiserver(&mut self) -> Result<(), ControlPlaneError> {
        self.etcd_ports = (free_port()?, free_port()?);
        self.start_etcd()?;
        self.start_apiserver()
    }

    fn start_etcd(&mut self) -> Result<(), ControlPlaneError> {
        let (client_port, peer_port) = self.etcd_ports;
        let etcd_url = format!("http://127.0.0.1:{client_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let mut etcd = Command::new(self.bin.join("etcd"));
        etcd.arg(format!("--data-dir={}", self.dir.path().join("etcd").display()))
            .arg(format!("--listen-client-urls={etcd_url}"))
            .arg(format!("--advertise-client-urls={etcd_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=default={peer_url}"))
            // A test cluster's data is thrown away: fsync only slows it down.
            .arg("--unsafe-no-fsync")
            .arg("--log-level=warn");
        self.spawn("etcd", &mut etcd)?;
        self.etcd_url = etcd_url;
        Ok(())
    }

    fn start_apiserver(&mut self) -> Result<(), ControlPlaneError> {
        let (etcd_url, apiserver_port) = (self.etcd_url.clone(), self.apiserver_port);
        let dir = self.dir.path();
        let file = |name: &str| dir.join(name).display().to_string();
        let mut apiserver = Command::new(self.bin.join("kube-apiserver"));
        apiserver
            .arg(format!("--etcd-servers={etcd_url}"))
            .arg(format!("--bind-address={}", self.apiserver_address))
            .arg(format!("--advertise-address={}", self.apiserver_address))
            .arg(format!("--secure-port={apiserver_port}"))
            .arg(format!("--cert-dir={}", file("apiserver-certs")))
            .arg(format!("--tls-cert-file={}", file(pki::SERVING_CERT)))
            .arg(format!("--tls-private-key-file={}", file(pki::SERVING_KEY)))
            .arg(format!("--client-ca-file={}", file(pki::CA_CERT)))
            .arg(format!(
                "--service-account-key-file={}",
                file(pki::SERVICE_ACCOUNT_PUBLIC_KEY)
            ))
            .arg(format!(
                "--service-account-signing-key-file={}",
                file(pki::SERVICE_ACCOUNT_KEY)
            ))
            .arg("--service-account-issuer=https://kubernetes.default.svc.cluster.local")
            .arg("--service-cluster-ip-range=10.96.0.0/24")
            .arg("--authorization-mode=Node,RBAC")
            .arg("--endpoint-reconciler-type=none")
            .arg(format!("--feature-gates={RESIZE_PREEMPTION_GATE}=true"))
            .arg("--profiling=false")
            .arg(format!("--audit-policy-file={}", file(AUDIT_POLICY)))
            .arg(format!("--audit-log-path={}", file(AUDIT_LOG)))
            .args(&self.apiserver_args);
        self.spawn("kube-apiserver", &mut apiserver)?;
        self.wait_until_ready("kube-apiserver", |plane| {
            plane.kubectl_succeeds(&["get", "--raw=/readyz", "--request-timeout=2s"])
        })
    }

    fn start_controller_manager(&mut self, node_controllers: bool) -> Result<(), ControlPlaneError> {
        // Without a kubelet, no node-lifecycle or taint-eviction controller: the tests' Node
        // would go NotReady and its Pods be evicted under them.
        let mut controllers = String::from(
            "disruption-controller,serviceaccount-controller,namespace-controller,\
             garbage-collector-controller",
        );
        if node_controllers {
            controllers.push_str(
                ",node-lifecycle-controller,root-ca-certificate-publisher-controller,\
                 daemonset-controller,replicaset-controller,deployment-controller,\
                 pod-garbage-collector-controller",
            );
        }
        let mut cmd = Command::new(self.bin.join("kube-controller-manager"));
        cmd.arg(format!("--kubeconfig={}", self.admin_kubeconfig.display()))
            .arg("--leader-elect=false")
            .arg("--secure-port=0")
            .arg(format!("--controllers={controllers}"))
            .arg(format!(
                "--root-ca-file={}",
                self.dir.path().join(pki::CA_CERT).display()
            ))
            .arg(format!("--feature-gates={RESIZE_PREEMPTION_GATE}=true"))
            .arg("--v=1");
        self.spawn("kube-controller-manager", &mut cmd)?;
        // Pods are refused until their namespace's `default` ServiceAccount exists.
        self.wait_until_ready("kube-controller-manager", |plane| {
            plane.kubectl_succeeds(&["get", "serviceaccount", "default", "-n", "default"])
        })
    }

    fn spawn(&mut self, name: &'static str, cmd: &mut Command) -> Result<(), ControlPlaneError> {
        self.components
            .spawn(name, cmd)
            .map_err(|source| io(&format!("start {name}"), source))
    }

    fn wait_for_log(&mut self, name: &str, needle: &str) -> Result<(), ControlPlaneError> {
        let log = self.components.log_path(name);
        self.wait_until_ready(name, |_| {
            fs::read_to_string(&log).is_ok_and(|text| text.contains(needle))
        })
    }

    /// Polls `ready` until it holds, failing when a component exits or after `start_timeout`,
    /// with `name`'s log tail.
    fn wait_until_ready(
        &mut self,
        name: &str,
        mut ready: impl FnMut(&ControlPlane) -> bool,
    ) -> Result<(), ControlPlaneError> {
        let deadline = Instant::now() + self.start_timeout;
        loop {
            self.check_alive()?;
            if ready(self) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(self.not_ready(name));
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Whether `kubectl ARGS` (as the administrator) exits 0.
    fn kubectl_succeeds(&self, args: &[&str]) -> bool {
        self.kubectl()
            .args(args)
            .output()
            .is_ok_and(|out| out.status.success())
    }

    fn check_alive(&mut self) -> Result<(), ControlPlaneError> {
        match self.components.exited() {
            Some(exited) => Err(ControlPlaneError::Exited {
                component: exited.name,
                status: exited.status,
                log_tail: exited.log_tail,
            }),
            None => Ok(()),
        }
    }

    fn not_ready(&self, name: &str) -> ControlPlaneError {
        ControlPlaneError::NotReady {
            component: name.to_string(),
            waited: self.start_timeout,
            log_tail: self.log_tail(name, 30),
        }
    }
}

/// [`ControlPlane::start`] with the programs taken from `bin`.
pub fn start_with_bin(bin: &Path, options: ControlPlaneOptions) -> Result<ControlPlane, ControlPlaneError> {
    let bin = bin.to_path_buf();
    for program in ["etcd", "kube-apiserver", "kubectl"]
        .into_iter()
        .chain(options.controller_manager.then_some("kube-controller-manager"))
        .chain(options.scheduler.map(|_| "kube-scheduler"))
    {
        let path = bin.join(program);
        if !path.is_file() {
            return Err(ControlPlaneError::NotBuilt {
                program: program.to_string(),
                path,
            });
        }
    }
    let dir = tempfile::Builder::new()
        .prefix("headroom-control-plane-")
        .tempdir()
        .map_err(|source| io("create the control plane's directory", source))?;
    pki::write(dir.path(), options.apiserver_address)?;
    std::fs::write(dir.path().join(AUDIT_POLICY), AUDIT_POLICY_YAML)
        .map_err(|source| io("write the audit policy", source))?;
    let apiserver_port = free_port()?;
    let server = format!("https://{}:{apiserver_port}", options.apiserver_address);
    // A kubeconfig in the plane's directory that authenticates with one of `pki`'s client
    // certificates.
    let certificate_kubeconfig = |name: &str, cert: &str, key: &str| {
        let path = dir.path().join(name);
        write_kubeconfig(
            &path,
            &server,
            &dir.path().join(pki::CA_CERT),
            Credentials::Certificate {
                cert: dir.path().join(cert),
                key: dir.path().join(key),
            },
        )
        .map(|()| path)
    };
    let admin_kubeconfig = certificate_kubeconfig("admin.kubeconfig", pki::ADMIN_CERT, pki::ADMIN_KEY)?;
    // kube-scheduler's own: the user `system:kube-scheduler` (see `pki`).
    let scheduler_kubeconfig = certificate_kubeconfig(
        "kube-scheduler.kubeconfig",
        pki::SCHEDULER_CERT,
        pki::SCHEDULER_KEY,
    )?;
    let mut plane = ControlPlane {
        bin,
        components: Supervisor::new(dir.path()),
        dir,
        server,
        admin_kubeconfig,
        scheduler_kubeconfig,
        start_timeout: options.start_timeout,
        apiserver_port,
        apiserver_address: options.apiserver_address,
        apiserver_args: options.apiserver_args.clone(),
        etcd_ports: (0, 0),
        etcd_url: String::new(),
    };
    plane.start_etcd_and_apiserver()?;
    if options.controller_manager {
        plane.start_controller_manager(options.node_controllers)?;
    }
    if let Some(gate) = options.scheduler {
        plane.start_scheduler(gate)?;
    }
    Ok(plane)
}

/// Where `cargo xtask build-k8s` puts the programs, or `HEADROOM_K8S_BIN`.
pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("HEADROOM_K8S_BIN") {
        return PathBuf::from(dir);
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new("."))
        .join("target/k8s")
        .join(KUBERNETES_VERSION)
}

fn free_port() -> Result<u16, ControlPlaneError> {
    supervisor::free_port().map_err(|source| io("find a free port", source))
}

pub(crate) enum Credentials {
    Certificate { cert: PathBuf, key: PathBuf },
    Token(String),
}

pub(crate) fn write_kubeconfig(
    path: &Path,
    server: &str,
    ca: &Path,
    credentials: Credentials,
) -> Result<(), ControlPlaneError> {
    let user = match credentials {
        Credentials::Certificate { cert, key } => serde_json::json!({
            "client-certificate": cert,
            "client-key": key,
        }),
        Credentials::Token(token) => serde_json::json!({ "token": token }),
    };
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "headroom-test", "cluster": {
            "server": server,
            "certificate-authority": ca,
        }}],
        "users": [{"name": "user", "user": user}],
        "contexts": [{"name": "headroom-test", "context": {"cluster": "headroom-test", "user": "user"}}],
        "current-context": "headroom-test",
    });
    let text = serde_json::to_string_pretty(&config).map_err(|e| ControlPlaneError::Io {
        what: "serialise a kubeconfig".to_string(),
        source: std::io::Error::other(e),
    })?;
    fs::write(path, text).map_err(|source| io(&format!("write {}", path.display()), source))
}

fn run_kubectl(cmd: &mut Command, args: &[&str]) -> Result<String, ControlPlaneError> {
    let output = cmd.output().map_err(|source| io("start kubectl", source))?;
    kubectl_result(output, args)
}

fn kubectl_result(output: Output, args: &[&str]) -> Result<String, ControlPlaneError> {
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(ControlPlaneError::Kubectl {
            args: args.join(" "),
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        })
    }
}

fn io(what: &str, source: std::io::Error) -> ControlPlaneError {
    ControlPlaneError::Io {
        what: what.to_string(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::audit_span;
    use std::time::Duration;

    #[test]
    fn an_audit_span_is_the_time_between_and_never_negative() {
        let at = |s: &str| s.parse::<jiff::Timestamp>().expect("a valid timestamp");
        let (received, answered) = (
            at("2026-12-07T22:05:00.001250Z"),
            at("2026-12-07T22:05:00.004750Z"),
        );
        assert_eq!(audit_span(received, answered), Duration::from_micros(3500));
        assert_eq!(audit_span(answered, received), Duration::ZERO);
    }
}
