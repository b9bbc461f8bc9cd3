//! The v1 `cpuacct` controller: `cpuacct.usage`, the CPU time a cgroup used in ns (v2 reports
//! it in `cpu.stat`). v1 mounts it as its own hierarchy or together with `cpu`; it is read with
//! the cgroup's other statistics ([`crate::stats`]).

/// `cpuacct.usage`.
pub const USAGE: &str = "cpuacct.usage";
