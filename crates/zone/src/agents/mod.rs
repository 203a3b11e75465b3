//! The zone's side of the agent protocol (`orc.agent.v1`): nodes' agents join with a join
//! token and keep one stream open, over which the zone sends their config and runs
//! `orc exec`.
//!
//! - **Join.** An agent presents its join token, its node id, its own public key and its
//!   facts. The token must pin this zone's CA, admit that node, be live, and (when bound) name
//!   the machine's `product_uuid`; the zone then signs a node certificate over the agent's key
//!   and records the agent as `joined`. Every refusal names its reason to the agent and is a
//!   `node.join_refused` event; the token's text is in neither.
//! - **Attach.** The stream is authenticated by the node certificate alone (the listener hands
//!   its fingerprint to the request): the current certificate, or the one it replaced at the
//!   last renewal. The agent says hello with its facts and the config generation it applied;
//!   the zone answers with its welcome and the config it wants, computed from the node, its
//!   pool and its provider. An agent that reports the wanted generation applied is `ready`.
//!   A newer stream of the same node replaces an older one.
//! - **Exec.** [`AgentHub::exec`] starts a command on an attached agent and relays its output
//!   and exit; when the caller goes away the command is cancelled, and when the stream ends the
//!   command ends with an error.
//! - **Contact.** Both sides send keep-alives; a stream silent past the timeout ends. The last
//!   contact is kept in memory for every message and written to the store at most every
//!   [`AgentHubOptions::contact_write_interval`], so 10,000 agents do not write every few
//!   seconds.
//!
//! - **Mesh status.** Agents report what their WireGuard interfaces see (per peer: the last
//!   handshake and the bytes each way) and the generation they applied; the hub keeps the
//!   latest report of each node in this controller's memory only ([`AgentHub::mesh_status`]),
//!   so a zone run by several controllers shows each one's attached agents.
//!
//! Lock discipline as in the provider hub: one `std::sync::Mutex`, never held across an
//! `.await`; outbound channels are unbounded so sending under the lock never waits.

pub mod bootstrap;
mod join;
mod session;
mod tunnels;
mod workloads;

pub use tunnels::TunnelError;

pub use workloads::AssignmentSignal;

pub use bootstrap::{AgentBinary, AgentBootstrap};

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use orc_mesh::MeshConfig;
use orc_mesh::changes::ChangeCache;
use orc_proto::agent_pb::{self, agent_hub_server::AgentHubServer};
use orc_tls::ZoneCa;
use tokio::sync::{Notify, mpsc, oneshot, watch};
use tokio::time::Instant;

use crate::model::{NodeId, Timestamp};
use crate::store::{AgentUpdate, Store};
use orc_common::time::{SharedClock, SystemClock};
use orc_zone_model::{InterfaceAddress, NodeAgent, NodeFacts};

/// Largest agent message the zone accepts (an exec output chunk is far smaller).
pub const MAX_AGENT_MESSAGE_BYTES: usize = 1 << 20;

/// Settings of the agent hub. `Default` gives the production values.
#[derive(Clone)]
pub struct AgentHubOptions {
    /// How often each side sends a keep-alive. Default 15 s.
    pub keepalive_interval: Duration,
    /// A stream silent this long counts as ended. Default 45 s.
    pub keepalive_timeout: Duration,
    /// How long a new stream may take to say hello. Default 10 s.
    pub hello_timeout: Duration,
    /// The last contact is written to the store at most this often per agent. Default 30 s.
    pub contact_write_interval: Duration,
    /// How long a node certificate is valid. Default 30 days.
    pub cert_lifetime: Duration,
    /// How long an agent that attaches before the zone's first mesh plan waits for it.
    /// Default 5 s.
    pub mesh_wait: Duration,
    /// The clock for stored times.
    pub clock: SharedClock,
    /// Where nodes pull images (`https://zone:7070`, the address they download the agent
    /// from); `None` when nodes cannot reach the zone's API.
    pub registry_url: Option<String>,
    /// What signs the registry pull grants nodes get (the API checks them with the same).
    pub pull_key: Arc<orc_zone_model::oci::PullKey>,
    /// Woken when a node's report changes a replica, so rollouts go on at once.
    pub rollouts: crate::rollouts::RolloutSignal,
    /// Says that assignments may have changed, so sessions send them at once.
    pub assignments: AssignmentSignal,
    /// Where replicas take their addresses (the zone's mesh options say); `None`: replicas
    /// get no network beyond their own loopback.
    pub workloads: Option<orc_mesh::WorkloadRange>,
}

