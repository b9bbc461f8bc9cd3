//! The v1 `cpuacct` controller: `cpuacct.usage`, the CPU time a cgroup used (v2 reports it in
//! `cpu.stat`). v1 mounts it as its own hierarchy or together with `cpu`.

use std::path::Path;

/// `cpuacct.usage`.
pub const USAGE: &str = "cpuacct.usage";

/// Reads `dir/cpuacct.usage` (ns); `None` when it is missing or not a number.
pub fn read_usage_ns(dir: &Path) -> Option<u64> {
    crate::read_text(dir, USAGE).and_then(|t| t.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_reads_and_refuses_garbage() {
        let tmp = tempfile::tempdir().expect("tempdir");
        assert_eq!(read_usage_ns(tmp.path()), None);
        std::fs::write(tmp.path().join(USAGE), "123456789\n").expect("write");
        assert_eq!(read_usage_ns(tmp.path()), Some(123_456_789));
        std::fs::write(tmp.path().join(USAGE), "x\n").expect("write");
        assert_eq!(read_usage_ns(tmp.path()), None);
    }
}
