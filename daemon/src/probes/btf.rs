//! Kernel struct offsets from BTF (`/sys/kernel/btf/vmlinux`).
//!
//! Rust eBPF has no CO-RE relocations, so the probes read kernel memory at offsets that
//! userspace resolves here and hands over in [`ProbeConfig`].
use std::path::Path;

use btf_rs::{Btf, Type};
use headroom_common::{ProbeConfig, RunqModel, ThrottleModel};

/// What went wrong while reading the kernel's type information.
#[derive(Debug, thiserror::Error)]
pub enum BtfError {
    /// The BTF file could not be read or parsed.
    #[error("cannot read kernel BTF from {path}: {reason} (the kernel needs CONFIG_DEBUG_INFO_BTF=y)")]
    Unreadable {
        /// The file tried.
        path: String,
        /// Why it failed.
        reason: String,
    },
    /// A type the probes need is missing.
    #[error("kernel BTF has no `{0}`")]
    MissingType(String),
    /// A field the probes need is missing.
    #[error("kernel BTF has no field `{field}` in `struct {ty}`")]
    MissingField {
        /// The struct searched.
        ty: String,
        /// The field path searched.
        field: String,
    },
    /// A field is a bitfield or not byte aligned, so a byte read cannot fetch it.
    #[error("field `{field}` of `struct {ty}` is not byte aligned")]
    Unaligned {
        /// The struct.
        ty: String,
        /// The field.
        field: String,
    },
}

/// The kernel's type information, with the look-ups the probes need.
pub struct KernelBtf {
    btf: Btf,
}

impl KernelBtf {
    /// Reads BTF from `path` (normally `/sys/kernel/btf/vmlinux`).
    pub fn from_file(path: &Path) -> Result<Self, BtfError> {
        Btf::from_file(path)
            .map(|btf| Self { btf })
            .map_err(|e| BtfError::Unreadable {
                path: path.display().to_string(),
                reason: e.to_string(),
            })
    }

    fn find_struct(&self, name: &str) -> Result<btf_rs::Struct, BtfError> {
        let types = self
            .btf
            .resolve_types_by_name(name)
            .map_err(|_| BtfError::MissingType(name.into()))?;
        types
            .into_iter()
            .find_map(|t| match t {
                Type::Struct(s) if !s.members.is_empty() => Some(s),
                _ => None,
            })
            .ok_or_else(|| BtfError::MissingType(format!("struct {name}")))
    }

    /// Strips typedefs and qualifiers.
    fn resolve(&self, mut ty: Type) -> Type {
        for _ in 0..16 {
            let next = match &ty {
                Type::Typedef(t) => self.btf.resolve_chained_type(t),
                Type::Const(t) | Type::Volatile(t) | Type::Restrict(t) => self.btf.resolve_chained_type(t),
                Type::TypeTag(t) => self.btf.resolve_chained_type(t),
                _ => return ty,
            };
            match next {
                Ok(next) => ty = next,
                Err(_) => return ty,
            }
        }
        ty
    }

    /// Bit offset of member `name` in `s`, searching anonymous structs and unions.
    fn member_bits(&self, s: &btf_rs::Struct, name: &str) -> Option<(u32, Option<u32>, Type)> {
        for member in &s.members {
            let member_name = self.btf.resolve_name(member).unwrap_or_default();
            if member_name == name {
                let ty = self.btf.resolve_chained_type(member).ok()?;
                return Some((member.bit_offset(), member.bitfield_size(), ty));
            }
            if member_name.is_empty() {
                let inner = self
                    .btf
                    .resolve_chained_type(member)
                    .ok()
                    .map(|t| self.resolve(t));
                if let Some(Type::Struct(inner) | Type::Union(inner)) = inner
                    && let Some((bits, size, ty)) = self.member_bits(&inner, name)
                {
                    return Some((member.bit_offset() + bits, size, ty));
                }
            }
        }
        None
    }

    /// Byte offset of `path` (dot separated, e.g. `se.cfs_rq`) inside `struct ty`.
    pub fn offset_of(&self, ty: &str, path: &str) -> Result<u32, BtfError> {
        let missing = || BtfError::MissingField {
            ty: ty.into(),
            field: path.into(),
        };
        let mut current = self.find_struct(ty)?;
        let mut bits_total = 0u32;
        let mut parts = path.split('.').peekable();
        while let Some(part) = parts.next() {
            let (bits, bitfield, member_ty) = self.member_bits(&current, part).ok_or_else(missing)?;
            if bitfield.is_some_and(|size| size != 0) || bits % 8 != 0 {
                return Err(BtfError::Unaligned {
                    ty: ty.into(),
                    field: path.into(),
                });
            }
            bits_total += bits;
            if parts.peek().is_some() {
                match self.resolve(member_ty) {
                    Type::Struct(s) | Type::Union(s) => current = s,
                    _ => return Err(missing()),
                }
            }
        }
        Ok(bits_total / 8)
    }

