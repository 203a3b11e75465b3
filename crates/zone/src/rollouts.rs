//! Rollouts: the controller of apps on nodes. It alone moves replicas; the API makes
//! revisions and marks drains, the agent hub records what nodes report, and both wake it.
//!
//! A pass looks at every app's newest revision:
//! - `BLOCKED`: placed again over the cluster as it is now; once every replica fits, the
//!   revision turns `DEPLOYING` (its deadline counts from then).
//! - `DEPLOYING` and `HEALTHY`: each workload takes the next step of its rolling update
//!   ([`orc_app_model::rollout`]), within the app's `maxSurge` and `maxUnavailable`; the
//!   instances it adds, and any that wait, are placed by the pure planner over the project's
//!   nodes less what every other instance holds. Replicas on a node that is gone are
//!   replaced; on a draining node they move; a volume-bound one stays and the app is
//!   `BLOCKED` with `volume_node_lost`.
//! - A `DEPLOYING` revision whose every replica is ready, with nothing else left running,
//!   is `HEALTHY`. One still short of that at its deadline is `FAILED`, and with
//!   `autoRollback` the newest revision that was ever healthy is deployed again as a new
//!   revision (origin `auto-rollback:N`).
//!
//! Every change to an app's replicas is one transaction of differences
//! ([`ReplicaChange`]), so a node's report recorded meanwhile is never overwritten. A pass
//! runs when woken and at least every [`PASS_INTERVAL`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use orc_app_model::planner::{self, PlanInput, PlanNode, PlanWorkload, VolumeHome};
use orc_app_model::revision::{DeploymentState, ResolvedApp};
use orc_app_model::rollout::{self, Instance, RolloutInput};
use orc_common::time::SharedClock;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::model::{
    AgentState, EventScope, Name, Node, NodeId, NodeState, Pool, Project, ProjectId, Timestamp,
};
use crate::store::{AppReplicaRow, AppRevisionRow, ReplicaChange, Store, StoreError, StoreResult};

/// How often a pass runs when nothing wakes it.
pub const PASS_INTERVAL: Duration = Duration::from_secs(2);

/// CPU a node keeps for itself and the agent, in millicores.
const SYSTEM_CPU_MILLIS: u64 = 200;
/// Memory a node keeps for itself and the agent.
const SYSTEM_MEMORY_BYTES: u64 = 256 << 20;

/// The document of a revision.
pub(crate) fn document(row: &AppRevisionRow) -> Result<ResolvedApp, StoreError> {
    serde_json::from_str(&row.document).map_err(|e| StoreError::Corrupt {
        column: "app_revisions.document".into(),
        reason: format!("revision {} of app {}: {e}", row.number, row.app),
    })
}

/// The labels the zone sets on a node of `pool`: its pool, its pool's region class, its
/// site.
pub(crate) fn zone_labels_of(pool: &Pool, node: &Node) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([
        ("orc.pool".to_string(), pool.name.to_string()),
        ("orc.class".to_string(), pool.spec.region_class.to_string()),
    ]);
    if let Some(site) = &node.status.site {
        labels.insert("orc.site".to_string(), site.clone());
    }
    labels
}

/// Revisions' documents, each read once in a pass. Kept no longer: an app removed and made
/// again starts its revision numbers anew.
#[derive(Debug, Default)]
pub(crate) struct Documents {
    read: BTreeMap<(ProjectId, Name, u64), Option<Arc<ResolvedApp>>>,
}

impl Documents {
    /// Revision `number` of `app`; `None` when it is gone or does not read.
    pub(crate) async fn get(
        &mut self,
        store: &Store,
        project: &ProjectId,
        app: &Name,
        number: u64,
    ) -> StoreResult<Option<Arc<ResolvedApp>>> {
        let key = (project.clone(), app.clone(), number);
        if let Some(known) = self.read.get(&key) {
            return Ok(known.clone());
        }
        let row = store.app_revision(project, app, number).await?;
        let document = match row.as_ref().map(document) {
            Some(Ok(document)) => Some(Arc::new(document)),
            Some(Err(error)) => {
                tracing::error!(%app, revision = number, %error, "a stored revision does not read");
                None
            }
            None => None,
        };
        self.read.insert(key, document.clone());
        Ok(document)
    }
}

