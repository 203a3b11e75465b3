//! Sites as the zone sees them: where tenant nodes are (so site gateways follow them), and
//! the addresses of public pools (so their quotes are pinned to one site).
//!
//! A public pool's address is what its provider last reported in a complete inventory; a
//! report replaces every address of that provider's pools at once, so an address the
//! provider released disappears with the next report.

use std::collections::{BTreeMap, BTreeSet};

use super::error::OperationExt;
use super::rows::{opt_text, parsed, text, time, uint64};
use super::{Store, StoreError, StoreResult};
use orc_zone_model::{PoolId, ProviderId, Timestamp, sys_org_id};

/// A site with at least one tenant node of a provider, and a class of a pool there.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SiteInUse {
    pub provider_id: ProviderId,
    pub site: String,
    /// The smallest region class of the tenant pools with nodes at the site.
    pub class: String,
    /// How many tenant nodes are there.
    pub nodes: u64,
}

/// A site its provider reported open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderSite {
    pub site: String,
    pub public_ipv4: Option<String>,
    pub private_prefix: Option<String>,
    /// When the report that listed it arrived.
    pub updated_at: Timestamp,
}

/// A public pool's address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolAddress {
    pub site: String,
    pub ipv4: String,
}

fn pool_id(raw: String) -> StoreResult<PoolId> {
    raw.parse::<PoolId>().map_err(|e| StoreError::Corrupt {
        column: "pool_id".to_string(),
        reason: e.to_string(),
    })
}

impl Store {
    /// Every (provider, site) with a tenant node that exists or may exist at the site:
    /// deploying, running, lost or destroying. Gateway pools (`gw-*` in org `sys`) do not
    /// count. By provider, then site.
    pub async fn sites_in_use(&self) -> StoreResult<Vec<SiteInUse>> {
        let rows = sqlx::query(
            "SELECT p.provider_id AS provider_id, n.site AS site, MIN(p.region_class) AS class, \
             COUNT(*) AS nodes \
             FROM nodes n JOIN pools p ON p.id = n.pool_id \
             JOIN projects pr ON pr.id = p.project_id \
             WHERE n.site IS NOT NULL \
             AND n.state IN ('deploying', 'running', 'lost', 'destroying') \
             AND NOT (pr.org_id = $1 AND p.name LIKE 'gw-%') \
             GROUP BY p.provider_id, n.site ORDER BY p.provider_id, n.site",
        )
        .bind(sys_org_id().as_str())
        .fetch_all(self.pool())
        .await
        .op("read sites in use")?;
        rows.iter()
            .map(|row| {
                Ok(SiteInUse {
                    provider_id: parsed(row, "provider_id")?,
                    site: text(row, "site")?,
                    class: text(row, "class")?,
                    nodes: uint64(row, "nodes")?,
                })
            })
            .collect()
    }

    /// The site of a pool's oldest live node that has one (deploying, running, lost or
    /// destroying).
    pub async fn oldest_member_site(&self, pool: &PoolId) -> StoreResult<Option<String>> {
        let site: Option<String> = sqlx::query_scalar(
            "SELECT site FROM nodes WHERE pool_id = $1 AND site IS NOT NULL \
             AND state IN ('deploying', 'running', 'lost', 'destroying') \
             ORDER BY created_at, id LIMIT 1",
        )
        .bind(pool.as_str())
        .fetch_optional(self.pool())
        .await
        .op("find oldest member site")?;
        Ok(site)
    }

    /// A public pool's address, as its provider last reported it.
    pub async fn pool_address(&self, pool: &PoolId) -> StoreResult<Option<PoolAddress>> {
        let row = sqlx::query("SELECT site, ipv4 FROM pool_addresses WHERE pool_id = $1")
            .bind(pool.as_str())
            .fetch_optional(self.pool())
            .await
            .op("read pool address")?;
        row.map(|row| {
            Ok(PoolAddress {
                site: text(&row, "site")?,
                ipv4: text(&row, "ipv4")?,
            })
        })
        .transpose()
    }

