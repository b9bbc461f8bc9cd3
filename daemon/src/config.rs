//! headroomd's configuration: one TOML file plus command-line flags.
//!
//! The file is checked against a schema before anything is applied: every unknown key, wrong
//! type and bad value is reported at once with its path (`server.socket_mode: ...`), and nothing
//! is half-applied.
//!
//! ```toml
//! node_name = "standalone"
//! [node]                         # ignored with `serve --pods-from kube` (the Node's allocatable)
//! allocatable_cpu = "8"          # Kubernetes quantity
//! allocatable_memory = "32Gi"
//! [server]
//! socket = "/run/headroom/headroomd.sock"
//! socket_mode = "0600"           # octal string
//! max_request_bytes = 65536
//! writer_uids = [0]              # may call Reserve/Release/ApplyResize
//! # reader_uids = [0, 1000]      # absent: anyone the socket mode lets in may read
//! max_watchers = 1024
//! max_connections = 256          # open connections per listener (socket, TCP); over it, closed at once
//! default_reservation_ttl_seconds = 60
//! max_reservation_ttl_seconds = 3600
//! require_known_pod = true
//! # [server.tcp]                 # optional; only with mutual TLS (see below)
//! # listen = "0.0.0.0:7443"
//! # tls_cert = "/etc/headroom/tls.crt"     # server certificate chain, PEM, leaf first
//! # tls_key = "/etc/headroom/tls.key"      # its key, PEM (PKCS#8, PKCS#1 or SEC1)
//! # client_ca = "/etc/headroom/ca.crt"     # clients must present a certificate signed by it
//! # writer_names = ["spiffe://cluster.local/ns/headroom-system/sa/headroom"]
//! [pipeline]
//! queue_capacity = 65536
//! stale_after_ms = 5000
//! min_publish_interval_ms = 1
//! tick_interval_ms = 100
//! [metrics]
//! listen = "127.0.0.1:9464"      # "" disables /metrics
//! ```
//!
//! ## Transports and who may write
//!
//! The Unix socket is always served (mode 0600 by default). Callers are known by their uid
//! (SO_PEERCRED): `writer_uids` may call `Reserve`, `Release` and `ApplyResize`; reads are open to
//! whoever the socket's mode lets in, or to `reader_uids` (plus writers) when set.
//!
//! TCP is served only when `[server.tcp]` is present, and only with mutual TLS: every client must
//! present a certificate that chains to `client_ca`, or its handshake fails before any request
//! is read (no certificate, one from another CA and plaintext are all refused). A verified client
//! may call the read-only RPCs (`GetHeadroom`, `WatchHeadroom`, `ListPods`, health, reflection);
//! `reader_uids` does not apply to TCP. The state-changing RPCs need one of the client
//! certificate's subject alternative names (a DNS name or a URI such as a SPIFFE id, compared
//! exactly; the subject's common name is not consulted) on `writer_names`. `writer_names` is
//! empty by default, so TCP is read-only unless writers are named: the client CA is often a
//! cluster-wide CA that also signs certificates for dashboards and exporters, and trusting all of
//! those to change cgroup limits would be wider than the socket's "root on this node".
//!
//! The three files are read and checked at start, before the socket, the intent directory or any
//! cgroup is touched: a missing or unreadable file, anything that is not PEM of the right kind,
//! or a key that does not belong to the certificate stops `headroomd` with one error naming the
//! setting and the file. Certificates are read once: replacing them needs a restart.

use std::{fmt, net::SocketAddr, path::PathBuf, time::Duration};

use headroom_node_model::{Resources, parse_cpu_millis, parse_memory_bytes};
use toml::Value;

use crate::{pipeline::PipelineConfig, server::ServerConfig};

/// One problem in the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    /// Dotted path of the key (`server.socket_mode`), or `<file>` for syntax errors.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Every problem found, reported together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// Where the configuration came from.
    pub source_name: String,
    /// The problems.
    pub issues: Vec<ConfigIssue>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: {} problem(s) in the configuration:",
            self.source_name,
            self.issues.len()
        )?;
        for issue in &self.issues {
            writeln!(f, "  {issue}")?;
        }
        Ok(())
    }
}

