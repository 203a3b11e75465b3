//! The zone's mesh range, its split into one prefix per project, the addresses inside a
//! project prefix, and the check that the zone's ranges do not overlap.
//!
//! Allocation is a pure choice over what is taken: the caller (the store) passes every
//! prefix or address that is in use *or in quarantine*, so a released one is not handed out
//! again until its quarantine is over. The lowest free one is chosen, which keeps plans
//! deterministic and easy to read.

use std::collections::BTreeSet;
use std::fmt;
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

/// The default mesh range of a zone.
pub const DEFAULT_RANGE: &str = "10.88.0.0/16";
/// The default length of each project's prefix (254 members per project).
pub const DEFAULT_PROJECT_PREFIX_LEN: u8 = 24;
/// The longest project prefix a range may be split into (/30: one member).
pub const LONGEST_PROJECT_PREFIX: u8 = 30;

/// Why a mesh range was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    #[error("mesh range {0}: not an IPv4 network such as 10.88.0.0/16")]
    Syntax(String),
    #[error(
        "mesh range {range}: {range} is not the network address of its prefix (did you mean {network}?)"
    )]
    NotNetwork { range: Ipv4Net, network: Ipv4Net },
    #[error(
        "mesh range {0}: must be a private range (10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16)"
    )]
    NotPrivate(Ipv4Net),
    #[error(
        "mesh project prefix /{len}: must be at least as long as the range (/{range_len}) and at most /{LONGEST_PROJECT_PREFIX}"
    )]
    ProjectPrefix { len: u8, range_len: u8 },
}

/// A zone's mesh range and the length of the prefix each project gets from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeshRange {
    range: Ipv4Net,
    project_prefix_len: u8,
}

impl Default for MeshRange {
    fn default() -> Self {
        MeshRange::parse(DEFAULT_RANGE, DEFAULT_PROJECT_PREFIX_LEN).expect("the default is valid")
    }
}

impl MeshRange {
    /// A range from its text (`10.88.0.0/16`) and the project prefix length.
    pub fn parse(text: &str, project_prefix_len: u8) -> Result<MeshRange, RangeError> {
        let range: Ipv4Net = text
            .trim()
            .parse()
            .map_err(|_| RangeError::Syntax(text.to_string()))?;
        MeshRange::new(range, project_prefix_len)
    }

    pub fn new(range: Ipv4Net, project_prefix_len: u8) -> Result<MeshRange, RangeError> {
        if range.trunc() != range {
            return Err(RangeError::NotNetwork {
                range,
                network: range.trunc(),
            });
        }
        if !range.network().is_private() || !range.broadcast().is_private() {
            return Err(RangeError::NotPrivate(range));
        }
        if project_prefix_len < range.prefix_len() || project_prefix_len > LONGEST_PROJECT_PREFIX {
            return Err(RangeError::ProjectPrefix {
                len: project_prefix_len,
                range_len: range.prefix_len(),
            });
        }
        Ok(MeshRange {
            range,
            project_prefix_len,
        })
    }

    pub fn range(&self) -> Ipv4Net {
        self.range
    }

    pub fn project_prefix_len(&self) -> u8 {
        self.project_prefix_len
    }

    /// How many project prefixes the range holds.
    pub fn capacity(&self) -> u64 {
        1u64 << (self.project_prefix_len - self.range.prefix_len())
    }

    /// The lowest project prefix that is not in `taken` (in use or in quarantine); `None`
    /// when every one is.
    pub fn allocate_project(&self, taken: &BTreeSet<Ipv4Net>) -> Option<Ipv4Net> {
        self.range
            .subnets(self.project_prefix_len)
            .expect("the project prefix length was checked")
            .find(|prefix| !taken.contains(prefix))
    }

    /// True when `prefix` is one of this range's project prefixes.
    pub fn holds_project(&self, prefix: Ipv4Net) -> bool {
        prefix.prefix_len() == self.project_prefix_len && self.range.contains(&prefix)
    }
}