    /// Whether `struct ty` has a member `field`.
    pub fn has_field(&self, ty: &str, field: &str) -> bool {
        self.offset_of(ty, field).is_ok()
    }

    /// Value of enumerator `name` in `enum ty`.
    pub fn enum_value(&self, ty: &str, name: &str) -> Result<u32, BtfError> {
        let types = self
            .btf
            .resolve_types_by_name(ty)
            .map_err(|_| BtfError::MissingType(ty.into()))?;
        for t in types {
            if let Type::Enum(e) = t {
                for member in &e.members {
                    if self.btf.resolve_name(member).is_ok_and(|n| n == name) {
                        return Ok(member.val());
                    }
                }
            }
        }
        Err(BtfError::MissingField {
            ty: format!("enum {ty}"),
            field: name.into(),
        })
    }

    /// Fills every offset of [`ProbeConfig`] and picks the throttle model.
    ///
    /// A field a program cannot do without refuses that program only (see
    /// [`ProbeOffsets::refusal`]): the others load. Throttling fields are optional: when
    /// neither model is present the throttle counters stay zero and a warning says why.
    pub fn probe_offsets(&self) -> ProbeOffsets {
        let mut warnings = Vec::new();
        let mut missing: Vec<(Needed, BtfError)> = Vec::new();
        let mut need = |what: Needed, found: Result<u32, BtfError>| {
            found.unwrap_or_else(|e| {
                missing.push((what, e));
                0
            })
        };
        let mut config = ProbeConfig {
            task_cgroups: need(Needed::TaskCgroup, self.offset_of("task_struct", "cgroups")),
            task_pid: need(Needed::TaskPid, self.offset_of("task_struct", "pid")),
            task_tgid: need(Needed::TaskIdentity, self.offset_of("task_struct", "tgid")),
            task_comm: need(Needed::TaskIdentity, self.offset_of("task_struct", "comm")),
            css_set_subsys: need(Needed::TaskCgroup, self.offset_of("css_set", "subsys")),
            css_set_dfl_cgrp: need(Needed::TaskCgroup, self.offset_of("css_set", "dfl_cgrp")),
            css_cgroup: need(
                Needed::TaskCgroup,
                self.offset_of("cgroup_subsys_state", "cgroup"),
            ),
            css_id: need(Needed::TaskPid, self.offset_of("cgroup_subsys_state", "id")),
            cgroup_kn: need(Needed::CgroupId, self.offset_of("cgroup", "kn")),
            kernfs_node_id: need(Needed::CgroupId, self.offset_of("kernfs_node", "id")),
            cgroup_root: need(Needed::CgroupHierarchy, self.offset_of("cgroup", "root")),
            cgroup_root_hierarchy_id: need(
                Needed::CgroupHierarchy,
                self.offset_of("cgroup_root", "hierarchy_id"),
            ),
            cpu_subsys_index: need(
                Needed::TaskCgroup,
                self.enum_value("cgroup_subsys_id", "cpu_cgrp_id"),
            ),
            memory_subsys_index: need(
                Needed::TaskCgroup,
                self.enum_value("cgroup_subsys_id", "memory_cgrp_id"),
            ),
            ..ProbeConfig::default()
        };
        // Linux ≥ 6.18 (task-based throttle, e1fad12dcb66): the task itself carries the flag.
        if let Ok(offset) = self.offset_of("task_struct", "throttled") {
            config.throttle_model = ThrottleModel::TaskThrottled as u32;
            config.task_throttled = offset;
        } else {
            match (
                self.offset_of("task_struct", "se.cfs_rq"),
                self.offset_of("cfs_rq", "throttled"),
            ) {
                (Ok(se_cfs_rq), Ok(throttled)) => {
                    config.throttle_model = ThrottleModel::CfsRqThrottled as u32;
                    config.task_se_cfs_rq = se_cfs_rq;
                    config.cfs_rq_throttled = throttled;
                }
                (Err(e), _) | (_, Err(e)) => {
                    config.throttle_model = ThrottleModel::Unavailable as u32;
                    warnings.push(format!("CFS throttling is not observed: {e}"));
                }
            }
        }
        // Throttled time per run queue needs `se.cfs_rq` (the queue's address is its key);
        // the group's period count and timer make episodes count periods as `nr_throttled`
        // does and end a queue's throttle at the period boundary that refilled it.
        if config.throttle_model != ThrottleModel::Unavailable as u32 {
            match self.offset_of("task_struct", "se.cfs_rq") {
                Ok(offset) => config.task_se_cfs_rq = offset,
                Err(e) => warnings.push(format!("throttled time is not observed: {e}")),
            }
            let bandwidth = (|| {
                Ok::<_, BtfError>((
                    self.offset_of("task_struct", "sched_task_group")?,
                    self.offset_of("task_group", "cfs_bandwidth.nr_periods")?,
                    self.offset_of("task_group", "cfs_bandwidth.period")?,
                    self.offset_of("task_group", "cfs_bandwidth.period_timer.node.expires")?,
                ))
            })();
            match bandwidth {
                Ok((task_group, nr_periods, period, expires)) => {
                    config.task_sched_task_group = task_group;
                    config.tg_nr_periods = nr_periods;
                    config.tg_period = period;
                    config.tg_period_expires = expires;
                }
                Err(e) => warnings.push(format!(
                    "throttle episodes count one period each and end at the switch-in: {e}"
                )),
            }
        }
        // Run-queue latency: the scheduler's own `sched_info` stamps when it is there
        // (CONFIG_SCHED_INFO, set by delay accounting and schedstats), else wakeup probes.
        let sched_info = (|| {
            Ok::<_, BtfError>((
                self.offset_of("task_struct", "sched_info.last_queued")?,
                self.offset_of("task_struct", "se.cfs_rq")?,
                self.offset_of("cfs_rq", "rq")?,
                self.offset_of("rq", "clock")?,
            ))
        })();
        match sched_info {
            Ok((last_queued, se_cfs_rq, cfs_rq_rq, rq_clock)) => {
                config.runq_model = RunqModel::SchedInfo as u32;
                config.task_last_queued = last_queued;
                config.task_se_cfs_rq = se_cfs_rq;
                config.cfs_rq_rq = cfs_rq_rq;
                config.rq_clock = rq_clock;
            }
            Err(e) => {
                config.runq_model = RunqModel::WakeupMap as u32;
                warnings.push(format!(
                    "run-queue latency from wakeup probes (costlier): the scheduler's own stamps are not available: {e}"
                ));
            }
        }
        ProbeOffsets {
            config,
            warnings,
            missing,
        }
    }
}

