//! The desired mesh config of every agent, as a pure function of the zone's sites, members
//! (nodes, gateways, workstations), projects and public keys.
//!
//! The rules:
//! - A node's project mesh has one peer per other member of its project that has a key and
//!   an address; allowed IPs are the peer's mesh address and, for a node, its workload
//!   subnet (when the zone has a workload range), so replicas reach each other across nodes
//!   without NAT. Nodes and workstations route the workload range into the mesh; a node's
//!   own subnet is on its replicas' bridge, a longer prefix.
//! - A peer is reached at its site-private address when both are at the same site or at two
//!   sites of the same provider (the backbone routes between them, without NAT); a node at a
//!   site reached from anywhere else is reached through its gateway's stable address, on the
//!   UDP port that the gateway forwards to it; a node with a public address is reached
//!   there; a workstation has no endpoint (it dials in).
//! - A member whose path to a peer goes out through NAT (a node at a site toward a peer that
//!   is not on the backbone, or a workstation) keeps that path open with keep-alives.
//! - A gateway has one backbone peer per other site of its provider whose gateway has a key
//!   and whose stable address is known (allowed IPs: that site's prefix), a route to each of
//!   those prefixes, and its site's NAT: egress masqueraded except toward the provider's
//!   site prefixes, the mesh range blocked, each node's forward port, and the site's pool
//!   addresses with the pool's nodes as targets. A gateway never holds a project key.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddrV4};

use ipnet::Ipv4Net;

use crate::config::{
    BACKBONE_INTERFACE, BACKBONE_PORT, FORWARD_BASE, ForwardPort, GatewayRole, HostEntry,
    Interface, KEEPALIVE_SECONDS, MESH_INTERFACE, MESH_PORT, MeshConfig, Peer, PeerList,
    PoolForward, Route, Shared, UdpForward,
};
use crate::key::PublicKey;
use crate::range::{MeshRange, WorkloadRange};

/// Everything the plan is computed from.
#[derive(Debug, Clone, Default)]
pub struct World {
    pub range: MeshRange,
    /// Where replicas take their addresses; `None`: nodes have no workload subnets.
    pub workloads: Option<WorkloadRange>,
    pub projects: Vec<Project>,
    pub sites: Vec<Site>,
    pub members: Vec<Member>,
    pub pool_addresses: Vec<PoolAddress>,
}

/// A project and its mesh prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    pub id: String,
    /// The org's name and the project's, for host names.
    pub org: String,
    pub name: String,
    pub prefix: Ipv4Net,
}

/// A provider's site whose nodes sit behind a gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    pub at: SiteRef,
    pub prefix: Ipv4Net,
    pub stable_ipv4: Option<Ipv4Addr>,
}

/// A site by provider and name (site names are each provider's own). The zone fills
/// `provider` with the provider's id, never its name, which anyone may choose.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SiteRef {
    pub provider: String,
    pub site: String,
}

impl SiteRef {
    pub fn new(provider: &str, site: &str) -> SiteRef {
        SiteRef {
            provider: provider.to_string(),
            site: site.to_string(),
        }
    }
}

impl std::fmt::Display for SiteRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.provider, self.site)
    }
}

/// What a member is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberKind {
    /// A tenant node of a project's pool (`<org>/<project>/<pool>`).
    Node { project: String, pool: String },
    /// The gateway of its site.
    Gateway,
    /// A person's workstation on a project's mesh.
    Workstation { project: String },
}

/// A node, gateway or workstation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The node id, or the workstation's id.
    pub id: String,
    /// The name under which it resolves (the node's name).
    pub name: String,
    pub kind: MemberKind,
    /// The site it sits at behind a gateway; `None` for nodes with a public address, and
    /// for workstations.
    pub site: Option<SiteRef>,
    /// Its site-private address (at a site), else its public address.
    pub underlay: Option<Ipv4Addr>,
    /// Its address on its project's mesh (not for gateways).
    pub mesh_address: Option<Ipv4Addr>,
    /// Its project mesh key (a gateway: its backbone key).
    pub key: Option<PublicKey>,
}

/// A public pool's address at a site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolAddress {
    /// `<org>/<project>/<pool>`, as in [`MemberKind::Node`].
    pub pool: String,
    pub at: SiteRef,
    pub address: Ipv4Addr,
    pub ports: Vec<ForwardPort>,
}