/// A project's nodes as placement sees them, and every replica placed on them.
#[derive(Debug)]
pub(crate) struct Cluster {
    /// Every node that still exists. One whose agent is not ready takes nothing new (it is
    /// planned as cordoned) but keeps what it runs.
    pub nodes: Vec<PlanNode>,
    /// Nodes being drained.
    pub draining: BTreeSet<String>,
    /// Each placed replica: app, workload, CPU and memory, node, node ports.
    placed: Vec<(Name, String, u64, u64, String, Vec<String>)>,
}

impl Cluster {
    /// The cluster of `project` now.
    pub(crate) async fn read(
        store: &Store,
        documents: &mut Documents,
        project: &Project,
    ) -> StoreResult<Cluster> {
        let mut nodes = Vec::new();
        let mut draining = BTreeSet::new();
        for pool in store.list_pools(&project.id).await? {
            // A site's gateway carries the site's traffic and runs no app.
            if orc_zone_model::gateway::gateway_pool_site(&pool).is_some() {
                continue;
            }
            let agents = store.node_agents_of_pool(&pool.id).await?;
            for node in store.list_nodes_by_pool(&pool.id, false).await? {
                // Replicas run on running nodes only; one that is destroying, ended or lost
                // is gone for them.
                if node.status.state != NodeState::Running {
                    continue;
                }
                let ready = agents
                    .iter()
                    .any(|a| a.node_id == node.id && a.state == AgentState::Ready);
                let cordon = store.node_cordon(&node.id).await?;
                if cordon == Some(true) {
                    draining.insert(node.id.to_string());
                }
                let mut labels = store.node_labels(&node.id).await?;
                labels.extend(zone_labels_of(&pool, &node));
                nodes.push(PlanNode {
                    name: node.id.to_string(),
                    labels,
                    cpu_millis: (u64::from(pool.spec.shape.vcpus) * 1000)
                        .saturating_sub(SYSTEM_CPU_MILLIS),
                    memory_bytes: (u64::from(pool.spec.shape.memory_gib) << 30)
                        .saturating_sub(SYSTEM_MEMORY_BYTES),
                    cordoned: cordon.is_some() || !ready,
                });
            }
        }
        let mut placed = Vec::new();
        for (app, workload, _slot, revision, node) in
            store.app_replicas_on_nodes(&project.id).await?
        {
            let Some(doc) = documents.get(store, &project.id, &app, revision).await? else {
                continue;
            };
            if let Some((_, w)) = doc.spec.workload(&workload) {
                let ports = node_ports_of(&doc, &workload);
                placed.push((
                    app,
                    workload,
                    w.resources.cpu_millis(),
                    w.resources.memory_bytes(),
                    node.to_string(),
                    ports,
                ));
            }
        }
        Ok(Cluster {
            nodes,
            draining,
            placed,
        })
    }

    /// Whether `node` still exists.
    pub(crate) fn has(&self, node: &str) -> bool {
        self.nodes.iter().any(|n| n.name == node)
    }

    /// What the replicas of apps other than `app` hold on each node.
    fn taken_by_others(&self, app: &Name) -> BTreeMap<String, (u64, u64)> {
        let mut taken: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for (other, _, cpu, memory, node, _) in &self.placed {
            if other != app {
                let entry = taken.entry(node.clone()).or_default();
                entry.0 += cpu;
                entry.1 += memory;
            }
        }
        taken
    }

    /// The node ports the replicas of apps other than `app` hold on each node.
    fn ports_taken_by_others(&self, app: &Name) -> BTreeMap<String, BTreeSet<String>> {
        let mut taken: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (other, _, _, _, node, ports) in &self.placed {
            if other != app && !ports.is_empty() {
                taken
                    .entry(node.clone())
                    .or_default()
                    .extend(ports.iter().cloned());
            }
        }
        taken
    }
}

/// The node ports a replica of `workload` publishes, as the planner names them
/// (`tcp/25565`).
fn node_ports_of(app: &ResolvedApp, workload: &str) -> Vec<String> {
    app.spec
        .services
        .iter()
        .find(|(name, _)| name.as_str() == workload)
        .map(|(_, service)| {
            service
                .node_ports()
                .into_iter()
                .map(|(protocol, port, _)| format!("{protocol}/{port}"))
                .collect()
        })
        .unwrap_or_default()
}

