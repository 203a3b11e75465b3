//! Apps on the node: the zone's workloads handed to the runtime's supervisor, which keeps
//! them running (and restarting by their policy) whether or not the zone is there.
//!
//! Containerd is started only when the node has replicas to run: on the first assignment
//! with any, or at start when the assignment kept on disk has some. The supervisor's pass
//! runs on a task of its own, beside the stream to the zone: at once when an assignment
//! arrives, every 250 ms while its new replicas are not ready (for up to 30 s), else every
//! 2 s; the stream sends the replicas' states when they change.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use orc_proto::agent_pb;
use orc_runtime::supervisor::{
    Assignment, Config, Dns, ImageSource, Phase, Probe, ReplicaPlan, ReplicaStatus, RestartPolicy,
    SecretValue, Supervisor,
};
use tokio::sync::{Mutex, watch};

/// The containerd namespace orc's containers live in.
pub const NAMESPACE: &str = "orc";

/// How often the supervisor looks at the node's replicas.
const PASS: Duration = Duration::from_secs(2);
/// How often it looks while replicas of a new assignment are not ready yet.
const QUICK_PASS: Duration = Duration::from_millis(250);
/// How long after an assignment it looks that often.
const QUICK_FOR: Duration = Duration::from_secs(30);

/// The cgroup the replicas of node `node_id` live under: `/orc/<node id>`, so that
/// several nodes on one host (emulated servers) keep apart, and `/orc` before the node has
/// an id.
fn cgroup_parent(node_id: Option<&str>) -> String {
    match node_id.filter(|id| {
        !id.is_empty()
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && !id.starts_with('.')
    }) {
        Some(id) => format!("/{NAMESPACE}/{id}"),
        None => format!("/{NAMESPACE}"),
    }
}

/// The node's apps: the supervisor once it runs, and the replicas' states it last saw.
#[derive(Debug)]
pub struct Apps {
    root: PathBuf,
    containerd: String,
    ca_pem: Mutex<Option<String>>,
    /// The node's id, which names the cgroup its replicas live under (`/orc/<node id>`).
    node_id: Mutex<Option<String>>,
    supervisor: Mutex<Option<Arc<Supervisor>>>,
    states: watch::Sender<(u64, Vec<ReplicaStatus>)>,
    /// Asks the supervisor for a pass now (a new assignment came).
    kick: Arc<tokio::sync::Notify>,
    /// The project's service names the node's name server answers.
    services: crate::mesh::dns::ServiceNames,
    /// The node's ingress proxy, when the agent may run one.
    ingress: Option<crate::ingress::Ingress>,
    /// Each replica's address and node ports (protocol, node port, container port), from
    /// the last assignment.
    ports: Arc<std::sync::Mutex<PortPlans>>,
}

/// Each replica's address and the node ports it publishes, by replica id.
type PortPlans = std::collections::BTreeMap<String, (std::net::Ipv4Addr, Vec<(String, u16, u16)>)>;

/// Publishes the node ports of the replicas in `all` that are ready and whose ports no
/// process of the node holds; a replica whose port is held is marked unready with
/// `node_port_unavailable`.
async fn publish_ports(
    all: &mut [ReplicaStatus],
    plans: &PortPlans,
    table: &crate::node_ports::NodePorts,
) {
    use crate::node_ports::{Published, port_free};
    let mut published = std::collections::BTreeSet::new();
    for status in all.iter_mut() {
        let Some((address, ports)) = plans.get(&status.id) else {
            continue;
        };
        if !status.ready || ports.is_empty() {
            continue;
        }
        let held: Vec<String> = ports
            .iter()
            .filter(|(protocol, port, _)| !port_free(protocol, *port))
            .map(|(protocol, port, _)| format!("{protocol} port {port}"))
            .collect();
        if !held.is_empty() {
            status.ready = false;
            status.message = Some(format!(
                "node_port_unavailable: {} held by a process of the node",
                held.join(" and ")
            ));
            continue;
        }
        published.extend(
            ports
                .iter()
                .map(|(protocol, port, container_port)| Published {
                    protocol: protocol.clone(),
                    port: *port,
                    address: *address,
                    container_port: *container_port,
                }),
        );
    }
    if let Err(error) = table.publish(published).await {
        tracing::warn!(%error, "the node's ports cannot be published");
    }
}

