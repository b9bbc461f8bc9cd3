//! Where cgroups live on this host and which Pod or container each one belongs to.
//!
//! - [`host`]: cgroup v1/v2/hybrid detection and the hierarchies of the cpu and memory controllers.
//! - [`pod_path`]: pure parsing of kubelet (systemd and cgroupfs drivers; containerd, cri-o,
//!   docker) and headroom standalone cgroup paths.
//! - [`index`]: a walk of cgroupfs mapping probe keys (hierarchy, inode) to paths and Pods.
pub mod files;
pub mod host;
pub mod index;
pub mod pod_path;
pub mod resolver;

pub use host::{CgroupHost, Hierarchy, HostError};
pub use index::{CgroupIndex, CgroupInfo};
pub use pod_path::{PodCgroup, parse_pod_path, parse_pod_path_under};
pub use resolver::CgroupfsResolver;
