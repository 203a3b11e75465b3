//! Orgs, projects, users, API tokens and memberships.
//!
//! Token values never reach the database: only their SHA-256 is stored and looked up.

use sqlx::any::AnyRow;

use super::error::OperationExt;
use super::error::{classify_write, not_found};
use super::rows::{opt_parsed, opt_time, parsed, text, time, token_hash};
use super::{Kind, Store, StoreError, StoreResult};
use orc_zone_model::{
    ApiToken, Membership, MembershipId, Name, Org, OrgId, PoolId, Project, ProjectId, Role,
    Timestamp, TokenId, TokenSecret, User, UserId,
};

fn org_from(row: &AnyRow) -> StoreResult<Org> {
    Ok(Org {
        id: parsed(row, "orgs.id")?,
        name: parsed(row, "orgs.name")?,
        created_at: time(row, "orgs.created_at")?,
    })
}

fn project_from(row: &AnyRow) -> StoreResult<Project> {
    Ok(Project {
        id: parsed(row, "projects.id")?,
        org_id: parsed(row, "projects.org_id")?,
        name: parsed(row, "projects.name")?,
        created_at: time(row, "projects.created_at")?,
    })
}

fn user_from(row: &AnyRow) -> StoreResult<User> {
    Ok(User {
        id: parsed(row, "users.id")?,
        name: parsed(row, "users.name")?,
        created_at: time(row, "users.created_at")?,
    })
}

fn token_from(row: &AnyRow) -> StoreResult<ApiToken> {
    let hash = token_hash(row, "api_tokens.secret_sha256")?;
    Ok(ApiToken {
        id: parsed(row, "api_tokens.id")?,
        user_id: parsed(row, "api_tokens.user_id")?,
        label: text(row, "api_tokens.label")?,
        hash,
        created_at: time(row, "api_tokens.created_at")?,
        expires_at: opt_time(row, "api_tokens.expires_at")?,
        revoked_at: opt_time(row, "api_tokens.revoked_at")?,
        service_pool: opt_parsed(row, "api_tokens.service_pool_id")?,
        default_project: opt_parsed(row, "api_tokens.default_project_id")?,
    })
}

fn membership_from(row: &AnyRow) -> StoreResult<Membership> {
    Ok(Membership {
        id: parsed(row, "memberships.id")?,
        user_id: parsed(row, "memberships.user_id")?,
        org_id: parsed(row, "memberships.org_id")?,
        project_id: opt_parsed(row, "memberships.project_id")?,
        role: parsed(row, "memberships.role")?,
        created_at: time(row, "memberships.created_at")?,
    })
}

const TOKEN_COLUMNS: &str = "id, user_id, label, secret_sha256, created_at, expires_at, \
     revoked_at, service_pool_id, default_project_id";

impl Store {
    /// Creates an org. Its name is unique in the zone.
    pub async fn create_org(&self, name: &Name, now: Timestamp) -> StoreResult<Org> {
        let id = OrgId::from_counter(self.allocate_ids(1).await?);
        sqlx::query("INSERT INTO orgs (id, name, created_at) VALUES ($1, $2, $3)")
            .bind(id.as_str())
            .bind(name.as_str())
            .bind(now.millis())
            .execute(self.pool())
            .await
            .map_err(|e| {
                classify_write(
                    e,
                    "create org",
                    Kind::Org,
                    |_| (name.to_string(), String::new()),
                    String::new,
                )
            })?;
        Ok(Org {
            id,
            name: name.clone(),
            created_at: now,
        })
    }

    /// The org with this id.
    pub async fn get_org(&self, id: &OrgId) -> StoreResult<Org> {
        let row = sqlx::query("SELECT id, name, created_at FROM orgs WHERE id = $1")
            .bind(id.as_str())
            .fetch_optional(self.pool())
            .await
            .op("read org")?;
        row.as_ref()
            .map(org_from)
            .transpose()?
            .ok_or_else(|| not_found(Kind::Org, id))
    }

    /// The org with this name.
    pub async fn org_by_name(&self, name: &Name) -> StoreResult<Org> {
        let row = sqlx::query("SELECT id, name, created_at FROM orgs WHERE name = $1")
            .bind(name.as_str())
            .fetch_optional(self.pool())
            .await
            .op("find org by name")?;
        row.as_ref()
            .map(org_from)
            .transpose()?
            .ok_or_else(|| not_found(Kind::Org, name))
    }

