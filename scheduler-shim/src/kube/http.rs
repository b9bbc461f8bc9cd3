//! A minimal HTTP/1.1 server for `/metrics`, `/healthz` and `/readyz` (the DaemonSet's probes and
//! Prometheus), and `/status` and `/explain?pod=NS/NAME` (JSON of [`super::board`], for
//! `kubectl headroom`). GET only, one response per connection, request head capped at 8 KiB.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::board::Board;
use super::{KubeError, Metrics};

const MAX_HEAD: usize = 8 * 1024;

/// Binds `addr` and serves in a background task.
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    board: Arc<Board>,
) -> Result<JoinHandle<()>, KubeError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| KubeError::Serve { addr, source })?;
    // The bound address: with port 0 the kernel chose one, and the log is where it shows.
    let addr = listener.local_addr().unwrap_or(addr);
    tracing::info!(%addr, "serving /metrics, /healthz, /readyz, /status, /explain");
    Ok(tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    let (metrics, board) = (metrics.clone(), board.clone());
                    tokio::spawn(async move {
                        let answer =
                            tokio::time::timeout(Duration::from_secs(5), answer(stream, &metrics, &board))
                                .await;
                        if let Ok(Err(e)) = answer {
                            tracing::debug!(error = %e, "metrics connection");
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }))
}

async fn answer(mut stream: TcpStream, metrics: &Metrics, board: &Board) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let (status, content_type, body) = route(&head, metrics, board);
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

/// `(status line, content type, body)` for a request head.
pub fn route(head: &[u8], metrics: &Metrics, board: &Board) -> (&'static str, &'static str, String) {
    let text = String::from_utf8_lossy(head);
    let mut request_line = text.lines().next().unwrap_or_default().split_whitespace();
    let (method, path) = (
        request_line.next().unwrap_or_default(),
        request_line.next().unwrap_or_default(),
    );
    if method != "GET" {
        return ("405 Method Not Allowed", "text/plain", "GET only\n".into());
    }
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    match path {
        "/status" => json(&board.status(std::time::SystemTime::now())),
        "/explain" => {
            let pod = form_urlencoded::parse(query.as_bytes())
                .find(|(k, _)| k == "pod")
                .map(|(_, v)| v.into_owned());
            match pod {
                None => (
                    "400 Bad Request",
                    "text/plain",
                    "/explain?pod=NAMESPACE/NAME\n".into(),
                ),
                Some(pod) => match board.explain(&pod) {
                    Some(view) => json(&view),
                    None => (
                        "404 Not Found",
                        "text/plain",
                        format!("no decision for {pod} since this shim started\n"),
                    ),
                },
            }
        }
        "/metrics" => ("200 OK", "text/plain; version=0.0.4", metrics.render()),
        "/healthz" => ("200 OK", "text/plain", "ok\n".into()),
        "/readyz" if metrics.is_ready() => ("200 OK", "text/plain", "ready\n".into()),
        "/readyz" => {
            let failing = metrics.failing_watches(std::time::Instant::now());
            let why = if failing.is_empty() {
                "watches not synced yet\n".to_string()
            } else {
                format!("watches failing: {}\n", failing.join(", "))
            };
            ("503 Service Unavailable", "text/plain", why)
        }
        _ => ("404 Not Found", "text/plain", "not found\n".into()),
    }
}

fn json(view: &impl serde::Serialize) -> (&'static str, &'static str, String) {
    match serde_json::to_string(view) {
        Ok(body) => ("200 OK", "application/json", body),
        Err(e) => ("500 Internal Server Error", "text/plain", format!("{e}\n")),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        let m = Metrics::default();
        let b = Board::new("node-a", false, None);
        let route = |head: &[u8], m: &Metrics| route(head, m, &b);
        assert_eq!(route(b"GET /healthz HTTP/1.1\r\n\r\n", &m).0, "200 OK");
        assert_eq!(
            route(b"GET /readyz HTTP/1.1\r\n\r\n", &m).0,
            "503 Service Unavailable"
        );
        m.set_ready(true);
        assert_eq!(route(b"GET /readyz HTTP/1.1\r\n\r\n", &m).0, "200 OK");
        // A failing watch makes it unready again, and an event on that watch ready.
        m.watch_error("pods");
        let (status, _, body) = route(b"GET /readyz HTTP/1.1\r\n\r\n", &m);
        assert_eq!(
            (status, body.as_str()),
            ("503 Service Unavailable", "watches failing: pods\n")
        );
        assert_eq!(route(b"GET /healthz HTTP/1.1\r\n\r\n", &m).0, "200 OK");
        m.watch_ok("pods");
        assert_eq!(route(b"GET /readyz HTTP/1.1\r\n\r\n", &m).0, "200 OK");
        // A failure the watcher's retry healed without an event is forgotten after the window.
        m.watch_error("nodes");
        let later = std::time::Instant::now() + super::super::metrics::WATCH_FAILURE_UNREADY_FOR;
        assert!(m.failing_watches(later).is_empty());
        assert!(
            route(b"GET /metrics HTTP/1.1\r\n\r\n", &m)
                .2
                .contains("headroom_shim_reconciles_total 0")
        );
        assert_eq!(
            route(b"POST /metrics HTTP/1.1\r\n\r\n", &m).0,
            "405 Method Not Allowed"
        );
        assert_eq!(route(b"\xff\xfe", &m).0, "405 Method Not Allowed");
    }

    #[test]
    fn explain_and_status_answer_json_with_the_pod_percent_decoded() {
        let m = Metrics::default();
        let b = Board::new("node-a", true, None);
        let decision = crate::decide::fixtures::seed_decision(crate::decide::Outcome::Deferred);
        b.decided("default/high", "u1", 3, &decision, std::time::SystemTime::now());
        for head in [
            &b"GET /explain?pod=default/high HTTP/1.1\r\n\r\n"[..],
            b"GET /explain?x=1&pod=default%2Fhigh HTTP/1.1\r\n\r\n",
        ] {
            let (status, content_type, body) = route(head, &m, &b);
            assert_eq!((status, content_type), ("200 OK", "application/json"));
            let view: super::super::board::ResizeView = serde_json::from_str(&body).unwrap();
            assert_eq!((view.pod.as_str(), view.generation), ("default/high", 3));
        }
        let (status, _, body) = route(b"GET /explain?pod=default%2Fother HTTP/1.1\r\n\r\n", &m, &b);
        assert_eq!(status, "404 Not Found");
        assert!(body.contains("default/other"), "{body}");
        assert_eq!(
            route(b"GET /explain HTTP/1.1\r\n\r\n", &m, &b).0,
            "400 Bad Request"
        );
        let (status, _, body) = route(b"GET /status HTTP/1.1\r\n\r\n", &m, &b);
        assert_eq!(status, "200 OK");
        let view: super::super::board::NodeView = serde_json::from_str(&body).unwrap();
        assert!(view.dry_run && view.resizes.len() == 1, "{body}");
    }
}