impl fmt::Debug for AgentHubOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentHubOptions")
            .field("keepalive_interval", &self.keepalive_interval)
            .field("keepalive_timeout", &self.keepalive_timeout)
            .field("hello_timeout", &self.hello_timeout)
            .field("contact_write_interval", &self.contact_write_interval)
            .field("cert_lifetime", &self.cert_lifetime)
            .finish_non_exhaustive()
    }
}

impl Default for AgentHubOptions {
    fn default() -> Self {
        AgentHubOptions {
            keepalive_interval: Duration::from_secs(15),
            keepalive_timeout: Duration::from_secs(45),
            hello_timeout: Duration::from_secs(10),
            contact_write_interval: Duration::from_secs(30),
            cert_lifetime: orc_tls::ca::NODE_CERT_LIFETIME,
            mesh_wait: Duration::from_secs(5),
            clock: Arc::new(SystemClock),
            registry_url: None,
            pull_key: Arc::new(orc_zone_model::oci::PullKey::generate()),
            rollouts: crate::rollouts::RolloutSignal::default(),
            assignments: AssignmentSignal::default(),
            workloads: Some(orc_mesh::WorkloadRange::default()),
        }
    }
}

/// Which output of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecStream {
    Stdout,
    Stderr,
}

/// What a running command reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecEvent {
    Output {
        stream: ExecStream,
        data: Vec<u8>,
    },
    /// The last event: the exit code (`None` when killed by a signal or not started), and
    /// why it did not run to its end, if so.
    Exit {
        code: Option<i32>,
        error: Option<String>,
    },
}

/// What an exec on a node runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecWhat {
    /// A command on the node (`orc exec`).
    Node(Vec<String>),
    /// A command inside a replica's container (`orc app exec`).
    Replica { replica: String, argv: Vec<String> },
    /// A replica's output (`orc app logs`): the end of each stream (`tail_bytes`, 0 for all
    /// that is kept), then, when `follow`, what it writes.
    Logs {
        replica: String,
        tail_bytes: u64,
        follow: bool,
    },
}

/// Why a command could not be started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecError {
    #[error("node {0}'s agent is not connected")]
    NotConnected(NodeId),
    #[error("the command is empty")]
    EmptyCommand,
}

/// An attached agent, as views show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentLive {
    pub since: Timestamp,
    pub last_contact: Timestamp,
}

type Outbound = crate::streams::Outbound<agent_pb::ZoneMessage>;

/// A node's open stream.
struct Attached {
    stream: u64,
    outbound: Outbound,
    since: Timestamp,
    last_contact: Timestamp,
    /// Commands running on it, by exec id.
    execs: BTreeMap<u64, mpsc::Sender<ExecEvent>>,
    /// Connections it relays, by tunnel id.
    tunnels: BTreeMap<u64, mpsc::Sender<tunnels::TunnelEvent>>,
    /// Told when the node's mesh config changed, so the session sends its new config.
    refresh: Arc<Notify>,
}

#[derive(Default)]
struct HubState {
    attached: BTreeMap<NodeId, Attached>,
    /// The mesh plan last published: each node's mesh config and its digest.
    mesh: BTreeMap<NodeId, (MeshConfig, String)>,
    /// The latest mesh status each node's agent reported.
    mesh_status: BTreeMap<NodeId, MeshStatusReport>,
    /// The ACME challenges each node's agent holds: those of the last assignment it said
    /// it applied.
    challenges: BTreeMap<NodeId, BTreeSet<String>>,
}

/// A node's latest report of its WireGuard interfaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeshStatusReport {
    /// When the zone received it.
    pub received: Timestamp,
    /// The generation of the config whose mesh the agent applied last.
    pub applied_generation: u64,
    /// By interface name.
    pub interfaces: BTreeMap<String, Vec<PeerStatus>>,
}

/// What an interface sees of one peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerStatus {
    pub public_key: orc_mesh::PublicKey,
    /// Unix seconds of the current session's handshake; `None`: none.
    pub last_handshake: Option<u64>,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
}

