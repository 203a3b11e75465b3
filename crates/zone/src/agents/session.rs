//! One agent stream from `Attach` to its end: know the node by its certificate, read the
//! hello, send the welcome and the config, then route what the agent sends until the stream
//! ends, falls silent, or a newer stream of the node replaces it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use orc_mesh::{MeshChanges, MeshConfig};
use orc_proto::agent_pb::{self, agent_hub_server, agent_message, zone_message};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::join::{timestamp_of, utc_minute};
use super::{
    AgentHub, Attached, ExecEvent, ExecStream, Outbound, WRITE_DEFER, facts_from,
    zone_message as message,
};
use crate::model::{AgentState, NodeState};
use crate::store::StoreError;
use crate::streams::{Ending, Next, StreamLoop, first_message};
use orc_zone_model::{AgentConfig, NodeAgent};

/// The tonic service behind [`AgentHub::grpc_service`].
pub struct AgentHubService {
    pub(super) hub: AgentHub,
}

impl std::fmt::Debug for AgentHubService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AgentHubService")
    }
}

type Inbound = crate::streams::Inbound<agent_pb::AgentMessage>;

fn unavailable(error: &StoreError) -> Status {
    tracing::warn!(%error, "store error on an agent stream");
    Status::unavailable("the zone's store is not available; try again")
}

#[tonic::async_trait]
impl agent_hub_server::AgentHub for AgentHubService {
    async fn join(
        &self,
        request: Request<agent_pb::JoinRequest>,
    ) -> Result<Response<agent_pb::JoinReply>, Status> {
        self.hub.join(request.into_inner()).await.map(Response::new)
    }

    type AttachStream = UnboundedReceiverStream<Result<agent_pb::ZoneMessage, Status>>;

    async fn attach(
        &self,
        request: Request<Streaming<agent_pb::AgentMessage>>,
    ) -> Result<Response<Self::AttachStream>, Status> {
        let hub = self.hub.clone();
        let fingerprint = request
            .extensions()
            .get::<orc_tls::ClientCertificate>()
            .map(|c| c.fingerprint.to_string())
            .ok_or_else(|| {
                Status::unauthenticated(
                    "attach needs the node certificate the zone signed at join; \
                     join with a join token first",
                )
            })?;
        let agent = match hub
            .inner
            .store
            .node_agent_by_certificate(&fingerprint)
            .await
        {
            Ok(Some(agent)) => agent,
            Ok(None) => {
                return Err(Status::unauthenticated(
                    "this certificate is no longer the node's (it joined again since); \
                     rejoin with a new join token",
                ));
            }
            Err(e) => return Err(unavailable(&e)),
        };
        let inbound: Inbound = Box::pin(request.into_inner());
        let (outbound, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move { hub.run_session(agent, inbound, outbound).await });
        Ok(Response::new(UnboundedReceiverStream::new(rx)))
    }
}

/// What a session waits for besides the agent's messages and the keep-alive tick.
enum SessionEvent {
    /// A config sent was not acknowledged in time: its row is written anyway.
    WriteDue,
    /// The zone's mesh plan changed: the agent may need a new config.
    Refresh,
    /// Time to look at the node's workloads again.
    Workloads,
}

