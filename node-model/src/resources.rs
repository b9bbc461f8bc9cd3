//! The two resources the node model counts: CPU in millicores and memory in bytes.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::quantity::{format_cpu_millis, format_memory_bytes};

/// A Kubernetes resource name, spelled as in a `ResourceList`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResourceName {
    Cpu,
    Memory,
}

impl ResourceName {
    /// In the order the kubelet and the scheduler check them (cpu before memory), which decides
    /// which resource a "didn't have enough" message names.
    pub const ALL: [ResourceName; 2] = [ResourceName::Cpu, ResourceName::Memory];

    pub fn as_str(self) -> &'static str {
        match self {
            ResourceName::Cpu => "cpu",
            ResourceName::Memory => "memory",
        }
    }
}

impl fmt::Display for ResourceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An amount of node resources. Values are signed so that a deficit (negative headroom) can be
/// represented; amounts parsed from Kubernetes objects are never negative.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Resources {
    pub cpu_millis: i64,
    pub memory_bytes: i64,
}

impl Resources {
    pub const ZERO: Resources = Resources {
        cpu_millis: 0,
        memory_bytes: 0,
    };

    pub const fn new(cpu_millis: i64, memory_bytes: i64) -> Self {
        Resources {
            cpu_millis,
            memory_bytes,
        }
    }

    /// The amount of one resource, in its counting unit (millicores or bytes).
    pub fn get(&self, name: ResourceName) -> i64 {
        match name {
            ResourceName::Cpu => self.cpu_millis,
            ResourceName::Memory => self.memory_bytes,
        }
    }

    pub fn checked_add(self, other: Resources) -> Option<Resources> {
        Some(Resources {
            cpu_millis: self.cpu_millis.checked_add(other.cpu_millis)?,
            memory_bytes: self.memory_bytes.checked_add(other.memory_bytes)?,
        })
    }

    pub fn checked_sub(self, other: Resources) -> Option<Resources> {
        Some(Resources {
            cpu_millis: self.cpu_millis.checked_sub(other.cpu_millis)?,
            memory_bytes: self.memory_bytes.checked_sub(other.memory_bytes)?,
        })
    }

    pub fn saturating_add(self, other: Resources) -> Resources {
        Resources {
            cpu_millis: self.cpu_millis.saturating_add(other.cpu_millis),
            memory_bytes: self.memory_bytes.saturating_add(other.memory_bytes),
        }
    }

    pub fn saturating_sub(self, other: Resources) -> Resources {
        Resources {
            cpu_millis: self.cpu_millis.saturating_sub(other.cpu_millis),
            memory_bytes: self.memory_bytes.saturating_sub(other.memory_bytes),
        }
    }

    /// True when every resource of `self` is at most the same resource of `other`.
    pub fn fits_within(&self, other: &Resources) -> bool {
        self.cpu_millis <= other.cpu_millis && self.memory_bytes <= other.memory_bytes
    }

    /// Per-resource minimum.
    pub fn min(self, other: Resources) -> Resources {
        Resources {
            cpu_millis: self.cpu_millis.min(other.cpu_millis),
            memory_bytes: self.memory_bytes.min(other.memory_bytes),
        }
    }

    /// Per-resource maximum.
    pub fn max(self, other: Resources) -> Resources {
        Resources {
            cpu_millis: self.cpu_millis.max(other.cpu_millis),
            memory_bytes: self.memory_bytes.max(other.memory_bytes),
        }
    }

    /// The resources of `self` that exceed `available`, in check order (cpu, then memory).
    pub fn insufficient(&self, available: &Resources) -> Vec<ResourceName> {
        ResourceName::ALL
            .into_iter()
            .filter(|name| self.get(*name) > available.get(*name))
            .collect()
    }

    pub fn is_zero(&self) -> bool {
        *self == Resources::ZERO
    }
}

impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cpu={} memory={}",
            format_cpu_millis(self.cpu_millis),
            format_memory_bytes(self.memory_bytes)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic() {
        let a = Resources::new(3000, 500 << 20);
        let b = Resources::new(4000, 1 << 30);
        assert_eq!(
            a.checked_add(b),
            Some(Resources::new(7000, (500 << 20) + (1 << 30)))
        );
        assert_eq!(
            a.checked_sub(b),
            Some(Resources::new(-1000, (500 << 20) - (1 << 30)))
        );
        assert_eq!(
            Resources::new(i64::MAX, 0).checked_add(Resources::new(1, 0)),
            None
        );
        assert!(a.fits_within(&Resources::new(3000, 500 << 20)));
        assert!(!b.fits_within(&a));
        assert_eq!(a.max(Resources::new(1, 1 << 40)), Resources::new(3000, 1 << 40));
        assert_eq!(b.insufficient(&a), vec![ResourceName::Cpu, ResourceName::Memory]);
        assert_eq!(
            Resources::new(1, 2 << 30).insufficient(&b),
            vec![ResourceName::Memory]
        );
        assert!(a.insufficient(&b).is_empty());
        assert_eq!(a.to_string(), "cpu=3 memory=500Mi");
    }
}
