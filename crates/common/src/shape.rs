//! The shape of a node: exactly what a tenant asks for and what a plan must match.

use std::fmt;

use serde::{Deserialize, Serialize};

/// CPU architecture of a plan or image.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Architecture {
    #[default]
    X86_64,
    Arm64,
}

impl fmt::Display for Architecture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Architecture::X86_64 => "x86_64",
            Architecture::Arm64 => "arm64",
        })
    }
}

/// vCPUs, memory in GiB, architecture and extra disks (GiB each).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shape {
    pub vcpus: u32,
    pub memory_gib: u32,
    #[serde(default)]
    pub arch: Architecture,
    #[serde(default)]
    pub disks_gib: Vec<u32>,
}

impl Shape {
    /// Ordering for lists a person reads: vCPUs, then memory, then architecture.
    pub fn list_key(&self) -> (u32, u32, Architecture) {
        (self.vcpus, self.memory_gib, self.arch)
    }

    /// At most `count` of `offered` nearest to this shape (same architecture first, then by
    /// how far the vCPUs and then the memory are), in [`Shape::list_key`] order.
    pub fn nearest(&self, offered: &[Shape], count: usize) -> Vec<Shape> {
        let distance = |s: &Shape| {
            (
                s.arch != self.arch,
                s.vcpus.abs_diff(self.vcpus),
                s.memory_gib.abs_diff(self.memory_gib),
            )
        };
        let mut by_distance: Vec<&Shape> = offered.iter().collect();
        by_distance.sort_by_key(|s| (distance(s), s.list_key()));
        by_distance.dedup();
        let mut nearest: Vec<Shape> = by_distance.into_iter().take(count).cloned().collect();
        nearest.sort_by_key(Shape::list_key);
        nearest
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} vCPU · {} GiB", self.vcpus, self.memory_gib)?;
        if self.arch != Architecture::X86_64 {
            write!(f, " · {}", self.arch)?;
        }
        for disk in &self.disks_gib {
            write!(f, " · +{disk} GiB disk")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_in_tenant_words() {
        let shape = Shape {
            vcpus: 2,
            memory_gib: 4,
            arch: Architecture::X86_64,
            disks_gib: vec![],
        };
        assert_eq!(shape.to_string(), "2 vCPU · 4 GiB");
        let arm = Shape {
            vcpus: 4,
            memory_gib: 8,
            arch: Architecture::Arm64,
            disks_gib: vec![50],
        };
        assert_eq!(arm.to_string(), "4 vCPU · 8 GiB · arm64 · +50 GiB disk");
    }
}
