//! [`Headroomd`]: a typed client of headroomd over its Unix socket. The channel is made on first
//! use, shared by clones, and dropped after a failure that means headroomd could not be asked, so
//! that the next call connects again (headroomd restarted, socket replaced).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use headroom_proto::v1::{self as pb, headroom_client::HeadroomClient};
use thiserror::Error;
use tonic::transport::Channel;

use crate::{connect::connect_uds, error_chain};

/// The longest any one call to headroomd may take by default (connecting included).
pub const RPC_TIMEOUT: Duration = Duration::from_secs(2);

/// A call to headroomd that did not succeed.
#[derive(Clone, Debug, Error)]
pub enum HeadroomdError {
    /// Nothing answers on the socket.
    #[error("cannot connect to headroomd at {socket}: {message}")]
    Connect {
        /// The socket path.
        socket: PathBuf,
        /// Why, with the error's sources.
        message: String,
    },
    /// The call took longer than the client's timeout.
    #[error("{rpc}: no answer from headroomd within {timeout:?}")]
    Timeout {
        /// The RPC's name (`connect` while connecting).
        rpc: &'static str,
        /// The bound.
        timeout: Duration,
    },
    /// headroomd answered with an error.
    #[error("{rpc}: {code:?}: {message}")]
    Status {
        /// The RPC's name.
        rpc: &'static str,
        /// The gRPC status code.
        code: tonic::Code,
        /// headroomd's message.
        message: String,
    },
}

impl HeadroomdError {
    /// The error of `rpc` that returned `status`.
    pub fn status(rpc: &'static str, status: &tonic::Status) -> Self {
        HeadroomdError::Status {
            rpc,
            code: status.code(),
            message: status.message().to_string(),
        }
    }

    /// headroomd could not be asked (as opposed to: it answered no).
    pub fn is_unreachable(&self) -> bool {
        match self {
            HeadroomdError::Connect { .. } | HeadroomdError::Timeout { .. } => true,
            HeadroomdError::Status { code, .. } => matches!(
                code,
                tonic::Code::Unavailable | tonic::Code::Cancelled | tonic::Code::DeadlineExceeded
            ),
        }
    }
}

/// headroomd at one socket. Clones share the channel.
#[derive(Clone)]
pub struct Headroomd {
    socket: PathBuf,
    timeout: Option<Duration>,
    channel: Arc<tokio::sync::Mutex<Option<Channel>>>,
}

impl Headroomd {
    /// headroomd at `socket`; each call bounded by [`RPC_TIMEOUT`].
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        Headroomd {
            socket: socket.into(),
            timeout: Some(RPC_TIMEOUT),
            channel: Arc::default(),
        }
    }

    /// Each call bounded by `timeout` instead (`None`: unbounded, for an in-process headroomd
    /// whose calls end when the work does).
    pub fn with_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// The socket path.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    async fn bounded<T>(
        &self,
        rpc: &'static str,
        work: impl Future<Output = Result<T, HeadroomdError>>,
    ) -> Result<T, HeadroomdError> {
        match self.timeout {
            None => work.await,
            Some(timeout) => tokio::time::timeout(timeout, work)
                .await
                .unwrap_or(Err(HeadroomdError::Timeout { rpc, timeout })),
        }
    }

    /// The generated client on the shared channel, connecting first if there is none.
    pub async fn client(&self) -> Result<HeadroomClient<Channel>, HeadroomdError> {
        let mut cached = self.channel.lock().await;
        if let Some(channel) = cached.as_ref() {
            return Ok(HeadroomClient::new(channel.clone()));
        }
        let connect = async {
            connect_uds(&self.socket)
                .await
                .map_err(|e| HeadroomdError::Connect {
                    socket: self.socket.clone(),
                    message: error_chain(&e),
                })
        };
        let channel = self.bounded("connect", connect).await?;
        *cached = Some(channel.clone());
        Ok(HeadroomClient::new(channel))
    }

    /// Drops the channel: the next call connects again.
    pub async fn forget(&self) {
        *self.channel.lock().await = None;
    }

    /// One unary call, bounded by the timeout; a connection that failed is forgotten.
    async fn call<T, F, Fut>(&self, rpc: &'static str, f: F) -> Result<T, HeadroomdError>
    where
        F: FnOnce(HeadroomClient<Channel>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let result = async {
            let client = self.client().await?;
            let answer = async {
                f(client)
                    .await
                    .map(tonic::Response::into_inner)
                    .map_err(|status| HeadroomdError::status(rpc, &status))
            };
            self.bounded(rpc, answer).await
        }
        .await;
        if result.as_ref().is_err_and(HeadroomdError::is_unreachable) {
            self.forget().await;
        }
        result
    }

    /// `GetHeadroom`: node figures and reservations, and each Pod's pressure with `include_pods`.
    pub async fn get_headroom(&self, include_pods: bool) -> Result<pb::HeadroomSnapshot, HeadroomdError> {
        self.call("GetHeadroom", |mut c| async move {
            c.get_headroom(pb::GetHeadroomRequest { include_pods }).await
        })
        .await
    }

    /// `WatchHeadroom`: the stream of snapshots (only starting it is bounded).
    pub async fn watch_headroom(
        &self,
        request: pb::WatchHeadroomRequest,
    ) -> Result<tonic::Streaming<pb::HeadroomSnapshot>, HeadroomdError> {
        self.call(
            "WatchHeadroom",
            |mut c| async move { c.watch_headroom(request).await },
        )
        .await
    }

    /// `Reserve`: room in headroomd's ledger for a resize.
    pub async fn reserve(&self, request: pb::ReserveRequest) -> Result<pb::ReserveResponse, HeadroomdError> {
        self.call("Reserve", |mut c| async move { c.reserve(request).await })
            .await
    }

    /// `Release`: gives a reservation's room back.
    pub async fn release(&self, reservation_id: &str) -> Result<pb::ReleaseResponse, HeadroomdError> {
        let request = pb::ReleaseRequest {
            reservation_id: reservation_id.to_string(),
        };
        self.call("Release", |mut c| async move { c.release(request).await })
            .await
    }

    /// `ApplyResize`: writes a Pod's new resources to its cgroups (and consumes its reservation).
    pub async fn apply_resize(
        &self,
        request: pb::ApplyResizeRequest,
    ) -> Result<pb::ApplyResizeResponse, HeadroomdError> {
        self.call(
            "ApplyResize",
            |mut c| async move { c.apply_resize(request).await },
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn unreachable_means_headroomd_could_not_be_asked() {
        let connect = HeadroomdError::Connect {
            socket: "/nowhere".into(),
            message: "No such file or directory".into(),
        };
        assert!(connect.is_unreachable());
        let unavailable = HeadroomdError::status("Reserve", &tonic::Status::unavailable("gone"));
        assert!(unavailable.is_unreachable());
        let refused = HeadroomdError::status("Reserve", &tonic::Status::resource_exhausted("full"));
        assert!(!refused.is_unreachable());
        assert_eq!(refused.to_string(), "Reserve: ResourceExhausted: full");
    }

    #[tokio::test]
    async fn a_missing_socket_is_a_connect_error_and_nothing_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let headroomd = Headroomd::new(dir.path().join("absent.sock"));
        let error = headroomd.get_headroom(false).await.unwrap_err();
        assert!(matches!(error, HeadroomdError::Connect { .. }), "{error}");
        assert!(headroomd.channel.lock().await.is_none());
    }
}