    /// Every org, by name.
    pub async fn list_orgs(&self) -> StoreResult<Vec<Org>> {
        sqlx::query("SELECT id, name, created_at FROM orgs ORDER BY name")
            .fetch_all(self.pool())
            .await
            .op("list orgs")?
            .iter()
            .map(org_from)
            .collect()
    }

    /// Creates a project in an org. Its name is unique within the org.
    pub async fn create_project(
        &self,
        org_id: &OrgId,
        name: &Name,
        now: Timestamp,
    ) -> StoreResult<Project> {
        let id = ProjectId::from_counter(self.allocate_ids(1).await?);
        sqlx::query("INSERT INTO projects (id, org_id, name, created_at) VALUES ($1, $2, $3, $4)")
            .bind(id.as_str())
            .bind(org_id.as_str())
            .bind(name.as_str())
            .bind(now.millis())
            .execute(self.pool())
            .await
            .map_err(|e| {
                classify_write(
                    e,
                    "create project",
                    Kind::Project,
                    |_| (name.to_string(), format!(" in org {org_id}")),
                    || format!("org {org_id}"),
                )
            })?;
        Ok(Project {
            id,
            org_id: org_id.clone(),
            name: name.clone(),
            created_at: now,
        })
    }

    /// The project with this id.
    pub async fn get_project(&self, id: &ProjectId) -> StoreResult<Project> {
        let row = sqlx::query("SELECT id, org_id, name, created_at FROM projects WHERE id = $1")
            .bind(id.as_str())
            .fetch_optional(self.pool())
            .await
            .op("read project")?;
        row.as_ref()
            .map(project_from)
            .transpose()?
            .ok_or_else(|| not_found(Kind::Project, id))
    }

    /// The project `<org>/<project>` by names.
    pub async fn project_by_path(&self, org: &Name, project: &Name) -> StoreResult<Project> {
        let row = sqlx::query(
            "SELECT p.id, p.org_id, p.name, p.created_at FROM projects p \
             JOIN orgs o ON o.id = p.org_id WHERE o.name = $1 AND p.name = $2",
        )
        .bind(org.as_str())
        .bind(project.as_str())
        .fetch_optional(self.pool())
        .await
        .op("find project by path")?;
        row.as_ref()
            .map(project_from)
            .transpose()?
            .ok_or_else(|| not_found(Kind::Project, format!("{org}/{project}")))
    }

    /// The projects of an org, by name.
    pub async fn list_projects(&self, org_id: &OrgId) -> StoreResult<Vec<Project>> {
        sqlx::query(
            "SELECT id, org_id, name, created_at FROM projects WHERE org_id = $1 ORDER BY name",
        )
        .bind(org_id.as_str())
        .fetch_all(self.pool())
        .await
        .op("list projects")?
        .iter()
        .map(project_from)
        .collect()
    }

    /// Creates a user. Its name is unique in the zone.
    pub async fn create_user(&self, name: &Name, now: Timestamp) -> StoreResult<User> {
        let id = UserId::from_counter(self.allocate_ids(1).await?);
        sqlx::query("INSERT INTO users (id, name, created_at) VALUES ($1, $2, $3)")
            .bind(id.as_str())
            .bind(name.as_str())
            .bind(now.millis())
            .execute(self.pool())
            .await
            .map_err(|e| {
                classify_write(
                    e,
                    "create user",
                    Kind::User,
                    |_| (name.to_string(), String::new()),
                    String::new,
                )
            })?;
        Ok(User {
            id,
            name: name.clone(),
            created_at: now,
        })
    }

    /// The user with this id.
    pub async fn get_user(&self, id: &UserId) -> StoreResult<User> {
        let row = sqlx::query("SELECT id, name, created_at FROM users WHERE id = $1")
            .bind(id.as_str())
            .fetch_optional(self.pool())
            .await
            .op("read user")?;
        row.as_ref()
            .map(user_from)
            .transpose()?
            .ok_or_else(|| not_found(Kind::User, id))
    }

    /// The user with this name.
    pub async fn user_by_name(&self, name: &Name) -> StoreResult<User> {
        let row = sqlx::query("SELECT id, name, created_at FROM users WHERE name = $1")
            .bind(name.as_str())
            .fetch_optional(self.pool())
            .await
            .op("find user by name")?;
        row.as_ref()
            .map(user_from)
            .transpose()?
            .ok_or_else(|| not_found(Kind::User, name))
    }

