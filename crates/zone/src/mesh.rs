//! The mesh reconciler: reads the zone's nodes, agents, sites and pool addresses, gives
//! every joined tenant node an address on its project's mesh, plans every agent's mesh
//! config ([`orc_mesh::plan`]) and publishes the plan to the agent hub, which sends a new
//! config only to the agents whose config changed.
//!
//! A pass runs when an agent reports a new key, when something else asks through the
//! [`MeshSignal`] (node and site changes, workstations), and every [`MeshOptions::interval`]
//! at the latest. The plan is a pure function of what the pass read, so two passes over the
//! same store publish the same configs. A pass after a change of members only (a
//! workstation connected or left) reads only the members and projects again and plans over
//! the nodes, sites and pool addresses the pass before read; every other pass reads all of
//! it.
//!
//! Members:
//! - a joined node of a gateway pool (`sys/sys/gw-<provider id>-<site>`, on that provider,
//!   which may run site gateways) is its site's gateway, with its backbone key;
//! - every other joined node is a member of its project's mesh, at its site when its
//!   provider may run site gateways and reported a private prefix for the site (it sits
//!   behind the site's gateway), else with its public address;
//! - workstations are members that `orc mesh connect` added.
//!
//! A node that ended leaves the mesh; its address is quarantined for
//! [`MeshOptions::quarantine`] before another member may get it.
//!
//! Sites are known by their provider's **id** ([`SiteRef`] holds it), never its name: a
//! provider only ever adds, moves or removes its own sites, and a site whose prefix
//! overlaps one of another provider is left out of the plan
//! ([`orc_mesh::plan::disjoint_sites`]; the hub refuses such a report in the first place).

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ipnet::Ipv4Net;
use orc_mesh::config::ForwardPort;
use orc_mesh::{
    Member, MemberKind, MeshConfig, MeshRange, PoolAddress, Project, Site, SiteRef, World,
};
use orc_zone_store::{MeshMemberKind, MeshNode, NewMeshMember};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::agents::AgentHub;
use crate::model::{NodeId, ProjectId, Timestamp};
use crate::model::{Provider, ProviderId};
use crate::store::{Store, StoreResult};
use orc_common::time::SharedClock;
use orc_zone_model::gateway::gateway_site;

/// Settings of the mesh reconciler.
#[derive(Debug, Clone)]
pub struct MeshOptions {
    /// The zone's mesh range and the prefix length of each project. Default
    /// `10.88.0.0/16`, a /24 per project.
    pub range: MeshRange,
    /// Where replicas take their addresses, each node a subnet that follows from its mesh
    /// address. Default `10.96.0.0/16`, a /24 per node; `None`: replicas have no network
    /// beyond their own loopback.
    pub workloads: Option<orc_mesh::WorkloadRange>,
    /// How long a released address or prefix waits before reuse. Default 1 h.
    pub quarantine: Duration,
    /// The longest time between two passes. Default 2 s.
    pub interval: Duration,
    /// Other ranges of the zone's world, by name (a provider's site range, an emulated
    /// internet): the zone refuses to start when the mesh range overlaps one of them.
    pub reserved: Vec<(String, Ipv4Net)>,
}

impl Default for MeshOptions {
    fn default() -> Self {
        MeshOptions {
            range: MeshRange::default(),
            workloads: Some(orc_mesh::WorkloadRange::default()),
            quarantine: Duration::from_secs(3600),
            interval: Duration::from_secs(2),
            reserved: Vec::new(),
        }
    }
}

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MeshPass {
    /// Each agent's mesh config.
    pub plan: BTreeMap<NodeId, MeshConfig>,
    /// Members that got an address in this pass.
    pub added: Vec<String>,
    /// Members released in this pass.
    pub released: Vec<String>,
    /// Nodes that could not get an address (their project's prefix or the range is full).
    pub unplaced: Vec<NodeId>,
}

/// What changed, as far as the mesh is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeshChange {
    /// Only the members: a workstation connected or left.
    Members,
    /// Anything else: nodes, keys, sites, pool addresses.
    Everything,
}

/// How the zone tells the mesh reconciler what changed, and where the API finds what the
/// last pass read. Cheap to clone; one per zone.
#[derive(Debug, Clone, Default)]
pub struct MeshSignal {
    inner: Arc<SignalInner>,
}

