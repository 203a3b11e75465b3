//! Apps on a project's nodes: each app, its revisions with their deployments' states, and
//! where its replicas are placed.
//!
//! A revision's document (the checked app with its images resolved) is written once and
//! never changed; its digest is the document's. Making a revision and superseding the ones
//! still in flight is one transaction, so two deploys never share a number.

use orc_zone_model::{Name, NodeId, ProjectId, Timestamp};
use sqlx::any::AnyRow;

use super::error::OperationExt;
use super::rows::{big, flag, opt_parsed, opt_text, opt_time, parsed, text, time, uint32, uint64};
use super::{Store, StoreResult};

/// A ready replica and where it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadyReplica {
    /// Its app.
    pub app: Name,
    /// Its workload.
    pub workload: String,
    /// The revision it runs.
    pub revision: u64,
    /// The node it runs on.
    pub node: NodeId,
    /// Its address in the node's workload subnet.
    pub address: std::net::Ipv4Addr,
}

/// A revision as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppRevisionRow {
    /// The app.
    pub app: Name,
    /// Its number, from 1.
    pub number: u64,
    /// `sha256:` of the document.
    pub digest: String,
    /// The resolved app, JSON.
    pub document: String,
    /// `deploy`, or `rollback:N`.
    pub origin: String,
    /// The deployment's state (`PENDING`, `DEPLOYING`, …).
    pub state: String,
    /// Why it is blocked or failed.
    pub reason: Option<String>,
    /// Who made it (a user name).
    pub created_by: Option<String>,
    /// When it was made.
    pub created_at: Timestamp,
    /// When its state last changed.
    pub updated_at: Timestamp,
    /// When its rollout began; `None` while it has not (blocked, or never placed).
    pub started_at: Option<Timestamp>,
    /// When it first became healthy.
    pub healthy_at: Option<Timestamp>,
}

/// How many characters of what a node says of a replica are kept.
pub const MESSAGE_CHARS: usize = 300;

/// Where one replica is and how it fares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppReplicaRow {
    /// The service or worker.
    pub workload: String,
    /// Its slot, from 0.
    pub slot: u32,
    /// The revision it runs.
    pub revision: u64,
    /// Its node; `None` while it has none.
    pub node_id: Option<NodeId>,
    /// Its state, as its node reports it (`pending` before any report).
    pub state: String,
    /// Whether its probe passes.
    pub ready: bool,
    /// How often it was started again.
    pub restarts: u32,
    /// When this row last changed.
    pub updated_at: Timestamp,
    /// Its address in its node's workload subnet, once the zone assigned it to the node.
    pub address: Option<std::net::Ipv4Addr>,
    /// Why it failed or waits, as its node last said; `None` when there is nothing to say.
    pub message: Option<String>,
    /// When a rollout took it out of its service's names to stop it; `None` while it serves.
    pub draining_at: Option<Timestamp>,
}

/// One rollout step's changes to an app's replicas.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplicaChange {
    /// Slots to remove, by workload.
    pub remove: Vec<(String, u32)>,
    /// Slots relabelled to a revision: workload, slot, revision.
    pub adopt: Vec<(String, u32, u64)>,
    /// New replicas.
    pub add: Vec<AppReplicaRow>,
    /// Waiting replicas given a node: workload, slot, node.
    pub place: Vec<(String, u32, NodeId)>,
    /// Replicas taken out of their service's names to stop later: workload, slot, since.
    pub drain: Vec<(String, u32, Timestamp)>,
}

impl ReplicaChange {
    /// Nothing changes.
    pub fn is_empty(&self) -> bool {
        self.remove.is_empty()
            && self.adopt.is_empty()
            && self.add.is_empty()
            && self.place.is_empty()
            && self.drain.is_empty()
    }
}

const REVISION_COLUMNS: &str = "app, number, digest, document, origin, state, reason, \
    created_by, created_at, updated_at, started_at, healthy_at";