/// What a program reads from kernel structs, in groups of fields that go together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needed {
    /// A task's cgroup: `task_struct.cgroups` → `css_set` → the controller's cgroup.
    TaskCgroup,
    /// A task's thread id, and the cpu controller's css id (the run-queue slot).
    TaskPid,
    /// A task's process id and command, reported with its events.
    TaskIdentity,
    /// A cgroup's id: `cgroup.kn` → `kernfs_node.id`.
    CgroupId,
    /// A cgroup's hierarchy: `cgroup.root` → `cgroup_root.hierarchy_id`.
    CgroupHierarchy,
}

/// Kernel struct fields each program cannot run without, by program name in the object.
pub const PROGRAM_NEEDS: &[(&str, &[Needed])] = &[
    (
        "sched_switch",
        &[
            Needed::TaskCgroup,
            Needed::CgroupId,
            Needed::TaskPid,
            Needed::TaskIdentity,
        ],
    ),
    ("sched_wakeup", &[Needed::TaskPid]),
    ("sched_wakeup_new", &[Needed::TaskPid]),
    (
        "sched_process_exit",
        &[
            Needed::TaskPid,
            Needed::TaskCgroup,
            Needed::CgroupId,
            Needed::TaskIdentity,
        ],
    ),
    ("memcg_reclaim_begin", &[]),
    ("memcg_reclaim_end", &[Needed::TaskCgroup, Needed::CgroupId]),
    ("direct_reclaim_begin", &[]),
    ("direct_reclaim_end", &[Needed::TaskCgroup, Needed::CgroupId]),
    (
        "oom_mark_victim",
        &[Needed::TaskCgroup, Needed::CgroupId, Needed::TaskIdentity],
    ),
    ("cgroup_mkdir", &[Needed::CgroupId, Needed::CgroupHierarchy]),
    ("cgroup_rmdir", &[Needed::CgroupId, Needed::CgroupHierarchy]),
];

