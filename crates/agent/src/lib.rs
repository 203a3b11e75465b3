//! The node agent, `orc agent`: one per node, started by the node's bootstrap.
//!
//! 1. **Join.** With a join token (a file the bootstrap wrote, deleted once used), the agent
//!    makes its own P-256 key, dials the zone trusting only the CA the token pins, and asks
//!    for a node certificate over its public key. The CA, the certificate and the key stay in
//!    the state dir ([`state`]); the token is never logged or passed on a command line.
//! 2. **Attach.** With its certificate it keeps one stream open to the zone: hello with its
//!    facts and the config generation it applied, keep-alives both ways, the config the zone
//!    wants (each kind of assignment in it applied, then the generation acknowledged; the
//!    mesh is the one kind today, in `assignment.rs`), `orc exec` commands ([`exec`]), and a
//!    certificate renewal a third of its life before it expires. A broken stream is dialled again with
//!    backoff (1 s doubling to 30 s, with jitter); a zone restart is a reconnect.
//! 3. **Rejoin.** When the zone no longer knows the certificate (the node joined again
//!    elsewhere, or its agent row was replaced), the agent rejoins if a new token file is
//!    there, and otherwise says what to do and keeps trying.

mod apps;
mod assignment;
pub mod connect;
pub mod exec;
pub mod facts;
pub mod ingress;
pub mod mesh;
pub mod node_ports;
pub mod state;
mod tunnels;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use orc_proto::agent_pb::{self, agent_hub_client::AgentHubClient, agent_message, zone_message};
use orc_tls::{FingerprintPin, NodeIdentity, PinnedCa};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::StreamExt as _;
use tonic::Code;

use assignment::{Assignments, NotApplied};
use state::{AppliedConfig, Credentials, Membership, StateDir, StateError};

/// The default state dir.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/orc/agent";
/// The default join token file.
pub const DEFAULT_TOKEN_FILE: &str = "/etc/orc/join-token";

/// How to run an agent.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// The zone's agent endpoint (`https://zone:7400`); needed for the first join.
    pub endpoint: Option<String>,
    /// The node this agent runs on; needed for the first join.
    pub node_id: Option<String>,
    /// Where a join token is read from (and deleted once it was used).
    pub token_file: PathBuf,
    pub state_dir: PathBuf,
    /// Where the machine's DMI `product_uuid` is read.
    pub product_uuid_file: PathBuf,
    /// The agent's version, as the zone shows it.
    pub version: String,
    /// Dialling and the TLS handshake, at most. Default 10 s.
    pub connect_timeout: Duration,
    /// Longest wait between two dials. Default 30 s.
    pub max_backoff: Duration,
    /// How often facts are reported again. Default 60 s.
    pub facts_interval: Duration,
    /// Whether to run the mesh the zone configures (WireGuard interfaces, routes, a
    /// gateway's NAT; needs root). Off, the agent reports no key and leaves the mesh part
    /// of its config alone. Default on.
    pub mesh: bool,
    /// Whether to run the apps the zone assigns (through containerd and runc; needs root).
    /// Default on; containerd starts only once the node has replicas to run.
    pub apps: bool,
    /// The containerd binary the agent starts for its own use. Default `containerd`.
    pub containerd: String,
    /// Where the ingress proxy listens while the node accepts public ingress; `None`: the
    /// agent runs no proxy. Default `None` (`orc agent` listens on ports 80 and 443).
    pub ingress: Option<ingress::IngressListen>,
}

impl Default for AgentOptions {
    fn default() -> Self {
        AgentOptions {
            endpoint: None,
            node_id: None,
            token_file: PathBuf::from(DEFAULT_TOKEN_FILE),
            state_dir: PathBuf::from(DEFAULT_STATE_DIR),
            product_uuid_file: PathBuf::from(facts::PRODUCT_UUID_FILE),
            version: env!("CARGO_PKG_VERSION").to_string(),
            connect_timeout: Duration::from_secs(10),
            max_backoff: Duration::from_secs(30),
            facts_interval: Duration::from_secs(60),
            mesh: true,
            apps: true,
            containerd: "containerd".to_string(),
            ingress: None,
        }
    }
}

