//! The site guard: where each site name is live, and which live sites the region map now
//! puts somewhere else.
//!
//! A site name is live where the partner's instances carrying its site mark run, and where
//! its stable address is held (the address's site mark, or with `ptr_domain` its reverse
//! DNS name `gw-<site>.<ptr_domain>`). Each complete inventory pass replaces the quote
//! state's live sites ([`orc_partner::state::QuoteState::set_live`]); the quote engine leaves a site out of
//! quotes while it is live at another cloud location than the map gives it, and deploy
//! admission ([`orc_partner::admission::admit`]) fails deploys into it.
//!
//! Invariants: a site live in several places is recorded at a place that differs from the
//! map whenever one does (the guard errs towards excluding); one WARN line per remapped site
//! names the site, where it is live and where the map points, and is not repeated until the
//! site clears (an INFO line says so) or the mismatch changes.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use orc_partner::ids::{Cloud, LocationId, SiteName};
use orc_partner::params::Config;
use orc_partner::state::LiveSite;

use super::{InventoryState, Listing, PassMemory, rdns};
use crate::naming::ResourceKind;
use crate::quote_book::QuoteBook;

/// A cloud location: where a site name can be live.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Place {
    pub(crate) cloud: Cloud,
    pub(crate) location: LocationId,
}

impl Place {
    /// The place, or `None` for a location the cloud reported empty.
    fn new(cloud: Cloud, location: &str) -> Option<Place> {
        Some(Place {
            cloud,
            location: LocationId::new(location).ok()?,
        })
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.cloud, self.location)
    }
}

/// Every place each site name is live at, from the listing: instances' site marks, stable
/// addresses' site marks and, with `ptr_domain`, their reverse DNS names.
pub(crate) fn live_places(
    listing: &Listing,
    ptr_domain: Option<&str>,
) -> BTreeMap<SiteName, BTreeSet<Place>> {
    let mut live: BTreeMap<SiteName, BTreeSet<Place>> = BTreeMap::new();
    for held in &listing.held {
        let (Ok(site), Some(place)) = (
            SiteName::new(held.owned.marks.site.as_str()),
            Place::new(held.owned.cloud, &held.location),
        ) else {
            continue;
        };
        live.entry(site).or_default().insert(place);
    }
    for address in &listing.addresses {
        if address.kind != ResourceKind::Stable {
            continue;
        }
        let (Ok(site), Some(place)) = (
            SiteName::new(address.site.as_str()),
            Place::new(address.cloud, &address.location),
        ) else {
            continue;
        };
        live.entry(site).or_default().insert(place.clone());
        let named = ptr_domain.and_then(|domain| {
            address
                .ptr
                .as_deref()
                .and_then(|ptr| rdns::site_of_gateway_name(ptr, domain))
        });
        if let Some(Ok(site)) = named.map(SiteName::new) {
            live.entry(site).or_default().insert(place);
        }
    }
    live
}

/// Where the map puts `site`, when it names it.
fn mapped(config: &Config, site: &SiteName) -> Option<Place> {
    config.regions.site(site.as_str()).map(|(_, s)| Place {
        cloud: s.cloud,
        location: s.location.clone(),
    })
}

/// The place recorded for each live site: one that differs from the map when there is one.
pub(crate) fn chosen_places(
    config: &Config,
    live: &BTreeMap<SiteName, BTreeSet<Place>>,
) -> BTreeMap<SiteName, Place> {
    live.iter()
        .filter_map(|(site, places)| {
            let map = mapped(config, site);
            let place = places
                .iter()
                .find(|p| map.as_ref().is_some_and(|m| m != *p))
                .or_else(|| places.iter().next())?;
            Some((site.clone(), place.clone()))
        })
        .collect()
}

/// Live sites the map puts elsewhere: site → (where it is live, where the map points).
pub(crate) fn remapped(
    config: &Config,
    chosen: &BTreeMap<SiteName, Place>,
) -> BTreeMap<SiteName, (Place, Place)> {
    chosen
        .iter()
        .filter_map(|(site, live)| {
            let map = mapped(config, site)?;
            (map != *live).then(|| (site.clone(), (live.clone(), map)))
        })
        .collect()
}

/// Feeds a complete pass's live sites into the quote state and logs each remapped live site
/// once until it clears.
pub(crate) fn update(
    config: &Config,
    quotes: &QuoteBook,
    memory: &InventoryState,
    listing: &Listing,
) {
    let domain = config.ptr_domain.as_ref().map(|d| d.as_str());
    let chosen = chosen_places(config, &live_places(listing, domain));
    quotes.with(|state| {
        let gone: Vec<SiteName> = state
            .live_sites()
            .keys()
            .filter(|site| !chosen.contains_key(*site))
            .cloned()
            .collect();
        for site in &gone {
            state.clear_live(site);
        }
        for (site, place) in &chosen {
            state.set_live(
                site.clone(),
                LiveSite {
                    cloud: place.cloud,
                    location: place.location.clone(),
                },
            );
        }
    });
    let mismatches = remapped(config, &chosen);
    memory.with(|memory| log_remapped(&mismatches, memory));
}

/// Logs each remapped live site once until it clears or its mismatch changes.
fn log_remapped(mismatches: &BTreeMap<SiteName, (Place, Place)>, memory: &mut PassMemory) {
    for (site, (live, map)) in mismatches {
        let line = format!("{live} -> {map}");
        if memory.guard_logged.get(site) == Some(&line) {
            continue;
        }
        tracing::warn!(
            site = %site,
            live_at = %live,
            map_points_to = %map,
            "Site {site} is live at {live} but the region map now puts it at {map}; it is left out of quotes and deploys into it fail until the old mapping is put back",
        );
        memory.guard_logged.insert(site.clone(), line);
    }
    let cleared: Vec<SiteName> = memory
        .guard_logged
        .keys()
        .filter(|site| !mismatches.contains_key(*site))
        .cloned()
        .collect();
    for site in cleared {
        tracing::info!(site = %site, "Site {site} is in step with the region map again");
        memory.guard_logged.remove(&site);
    }
}