/// The probes' configuration for this kernel, and what its BTF lacked.
pub struct ProbeOffsets {
    /// Offsets and models; a missing field's offset is 0 and its programs are refused.
    pub config: ProbeConfig,
    /// Things that work less well than they could (optional fields missing).
    pub warnings: Vec<String>,
    /// Fields a program needs that this BTF lacks.
    pub missing: Vec<(Needed, BtfError)>,
}

impl ProbeOffsets {
    /// Why `program` cannot be loaded with this BTF (the first missing field it needs, by
    /// name), or `None` when it has every field it reads. A program not in
    /// [`PROGRAM_NEEDS`] is refused: loading it blind could read the wrong memory.
    pub fn refusal(&self, program: &str) -> Option<String> {
        let Some((_, needs)) = PROGRAM_NEEDS.iter().find(|(name, _)| *name == program) else {
            return Some(format!("no BTF requirements are known for program `{program}`"));
        };
        self.missing
            .iter()
            .find(|(what, _)| needs.contains(what))
            .map(|(_, e)| format!("refused: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel() -> Option<KernelBtf> {
        let path = Path::new("/sys/kernel/btf/vmlinux");
        if !path.exists() {
            eprintln!("SKIPPED (no /sys/kernel/btf/vmlinux): kernel BTF offsets");
            assert!(
                std::env::var_os("HEADROOM_REQUIRE_PRIVILEGED").is_none(),
                "kernel BTF is required on this machine"
            );
            return None;
        }
        Some(KernelBtf::from_file(path).expect("parse kernel BTF"))
    }

    #[test]
    fn offsets_resolve_on_this_kernel() {
        let Some(btf) = kernel() else { return };
        let offsets = btf.probe_offsets();
        assert!(offsets.missing.is_empty(), "{:?}", offsets.missing);
        let config = offsets.config;
        // `pid` and `tgid` are adjacent `pid_t`s in every kernel since 2.6.
        assert_eq!(config.task_tgid, config.task_pid + 4);
        assert!(config.kernfs_node_id > 0 || config.cgroup_kn > 0);
        assert_ne!(config.cpu_subsys_index, config.memory_subsys_index);
    }

    #[test]
    fn this_kernel_uses_the_sched_info_runq_model() {
        let Some(btf) = kernel() else { return };
        let ProbeOffsets { config, warnings, .. } = btf.probe_offsets();
        // 6.18 with delay accounting: the cheaper model must be picked here.
        assert_eq!(config.runq_model, RunqModel::SchedInfo as u32, "{warnings:?}");
        assert!(config.task_last_queued > 0 && config.cfs_rq_rq > 0 && config.task_se_cfs_rq > 0);
    }

    #[test]
    fn every_program_has_its_kernel_fields_listed() {
        for (program, _) in crate::probes::PROGRAMS {
            assert!(
                PROGRAM_NEEDS.iter().any(|(name, _)| name == program),
                "{program} is missing from PROGRAM_NEEDS"
            );
        }
    }

    #[test]
    fn a_missing_field_refuses_only_the_programs_that_read_it() {
        let offsets = ProbeOffsets {
            config: ProbeConfig::default(),
            warnings: Vec::new(),
            missing: vec![(
                Needed::CgroupHierarchy,
                BtfError::MissingField {
                    ty: "cgroup_root".into(),
                    field: "hierarchy_id".into(),
                },
            )],
        };
        assert_eq!(
            offsets.refusal("cgroup_mkdir").as_deref(),
            Some("refused: kernel BTF has no field `hierarchy_id` in `struct cgroup_root`")
        );
        assert_eq!(offsets.refusal("sched_switch"), None);
        assert_eq!(offsets.refusal("oom_mark_victim"), None);
        assert!(
            offsets.refusal("not_a_program").is_some(),
            "unknown programs are refused"
        );
    }

    #[test]
    fn nested_and_missing_fields() {
        let Some(btf) = kernel() else { return };
        let se = btf.offset_of("task_struct", "se").expect("se");
        let vruntime = btf.offset_of("sched_entity", "vruntime").expect("vruntime");
        assert_eq!(
            btf.offset_of("task_struct", "se.vruntime").expect("se.vruntime"),
            se + vruntime
        );
        assert!(matches!(
            btf.offset_of("task_struct", "no_such_field"),
            Err(BtfError::MissingField { .. })
        ));
        assert!(matches!(
            btf.offset_of("no_such_struct_xyz", "x"),
            Err(BtfError::MissingType(_))
        ));
    }
}
