//! Known state for tests and benches (feature `testing`): the seed catalogs, a populated
//! world of sites, nodes, gateways and pool addresses with a quote state to match, and a
//! way to put them into a provider without reading a cloud.
//!
//! Never part of the binary: the provider's own state comes only from its clouds and params.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use orc_common::Purpose;
use orc_common::ReplicaRole;
use orc_partner::admin::{
    AddressKind, CloudSeen, InventorySeen, SeenAddress, SeenInstance, SeenNetwork,
};
use orc_partner::catalog::Catalogs;
use orc_partner::ids::{Cloud, LocationId, NodeId, SiteName, Timestamp};
use orc_partner::maps::Site;
use orc_partner::params::Config;
use orc_partner::seed;
use orc_partner::state::{CloudUsage, LiveSite, QuoteState, Reservation};
use rust_decimal::Decimal;

use crate::naming;
use crate::provider::PartnerProvider;

/// The emulators' seed catalogs of both clouds, read at `at`.
pub fn seed_catalogs(at: Timestamp) -> Catalogs {
    let mut catalogs = Catalogs::new();
    let vultr = seed::vultr(include_str!("../../emu/seed/vultr-catalog.json"), at)
        .expect("the Vultr seed reads");
    let hetzner = seed::hetzner(
        include_str!("../../emu/seed/hetzner-cloud-catalog.json"),
        at,
    )
    .expect("the Hetzner seed reads");
    catalogs.replace(vultr.snapshot);
    catalogs.replace(hetzner.snapshot);
    catalogs
}

/// What a test puts into a provider.
#[derive(Debug, Clone)]
pub struct TestState {
    /// `None`: no role yet.
    pub role: Option<ReplicaRole>,
    pub catalogs: Catalogs,
    pub quotes: QuoteState,
    pub seen: InventorySeen,
    /// Clouds whose addresses the last pass could not list.
    pub unlisted: BTreeSet<Cloud>,
}

impl PartnerProvider {
    /// Puts `state` into this replica as if it had read its clouds: the role (without the
    /// work a promotion starts), the catalogs, the quote state and what the passes saw.
    pub fn install_for_tests(&self, state: TestState) {
        let shared = &self.shared;
        match state.role {
            Some(ReplicaRole::Serving) => {
                shared.role.serve();
            }
            Some(ReplicaRole::Standby) => {
                shared.role.stand_by();
            }
            None => {}
        }
        shared.catalogs.install(state.catalogs);
        shared.quotes.with(|quotes| *quotes = state.quotes);
        shared.inventory.record(|seen| *seen = state.seen);
        shared.inventory.set_unlisted(state.unlisted);
    }
}

/// The size of a world.
#[derive(Debug, Clone, Copy)]
pub struct WorldSize {
    /// Open sites, taken in region-map order among the keyed, enabled clouds' sites.
    pub sites: usize,
    /// Tenant nodes, spread over the sites in turn.
    pub nodes: usize,
    /// Public pools, each holding one address at a site.
    pub pools: usize,
    /// Add two live sites out of step with the map (one remapped, one at a location no name
    /// maps to), a cooldown, a reservation and a gateway on an older shape.
    pub troubles: bool,
}

/// A populated world and the quote state that goes with it.
#[derive(Debug, Clone)]
pub struct World {
    pub quotes: QuoteState,
    pub seen: InventorySeen,
}

fn site_list(config: &Config, size: &WorldSize) -> Vec<Site> {
    config
        .regions
        .sites()
        .map(|(_, site)| site.clone())
        .filter(|site| {
            config
                .cloud(site.cloud)
                .is_some_and(|c| c.is_keyed() && c.enabled)
        })
        .take(size.sites)
        .collect()
}

fn instance_ref(cloud: Cloud, n: usize) -> String {
    match cloud {
        Cloud::Hetzner => format!("hetzner:{}", 40_000 + n),
        Cloud::Vultr => format!("vultr:7f3a{n:04x}-0c1d-4e2f-9a8b-5c6d7e8f9a0b"),
    }
}

fn v4(net: [u8; 3], n: usize) -> Ipv4Addr {
    Ipv4Addr::new(
        net[0],
        net[1],
        net[2],
        u8::try_from(n % 250 + 2).unwrap_or(2),
    )
}