/// Live sites out of step with the region map: the pure check lives with the admin page's
/// model, which shows them.
pub use orc_partner::admin::{OutOfStep, out_of_step};

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use orc_partner::params::{MapSource, load_config};
    use orc_proto::InstanceState;

    use super::*;
    use crate::instances::Owned;
    use crate::inventory::{Held, SiteAddress};
    use crate::naming::Marks;
    use orc_common::Purpose;

    fn config() -> Config {
        load_config(
            &MapSource::new()
                .param("partner_id", "zone-1")
                .param("vultr_api_key", "k")
                .param("vultr_owner_tag", "t"),
        )
        .unwrap()
    }

    /// A place as the region map spells it (`hetzner:fsn1`).
    fn at(place: &str) -> Place {
        let (cloud, location) = place.split_once(':').unwrap();
        Place::new(Cloud::parse(cloud).unwrap(), location).unwrap()
    }

    fn held(site: &str, place: &str) -> Held {
        let Place { cloud, location } = at(place);
        Held {
            owned: Owned {
                cloud,
                marks: Marks {
                    owner_tag: "t".into(),
                    child: "zone-1".into(),
                    node_id: format!("n-{site}-{location}"),
                    site: site.into(),
                    purpose: Purpose::Tenant,
                    rate: None,
                    account_monthly: "1".parse().unwrap(),
                    pool: None,
                    gateway_gen: None,
                },
                instance_ref: format!("{cloud}:{site}-{location}"),
                addresses: vec![],
                private: None,
                state: InstanceState::Running,
            },
            location: location.to_string(),
        }
    }

    fn stable(site: &str, place: &str, ptr: &str) -> SiteAddress {
        let Place { cloud, location } = at(place);
        SiteAddress {
            cloud,
            kind: ResourceKind::Stable,
            site: site.into(),
            ipv4: Ipv4Addr::new(203, 0, 113, 10),
            location: location.to_string(),
            closed: true,
            pool: None,
            pool_mark: None,
            id: format!("{cloud}:{site}"),
            attached_to: None,
            ptr: Some(ptr.into()),
        }
    }

    #[test]
    fn live_places_come_from_site_marks_and_gateway_names() {
        let listing = Listing {
            held: vec![held("eu-central-a", "hetzner:fsn1")],
            addresses: vec![stable(
                "us-east-b",
                "vultr:ewr",
                "gw-old-site.cloud.example.com.",
            )],
            networks: vec![],
        };
        let live = live_places(&listing, Some("cloud.example.com"));
        let names: Vec<&str> = live.keys().map(SiteName::as_str).collect();
        assert_eq!(names, ["eu-central-a", "old-site", "us-east-b"]);
        assert!(live[&SiteName::new("old-site").unwrap()].contains(&at("vultr:ewr")));
        let without = live_places(&listing, None);
        assert!(!without.contains_key(&SiteName::new("old-site").unwrap()));
    }

    #[test]
    fn out_of_step_sites_are_remapped_ones_and_unmapped_locations() {
        let cfg = config();
        let live = |place: &str| {
            let Place { cloud, location } = at(place);
            LiveSite { cloud, location }
        };
        let sites = BTreeMap::from([
            (SiteName::new("eu-central-a").unwrap(), live("hetzner:fsn1")),
            (SiteName::new("eu-central-b").unwrap(), live("hetzner:fsn1")),
            (SiteName::new("old-name").unwrap(), live("vultr:fra")),
            (SiteName::new("gone").unwrap(), live("vultr:ams")),
        ]);
        let found = out_of_step(&cfg, &sites);
        let out = |site: &str, live: &str, mapped: Option<&str>| {
            let live = at(live);
            OutOfStep {
                site: SiteName::new(site).unwrap(),
                live_cloud: live.cloud,
                live_location: live.location,
                mapped: mapped.map(at).map(|m| (m.cloud, m.location)),
            }
        };
        assert_eq!(
            found,
            [
                out("eu-central-b", "hetzner:fsn1", Some("hetzner:nbg1")),
                out("gone", "vultr:ams", None),
            ],
            "old-name sits where eu-central-c now maps: a separate site"
        );
    }

    #[test]
    fn a_site_live_elsewhere_than_the_map_is_remapped() {
        let cfg = config();
        let listing = Listing {
            held: vec![
                held("eu-central-a", "hetzner:fsn1"),
                held("eu-central-b", "hetzner:fsn1"),
                held("eu-central-b", "hetzner:nbg1"),
                held("gone-site", "vultr:ams"),
            ],
            addresses: vec![],
            networks: vec![],
        };
        let chosen = chosen_places(&cfg, &live_places(&listing, None));
        let site = |name: &str| SiteName::new(name).unwrap();
        assert_eq!(chosen[&site("eu-central-b")], at("hetzner:fsn1"));
        let remapped = remapped(&cfg, &chosen);
        let sites: Vec<&str> = remapped.keys().map(SiteName::as_str).collect();
        assert_eq!(
            sites,
            ["eu-central-b"],
            "a removed site name is not remapped"
        );
        assert_eq!(remapped[&site("eu-central-b")].1, at("hetzner:nbg1"));
    }
}