impl MeshStatusReport {
    /// The report in `status`, received at `received`; peers with a malformed key are left out.
    pub fn from_wire(status: agent_pb::MeshStatus, received: Timestamp) -> MeshStatusReport {
        let interfaces = status
            .interfaces
            .into_iter()
            .map(|interface| {
                let mut peers: Vec<PeerStatus> = interface
                    .peers
                    .into_iter()
                    .filter_map(|peer| {
                        let key: [u8; 32] = peer.public_key.as_slice().try_into().ok()?;
                        Some(PeerStatus {
                            public_key: orc_mesh::PublicKey(key),
                            last_handshake: (peer.last_handshake > 0)
                                .then_some(peer.last_handshake),
                            rx_bytes: peer.rx_bytes,
                            tx_bytes: peer.tx_bytes,
                        })
                    })
                    .collect();
                peers.sort_by_key(|p| p.public_key);
                (interface.name, peers)
            })
            .collect();
        MeshStatusReport {
            received,
            applied_generation: status.applied_generation,
            interfaces,
        }
    }
}

struct Inner {
    store: Store,
    ca: Option<Arc<ZoneCa>>,
    options: AgentHubOptions,
    state: Mutex<HubState>,
    next_id: AtomicU64,
    closing: watch::Sender<bool>,
    /// How many mesh plans were published (0: none yet).
    mesh_planned: watch::Sender<u64>,
    /// Bumped whenever a node's held challenges change.
    challenges_held: watch::Sender<u64>,
    /// Told when an agent reported something the mesh plan depends on (its key).
    mesh_wake: Notify,
    /// The changes between the shared peer tables of the last plan and the one before,
    /// computed once for all the agents that hold them.
    mesh_changes: ChangeCache,
    /// Agent rows on their way to the store ([`AgentHub::write_agent`]).
    writes: mpsc::UnboundedSender<AgentWrite>,
    /// The writer's end, until the first write starts it.
    writer: Mutex<Option<mpsc::UnboundedReceiver<AgentWrite>>>,
}

/// An agent row to write, and who waits for it.
struct AgentWrite {
    agent: NodeAgent,
    /// Written by then at the latest.
    by: Instant,
    /// Told whether the row was there (`None`: the write failed); no one waits for a
    /// deferred write.
    done: Option<oneshot::Sender<Option<bool>>>,
}

/// How long the writer gathers rows before it writes them: the acknowledgements of one mesh
/// change arrive within a few milliseconds of each other and go to the store together.
const WRITE_GATHER: Duration = Duration::from_millis(5);

/// How long an acknowledgement of a changed config may wait: those of one change arrive
/// over some tens of milliseconds when it reaches hundreds of agents, and go to the store
/// in one or two transactions.
const WRITE_ACK: Duration = Duration::from_millis(25);

/// How long a session holds the row of a config it sent: the new generation is written with
/// the agent's acknowledgement when that comes in time, else on its own.
pub(super) const WRITE_DEFER: Duration = Duration::from_millis(250);

/// A node's rows waiting together: the last one, and everyone waiting.
struct Waiting {
    agent: NodeAgent,
    waiters: Vec<oneshot::Sender<Option<bool>>>,
}

/// Writes agent rows as they come: all rows waiting when the earliest is due, in one
/// transaction; a node's rows that wait together are written once, as the last one says
/// (each is the session's whole row). Facts are written only when they differ from those
/// this writer wrote last for the same join. Ends when the hub is gone.
async fn write_agents(store: Store, mut rows: mpsc::UnboundedReceiver<AgentWrite>) {
    let mut written_facts: BTreeMap<NodeId, (Timestamp, NodeFacts)> = BTreeMap::new();
    let mut batch: BTreeMap<NodeId, Waiting> = BTreeMap::new();
    let add =
        |batch: &mut BTreeMap<NodeId, Waiting>, until: &mut Option<Instant>, write: AgentWrite| {
            *until = Some(until.map_or(write.by, |d| d.min(write.by)));
            match batch.entry(write.agent.node_id.clone()) {
                Entry::Occupied(mut waiting) => {
                    let waiting = waiting.get_mut();
                    waiting.agent = write.agent;
                    waiting.waiters.extend(write.done);
                }
                Entry::Vacant(slot) => {
                    slot.insert(Waiting {
                        agent: write.agent,
                        waiters: write.done.into_iter().collect(),
                    });
                }
            }
        };
    loop {
        let Some(first) = rows.recv().await else {
            return;
        };
        let mut until = None;
        add(&mut batch, &mut until, first);
        let mut closed = false;
        // Gather until the earliest row is due.
        while let Some(at) = until {
            tokio::select! {
                row = rows.recv() => match row {
                    Some(write) => add(&mut batch, &mut until, write),
                    None => {
                        closed = true;
                        break;
                    }
                },
                () = tokio::time::sleep_until(at) => break,
            }
        }
        write_batch(&store, std::mem::take(&mut batch), &mut written_facts).await;
        if closed {
            return;
        }
    }
}