/// The desired mesh config of every node and gateway, by member id. Workstations are
/// planned on request ([`plan_workstation`]).
pub fn plan(world: &World) -> BTreeMap<String, MeshConfig> {
    let index = Index::new(world);
    world
        .members
        .iter()
        .filter(|m| !matches!(m.kind, MemberKind::Workstation { .. }))
        .map(|m| (m.id.clone(), index.config_of(m)))
        .collect()
}

/// The desired mesh config of workstation `id`, or `None` when it is not a member.
pub fn plan_workstation(world: &World, id: &str) -> Option<MeshConfig> {
    let member = world
        .members
        .iter()
        .find(|m| m.id == id && matches!(m.kind, MemberKind::Workstation { .. }))?;
    Some(Index::new(world).config_of(member))
}

/// The sites a plan may use: every site whose prefix overlaps no site of another provider
/// that comes first (by provider, then site name; the zone's provider ids grow with age, so
/// the older provider keeps its prefix), and the refused ones, each with the site it
/// overlaps. A provider may not move another provider's peers or routes by reporting its
/// prefix.
pub fn disjoint_sites(mut sites: Vec<Site>) -> (Vec<Site>, Vec<(Site, SiteRef)>) {
    sites.sort_by(|a, b| a.at.cmp(&b.at));
    let mut kept: Vec<Site> = Vec::with_capacity(sites.len());
    let mut refused = Vec::new();
    for site in sites {
        let overlapped = kept.iter().find(|k| {
            k.at.provider != site.at.provider
                && (k.prefix.contains(&site.prefix.network())
                    || site.prefix.contains(&k.prefix.network()))
        });
        match overlapped {
            Some(holder) => {
                let holder = holder.at.clone();
                refused.push((site, holder));
            }
            None => kept.push(site),
        }
    }
    (kept, refused)
}

/// The forward port of a site's node at `underlay`: `FORWARD_BASE` plus its host index in
/// the site prefix; `None` when the address is not in the prefix.
pub fn forward_port(prefix: Ipv4Net, underlay: Ipv4Addr) -> Option<u16> {
    if !prefix.contains(&underlay) {
        return None;
    }
    let index = u32::from(underlay) - u32::from(prefix.network());
    u16::try_from(index)
        .ok()
        .and_then(|i| FORWARD_BASE.checked_add(i))
}

struct Index<'w> {
    world: &'w World,
    sites: BTreeMap<&'w SiteRef, &'w Site>,
    projects: BTreeMap<&'w str, &'w Project>,
    /// Members of each project, sorted by id.
    by_project: BTreeMap<&'w str, Vec<&'w Member>>,
    /// The gateway of each site.
    gateways: BTreeMap<&'w SiteRef, &'w Member>,
    /// Each project's peer table per vantage, made once and shared by its members.
    tables: RefCell<Tables<'w>>,
    /// Each project's host names.
    hosts: RefCell<BTreeMap<&'w str, Shared<Vec<HostEntry>>>>,
}

/// Peer tables by project and vantage.
type Tables<'w> = BTreeMap<(&'w str, Vantage<'w>), Shared<Vec<Peer>>>;

/// Where a member sees its project's peers from: every member at the same vantage sees each
/// peer with the same endpoint and keep-alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Vantage<'w> {
    /// The provider of its site, when it sits at one (the backbone reaches that provider's
    /// sites).
    provider: Option<&'w str>,
    /// Its path out goes through NAT (it sits at a site, or is a workstation).
    behind_nat: bool,
}