/// Where the local volume of `workload` lives, from the instances that run it.
fn volume_home(app: &ResolvedApp, workload: &str, rows: &[AppReplicaRow]) -> VolumeHome {
    let bound = app
        .spec
        .workload(workload)
        .is_some_and(|(_, w)| !w.volumes.is_empty());
    if !bound {
        return VolumeHome::NoVolume;
    }
    rows.iter()
        .filter(|r| r.workload == workload)
        .find_map(|r| r.node_id.as_ref())
        .map_or(VolumeHome::Unbound, |n| VolumeHome::On(n.to_string()))
}

/// Whether every replica of `app` could run on `cluster` once its other revisions are gone:
/// what a deploy checks before it applies anything. Instances that run stay where they can.
pub(crate) fn feasibility(
    app: &ResolvedApp,
    cluster: &Cluster,
    current: &[AppReplicaRow],
) -> planner::Plan {
    let workloads = app
        .spec
        .workloads()
        .map(|(_, name, w)| {
            let mut slots: Vec<Option<String>> = current
                .iter()
                .filter(|r| r.workload == name.as_str())
                .filter_map(|r| r.node_id.as_ref().map(ToString::to_string))
                .filter(|n| cluster.has(n))
                .map(Some)
                .take(w.replicas as usize)
                .collect();
            slots.resize(w.replicas as usize, None);
            PlanWorkload {
                key: name.to_string(),
                replicas: w.replicas,
                cpu_millis: w.resources.cpu_millis(),
                memory_bytes: w.resources.memory_bytes(),
                constraints: w.constraints.clone(),
                volume: volume_home(app, name.as_str(), current),
                current: slots,
                ports: node_ports_of(app, name.as_str()),
            }
        })
        .collect();
    planner::plan(&PlanInput {
        nodes: cluster.nodes.clone(),
        taken: cluster.taken_by_others(&app.spec.name),
        ports_taken: cluster.ports_taken_by_others(&app.spec.name),
        workloads,
    })
}

/// Why a plan cannot place everything: `workload: reason; …`.
pub(crate) fn blocked_words(plan: &planner::Plan) -> Option<String> {
    if plan.is_complete() {
        return None;
    }
    Some(
        plan.blocked
            .iter()
            .map(|(w, r)| format!("{w}: {r}"))
            .collect::<Vec<_>>()
            .join("; "),
    )
}

/// Each workload of `app` that names a secret `project` does not hold, with why:
/// `(workload, "missing_secret: …")`.
pub(crate) async fn missing_secrets(
    store: &Store,
    project: &ProjectId,
    app: &ResolvedApp,
) -> StoreResult<Vec<(String, String)>> {
    let known: BTreeSet<String> = store
        .list_secrets(project)
        .await?
        .into_iter()
        .map(|s| s.name.to_string())
        .collect();
    Ok(app
        .spec
        .workloads()
        .filter_map(|(_, name, w)| {
            let missing: Vec<&str> = w
                .secrets()
                .into_iter()
                .filter(|s| !known.contains(*s))
                .collect();
            (!missing.is_empty()).then(|| {
                (
                    name.to_string(),
                    format!(
                        "missing_secret: {} not set in the project (orc secret set NAME)",
                        missing.join(", ")
                    ),
                )
            })
        })
        .collect())
}