/// Writes the rows of `batch` in one transaction and tells who waits.
async fn write_batch(
    store: &Store,
    batch: BTreeMap<NodeId, Waiting>,
    written_facts: &mut BTreeMap<NodeId, (Timestamp, NodeFacts)>,
) {
    let (updates, waiting): (Vec<AgentUpdate>, Vec<Vec<_>>) = batch
        .into_values()
        .map(|w| {
            let facts = written_facts
                .get(&w.agent.node_id)
                .is_none_or(|(joined, facts)| {
                    *joined != w.agent.joined_at || *facts != w.agent.facts
                });
            (
                AgentUpdate {
                    agent: w.agent,
                    facts,
                },
                w.waiters,
            )
        })
        .unzip();
    let written = match store.update_node_agents(&updates).await {
        Ok(written) => written.into_iter().map(Some).collect(),
        Err(error) => {
            tracing::warn!(%error, agents = updates.len(), "node agents not written");
            vec![None; updates.len()]
        }
    };
    for ((update, waiters), outcome) in updates.into_iter().zip(waiting).zip(written) {
        let agent = update.agent;
        if outcome == Some(true) {
            written_facts.insert(agent.node_id.clone(), (agent.joined_at, agent.facts));
        } else {
            if outcome == Some(false) && waiters.is_empty() {
                tracing::info!(node = %agent.node_id, "the node joined again; a row of its older stream was dropped");
            }
            written_facts.remove(&agent.node_id);
        }
        for waiter in waiters {
            let _ = waiter.send(outcome);
        }
    }
}

/// The zone's agent hub. Cheap to clone.
#[derive(Clone)]
pub struct AgentHub {
    inner: Arc<Inner>,
}

impl fmt::Debug for AgentHub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentHub")
            .field("options", &self.inner.options)
            .field("attached", &self.attached_count())
            .finish_non_exhaustive()
    }
}

impl AgentHub {
    /// A hub over `store` that signs node certificates with `ca` (`None`: a plain zone,
    /// which agents cannot join).
    pub fn new(store: Store, ca: Option<Arc<ZoneCa>>, options: AgentHubOptions) -> AgentHub {
        let (writes, writer) = mpsc::unbounded_channel();
        AgentHub {
            inner: Arc::new(Inner {
                store,
                ca,
                options,
                state: Mutex::new(HubState::default()),
                next_id: AtomicU64::new(1),
                closing: watch::Sender::new(false),
                mesh_planned: watch::Sender::new(0),
                challenges_held: watch::Sender::new(0),
                mesh_wake: Notify::new(),
                mesh_changes: ChangeCache::default(),
                writes,
                writer: Mutex::new(Some(writer)),
            }),
        }
    }

    /// Writes `agent`'s row with others that wait at the same time; whether the row was
    /// there (`None`: the write failed and was logged).
    async fn write_agent(&self, agent: &NodeAgent) -> Option<bool> {
        let (done, outcome) = oneshot::channel();
        self.send_write(agent, WRITE_GATHER, Some(done));
        outcome.await.ok().flatten()
    }

    /// Queues the row of `agent`, which acknowledged a changed config, to be written within
    /// [`WRITE_ACK`]; no one waits for it.
    fn write_ack(&self, agent: &NodeAgent) {
        self.send_write(agent, WRITE_ACK, None);
    }

    fn send_write(
        &self,
        agent: &NodeAgent,
        within: Duration,
        done: Option<oneshot::Sender<Option<bool>>>,
    ) {
        let writer = self
            .inner
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(rows) = writer {
            tokio::spawn(write_agents(self.inner.store.clone(), rows));
        }
        let write = AgentWrite {
            agent: agent.clone(),
            by: Instant::now() + within,
            done,
        };
        let _ = self.inner.writes.send(write);
    }