/// Why the agent stopped.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    State(#[from] StateError),
    #[error(
        "this node has not joined a zone and {0} holds no join token; write the token from \
         `orc node join create` there"
    )]
    NoToken(PathBuf),
    #[error("the first join needs {0}")]
    Missing(&'static str),
    #[error("cannot read the join token in {path}: {reason}")]
    BadToken { path: PathBuf, reason: String },
    #[error("the zone refused the join: {0}")]
    Refused(String),
    #[error(transparent)]
    Mesh(#[from] mesh::MeshError),
}

/// Runs the agent until `shutdown` completes or it meets an error it cannot get past.
pub async fn run(
    options: AgentOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), AgentError> {
    let state = StateDir::open(&options.state_dir)?;
    let services = mesh::dns::ServiceNames::default();
    let mut mesh = if options.mesh {
        Some(mesh::Mesh::new(
            mesh::MeshKey::load_or_create(state.path())?,
            services.clone(),
        ))
    } else {
        None
    };
    let apps = options.apps.then(|| {
        Arc::new(apps::Apps::new(
            state.path(),
            &options.containerd,
            services.clone(),
            options.ingress,
        ))
    });
    let mut resumed = false;
    tokio::pin!(shutdown);
    let mut backoff = Redials::new(options.max_backoff);
    loop {
        let credentials = match state.credentials()? {
            Some(c) if !options.token_file.exists() => c,
            _ => {
                let joined = tokio::select! {
                    _ = &mut shutdown => return Ok(()),
                    joined = join(&options, &state) => joined,
                };
                match joined {
                    Ok(credentials) => {
                        backoff.reset();
                        credentials
                    }
                    Err(JoinFailure::Fatal(e)) => return Err(e),
                    Err(JoinFailure::Retry(why)) => {
                        tracing::warn!("join failed, trying again: {why}");
                        tokio::select! {
                            _ = &mut shutdown => return Ok(()),
                            _ = tokio::time::sleep(backoff.next()) => continue,
                        }
                    }
                }
            }
        };
        if let Some(apps) = &apps {
            apps.identify(&credentials.membership.node_id, &credentials.ca_pem)
                .await;
            if !resumed {
                // Replicas kept from before this start run again by their policy at once,
                // whether or not the zone answers.
                resumed = true;
                apps.resume().await;
            }
        }
        let session = Session::new(&options, &state, credentials, mesh.as_mut(), apps.clone());
        let outcome = tokio::select! {
            _ = &mut shutdown => {
                if let Some(mesh) = mesh.as_mut() {
                    mesh.clear().await;
                }
                return Ok(());
            }
            outcome = session.run(&mut backoff) => outcome,
        };
        let wait = match outcome {
            Outcome::Unknown(why) => {
                if options.token_file.exists() {
                    continue;
                }
                tracing::error!(
                    "{why}; mint a new join token with `orc node join create` and write it to {}",
                    options.token_file.display()
                );
                options.max_backoff
            }
            Outcome::Broken(why) => {
                let wait = backoff.next();
                tracing::warn!(
                    "the stream to the zone ended ({why}); dialling again in {} ms",
                    wait.as_millis()
                );
                wait
            }
        };
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

enum JoinFailure {
    Fatal(AgentError),
    Retry(String),
}

async fn join(options: &AgentOptions, state: &StateDir) -> Result<Credentials, JoinFailure> {
    let fatal = JoinFailure::Fatal;
    let known = state.credentials().map_err(|e| fatal(e.into()))?;
    let text = match std::fs::read_to_string(&options.token_file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(fatal(AgentError::NoToken(options.token_file.clone())));
        }
        Err(e) => {
            return Err(fatal(AgentError::BadToken {
                path: options.token_file.clone(),
                reason: e.to_string(),
            }));
        }
    };
    let token = text.trim().to_string();
    let ca_fingerprint = pinned_fingerprint(&token).ok_or_else(|| {
        fatal(AgentError::BadToken {
            path: options.token_file.clone(),
            reason: "it is not an orc join token (orcjoin1.<CA fingerprint>.<secret>)".into(),
        })
    })?;
    let endpoint = options
        .endpoint
        .clone()
        .or_else(|| known.as_ref().map(|c| c.membership.endpoint.clone()))
        .ok_or(fatal(AgentError::Missing("the zone's endpoint (--zone)")))?;
    let node_id = options
        .node_id
        .clone()
        .or_else(|| known.as_ref().map(|c| c.membership.node_id.clone()))
        .ok_or(fatal(AgentError::Missing("the node's id (--node)")))?;
    // A rejoin makes a new key: the old certificate is of no use any more.
    let identity = NodeIdentity::generate().map_err(|e| JoinFailure::Retry(e.to_string()))?;
    let pin = FingerprintPin::new(&ca_fingerprint);
    let channel = connect::channel(
        &endpoint,
        pin.client_config(orc_tls::ALPN_H2),
        options.connect_timeout,
    )
    .await
    .map_err(|e| JoinFailure::Retry(e.to_string()))?;
    let request = agent_pb::JoinRequest {
        token,
        node_id: node_id.clone(),
        public_key: identity.public_key().to_vec(),
        facts: Some(facts::gather(&options.product_uuid_file)),
        version: options.version.clone(),
    };
    let reply = match AgentHubClient::new(channel).join(request).await {
        Ok(reply) => reply.into_inner(),
        Err(status) => {
            return Err(match status.code() {
                Code::PermissionDenied | Code::InvalidArgument | Code::FailedPrecondition => {
                    fatal(AgentError::Refused(status.message().to_string()))
                }
                _ => JoinFailure::Retry(format!("the zone answered: {}", status.message())),
            });
        }
    };
    let ca_pem = pin.matched_pem().ok_or_else(|| {
        JoinFailure::Retry("the zone's CA was not seen in the handshake".to_string())
    })?;
    let membership = Membership {
        node_id: reply.node_id,
        endpoint,
        cert_not_after: reply.not_after,
    };
    let write = |e: StateError| fatal(e.into());
    state
        .replace_identity(&identity, &reply.certificate_chain_pem)
        .map_err(write)?;
    state
        .save_join(&membership, &reply.certificate_chain_pem, &ca_pem)
        .map_err(write)?;
    // Used: a token admits once, and nothing should find it on disk afterwards.
    if let Err(e) = std::fs::remove_file(&options.token_file) {
        tracing::warn!(path = %options.token_file.display(), error = %e, "the used join token could not be deleted");
    }
    tracing::info!(node = %membership.node_id, zone = %membership.endpoint, "joined the zone");
    Ok(Credentials {
        membership,
        identity,
        chain_pem: reply.certificate_chain_pem,
        ca_pem,
    })
}

/// The CA fingerprint a join token pins (`orcjoin1.<hex>.<secret>`), as `sha256:<hex>`.
fn pinned_fingerprint(token: &str) -> Option<String> {
    let rest = token.strip_prefix("orcjoin1.")?;
    let (hex, secret) = rest.split_once('.')?;
    (hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit()) && !secret.is_empty())
        .then(|| format!("sha256:{}", hex.to_ascii_lowercase()))
}

/// How a stream ended.
enum Outcome {
    /// The zone does not know this certificate: only a rejoin helps.
    Unknown(String),
    /// Anything else: dial again.
    Broken(String),
}

/// The waits between dials of the zone: they grow while dials fail, and start again from the
/// first once one attaches.
struct Redials {
    backoff: orc_common::Backoff,
    attempt: u32,
}

impl Redials {
    /// From 1 s, doubling to `max`.
    fn new(max: Duration) -> Self {
        Redials {
            backoff: orc_common::Backoff {
                initial: Duration::from_secs(1).min(max),
                max,
            },
            attempt: 0,
        }
    }

    fn reset(&mut self) {
        self.attempt = 0;
    }

    /// The wait before the next dial, its upper half jittered ([`orc_common::Backoff`]).
    fn next(&mut self) -> Duration {
        let wait = self.backoff.delay(self.attempt, rand::random::<f64>());
        self.attempt = self.attempt.saturating_add(1);
        wait
    }
}

fn message(body: agent_message::Body) -> agent_pb::AgentMessage {
    agent_pb::AgentMessage { body: Some(body) }
}

/// One attached stream.
struct Session<'a> {
    options: &'a AgentOptions,
    state: &'a StateDir,
    credentials: Credentials,
    /// The mesh, kept across streams: a reconnect leaves the interfaces running.
    mesh: Option<&'a mut mesh::Mesh>,
    /// The node's apps, kept across streams.
    apps: Option<Arc<apps::Apps>>,
}