impl Apps {
    /// The apps of the agent whose state dir is `state_dir`; `containerd` is the binary.
    /// `services` is the table of service names the node's name server answers; `ingress`
    /// where the node's proxy listens when the node accepts public ingress (`None`: never).
    pub fn new(
        state_dir: &std::path::Path,
        containerd: &str,
        services: crate::mesh::dns::ServiceNames,
        ingress: Option<crate::ingress::IngressListen>,
    ) -> Self {
        let root = state_dir.join("apps");
        let apps = Self {
            ingress: ingress.map(|listen| crate::ingress::Ingress::new(listen, &root)),
            root,
            containerd: containerd.to_string(),
            ca_pem: Mutex::new(None),
            node_id: Mutex::new(None),
            supervisor: Mutex::new(None),
            states: watch::channel((0, Vec::new())).0,
            kick: Arc::new(tokio::sync::Notify::new()),
            services,
            ports: Arc::default(),
        };
        // The names last known answer while the zone is away.
        if let Some(kept) = apps.kept() {
            apps.name_services(&kept);
        }
        apps
    }

    /// The assignment kept on disk.
    fn kept(&self) -> Option<Assignment> {
        std::fs::read(self.root.join("assignment.json"))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Assignment>(&bytes).ok())
    }

    /// Hands `assignment`'s service names to the node's name server.
    fn name_services(&self, assignment: &Assignment) {
        *self
            .services
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = assignment.services.clone();
    }

    /// The replicas' states as the last pass saw them, with the generation held.
    pub fn watch(&self) -> watch::Receiver<(u64, Vec<ReplicaStatus>)> {
        self.states.subscribe()
    }

    /// Whether the assignment kept on disk has replicas (so the node runs apps before the
    /// zone says anything).
    pub fn has_kept_replicas(&self) -> bool {
        self.kept().is_some_and(|a| !a.replicas.is_empty())
    }

    /// Who the node is: its id (which names its replicas' cgroup) and the zone's CA (for
    /// pulling from its registry).
    pub async fn identify(&self, node_id: &str, ca_pem: &str) {
        *self.node_id.lock().await = Some(node_id.to_string());
        *self.ca_pem.lock().await = Some(ca_pem.to_string());
    }

    /// The supervisor, started (with its containerd and its pass) the first time.
    async fn supervisor(self: &Arc<Self>) -> Result<Arc<Supervisor>, String> {
        let mut held = self.supervisor.lock().await;
        if let Some(supervisor) = held.as_ref() {
            return Ok(supervisor.clone());
        }
        let daemon = orc_runtime::daemon::DaemonDir::new(self.root.join("containerd"));
        let client = orc_runtime::daemon::ensure(&daemon, &self.containerd, NAMESPACE)
            .await
            .map_err(|e| {
                format!("{e} (the node runs apps with containerd and runc: apt-get install containerd runc)")
            })?;
        let mut http = reqwest::Client::builder().connect_timeout(Duration::from_secs(10));
        if let Some(pem) = self.ca_pem.lock().await.as_deref()
            && let Ok(cert) = reqwest::Certificate::from_pem(pem.as_bytes())
        {
            http = http
                .tls_built_in_root_certs(false)
                .add_root_certificate(cert);
        }
        let config = Config {
            root: self.root.clone(),
            secrets_root: PathBuf::from("/run/orc-agent/secrets"),
            registry_client: http.build().map_err(|e| e.to_string())?,
            other_registries_client: reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(10))
                .build()
                .map_err(|e| e.to_string())?,
            registry_token: None,
            stop_grace: Duration::from_secs(10),
            log_limit: 10 << 20,
            cgroup_parent: cgroup_parent(self.node_id.lock().await.as_deref()),
            netns_prefix: orc_runtime::network::DEFAULT_PREFIX.into(),
        };
        let supervisor = Arc::new(Supervisor::new(config, client));
        let pass = supervisor.clone();
        let states = self.states.clone();
        let kick = self.kick.clone();
        let ports = self.ports.clone();
        let table = crate::node_ports::NodePorts::default();
        tokio::spawn(async move {
            // Quick passes for a while after each assignment, so a new replica is seen ready
            // (and reported) soon after it is.
            let mut quick_until = tokio::time::Instant::now() + QUICK_FOR;
            loop {
                let mut all = pass.reconcile().await;
                let plans = ports
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone();
                publish_ports(&mut all, &plans, &table).await;
                let generation = pass.assignment().generation;
                let settling = all
                    .iter()
                    .any(|s| !s.ready && matches!(s.phase, Phase::Starting | Phase::Running));
                states.send_if_modified(|held| {
                    let changed = held.0 != generation || held.1 != all;
                    *held = (generation, all.clone());
                    changed
                });
                let wait = if settling && tokio::time::Instant::now() < quick_until {
                    QUICK_PASS
                } else {
                    PASS
                };
                tokio::select! {
                    () = kick.notified() => quick_until = tokio::time::Instant::now() + QUICK_FOR,
                    () = tokio::time::sleep(wait) => {}
                }
            }
        });
        *held = Some(supervisor.clone());
        Ok(supervisor)
    }

    /// The supervisor, when it runs.
    pub async fn running(&self) -> Option<Arc<Supervisor>> {
        self.supervisor.lock().await.clone()
    }

    /// Starts the supervisor when the kept assignment has replicas, and serves the kept
    /// ingress routes.
    pub async fn resume(self: &Arc<Self>) {
        if let Some(ingress) = &self.ingress {
            ingress.resume().await;
        }
        if self.has_kept_replicas()
            && let Err(error) = self.supervisor().await
        {
            tracing::warn!(%error, "the node's replicas cannot be kept");
        }
    }

    /// Takes the zone's workloads: kept on disk, then run.
    pub async fn assign(self: &Arc<Self>, workloads: agent_pb::Workloads) -> Result<(), String> {
        let assignment = assignment_of(&workloads)?;
        self.name_services(&assignment);
        *self
            .ports
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = port_plans(&workloads);
        match &self.ingress {
            Some(ingress) => {
                if let Err(error) = ingress.apply(workloads.ingress.as_ref()).await {
                    tracing::warn!(%error, "the node's ingress is not whole");
                }
            }
            None if workloads.ingress.is_some() => {
                tracing::warn!(
                    "the zone sends ingress routes, but this agent runs no proxy (--no-ingress)"
                );
            }
            None => {}
        }
        if assignment.replicas.is_empty() && self.supervisor.lock().await.is_none() {
            // Nothing to run and nothing running: containerd is not started for nothing,
            // but the empty assignment is kept so a restart resumes nothing.
            std::fs::create_dir_all(&self.root).map_err(|e| e.to_string())?;
            let path = self.root.join("assignment.json");
            std::fs::write(&path, serde_json::to_vec(&assignment).unwrap_or_default())
                .map_err(|e| format!("{}: {e}", path.display()))?;
            self.states
                .send_replace((assignment.generation, Vec::new()));
            return Ok(());
        }
        let supervisor = self.supervisor().await?;
        supervisor
            .set_registry_token(Some(workloads.registry_token.clone()).filter(|t| !t.is_empty()));
        supervisor
            .assign(assignment)
            .map_err(|e| format!("the assignment cannot be kept on disk: {e}"))?;
        self.kick.notify_one();
        Ok(())
    }
}