#[derive(Debug, Default)]
struct SignalInner {
    wake: Notify,
    /// Something besides the members changed since the last pass began.
    everything: AtomicBool,
    /// What the last pass read (`None` before the first).
    inputs: Mutex<Option<Arc<Inputs>>>,
}

impl MeshSignal {
    /// Asks for a pass now, which reads again what `change` touched.
    pub fn changed(&self, change: MeshChange) {
        if change == MeshChange::Everything {
            self.inner.everything.store(true, Ordering::SeqCst);
        }
        self.inner.wake.notify_one();
    }

    /// The world as the store holds it now, for planning the config of a member of
    /// `project`: the project's members and the projects read now, the rest as the last pass
    /// read it (all of it read now when there was none). It holds no other project's members.
    pub async fn project_world(
        &self,
        store: &Store,
        options: &MeshOptions,
        project: &ProjectId,
    ) -> StoreResult<World> {
        let inputs = match self.last_inputs() {
            Some(inputs) => inputs,
            None => Arc::new(Inputs::load(store).await?),
        };
        let members = store.mesh_members_of(project).await?;
        inputs.world(store, options, &members).await
    }

    fn last_inputs(&self) -> Option<Arc<Inputs>> {
        self.inner
            .inputs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether the next pass must read everything; clears it.
    fn take_everything(&self) -> bool {
        self.inner.everything.swap(false, Ordering::SeqCst)
    }
}

/// The running reconciler.
#[derive(Debug)]
pub struct MeshHandle {
    signal: MeshSignal,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl MeshHandle {
    /// Starts the reconciler, which listens to `signal`: a first pass at once, then as
    /// described in the module docs.
    pub fn spawn(
        store: Store,
        agents: AgentHub,
        clock: SharedClock,
        options: MeshOptions,
        signal: MeshSignal,
    ) -> MeshHandle {
        let stop = watch::Sender::new(false);
        let task = {
            let (signal, mut stopped) = (signal.clone(), stop.subscribe());
            tokio::spawn(async move {
                // The first pass, each periodic one and each after a failure read everything.
                let mut everything = true;
                loop {
                    everything |= signal.take_everything();
                    let cached = if everything {
                        None
                    } else {
                        signal.last_inputs()
                    };
                    let outcome = pass_over(&store, &options, clock.now(), cached).await;
                    everything = outcome.is_err();
                    match outcome {
                        Ok((pass, inputs)) => {
                            *signal
                                .inner
                                .inputs
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner) = Some(inputs);
                            if !pass.unplaced.is_empty() {
                                tracing::warn!(nodes = ?pass.unplaced, range = %options.range, "nodes have no mesh address: the range or their project's prefix is full");
                            }
                            if !pass.added.is_empty() || !pass.released.is_empty() {
                                tracing::info!(added = ?pass.added, released = ?pass.released, "mesh members changed");
                            }
                            let told = agents.publish_mesh(pass.plan);
                            if told > 0 {
                                tracing::debug!(agents = told, "mesh configs changed");
                            }
                        }
                        Err(error) => tracing::warn!(%error, "mesh pass failed; retrying"),
                    }
                    tokio::select! {
                        _ = stopped.wait_for(|s| *s) => return,
                        () = signal.inner.wake.notified() => {}
                        () = agents.mesh_changed() => everything = true,
                        () = tokio::time::sleep(options.interval) => everything = true,
                    }
                }
            })
        };
        MeshHandle { signal, stop, task }
    }

    /// Asks for a pass now that reads everything.
    pub fn wake(&self) {
        self.signal.changed(MeshChange::Everything);
    }

    /// The signal to hand to other parts.
    pub fn signal(&self) -> MeshSignal {
        self.signal.clone()
    }