/// TCP listener settings (mutual TLS is mandatory).
pub use crate::server::TcpConfig;

/// The whole configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// Pipeline tuning and the node's allocatable.
    pub pipeline: PipelineConfig,
    /// gRPC server.
    pub server: ServerConfig,
    /// Optional TCP listener.
    pub tcp: Option<TcpConfig>,
    /// `/metrics` listen address; `None` disables it.
    pub metrics_listen: Option<SocketAddr>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            pipeline: PipelineConfig::default(),
            server: ServerConfig::default(),
            tcp: None,
            metrics_listen: Some(SocketAddr::from(([127, 0, 0, 1], 9464))),
        }
    }
}

// === Schema walk ===

struct Walker {
    issues: Vec<ConfigIssue>,
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_owned()
    } else {
        format!("{prefix}.{key}")
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a datetime",
        Value::Array(_) => "an array",
        Value::Table(_) => "a table",
    }
}

impl Walker {
    fn issue(&mut self, path: String, message: impl Into<String>) {
        self.issues.push(ConfigIssue {
            path,
            message: message.into(),
        });
    }

    /// Reports keys of `table` that are not in `known`.
    fn unknown_keys(&mut self, table: &toml::Table, prefix: &str, known: &[&str]) {
        for key in table.keys() {
            if !known.contains(&key.as_str()) {
                self.issue(
                    join(prefix, key),
                    format!("unknown key (expected one of: {})", known.join(", ")),
                );
            }
        }
    }

    fn table<'a>(&mut self, parent: &'a toml::Table, prefix: &str, key: &str) -> Option<&'a toml::Table> {
        match parent.get(key)? {
            Value::Table(t) => Some(t),
            other => {
                self.issue(
                    join(prefix, key),
                    format!("expected a table, found {}", type_name(other)),
                );
                None
            }
        }
    }

    fn string(&mut self, t: &toml::Table, prefix: &str, key: &str) -> Option<String> {
        match t.get(key)? {
            Value::String(s) => Some(s.clone()),
            other => {
                self.issue(
                    join(prefix, key),
                    format!("expected a string, found {}", type_name(other)),
                );
                None
            }
        }
    }

    fn bool(&mut self, t: &toml::Table, prefix: &str, key: &str) -> Option<bool> {
        match t.get(key)? {
            Value::Boolean(b) => Some(*b),
            other => {
                self.issue(
                    join(prefix, key),
                    format!("expected a boolean, found {}", type_name(other)),
                );
                None
            }
        }
    }

    fn int(&mut self, t: &toml::Table, prefix: &str, key: &str, min: i64, max: i64) -> Option<i64> {
        match t.get(key)? {
            Value::Integer(i) if (min..=max).contains(i) => Some(*i),
            Value::Integer(i) => {
                self.issue(join(prefix, key), format!("{i} is out of range {min}..={max}"));
                None
            }
            other => {
                self.issue(
                    join(prefix, key),
                    format!("expected an integer, found {}", type_name(other)),
                );
                None
            }
        }
    }

    fn uids(&mut self, t: &toml::Table, prefix: &str, key: &str) -> Option<Vec<u32>> {
        let path = join(prefix, key);
        match t.get(key)? {
            Value::Array(items) => {
                let mut out = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    match item.as_integer().and_then(|n| u32::try_from(n).ok()) {
                        Some(uid) => out.push(uid),
                        None => self.issue(
                            format!("{path}[{i}]"),
                            format!("expected a uid (0..=4294967295), found {item}"),
                        ),
                    }
                }
                Some(out)
            }
            other => {
                self.issue(
                    path,
                    format!("expected an array of uids, found {}", type_name(other)),
                );
                None
            }
        }
    }

    /// Client certificate names: non-empty strings without whitespace or control characters.
    fn names(&mut self, t: &toml::Table, prefix: &str, key: &str) -> Option<Vec<String>> {
        let path = join(prefix, key);
        match t.get(key)? {
            Value::Array(items) => {
                let mut out = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    match item.as_str() {
                        Some(n)
                            if !n.is_empty() && !n.chars().any(|c| c.is_whitespace() || c.is_control()) =>
                        {
                            out.push(n.to_owned())
                        }
                        _ => self.issue(
                            format!("{path}[{i}]"),
                            format!(
                                "expected a certificate name (a DNS name or URI, no spaces), found {item}"
                            ),
                        ),
                    }
                }
                Some(out)
            }
            other => {
                self.issue(
                    path,
                    format!("expected an array of names, found {}", type_name(other)),
                );
                None
            }
        }
    }

    fn millis(&mut self, t: &toml::Table, prefix: &str, key: &str, min: i64, max: i64) -> Option<Duration> {
        self.int(t, prefix, key, min, max)
            .map(|ms| Duration::from_millis(ms.unsigned_abs()))
    }

    fn addr(&mut self, t: &toml::Table, prefix: &str, key: &str) -> Option<Option<SocketAddr>> {
        let s = self.string(t, prefix, key)?;
        if s.is_empty() {
            return Some(None);
        }
        match s.parse() {
            Ok(a) => Some(Some(a)),
            Err(e) => {
                self.issue(
                    join(prefix, key),
                    format!("{s:?} is not an address like 127.0.0.1:9464: {e}"),
                );
                None
            }
        }
    }
}

