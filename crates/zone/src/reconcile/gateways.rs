//! Site gateways: for a provider that may run them (a zone-scoped provider of org `sys`,
//! [`Provider::may_run_site_gateways`]) and whose catalog says its sites need them (the
//! partner), system pool `sys/sys/gw-<provider id>-<site>` is kept at one gateway while the
//! site has a tenant node of that provider, and deleted once the last one has ended. The
//! naming and recognising rules live in [`orc_zone_model::gateway`]: a pool is a gateway pool
//! only when its name carries the id of the provider it is on, so no provider, whatever it
//! names itself or its sites, gets a gateway pool of another's.
//!
//! A tenant node counts from `deploying` (its site is known) until it has `ended`, so a
//! site's gateway outlives every node that may still use it. Growing a gateway pool needs
//! the provider's catalog (a disconnected provider grows nothing); shrinking does not.
//! Gateway nodes are quoted pinned to their site, with purpose `gateway`, and are never
//! billed (see `pricing::is_gateway`).

use std::collections::{BTreeMap, BTreeSet};

use orc_common::{Architecture, ClassId, OsId, Shape};

use crate::backend::{Backends, NodeBackend};
use crate::model::{NewPool, PoolSpec, Provider, ProviderId, Timestamp, sys_project_id};
use crate::store::{Store, StoreError, StoreResult};
use orc_zone_model::gateway::{GATEWAY_OS, gateway_pool_name, gateway_pool_site};

/// What one gateway pass changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GatewayChanges {
    /// Gateway pools created or grown to one, by site.
    pub opened: Vec<String>,
    /// Gateway pools shrunk to zero, by site.
    pub closed: Vec<String>,
}

fn gateway_spec(provider: &ProviderId, class: &ClassId) -> PoolSpec {
    PoolSpec {
        provider_id: provider.clone(),
        shape: Shape {
            vcpus: 1,
            memory_gib: 1,
            arch: Architecture::X86_64,
            disks_gib: Vec::new(),
        },
        region_class: class.clone(),
        os: OsId::new(GATEWAY_OS).expect("the gateway OS id is not empty"),
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
    let sys_pools = store.list_pools(&sys_project_id()).await?;
    let taken: BTreeSet<String> = sys_pools.iter().map(|p| p.name.to_string()).collect();
    let existing: BTreeMap<String, crate::model::Pool> = sys_pools
        .into_iter()
        .filter(|p| gateway_pool_site(p).is_some())
        .map(|p| (p.name.to_string(), p))
        .collect();
    let mut changes = GatewayChanges::default();

    for site in &in_use {
        let Some(provider) = providers.get(&site.provider_id) else {
            continue;
        };
        if !provider.may_run_site_gateways() || !backends.site_gateways(provider) {
            continue;
        }
        let Some(name) = gateway_pool_name(&provider.id, &site.site) else {
            tracing::warn!(site = %site.site, provider = %provider.name, "The site's name makes no gateway pool name (gw-<provider id>-<site>, 63 characters at most); the site gets no gateway");
            continue;
        };
        match existing.get(name.as_str()) {
            Some(pool) if pool.deleting || pool.size >= 1 => {}
            Some(pool) => {
                store.resize_pool(&pool.id, 1, now).await?;
                changes.opened.push(site.site.clone());
            }
            None if taken.contains(name.as_str()) => {
                tracing::warn!(site = %site.site, provider = %provider.name, pool = %name, "A sys/sys pool that is no gateway holds the gateway pool's name; the site gets no gateway");
            }
            None => {
                let Ok(class) = ClassId::new(site.class.as_str()) else {
                    tracing::warn!(site = %site.site, provider = %provider.name, "The site names no region class; the site gets no gateway");
                    continue;
                };
                let new = NewPool {
                    project_id: sys_project_id(),
                    name,
                    size: 1,
                    spec: gateway_spec(&provider.id, &class),
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

    for pool in existing.values() {
        let Some(site) = gateway_pool_site(pool) else {
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
