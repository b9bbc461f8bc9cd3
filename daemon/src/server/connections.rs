//! The accept loop of each listener (the Unix socket, and TCP with mutual TLS), in front of
//! tonic: what a connection may cost before it is a gRPC client.
//!
//! - At most [`ConnectionLimits::max_connections`] are open at once on each listener; one over
//!   the cap is closed as soon as it is accepted, and counted. Each costs a file descriptor and
//!   about 15 KB (a TLS one more).
//! - On the Unix socket a connection must send the 24-byte HTTP/2 client preface within
//!   [`ConnectionLimits::handshake_timeout`], or it is closed. hyper has no such deadline for
//!   HTTP/2 (its keep-alive pings start only once the connection is up), so the preface is read
//!   here and replayed to hyper. Reading a fixed prefix is simpler than a hyper-util connection
//!   builder (tonic owns that one) and cannot mis-parse: a gRPC client sends exactly these bytes
//!   first, anything else is closed at once (tonic serves HTTP/2 only). On TCP the TLS handshake
//!   comes first, and tonic's acceptor gives it its own deadline (`tls::HANDSHAKE_TIMEOUT`).
//! - An accept that fails for want of file descriptors (`EMFILE`, `ENFILE`) is retried after
//!   [`ACCEPT_BACKOFF`], with one WARN a minute, and counted; tonic's own loop retries at once,
//!   which spun a core while the limit lasted. Each handshake runs on its own task, so a silent
//!   connection never delays the next accept.

use std::{
    io,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    task::{Context, Poll},
    time::{Duration, Instant},
};

use tokio::{
    io::{AsyncRead, AsyncReadExt as _, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream, UnixListener, UnixStream},
    sync::{OwnedSemaphorePermit, Semaphore, mpsc},
};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::Connected;

/// What every HTTP/2 client sends first (RFC 9113 §3.4).
pub const HTTP2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// How long the accept loop waits after running out of file descriptors.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

/// At most one WARN per kind of accept trouble in this time.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// Limits of the Unix socket's connections.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Open connections at most, handshaking ones included (`server.max_connections`,
    /// `--max-connections`).
    pub max_connections: usize,
    /// Time a connection has to send the HTTP/2 preface.
    pub handshake_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            // Far above what a node's clients open (the shim, headroomctl, a probe, a few
            // watchers), far below the common soft limit of 1024 descriptors.
            max_connections: 256,
            handshake_timeout: Duration::from_secs(5),
        }
    }
}

/// The accept loop's counters, for `/metrics` and tests.
#[derive(Debug, Default)]
pub struct ConnectionStats {
    accepted: AtomicU64,
    open: AtomicU64,
    over_cap: AtomicU64,
    handshake_failed: AtomicU64,
    out_of_fds: AtomicU64,
}

impl ConnectionStats {
    /// Connections accepted (over-cap ones included).
    pub fn accepted_total(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    /// Connections open now (handshaking or served).
    pub fn open(&self) -> u64 {
        self.open.load(Ordering::Relaxed)
    }

    /// Connections closed at once because [`ConnectionLimits::max_connections`] were open.
    pub fn over_cap_total(&self) -> u64 {
        self.over_cap.load(Ordering::Relaxed)
    }

    /// Connections closed for not sending the HTTP/2 preface in time (or something else).
    pub fn handshake_failed_total(&self) -> u64 {
        self.handshake_failed.load(Ordering::Relaxed)
    }

    /// Accepts that failed for want of file descriptors (each followed by [`ACCEPT_BACKOFF`]).
    pub fn out_of_fds_total(&self) -> u64 {
        self.out_of_fds.load(Ordering::Relaxed)
    }
}

/// An accepted connection under the cap (on the Unix socket, one that sent the preface: it is
/// replayed to hyper before the socket is read). Holds its place until hyper drops it.
pub struct Admitted<S = UnixStream> {
    stream: S,
    /// Bytes of [`HTTP2_PREFACE`] not yet replayed.
    replay: usize,
    _slot: Slot,
}

/// A place under the cap; counted in [`ConnectionStats::open`] while it lives.
struct Slot {
    _permit: OwnedSemaphorePermit,
    stats: Arc<ConnectionStats>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.stats.open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Admitted<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.replay > 0 {
            let from = HTTP2_PREFACE.len() - this.replay;
            let n = this.replay.min(buf.remaining());
            buf.put_slice(&HTTP2_PREFACE[from..from + n]);
            this.replay -= n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.stream).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Admitted<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, data)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

impl<S: Connected> Connected for Admitted<S> {
    // The access layer reads the peer's credentials from it (SO_PEERCRED on the Unix socket,
    // the certificate under TLS, which tonic wraps around this).
    type ConnectInfo = S::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}

/// A listener the accept loop serves.
pub trait Listen: Send + Sync + 'static {
    type Stream: AsyncRead + AsyncWrite + Connected + Unpin + Send + 'static;
    /// Whether the loop reads the HTTP/2 preface itself: in plaintext, yes; under TLS the
    /// handshake comes first and tonic's acceptor has its deadline.
    const READS_PREFACE: bool;
    fn accept(&self) -> impl std::future::Future<Output = io::Result<Self::Stream>> + Send;
}