fn revision_from(row: &AnyRow) -> StoreResult<AppRevisionRow> {
    Ok(AppRevisionRow {
        app: parsed(row, "app_revisions.app")?,
        number: uint64(row, "app_revisions.number")?,
        digest: text(row, "app_revisions.digest")?,
        document: text(row, "app_revisions.document")?,
        origin: text(row, "app_revisions.origin")?,
        state: text(row, "app_revisions.state")?,
        reason: opt_text(row, "app_revisions.reason")?,
        created_by: opt_text(row, "app_revisions.created_by")?,
        created_at: time(row, "app_revisions.created_at")?,
        updated_at: time(row, "app_revisions.updated_at")?,
        started_at: opt_time(row, "app_revisions.started_at")?,
        healthy_at: opt_time(row, "app_revisions.healthy_at")?,
    })
}

/// [`REVISION_COLUMNS`] of the table aliased `r`.
fn qualified_columns() -> String {
    REVISION_COLUMNS
        .split(", ")
        .map(|c| format!("r.{c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The states a revision leaves when a newer one is made.
const IN_FLIGHT: &str = "('PENDING', 'DEPLOYING', 'BLOCKED')";

impl Store {
    /// Makes revision `next` of app `app` in `project` (the app too, when it is new) with
    /// `document` and `state`; the revisions still in flight become `SUPERSEDED`. Returns the
    /// revision.
    #[allow(clippy::too_many_arguments)]
    pub async fn create_app_revision(
        &self,
        project: &ProjectId,
        app: &Name,
        digest: &str,
        document: &str,
        origin: &str,
        state: &str,
        reason: Option<&str>,
        created_by: Option<&str>,
        now: Timestamp,
    ) -> StoreResult<AppRevisionRow> {
        let mut tx = self.begin("make an app revision").await?;
        let current = sqlx::query("SELECT revision FROM apps WHERE project_id = $1 AND name = $2")
            .bind(project.as_str())
            .bind(app.as_str())
            .fetch_optional(&mut *tx)
            .await
            .op("read an app")?;
        let number = match current {
            Some(row) => uint64(&row, "apps.revision")? + 1,
            None => {
                sqlx::query(
                    "INSERT INTO apps (project_id, name, revision, created_at, updated_at) \
                     VALUES ($1, $2, 0, $3, $3)",
                )
                .bind(project.as_str())
                .bind(app.as_str())
                .bind(now.millis())
                .execute(&mut *tx)
                .await
                .op("make an app")?;
                1
            }
        };
        let sql = sqlx::AssertSqlSafe(format!(
            "UPDATE app_revisions SET state = 'SUPERSEDED', updated_at = $3 \
             WHERE project_id = $1 AND app = $2 AND state IN {IN_FLIGHT}"
        ));
        sqlx::query(sql)
            .bind(project.as_str())
            .bind(app.as_str())
            .bind(now.millis())
            .execute(&mut *tx)
            .await
            .op("supersede an app's revisions")?;
        sqlx::query(
            "INSERT INTO app_revisions (project_id, app, number, digest, document, origin, \
             state, reason, created_by, created_at, updated_at, started_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, \
             CASE WHEN $7 = 'DEPLOYING' THEN $10 END)",
        )
        .bind(project.as_str())
        .bind(app.as_str())
        .bind(big(number))
        .bind(digest)
        .bind(document)
        .bind(origin)
        .bind(state)
        .bind(reason)
        .bind(created_by)
        .bind(now.millis())
        .execute(&mut *tx)
        .await
        .op("keep an app revision")?;
        sqlx::query(
            "UPDATE apps SET revision = $3, updated_at = $4 WHERE project_id = $1 AND name = $2",
        )
        .bind(project.as_str())
        .bind(app.as_str())
        .bind(big(number))
        .bind(now.millis())
        .execute(&mut *tx)
        .await
        .op("move an app to its new revision")?;
        tx.commit().await.op("make an app revision")?;
        Ok(AppRevisionRow {
            app: app.clone(),
            number,
            digest: digest.to_string(),
            document: document.to_string(),
            origin: origin.to_string(),
            state: state.to_string(),
            reason: reason.map(str::to_string),
            created_by: created_by.map(str::to_string),
            created_at: now,
            updated_at: now,
            started_at: (state == "DEPLOYING").then_some(now),
            healthy_at: None,
        })
    }

    /// Revision `number` of `app`.
    pub async fn app_revision(
        &self,
        project: &ProjectId,
        app: &Name,
        number: u64,
    ) -> StoreResult<Option<AppRevisionRow>> {
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT {REVISION_COLUMNS} FROM app_revisions \
             WHERE project_id = $1 AND app = $2 AND number = $3"
        ));
        let row = sqlx::query(sql)
            .bind(project.as_str())
            .bind(app.as_str())
            .bind(big(number))
            .fetch_optional(self.pool())
            .await
            .op("read an app revision")?;
        row.as_ref().map(revision_from).transpose()
    }

    /// The newest revision of `app` (the one its `apps` row names), without reading the
    /// others.
    pub async fn newest_app_revision(
        &self,
        project: &ProjectId,
        app: &Name,
    ) -> StoreResult<Option<AppRevisionRow>> {
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT {} FROM app_revisions r JOIN apps a \
             ON a.project_id = r.project_id AND a.name = r.app AND a.revision = r.number \
             WHERE r.project_id = $1 AND r.app = $2",
            qualified_columns()
        ));
        let row = sqlx::query(sql)
            .bind(project.as_str())
            .bind(app.as_str())
            .fetch_optional(self.pool())
            .await
            .op("read an app's newest revision")?;
        row.as_ref().map(revision_from).transpose()
    }

    /// Every revision of `app`, newest first.
    pub async fn list_app_revisions(
        &self,
        project: &ProjectId,
        app: &Name,
    ) -> StoreResult<Vec<AppRevisionRow>> {
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT {REVISION_COLUMNS} FROM app_revisions \
             WHERE project_id = $1 AND app = $2 ORDER BY number DESC"
        ));
        let rows = sqlx::query(sql)
            .bind(project.as_str())
            .bind(app.as_str())
            .fetch_all(self.pool())
            .await
            .op("list an app's revisions")?;
        rows.iter().map(revision_from).collect()
    }

    /// Each app of `project` with its newest revision, by name.
    pub async fn list_apps(&self, project: &ProjectId) -> StoreResult<Vec<AppRevisionRow>> {
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT {} FROM app_revisions r JOIN apps a \
             ON a.project_id = r.project_id AND a.name = r.app AND a.revision = r.number \
             WHERE r.project_id = $1 ORDER BY r.app",
            qualified_columns()
        ));
        let rows = sqlx::query(sql)
            .bind(project.as_str())
            .fetch_all(self.pool())
            .await
            .op("list a project's apps")?;
        rows.iter().map(revision_from).collect()
    }

    /// Sets the state of revision `number` of `app`: its rollout begins when it first
    /// turns `DEPLOYING`, and it counts as healthy from when it first turns `HEALTHY`.
    pub async fn set_app_revision_state(
        &self,
        project: &ProjectId,
        app: &Name,
        number: u64,
        state: &str,
        reason: Option<&str>,
        now: Timestamp,
    ) -> StoreResult<()> {
        sqlx::query(
            "UPDATE app_revisions SET state = $4, reason = $5, updated_at = $6, \
             started_at = CASE WHEN $4 = 'DEPLOYING' AND started_at IS NULL THEN $6 \
             ELSE started_at END, \
             healthy_at = CASE WHEN $4 = 'HEALTHY' AND healthy_at IS NULL THEN $6 \
             ELSE healthy_at END \
             WHERE project_id = $1 AND app = $2 AND number = $3",
        )
        .bind(project.as_str())
        .bind(app.as_str())
        .bind(big(number))
        .bind(state)
        .bind(reason)
        .bind(now.millis())
        .execute(self.pool())
        .await
        .op("set an app revision's state")?;
        Ok(())
    }

    /// Where `app`'s replicas are, by workload and slot.
    pub async fn list_app_replicas(
        &self,
        project: &ProjectId,
        app: &Name,
    ) -> StoreResult<Vec<AppReplicaRow>> {
        let rows = sqlx::query(
            "SELECT workload, slot, revision, node_id, state, ready, restarts, updated_at, \
             address, message, draining_at FROM app_replicas WHERE project_id = $1 AND app = $2 \
             ORDER BY workload, slot",
        )
        .bind(project.as_str())
        .bind(app.as_str())
        .fetch_all(self.pool())
        .await
        .op("list an app's replicas")?;
        rows.iter()
            .map(|row| {
                Ok(AppReplicaRow {
                    workload: text(row, "app_replicas.workload")?,
                    slot: uint32(row, "app_replicas.slot")?,
                    revision: uint64(row, "app_replicas.revision")?,
                    node_id: opt_parsed(row, "app_replicas.node_id")?,
                    state: text(row, "app_replicas.state")?,
                    ready: flag(row, "app_replicas.ready")?,
                    restarts: uint32(row, "app_replicas.restarts")?,
                    updated_at: time(row, "app_replicas.updated_at")?,
                    address: opt_parsed(row, "app_replicas.address")?,
                    message: opt_text(row, "app_replicas.message")?,
                    draining_at: opt_time(row, "app_replicas.draining_at")?,
                })
            })
            .collect()
    }

    /// CPU (millicores) and memory (bytes) that apps of `project` other than `except` hold
    /// on each node, as `(node, cpu, memory)` summed by the caller from their documents.
    pub async fn app_replicas_on_nodes(
        &self,
        project: &ProjectId,
    ) -> StoreResult<Vec<(Name, String, u32, u64, NodeId)>> {
        let rows = sqlx::query(
            "SELECT app, workload, slot, revision, node_id FROM app_replicas \
             WHERE project_id = $1 AND node_id IS NOT NULL",
        )
        .bind(project.as_str())
        .fetch_all(self.pool())
        .await
        .op("list where a project's replicas run")?;
        rows.iter()
            .map(|row| {
                Ok((
                    parsed(row, "app_replicas.app")?,
                    text(row, "app_replicas.workload")?,
                    uint32(row, "app_replicas.slot")?,
                    uint64(row, "app_replicas.revision")?,
                    parsed(row, "app_replicas.node_id")?,
                ))
            })
            .collect()
    }

    /// Every replica placed on `node`: project, app, workload, slot and revision.
    pub async fn app_replicas_of_node(
        &self,
        node: &NodeId,
    ) -> StoreResult<Vec<(ProjectId, Name, String, u32, u64)>> {
        let rows = sqlx::query(
            "SELECT project_id, app, workload, slot, revision FROM app_replicas \
             WHERE node_id = $1 ORDER BY project_id, app, workload, slot",
        )
        .bind(node.as_str())
        .fetch_all(self.pool())
        .await
        .op("list a node's replicas")?;
        rows.iter()
            .map(|row| {
                Ok((
                    parsed(row, "app_replicas.project_id")?,
                    parsed(row, "app_replicas.app")?,
                    text(row, "app_replicas.workload")?,
                    uint32(row, "app_replicas.slot")?,
                    uint64(row, "app_replicas.revision")?,
                ))
            })
            .collect()
    }

    /// Records what `node` reports of one of its replicas; a replica since placed elsewhere,
    /// or whose slot now runs another revision, is left alone. Whether a row changed.
    #[allow(clippy::too_many_arguments)]
    pub async fn report_app_replica(
        &self,
        node: &NodeId,
        project: &ProjectId,
        app: &Name,
        workload: &str,
        slot: u32,
        revision: u64,
        state: &str,
        ready: bool,
        restarts: u32,
        message: Option<&str>,
        now: Timestamp,
    ) -> StoreResult<bool> {
        // What a node says is kept short: a line, not a log.
        let message = message.map(str::trim).filter(|m| !m.is_empty()).map(|m| {
            match m.char_indices().nth(MESSAGE_CHARS) {
                Some((end, _)) => format!("{}…", &m[..end]),
                None => m.to_string(),
            }
        });
        let done = sqlx::query(
            "UPDATE app_replicas SET state = $6, ready = $7, restarts = $8, updated_at = $9, \
             message = $11 \
             WHERE project_id = $1 AND app = $2 AND workload = $3 AND slot = $4 AND node_id = $5 \
             AND revision = $10 AND (state <> $6 OR ready <> $7 OR restarts <> $8 \
             OR COALESCE(message, '') <> COALESCE($11, ''))",
        )
        .bind(project.as_str())
        .bind(app.as_str())
        .bind(workload)
        .bind(i64::from(slot))
        .bind(node.as_str())
        .bind(state)
        .bind(i64::from(ready))
        .bind(i64::from(restarts))
        .bind(now.millis())
        .bind(big(revision))
        .bind(message)
        .execute(self.pool())
        .await
        .op("record a replica's report")?;
        Ok(done.rows_affected() > 0)
    }

    /// Gives every replica on `node` that has none an address of `subnet` (the lowest free
    /// one after the bridge's, the subnet's first), and returns each replica's address by
    /// project, app, workload and slot. A replica keeps its address for its life.
    pub async fn assign_replica_addresses(
        &self,
        node: &NodeId,
        subnet: ipnet::Ipv4Net,
    ) -> StoreResult<std::collections::BTreeMap<(ProjectId, Name, String, u32), std::net::Ipv4Addr>>
    {
        let mut tx = self.begin("address a node's replicas").await?;
        let rows = sqlx::query(
            "SELECT project_id, app, workload, slot, address FROM app_replicas \
             WHERE node_id = $1 ORDER BY project_id, app, workload, slot",
        )
        .bind(node.as_str())
        .fetch_all(&mut *tx)
        .await
        .op("read a node's replicas' addresses")?;
        let mut out = std::collections::BTreeMap::new();
        let mut waiting = Vec::new();
        for row in &rows {
            let key: (ProjectId, Name, String, u32) = (
                parsed(row, "app_replicas.project_id")?,
                parsed(row, "app_replicas.app")?,
                text(row, "app_replicas.workload")?,
                uint32(row, "app_replicas.slot")?,
            );
            let address: Option<std::net::Ipv4Addr> = opt_parsed(row, "app_replicas.address")?;
            match address.filter(|a| subnet.contains(a)) {
                Some(address) => {
                    out.insert(key, address);
                }
                None => waiting.push(key),
            }
        }
        let taken: std::collections::BTreeSet<std::net::Ipv4Addr> = out.values().copied().collect();
        let mut free = subnet.hosts().skip(1).filter(|a| !taken.contains(a));
        for key in waiting {
            // A full subnet leaves the rest without one; the caller says so.
            let Some(address) = free.next() else {
                break;
            };
            sqlx::query(
                "UPDATE app_replicas SET address = $6 WHERE project_id = $1 AND app = $2 \
                 AND workload = $3 AND slot = $4 AND node_id = $5",
            )
            .bind(key.0.as_str())
            .bind(key.1.as_str())
            .bind(&key.2)
            .bind(i64::from(key.3))
            .bind(node.as_str())
            .bind(address.to_string())
            .execute(&mut *tx)
            .await
            .op("address a replica")?;
            out.insert(key, address);
        }
        tx.commit().await.op("address a node's replicas")?;
        Ok(out)
    }

    /// `project`'s ready replicas that have an address and are not draining: what its
    /// service names and ingress routes lead to.
    pub async fn ready_replica_addresses(
        &self,
        project: &ProjectId,
    ) -> StoreResult<Vec<ReadyReplica>> {
        let rows = sqlx::query(
            "SELECT app, workload, revision, node_id, address FROM app_replicas \
             WHERE project_id = $1 AND ready = 1 AND node_id IS NOT NULL \
             AND address IS NOT NULL AND draining_at IS NULL \
             ORDER BY app, workload, address",
        )
        .bind(project.as_str())
        .fetch_all(self.pool())
        .await
        .op("read a project's ready replicas")?;
        rows.iter()
            .map(|row| {
                Ok(ReadyReplica {
                    app: parsed(row, "app_replicas.app")?,
                    workload: text(row, "app_replicas.workload")?,
                    revision: uint64(row, "app_replicas.revision")?,
                    node: parsed(row, "app_replicas.node_id")?,
                    address: parsed(row, "app_replicas.address")?,
                })
            })
            .collect()
    }

    /// The labels given to `node`, by name.
    pub async fn node_labels(
        &self,
        node: &NodeId,
    ) -> StoreResult<std::collections::BTreeMap<String, String>> {
        let rows =
            sqlx::query("SELECT name, value FROM node_labels WHERE node_id = $1 ORDER BY name")
                .bind(node.as_str())
                .fetch_all(self.pool())
                .await
                .op("read a node's labels")?;
        rows.iter()
            .map(|row| {
                Ok((
                    text(row, "node_labels.name")?,
                    text(row, "node_labels.value")?,
                ))
            })
            .collect()
    }

    /// Gives `node` label `name` with `value` (replacing an earlier value).
    pub async fn set_node_label(&self, node: &NodeId, name: &str, value: &str) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO node_labels (node_id, name, value) VALUES ($1, $2, $3) \
             ON CONFLICT (node_id, name) DO UPDATE SET value = excluded.value",
        )
        .bind(node.as_str())
        .bind(name)
        .bind(value)
        .execute(self.pool())
        .await
        .op("label a node")?;
        Ok(())
    }

    /// Takes label `name` from `node`; whether it had it.
    pub async fn remove_node_label(&self, node: &NodeId, name: &str) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM node_labels WHERE node_id = $1 AND name = $2")
            .bind(node.as_str())
            .bind(name)
            .execute(self.pool())
            .await
            .op("take a node's label")?;
        Ok(done.rows_affected() > 0)
    }

    /// Cordons `node` (`true`) or lifts its cordon (and its drain); whether that changed
    /// anything. `drain` also moves what runs there; a cordon alone does not end a drain.
    pub async fn set_node_cordon(
        &self,
        node: &NodeId,
        cordoned: bool,
        drain: bool,
        by: Option<&str>,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let done = if cordoned {
            sqlx::query(
                "INSERT INTO node_cordons (node_id, cordoned_by, cordoned_at, draining) \
                 VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (node_id) DO UPDATE SET draining = excluded.draining \
                 WHERE node_cordons.draining < excluded.draining",
            )
            .bind(node.as_str())
            .bind(by)
            .bind(now.millis())
            .bind(i64::from(drain))
            .execute(self.pool())
            .await
            .op("cordon a node")?
        } else {
            sqlx::query("DELETE FROM node_cordons WHERE node_id = $1")
                .bind(node.as_str())
                .execute(self.pool())
                .await
                .op("lift a node's cordon")?
        };
        Ok(done.rows_affected() > 0)
    }

    /// Whether `node` is cordoned.
    pub async fn node_cordoned(&self, node: &NodeId) -> StoreResult<bool> {
        Ok(self.node_cordon(node).await?.is_some())
    }

    /// `node`'s cordon: `None` when it has none, else whether it drains.
    pub async fn node_cordon(&self, node: &NodeId) -> StoreResult<Option<bool>> {
        let row = sqlx::query("SELECT draining FROM node_cordons WHERE node_id = $1")
            .bind(node.as_str())
            .fetch_optional(self.pool())
            .await
            .op("read a node's cordon")?;
        row.as_ref()
            .map(|row| flag(row, "node_cordons.draining"))
            .transpose()
    }

    /// Every app of the zone, by project: what the rollout pass looks at.
    pub async fn all_apps(&self) -> StoreResult<Vec<(ProjectId, Name)>> {
        let rows = sqlx::query("SELECT project_id, name FROM apps ORDER BY project_id, name")
            .fetch_all(self.pool())
            .await
            .op("list the zone's apps")?;
        rows.iter()
            .map(|row| Ok((parsed(row, "apps.project_id")?, parsed(row, "apps.name")?)))
            .collect()
    }

    /// The newest revision of `app` below `before` that was ever healthy.
    pub async fn last_healthy_app_revision(
        &self,
        project: &ProjectId,
        app: &Name,
        before: u64,
    ) -> StoreResult<Option<AppRevisionRow>> {
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT {REVISION_COLUMNS} FROM app_revisions \
             WHERE project_id = $1 AND app = $2 AND number < $3 AND healthy_at IS NOT NULL \
             ORDER BY number DESC LIMIT 1"
        ));
        let row = sqlx::query(sql)
            .bind(project.as_str())
            .bind(app.as_str())
            .bind(big(before))
            .fetch_optional(self.pool())
            .await
            .op("read an app's last healthy revision")?;
        row.as_ref().map(revision_from).transpose()
    }

    /// Applies one rollout step to `app`'s replicas in one transaction: removes slots,
    /// relabels slots to a revision where they run, adds new ones, and places waiting ones
    /// (only if they still wait). Reports recorded meanwhile are kept.
    pub async fn change_app_replicas(
        &self,
        project: &ProjectId,
        app: &Name,
        change: &ReplicaChange,
    ) -> StoreResult<()> {
        if change.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin("roll an app's replicas").await?;
        for (workload, slot) in &change.remove {
            sqlx::query(
                "DELETE FROM app_replicas \
                 WHERE project_id = $1 AND app = $2 AND workload = $3 AND slot = $4",
            )
            .bind(project.as_str())
            .bind(app.as_str())
            .bind(workload)
            .bind(i64::from(*slot))
            .execute(&mut *tx)
            .await
            .op("remove an app replica")?;
        }
        for (workload, slot, revision) in &change.adopt {
            sqlx::query(
                "UPDATE app_replicas SET revision = $5 \
                 WHERE project_id = $1 AND app = $2 AND workload = $3 AND slot = $4",
            )
            .bind(project.as_str())
            .bind(app.as_str())
            .bind(workload)
            .bind(i64::from(*slot))
            .bind(big(*revision))
            .execute(&mut *tx)
            .await
            .op("relabel an app replica")?;
        }
        for r in &change.add {
            sqlx::query(
                "INSERT INTO app_replicas (project_id, app, workload, slot, revision, node_id, \
                 state, ready, restarts, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            )
            .bind(project.as_str())
            .bind(app.as_str())
            .bind(&r.workload)
            .bind(i64::from(r.slot))
            .bind(big(r.revision))
            .bind(r.node_id.as_ref().map(|n| n.as_str()))
            .bind(&r.state)
            .bind(i64::from(r.ready))
            .bind(i64::from(r.restarts))
            .bind(r.updated_at.millis())
            .execute(&mut *tx)
            .await
            .op("add an app replica")?;
        }
        for (workload, slot, node) in &change.place {
            sqlx::query(
                "UPDATE app_replicas SET node_id = $5 \
                 WHERE project_id = $1 AND app = $2 AND workload = $3 AND slot = $4 \
                 AND node_id IS NULL",
            )
            .bind(project.as_str())
            .bind(app.as_str())
            .bind(workload)
            .bind(i64::from(*slot))
            .bind(node.as_str())
            .execute(&mut *tx)
            .await
            .op("place an app replica")?;
        }
        for (workload, slot, since) in &change.drain {
            sqlx::query(
                "UPDATE app_replicas SET draining_at = $5 \
                 WHERE project_id = $1 AND app = $2 AND workload = $3 AND slot = $4 \
                 AND draining_at IS NULL",
            )
            .bind(project.as_str())
            .bind(app.as_str())
            .bind(workload)
            .bind(i64::from(*slot))
            .bind(since.millis())
            .execute(&mut *tx)
            .await
            .op("drain an app replica")?;
        }
        tx.commit().await.op("roll an app's replicas")?;
        Ok(())
    }

    /// The apps of `project` with a replica on `node`.
    pub async fn apps_on_node(&self, project: &ProjectId, node: &NodeId) -> StoreResult<Vec<Name>> {
        let rows = sqlx::query(
            "SELECT DISTINCT app FROM app_replicas WHERE project_id = $1 AND node_id = $2 ORDER BY app",
        )
        .bind(project.as_str())
        .bind(node.as_str())
        .fetch_all(self.pool())
        .await
        .op("list the apps on a node")?;
        rows.iter()
            .map(|row| parsed(row, "app_replicas.app"))
            .collect()
    }

    /// Removes `app`, its revisions and replicas; whether it existed.
    pub async fn delete_app(&self, project: &ProjectId, app: &Name) -> StoreResult<bool> {
        let mut tx = self.begin("remove an app").await?;
        for sql in [
            "DELETE FROM app_replicas WHERE project_id = $1 AND app = $2",
            "DELETE FROM app_revisions WHERE project_id = $1 AND app = $2",
        ] {
            sqlx::query(sql)
                .bind(project.as_str())
                .bind(app.as_str())
                .execute(&mut *tx)
                .await
                .op("remove an app's revisions and replicas")?;
        }
        let done = sqlx::query("DELETE FROM apps WHERE project_id = $1 AND name = $2")
            .bind(project.as_str())
            .bind(app.as_str())
            .execute(&mut *tx)
            .await
            .op("remove an app")?;
        tx.commit().await.op("remove an app")?;
        Ok(done.rows_affected() > 0)
    }
}
