//! The mesh's addresses: each project's prefix of the zone's mesh range, and each member's
//! (node's or workstation's) address in its project's prefix.
//!
//! Allocation happens in one transaction that reads what is in use and what is in
//! quarantine, chooses the lowest free value ([`orc_mesh::range`]) and inserts it; the
//! `UNIQUE` constraints on prefix and address make a second writer that chose the same value
//! fail instead of sharing it. A released prefix or address stays in `mesh_quarantine` until
//! its time is up, and only then may it be chosen again.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use orc_mesh::MeshRange;
use orc_mesh::range::allocate_address;
use sqlx::any::AnyRow;

use super::error::OperationExt;
use super::rows::{json, opt_text, parsed, text, time};
use super::{Store, StoreError, StoreResult};
use orc_zone_model::{
    Endpoint, Name, NodeFacts, NodeId, OrgId, PoolId, ProjectId, ProviderId, Timestamp,
};

/// What a mesh member is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MeshMemberKind {
    Node,
    Workstation,
}

impl MeshMemberKind {
    fn as_str(self) -> &'static str {
        match self {
            MeshMemberKind::Node => "node",
            MeshMemberKind::Workstation => "workstation",
        }
    }
}

/// A member of a project's mesh with its address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeshMember {
    /// The node id, or the workstation's id.
    pub id: String,
    pub kind: MeshMemberKind,
    pub project_id: ProjectId,
    /// The node's or workstation's name.
    pub name: String,
    pub address: Ipv4Addr,
    /// A workstation's public key (a node's comes from its agent's facts).
    pub public_key: Option<String>,
    pub created_at: Timestamp,
}

/// A node that is not ended, with what the mesh needs of it, its pool and its agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeshNode {
    pub node_id: NodeId,
    pub site: Option<String>,
    /// The addresses its provider reported.
    pub addresses: Vec<String>,
    pub pool_id: PoolId,
    pub pool_name: Name,
    /// Whether its pool is public, and the pool's endpoints.
    pub public: bool,
    pub endpoints: Vec<Endpoint>,
    pub provider_id: ProviderId,
    pub project_id: ProjectId,
    pub project_name: Name,
    pub org_id: OrgId,
    pub org_name: Name,
    /// What its agent last reported; `None` before it joined.
    pub facts: Option<NodeFacts>,
}

/// A site some provider reported, with its addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeshSite {
    pub provider_id: ProviderId,
    pub site: String,
    pub public_ipv4: Option<String>,
    pub private_prefix: Option<String>,
}

/// A project on the mesh, with its names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeshProject {
    pub id: ProjectId,
    pub name: String,
    pub org_name: String,
    pub prefix: Ipv4Net,
}

/// A public pool's address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeshPoolAddress {
    pub pool_id: PoolId,
    pub site: String,
    pub ipv4: String,
}

/// A member to add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMeshMember {
    pub id: String,
    pub kind: MeshMemberKind,
    pub project_id: ProjectId,
    pub name: String,
    pub public_key: Option<String>,
}

fn corrupt(column: &str, reason: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt {
        column: column.to_string(),
        reason: reason.to_string(),
    }
}

fn member_from(row: &AnyRow) -> StoreResult<MeshMember> {
    let kind = match text(row, "mesh_members.kind")?.as_str() {
        "node" => MeshMemberKind::Node,
        "workstation" => MeshMemberKind::Workstation,
        other => {
            return Err(corrupt(
                "mesh_members.kind",
                format!("unknown kind {other:?}"),
            ));
        }
    };
    Ok(MeshMember {
        id: text(row, "mesh_members.id")?,
        kind,
        project_id: parsed(row, "mesh_members.project_id")?,
        name: text(row, "mesh_members.name")?,
        address: parsed(row, "mesh_members.address")?,
        public_key: opt_text(row, "mesh_members.public_key")?,
        created_at: time(row, "mesh_members.created_at")?,
    })
}