impl<'a> Session<'a> {
    fn new(
        options: &'a AgentOptions,
        state: &'a StateDir,
        credentials: Credentials,
        mesh: Option<&'a mut mesh::Mesh>,
        apps: Option<Arc<apps::Apps>>,
    ) -> Self {
        Session {
            options,
            state,
            credentials,
            mesh,
            apps,
        }
    }

    /// The machine's facts, with the mesh key when the mesh runs.
    fn facts(&self) -> agent_pb::Facts {
        let mut facts = facts::gather(&self.options.product_uuid_file);
        if let Some(mesh) = &self.mesh {
            facts.wireguard_public_key = mesh.public_key().to_string();
            facts.wireguard = "userspace".to_string();
        }
        facts
    }

    async fn run(mut self, backoff: &mut Redials) -> Outcome {
        let c = &self.credentials;
        let Some(ca) = PinnedCa::from_pem(&c.ca_pem, "the agent's state dir") else {
            return Outcome::Unknown("the pinned CA in the state dir is unreadable".into());
        };
        let Some(config) = ca.client_config_with_identity(
            orc_tls::ALPN_H2,
            &c.chain_pem,
            c.identity.private_key_der(),
        ) else {
            return Outcome::Unknown(
                "the node certificate in the state dir does not fit its key".into(),
            );
        };
        let channel =
            match connect::channel(&c.membership.endpoint, config, self.options.connect_timeout)
                .await
            {
                Ok(channel) => channel,
                Err(e) => return Outcome::Broken(e.to_string()),
            };
        let (tx, rx) = mpsc::channel::<agent_pb::AgentMessage>(256);
        let applied = match self.state.applied() {
            Ok(applied) => applied,
            Err(e) => return Outcome::Broken(e.to_string()),
        };
        let hello = agent_pb::Hello {
            protocol_version: orc_proto::AGENT_PROTOCOL_VERSION,
            version: self.options.version.clone(),
            facts: Some(self.facts()),
            applied_generation: applied.generation,
            applies_mesh_changes: true,
        };
        let _ = tx.send(message(agent_message::Body::Hello(hello))).await;
        let outbound = tokio_stream::wrappers::ReceiverStream::new(rx);
        let mut inbound = match AgentHubClient::new(channel).attach(outbound).await {
            Ok(response) => response.into_inner(),
            Err(status) if status.code() == Code::Unauthenticated => {
                return Outcome::Unknown(format!(
                    "the zone does not know this node's certificate: {}",
                    status.message()
                ));
            }
            Err(status) => {
                return Outcome::Broken(format!("the zone answered: {}", status.message()));
            }
        };
        let mut keepalive = tokio::time::interval(Duration::from_secs(15));
        let mut facts = tokio::time::interval(self.options.facts_interval);
        facts.tick().await;
        let mut execs: BTreeMap<u64, oneshot::Sender<()>> = BTreeMap::new();
        // Connections relayed for the zone, by id; they end with the stream.
        let tunnels = tunnels::Tunnels::default();
        let mut renewing: Option<NodeIdentity> = None;
        let mut welcomed = false;
        // What the zone assigns this node, kind by kind, as this stream received it.
        let mut assigned = Assignments::new(applied.generation);
        // The replicas' states, sent whenever they change (and once on each new stream).
        let mut replica_states = self.apps.as_ref().map(|apps| apps.watch());
        if let Some(states) = replica_states.as_mut() {
            let (generation, now) = states.borrow_and_update().clone();
            let status = apps::status_message(generation, &now);
            let _ = tx
                .send(message(agent_message::Body::WorkloadStatus(status)))
                .await;
        }
        loop {
            let received = tokio::select! {
                _ = keepalive.tick() => {
                    let _ = tx.send(message(agent_message::Body::KeepAlive(agent_pb::KeepAlive {}))).await;
                    if renewing.is_none() && self.renewal_due() {
                        match NodeIdentity::generate() {
                            Ok(identity) => {
                                let renew = agent_pb::RenewRequest { public_key: identity.public_key().to_vec() };
                                let _ = tx.send(message(agent_message::Body::Renew(renew))).await;
                                renewing = Some(identity);
                            }
                            Err(e) => tracing::warn!(error = %e, "no key for the renewal"),
                        }
                    }
                    continue;
                }
                _ = facts.tick() => {
                    let now = self.facts();
                    let _ = tx.send(message(agent_message::Body::Facts(now))).await;
                    continue;
                }
                changed = async {
                    match replica_states.as_mut() {
                        Some(states) => states.changed().await,
                        None => std::future::pending().await,
                    }
                } => {
                    if changed.is_ok()
                        && let Some(states) = replica_states.as_mut()
                    {
                        let (generation, now) = states.borrow_and_update().clone();
                        let status = apps::status_message(generation, &now);
                        let _ = tx.send(message(agent_message::Body::WorkloadStatus(status))).await;
                    }
                    continue;
                }
                () = assigned.mesh.tick() => {
                    if let Some(status) = assigned.mesh.report(self.mesh.as_deref()) {
                        let _ = tx.send(message(agent_message::Body::MeshStatus(status))).await;
                    }
                    continue;
                }
                received = inbound.next() => received,
            };
            let body = match received {
                None => return Outcome::Broken("the zone closed the stream".into()),
                Some(Err(status)) if status.code() == Code::Unauthenticated => {
                    return Outcome::Unknown(status.message().to_string());
                }
                Some(Err(status)) => {
                    return Outcome::Broken(format!("{}: {}", status.code(), status.message()));
                }
                Some(Ok(m)) => m.body,
            };
            match body {
                Some(zone_message::Body::Welcome(welcome)) => {
                    if !welcomed {
                        welcomed = true;
                        backoff.reset();
                        tracing::info!(node = %welcome.node_id, "attached to the zone");
                    }
                    let seconds = u64::from(welcome.keepalive_seconds.clamp(1, 300));
                    keepalive = tokio::time::interval(Duration::from_secs(seconds));
                    keepalive.tick().await;
                }
                Some(zone_message::Body::Config(config)) => {
                    let (applied, out_of_step) = self.apply(config, &mut assigned).await;
                    if out_of_step {
                        let _ = tx
                            .send(message(agent_message::Body::Applied(applied.clone())))
                            .await;
                        return Outcome::Broken(applied.error);
                    }
                    let ok = applied.error.is_empty();
                    let generation = applied.generation;
                    let _ = tx
                        .send(message(agent_message::Body::Applied(applied)))
                        .await;
                    if ok {
                        // Report what the applied config changed at once.
                        assigned.mesh.applied(generation);
                    }
                }
                Some(zone_message::Body::ExecStart(start)) => {
                    execs.retain(|_, cancel| !cancel.is_closed());
                    let (cancel, cancelled) = oneshot::channel();
                    execs.insert(start.exec_id, cancel);
                    let supervisor = match &self.apps {
                        Some(apps) => apps.running().await,
                        None => None,
                    };
                    if start.logs.is_some() {
                        tracing::info!(exec = start.exec_id, replica = %start.replica, "reading a replica's output for the zone");
                        tokio::spawn(exec::read_logs(supervisor, start, tx.clone(), cancelled));
                    } else if !start.replica.is_empty() {
                        tracing::info!(exec = start.exec_id, replica = %start.replica, program = %start.argv.first().map(String::as_str).unwrap_or(""), "running a command in a replica for the zone");
                        tokio::spawn(exec::run_in_replica(
                            supervisor,
                            start,
                            tx.clone(),
                            cancelled,
                        ));
                    } else {
                        tracing::info!(exec = start.exec_id, program = %start.argv.first().map(String::as_str).unwrap_or(""), "running a command for the zone");
                        tokio::spawn(exec::run(start, tx.clone(), cancelled));
                    }
                }
                Some(zone_message::Body::TunnelOpen(open)) => {
                    let subnet = match &self.apps {
                        Some(apps) => apps.running().await.and_then(|s| s.assignment().subnet),
                        None => None,
                    };
                    tunnels.open(open, subnet, tx.clone());
                }
                Some(zone_message::Body::TunnelData(data)) => {
                    tunnels.data(data.tunnel_id, data.data).await;
                }
                Some(zone_message::Body::TunnelClose(end)) => {
                    tunnels.close(end.tunnel_id, &end.error).await;
                }
                Some(zone_message::Body::ExecCancel(cancel)) => {
                    if let Some(cancel) = execs.remove(&cancel.exec_id) {
                        let _ = cancel.send(());
                    }
                }
                Some(zone_message::Body::Renewed(renewed)) => {
                    if let Some(identity) = renewing.take() {
                        self.renewed(identity, renewed);
                    }
                }
                Some(zone_message::Body::Leave(leave)) => {
                    return Outcome::Broken(format!(
                        "the zone asked this stream to leave: {}",
                        leave.reason
                    ));
                }
                Some(zone_message::Body::Workloads(workloads)) => match &self.apps {
                    Some(apps) => {
                        let generation = workloads.generation;
                        if let Err(error) = apps.assign(workloads).await {
                            tracing::warn!(generation, %error, "the zone's workloads cannot be run");
                        }
                    }
                    None => tracing::warn!(
                        "the zone assigns workloads, but this agent runs no apps (--no-apps)"
                    ),
                },
                Some(zone_message::Body::KeepAlive(_)) | None => {}
            }
        }
    }