/// What `app` opens to the world that another app holds already: each as (workload, code,
/// words). A domain is the zone's to give once; the catch-all, a public port and a node
/// port are the project's. Another app holds what its newest revision declares unless that
/// revision is blocked; an app of another project is not named.
pub(crate) async fn claims_taken(
    store: &Store,
    project: &ProjectId,
    app: &ResolvedApp,
) -> StoreResult<Vec<(String, &'static str, String)>> {
    let name = &app.spec.name;
    let wants_domain = app.spec.services.values().any(|s| !s.domains().is_empty());
    let mut holders: Vec<(bool, Name, ResolvedApp)> = Vec::new();
    let projects: BTreeSet<ProjectId> = if wants_domain {
        store
            .all_apps()
            .await?
            .into_iter()
            .map(|(p, _)| p)
            .collect()
    } else {
        BTreeSet::from([project.clone()])
    };
    for other_project in projects {
        let same = &other_project == project;
        for row in store.list_apps(&other_project).await? {
            if (same && &row.app == name) || row.state == DeploymentState::Blocked.as_str() {
                continue;
            }
            if let Ok(document) = document(&row) {
                holders.push((same, row.app.clone(), document));
            }
        }
    }
    let mut out = Vec::new();
    for (workload, service) in &app.spec.services {
        let workload = workload.to_string();
        for domain in service.domains() {
            if let Some((same, other, _)) = holders.iter().find(|(_, _, d)| {
                d.spec
                    .services
                    .values()
                    .any(|s| s.domains().contains(domain))
            }) {
                let whose = if *same {
                    format!("app {other}")
                } else {
                    "an app of another project".to_string()
                };
                out.push((
                    workload.clone(),
                    "domain_taken",
                    format!("domain_taken: {domain} belongs to {whose}"),
                ));
            }
        }
        let same_project = holders.iter().filter(|(same, _, _)| *same);
        for (_, other, document) in same_project {
            if service.is_public()
                && let Some((owner, _)) = document.spec.services.iter().find(|(_, s)| s.is_public())
            {
                out.push((
                    workload.clone(),
                    "catch_all_taken",
                    format!(
                        "catch_all_taken: service {owner} of app {other} is the project's catch-all on port 80"
                    ),
                ));
            }
            if let Some(port) = service.public_port()
                && document
                    .spec
                    .services
                    .values()
                    .any(|s| s.public_port() == Some(port))
            {
                out.push((
                    workload.clone(),
                    "public_port_taken",
                    format!(
                        "public_port_taken: app {other} opens tcp port {port} on the ingress nodes"
                    ),
                ));
            }
            for (protocol, port, _) in service.node_ports() {
                if document.spec.services.values().any(|s| {
                    s.node_ports()
                        .iter()
                        .any(|(p, n, _)| *p == protocol && *n == port)
                }) {
                    out.push((
                        workload.clone(),
                        "node_port_taken",
                        format!("node_port_taken: app {other} publishes {protocol} port {port} on its nodes"),
                    ));
                }
            }
        }
    }
    Ok(out)
}

/// Why `app` cannot roll out now: what cannot be placed, what secrets are missing and what
/// another app holds; `None` when nothing stands in the way.
async fn blocking_reason(
    store: &Store,
    project: &ProjectId,
    app: &ResolvedApp,
    cluster: &Cluster,
    current: &[AppReplicaRow],
) -> StoreResult<Option<String>> {
    let mut words: Vec<String> = blocked_words(&feasibility(app, cluster, current))
        .into_iter()
        .collect();
    words.extend(
        missing_secrets(store, project, app)
            .await?
            .into_iter()
            .map(|(w, why)| format!("{w}: {why}")),
    );
    words.extend(
        claims_taken(store, project, app)
            .await?
            .into_iter()
            .map(|(w, _, why)| format!("{w}: {why}")),
    );
    Ok((!words.is_empty()).then(|| words.join("; ")))
}

/// Makes a revision of `resolved`: `DEPLOYING` when every replica can be placed and every
/// secret it names is set, else `BLOCKED` with why (and nothing of it is applied until
/// then).
pub(crate) async fn new_revision(
    store: &Store,
    project: &Project,
    resolved: &ResolvedApp,
    origin: &str,
    created_by: Option<&str>,
    now: Timestamp,
) -> StoreResult<AppRevisionRow> {
    let name = &resolved.spec.name;
    let mut documents = Documents::default();
    let cluster = Cluster::read(store, &mut documents, project).await?;
    let current = store.list_app_replicas(&project.id, name).await?;
    let reason = blocking_reason(store, &project.id, resolved, &cluster, &current).await?;
    let state = match reason {
        None => DeploymentState::Deploying,
        Some(_) => DeploymentState::Blocked,
    };
    let document = serde_json::to_string(resolved).unwrap_or_default();
    store
        .create_app_revision(
            &project.id,
            name,
            &resolved.digest(),
            &document,
            origin,
            state.as_str(),
            reason.as_deref(),
            created_by,
            now,
        )
        .await
}

/// Wakes the rollouts: a revision was made, a node drained, a replica reported.
#[derive(Debug, Clone, Default)]
pub struct RolloutSignal(Arc<Notify>);

impl RolloutSignal {
    /// Asks for a pass soon.
    pub fn wake(&self) {
        self.0.notify_one();
    }
}

/// The rollout controller.
#[derive(Debug, Clone)]
pub struct Rollouts {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Store,
    clock: SharedClock,
    signal: RolloutSignal,
    assignments: crate::agents::AssignmentSignal,
    /// How long a replica taken out of its service's names runs on before it stops.
    drain: Duration,
}

/// How long a replica a rollout takes away keeps running after it left its service's
/// names: long enough for every node to answer without it (they are told at once and
/// answer with a TTL of 0 s) and for requests that found it before to finish.
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(5);

