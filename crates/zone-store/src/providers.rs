//! Providers: registered sources of nodes, their scope and pricing strategy.
//!
//! A pricing strategy is stored as the markup's decimal text, or NULL for none; the zone
//! reads it when it admits a node and records it on the node.

use sqlx::any::AnyRow;

use super::error::OperationExt;
use super::error::classify_write;
use super::rows::{opt_text, parsed, text, time};
use super::{Kind, Store, StoreError, StoreResult};
use orc_zone_model::{
    Markup, NewProvider, PricingStrategy, ProjectId, Provider, ProviderId, ProviderScope,
    Timestamp, sys_org_id,
};

const PROVIDER_COLUMNS: &str =
    "id, project_id, org_id, name, resource_uri, scope, markup, created_at, updated_at";

fn provider_from(row: &AnyRow) -> StoreResult<Provider> {
    let pricing = match opt_text(row, "providers.markup")? {
        None => PricingStrategy::None,
        Some(raw) => {
            let corrupt = |reason: String| StoreError::Corrupt {
                column: "providers.markup".to_string(),
                reason,
            };
            let value = raw.parse().map_err(|e| corrupt(format!("{e}")))?;
            PricingStrategy::Markup(Markup::new(value).map_err(|e| corrupt(e.to_string()))?)
        }
    };
    Ok(Provider {
        id: parsed(row, "providers.id")?,
        project_id: parsed(row, "providers.project_id")?,
        org_id: parsed(row, "providers.org_id")?,
        name: parsed(row, "providers.name")?,
        resource_uri: text(row, "providers.resource_uri")?,
        scope: parsed(row, "providers.scope")?,
        pricing,
        created_at: time(row, "providers.created_at")?,
        updated_at: time(row, "providers.updated_at")?,
    })
}

fn markup_text(pricing: PricingStrategy) -> Option<String> {
    match pricing {
        PricingStrategy::None => None,
        PricingStrategy::Markup(m) => Some(m.value().to_string()),
    }
}

impl Store {
    /// Registers a provider in a project. Its name is unique within the project (and, for a
    /// project of org `sys`, within the org: bare names are the operator's), its resource URI
    /// within the zone.
    pub async fn create_provider(
        &self,
        new: &NewProvider,
        now: Timestamp,
    ) -> StoreResult<Provider> {
        let org_id = self.get_project(&new.project_id).await?.org_id;
        let operators = org_id == sys_org_id();
        let id = ProviderId::from_counter(self.allocate_ids(1).await?);
        sqlx::query(
            "INSERT INTO providers (id, project_id, org_id, name, sys_name, resource_uri, \
             scope, markup, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)",
        )
        .bind(id.as_str())
        .bind(new.project_id.as_str())
        .bind(org_id.as_str())
        .bind(new.name.as_str())
        .bind(operators.then(|| new.name.to_string()))
        .bind(new.resource_uri.as_str())
        .bind(new.scope.as_str())
        .bind(markup_text(new.pricing))
        .bind(now.millis())
        .execute(self.pool())
        .await
        .map_err(|e| {
            classify_write(
                e,
                "create provider",
                Kind::Provider,
                |field| match field {
                    "resource URI" => (new.resource_uri.clone(), String::new()),
                    _ if operators => (new.name.to_string(), " in org sys".to_string()),
                    _ => (
                        new.name.to_string(),
                        format!(" in project {}", new.project_id),
                    ),
                },
                || format!("project {}", new.project_id),
            )
        })?;
        Ok(Provider {
            id,
            project_id: new.project_id.clone(),
            org_id,
            name: new.name.clone(),
            resource_uri: new.resource_uri.clone(),
            scope: new.scope,
            pricing: new.pricing,
            created_at: now,
            updated_at: now,
        })
    }