/// The lowest member address of `prefix` that is not in `taken` (in use or in quarantine).
/// The network and broadcast addresses are never handed out, nor the first host address,
/// which stays free for a future router of the prefix.
pub fn allocate_address(prefix: Ipv4Net, taken: &BTreeSet<Ipv4Addr>) -> Option<Ipv4Addr> {
    prefix
        .hosts()
        .skip(1)
        .find(|address| !taken.contains(address))
}

/// The default workload range: every project's replicas take their addresses from it.
pub const DEFAULT_WORKLOAD_RANGE: &str = "10.96.0.0/16";
/// The default length of each node's workload subnet (253 replicas per node).
pub const DEFAULT_WORKLOAD_PREFIX_LEN: u8 = 24;

/// Why a workload range was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadRangeError {
    #[error("workload range {0}: not an IPv4 network such as 10.96.0.0/16")]
    Syntax(String),
    #[error(
        "workload range {range}: {range} is not the network address of its prefix (did you mean {network}?)"
    )]
    NotNetwork { range: Ipv4Net, network: Ipv4Net },
    #[error(
        "workload range {0}: must be a private range (10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16)"
    )]
    NotPrivate(Ipv4Net),
    #[error(
        "workload subnets /{len}: must be between /{range_len} (the range) and /29 (five replicas)"
    )]
    NodePrefix { len: u8, range_len: u8 },
    #[error(
        "workload range {range} holds {subnets} node subnets of /{len}, but a project of the mesh \
         (/{project_len}) has up to {members} members: use a range of /{needed} or wider, or \
         longer node subnets"
    )]
    TooSmall {
        range: Ipv4Net,
        len: u8,
        subnets: u64,
        project_len: u8,
        members: u64,
        needed: u8,
    },
}

/// The range replicas take their addresses from, and how it is cut into node subnets.
///
/// Every project uses the whole range: projects' meshes never reach each other, so their
/// replicas may share addresses. A node's subnet follows from its address on its project's
/// mesh (the n-th address of the project prefix has the n-th subnet of the range), so there
/// is nothing more to allocate, reclaim or quarantine: the mesh address already is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkloadRange {
    range: Ipv4Net,
    node_prefix_len: u8,
}

impl Default for WorkloadRange {
    fn default() -> Self {
        WorkloadRange::parse(DEFAULT_WORKLOAD_RANGE, DEFAULT_WORKLOAD_PREFIX_LEN)
            .expect("the default is valid")
    }
}

impl WorkloadRange {
    /// A range from its text (`10.96.0.0/16`) and the length of each node's subnet.
    pub fn parse(text: &str, node_prefix_len: u8) -> Result<WorkloadRange, WorkloadRangeError> {
        let range: Ipv4Net = text
            .trim()
            .parse()
            .map_err(|_| WorkloadRangeError::Syntax(text.to_string()))?;
        WorkloadRange::new(range, node_prefix_len)
    }

    pub fn new(range: Ipv4Net, node_prefix_len: u8) -> Result<WorkloadRange, WorkloadRangeError> {
        if range.trunc() != range {
            return Err(WorkloadRangeError::NotNetwork {
                range,
                network: range.trunc(),
            });
        }
        if !range.network().is_private() || !range.broadcast().is_private() {
            return Err(WorkloadRangeError::NotPrivate(range));
        }
        if node_prefix_len < range.prefix_len() || node_prefix_len > 29 {
            return Err(WorkloadRangeError::NodePrefix {
                len: node_prefix_len,
                range_len: range.prefix_len(),
            });
        }
        Ok(WorkloadRange {
            range,
            node_prefix_len,
        })
    }

    pub fn range(&self) -> Ipv4Net {
        self.range
    }

    pub fn node_prefix_len(&self) -> u8 {
        self.node_prefix_len
    }

