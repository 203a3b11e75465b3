//! Reverse DNS of the partner's addresses under `ptr_domain`: `gw-<site>.<ptr_domain>` for
//! each site's stable address and `pool-<pool id as hostname label>-<site>.<ptr_domain>`
//! for each pool address.
//!
//! Each inventory pass compares every address's name with what its cloud reports and sets
//! only those that differ, so a restart, a failover or a replaced gateway is put right on
//! the next pass. Some clouds report the names in the address listings the pass already
//! made; others report them per instance, so the pass reads each instance that holds one of
//! the addresses once, and there an address attached to no instance has no reverse DNS to
//! set until its gateway holds it.
//!
//! Invariants: a name is set only when it differs (case and a trailing dot aside); an
//! address whose name could not be read or set is remembered and tried again next pass; the
//! failure line is logged when the set of failing addresses changes, not every pass.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use orc_cloud::CloudError;
use sha2::{Digest, Sha256};

use super::{InventoryState, PassMemory, SiteAddress};
use crate::clients::CloudClients;
use crate::naming::ResourceKind;

/// The longest DNS label.
const MAX_LABEL: usize = 63;

/// The reverse DNS name of `site`'s stable address.
pub(crate) fn gateway_name(site: &str, domain: &str) -> String {
    format!("gw-{site}.{domain}")
}

/// The reverse DNS name of `pool`'s address at `site`.
pub(crate) fn pool_name(pool: &str, site: &str, domain: &str) -> String {
    let room = MAX_LABEL.saturating_sub("pool-".len() + 1 + site.len());
    format!("pool-{}-{site}.{domain}", host_label(pool, room))
}

/// `text` as a hostname label of at most `room` characters: lower case, every run of
/// characters other than letters and digits as one `-`, no `-` at either end. Text that does
/// not fit is cut and ends in 8 hex digits of its SHA-256, so two long ids stay apart.
pub(crate) fn host_label(text: &str, room: usize) -> String {
    let mut label = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            label.push(c.to_ascii_lowercase());
        } else if !label.is_empty() && !label.ends_with('-') {
            label.push('-');
        }
    }
    while label.ends_with('-') {
        label.pop();
    }
    if !label.is_empty() && label.len() <= room {
        return label;
    }
    let digest = Sha256::digest(text.as_bytes());
    let hash: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    let keep = room.saturating_sub(hash.len() + 1);
    let mut head: String = label.chars().take(keep).collect();
    while head.ends_with('-') {
        head.pop();
    }
    if head.is_empty() {
        hash.chars().take(room.max(1)).collect()
    } else {
        format!("{head}-{hash}")
    }
}

/// The site a gateway name `gw-<site>.<domain>` stands for.
pub(crate) fn site_of_gateway_name(name: &str, domain: &str) -> Option<String> {
    let name = normal(name);
    let host = name.strip_suffix(&format!(".{}", normal(domain)))?;
    let site = host.strip_prefix("gw-")?;
    (!site.is_empty() && !site.contains('.')).then(|| site.to_string())
}

/// A name without case or a trailing dot.
fn normal(name: &str) -> String {
    name.trim().trim_end_matches('.').to_ascii_lowercase()
}

/// The name `address` should have, when it can be named.
pub(crate) fn wanted(address: &SiteAddress, domain: &str) -> Option<String> {
    match address.kind {
        ResourceKind::Stable => Some(gateway_name(&address.site, domain)),
        ResourceKind::PoolAddress => {
            let pool = address.pool.as_deref().or(address.pool_mark.as_deref())?;
            Some(pool_name(pool, &address.site, domain))
        }
        ResourceKind::Network | ResourceKind::SealedKey | ResourceKind::Disk => None,
    }
}

/// Reads the names the address listings did not carry (clouds that report them per
/// holding instance): one request per holding instance. Addresses whose names could not be
/// read are returned with the cloud's answer.
pub(crate) async fn read_names(
    clients: &CloudClients,
    addresses: &mut [SiteAddress],
) -> BTreeMap<Ipv4Addr, String> {
    let mut failed = BTreeMap::new();
    for cloud in clients.keyed() {
        if let Some(ops) = clients.get(cloud) {
            failed.extend(ops.read_reverse_dns(addresses).await);
        }
    }
    failed
}

/// Sets `name` on `address` in its cloud.
async fn set(clients: &CloudClients, address: &SiteAddress, name: &str) -> Result<(), CloudError> {
    match clients.get(address.cloud) {
        Some(ops) => ops.set_reverse_dns(address, name).await,
        None => Ok(()),
    }
}