/// Each replica's address and node ports from the zone's message; a replica without an
/// address publishes nothing.
fn port_plans(workloads: &agent_pb::Workloads) -> PortPlans {
    workloads
        .replicas
        .iter()
        .filter(|r| !r.node_ports.is_empty())
        .filter_map(|r| {
            let address = r.address.parse().ok()?;
            let ports = r
                .node_ports
                .iter()
                .filter_map(|p| {
                    Some((
                        p.protocol.clone(),
                        u16::try_from(p.port).ok()?,
                        u16::try_from(p.container_port).ok()?,
                    ))
                })
                .collect();
            Some((r.id.clone(), (address, ports)))
        })
        .collect()
}

/// The message a node sends about its replicas.
pub fn status_message(generation: u64, states: &[ReplicaStatus]) -> agent_pb::WorkloadStatus {
    agent_pb::WorkloadStatus {
        generation,
        replicas: states
            .iter()
            .map(|s| agent_pb::ReplicaState {
                id: s.id.clone(),
                phase: match s.phase {
                    Phase::Starting => "starting",
                    Phase::Running => "running",
                    Phase::BackingOff => "backing_off",
                    Phase::Exited => "exited",
                    Phase::Failed => "failed",
                }
                .into(),
                ready: s.ready,
                restarts: s.restarts,
                revision: s.revision,
                exit_status: s.exit_status,
                message: s.message.clone().unwrap_or_default(),
            })
            .collect(),
    }
}