impl Listen for UnixListener {
    type Stream = UnixStream;
    const READS_PREFACE: bool = true;
    async fn accept(&self) -> io::Result<UnixStream> {
        UnixListener::accept(self).await.map(|(stream, _)| stream)
    }
}

impl Listen for TcpListener {
    type Stream = TcpStream;
    const READS_PREFACE: bool = false;
    async fn accept(&self) -> io::Result<TcpStream> {
        let (stream, _) = TcpListener::accept(self).await?;
        // Small gRPC frames: as tonic's own TcpIncoming does with `with_nodelay`.
        stream.set_nodelay(true)?;
        Ok(stream)
    }
}

/// Accepts on `listener` until the returned stream (tonic's incoming) is dropped; yields the
/// connections under the cap (on the Unix socket, those that sent the preface in time).
pub fn accept<L: Listen>(
    listener: L,
    limits: ConnectionLimits,
    stats: Arc<ConnectionStats>,
) -> ReceiverStream<io::Result<Admitted<L::Stream>>> {
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(accept_loop(listener, limits, stats, tx));
    ReceiverStream::new(rx)
}

async fn accept_loop<L: Listen>(
    listener: L,
    limits: ConnectionLimits,
    stats: Arc<ConnectionStats>,
    tx: mpsc::Sender<io::Result<Admitted<L::Stream>>>,
) {
    let cap = Arc::new(Semaphore::new(limits.max_connections));
    let mut over_cap_warn = Warn::default();
    let mut accept_warn = Warn::default();
    loop {
        let accepted = tokio::select! {
            // tonic dropped its incoming: the server is stopping; stop accepting.
            () = tx.closed() => return,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok(stream) => stream,
            Err(e) => {
                let out_of_fds = matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE));
                if out_of_fds {
                    stats.out_of_fds.fetch_add(1, Ordering::Relaxed);
                }
                if let Some(suppressed) = accept_warn.due() {
                    tracing::warn!(
                        error = %e,
                        suppressed,
                        open = stats.open(),
                        "accept on the gRPC socket failed; retrying every {} ms",
                        ACCEPT_BACKOFF.as_millis()
                    );
                }
                // Every accept error is the kernel's, and none clears by retrying at once.
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        stats.accepted.fetch_add(1, Ordering::Relaxed);
        let Ok(permit) = cap.clone().try_acquire_owned() else {
            stats.over_cap.fetch_add(1, Ordering::Relaxed);
            if let Some(suppressed) = over_cap_warn.due() {
                tracing::warn!(
                    max_connections = limits.max_connections,
                    suppressed,
                    "gRPC connection refused: server.max_connections are open"
                );
            }
            drop(stream);
            continue;
        };
        stats.open.fetch_add(1, Ordering::Relaxed);
        let slot = Slot {
            _permit: permit,
            stats: stats.clone(),
        };
        if !L::READS_PREFACE {
            let admitted = Admitted {
                stream,
                replay: 0,
                _slot: slot,
            };
            if tx.send(Ok(admitted)).await.is_err() {
                return;
            }
            continue;
        }
        let (tx, stats, timeout) = (tx.clone(), stats.clone(), limits.handshake_timeout);
        tokio::spawn(async move {
            match tokio::time::timeout(timeout, preface(stream)).await {
                Ok(Ok(stream)) => {
                    let admitted = Admitted {
                        stream,
                        replay: HTTP2_PREFACE.len(),
                        _slot: slot,
                    };
                    // Refused only when the server is stopping: the connection is dropped.
                    let _ = tx.send(Ok(admitted)).await;
                }
                Ok(Err(e)) => {
                    stats.handshake_failed.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(error = %e, "gRPC connection closed before it was HTTP/2");
                }
                Err(_) => {
                    stats.handshake_failed.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(?timeout, "gRPC connection closed: no HTTP/2 preface in time");
                }
            }
        });
    }
}

/// Reads the HTTP/2 client preface; an error if the peer sends anything else or hangs up.
async fn preface<S: AsyncRead + Unpin>(mut stream: S) -> io::Result<S> {
    let mut head = [0u8; HTTP2_PREFACE.len()];
    stream.read_exact(&mut head).await?;
    if &head != HTTP2_PREFACE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not the HTTP/2 client preface",
        ));
    }
    Ok(stream)
}

/// One WARN per [`WARN_EVERY`]; `due` says how many were held back since the last one.
#[derive(Default)]
struct Warn {
    last: Option<Instant>,
    suppressed: u64,
}

impl Warn {
    fn due(&mut self) -> Option<u64> {
        let now = Instant::now();
        if self.last.is_some_and(|t| now.duration_since(t) < WARN_EVERY) {
            self.suppressed += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.suppressed))
    }
}

/// Raises the soft limit on open files to the hard limit (logged, old and new): under systemd
/// and containerd the soft limit is often 1024, a few hundred connections from exhaustion.
/// tokio uses epoll, so descriptors above 1024 are safe.
pub fn raise_open_file_limit() -> io::Result<(u64, u64)> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(io::Error::from)?;
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).map_err(io::Error::from)?;
        tracing::info!(
            old = soft,
            new = hard,
            "raised the open-file soft limit (RLIMIT_NOFILE)"
        );
    } else {
        tracing::info!(limit = soft, "open-file soft limit is already the hard limit");
    }
    Ok((soft, hard))
}