/// Compares every address's reverse DNS with the wanted name and sets those that differ;
/// remembers and logs the ones that could not be read or set.
/// `unread` holds the addresses whose names [`read_names`] could not read.
pub(crate) async fn converge(
    clients: &CloudClients,
    memory: &InventoryState,
    domain: &str,
    addresses: &[SiteAddress],
    unread: &BTreeMap<Ipv4Addr, String>,
) {
    let mut failed: BTreeMap<Ipv4Addr, String> = BTreeMap::new();
    for address in addresses.iter() {
        let Some(name) = wanted(address, domain) else {
            continue;
        };
        if let Some(e) = unread.get(&address.ipv4) {
            tracing::debug!(ip = %address.ipv4, site = %address.site, error = %e, "the address's reverse DNS could not be read");
            failed.insert(address.ipv4, name);
            continue;
        }
        if address.ptr.is_none() {
            tracing::debug!(ip = %address.ipv4, site = %address.site, "the address is attached to no instance yet; its reverse DNS waits for its gateway");
            continue;
        }
        if address
            .ptr
            .as_deref()
            .is_some_and(|ptr| normal(ptr) == normal(&name))
        {
            continue;
        }
        match set(clients, address, &name).await {
            Ok(()) => {
                tracing::info!(ip = %address.ipv4, site = %address.site, name = %name, "The address's reverse DNS is set");
            }
            Err(e) => {
                tracing::debug!(ip = %address.ipv4, site = %address.site, error = %e, "the cloud's answer to setting reverse DNS");
                failed.insert(address.ipv4, name);
            }
        }
    }
    memory.with(|memory| remember_failures(failed, memory));
}

/// Keeps the addresses still to be set, logging when that set changes.
fn remember_failures(failed: BTreeMap<Ipv4Addr, String>, memory: &mut PassMemory) {
    let before: BTreeSet<Ipv4Addr> = memory.rdns_retry.keys().copied().collect();
    let now: BTreeSet<Ipv4Addr> = failed.keys().copied().collect();
    if !now.is_empty() && now != before {
        let ips: Vec<String> = now.iter().map(Ipv4Addr::to_string).collect();
        tracing::warn!(
            addresses = %ips.join(","),
            "Some addresses' reverse DNS could not be set yet; every inventory pass tries them again"
        );
    } else if now.is_empty() && !before.is_empty() {
        tracing::info!("Every address's reverse DNS is set now");
    }
    memory.rdns_retry = failed;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_documented_forms() {
        assert_eq!(
            gateway_name("eu-central-a", "cloud.example.com"),
            "gw-eu-central-a.cloud.example.com"
        );
        assert_eq!(
            pool_name("p-d000000000002", "eu-central-a", "cloud.example.com"),
            "pool-p-d000000000002-eu-central-a.cloud.example.com"
        );
        assert_eq!(
            pool_name("Acme/Web/api_v2", "us-east-b", "cloud.example.com"),
            "pool-acme-web-api-v2-us-east-b.cloud.example.com"
        );
    }

    #[test]
    fn long_pool_ids_fit_one_label_and_stay_apart() {
        let site = "a".repeat(40);
        let a = pool_name(
            &format!("org/project/{}", "x".repeat(60)),
            &site,
            "c.example",
        );
        let b = pool_name(
            &format!("org/project/{}y", "x".repeat(60)),
            &site,
            "c.example",
        );
        let label = a.split('.').next().unwrap();
        assert!(label.len() <= 63, "{label}");
        assert!(label.starts_with("pool-org-"), "{label}");
        assert_ne!(a, b);
        assert_eq!(host_label("///", 10).len(), 8, "only punctuation: the hash");
        assert!(host_label("abc", 2).len() <= 2);
    }

    #[test]
    fn gateway_names_read_back_to_their_site() {
        let d = "cloud.example.com";
        assert_eq!(
            site_of_gateway_name("GW-eu-central-a.cloud.example.com.", d).as_deref(),
            Some("eu-central-a")
        );
        assert_eq!(site_of_gateway_name("gw-.cloud.example.com", d), None);
        assert_eq!(site_of_gateway_name("gw-a.b.cloud.example.com", d), None);
        assert_eq!(site_of_gateway_name("pool-x-a.cloud.example.com", d), None);
        assert_eq!(site_of_gateway_name("gw-a.other.example.com", d), None);
        assert_eq!(
            site_of_gateway_name("static.10.113.0.203.clients.your-server.de", d),
            None
        );
    }
}