    /// Every user, by name.
    pub async fn list_users(&self) -> StoreResult<Vec<User>> {
        sqlx::query("SELECT id, name, created_at FROM users ORDER BY name")
            .fetch_all(self.pool())
            .await
            .op("list users")?
            .iter()
            .map(user_from)
            .collect()
    }

    /// Creates an API token for a user and returns its value: the only time the value is
    /// available. The store keeps its SHA-256.
    pub async fn create_token(
        &self,
        user_id: &UserId,
        label: &str,
        expires_at: Option<Timestamp>,
        default_project: Option<&ProjectId>,
        now: Timestamp,
    ) -> StoreResult<(ApiToken, TokenSecret)> {
        self.insert_token(user_id, label, expires_at, None, default_project, now)
            .await
    }

    /// Creates the service credential of app pool `pool` (owned by the pool's service user)
    /// and revokes every earlier credential of the pool, so a rotation leaves one.
    pub async fn create_service_token(
        &self,
        user_id: &UserId,
        pool: &PoolId,
        label: &str,
        expires_at: Option<Timestamp>,
        now: Timestamp,
    ) -> StoreResult<(ApiToken, TokenSecret)> {
        self.revoke_service_tokens(pool, now).await?;
        self.insert_token(user_id, label, expires_at, Some(pool), None, now)
            .await
    }

    /// Revokes every credential of app pool `pool`; returns how many were live.
    pub async fn revoke_service_tokens(&self, pool: &PoolId, now: Timestamp) -> StoreResult<u64> {
        let done = sqlx::query(
            "UPDATE api_tokens SET revoked_at = $2 WHERE service_pool_id = $1 \
             AND revoked_at IS NULL",
        )
        .bind(pool.as_str())
        .bind(now.millis())
        .execute(self.pool())
        .await
        .op("revoke service credentials")?;
        Ok(done.rows_affected())
    }

    async fn insert_token(
        &self,
        user_id: &UserId,
        label: &str,
        expires_at: Option<Timestamp>,
        service_pool: Option<&PoolId>,
        default_project: Option<&ProjectId>,
        now: Timestamp,
    ) -> StoreResult<(ApiToken, TokenSecret)> {
        let id = TokenId::from_counter(self.allocate_ids(1).await?);
        let secret = TokenSecret::generate();
        let hash = secret.hash();
        sqlx::query(
            "INSERT INTO api_tokens (id, user_id, label, secret_sha256, created_at, expires_at, \
             revoked_at, service_pool_id, default_project_id) \
             VALUES ($1, $2, $3, $4, $5, $6, NULL, $7, $8)",
        )
        .bind(id.as_str())
        .bind(user_id.as_str())
        .bind(label)
        .bind(hash.to_hex())
        .bind(now.millis())
        .bind(expires_at.map(Timestamp::millis))
        .bind(service_pool.map(PoolId::as_str))
        .bind(default_project.map(ProjectId::as_str))
        .execute(self.pool())
        .await
        .map_err(|e| {
            classify_write(
                e,
                "create API token",
                Kind::Token,
                |_| ("<redacted>".to_string(), String::new()),
                || format!("user {user_id}"),
            )
        })?;
        let token = ApiToken {
            id,
            user_id: user_id.clone(),
            label: label.to_string(),
            hash,
            created_at: now,
            expires_at,
            revoked_at: None,
            service_pool: service_pool.cloned(),
            default_project: default_project.cloned(),
        };
        Ok((token, secret))
    }

    /// The token a presented value belongs to, if it exists, is not revoked and has not
    /// expired at `now`.
    pub async fn authenticate_token(
        &self,
        secret: &TokenSecret,
        now: Timestamp,
    ) -> StoreResult<Option<ApiToken>> {
        let row = sqlx::query(
            "SELECT id, user_id, label, secret_sha256, created_at, expires_at, revoked_at, \
             service_pool_id, default_project_id FROM api_tokens WHERE secret_sha256 = $1 \
             AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $2)",
        )
        .bind(secret.hash().to_hex())
        .bind(now.millis())
        .fetch_optional(self.pool())
        .await
        .op("authenticate token")?;
        row.as_ref().map(token_from).transpose()
    }