    pub async fn shutdown(self) {
        self.stop.send_replace(true);
        let _ = self.task.await;
    }
}

/// One pass that reads everything: members added and released in the store, and the plan.
pub async fn mesh_pass(
    store: &Store,
    options: &MeshOptions,
    now: Timestamp,
) -> StoreResult<MeshPass> {
    Ok(pass_over(store, options, now, None).await?.0)
}

/// One pass over `cached` inputs (only members changed since they were read), else over
/// inputs read now; and the inputs it used.
async fn pass_over(
    store: &Store,
    options: &MeshOptions,
    now: Timestamp,
    cached: Option<Arc<Inputs>>,
) -> StoreResult<(MeshPass, Arc<Inputs>)> {
    let inputs = match cached {
        Some(inputs) => inputs,
        None => Arc::new(Inputs::load(store).await?),
    };
    let nodes = &inputs.nodes;
    let mut pass = MeshPass::default();
    let mut members = store.mesh_members().await?;
    let known: BTreeSet<String> = members.iter().map(|m| m.id.clone()).collect();
    let live: BTreeSet<String> = nodes.iter().map(|n| n.node_id.to_string()).collect();

    // Tenant nodes whose agent joined get an address; ended nodes give theirs back.
    for node in nodes {
        let id = node.node_id.to_string();
        if node.facts.is_none() || inputs.is_gateway(node) || known.contains(&id) {
            continue;
        }
        let new = NewMeshMember {
            id: id.clone(),
            kind: MeshMemberKind::Node,
            project_id: node.project_id.clone(),
            name: node.node_id.to_string(),
            public_key: None,
        };
        match store.ensure_mesh_member(&new, &options.range, now).await? {
            Some(member) => {
                pass.added.push(id);
                members.push(member);
            }
            None => pass.unplaced.push(node.node_id.clone()),
        }
    }
    let gone: Vec<String> = members
        .iter()
        .filter(|m| m.kind == MeshMemberKind::Node && !live.contains(&m.id))
        .map(|m| m.id.clone())
        .collect();
    if !gone.is_empty() {
        let quarantine = i64::try_from(options.quarantine.as_millis()).unwrap_or(i64::MAX);
        let until = now.plus_millis(quarantine);
        store.release_mesh_members(&gone, until).await?;
        members.retain(|m| !gone.contains(&m.id));
        pass.released = gone;
    }

    let world = inputs.world(store, options, &members).await?;
    pass.plan = orc_mesh::plan(&world)
        .into_iter()
        .filter_map(|(id, config)| Some((id.parse().ok()?, config)))
        .collect();
    Ok((pass, inputs))
}

/// The world the plan is computed from, all of it read now (members as the last pass left
/// them).
pub async fn world(store: &Store, options: &MeshOptions) -> StoreResult<World> {
    let inputs = Inputs::load(store).await?;
    let members = store.mesh_members().await?;
    inputs.world(store, options, &members).await
}

/// What a pass reads besides the members and projects.
#[derive(Debug)]
struct Inputs {
    nodes: Vec<MeshNode>,
    /// Providers by id.
    providers: BTreeMap<ProviderId, Provider>,
    sites: BTreeMap<SiteRef, Site>,
    pool_addresses: Vec<PoolAddress>,
}

impl Inputs {
    async fn load(store: &Store) -> StoreResult<Inputs> {
        let nodes = store.mesh_nodes().await?;
        let providers: BTreeMap<ProviderId, Provider> = store
            .list_providers()
            .await?
            .into_iter()
            .map(|p| (p.id.clone(), p))
            .collect();
        let reported: Vec<Site> = store
            .mesh_sites()
            .await?
            .into_iter()
            .filter_map(|s| {
                let prefix: Ipv4Net = s.private_prefix.as_deref()?.parse().ok()?;
                let provider = providers.get(&s.provider_id)?;
                // Nodes sit behind a site only where the provider runs the site's gateway.
                provider.may_run_site_gateways().then_some(())?;
                Some(Site {
                    at: SiteRef::new(provider.id.as_str(), &s.site),
                    prefix,
                    stable_ipv4: s.public_ipv4.as_deref().and_then(|a| a.parse().ok()),
                })
            })
            .collect();
        let (kept, refused) = orc_mesh::plan::disjoint_sites(reported);
        for (site, holder) in &refused {
            tracing::warn!(site = %site.at, prefix = %site.prefix, overlaps = %holder, "a site's prefix overlaps another provider's site; the site is left out of the mesh");
        }
        let sites = kept.into_iter().map(|s| (s.at.clone(), s)).collect();
        let pool_addresses = pool_addresses(store, &nodes).await?;
        Ok(Inputs {
            nodes,
            providers,
            sites,
            pool_addresses,
        })
    }

    /// Whether `node` is a gateway: of a gateway pool in `sys/sys` named for the id of the
    /// provider it is on, which may run site gateways.
    fn is_gateway(&self, node: &MeshNode) -> bool {
        self.gateway_site(node).is_some()
    }