/// A world over `config`'s sites, seen at `at`, deterministic for equal inputs.
pub fn world(config: &Config, at: Timestamp, size: &WorldSize) -> World {
    let sites = site_list(config, size);
    let mut clouds: std::collections::BTreeMap<Cloud, CloudSeen> = config
        .clouds
        .values()
        .filter(|c| c.is_keyed())
        .map(|c| {
            (
                c.cloud,
                CloudSeen {
                    listed_at: at,
                    instances: Vec::new(),
                    addresses: Vec::new(),
                    networks: Vec::new(),
                },
            )
        })
        .collect();
    let mut quotes = QuoteState::new();
    let mut usage: std::collections::BTreeMap<Cloud, CloudUsage> = Default::default();
    let node_usd = Decimal::new(595, 2);
    let gateway_usd = Decimal::new(476, 2);
    let mut serial = 0;
    for (i, site) in sites.iter().enumerate() {
        let Some(seen) = clouds.get_mut(&site.cloud) else {
            continue;
        };
        let generation = if size.troubles && i == 0 {
            "g0000000000".to_string()
        } else {
            naming::gateway_generation(config, site.cloud)
        };
        serial += 1;
        seen.instances.push(SeenInstance {
            node_id: format!("gw-{}", site.name),
            instance_ref: instance_ref(site.cloud, serial),
            site: site.name.to_string(),
            location: site.location.to_string(),
            purpose: Purpose::Gateway,
            state: "running".to_string(),
            pool: Some(format!("sys/sys/gw-{}", site.name)),
            gateway_generation: Some(generation),
            usd_monthly: Some(gateway_usd),
        });
        seen.addresses.push(SeenAddress {
            kind: AddressKind::Stable,
            site: site.name.to_string(),
            location: site.location.to_string(),
            ipv4: v4([192, 0, 2], i),
            pool: None,
            attached_to: Some(instance_ref(site.cloud, serial)),
            closed: false,
        });
        seen.networks.push(SeenNetwork {
            site: site.name.to_string(),
            prefix: format!("10.128.{i}.0/24"),
        });
        let used = usage.entry(site.cloud).or_default();
        used.monthly_spend_usd += gateway_usd;
        quotes.set_live(
            site.name.clone(),
            LiveSite {
                cloud: site.cloud,
                location: site.location.clone(),
            },
        );
    }
    for n in 0..size.nodes {
        let Some(site) = sites.get(n % sites.len().max(1)) else {
            break;
        };
        let Some(seen) = clouds.get_mut(&site.cloud) else {
            continue;
        };
        serial += 1;
        let pool = (size.pools > 0).then(|| format!("acme/web/pool-{:02}", n % size.pools));
        seen.instances.push(SeenInstance {
            node_id: format!("n-{n:04}"),
            instance_ref: instance_ref(site.cloud, serial),
            site: site.name.to_string(),
            location: site.location.to_string(),
            purpose: Purpose::Tenant,
            state: if n % 17 == 3 {
                "provisioning"
            } else {
                "running"
            }
            .to_string(),
            pool,
            gateway_generation: None,
            usd_monthly: Some(node_usd),
        });
        let used = usage.entry(site.cloud).or_default();
        used.tenant_nodes += 1;
        used.monthly_spend_usd += node_usd;
    }
    for p in 0..size.pools {
        let Some(site) = sites.get(p % sites.len().max(1)) else {
            break;
        };
        let gateway = clouds.get(&site.cloud).and_then(|seen| {
            seen.instances
                .iter()
                .find(|i| i.purpose == Purpose::Gateway && i.site == site.name.as_str())
                .map(|i| i.instance_ref.clone())
        });
        let Some(seen) = clouds.get_mut(&site.cloud) else {
            continue;
        };
        seen.addresses.push(SeenAddress {
            kind: AddressKind::Pool,
            site: site.name.to_string(),
            location: site.location.to_string(),
            ipv4: v4([203, 0, 113], p),
            pool: Some(format!("acme/web/pool-{p:02}")),
            attached_to: gateway,
            closed: false,
        });
    }
    // A retired cloud with no node left: what it left behind.
    for cc in config
        .clouds
        .values()
        .filter(|c| c.is_keyed() && !c.enabled)
    {
        let Some(seen) = clouds.get_mut(&cc.cloud) else {
            continue;
        };
        let left: Vec<Site> = config
            .regions
            .sites()
            .map(|(_, s)| s.clone())
            .filter(|s| s.cloud == cc.cloud)
            .take(2)
            .collect();
        for (i, site) in left.iter().enumerate() {
            seen.addresses.push(SeenAddress {
                kind: AddressKind::Stable,
                site: site.name.to_string(),
                location: site.location.to_string(),
                ipv4: v4([198, 51, 100], i),
                pool: None,
                attached_to: None,
                closed: true,
            });
            seen.networks.push(SeenNetwork {
                site: site.name.to_string(),
                prefix: format!("10.128.{}.0/24", 100 + i),
            });
        }
    }
    for (cloud, used) in usage {
        quotes.count_done(cloud, used);
    }
    if size.troubles {
        if let Some(site) = sites.get(1) {
            quotes.cool_down(site.name.clone(), at.plus_millis(-120_000));
        }
        if let (Some(site), Ok(node)) = (sites.first(), NodeId::new("n-reserved")) {
            quotes.reserve(
                node,
                Reservation {
                    cloud: site.cloud,
                    site: site.name.clone(),
                    purpose: Purpose::Tenant,
                    usd_monthly: Some(node_usd),
                    expires_at: at.plus_millis(240_000),
                },
            );
        }
        let out_of_step = [
            ("eu-central-c", Cloud::Vultr, "ams"),
            ("old-site", Cloud::Vultr, "lhr"),
        ];
        for (name, cloud, location) in out_of_step {
            if let (Ok(site), Ok(location)) = (SiteName::new(name), LocationId::new(location)) {
                quotes.set_live(site, LiveSite { cloud, location });
            }
        }
    }
    let mut seen = InventorySeen {
        last_pass: Some(at),
        ..InventorySeen::default()
    };
    for (cloud, one) in clouds {
        seen.listed(cloud, one);
    }
    World { quotes, seen }
}