/// The runtime's assignment from the zone's message.
pub fn assignment_of(workloads: &agent_pb::Workloads) -> Result<Assignment, String> {
    let subnet = if workloads.subnet.is_empty() {
        None
    } else {
        Some(workloads.subnet.parse().map_err(|_| {
            format!(
                "the workload subnet {:?} is not a network",
                workloads.subnet
            )
        })?)
    };
    let mut replicas = Vec::new();
    for r in &workloads.replicas {
        let restart = match r.restart.as_str() {
            "always" => RestartPolicy::Always,
            "on-failure" => RestartPolicy::OnFailure,
            "never" => RestartPolicy::Never,
            other => return Err(format!("replica {}: no restart policy {other:?}", r.id)),
        };
        let probe = match r.probe.as_ref().map(|p| p.kind.as_str()) {
            Some("http") => Probe::Http {
                port: u16::try_from(r.probe.as_ref().map_or(0, |p| p.port)).unwrap_or(0),
                path: r.probe.as_ref().map(|p| p.path.clone()).unwrap_or_default(),
            },
            Some("tcp") => Probe::Tcp {
                port: u16::try_from(r.probe.as_ref().map_or(0, |p| p.port)).unwrap_or(0),
            },
            _ => Probe::None,
        };
        let dns = match workloads.nameserver.parse() {
            Ok(nameserver) if !r.dns_search.is_empty() => {
                // The app's domain, then the project's (`<app>.<project>.<org>.internal`).
                let project = r
                    .dns_search
                    .split_once('.')
                    .map(|(_, rest)| rest.to_string());
                Some(Dns {
                    nameserver,
                    search: std::iter::once(r.dns_search.clone())
                        .chain(project)
                        .collect(),
                })
            }
            _ => None,
        };
        let address = if r.address.is_empty() {
            None
        } else {
            Some(
                r.address
                    .parse()
                    .map_err(|_| format!("replica {}: {:?} is not an address", r.id, r.address))?,
            )
        };
        replicas.push(ReplicaPlan {
            id: r.id.clone(),
            app: r.app.clone(),
            workload: r.workload.clone(),
            revision: r.revision,
            digest: r.digest.clone(),
            source: if r.registry_url.is_empty() {
                ImageSource::Registry {
                    base: workloads.registry_url.clone(),
                    repository: r.repository.clone(),
                    login: None,
                }
            } else {
                ImageSource::Registry {
                    base: r.registry_url.clone(),
                    repository: r.repository.clone(),
                    login: (!r.registry_username.is_empty()).then(|| {
                        (
                            r.registry_username.clone(),
                            SecretValue(r.registry_password.clone()),
                        )
                    }),
                }
            },
            command: r.has_command.then(|| r.command.clone()),
            args: r.has_args.then(|| r.args.clone()),
            env: r.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            secret_env: r
                .secret_env
                .iter()
                .map(|(k, v)| (k.clone(), SecretValue(v.clone())))
                .collect(),
            secret_files: r
                .secret_files
                .iter()
                .map(|(k, v)| (k.clone(), SecretValue(v.clone())))
                .collect(),
            volumes: r
                .volumes
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            restart,
            cpu_millis: r.cpu_millis,
            memory_bytes: r.memory_bytes,
            address,
            probe,
            dns,
        });
    }
    let mut services = std::collections::BTreeMap::new();
    for service in &workloads.services {
        let addresses = service
            .addresses
            .iter()
            .filter_map(|a| a.parse().ok())
            .collect();
        services.insert(service.name.to_ascii_lowercase(), addresses);
    }
    Ok(Assignment {
        generation: workloads.generation,
        subnet,
        replicas,
        services,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicas_live_under_their_nodes_cgroup() {
        assert_eq!(cgroup_parent(Some("n-7f3a")), "/orc/n-7f3a");
        assert_eq!(cgroup_parent(None), "/orc");
        // Anything that is not a plain name stays out of the path.
        assert_eq!(cgroup_parent(Some("../etc")), "/orc");
        assert_eq!(cgroup_parent(Some("a/b")), "/orc");
        assert_eq!(cgroup_parent(Some("")), "/orc");
    }
}