    /// Replaces the addresses of `provider`'s pools with `addresses` (from one complete
    /// inventory), in one transaction. Returns how many rows changed.
    pub async fn replace_pool_addresses(
        &self,
        provider: &ProviderId,
        addresses: &BTreeMap<PoolId, PoolAddress>,
        now: Timestamp,
    ) -> StoreResult<usize> {
        let mut tx = self.begin("replace pool addresses").await?;
        let current: Vec<(String, String, String)> = sqlx::query_as(
            "SELECT a.pool_id, a.site, a.ipv4 FROM pool_addresses a \
             JOIN pools p ON p.id = a.pool_id WHERE p.provider_id = $1",
        )
        .bind(provider.as_str())
        .fetch_all(&mut *tx)
        .await
        .op("replace pool addresses")?;
        let mut current_by_pool = BTreeMap::new();
        for (pool, site, ipv4) in current {
            current_by_pool.insert(pool_id(pool)?, PoolAddress { site, ipv4 });
        }
        let mut changed = 0;
        for pool in current_by_pool.keys() {
            if !addresses.contains_key(pool) {
                sqlx::query("DELETE FROM pool_addresses WHERE pool_id = $1")
                    .bind(pool.as_str())
                    .execute(&mut *tx)
                    .await
                    .op("replace pool addresses")?;
                changed += 1;
            }
        }
        for (pool, address) in addresses {
            if current_by_pool.get(pool) == Some(address) {
                continue;
            }
            sqlx::query(
                "INSERT INTO pool_addresses (pool_id, site, ipv4, updated_at) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT (pool_id) DO UPDATE SET \
                 site = excluded.site, ipv4 = excluded.ipv4, updated_at = excluded.updated_at",
            )
            .bind(pool.as_str())
            .bind(address.site.as_str())
            .bind(address.ipv4.as_str())
            .bind(now.millis())
            .execute(&mut *tx)
            .await
            .op("replace pool addresses")?;
            changed += 1;
        }
        tx.commit().await.op("replace pool addresses")?;
        Ok(changed)
    }

    /// The sites `provider` last reported, by name.
    pub async fn provider_sites(&self, provider: &ProviderId) -> StoreResult<Vec<ProviderSite>> {
        let rows = sqlx::query(
            "SELECT site, public_ipv4, private_prefix, updated_at FROM provider_sites \
             WHERE provider_id = $1 ORDER BY site",
        )
        .bind(provider.as_str())
        .fetch_all(self.pool())
        .await
        .op("read provider sites")?;
        rows.iter()
            .map(|row| {
                Ok(ProviderSite {
                    site: text(row, "site")?,
                    public_ipv4: opt_text(row, "public_ipv4")?,
                    private_prefix: opt_text(row, "private_prefix")?,
                    updated_at: time(row, "updated_at")?,
                })
            })
            .collect()
    }

    /// Replaces the sites of `provider` with those of one complete report, in one
    /// transaction. Returns whether a site, its stable address or its prefix changed (the
    /// time of the report always does).
    pub async fn replace_provider_sites(
        &self,
        provider: &ProviderId,
        sites: &[ProviderSite],
    ) -> StoreResult<bool> {
        const OP: &str = "replace provider sites";
        let mut tx = self.begin(OP).await?;
        type Row = (String, Option<String>, Option<String>);
        let current: BTreeSet<Row> = sqlx::query_as(
            "SELECT site, public_ipv4, private_prefix FROM provider_sites WHERE provider_id = $1",
        )
        .bind(provider.as_str())
        .fetch_all(&mut *tx)
        .await
        .op(OP)?
        .into_iter()
        .collect();
        let reported: BTreeSet<Row> = sites
            .iter()
            .map(|s| {
                (
                    s.site.clone(),
                    s.public_ipv4.clone(),
                    s.private_prefix.clone(),
                )
            })
            .collect();
        sqlx::query("DELETE FROM provider_sites WHERE provider_id = $1")
            .bind(provider.as_str())
            .execute(&mut *tx)
            .await
            .op("replace provider sites")?;
        for site in sites {
            sqlx::query(
                "INSERT INTO provider_sites (provider_id, site, public_ipv4, private_prefix, \
                 updated_at) VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(provider.as_str())
            .bind(site.site.as_str())
            .bind(site.public_ipv4.clone())
            .bind(site.private_prefix.clone())
            .bind(site.updated_at.millis())
            .execute(&mut *tx)
            .await
            .op("replace provider sites")?;
        }
        tx.commit().await.op(OP)?;
        Ok(current != reported)
    }
}