impl Store {
    /// Every node that is not ended, with its pool, project, org and agent facts, by id.
    pub async fn mesh_nodes(&self) -> StoreResult<Vec<MeshNode>> {
        let rows = sqlx::query(
            "SELECT n.id AS node_id, n.site AS site, n.addresses AS addresses, \
             p.id AS pool_id, p.name AS pool_name, p.public AS public, p.endpoints AS endpoints, \
             p.provider_id AS provider_id, pr.id AS project_id, pr.name AS project_name, \
             o.id AS org_id, o.name AS org_name, a.facts AS facts \
             FROM nodes n JOIN pools p ON p.id = n.pool_id \
             JOIN projects pr ON pr.id = p.project_id JOIN orgs o ON o.id = pr.org_id \
             LEFT JOIN node_agents a ON a.node_id = n.id \
             WHERE n.state <> 'ended' ORDER BY n.id",
        )
        .fetch_all(self.pool())
        .await
        .op("read the mesh's nodes")?;
        rows.iter()
            .map(|row| {
                let facts = match opt_text(row, "facts")? {
                    Some(text) => Some(
                        serde_json::from_str(&text).map_err(|e| corrupt("node_agents.facts", e))?,
                    ),
                    None => None,
                };
                Ok(MeshNode {
                    node_id: parsed(row, "node_id")?,
                    site: opt_text(row, "site")?,
                    addresses: json(row, "nodes.addresses")?,
                    pool_id: parsed(row, "pool_id")?,
                    pool_name: parsed(row, "pool_name")?,
                    public: super::rows::flag(row, "pools.public")?,
                    endpoints: json(row, "pools.endpoints")?,
                    provider_id: parsed(row, "provider_id")?,
                    project_id: parsed(row, "project_id")?,
                    project_name: parsed(row, "project_name")?,
                    org_id: parsed(row, "org_id")?,
                    org_name: parsed(row, "org_name")?,
                    facts,
                })
            })
            .collect()
    }

    /// Every site every provider reported, by provider and site.
    pub async fn mesh_sites(&self) -> StoreResult<Vec<MeshSite>> {
        let rows = sqlx::query(
            "SELECT provider_id, site, public_ipv4, private_prefix FROM provider_sites \
             ORDER BY provider_id, site",
        )
        .fetch_all(self.pool())
        .await
        .op("read the mesh's sites")?;
        rows.iter()
            .map(|row| {
                Ok(MeshSite {
                    provider_id: parsed(row, "provider_sites.provider_id")?,
                    site: text(row, "provider_sites.site")?,
                    public_ipv4: opt_text(row, "provider_sites.public_ipv4")?,
                    private_prefix: opt_text(row, "provider_sites.private_prefix")?,
                })
            })
            .collect()
    }

    /// Every public pool's address.
    pub async fn mesh_pool_addresses(&self) -> StoreResult<Vec<MeshPoolAddress>> {
        let rows = sqlx::query("SELECT pool_id, site, ipv4 FROM pool_addresses ORDER BY pool_id")
            .fetch_all(self.pool())
            .await
            .op("read pool addresses")?;
        rows.iter()
            .map(|row| {
                Ok(MeshPoolAddress {
                    pool_id: parsed(row, "pool_addresses.pool_id")?,
                    site: text(row, "pool_addresses.site")?,
                    ipv4: text(row, "pool_addresses.ipv4")?,
                })
            })
            .collect()
    }

    /// Every project's mesh prefix.
    pub async fn mesh_prefixes(&self) -> StoreResult<BTreeMap<ProjectId, Ipv4Net>> {
        let rows = sqlx::query("SELECT project_id, prefix FROM mesh_prefixes")
            .fetch_all(self.pool())
            .await
            .op("read mesh prefixes")?;
        rows.iter()
            .map(|row| {
                Ok((
                    parsed(row, "mesh_prefixes.project_id")?,
                    parsed(row, "mesh_prefixes.prefix")?,
                ))
            })
            .collect()
    }