    /// Refuses a range that has fewer node subnets than a project of `mesh` has addresses.
    pub fn fits(&self, mesh: &MeshRange) -> Result<(), WorkloadRangeError> {
        let members_bits = 32 - mesh.project_prefix_len();
        let subnet_bits = self.node_prefix_len - self.range.prefix_len();
        if subnet_bits >= members_bits {
            return Ok(());
        }
        Err(WorkloadRangeError::TooSmall {
            range: self.range,
            len: self.node_prefix_len,
            subnets: 1u64 << subnet_bits,
            project_len: mesh.project_prefix_len(),
            members: 1u64 << members_bits,
            needed: self.node_prefix_len.saturating_sub(members_bits),
        })
    }

    /// The workload subnet of the member at `address` of project prefix `project`; `None`
    /// when the address is outside the prefix or the range has no subnet for it.
    pub fn node_subnet(&self, project: Ipv4Net, address: Ipv4Addr) -> Option<Ipv4Net> {
        if !project.contains(&address) {
            return None;
        }
        let index = u32::from(address) - u32::from(project.network());
        let size_bits = 32 - u32::from(self.node_prefix_len);
        let count_bits = u32::from(self.node_prefix_len - self.range.prefix_len());
        if count_bits < 32 && u64::from(index) >= 1u64 << count_bits {
            return None;
        }
        let base = u32::from(self.range.network()).checked_add(index.checked_shl(size_bits)?)?;
        Ipv4Net::new(Ipv4Addr::from(base), self.node_prefix_len).ok()
    }
}

impl fmt::Display for WorkloadRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} cut into /{} per node",
            self.range, self.node_prefix_len
        )
    }
}

/// Two of the zone's ranges overlap.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{first_name} {first} overlaps {second_name} {second}; choose ranges that do not overlap")]
pub struct Overlap {
    pub first_name: String,
    pub first: Ipv4Net,
    pub second_name: String,
    pub second: Ipv4Net,
}

/// Refuses the first pair of `ranges` (name, range) that overlap, naming both.
pub fn check_overlaps(ranges: &[(&str, Ipv4Net)]) -> Result<(), Overlap> {
    for (i, (first_name, first)) in ranges.iter().enumerate() {
        for (second_name, second) in &ranges[i + 1..] {
            if first.contains(second) || second.contains(first) {
                return Err(Overlap {
                    first_name: (*first_name).to_string(),
                    first: *first,
                    second_name: (*second_name).to_string(),
                    second: *second,
                });
            }
        }
    }
    Ok(())
}