    fn state(&self) -> MutexGuard<'_, HubState> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn now(&self) -> Timestamp {
        self.inner.options.clock.now()
    }

    fn next_id(&self) -> u64 {
        self.inner.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// What the hub wakes when a node's report changes a replica.
    pub fn rollout_signal(&self) -> crate::rollouts::RolloutSignal {
        self.inner.options.rollouts.clone()
    }

    /// What tells the hub's sessions that assignments may have changed.
    pub fn assignment_signal(&self) -> AssignmentSignal {
        self.inner.options.assignments.clone()
    }

    /// Records that `node`'s agent applied an assignment holding `challenges`.
    pub(super) fn hold_challenges(&self, node: &NodeId, challenges: BTreeSet<String>) {
        let changed = {
            let mut state = self.state();
            let held = state.challenges.entry(node.clone()).or_default();
            let changed = *held != challenges;
            *held = challenges;
            changed
        };
        if changed {
            self.inner
                .challenges_held
                .send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Waits until the agent of every node of `nodes` that is attached holds every challenge
    /// of `tokens`, at most `timeout`; the attached nodes that did not by then.
    pub async fn wait_for_challenges(
        &self,
        nodes: &[NodeId],
        tokens: &BTreeSet<String>,
        timeout: Duration,
    ) -> Vec<NodeId> {
        let mut held = self.inner.challenges_held.subscribe();
        let missing = |hub: &AgentHub| -> Vec<NodeId> {
            let state = hub.state();
            nodes
                .iter()
                .filter(|node| state.attached.contains_key(*node))
                .filter(|node| {
                    state
                        .challenges
                        .get(*node)
                        .is_none_or(|have| !tokens.is_subset(have))
                })
                .cloned()
                .collect()
        };
        let deadline = Instant::now() + timeout;
        loop {
            let late = missing(self);
            if late.is_empty() {
                return late;
            }
            tokio::select! {
                changed = held.changed() => if changed.is_err() { return late; },
                () = tokio::time::sleep_until(deadline) => return missing(self),
            }
        }
    }

    /// The tonic service to mount beside the provider hub's.
    pub fn grpc_service(&self) -> AgentHubServer<session::AgentHubService> {
        AgentHubServer::new(session::AgentHubService { hub: self.clone() })
            .max_decoding_message_size(MAX_AGENT_MESSAGE_BYTES)
    }

    /// The fingerprint of the CA that signs node certificates; `None` on a plain zone.
    pub fn ca_fingerprint(&self) -> Option<String> {
        self.inner.ca.as_ref().map(|ca| ca.fingerprint())
    }

    /// How many agents are attached now.
    pub fn attached_count(&self) -> usize {
        self.state().attached.len()
    }

    /// The attached agent of `node`, if any.
    pub fn live(&self, node: &NodeId) -> Option<AgentLive> {
        self.state().attached.get(node).map(|a| AgentLive {
            since: a.since,
            last_contact: a.last_contact,
        })
    }

    /// Starts `what` on `node`'s agent, to be stopped after `timeout`. Output and the exit
    /// come on the receiver; dropping it cancels the command.
    pub fn exec(
        &self,
        node: &NodeId,
        what: ExecWhat,
        timeout: Duration,
    ) -> Result<mpsc::Receiver<ExecEvent>, ExecError> {
        let (argv, replica, logs) = match what {
            ExecWhat::Node(argv) => (argv, String::new(), None),
            ExecWhat::Replica { replica, argv } => (argv, replica, None),
            ExecWhat::Logs {
                replica,
                tail_bytes,
                follow,
            } => (
                Vec::new(),
                replica,
                Some(agent_pb::LogsRequest { tail_bytes, follow }),
            ),
        };
        if logs.is_none() && argv.first().is_none_or(|a| a.is_empty()) {
            return Err(ExecError::EmptyCommand);
        }
        let exec_id = self.next_id();
        let (tx, rx) = mpsc::channel(64);
        let mut state = self.state();
        let attached = state
            .attached
            .get_mut(node)
            .ok_or_else(|| ExecError::NotConnected(node.clone()))?;
        attached.execs.insert(exec_id, tx);
        let start = agent_pb::ExecStart {
            exec_id,
            argv,
            timeout_seconds: u32::try_from(timeout.as_secs().max(1)).unwrap_or(u32::MAX),
            replica,
            logs,
        };
        let _ = attached
            .outbound
            .send(Ok(zone_message(agent_pb::zone_message::Body::ExecStart(
                start,
            ))));
        Ok(rx)
    }

    /// Publishes the mesh plan: each node's mesh config (a node not in `plan` has none).
    /// Every attached agent whose config changed is sent its new one; returns how many.
    pub fn publish_mesh(&self, plan: BTreeMap<NodeId, MeshConfig>) -> usize {
        // Digests outside the lock: each shared table's is computed once, here.
        let plan: BTreeMap<NodeId, (MeshConfig, String)> = plan
            .into_iter()
            .map(|(node, config)| {
                let digest = config.digest();
                (node, (config, digest))
            })
            .collect();
        let mut told = 0;
        {
            let mut state = self.state();
            let old = std::mem::take(&mut state.mesh);
            for (node, attached) in &state.attached {
                if old.get(node).map(|(_, d)| d) != plan.get(node).map(|(_, d)| d) {
                    attached.refresh.notify_one();
                    told += 1;
                }
            }
            state.mesh = plan;
        }
        if told > 0 {
            // Changes between the tables of older plans are not asked for again.
            self.inner.mesh_changes.clear();
        }
        self.inner.mesh_planned.send_modify(|n| *n += 1);
        told
    }

    /// The mesh config of `node` in the plan last published.
    pub fn mesh_of(&self, node: &NodeId) -> MeshConfig {
        self.planned_mesh(node).0
    }

    /// The mesh config of `node` in the plan last published, with its digest (none for a
    /// node the plan does not hold: its empty mesh enters no config digest).
    fn planned_mesh(&self, node: &NodeId) -> (MeshConfig, String) {
        self.state().mesh.get(node).cloned().unwrap_or_default()
    }

    /// The latest mesh status `node`'s agent reported to this controller, if any.
    pub fn mesh_status(&self, node: &NodeId) -> Option<MeshStatusReport> {
        self.state().mesh_status.get(node).cloned()
    }

    /// Keeps `report` as `node`'s latest mesh status.
    pub fn record_mesh_status(&self, node: &NodeId, report: MeshStatusReport) {
        self.state().mesh_status.insert(node.clone(), report);
    }

    /// Resolves when an agent reported something the mesh plan depends on.
    pub async fn mesh_changed(&self) {
        self.inner.mesh_wake.notified().await;
    }

    /// Waits (at most `limit`) for a mesh plan that includes `node`: a pass is asked for
    /// when the plan published last does not, so an agent that joined or made a new key gets
    /// its whole config at once instead of one without its mesh first.
    async fn mesh_planned(&self, node: &NodeId, fresh: bool, limit: Duration) {
        let mut planned = self.inner.mesh_planned.subscribe();
        let seen = *planned.borrow_and_update();
        if seen > 0 && !fresh && self.state().mesh.contains_key(node) {
            return;
        }
        self.inner.mesh_wake.notify_one();
        let _ = tokio::time::timeout(limit, planned.wait_for(|n| *n > seen)).await;
    }

    /// Ends every agent stream; streams opened afterwards are ended at once. Agents
    /// reconnect to the next zone on the same store.
    pub fn shutdown(&self) {
        self.inner.closing.send_replace(true);
    }
}

fn zone_message(body: agent_pb::zone_message::Body) -> agent_pb::ZoneMessage {
    agent_pb::ZoneMessage { body: Some(body) }
}

/// The model's facts from the wire's, and the machine's `product_uuid`.
fn facts_from(facts: Option<agent_pb::Facts>) -> (NodeFacts, String) {
    let facts = facts.unwrap_or_default();
    let model = NodeFacts {
        hostname: facts.hostname,
        addresses: facts
            .addresses
            .into_iter()
            .map(|a| InterfaceAddress {
                interface: a.interface,
                cidr: a.cidr,
            })
            .collect(),
        kernel: facts.kernel,
        architecture: facts.architecture,
        cpus: facts.cpus,
        memory_total_bytes: facts.memory_total_bytes,
        memory_available_bytes: facts.memory_available_bytes,
        load_centi: facts.load_centi,
        wireguard_public_key: facts.wireguard_public_key,
        wireguard: facts.wireguard,
    };
    (model, facts.product_uuid)
}