impl<'w> Vantage<'w> {
    fn of(member: &'w Member) -> Vantage<'w> {
        Vantage {
            provider: member.site.as_ref().map(|s| s.provider.as_str()),
            behind_nat: member.site.is_some()
                || matches!(member.kind, MemberKind::Workstation { .. }),
        }
    }

    /// True when the backbone joins this vantage and `to` (both at sites of one provider).
    fn on_backbone(&self, to: &Member) -> bool {
        matches!((self.provider, &to.site), (Some(p), Some(at)) if at.provider == p)
    }
}

impl<'w> Index<'w> {
    fn new(world: &'w World) -> Index<'w> {
        let mut by_project: BTreeMap<&str, Vec<&Member>> = BTreeMap::new();
        let mut gateways = BTreeMap::new();
        for member in &world.members {
            match &member.kind {
                MemberKind::Node { project, .. } | MemberKind::Workstation { project } => {
                    by_project.entry(project).or_default().push(member);
                }
                MemberKind::Gateway => {
                    if let Some(site) = &member.site {
                        gateways.insert(site, member);
                    }
                }
            }
        }
        for members in by_project.values_mut() {
            members.sort_by(|a, b| a.id.cmp(&b.id));
        }
        Index {
            world,
            sites: world.sites.iter().map(|s| (&s.at, s)).collect(),
            projects: world.projects.iter().map(|p| (p.id.as_str(), p)).collect(),
            by_project,
            gateways,
            tables: RefCell::default(),
            hosts: RefCell::default(),
        }
    }

    fn config_of(&self, member: &'w Member) -> MeshConfig {
        match &member.kind {
            MemberKind::Gateway => self.gateway_config(member),
            MemberKind::Node { project, .. } | MemberKind::Workstation { project } => {
                self.project_config(member, project)
            }
        }
    }

    /// True when `a` and `b` are at sites of the same provider (the backbone joins them).
    fn on_backbone(a: &Member, b: &Member) -> bool {
        matches!((&a.site, &b.site), (Some(x), Some(y)) if x.provider == y.provider)
    }

    /// Where a member sends to `to`; `backbone`: the backbone joins the two.
    fn endpoint(&self, backbone: bool, to: &Member) -> Option<SocketAddrV4> {
        let underlay = to.underlay?;
        if matches!(to.kind, MemberKind::Workstation { .. }) {
            return None;
        }
        match &to.site {
            None => Some(SocketAddrV4::new(underlay, MESH_PORT)),
            Some(_) if backbone => Some(SocketAddrV4::new(underlay, MESH_PORT)),
            Some(at) => {
                let site = self.sites.get(at)?;
                let port = forward_port(site.prefix, underlay)?;
                Some(SocketAddrV4::new(site.stable_ipv4?, port))
            }
        }
    }

    fn project_config(&self, member: &'w Member, project_id: &'w str) -> MeshConfig {
        let (Some(project), Some(address)) = (self.projects.get(project_id), member.mesh_address)
        else {
            return MeshConfig::default();
        };
        let vantage = Vantage::of(member);
        let peers = self
            .tables
            .borrow_mut()
            .entry((project_id, vantage))
            .or_insert_with(|| Shared::new(self.peer_table(project_id, vantage)))
            .clone();
        let hosts = self
            .hosts
            .borrow_mut()
            .entry(project_id)
            .or_insert_with(|| Shared::new(self.host_table(project)))
            .clone();
        MeshConfig {
            interfaces: vec![Interface {
                name: MESH_INTERFACE.to_string(),
                address: Some(
                    Ipv4Net::new(address, project.prefix.prefix_len())
                        .expect("a prefix length of a valid prefix"),
                ),
                listen_port: MESH_PORT,
                peers: PeerList::shared(peers, member.key),
            }],
            routes: self
                .world
                .workloads
                .map(|w| Route {
                    destination: w.range(),
                    interface: MESH_INTERFACE.to_string(),
                })
                .into_iter()
                .collect(),
            gateway: None,
            hosts,
        }
    }

    /// Every member of the project with a key and an address, as members at `vantage` see
    /// them, sorted by key (each member's own entry is left out of its list).
    fn peer_table(&self, project_id: &str, vantage: Vantage<'_>) -> Vec<Peer> {
        let members = self
            .by_project
            .get(project_id)
            .map_or(&[][..], Vec::as_slice);
        let prefix = self.projects.get(project_id).map(|p| p.prefix);
        let mut peers: Vec<Peer> = members
            .iter()
            .filter_map(|other| {
                let key = other.key?;
                let mesh = other.mesh_address?;
                let backbone = vantage.on_backbone(other);
                let endpoint = self.endpoint(backbone, other);
                let through_nat = vantage.behind_nat && !backbone;
                let mut allowed_ips = vec![Ipv4Net::from(mesh)];
                if matches!(other.kind, MemberKind::Node { .. })
                    && let (Some(workloads), Some(prefix)) = (self.world.workloads, prefix)
                    && let Some(subnet) = workloads.node_subnet(prefix, mesh)
                {
                    allowed_ips.push(subnet);
                }
                Some(Peer {
                    name: other.id.clone(),
                    public_key: key,
                    endpoint,
                    allowed_ips,
                    keepalive: (endpoint.is_some() && through_nat).then_some(KEEPALIVE_SECONDS),
                })
            })
            .collect();
        peers.sort_by_key(|p| p.public_key);
        peers
    }

    /// The names of the project's nodes, sorted.
    fn host_table(&self, project: &Project) -> Vec<HostEntry> {
        let members = self
            .by_project
            .get(project.id.as_str())
            .map_or(&[][..], Vec::as_slice);
        let mut hosts: Vec<HostEntry> = members
            .iter()
            .filter(|m| matches!(m.kind, MemberKind::Node { .. }))
            .filter_map(|m| {
                Some(HostEntry {
                    name: format!("{}.{}.{}.internal", m.name, project.name, project.org),
                    address: m.mesh_address?,
                })
            })
            .collect();
        hosts.sort();
        hosts
    }

    fn gateway_config(&self, gateway: &Member) -> MeshConfig {
        let Some(at) = &gateway.site else {
            return MeshConfig::default();
        };
        let Some(site) = self.sites.get(at) else {
            return MeshConfig::default();
        };
        let provider_sites: Vec<&Site> = self
            .world
            .sites
            .iter()
            .filter(|s| s.at.provider == at.provider)
            .collect();
        let mut peers = Vec::new();
        let mut routes = Vec::new();
        for other in provider_sites.iter().filter(|s| s.at != *at) {
            let Some(remote) = self.gateways.get(&other.at) else {
                continue;
            };
            let (Some(key), Some(stable)) = (remote.key, other.stable_ipv4) else {
                continue;
            };
            peers.push(Peer {
                name: format!("site:{}", other.at),
                public_key: key,
                endpoint: Some(SocketAddrV4::new(stable, BACKBONE_PORT)),
                allowed_ips: vec![other.prefix],
                keepalive: Some(KEEPALIVE_SECONDS),
            });
            routes.push(Route {
                destination: other.prefix,
                interface: BACKBONE_INTERFACE.to_string(),
            });
        }
        peers.sort_by_key(|p| p.public_key);
        routes.sort();

        let role = site.stable_ipv4.map(|stable| {
            let mut no_nat: Vec<Ipv4Net> = provider_sites.iter().map(|s| s.prefix).collect();
            no_nat.sort();
            no_nat.dedup();
            let mut udp_forwards: Vec<UdpForward> = self
                .world
                .members
                .iter()
                .filter(|m| {
                    matches!(m.kind, MemberKind::Node { .. }) && m.site.as_ref() == Some(at)
                })
                .filter_map(|m| {
                    let underlay = m.underlay?;
                    Some(UdpForward {
                        port: forward_port(site.prefix, underlay)?,
                        to: SocketAddrV4::new(underlay, MESH_PORT),
                    })
                })
                .collect();
            udp_forwards.sort_by_key(|f| f.port);
            udp_forwards.dedup_by_key(|f| f.port);
            let mut pool_forwards: Vec<PoolForward> = self
                .world
                .pool_addresses
                .iter()
                .filter(|p| p.at == *at)
                .map(|p| self.pool_forward(p, gateway))
                .collect();
            pool_forwards.sort_by_key(|p| p.address);
            GatewayRole {
                site: at.to_string(),
                site_prefix: site.prefix,
                stable_ipv4: stable,
                no_nat,
                blocked: vec![self.world.range.range()],
                udp_forwards,
                pool_forwards,
            }
        });
        MeshConfig {
            interfaces: vec![Interface {
                name: BACKBONE_INTERFACE.to_string(),
                address: None,
                listen_port: BACKBONE_PORT,
                peers: PeerList::new(peers),
            }],
            routes,
            gateway: role,
            hosts: Shared::default(),
        }
    }

    fn pool_forward(&self, address: &PoolAddress, gateway: &Member) -> PoolForward {
        let targets: BTreeSet<Ipv4Addr> = self
            .world
            .members
            .iter()
            .filter(|m| matches!(&m.kind, MemberKind::Node { pool, .. } if *pool == address.pool))
            .filter(|m| Self::on_backbone(gateway, m))
            .filter_map(|m| m.underlay)
            .collect();
        let mut ports = address.ports.clone();
        ports.sort_by(|a, b| (a.port, &a.protocol).cmp(&(b.port, &b.protocol)));
        ports.dedup();
        PoolForward {
            pool: address.pool.clone(),
            address: address.address,
            ports,
            targets: targets.into_iter().collect(),
        }
    }
}
