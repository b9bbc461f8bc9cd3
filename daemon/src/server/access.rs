//! Who may call what: peer credentials of Unix-socket callers (SO_PEERCRED) against allow-lists.

use std::fmt;

use tonic::{Request, Status, transport::server::UdsConnectInfo};

/// The caller, as far as the transport tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// A Unix-socket caller with kernel-checked credentials.
    Unix {
        /// Effective uid.
        uid: u32,
        /// Effective gid.
        gid: u32,
        /// Process id, when the kernel gives one.
        pid: Option<i32>,
    },
    /// No credentials (a transport without SO_PEERCRED).
    Unknown,
}

impl Peer {
    /// The caller of `request`.
    pub fn of<T>(request: &Request<T>) -> Peer {
        match request
            .extensions()
            .get::<UdsConnectInfo>()
            .and_then(|i| i.peer_cred)
        {
            Some(cred) => Peer::Unix {
                uid: cred.uid(),
                gid: cred.gid(),
                pid: cred.pid(),
            },
            None => Peer::Unknown,
        }
    }
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Peer::Unix {
                uid,
                gid,
                pid: Some(pid),
            } => write!(f, "uid={uid} gid={gid} pid={pid}"),
            Peer::Unix { uid, gid, pid: None } => write!(f, "uid={uid} gid={gid}"),
            Peer::Unknown => f.write_str("unknown (no peer credentials)"),
        }
    }
}

/// Allow-lists by uid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessPolicy {
    /// Uids allowed to call `Reserve`, `Release` and `ApplyResize`.
    pub writer_uids: Vec<u32>,
    /// Uids allowed to call the read-only RPCs; `None`: anyone who can open the socket.
    pub reader_uids: Option<Vec<u32>>,
}

impl Default for AccessPolicy {
    /// Root only for state-changing RPCs; reads open to whoever the socket's mode lets in.
    fn default() -> Self {
        Self {
            writer_uids: vec![0],
            reader_uids: None,
        }
    }
}

impl AccessPolicy {
    /// Refuses (and logs) a caller of a state-changing RPC that is not on the writer list.
    pub fn check_writer(&self, peer: &Peer, rpc: &str) -> Result<(), Status> {
        match peer {
            Peer::Unix { uid, .. } if self.writer_uids.contains(uid) => Ok(()),
            _ => {
                tracing::warn!(rpc, %peer, allowed = ?self.writer_uids, "refused: caller not allowed to change state");
                Err(Status::permission_denied(format!(
                    "{rpc} refused: caller {peer} is not on the allow-list for state-changing calls \
                     (allowed uids: {:?}; set `server.writer_uids`)",
                    self.writer_uids
                )))
            }
        }
    }

    /// Refuses (and logs) a reader not on the reader list, when there is one.
    pub fn check_reader(&self, peer: &Peer, rpc: &str) -> Result<(), Status> {
        let Some(readers) = &self.reader_uids else {
            return Ok(());
        };
        match peer {
            Peer::Unix { uid, .. } if readers.contains(uid) || self.writer_uids.contains(uid) => Ok(()),
            _ => {
                tracing::warn!(rpc, %peer, allowed = ?readers, "refused: caller not allowed to read");
                Err(Status::permission_denied(format!(
                    "{rpc} refused: caller {peer} is not on the reader allow-list (allowed uids: {readers:?})"
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn writers_need_credentials_on_the_list() {
        let policy = AccessPolicy::default();
        assert!(
            policy
                .check_writer(
                    &Peer::Unix {
                        uid: 0,
                        gid: 0,
                        pid: Some(1)
                    },
                    "Reserve"
                )
                .is_ok()
        );
        let err = policy
            .check_writer(
                &Peer::Unix {
                    uid: 1000,
                    gid: 1000,
                    pid: Some(7),
                },
                "Reserve",
            )
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::PermissionDenied);
        assert!(err.message().contains("uid=1000"), "{}", err.message());
        assert!(policy.check_writer(&Peer::Unknown, "Release").is_err());
        assert!(policy.check_reader(&Peer::Unknown, "GetHeadroom").is_ok());
        let strict = AccessPolicy {
            reader_uids: Some(vec![42]),
            ..policy
        };
        assert!(
            strict
                .check_reader(
                    &Peer::Unix {
                        uid: 42,
                        gid: 0,
                        pid: None
                    },
                    "ListPods"
                )
                .is_ok()
        );
        assert!(
            strict
                .check_reader(
                    &Peer::Unix {
                        uid: 0,
                        gid: 0,
                        pid: None
                    },
                    "ListPods"
                )
                .is_ok()
        );
        assert!(
            strict
                .check_reader(
                    &Peer::Unix {
                        uid: 7,
                        gid: 0,
                        pid: None
                    },
                    "ListPods"
                )
                .is_err()
        );
    }
}