    /// The site `node` is the gateway of, if it is one.
    fn gateway_site(&self, node: &MeshNode) -> Option<SiteRef> {
        let provider = self.providers.get(&node.provider_id)?;
        if node.org_name.as_str() != "sys"
            || node.project_name.as_str() != "sys"
            || !provider.may_run_site_gateways()
        {
            return None;
        }
        let site = gateway_site(node.pool_name.as_str(), &node.provider_id)?;
        Some(SiteRef::new(node.provider_id.as_str(), site))
    }

    /// Where `node` sits: its provider's site, when the provider runs gateways and the site
    /// is in the plan.
    fn site_of(&self, node: &MeshNode) -> Option<SiteRef> {
        let at = SiteRef::new(node.provider_id.as_str(), node.site.as_deref()?);
        self.sites.contains_key(&at).then_some(at)
    }

    async fn world(
        &self,
        store: &Store,
        options: &MeshOptions,
        members: &[orc_zone_store::MeshMember],
    ) -> StoreResult<World> {
        let (nodes, sites) = (&self.nodes, &self.sites);
        let projects = store
            .mesh_projects()
            .await?
            .into_iter()
            .map(|p| Project {
                id: p.id.to_string(),
                org: p.org_name,
                name: p.name,
                prefix: p.prefix,
            })
            .collect();
        let by_id: BTreeMap<&str, &MeshNode> =
            nodes.iter().map(|n| (n.node_id.as_str(), n)).collect();
        let mut world_members = Vec::new();
        for node in nodes.iter().filter(|n| n.facts.is_some()) {
            if let Some(site) = self.gateway_site(node) {
                let site = Some(site);
                let underlay = site
                    .as_ref()
                    .and_then(|at| sites.get(at))
                    .and_then(|s| underlay_in(node, s.prefix));
                world_members.push(Member {
                    id: node.node_id.to_string(),
                    name: node.node_id.to_string(),
                    kind: MemberKind::Gateway,
                    site,
                    underlay,
                    mesh_address: None,
                    key: key_of(node),
                });
            }
        }
        for member in members {
            match member.kind {
                MeshMemberKind::Node => {
                    let Some(node) = by_id.get(member.id.as_str()) else {
                        continue;
                    };
                    let at = self.site_of(node);
                    let underlay = match &at {
                        Some(at) => underlay_in(node, sites[at].prefix),
                        None => public_address(node),
                    };
                    world_members.push(Member {
                        id: member.id.clone(),
                        name: member.name.clone(),
                        kind: MemberKind::Node {
                            project: member.project_id.to_string(),
                            pool: pool_path(node),
                        },
                        site: at,
                        underlay,
                        mesh_address: Some(member.address),
                        key: key_of(node),
                    });
                }
                MeshMemberKind::Workstation => world_members.push(Member {
                    id: member.id.clone(),
                    name: member.name.clone(),
                    kind: MemberKind::Workstation {
                        project: member.project_id.to_string(),
                    },
                    site: None,
                    underlay: None,
                    mesh_address: Some(member.address),
                    key: member.public_key.as_deref().and_then(|k| k.parse().ok()),
                }),
            }
        }
        Ok(World {
            range: options.range,
            workloads: options.workloads,
            projects,
            sites: sites.values().cloned().collect(),
            members: world_members,
            pool_addresses: self.pool_addresses.clone(),
        })
    }
}

async fn pool_addresses(store: &Store, nodes: &[MeshNode]) -> StoreResult<Vec<PoolAddress>> {
    let pools: BTreeMap<&str, &MeshNode> = nodes.iter().map(|n| (n.pool_id.as_str(), n)).collect();
    Ok(store
        .mesh_pool_addresses()
        .await?
        .into_iter()
        .filter_map(|a| {
            // A pool with no node left has nothing to forward to.
            let node = pools.get(a.pool_id.as_str())?;
            Some(PoolAddress {
                pool: pool_path(node),
                at: SiteRef::new(node.provider_id.as_str(), &a.site),
                address: a.ipv4.parse().ok()?,
                ports: node
                    .endpoints
                    .iter()
                    .map(|e| ForwardPort {
                        protocol: if e.protocol == "udp" { "udp" } else { "tcp" }.to_string(),
                        port: e.port,
                    })
                    .collect(),
            })
        })
        .collect())
}

fn pool_path(node: &MeshNode) -> String {
    format!("{}/{}/{}", node.org_name, node.project_name, node.pool_name)
}

fn key_of(node: &MeshNode) -> Option<orc_mesh::PublicKey> {
    node.facts
        .as_ref()
        .filter(|f| !f.wireguard_public_key.is_empty())
        .and_then(|f| f.wireguard_public_key.parse().ok())
}

/// Every IPv4 address the node's agent or provider reported.
fn addresses(node: &MeshNode) -> impl Iterator<Item = Ipv4Addr> + '_ {
    let facts = node
        .facts
        .iter()
        .flat_map(|f| f.addresses.iter())
        .filter_map(|a| a.cidr.split('/').next()?.parse::<Ipv4Addr>().ok());
    let reported = node
        .addresses
        .iter()
        .filter_map(|a| a.parse::<Ipv4Addr>().ok());
    facts.chain(reported)
}