    /// The provider with this id.
    pub async fn get_provider(&self, id: &ProviderId) -> StoreResult<Provider> {
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT {PROVIDER_COLUMNS} FROM providers WHERE id = $1"
        ));
        let row = sqlx::query(sql)
            .bind(id.as_str())
            .fetch_optional(self.pool())
            .await
            .op("read provider")?;
        row.as_ref()
            .map(provider_from)
            .transpose()?
            .ok_or_else(|| StoreError::NotFound {
                kind: Kind::Provider,
                id: id.to_string(),
            })
    }

    /// The provider offering a resource URI.
    pub async fn provider_by_resource(&self, resource_uri: &str) -> StoreResult<Provider> {
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT {PROVIDER_COLUMNS} FROM providers WHERE resource_uri = $1"
        ));
        let row = sqlx::query(sql)
            .bind(resource_uri)
            .fetch_optional(self.pool())
            .await
            .op("find provider by resource URI")?;
        row.as_ref()
            .map(provider_from)
            .transpose()?
            .ok_or_else(|| StoreError::NotFound {
                kind: Kind::Provider,
                id: resource_uri.to_string(),
            })
    }

    /// Who may attach replicas of provider `id`: `Ok(true)` when `principal` is its
    /// principal, or becomes it now because it had none; `Ok(false)` when another one has it.
    pub async fn claim_provider(&self, id: &ProviderId, principal: &str) -> StoreResult<bool> {
        sqlx::query("UPDATE providers SET served_by = $2 WHERE id = $1 AND served_by IS NULL")
            .bind(id.as_str())
            .bind(principal)
            .execute(self.pool())
            .await
            .op("claim provider")?;
        let row = sqlx::query("SELECT served_by FROM providers WHERE id = $1")
            .bind(id.as_str())
            .fetch_optional(self.pool())
            .await
            .op("read provider principal")?;
        let served_by = match row {
            Some(row) => opt_text(&row, "served_by")?,
            None => {
                return Err(StoreError::NotFound {
                    kind: Kind::Provider,
                    id: id.to_string(),
                });
            }
        };
        Ok(served_by.as_deref() == Some(principal))
    }

    /// The first provider (by creation) `principal` is the principal of, if any.
    pub async fn first_provider_served_by(&self, principal: &str) -> StoreResult<Option<Provider>> {
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT {PROVIDER_COLUMNS} FROM providers WHERE served_by = $1 \
             ORDER BY created_at, id LIMIT 1"
        ));
        sqlx::query(sql)
            .bind(principal)
            .fetch_optional(self.pool())
            .await
            .op("find the provider a principal serves")?
            .as_ref()
            .map(provider_from)
            .transpose()
    }

    /// As [`Store::claim_provider`], for a principal that may serve one provider only (an
    /// app pool's): `Ok(true)` when provider `id` is the first `principal` is the principal
    /// of, becoming it now if it had none and `principal` serves no other; `Ok(false)`
    /// otherwise.
    pub async fn claim_sole_provider(&self, id: &ProviderId, principal: &str) -> StoreResult<bool> {
        sqlx::query(
            "UPDATE providers SET served_by = $2 WHERE id = $1 AND served_by IS NULL \
             AND NOT EXISTS (SELECT 1 FROM providers other \
                 WHERE other.served_by = $2 AND other.id <> $1)",
        )
        .bind(id.as_str())
        .bind(principal)
        .execute(self.pool())
        .await
        .op("claim provider")?;
        Ok(self
            .first_provider_served_by(principal)
            .await?
            .is_some_and(|first| &first.id == id))
    }

    /// Providers a project may place pools on: its own and every zone-scoped one, by id.
    pub async fn list_providers_for(&self, project_id: &ProjectId) -> StoreResult<Vec<Provider>> {
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT {PROVIDER_COLUMNS} FROM providers WHERE project_id = $1 OR scope = 'zone' \
             ORDER BY id"
        ));
        sqlx::query(sql)
            .bind(project_id.as_str())
            .fetch_all(self.pool())
            .await
            .op("list providers for project")?
            .iter()
            .map(provider_from)
            .collect()
    }

    /// Every provider of the zone, by id.
    pub async fn list_providers(&self) -> StoreResult<Vec<Provider>> {
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT {PROVIDER_COLUMNS} FROM providers ORDER BY id"
        ));
        sqlx::query(sql)
            .fetch_all(self.pool())
            .await
            .op("list providers")?
            .iter()
            .map(provider_from)
            .collect()
    }

    /// Changes a provider's scope.
    pub async fn set_provider_scope(
        &self,
        id: &ProviderId,
        scope: ProviderScope,
        now: Timestamp,
    ) -> StoreResult<Provider> {
        let sql = sqlx::AssertSqlSafe(format!(
            "UPDATE providers SET scope = $2, updated_at = $3 WHERE id = $1 \
             RETURNING {PROVIDER_COLUMNS}"
        ));
        let row = sqlx::query(sql)
            .bind(id.as_str())
            .bind(scope.as_str())
            .bind(now.millis())
            .fetch_optional(self.pool())
            .await
            .op("set provider scope")?;
        row.as_ref()
            .map(provider_from)
            .transpose()?
            .ok_or_else(|| StoreError::NotFound {
                kind: Kind::Provider,
                id: id.to_string(),
            })
    }

    /// Changes a provider's pricing strategy. Nodes admitted before keep the markup
    /// recorded on them.
    pub async fn set_provider_pricing(
        &self,
        id: &ProviderId,
        pricing: PricingStrategy,
        now: Timestamp,
    ) -> StoreResult<Provider> {
        let sql = sqlx::AssertSqlSafe(format!(
            "UPDATE providers SET markup = $2, updated_at = $3 WHERE id = $1 \
             RETURNING {PROVIDER_COLUMNS}"
        ));
        let row = sqlx::query(sql)
            .bind(id.as_str())
            .bind(markup_text(pricing))
            .bind(now.millis())
            .fetch_optional(self.pool())
            .await
            .op("set provider pricing")?;
        row.as_ref()
            .map(provider_from)
            .transpose()?
            .ok_or_else(|| StoreError::NotFound {
                kind: Kind::Provider,
                id: id.to_string(),
            })
    }
}