impl fmt::Display for MeshRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} split into /{} per project",
            self.range, self.project_prefix_len
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(text: &str) -> Ipv4Net {
        text.parse().unwrap()
    }

    #[test]
    fn the_default_range_gives_each_project_a_slash_24() {
        let range = MeshRange::default();
        assert_eq!(range.range(), net("10.88.0.0/16"));
        assert_eq!(range.capacity(), 256);
        let first = range.allocate_project(&BTreeSet::new()).unwrap();
        assert_eq!(first, net("10.88.0.0/24"));
        let taken = BTreeSet::from([first, net("10.88.1.0/24")]);
        assert_eq!(
            range.allocate_project(&taken),
            Some(net("10.88.2.0/24")),
            "a taken (or quarantined) prefix is skipped"
        );
        assert!(range.holds_project(net("10.88.7.0/24")));
        assert!(!range.holds_project(net("10.89.0.0/24")));
        assert!(!range.holds_project(net("10.88.7.0/25")));
    }

    #[test]
    fn a_full_range_allocates_nothing() {
        let range = MeshRange::parse("10.88.0.0/24", 26).unwrap();
        let all: BTreeSet<_> = range.range().subnets(26).unwrap().collect();
        assert_eq!(all.len() as u64, range.capacity());
        assert_eq!(range.allocate_project(&all), None);
    }

    #[test]
    fn bad_ranges_are_refused_with_the_reason() {
        assert_eq!(
            MeshRange::parse("10.88.0.0", 24),
            Err(RangeError::Syntax("10.88.0.0".into()))
        );
        let err = MeshRange::parse("10.88.3.0/16", 24).unwrap_err();
        assert!(
            err.to_string().contains("did you mean 10.88.0.0/16"),
            "{err}"
        );
        assert_eq!(
            MeshRange::parse("100.64.0.0/16", 24),
            Err(RangeError::NotPrivate(net("100.64.0.0/16")))
        );
        assert!(matches!(
            MeshRange::parse("10.88.0.0/16", 12),
            Err(RangeError::ProjectPrefix { len: 12, .. })
        ));
        assert!(matches!(
            MeshRange::parse("10.88.0.0/16", 31),
            Err(RangeError::ProjectPrefix { len: 31, .. })
        ));
    }

    #[test]
    fn addresses_skip_the_network_the_router_and_the_broadcast() {
        let prefix = net("10.88.4.0/30");
        assert_eq!(
            allocate_address(prefix, &BTreeSet::new()),
            Some("10.88.4.2".parse().unwrap())
        );
        let taken = BTreeSet::from(["10.88.4.2".parse().unwrap()]);
        assert_eq!(allocate_address(prefix, &taken), None);
        let prefix = net("10.88.4.0/24");
        let taken: BTreeSet<Ipv4Addr> = prefix.hosts().skip(1).take(10).collect();
        assert_eq!(
            allocate_address(prefix, &taken),
            Some("10.88.4.12".parse().unwrap())
        );
    }

    #[test]
    fn a_nodes_workload_subnet_follows_from_its_mesh_address() {
        let workloads = WorkloadRange::default();
        let project: Ipv4Net = "10.88.7.0/24".parse().unwrap();
        assert_eq!(
            workloads.node_subnet(project, "10.88.7.2".parse().unwrap()),
            Some("10.96.2.0/24".parse().unwrap())
        );
        assert_eq!(
            workloads.node_subnet(project, "10.88.7.254".parse().unwrap()),
            Some("10.96.254.0/24".parse().unwrap())
        );
        assert_eq!(
            workloads.node_subnet(project, "10.88.8.2".parse().unwrap()),
            None
        );
        // Another project's member with the same host number has the same subnet: the
        // two meshes never meet.
        assert_eq!(
            workloads.node_subnet(
                "10.88.9.0/24".parse().unwrap(),
                "10.88.9.2".parse().unwrap()
            ),
            Some("10.96.2.0/24".parse().unwrap())
        );
        assert_eq!(workloads.fits(&MeshRange::default()), Ok(()));
    }

    #[test]
    fn a_workload_range_too_small_for_a_project_is_refused() {
        let small = WorkloadRange::parse("10.96.0.0/20", 24).unwrap();
        let err = small.fits(&MeshRange::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "workload range 10.96.0.0/20 holds 16 node subnets of /24, but a project of the mesh (/24) has up to 256 members: use a range of /16 or wider, or longer node subnets"
        );
        assert!(matches!(
            WorkloadRange::parse("8.8.0.0/16", 24),
            Err(WorkloadRangeError::NotPrivate(_))
        ));
        assert!(matches!(
            WorkloadRange::parse("10.96.0.0/16", 30),
            Err(WorkloadRangeError::NodePrefix { .. })
        ));
        assert!(matches!(
            WorkloadRange::parse("10.96.1.0/16", 24),
            Err(WorkloadRangeError::NotNetwork { .. })
        ));
    }

    #[test]
    fn overlapping_ranges_are_named() {
        let ok = [
            ("the mesh range", net("10.88.0.0/16")),
            ("the partner's site range", net("10.128.0.0/10")),
        ];
        assert_eq!(check_overlaps(&ok), Ok(()));
        let bad = [
            ("the mesh range", net("10.88.0.0/16")),
            ("the partner's site range", net("10.64.0.0/10")),
        ];
        let err = check_overlaps(&bad).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the mesh range 10.88.0.0/16 overlaps the partner's site range 10.64.0.0/10; choose ranges that do not overlap"
        );
    }
}