/// How a session ended.
enum End {
    /// The agent closed the stream or it broke.
    Gone(&'static str),
    /// The zone is stopping, or a newer stream took over: the agent reconnects.
    Quiet(&'static str),
}

impl AgentHub {
    async fn run_session(&self, agent: NodeAgent, mut inbound: Inbound, outbound: Outbound) {
        let node = agent.node_id.clone();
        let hello = match self.read_hello(&mut inbound).await {
            Ok(hello) => hello,
            Err(status) => {
                let _ = outbound.send(Err(status));
                return;
            }
        };
        let applies_changes = hello.applies_mesh_changes;
        let (mut agent, base) = match self.prepare(agent, hello).await {
            Ok(ready) => ready,
            Err(status) => {
                let _ = outbound.send(Err(status));
                return;
            }
        };
        let stream = self.next_id();
        let now = self.now();
        let refresh = Arc::new(Notify::new());
        let replaced = self.state().attached.insert(
            node.clone(),
            Attached {
                stream,
                outbound: outbound.clone(),
                since: now,
                last_contact: now,
                execs: Default::default(),
                tunnels: Default::default(),
                refresh: refresh.clone(),
            },
        );
        // The mesh plan as of now (a change published from here on tells `refresh`).
        let (mesh, mesh_digest) = self.planned_mesh(&node);
        let config = base.clone().with_mesh(mesh);
        let digest = config.digest_with(|| mesh_digest);
        let (generation, is_new) = agent.generation_for(&digest);
        if is_new {
            agent.desired_generation = generation;
            agent.config_digest = digest;
        }
        if let Some(old) = replaced {
            end_execs(
                old.execs.into_values(),
                "a newer connection of the node replaced it",
            );
            let leave = agent_pb::Leave {
                reason: "a newer connection of this node replaced this one".to_string(),
            };
            let _ = old
                .outbound
                .send(Ok(message(zone_message::Body::Leave(leave))));
        }
        let keepalive_seconds =
            u32::try_from(self.inner.options.keepalive_interval.as_secs()).unwrap_or(u32::MAX);
        let _ = outbound.send(Ok(message(zone_message::Body::Welcome(
            agent_pb::Welcome {
                node_id: node.to_string(),
                keepalive_seconds,
            },
        ))));
        let _ = outbound.send(Ok(message(zone_message::Body::Config(config_message(
            agent.desired_generation,
            &config,
            None,
        )))));
        let sent = Mutex::new(Some((agent.desired_generation, config.mesh)));
        let updating = AtomicBool::new(false);
        self.settle(&mut agent, None, &updating).await;
        tracing::info!(%node, version = %agent.version, state = %agent.state, "a node's agent attached");
        let session = Session {
            stream,
            applies_changes,
            sent: &sent,
            updating: &updating,
            base: &base,
            refresh: &refresh,
            outbound: &outbound,
        };
        let options = &self.inner.options;
        let mut stream_loop = StreamLoop::new(
            inbound,
            outbound.clone(),
            self.inner.closing.subscribe(),
            options.keepalive_interval,
            options.keepalive_timeout,
        );
        let end = self
            .route_messages(&mut agent, &session, &mut stream_loop)
            .await;
        let execs = {
            let mut state = self.state();
            match state.attached.get(&node) {
                Some(a) if a.stream == stream => state.attached.remove(&node).map(|a| a.execs),
                _ => None,
            }
        };
        let Some(execs) = execs else {
            // A newer stream of the node owns its record now; this one's view is stale.
            tracing::debug!(%node, "a replaced stream of a node's agent ended");
            return;
        };
        end_execs(execs.into_values(), "the node's agent disconnected");
        match end {
            End::Gone(reason) => {
                tracing::info!(%node, reason, "a node's agent detached");
                // Not ready while it is away; the last contact stays the last one heard.
                let was_ready = agent.state == AgentState::Ready;
                agent.state = AgentState::Joined;
                self.write(&agent).await;
                if was_ready {
                    let words = format!("its agent disconnected ({reason})");
                    self.node_event(&node, "node.agent_gone", &words).await;
                }
            }
            End::Quiet(reason) => {
                tracing::debug!(%node, reason, "a node's agent stream ended");
                self.write(&agent).await;
            }
        }
    }

    async fn read_hello(&self, inbound: &mut Inbound) -> Result<agent_pb::Hello, Status> {
        let message = first_message(inbound, self.inner.options.hello_timeout).await?;
        let Some(agent_message::Body::Hello(hello)) = message.body else {
            return Err(Status::invalid_argument(
                "the first message of a stream must be a hello",
            ));
        };
        if hello.protocol_version != orc_proto::AGENT_PROTOCOL_VERSION {
            return Err(Status::failed_precondition(format!(
                "the agent speaks protocol version {}, this zone speaks {}; \
                 upgrade the agent from the zone",
                hello.protocol_version,
                orc_proto::AGENT_PROTOCOL_VERSION
            )));
        }
        Ok(hello)
    }

    /// Refuses an ended node; takes in the hello (and tells the mesh plan about a new key);
    /// computes the config without its mesh, waiting for the zone's first mesh plan.
    async fn prepare(
        &self,
        mut agent: NodeAgent,
        hello: agent_pb::Hello,
    ) -> Result<(NodeAgent, AgentConfig), Status> {
        let store = &self.inner.store;
        let node = store
            .get_node(&agent.node_id)
            .await
            .map_err(|e| unavailable(&e))?;
        if node.status.state == NodeState::Ended {
            return Err(Status::permission_denied(format!(
                "node {} has ended; its agent should stop",
                node.id
            )));
        }
        let pool = store
            .get_pool(&node.pool_id)
            .await
            .map_err(|e| unavailable(&e))?;
        let provider = store
            .get_provider(&pool.spec.provider_id)
            .await
            .map_err(|e| unavailable(&e))?;
        let config = AgentConfig::for_node(&node, &pool.name, &provider.name);
        let (facts, _) = facts_from(hello.facts);
        let key_changed = facts.wireguard_public_key != agent.facts.wireguard_public_key;
        agent.facts = facts;
        if key_changed {
            // The plan reads keys from the store: write first, then ask for a pass.
            self.write(&agent).await;
        }
        self.mesh_planned(&agent.node_id, key_changed, self.inner.options.mesh_wait)
            .await;
        agent.version = hello.version;
        agent.applied_generation = hello.applied_generation;
        agent.last_contact_at = self.now();
        Ok((agent, config))
    }

    /// Moves the agent to the state its generations make it, writes it, and records the
    /// change to `ready` (not the return to it after a changed config was applied). `error`
    /// carries a reported apply error.
    async fn settle(&self, agent: &mut NodeAgent, error: Option<String>, updating: &AtomicBool) {
        agent.apply_error = error;
        let was_ready = agent.state == AgentState::Ready || updating.load(Ordering::SeqCst);
        agent.state = agent.settled_state();
        if agent.state == AgentState::Ready || agent.apply_error.is_some() {
            // Back in step, or failed: a later ready is news again.
            updating.store(false, Ordering::SeqCst);
        }
        if was_ready && agent.state == AgentState::Ready {
            // The acknowledgement of a changed config: nothing waits for the row, which goes
            // to the store with the other agents' acknowledgements of the same change.
            self.write_ack(agent);
            return;
        }
        self.write(agent).await;
        if !was_ready && agent.state == AgentState::Ready {
            let words = format!(
                "ready: its agent (version {}) applied config generation {}",
                agent.version, agent.desired_generation
            );
            self.node_event(&agent.node_id, "node.ready", &words).await;
        }
        if let Some(error) = &agent.apply_error {
            let words = format!(
                "its agent could not apply config generation {}: {error}",
                agent.applied_generation
            );
            self.node_event(&agent.node_id, "node.config_failed", &words)
                .await;
        }
    }

    /// Writes the agent's row (with the rows other sessions write at the same time).
    async fn write(&self, agent: &NodeAgent) {
        if self.write_agent(agent).await == Some(false) {
            tracing::info!(node = %agent.node_id, "the node joined again; this stream's writes are dropped");
        }
    }

    /// Sends the node's config again when its mesh changed since the generation it has: only
    /// what changed since the config sent before on this stream, to an agent that applies
    /// changes, else the whole config. True when the agent's row changed and is not written
    /// yet (the caller writes it with the acknowledgement, or after [`WRITE_DEFER`]).
    fn refresh_config(&self, agent: &mut NodeAgent, session: &Session<'_>) -> bool {
        let (mesh, mesh_digest) = self.planned_mesh(&agent.node_id);
        let config = session.base.clone().with_mesh(mesh);
        let digest = config.digest_with(|| mesh_digest);
        let (generation, is_new) = agent.generation_for(&digest);
        if !is_new {
            return false;
        }
        // The changes from the config sent before on this stream.
        let changes = session
            .sent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .map(|(base, mesh)| {
                let changes =
                    MeshChanges::between_cached(&mesh, &config.mesh, &self.inner.mesh_changes);
                (base, changes)
            });
        if let Some((base, changes)) = &changes
            && changes.is_empty()
        {
            // Only the way its tables are shared changed: the agent holds this config.
            agent.config_digest = digest;
            *session.sent.lock().unwrap_or_else(PoisonError::into_inner) =
                Some((*base, config.mesh));
            return true;
        }
        agent.desired_generation = generation;
        agent.config_digest = digest;
        if agent.state == AgentState::Ready {
            session.updating.store(true, Ordering::SeqCst);
        }
        agent.state = agent.settled_state();
        let changes = changes
            .as_ref()
            .filter(|_| session.applies_changes)
            .map(|(base, changes)| (*base, changes));
        let _ = session
            .outbound
            .send(Ok(message(zone_message::Body::Config(config_message(
                generation, &config, changes,
            )))));
        tracing::debug!(node = %agent.node_id, generation, changes = changes.is_some(), "sent a node's changed config");
        *session.sent.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((generation, config.mesh));
        // Written with the acknowledgement, which follows within milliseconds.
        true
    }

    async fn route_messages(
        &self,
        agent: &mut NodeAgent,
        session: &Session<'_>,
        stream_loop: &mut StreamLoop<agent_pb::AgentMessage, agent_pb::ZoneMessage>,
    ) -> End {
        let (stream, outbound) = (session.stream, session.outbound);
        let options = &self.inner.options;
        let mut last_written = Instant::now();
        // When the row of a config sent is written if no acknowledgement came first.
        let mut unwritten: Option<Instant> = None;
        // The node's workloads as last sent, and when to look at them again.
        let mut workloads_sent = super::workloads::NodeWorkloads::default();
        let mut workloads_sent_once = false;
        // The generation of the workloads sent last (the zone's clock, in milliseconds).
        let mut workloads_generation = 0u64;
        let mut workloads_due = Instant::now();
        let mut assignments = options.assignments.subscribe();
        loop {
            let assignments = &mut assignments;
            let own = async move {
                let write_due = async move {
                    match unwritten {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    () = write_due => SessionEvent::WriteDue,
                    () = session.refresh.notified() => SessionEvent::Refresh,
                    () = tokio::time::sleep_until(workloads_due) => SessionEvent::Workloads,
                    Ok(()) = assignments.changed() => SessionEvent::Workloads,
                }
            };
            let body = match stream_loop.next(own).await {
                Next::Message(m) => m.body,
                Next::Tick => {
                    let _ = outbound.send(Ok(message(zone_message::Body::KeepAlive(
                        agent_pb::KeepAlive {},
                    ))));
                    if !self.is_current(agent, stream) {
                        return End::Quiet("a newer connection of the node replaced it");
                    }
                    continue;
                }
                Next::Own(SessionEvent::WriteDue) => {
                    unwritten = None;
                    self.write_ack(agent);
                    continue;
                }
                Next::Own(SessionEvent::Refresh) => {
                    if self.refresh_config(agent, session) && unwritten.is_none() {
                        unwritten = Some(Instant::now() + WRITE_DEFER);
                    }
                    continue;
                }
                Next::Own(SessionEvent::Workloads) => {
                    workloads_due = Instant::now() + super::workloads::WORKLOAD_POLL;
                    match self.node_workloads(&agent.node_id).await {
                        Ok(now) if !workloads_sent_once || now.digest != workloads_sent.digest => {
                            let generation = u64::try_from(self.now().millis()).unwrap_or(0);
                            let message = self.workloads_message(&agent.node_id, &now, generation);
                            workloads_generation = generation;
                            let _ = outbound.send(Ok(super::zone_message(
                                zone_message::Body::Workloads(message),
                            )));
                            workloads_sent = now;
                            workloads_sent_once = true;
                        }
                        Ok(_) => {}
                        Err(error) => {
                            tracing::warn!(node = %agent.node_id, %error, "a node's workloads cannot be read");
                        }
                    }
                    continue;
                }
                Next::End(Ending::Closing) => return End::Quiet("the zone is stopping"),
                // The response stream is dropped when the agent's connection goes away.
                Next::End(Ending::Disconnected) => {
                    if !self.is_current(agent, stream) {
                        return End::Quiet("a newer connection of the node replaced it");
                    }
                    return End::Gone("its connection closed");
                }
                Next::End(Ending::Silent) => {
                    return End::Gone("silent past the keep-alive timeout");
                }
                Next::End(Ending::PeerClosed) => return End::Gone("the agent closed its stream"),
                Next::End(Ending::Broke(status)) => {
                    tracing::debug!(node = %agent.node_id, %status, "agent stream error");
                    return End::Gone("the stream broke");
                }
            };
            let now = self.now();
            agent.last_contact_at = now;
            if let Some(a) = self.state().attached.get_mut(&agent.node_id)
                && a.stream == stream
            {
                a.last_contact = now;
            }
            match body {
                Some(agent_message::Body::Applied(applied)) => {
                    agent.applied_generation = applied.generation;
                    let error = Some(applied.error).filter(|e| !e.is_empty());
                    self.settle(agent, error, session.updating).await;
                    last_written = Instant::now();
                    unwritten = None;
                }
                Some(agent_message::Body::Facts(facts)) => {
                    let facts = facts_from(Some(facts)).0;
                    let key_changed =
                        facts.wireguard_public_key != agent.facts.wireguard_public_key;
                    agent.facts = facts;
                    self.write(agent).await;
                    if key_changed {
                        self.inner.mesh_wake.notify_one();
                    }
                    last_written = Instant::now();
                    unwritten = None;
                }
                Some(agent_message::Body::ExecOutput(output)) => {
                    let stream_kind = match output.stream() {
                        agent_pb::OutputStream::Stderr => ExecStream::Stderr,
                        _ => ExecStream::Stdout,
                    };
                    let event = ExecEvent::Output {
                        stream: stream_kind,
                        data: output.data,
                    };
                    self.relay(agent, output.exec_id, event, false, outbound)
                        .await;
                }
                Some(agent_message::Body::ExecExit(exit)) => {
                    let event = ExecEvent::Exit {
                        code: exit.code,
                        error: Some(exit.error).filter(|e| !e.is_empty()),
                    };
                    self.relay(agent, exit.exec_id, event, true, outbound).await;
                }
                Some(agent_message::Body::Renew(renew)) => {
                    if let Err(status) = self.renew(agent, &renew.public_key, outbound).await {
                        let _ = outbound.send(Err(status));
                        return End::Gone("a renewal failed");
                    }
                    last_written = Instant::now();
                    unwritten = None;
                }
                Some(agent_message::Body::MeshStatus(status)) => {
                    let report = super::MeshStatusReport::from_wire(status, now);
                    self.record_mesh_status(&agent.node_id, report);
                }
                Some(agent_message::Body::WorkloadStatus(status)) => {
                    if workloads_sent_once && status.generation >= workloads_generation {
                        let held = workloads_sent
                            .message
                            .ingress
                            .iter()
                            .flat_map(|ingress| ingress.challenges.iter())
                            .map(|challenge| challenge.token.clone())
                            .collect();
                        self.hold_challenges(&agent.node_id, held);
                    }
                    self.record_workload_status(&agent.node_id, status, &workloads_sent.keys)
                        .await;
                }
                Some(agent_message::Body::TunnelData(data)) => {
                    let event = super::tunnels::TunnelEvent::Data(data.data);
                    self.tunnel_event(&agent.node_id, data.tunnel_id, event)
                        .await;
                }
                Some(agent_message::Body::TunnelClose(end)) => {
                    let why = Some(end.error).filter(|e| !e.is_empty());
                    let event = super::tunnels::TunnelEvent::End(why);
                    self.tunnel_event(&agent.node_id, end.tunnel_id, event)
                        .await;
                }
                Some(agent_message::Body::KeepAlive(_)) | None => {}
                Some(agent_message::Body::Hello(_)) => {
                    let _ = outbound.send(Err(Status::invalid_argument(
                        "a stream says hello once, as its first message",
                    )));
                    return End::Gone("a second hello");
                }
            }
            if last_written.elapsed() >= options.contact_write_interval {
                self.write(agent).await;
                last_written = Instant::now();
                unwritten = None;
            }
        }
    }

    fn is_current(&self, agent: &NodeAgent, stream: u64) -> bool {
        self.state()
            .attached
            .get(&agent.node_id)
            .is_some_and(|a| a.stream == stream)
    }

    /// Hands an exec event to its caller; a caller gone away cancels the command.
    async fn relay(
        &self,
        agent: &NodeAgent,
        exec_id: u64,
        event: ExecEvent,
        last: bool,
        outbound: &Outbound,
    ) {
        let sender = {
            let mut state = self.state();
            let Some(attached) = state.attached.get_mut(&agent.node_id) else {
                return;
            };
            if last {
                attached.execs.remove(&exec_id)
            } else {
                attached.execs.get(&exec_id).cloned()
            }
        };
        let Some(sender) = sender else {
            return;
        };
        if sender.send(event).await.is_err() && !last {
            if let Some(a) = self.state().attached.get_mut(&agent.node_id) {
                a.execs.remove(&exec_id);
            }
            let cancel = agent_pb::ExecCancel { exec_id };
            let _ = outbound.send(Ok(message(zone_message::Body::ExecCancel(cancel))));
        }
    }

    /// Signs a new certificate over the agent's (new) key; the old one stays accepted until
    /// the next renewal, so a stream opened with it keeps working.
    async fn renew(
        &self,
        agent: &mut NodeAgent,
        public_key: &[u8],
        outbound: &Outbound,
    ) -> Result<(), Status> {
        let Some(ca) = &self.inner.ca else {
            return Err(Status::failed_precondition("this zone has no CA"));
        };
        let cert = ca
            .issue_node(
                agent.node_id.as_str(),
                public_key,
                self.inner.options.cert_lifetime,
            )
            .map_err(|e| Status::invalid_argument(format!("no certificate was signed: {e}")))?;
        let not_after = timestamp_of(cert.not_after);
        agent.previous_fingerprint = Some(std::mem::replace(
            &mut agent.cert_fingerprint,
            cert.fingerprint,
        ));
        agent.cert_not_after = not_after;
        self.write(agent).await;
        tracing::info!(node = %agent.node_id, until = %utc_minute(not_after), "a node certificate was renewed");
        let renewed = agent_pb::Renewed {
            certificate_chain_pem: cert.chain_pem,
            not_after: not_after.millis(),
        };
        let _ = outbound.send(Ok(message(zone_message::Body::Renewed(renewed))));
        Ok(())
    }
}

/// What a session's loop needs besides the agent.
struct Session<'a> {
    stream: u64,
    /// The agent applies mesh changes (`Config.mesh_changes`).
    applies_changes: bool,
    /// The generation and mesh of the config sent last on this stream.
    sent: &'a Mutex<Option<(u64, MeshConfig)>>,
    /// Set when a changed config went to an agent that was ready: applying it is no new
    /// readiness, so it records no `node.ready` event.
    updating: &'a AtomicBool,
    /// The node's config without its mesh.
    base: &'a AgentConfig,
    refresh: &'a Notify,
    outbound: &'a Outbound,
}

/// The config message of `generation`: with its whole mesh, or with `changes` to the mesh of
/// the generation named with them.
fn config_message(
    generation: u64,
    config: &AgentConfig,
    changes: Option<(u64, &MeshChanges)>,
) -> agent_pb::Config {
    let identity = &config.identity;
    agent_pb::Config {
        generation,
        identity: Some(agent_pb::Identity {
            node_id: identity.node_id.to_string(),
            pool: identity.pool.to_string(),
            slot: identity.slot,
            site: identity.site.clone(),
            provider: identity.provider.to_string(),
        }),
        labels: config.labels.clone().into_iter().collect(),
        mesh: (changes.is_none() && !config.mesh.is_unset())
            .then(|| agent_pb::Mesh::from(&config.mesh)),
        mesh_changes: changes
            .map(|(base, changes)| orc_proto::mesh::changes_to_wire(changes, base)),
    }
}

/// Ends every command in `execs` with `why`.
fn end_execs(execs: impl IntoIterator<Item = tokio::sync::mpsc::Sender<ExecEvent>>, why: &str) {
    for exec in execs {
        let _ = exec.try_send(ExecEvent::Exit {
            code: None,
            error: Some(why.to_string()),
        });
    }
}
