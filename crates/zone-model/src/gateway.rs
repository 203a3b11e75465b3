//! Site gateways' pools: the one rule that names them and the one that recognises them.
//!
//! A provider that may run site gateways ([`Provider::may_run_site_gateways`]) gets one
//! system pool per site in use, `sys/sys/gw-<provider id>-<site>`. The name carries the
//! provider's **id**: a provider's name is whatever its registrant chose, and two providers
//! may both have an `eu-central-a`, so only the id keeps one provider's gateway pool from
//! being taken for another's. A pool is a gateway pool only when all of it agrees: it is in
//! `sys/sys`, and its name carries the id of the provider it is on. The zone acts on nothing
//! else as a gateway (no gateway purpose in quotes, no gateway role in the mesh, no billing
//! exemption), so no pool can pass for another provider's gateway.

use crate::model::{Name, Pool, Provider, ProviderId, sys_project_id};

/// The OS id gateway pools ask for; the provider boots its own gateway image.
pub const GATEWAY_OS: &str = "gateway";

/// The pool name of `provider`'s gateway at `site`: `gw-<provider id>-<site>`; `None` when
/// that is no pool name (longer than a name may be, or a site that is no name).
pub fn gateway_pool_name(provider: &ProviderId, site: &str) -> Option<Name> {
    format!("gw-{provider}-{site}").parse().ok()
}

/// The site of `provider`'s gateway pool named `pool_name`: what follows
/// `gw-<provider id>-`.
pub fn gateway_site<'a>(pool_name: &'a str, provider: &ProviderId) -> Option<&'a str> {
    pool_name
        .strip_prefix("gw-")?
        .strip_prefix(provider.as_str())?
        .strip_prefix('-')
        .filter(|site| !site.is_empty())
}

/// The site `pool` is the gateway pool of, when it is one: in `sys/sys`, named for the id of
/// the provider it is on.
pub fn gateway_pool_site(pool: &Pool) -> Option<&str> {
    if pool.project_id != sys_project_id() {
        return None;
    }
    gateway_site(pool.name.as_str(), &pool.spec.provider_id)
}

/// Whether `pool` is the gateway pool of `provider`, which may run gateways.
pub fn is_gateway_pool_of(pool: &Pool, provider: &Provider) -> bool {
    pool.spec.provider_id == provider.id
        && provider.may_run_site_gateways()
        && gateway_pool_site(pool).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gateway_pool_name_carries_the_provider_id_and_reads_back() {
        let provider = ProviderId::from_counter(7);
        let name = gateway_pool_name(&provider, "eu-central-a").unwrap();
        assert_eq!(name.as_str(), "gw-pv-000000000007-eu-central-a");
        assert_eq!(gateway_site(name.as_str(), &provider), Some("eu-central-a"));
        let other = ProviderId::from_counter(8);
        assert_eq!(gateway_site(name.as_str(), &other), None);
        assert_eq!(gateway_site("gw-pv-000000000007-", &provider), None);
        assert_eq!(gateway_site("gw-partner-eu-central-a", &provider), None);
        assert!(gateway_pool_name(&provider, &"s".repeat(50)).is_none());
        assert!(gateway_pool_name(&provider, "Bad_Site").is_none());
    }
}
