//! The one gate of the privileged tests (root, real cgroups, real eBPF).
//!
//! A test that cannot run here says `SKIPPED <test>: <reason>` and passes, except where the
//! privileged tests must run: `cargo xtask test` as root and the kernel-test guest set
//! `HEADROOM_REQUIRE_PRIVILEGED=1`, and there the same condition is a failure, never a silent
//! pass.

use std::path::Path;

/// Set to `1` where the privileged tests must run.
pub const REQUIRE_PRIVILEGED: &str = "HEADROOM_REQUIRE_PRIVILEGED";
/// Set to `1` where the tests that need a pure cgroup v2 host must run (the kernel-test guest).
pub const REQUIRE_CGROUP_V2: &str = "HEADROOM_REQUIRE_CGROUP_V2";

/// Whether `variable` is `1`.
fn required_by(variable: &str) -> bool {
    std::env::var_os(variable).is_some_and(|v| v == "1")
}

/// Whether the privileged tests must run here.
pub fn privileged_required() -> bool {
    required_by(REQUIRE_PRIVILEGED)
}

/// Whether `test` may run: `reason` is why it cannot (`None`: it can). Returns false after
/// printing `SKIPPED`, or panics where [`REQUIRE_PRIVILEGED`] is `1`.
pub fn privileged(test: &str, reason: Option<String>) -> bool {
    gate(test, reason, REQUIRE_PRIVILEGED)
}

/// [`privileged`] for a test that needs a pure cgroup v2 host ([`REQUIRE_CGROUP_V2`]).
pub fn pure_cgroup_v2(test: &str, reason: Option<String>) -> bool {
    gate(test, reason, REQUIRE_CGROUP_V2)
}

fn gate(test: &str, reason: Option<String>, variable: &str) -> bool {
    let Some(reason) = reason else {
        return true;
    };
    assert!(
        !required_by(variable),
        "{test}: privileged test cannot run ({reason}) but {variable}=1"
    );
    eprintln!("SKIPPED {test}: {reason}");
    false
}

/// Why a test that needs root cannot run (`None` as root).
pub fn not_root() -> Option<String> {
    (!nix::unistd::geteuid().is_root()).then(|| "needs root".to_owned())
}

/// Why a test that loads headroom's probes cannot run: not root, no kernel BTF, or the probe
/// object not built (`cargo xtask build-ebpf`). `probe_object` is the object headroomd embeds
/// (the binary carries it: in a guest there is no build tree to read it from).
pub fn no_probes(probe_object: &[u8]) -> Option<String> {
    not_root()
        .or_else(|| {
            (!Path::new("/sys/kernel/btf/vmlinux").exists())
                .then(|| "kernel has no BTF (/sys/kernel/btf/vmlinux)".to_owned())
        })
        .or_else(|| {
            probe_object
                .is_empty()
                .then(|| "probes not built (run `cargo xtask build-ebpf`)".to_owned())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_that_can_run_runs_and_one_that_cannot_skips_or_fails() {
        assert!(privileged("can-run", None));
        // Without the requirement a reason skips; with it (as `cargo xtask test` runs as root)
        // the same reason panics.
        if privileged_required() {
            let caught = std::panic::catch_unwind(|| privileged("cannot-run", Some("reason".into())));
            assert!(caught.is_err());
        } else {
            assert!(!privileged("cannot-run", Some("reason".into())));
        }
    }
}