    /// Every project that holds a mesh prefix, with the prefix, its org's name and its own, by
    /// id.
    pub async fn mesh_projects(&self) -> StoreResult<Vec<MeshProject>> {
        let rows = sqlx::query(
            "SELECT pr.id AS id, pr.name AS name, o.name AS org_name, m.prefix AS prefix \
             FROM mesh_prefixes m \
             JOIN projects pr ON pr.id = m.project_id JOIN orgs o ON o.id = pr.org_id \
             ORDER BY pr.id",
        )
        .fetch_all(self.pool())
        .await
        .op("read the mesh's projects")?;
        rows.iter()
            .map(|row| {
                Ok(MeshProject {
                    id: parsed(row, "projects.id")?,
                    name: text(row, "projects.name")?,
                    org_name: text(row, "org_name")?,
                    prefix: parsed(row, "mesh_prefixes.prefix")?,
                })
            })
            .collect()
    }

    /// Every mesh member, by id.
    pub async fn mesh_members(&self) -> StoreResult<Vec<MeshMember>> {
        let rows = sqlx::query(
            "SELECT id, kind, project_id, name, address, public_key, created_at \
             FROM mesh_members ORDER BY id",
        )
        .fetch_all(self.pool())
        .await
        .op("read mesh members")?;
        rows.iter().map(member_from).collect()
    }

    /// The members of `project`'s mesh, by id.
    pub async fn mesh_members_of(&self, project: &ProjectId) -> StoreResult<Vec<MeshMember>> {
        let rows = sqlx::query(
            "SELECT id, kind, project_id, name, address, public_key, created_at \
             FROM mesh_members WHERE project_id = $1 ORDER BY id",
        )
        .bind(project.as_str())
        .fetch_all(self.pool())
        .await
        .op("read a project's mesh members")?;
        rows.iter().map(member_from).collect()
    }