/// One workload's step, worked out before anything is written.
struct WorkloadStep {
    name: String,
    input: RolloutInput,
    step: rollout::RolloutStep,
}

impl Rollouts {
    /// A controller over `store`, woken by `signal`; it tells nodes' sessions through
    /// `assignments` when it moved replicas. Replicas it takes away drain for `drain`
    /// ([`DEFAULT_DRAIN`] unless tests want it shorter) before they stop.
    pub fn new(
        store: Store,
        clock: SharedClock,
        signal: RolloutSignal,
        assignments: crate::agents::AssignmentSignal,
        drain: Duration,
    ) -> Rollouts {
        Rollouts {
            inner: Arc::new(Inner {
                store,
                clock,
                signal,
                assignments,
                drain,
            }),
        }
    }

    fn now(&self) -> Timestamp {
        self.inner.clock.now()
    }

    /// Runs passes until `stopped`: when woken and every [`PASS_INTERVAL`].
    pub fn spawn(self, mut stopped: watch::Receiver<bool>) -> JoinHandle<()> {
        tokio::spawn(async move {
            loop {
                if *stopped.borrow() {
                    break;
                }
                if let Err(error) = self.pass().await {
                    tracing::warn!(%error, "rollout pass failed");
                }
                tokio::select! {
                    _ = self.inner.signal.0.notified() => {}
                    _ = tokio::time::sleep(PASS_INTERVAL) => {}
                    _ = stopped.changed() => {}
                }
            }
        })
    }

    /// One pass over every app of the zone.
    pub async fn pass(&self) -> StoreResult<()> {
        let store = &self.inner.store;
        let mut by_project: BTreeMap<ProjectId, Vec<Name>> = BTreeMap::new();
        for (project, app) in store.all_apps().await? {
            by_project.entry(project).or_default().push(app);
        }
        let mut documents = Documents::default();
        for (project, apps) in by_project {
            let project = store.get_project(&project).await?;
            let mut cluster = Cluster::read(store, &mut documents, &project).await?;
            for app in apps {
                if self
                    .app_pass(&project, &app, &mut cluster, &mut documents)
                    .await?
                {
                    // Placements changed what the nodes hold.
                    cluster = Cluster::read(store, &mut documents, &project).await?;
                }
            }
        }
        Ok(())
    }

    async fn event(&self, project: &Project, kind: &str, words: &str) {
        let scope = EventScope {
            org_id: Some(project.org_id.clone()),
            project_id: Some(project.id.clone()),
            ..Default::default()
        };
        if let Err(error) = self
            .inner
            .store
            .record_event(&scope, kind, words, self.now())
            .await
        {
            tracing::warn!(%error, kind, "app event not recorded");
        }
    }

    async fn set_state(
        &self,
        project: &Project,
        row: &AppRevisionRow,
        state: DeploymentState,
        reason: Option<&str>,
    ) -> StoreResult<()> {
        if row.state == state.as_str() && row.reason.as_deref() == reason {
            return Ok(());
        }
        self.inner
            .store
            .set_app_revision_state(
                &project.id,
                &row.app,
                row.number,
                state.as_str(),
                reason,
                self.now(),
            )
            .await
    }