/// The node's address in its site's prefix.
fn underlay_in(node: &MeshNode, prefix: Ipv4Net) -> Option<Ipv4Addr> {
    addresses(node).find(|a| prefix.contains(a))
}

/// The node's public address: the first its provider reported that is not private, else
/// the first its agent reported.
fn public_address(node: &MeshNode) -> Option<Ipv4Addr> {
    let public = |a: &Ipv4Addr| !a.is_private() && !a.is_loopback() && !a.is_link_local();
    node.addresses
        .iter()
        .filter_map(|a| a.parse::<Ipv4Addr>().ok())
        .find(public)
        .or_else(|| addresses(node).find(public))
}

/// Why the zone's mesh range cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum MeshRangeError {
    #[error(transparent)]
    Overlap(#[from] orc_mesh::range::Overlap),
    #[error(transparent)]
    Workloads(#[from] orc_mesh::range::WorkloadRangeError),
    #[error(
        "project {project} has mesh prefix {prefix}, which the mesh range ({range}) does not \
         hold; keep a range and project prefix length that hold every project's prefix"
    )]
    Outside {
        project: String,
        prefix: Ipv4Net,
        range: MeshRange,
    },
    #[error("cannot read the mesh's sites and prefixes")]
    Store(#[source] crate::store::StoreError),
}

/// Checks the mesh range at start: it overlaps none of the reserved ranges nor any site
/// prefix a provider reported, and it holds every project's prefix.
pub async fn check_range(store: &Store, options: &MeshOptions) -> Result<(), MeshRangeError> {
    let range = options.range.range();
    let mut ranges: Vec<(String, Ipv4Net)> = vec![("the mesh range".to_string(), range)];
    ranges.extend(options.reserved.iter().cloned());
    let providers: BTreeMap<String, String> = store
        .list_providers()
        .await
        .map_err(MeshRangeError::Store)?
        .into_iter()
        .map(|p| (p.id.to_string(), p.name.to_string()))
        .collect();
    for site in store.mesh_sites().await.map_err(MeshRangeError::Store)? {
        let Some(prefix) = site.private_prefix.as_deref().and_then(|p| p.parse().ok()) else {
            continue;
        };
        let provider = providers
            .get(site.provider_id.as_str())
            .cloned()
            .unwrap_or_else(|| site.provider_id.to_string());
        ranges.push((format!("site {provider}/{}", site.site), prefix));
    }
    // Only the mesh and workload ranges against each other one: two sites never share a
    // prefix, and reserved ranges may hold the sites' prefixes.
    let named: Vec<(&str, Ipv4Net)> = ranges.iter().map(|(n, r)| (n.as_str(), *r)).collect();
    for other in &named[1..] {
        orc_mesh::range::check_overlaps(&[named[0], *other])?;
    }
    if let Some(workloads) = &options.workloads {
        workloads.fits(&options.range)?;
        for other in &named {
            orc_mesh::range::check_overlaps(&[("the workload range", workloads.range()), *other])?;
        }
    }
    for (project, prefix) in store.mesh_prefixes().await.map_err(MeshRangeError::Store)? {
        if !options.range.holds_project(prefix) {
            return Err(MeshRangeError::Outside {
                project: project.to_string(),
                prefix,
                range: options.range,
            });
        }
    }
    Ok(())
}