    /// The token with this id (its record; the value is never kept).
    pub async fn get_token(&self, id: &TokenId) -> StoreResult<ApiToken> {
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT {TOKEN_COLUMNS} FROM api_tokens WHERE id = $1"
        ));
        let row = sqlx::query(sql)
            .bind(id.as_str())
            .fetch_optional(self.pool())
            .await
            .op("read API token")?;
        row.as_ref()
            .map(token_from)
            .transpose()?
            .ok_or_else(|| not_found(Kind::Token, id))
    }

    /// A user's tokens (without values), by id.
    pub async fn list_tokens(&self, user_id: &UserId) -> StoreResult<Vec<ApiToken>> {
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT {TOKEN_COLUMNS} FROM api_tokens WHERE user_id = $1 ORDER BY id"
        ));
        sqlx::query(sql)
            .bind(user_id.as_str())
            .fetch_all(self.pool())
            .await
            .op("list API tokens")?
            .iter()
            .map(token_from)
            .collect()
    }

    /// Revokes a token; revoking it again keeps the first revocation time.
    pub async fn revoke_token(&self, id: &TokenId, now: Timestamp) -> StoreResult<ApiToken> {
        let sql = sqlx::AssertSqlSafe(format!(
            "UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1 \
             RETURNING {TOKEN_COLUMNS}"
        ));
        let row = sqlx::query(sql)
            .bind(id.as_str())
            .bind(now.millis())
            .fetch_optional(self.pool())
            .await
            .op("revoke API token")?;
        row.as_ref()
            .map(token_from)
            .transpose()?
            .ok_or_else(|| not_found(Kind::Token, id))
    }

    /// Gives a user a role in an org (`project_id` `None`) or in one of its projects. A user
    /// has at most one membership per org and per project.
    pub async fn add_membership(
        &self,
        user_id: &UserId,
        org_id: &OrgId,
        project_id: Option<&ProjectId>,
        role: Role,
        now: Timestamp,
    ) -> StoreResult<Membership> {
        let id = MembershipId::from_counter(self.allocate_ids(1).await?);
        let scope = match project_id {
            Some(p) => format!("project {p}"),
            None => format!("org {org_id}"),
        };
        sqlx::query(
            "INSERT INTO memberships (id, user_id, org_id, project_id, role, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(id.as_str())
        .bind(user_id.as_str())
        .bind(org_id.as_str())
        .bind(project_id.map(ProjectId::as_str))
        .bind(role.as_str())
        .bind(now.millis())
        .execute(self.pool())
        .await
        .map_err(|e| {
            classify_write(
                e,
                "add membership",
                Kind::Membership,
                |_| (user_id.to_string(), format!(" in {scope}")),
                || format!("user {user_id} or {scope} of org {org_id}"),
            )
        })?;
        Ok(Membership {
            id,
            user_id: user_id.clone(),
            org_id: org_id.clone(),
            project_id: project_id.cloned(),
            role,
            created_at: now,
        })
    }

    /// A user's memberships, by id.
    pub async fn list_memberships_of_user(&self, user_id: &UserId) -> StoreResult<Vec<Membership>> {
        sqlx::query(
            "SELECT id, user_id, org_id, project_id, role, created_at FROM memberships \
             WHERE user_id = $1 ORDER BY id",
        )
        .bind(user_id.as_str())
        .fetch_all(self.pool())
        .await
        .op("list memberships of user")?
        .iter()
        .map(membership_from)
        .collect()
    }

    /// An org's memberships (org-wide and per project), by id.
    pub async fn list_memberships_of_org(&self, org_id: &OrgId) -> StoreResult<Vec<Membership>> {
        sqlx::query(
            "SELECT id, user_id, org_id, project_id, role, created_at FROM memberships \
             WHERE org_id = $1 ORDER BY id",
        )
        .bind(org_id.as_str())
        .fetch_all(self.pool())
        .await
        .op("list memberships of org")?
        .iter()
        .map(membership_from)
        .collect()
    }

    /// Removes a membership.
    pub async fn remove_membership(&self, id: &MembershipId) -> StoreResult<()> {
        let done = sqlx::query("DELETE FROM memberships WHERE id = $1")
            .bind(id.as_str())
            .execute(self.pool())
            .await
            .op("remove membership")?;
        if done.rows_affected() == 0 {
            return Err(not_found(Kind::Membership, id));
        }
        Ok(())
    }

    /// Deletes a project that holds no pool and no provider, with its memberships and its
    /// secrets; tokens that defaulted to it default to nothing. Its events and usage lines stay (history
    /// outlives what it names).
    pub async fn delete_project(&self, id: &ProjectId) -> StoreResult<()> {
        self.delete_when_empty(
            "delete project",
            Kind::Project,
            id.as_str(),
            &[
                (
                    "SELECT COUNT(*) FROM pools WHERE project_id = $1",
                    "pool(s)",
                ),
                (
                    "SELECT COUNT(*) FROM providers WHERE project_id = $1",
                    "provider(s)",
                ),
                ("SELECT COUNT(*) FROM apps WHERE project_id = $1", "app(s)"),
            ],
            &[
                "DELETE FROM memberships WHERE project_id = $1",
                "DELETE FROM secrets WHERE project_id = $1",
                "UPDATE api_tokens SET default_project_id = NULL WHERE default_project_id = $1",
            ],
            "DELETE FROM projects WHERE id = $1",
        )
        .await
    }

    /// Deletes an org that holds no project and no app tag, with its memberships and the
    /// packages left untagged.
    pub async fn delete_org(&self, id: &OrgId) -> StoreResult<()> {
        self.delete_when_empty(
            "delete org",
            Kind::Org,
            id.as_str(),
            &[
                (
                    "SELECT COUNT(*) FROM projects WHERE org_id = $1",
                    "project(s)",
                ),
                (
                    "SELECT COUNT(*) FROM app_tags WHERE org_id = $1",
                    "app tag(s)",
                ),
            ],
            &[
                "DELETE FROM memberships WHERE org_id = $1",
                "DELETE FROM app_blob_uploads WHERE org_id = $1",
                "DELETE FROM image_tags WHERE org_id = $1",
                "DELETE FROM image_references WHERE org_id = $1",
                "DELETE FROM image_manifests WHERE org_id = $1",
                "DELETE FROM app_packages WHERE org_id = $1",
            ],
            "DELETE FROM orgs WHERE id = $1",
        )
        .await
    }

    /// Deletes a user with their memberships and tokens (so every token of theirs stops
    /// working at once).
    pub async fn delete_user(&self, id: &UserId) -> StoreResult<()> {
        self.delete_when_empty(
            "delete user",
            Kind::User,
            id.as_str(),
            &[],
            &[
                "DELETE FROM memberships WHERE user_id = $1",
                "DELETE FROM web_sessions WHERE user_id = $1",
                "DELETE FROM api_tokens WHERE user_id = $1",
            ],
            "DELETE FROM users WHERE id = $1",
        )
        .await
    }

    /// In one transaction: refuses when a `holders` count (of what still refers to row
    /// `id`, named by its second part) is not zero, runs `related` (clearing what hangs on
    /// the row), then `delete`; [`StoreError::NotFound`] when there is no such row. Every
    /// statement takes `id` as `$1`.
    async fn delete_when_empty(
        &self,
        operation: &'static str,
        kind: Kind,
        id: &str,
        holders: &[(&'static str, &str)],
        related: &[&'static str],
        delete: &'static str,
    ) -> StoreResult<()> {
        let mut tx = self.begin(operation).await?;
        let mut held = Vec::new();
        for (count, what) in holders {
            let n: i64 = sqlx::query_scalar(*count)
                .bind(id)
                .fetch_one(&mut *tx)
                .await
                .op(operation)?;
            if n > 0 {
                held.push(format!("{n} {what}"));
            }
        }
        if !held.is_empty() {
            return Err(StoreError::Invalid {
                kind,
                id: id.to_string(),
                reason: format!("it still holds {}", held.join(" and ")),
            });
        }
        for sql in related {
            sqlx::query(*sql)
                .bind(id)
                .execute(&mut *tx)
                .await
                .op(operation)?;
        }
        let done = sqlx::query(delete)
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(|e| {
                classify_write(
                    e,
                    operation,
                    kind,
                    |_| (id.to_string(), String::new()),
                    || format!("{kind} {id}"),
                )
            })?;
        if done.rows_affected() == 0 {
            return Err(not_found(kind, id));
        }
        tx.commit().await.op(operation)
    }
}
