use std::io;
use std::path::PathBuf;

use crate::CgroupVersion;
use crate::path::PathError;
use crate::values::Setting;

/// A cgroup filesystem error; every variant names the file and keeps the kernel's reason.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("open {}: {source}", path.display())]
    Open { path: PathBuf, source: io::Error },
    #[error("write `{value}` to {}: {source}", path.display())]
    Write {
        path: PathBuf,
        value: String,
        source: io::Error,
    },
    #[error("read {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("parse {}: unexpected content `{content}`", path.display())]
    Parse { path: PathBuf, content: String },
    #[error("create {}: {source}", path.display())]
    Create { path: PathBuf, source: io::Error },
    #[error("remove {}: {source}", path.display())]
    Remove { path: PathBuf, source: io::Error },
    #[error("remove {}: still has processes {pids:?} (v1 refuses to remove a cgroup with tasks)", path.display())]
    Busy { path: PathBuf, pids: Vec<u32> },
    #[error("statfs {}: {source}", path.display())]
    Statfs { path: PathBuf, source: nix::Error },
    #[error("{setting} cannot be written to a cgroup {version:?} cgroup")]
    Unsupported {
        setting: Setting,
        version: CgroupVersion,
    },
    #[error(transparent)]
    Path(#[from] PathError),
}

impl CgroupError {
    /// The kernel's reason, when the error came from a system call.
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match self {
            Self::Open { source, .. }
            | Self::Write { source, .. }
            | Self::Read { source, .. }
            | Self::Create { source, .. }
            | Self::Remove { source, .. } => Some(source.kind()),
            Self::Statfs { source, .. } => Some(io::Error::from(*source).kind()),
            Self::Path(PathError::Inspect { source, .. }) => Some(source.kind()),
            Self::Parse { .. } | Self::Busy { .. } | Self::Unsupported { .. } | Self::Path(_) => None,
        }
    }

    /// The cgroup (or one of its files) does not exist: it was removed, or never created.
    pub fn is_not_found(&self) -> bool {
        self.io_kind() == Some(io::ErrorKind::NotFound)
    }
}