/// Parses and checks a TOML configuration, starting from the defaults.
pub fn parse(text: &str, source_name: &str) -> Result<Config, ConfigError> {
    let err = |issues| ConfigError {
        source_name: source_name.to_owned(),
        issues,
    };
    let root: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        err(vec![ConfigIssue {
            path: "<file>".into(),
            message: e.to_string().trim().to_owned(),
        }])
    })?;
    let mut w = Walker { issues: Vec::new() };
    let mut c = Config::default();
    w.unknown_keys(&root, "", &["node_name", "node", "server", "pipeline", "metrics"]);
    if let Some(name) = w.string(&root, "", "node_name") {
        if name.is_empty() {
            w.issue("node_name".into(), "must not be empty");
        }
        c.pipeline.node_name = name;
    }
    if let Some(node) = w.table(&root, "", "node") {
        w.unknown_keys(node, "node", &["allocatable_cpu", "allocatable_memory"]);
        if let Some(q) = w.string(node, "node", "allocatable_cpu") {
            match parse_cpu_millis(&q) {
                Ok(m) => c.pipeline.allocatable.cpu_millis = m,
                Err(e) => w.issue("node.allocatable_cpu".into(), e.to_string()),
            }
        }
        if let Some(q) = w.string(node, "node", "allocatable_memory") {
            match parse_memory_bytes(&q) {
                Ok(b) => c.pipeline.allocatable.memory_bytes = b,
                Err(e) => w.issue("node.allocatable_memory".into(), e.to_string()),
            }
        }
    }
    if let Some(server) = w.table(&root, "", "server") {
        let p = "server";
        w.unknown_keys(
            server,
            p,
            &[
                "socket",
                "socket_mode",
                "max_request_bytes",
                "writer_uids",
                "reader_uids",
                "max_watchers",
                "max_connections",
                "default_reservation_ttl_seconds",
                "max_reservation_ttl_seconds",
                "require_known_pod",
                "tcp",
            ],
        );
        if let Some(s) = w.string(server, p, "socket") {
            if s.is_empty() || !s.starts_with('/') {
                w.issue("server.socket".into(), format!("{s:?} must be an absolute path"));
            }
            c.server.socket_path = PathBuf::from(s);
        }
        if let Some(m) = w.string(server, p, "socket_mode") {
            match u32::from_str_radix(m.trim_start_matches("0o"), 8) {
                Ok(mode) if mode <= 0o777 => {
                    if mode & 0o002 != 0 {
                        w.issue(
                            "server.socket_mode".into(),
                            format!("{m} lets every local user connect; refused"),
                        );
                    }
                    c.server.socket_mode = mode;
                }
                _ => w.issue(
                    "server.socket_mode".into(),
                    format!("{m:?} is not an octal mode like \"0600\""),
                ),
            }
        }
        if let Some(n) = w.int(server, p, "max_request_bytes", 1024, 16 << 20) {
            c.server.max_request_bytes = n.unsigned_abs() as usize;
        }
        if let Some(u) = w.uids(server, p, "writer_uids") {
            c.server.access.writer_uids = u;
        }
        if let Some(u) = w.uids(server, p, "reader_uids") {
            c.server.access.reader_uids = Some(u);
        }
        if let Some(n) = w.int(server, p, "max_watchers", 1, 100_000) {
            c.server.limits.max_watchers = n.unsigned_abs() as usize;
        }
        if let Some(n) = w.int(server, p, "max_connections", 1, 1_000_000) {
            c.server.connections.max_connections = n.unsigned_abs() as usize;
        }
        if let Some(n) = w.int(server, p, "default_reservation_ttl_seconds", 1, 86_400) {
            c.server.limits.default_reservation_ttl = Duration::from_secs(n.unsigned_abs());
        }
        if let Some(n) = w.int(server, p, "max_reservation_ttl_seconds", 1, 86_400) {
            c.server.limits.max_reservation_ttl = Duration::from_secs(n.unsigned_abs());
        }
        if c.server.limits.default_reservation_ttl > c.server.limits.max_reservation_ttl {
            w.issue(
                "server.default_reservation_ttl_seconds".into(),
                "is greater than server.max_reservation_ttl_seconds",
            );
        }
        if let Some(b) = w.bool(server, p, "require_known_pod") {
            c.server.limits.require_known_pod = b;
        }
        if let Some(tcp) = w.table(server, p, "tcp") {
            let p = "server.tcp";
            w.unknown_keys(
                tcp,
                p,
                &["listen", "tls_cert", "tls_key", "client_ca", "writer_names"],
            );
            if let Some(names) = w.names(tcp, p, "writer_names") {
                c.server.access.tls_writer_names = names;
            }
            let listen = w.addr(tcp, p, "listen");
            let mut path = |key: &str| {
                let v = w.string(tcp, p, key);
                if v.as_deref().is_none_or(str::is_empty) {
                    w.issue(join(p, key), "required: TCP is served only with mutual TLS");
                }
                v.map(PathBuf::from)
            };
            let (cert, key, ca) = (path("tls_cert"), path("tls_key"), path("client_ca"));
            match (listen, cert, key, ca) {
                (Some(Some(listen)), Some(tls_cert), Some(tls_key), Some(client_ca)) => {
                    c.tcp = Some(TcpConfig {
                        listen,
                        tls_cert,
                        tls_key,
                        client_ca,
                    });
                }
                (Some(None), ..) | (None, ..) => w.issue(join(p, "listen"), "required"),
                _ => {}
            }
        }
    }
    if let Some(pl) = w.table(&root, "", "pipeline") {
        let p = "pipeline";
        w.unknown_keys(
            pl,
            p,
            &[
                "queue_capacity",
                "stale_after_ms",
                "min_publish_interval_ms",
                "tick_interval_ms",
            ],
        );
        if let Some(n) = w.int(pl, p, "queue_capacity", 16, 16 << 20) {
            c.pipeline.queue_capacity = n.unsigned_abs() as usize;
        }
        if let Some(d) = w.millis(pl, p, "stale_after_ms", 10, 3_600_000) {
            c.pipeline.stale_after = d;
        }
        if let Some(d) = w.millis(pl, p, "min_publish_interval_ms", 0, 60_000) {
            c.pipeline.min_publish_interval = d;
        }
        if let Some(d) = w.millis(pl, p, "tick_interval_ms", 1, 60_000) {
            c.pipeline.tick_interval = d;
        }
    }
    if let Some(m) = w.table(&root, "", "metrics") {
        w.unknown_keys(m, "metrics", &["listen"]);
        if let Some(a) = w.addr(m, "metrics", "listen") {
            c.metrics_listen = a;
        }
    }
    if c.pipeline.allocatable == Resources::ZERO {
        w.issue(
            "node".into(),
            "allocatable is zero: set node.allocatable_cpu and node.allocatable_memory",
        );
    }
    if w.issues.is_empty() {
        Ok(c)
    } else {
        Err(err(w.issues))
    }
}

