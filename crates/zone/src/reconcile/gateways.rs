//! Site gateways: for a provider whose catalog says its sites need gateways (the partner),
//! system pool `sys/sys/gw-<provider>-<site>` is kept at one gateway while the site has a
//! tenant node of that provider, and at zero once the last one has ended. The name carries
//! the provider because site names are each provider's own: two providers may both have
//! an `eu-central-a`, and each needs its gateway. Pools named `gw-<site>`, the form before
//! names carried the provider, are renamed by store migration 0005.
//!
//! A tenant node counts from `deploying` (its site is known) until it has `ended`, so a
//! site's gateway outlives every node that may still use it. Growing a gateway pool needs
//! the provider's catalog (a disconnected provider grows nothing); shrinking does not.
//! Gateway nodes are quoted pinned to their site, with purpose `gateway`, and are never
//! billed (see `pricing::is_gateway`).

use std::collections::{BTreeMap, BTreeSet};

use orc_common::{Architecture, Shape};

use crate::backend::{Backends, NodeBackend};
use crate::model::{
    Name, NewPool, PoolSpec, Provider, ProviderId, Timestamp, sys_org_id, sys_project_id,
};
use crate::pricing::is_gateway;
use crate::store::{Store, StoreError, StoreResult};

/// The OS id gateway pools ask for; the provider boots its own gateway image.
pub const GATEWAY_OS: &str = "gateway";

/// The pool name of `provider`'s gateway at `site`: `gw-<provider>-<site>`; `None` when
/// that is no pool name (longer than a name may be).
pub fn gateway_pool_name(provider: &str, site: &str) -> Option<Name> {
    format!("gw-{provider}-{site}").parse().ok()
}

/// The site of `provider`'s gateway pool `pool_name` (`gw-<provider>-<site>`).
pub fn gateway_site<'a>(pool_name: &'a str, provider: &str) -> Option<&'a str> {
    pool_name
        .strip_prefix("gw-")?
        .strip_prefix(provider)?
        .strip_prefix('-')
        .filter(|site| !site.is_empty())
}

/// What one gateway pass changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GatewayChanges {
    /// Gateway pools created or grown to one, by site.
    pub opened: Vec<String>,
    /// Gateway pools shrunk to zero, by site.
    pub closed: Vec<String>,
}

fn gateway_spec(provider: &ProviderId, class: &str) -> PoolSpec {
    PoolSpec {
        provider_id: provider.clone(),
        shape: Shape {
            vcpus: 1,
            memory_gib: 1,
            arch: Architecture::X86_64,
            disks_gib: Vec::new(),
        },
        region_class: class.to_string(),
        os: GATEWAY_OS.to_string(),
        public: false,
        endpoints: Vec::new(),
        app: None,
        placement: BTreeMap::new(),
        ssh_keys: Vec::new(),
    }
}

/// Brings every gateway pool toward one gateway per site in use.
pub async fn gateway_pass(
    store: &Store,
    backends: &Backends,
    now: Timestamp,
) -> StoreResult<GatewayChanges> {
    let in_use = store.sites_in_use().await?;
    let used: BTreeSet<(ProviderId, String)> = in_use
        .iter()
        .map(|s| (s.provider_id.clone(), s.site.clone()))
        .collect();
    let providers: BTreeMap<ProviderId, Provider> = store
        .list_providers()
        .await?
        .into_iter()
        .map(|p| (p.id.clone(), p))
        .collect();
    let existing: BTreeMap<String, crate::model::Pool> = store
        .list_pools(&sys_project_id())
        .await?
        .into_iter()
        .filter(|p| is_gateway(&sys_org_id(), p.name.as_str()))
        .map(|p| (p.name.to_string(), p))
        .collect();
    let mut changes = GatewayChanges::default();

    for site in &in_use {
        let Some(provider) = providers.get(&site.provider_id) else {
            continue;
        };
        if !backends.site_gateways(provider) {
            continue;
        }
        let Some(name) = gateway_pool_name(provider.name.as_str(), &site.site) else {
            tracing::warn!(site = %site.site, provider = %provider.name, "The site's name is too long to name a gateway pool (gw-<provider>-<site>, 63 characters at most); the site gets no gateway");
            continue;
        };
        match existing.get(name.as_str()) {
            Some(pool) if pool.spec.provider_id != provider.id => {
                tracing::warn!(site = %site.site, provider = %provider.name, pool = %pool.name, "The gateway pool's name is taken by another provider's pool; the site gets no gateway");
            }
            Some(pool) if pool.deleting || pool.size >= 1 => {}
            Some(pool) => {
                store.resize_pool(&pool.id, 1, now).await?;
                changes.opened.push(site.site.clone());
            }
            None => {
                let new = NewPool {
                    project_id: sys_project_id(),
                    name,
                    size: 1,
                    spec: gateway_spec(&provider.id, &site.class),
                };
                match store.create_pool(&new, now).await {
                    Ok(_) => changes.opened.push(site.site.clone()),
                    // Another zone process made it first.
                    Err(StoreError::Unique { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }

    for (name, pool) in &existing {
        let Some(provider) = providers.get(&pool.spec.provider_id) else {
            continue;
        };
        let Some(site) = gateway_site(name, provider.name.as_str()) else {
            continue;
        };
        if pool.deleting {
            continue;
        }
        if !used.contains(&(pool.spec.provider_id.clone(), site.to_string())) {
            // Deleted, not kept at zero, so closed sites leave the pools list: the pool
            // reconciler removes the row once its gateway has ended, and a site in use
            // again gets a new pool.
            store.mark_pool_deleting(&pool.id, now).await?;
            if pool.size > 0 {
                changes.closed.push(site.to_string());
            }
        }
    }
    for site in &changes.opened {
        tracing::info!(
            site,
            "site has a tenant node: its gateway pool is kept at one"
        );
    }
    for site in &changes.closed {
        tracing::info!(
            site,
            "site has no tenant node left: its gateway pool is deleted"
        );
    }
    Ok(changes)
}