    /// Makes `member` a member of its project's mesh, giving the project a prefix of `range`
    /// and the member an address in it on first use; a member that exists is returned as it
    /// is. `Ok(None)` when the range or the project's prefix has nothing free (neither in use
    /// nor in quarantine at `now`).
    pub async fn ensure_mesh_member(
        &self,
        member: &NewMeshMember,
        range: &MeshRange,
        now: Timestamp,
    ) -> StoreResult<Option<MeshMember>> {
        const OP: &str = "add a mesh member";
        let mut tx = self.begin(OP).await?;
        let existing = sqlx::query(
            "SELECT id, kind, project_id, name, address, public_key, created_at \
             FROM mesh_members WHERE id = $1",
        )
        .bind(member.id.as_str())
        .fetch_optional(&mut *tx)
        .await
        .op(OP)?;
        if let Some(row) = existing {
            return member_from(&row).map(Some);
        }
        sqlx::query("DELETE FROM mesh_quarantine WHERE until_at <= $1")
            .bind(now.millis())
            .execute(&mut *tx)
            .await
            .op(OP)?;
        let quarantined: BTreeSet<String> =
            sqlx::query_scalar::<_, String>("SELECT value FROM mesh_quarantine")
                .fetch_all(&mut *tx)
                .await
                .op(OP)?
                .into_iter()
                .collect();

        let prefix = sqlx::query_scalar::<_, String>(
            "SELECT prefix FROM mesh_prefixes WHERE project_id = $1",
        )
        .bind(member.project_id.as_str())
        .fetch_optional(&mut *tx)
        .await
        .op(OP)?;
        let prefix: Ipv4Net = match prefix {
            Some(text) => text
                .parse()
                .map_err(|e| corrupt("mesh_prefixes.prefix", e))?,
            None => {
                let mut taken: BTreeSet<Ipv4Net> =
                    sqlx::query_scalar::<_, String>("SELECT prefix FROM mesh_prefixes")
                        .fetch_all(&mut *tx)
                        .await
                        .op(OP)?
                        .iter()
                        .filter_map(|p| p.parse().ok())
                        .collect();
                taken.extend(quarantined.iter().filter_map(|v| v.parse::<Ipv4Net>().ok()));
                let Some(prefix) = range.allocate_project(&taken) else {
                    return Ok(None);
                };
                sqlx::query(
                    "INSERT INTO mesh_prefixes (project_id, prefix, allocated_at) \
                     VALUES ($1, $2, $3)",
                )
                .bind(member.project_id.as_str())
                .bind(prefix.to_string())
                .bind(now.millis())
                .execute(&mut *tx)
                .await
                .op(OP)?;
                prefix
            }
        };

        let mut taken: BTreeSet<Ipv4Addr> = sqlx::query_scalar::<_, String>(
            "SELECT address FROM mesh_members WHERE project_id = $1",
        )
        .bind(member.project_id.as_str())
        .fetch_all(&mut *tx)
        .await
        .op(OP)?
        .iter()
        .filter_map(|a| a.parse().ok())
        .collect();
        taken.extend(
            quarantined
                .iter()
                .filter_map(|v| v.parse::<Ipv4Addr>().ok()),
        );
        let Some(address) = allocate_address(prefix, &taken) else {
            return Ok(None);
        };
        sqlx::query(
            "INSERT INTO mesh_members (id, kind, project_id, name, address, public_key, \
             created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(member.id.as_str())
        .bind(member.kind.as_str())
        .bind(member.project_id.as_str())
        .bind(member.name.as_str())
        .bind(address.to_string())
        .bind(member.public_key.clone())
        .bind(now.millis())
        .execute(&mut *tx)
        .await
        .op(OP)?;
        tx.commit().await.op(OP)?;
        Ok(Some(MeshMember {
            id: member.id.clone(),
            kind: member.kind,
            project_id: member.project_id.clone(),
            name: member.name.clone(),
            address,
            public_key: member.public_key.clone(),
            created_at: now,
        }))
    }

    /// Removes the members `ids`; their addresses are quarantined until `until`. Returns how
    /// many were removed.
    pub async fn release_mesh_members(&self, ids: &[String], until: Timestamp) -> StoreResult<u64> {
        const OP: &str = "release mesh members";
        let mut removed = 0;
        let mut tx = self.begin(OP).await?;
        for id in ids {
            let address = sqlx::query_scalar::<_, String>(
                "DELETE FROM mesh_members WHERE id = $1 RETURNING address",
            )
            .bind(id.as_str())
            .fetch_optional(&mut *tx)
            .await
            .op(OP)?;
            if let Some(address) = address {
                quarantine(&mut tx, &address, "address", until).await?;
                removed += 1;
            }
        }
        tx.commit().await.op(OP)?;
        Ok(removed)
    }

    /// Gives up `project`'s prefix (its members first): quarantined until `until`. `false`
    /// when the project had none, or still has members.
    pub async fn release_mesh_prefix(
        &self,
        project: &ProjectId,
        until: Timestamp,
    ) -> StoreResult<bool> {
        const OP: &str = "release a mesh prefix";
        let mut tx = self.begin(OP).await?;
        let members: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM mesh_members WHERE project_id = $1")
                .bind(project.as_str())
                .fetch_one(&mut *tx)
                .await
                .op(OP)?;
        if members > 0 {
            return Ok(false);
        }
        let prefix = sqlx::query_scalar::<_, String>(
            "DELETE FROM mesh_prefixes WHERE project_id = $1 RETURNING prefix",
        )
        .bind(project.as_str())
        .fetch_optional(&mut *tx)
        .await
        .op(OP)?;
        let Some(prefix) = prefix else {
            return Ok(false);
        };
        quarantine(&mut tx, &prefix, "prefix", until).await?;
        tx.commit().await.op(OP)?;
        Ok(true)
    }

    /// Sets a member's public key (a workstation that made a new key).
    pub async fn set_mesh_member_key(&self, id: &str, public_key: &str) -> StoreResult<bool> {
        let done = sqlx::query("UPDATE mesh_members SET public_key = $1 WHERE id = $2")
            .bind(public_key)
            .bind(id)
            .execute(self.pool())
            .await
            .op("set a mesh member's key")?;
        Ok(done.rows_affected() > 0)
    }
}

async fn quarantine(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    value: &str,
    kind: &str,
    until: Timestamp,
) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO mesh_quarantine (value, kind, until_at) VALUES ($1, $2, $3) \
         ON CONFLICT (value) DO UPDATE SET until_at = excluded.until_at",
    )
    .bind(value)
    .bind(kind)
    .bind(until.millis())
    .execute(&mut **tx)
    .await
    .op("quarantine a mesh address")?;
    Ok(())
}