    /// One app's pass; whether its replicas changed.
    async fn app_pass(
        &self,
        project: &Project,
        app: &Name,
        cluster: &mut Cluster,
        documents: &mut Documents,
    ) -> StoreResult<bool> {
        let store = &self.inner.store;
        let Some(mut newest) = store.newest_app_revision(&project.id, app).await? else {
            return Ok(false);
        };
        let Some(target) = documents
            .get(store, &project.id, app, newest.number)
            .await?
        else {
            return Ok(false);
        };
        // Replicas draining are out of the rollout: they only wait to stop.
        let (draining, replicas): (Vec<AppReplicaRow>, Vec<AppReplicaRow>) = store
            .list_app_replicas(&project.id, app)
            .await?
            .into_iter()
            .partition(|r| r.draining_at.is_some());
        let state = newest.state.as_str();
        if state == DeploymentState::Blocked.as_str() {
            match blocking_reason(store, &project.id, &target, cluster, &replicas).await? {
                Some(reason) => {
                    self.set_state(project, &newest, DeploymentState::Blocked, Some(&reason))
                        .await?;
                    return Ok(false);
                }
                None => {
                    self.set_state(project, &newest, DeploymentState::Deploying, None)
                        .await?;
                    // As the store now has it: deploying, its rollout begun.
                    newest.state = DeploymentState::Deploying.as_str().to_string();
                    newest.reason = None;
                    newest.started_at = newest.started_at.or(Some(self.now()));
                    self.event(
                        project,
                        "app.deploying",
                        &format!(
                            "app {app} revision {} fits now and rolls out",
                            newest.number
                        ),
                    )
                    .await;
                }
            }
        } else if state != DeploymentState::Deploying.as_str()
            && state != DeploymentState::Healthy.as_str()
        {
            return Ok(false);
        }

        // Each workload's step.
        let mut steps = Vec::new();
        let ready_of = |workload: &str| {
            replicas
                .iter()
                .any(|r| r.workload == workload && r.ready && r.node_id.is_some())
        };
        for (_, name, workload) in target.spec.workloads() {
            let rows: Vec<&AppReplicaRow> = replicas
                .iter()
                .filter(|r| r.workload == name.as_str())
                .collect();
            let mut same_as_target = BTreeSet::new();
            let definition = target.definition_of(name.as_str());
            for revision in rows.iter().map(|r| r.revision).collect::<BTreeSet<_>>() {
                if revision == newest.number {
                    continue;
                }
                let other = documents.get(store, &project.id, app, revision).await?;
                if other.is_some_and(|o| o.definition_of(name.as_str()) == definition) {
                    same_as_target.insert(revision);
                }
            }
            let held_slots = draining
                .iter()
                .filter(|r| r.workload == name.as_str())
                .map(|r| r.slot)
                .collect();
            let input = RolloutInput {
                held_slots,
                target: newest.number,
                replicas: workload.replicas,
                max_surge: target.spec.deploy.max_surge,
                max_unavailable: target.spec.deploy.max_unavailable,
                volume_bound: !workload.volumes.is_empty(),
                same_as_target,
                dependencies_ready: workload.depends_on.iter().all(|d| ready_of(d.as_str())),
                instances: rows
                    .iter()
                    .map(|r| {
                        let node = r.node_id.as_ref().map(ToString::to_string);
                        Instance {
                            slot: r.slot,
                            revision: r.revision,
                            placed: node.is_some(),
                            ready: r.ready,
                            node_lost: node.as_ref().is_some_and(|n| !cluster.has(n)),
                            draining: node.as_ref().is_some_and(|n| cluster.draining.contains(n)),
                        }
                    })
                    .collect(),
            };
            let step = rollout::step(&input);
            steps.push(WorkloadStep {
                name: name.to_string(),
                input,
                step,
            });
        }

        // What the steps change, then placement of every target instance without a node.
        let now = self.now();
        let mut change = ReplicaChange::default();
        let drain_millis = i64::try_from(self.inner.drain.as_millis()).unwrap_or(i64::MAX);
        for done in draining.iter().filter(|r| {
            r.draining_at
                .is_some_and(|at| now.millis().saturating_sub(at.millis()) >= drain_millis)
        }) {
            change.remove.push((done.workload.clone(), done.slot));
        }
        let mut leaving: Vec<(String, u32)> = replicas
            .iter()
            .filter(|r| target.spec.workload(&r.workload).is_none())
            .map(|r| (r.workload.clone(), r.slot))
            .collect();
        for s in &steps {
            leaving.extend(s.step.remove.iter().map(|slot| (s.name.clone(), *slot)));
        }
        // A replica that serves drains first; one that serves nothing (not ready, its node
        // gone) goes at once, and so does one bound to a local volume, which its successor
        // needs.
        for (workload, slot) in &leaving {
            let serving = replicas
                .iter()
                .find(|r| &r.workload == workload && r.slot == *slot)
                .is_some_and(|r| {
                    r.ready
                        && r.node_id.as_ref().is_some_and(|n| cluster.has(n.as_str()))
                        && target
                            .spec
                            .workload(workload)
                            .is_none_or(|(_, w)| w.volumes.is_empty())
                });
            if serving && !self.inner.drain.is_zero() {
                change.drain.push((workload.clone(), *slot, now));
            } else {
                change.remove.push((workload.clone(), *slot));
            }
        }
        for s in &steps {
            change.adopt.extend(
                s.step
                    .adopt
                    .iter()
                    .map(|slot| (s.name.clone(), *slot, newest.number)),
            );
        }
        let removed: BTreeSet<(String, u32)> = leaving.iter().cloned().collect();
        let adopted: BTreeSet<(String, u32)> = change
            .adopt
            .iter()
            .map(|(w, s, _)| (w.clone(), *s))
            .collect();
        let staying: Vec<&AppReplicaRow> = replicas
            .iter()
            .filter(|r| !removed.contains(&(r.workload.clone(), r.slot)))
            .collect();
        let is_target = |r: &AppReplicaRow| {
            r.revision == newest.number || adopted.contains(&(r.workload.clone(), r.slot))
        };
        let mut taken = cluster.taken_by_others(app);
        let mut ports_taken = cluster.ports_taken_by_others(app);
        let drained: Vec<&AppReplicaRow> = draining
            .iter()
            .chain(replicas.iter().filter(|r| {
                change
                    .drain
                    .iter()
                    .any(|(w, s, _)| *w == r.workload && *s == r.slot)
            }))
            .collect();
        for r in staying
            .iter()
            .filter(|r| !is_target(r))
            .chain(drained.iter())
        {
            if let (Some(node), Some(doc)) = (
                &r.node_id,
                documents.get(store, &project.id, app, r.revision).await?,
            ) && let Some((_, w)) = doc.spec.workload(&r.workload)
            {
                let entry = taken.entry(node.to_string()).or_default();
                entry.0 += w.resources.cpu_millis();
                entry.1 += w.resources.memory_bytes();
                let ports = node_ports_of(&doc, &r.workload);
                if !ports.is_empty() {
                    ports_taken
                        .entry(node.to_string())
                        .or_default()
                        .extend(ports);
                }
            }
        }
        // Per workload, the target instances by slot: existing ones, then the new.
        let mut targets: BTreeMap<String, Vec<(u32, Option<String>, bool)>> = BTreeMap::new();
        for r in staying.iter().filter(|r| is_target(r)) {
            targets.entry(r.workload.clone()).or_default().push((
                r.slot,
                r.node_id.as_ref().map(ToString::to_string),
                false,
            ));
        }
        for s in &steps {
            let list = targets.entry(s.name.clone()).or_default();
            list.extend(s.step.add.iter().map(|slot| (*slot, None, true)));
        }
        let needs_placement = targets
            .values()
            .flatten()
            .any(|(_, node, _)| node.is_none());
        let mut waiting: Vec<String> = Vec::new();
        let mut plan = planner::Plan::default();
        if needs_placement {
            let workloads = target
                .spec
                .workloads()
                .filter_map(|(_, name, w)| {
                    let list = targets.get(name.as_str())?;
                    Some(PlanWorkload {
                        key: name.to_string(),
                        replicas: list.len() as u32,
                        cpu_millis: w.resources.cpu_millis(),
                        memory_bytes: w.resources.memory_bytes(),
                        constraints: w.constraints.clone(),
                        volume: volume_home(&target, name.as_str(), &replicas),
                        current: list.iter().map(|(_, node, _)| node.clone()).collect(),
                        ports: node_ports_of(&target, name.as_str()),
                    })
                })
                .collect();
            plan = planner::plan(&PlanInput {
                nodes: cluster.nodes.clone(),
                taken,
                ports_taken,
                workloads,
            });
        }
        for (workload, list) in &targets {
            let placements = plan.placements.get(workload);
            for (index, (slot, node, is_new)) in list.iter().enumerate() {
                let chosen = match node {
                    Some(_) => None,
                    None => placements
                        .and_then(|p| p.get(index).cloned().flatten())
                        .and_then(|n| n.parse::<NodeId>().ok()),
                };
                if *is_new {
                    change.add.push(AppReplicaRow {
                        workload: workload.clone(),
                        slot: *slot,
                        revision: newest.number,
                        node_id: chosen,
                        state: "pending".into(),
                        ready: false,
                        restarts: 0,
                        updated_at: now,
                        address: None,
                        message: None,
                        draining_at: None,
                    });
                } else if let Some(node) = chosen {
                    change.place.push((workload.clone(), *slot, node));
                }
            }
        }
        for (workload, reason) in &plan.blocked {
            waiting.push(format!("{workload}: {reason}"));
        }
        for s in &steps {
            if s.step.waiting_on_dependencies > 0 {
                waiting.push(format!(
                    "{}: {} replica(s) wait for {} to be ready",
                    s.name,
                    s.step.waiting_on_dependencies,
                    target
                        .spec
                        .workload(&s.name)
                        .map(|(_, w)| w
                            .depends_on
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join(", "))
                        .unwrap_or_default()
                ));
            }
        }
        let changed = !change.is_empty();
        if changed {
            store.change_app_replicas(&project.id, app, &change).await?;
            self.inner.assignments.changed();
            tracing::info!(
                %app,
                revision = newest.number,
                removed = change.remove.len(),
                drained = change.drain.len(),
                adopted = change.adopt.len(),
                added = change.add.len(),
                placed = change.place.len(),
                "rollout step"
            );
        }

        // The revision's state.
        let settled = steps
            .iter()
            .all(|s| s.step.is_empty() && rollout::progress(&s.input).settled())
            && !replicas
                .iter()
                .any(|r| target.spec.workload(&r.workload).is_none());
        let volume_lost = plan
            .blocked
            .values()
            .find(|r| r.code() == "volume_node_lost")
            .map(|_| waiting.join("; "));
        let reason = (!waiting.is_empty()).then(|| waiting.join("; "));
        if let Some(reason) = volume_lost {
            if newest.state != DeploymentState::Blocked.as_str() {
                self.event(
                    project,
                    "app.blocked",
                    &format!("app {app} revision {} is blocked: {reason}", newest.number),
                )
                .await;
            }
            self.set_state(project, &newest, DeploymentState::Blocked, Some(&reason))
                .await?;
        } else if newest.state == DeploymentState::Healthy.as_str() {
            self.set_state(
                project,
                &newest,
                DeploymentState::Healthy,
                reason.as_deref(),
            )
            .await?;
        } else if settled {
            self.set_state(project, &newest, DeploymentState::Healthy, None)
                .await?;
            self.event(
                project,
                "app.healthy",
                &format!("app {app} revision {} is healthy", newest.number),
            )
            .await;
            tracing::info!(%app, revision = newest.number, "app healthy");
        } else if let Some(started) = newest.started_at
            && now.millis() - started.millis()
                > i64::try_from(target.spec.deploy.deadline_seconds() * 1000).unwrap_or(i64::MAX)
        {
            self.fail(project, &newest, &target, &steps, reason.as_deref())
                .await?;
        } else {
            self.set_state(
                project,
                &newest,
                DeploymentState::Deploying,
                reason.as_deref(),
            )
            .await?;
        }
        Ok(changed)
    }