    /// Whether a third or less of the certificate's life is left (of the 30 days the zone
    /// signs, 10).
    fn renewal_due(&self) -> bool {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let left = self.credentials.membership.cert_not_after - now;
        left < 10 * 24 * 3600 * 1000
    }

    fn renewed(&mut self, identity: NodeIdentity, renewed: agent_pb::Renewed) {
        let membership = Membership {
            cert_not_after: renewed.not_after,
            ..self.credentials.membership.clone()
        };
        let saved = self
            .state
            .replace_identity(&identity, &renewed.certificate_chain_pem)
            .and_then(|()| {
                self.state.save_join(
                    &membership,
                    &renewed.certificate_chain_pem,
                    &self.credentials.ca_pem,
                )
            });
        match saved {
            Ok(()) => {
                tracing::info!("the node certificate was renewed");
                self.credentials.identity = identity;
                self.credentials.chain_pem = renewed.certificate_chain_pem;
                self.credentials.membership = membership;
            }
            Err(e) => tracing::warn!(error = %e, "the renewed certificate could not be kept"),
        }
    }

    /// Applies `config`: each kind of assignment takes its part, then the node's identity
    /// and labels are kept. `true` besides: a kind's changes do not follow what this stream
    /// received last, so the stream is out of step and must start again.
    async fn apply(
        &mut self,
        config: agent_pb::Config,
        assigned: &mut Assignments,
    ) -> (agent_pb::Applied, bool) {
        let generation = config.generation;
        if let Err(not_applied) = assigned.mesh.apply(self.mesh.as_deref_mut(), &config).await {
            let (error, out_of_step) = match not_applied {
                NotApplied::OutOfStep(error) => {
                    tracing::warn!(%error, "starting the stream again");
                    (error, true)
                }
                NotApplied::Failed(error) => {
                    tracing::warn!(generation, %error, "the mesh config could not be applied");
                    (error, false)
                }
            };
            return (agent_pb::Applied { generation, error }, out_of_step);
        }
        let identity = config.identity.unwrap_or_default();
        let applied = AppliedConfig {
            generation: config.generation,
            node_id: identity.node_id,
            pool: identity.pool,
            slot: identity.slot,
            site: identity.site,
            provider: identity.provider,
            labels: config.labels.into_iter().collect(),
        };
        let error = match self.state.apply(&applied) {
            Ok(()) => {
                tracing::info!(generation = applied.generation, pool = %applied.pool, slot = applied.slot, "config applied");
                String::new()
            }
            Err(e) => e.to_string(),
        };
        let applied = agent_pb::Applied {
            generation: applied.generation,
            error,
        };
        (applied, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_pins_its_ca() {
        let hex = "ab".repeat(32);
        assert_eq!(
            pinned_fingerprint(&format!("orcjoin1.{hex}.SECRET")),
            Some(format!("sha256:{hex}"))
        );
        assert_eq!(pinned_fingerprint("orcjoin1.abc.SECRET"), None);
        assert_eq!(pinned_fingerprint(&format!("orcjoin2.{hex}.SECRET")), None);
        assert_eq!(pinned_fingerprint(&format!("orcjoin1.{hex}.")), None);
    }

    #[test]
    fn backoff_doubles_to_its_ceiling() {
        let mut backoff = Redials::new(Duration::from_secs(30));
        let waits: Vec<_> = (0..7).map(|_| backoff.next()).collect();
        let ceilings = [1, 2, 4, 8, 16, 30, 30];
        for (wait, ceiling) in waits.iter().zip(ceilings) {
            let ceiling = Duration::from_secs(ceiling);
            assert!(
                *wait >= ceiling / 2 && *wait <= ceiling,
                "{wait:?} vs {ceiling:?}"
            );
        }
        backoff.reset();
        assert!(backoff.next() <= Duration::from_secs(1));
    }
}