/// Reads and checks the file at `path`.
pub fn load(path: &std::path::Path) -> Result<Config, ConfigError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        source_name: name.clone(),
        issues: vec![ConfigIssue {
            path: "<file>".into(),
            message: format!("cannot read: {e}"),
        }],
    })?;
    parse(&text, &name)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn full_example_parses() {
        let c = parse(
            r#"
node_name = "n1"
[node]
allocatable_cpu = "8"
allocatable_memory = "32Gi"
[server]
socket = "/tmp/h.sock"
socket_mode = "0660"
writer_uids = [0, 1000]
reader_uids = [2000]
[server.tcp]
listen = "0.0.0.0:7443"
tls_cert = "/c"
tls_key = "/k"
client_ca = "/ca"
writer_names = ["spiffe://c/ns/headroom-system/sa/headroom", "shim.example"]
[pipeline]
queue_capacity = 1024
stale_after_ms = 2000
[metrics]
listen = ""
"#,
            "test.toml",
        )
        .unwrap();
        assert_eq!(c.pipeline.allocatable, Resources::new(8000, 32 << 30));
        assert_eq!(c.server.socket_mode, 0o660);
        assert_eq!(c.server.access.writer_uids, vec![0, 1000]);
        assert_eq!(c.server.access.reader_uids, Some(vec![2000]));
        assert_eq!(c.pipeline.queue_capacity, 1024);
        let tcp = c.tcp.unwrap();
        assert_eq!(tcp.listen, "0.0.0.0:7443".parse().unwrap());
        assert_eq!(
            (
                tcp.tls_cert.to_str(),
                tcp.tls_key.to_str(),
                tcp.client_ca.to_str()
            ),
            (Some("/c"), Some("/k"), Some("/ca"))
        );
        assert_eq!(
            c.server.access.tls_writer_names,
            vec!["spiffe://c/ns/headroom-system/sa/headroom", "shim.example"]
        );
        assert_eq!(c.metrics_listen, None);
    }

    #[test]
    fn every_bad_key_is_reported_at_once_with_its_path() {
        let e = parse(
            r#"
nod_name = "typo"
[node]
allocatable_cpu = "-2"
allocatable_memory = 17
[server]
socket_mode = "0666"
writer_uids = [0, -1]
colour = "blue"
[server.tcp]
listen = "nowhere"
writer_names = ["ok.example", "", "two words", 7]
[pipeline]
queue_capacity = 1
[metrics]
listen = "localhost"
"#,
            "bad.toml",
        )
        .unwrap_err();
        let paths: Vec<&str> = e.issues.iter().map(|i| i.path.as_str()).collect();
        for expected in [
            "nod_name",
            "node.allocatable_cpu",
            "node.allocatable_memory",
            "server.socket_mode",
            "server.writer_uids[1]",
            "server.colour",
            "server.tcp.listen",
            "server.tcp.tls_cert",
            "server.tcp.writer_names[1]",
            "server.tcp.writer_names[2]",
            "server.tcp.writer_names[3]",
            "pipeline.queue_capacity",
            "metrics.listen",
        ] {
            assert!(paths.contains(&expected), "{expected} not reported; got:\n{e}");
        }
        assert!(!paths.contains(&"server.tcp.writer_names[0]"), "{e}");
        let text = e.to_string();
        assert!(text.contains("bad.toml") && text.contains("negative"), "{text}");
    }

    #[test]
    fn tcp_is_off_and_read_only_by_default() {
        let c = parse(
            "[node]\nallocatable_cpu = \"1\"\nallocatable_memory = \"1Gi\"\n",
            "t.toml",
        )
        .unwrap();
        assert!(c.tcp.is_none());
        assert!(c.server.access.tls_writer_names.is_empty());
        let e = parse(
            "[node]\nallocatable_cpu = \"1\"\nallocatable_memory = \"1Gi\"\n[server.tcp]\nwriter_names = \"x\"\n",
            "t.toml",
        )
        .unwrap_err();
        let paths: Vec<&str> = e.issues.iter().map(|i| i.path.as_str()).collect();
        for expected in [
            "server.tcp.listen",
            "server.tcp.tls_cert",
            "server.tcp.tls_key",
            "server.tcp.client_ca",
            "server.tcp.writer_names",
        ] {
            assert!(paths.contains(&expected), "{expected} not reported; got:\n{e}");
        }
    }

    #[test]
    fn syntax_errors_are_reported() {
        let e = parse("[server\nsocket = 1", "x.toml").unwrap_err();
        assert_eq!(e.issues[0].path, "<file>");
    }
}