    /// Fails `row` at its deadline and, with `autoRollback`, deploys the last healthy
    /// revision again.
    async fn fail(
        &self,
        project: &Project,
        row: &AppRevisionRow,
        target: &ResolvedApp,
        steps: &[WorkloadStep],
        waiting: Option<&str>,
    ) -> StoreResult<()> {
        let app = &row.app;
        let short: Vec<String> = steps
            .iter()
            .map(|s| (s, rollout::progress(&s.input)))
            .filter(|(_, p)| !p.settled())
            .map(|(s, p)| format!("{} {} of {} ready", s.name, p.ready, p.replicas))
            .collect();
        let mut reason = format!(
            "the deadline ({}) passed with {}",
            target.spec.deploy.deadline,
            short.join(", ")
        );
        if let Some(waiting) = waiting {
            reason.push_str(&format!(" ({waiting})"));
        }
        self.set_state(project, row, DeploymentState::Failed, Some(&reason))
            .await?;
        self.event(
            project,
            "app.failed",
            &format!("app {app} revision {} failed: {reason}", row.number),
        )
        .await;
        tracing::warn!(%app, revision = row.number, %reason, "rollout failed");
        if !target.spec.deploy.auto_rollback {
            return Ok(());
        }
        let store = &self.inner.store;
        let Some(healthy) = store
            .last_healthy_app_revision(&project.id, app, row.number)
            .await?
        else {
            self.event(
                project,
                "app.rollback_skipped",
                &format!("app {app} has no earlier healthy revision to roll back to"),
            )
            .await;
            return Ok(());
        };
        let previous = document(&healthy)?;
        let made = new_revision(
            store,
            project,
            &previous,
            &format!("auto-rollback:{}", healthy.number),
            None,
            self.now(),
        )
        .await?;
        self.event(
            project,
            "app.rolled_back",
            &format!(
                "app {app} rolls back to revision {} as revision {} ({})",
                healthy.number, made.number, made.state
            ),
        )
        .await;
        tracing::info!(%app, to = healthy.number, revision = made.number, "rolled back");
        Ok(())
    }
}
