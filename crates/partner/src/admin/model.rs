//! What the admin page shows, as plain data: the replica, its role, the config, the catalogs,
//! a copy of the quote state, what the last inventory pass saw, and the checks the views make
//! over them (sites out of step with the region map).
//!
//! The provider process fills a [`PageState`] from copies of its shared state; the views read
//! it and nothing else. Nothing here holds a key: the config's keys stay behind
//! [`crate::secret::Secret`], and the views show only whether one is set.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use orc_common::Purpose;
use rust_decimal::Decimal;
use serde::Serialize;

use crate::catalog::Catalogs;
use crate::ids::{Cloud, LocationId, SiteName, Timestamp};
use crate::params::Config;
use crate::state::{LiveSite, QuoteState};

/// Which replica serves the page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReplicaFacts {
    /// The host's name.
    pub host: String,
    /// The process id.
    pub pid: u32,
    /// The slot of the partner pool this replica runs in.
    pub slot: u32,
    /// The partner's software version.
    pub version: String,
    /// `urn:orc:partner:<partner_id>`.
    pub resource_uri: String,
}

/// The replica's role as the page shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PageRole {
    /// Holds the resource: reads the clouds, keeps inventory.
    Serving,
    /// Another replica serves; this one reads no cloud account.
    StandingBy,
    /// Neither told by the zone nor handed work yet; reads no cloud account either.
    Waiting,
}

impl PageRole {
    /// Whether this replica reads the cloud accounts (only a serving one does).
    pub fn reads_clouds(self) -> bool {
        match self {
            PageRole::Serving => true,
            PageRole::StandingBy | PageRole::Waiting => false,
        }
    }

    /// The words for the role.
    pub fn words(self) -> &'static str {
        match self {
            PageRole::Serving => "serving",
            PageRole::StandingBy => "standing by",
            PageRole::Waiting => "not serving yet (no work and no word from the zone so far)",
        }
    }
}

/// One instance as the last complete listing of its cloud found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SeenInstance {
    pub node_id: String,
    /// `<cloud>:<instance id>`.
    pub instance_ref: String,
    pub site: String,
    /// The cloud location it runs in.
    pub location: String,
    pub purpose: Purpose,
    /// The instance's state (`running`, `starting`, …).
    pub state: String,
    /// The pool id, when the instance's pool mark reads back as one.
    pub pool: Option<String>,
    /// The gateway shape generation a gateway was created with.
    pub gateway_generation: Option<String>,
    /// Its monthly price in USD at the rate recorded on it, when it has one.
    pub usd_monthly: Option<Decimal>,
}

/// The kind of a site address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AddressKind {
    /// A site's stable public IPv4 (its gateway's address).
    Stable,
    /// A public pool's address, attached to its site's gateway.
    Pool,
}

/// One address as the last complete listing of its cloud found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SeenAddress {
    pub kind: AddressKind,
    pub site: String,
    pub location: String,
    pub ipv4: Ipv4Addr,
    /// A pool address's pool, when it can be read back.
    pub pool: Option<String>,
    /// The instance holding it (`<cloud>:<id>`).
    pub attached_to: Option<String>,
    /// A stable address of a closed site, kept for a returning site.
    pub closed: bool,
}

/// One site network as the last complete listing of its cloud found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SeenNetwork {
    pub site: String,
    /// The site's private prefix (`10.128.0.0/24`).
    pub prefix: String,
}

/// What the last complete listing of one cloud found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CloudSeen {
    /// When the listing was made.
    pub listed_at: Timestamp,
    /// Tenant nodes and gateways, by site then node id.
    pub instances: Vec<SeenInstance>,
    /// Stable and pool addresses, by site then address.
    pub addresses: Vec<SeenAddress>,
    /// Site networks, by site.
    pub networks: Vec<SeenNetwork>,
}

impl CloudSeen {
    /// Puts every list in its shown order.
    pub fn sort(&mut self) {
        self.instances
            .sort_by(|a, b| (&a.site, &a.node_id).cmp(&(&b.site, &b.node_id)));
        self.addresses
            .sort_by(|a, b| (&a.site, a.kind, a.ipv4).cmp(&(&b.site, b.kind, b.ipv4)));
        self.networks
            .sort_by(|a, b| (&a.site, &a.prefix).cmp(&(&b.site, &b.prefix)));
    }

    /// Tenant nodes held.
    pub fn tenant_nodes(&self) -> usize {
        self.instances
            .iter()
            .filter(|i| i.purpose == Purpose::Tenant)
            .count()
    }

    /// Site gateways held.
    pub fn gateways(&self) -> usize {
        self.instances
            .iter()
            .filter(|i| i.purpose == Purpose::Gateway)
            .count()
    }
}

/// A listing of one cloud that failed (operator detail, never a key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListingFailure {
    pub at: Timestamp,
    /// The cloud's answer in short.
    pub summary: String,
}

/// What the inventory passes of this replica saw: per cloud the last complete listing and,
/// when the latest listing failed, that failure.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct InventorySeen {
    /// When the last pass ran (complete or not).
    pub last_pass: Option<Timestamp>,
    pub clouds: BTreeMap<Cloud, CloudSeen>,
    /// Clouds whose latest listing failed; cleared by the next listing that succeeds.
    pub failures: BTreeMap<Cloud, ListingFailure>,
}

impl InventorySeen {
    /// Records a complete listing of `cloud`.
    pub fn listed(&mut self, cloud: Cloud, mut seen: CloudSeen) {
        seen.sort();
        self.clouds.insert(cloud, seen);
        self.failures.remove(&cloud);
    }

    /// Records a failed listing of `cloud`; its last complete listing stays.
    pub fn failed(&mut self, cloud: Cloud, at: Timestamp, summary: String) {
        self.failures.insert(cloud, ListingFailure { at, summary });
    }
}

/// Everything the views read. Built by the provider process from copies of its state (and
/// by tests from fixed data); the views never change it.
#[derive(Debug, Clone, Copy)]
pub struct PageState<'a> {
    /// The time the page is made at.
    pub now: Timestamp,
    pub replica: &'a ReplicaFacts,
    pub role: PageRole,
    pub config: &'a Config,
    pub catalogs: &'a Catalogs,
    /// Read failures of clouds that have no catalog yet (operator detail).
    pub unread_catalogs: &'a BTreeMap<Cloud, String>,
    /// A copy of the quote state.
    pub quotes: &'a QuoteState,
    pub seen: &'a InventorySeen,
    /// Clouds whose addresses the last pass could not list ("site guard incomplete").
    pub guard_incomplete: &'a BTreeSet<Cloud>,
    /// The current gateway shape generation of each cloud.
    pub gateway_generations: &'a BTreeMap<Cloud, String>,
    /// The name of each cloud's sealed SSH key.
    pub sealed_keys: &'a BTreeMap<Cloud, String>,
}

/// A live site out of step with the region map, as the Children view lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutOfStep {
    pub site: SiteName,
    /// Where the site is live.
    pub live_cloud: Cloud,
    pub live_location: LocationId,
    /// Where the map now puts the site; `None`: the map no longer names the site and no
    /// site name maps to the location it is live at.
    pub mapped: Option<(Cloud, LocationId)>,
}

impl OutOfStep {
    /// What the operator does about it.
    pub fn fix(&self) -> String {
        let live = format!("{}:{}", self.live_cloud, self.live_location);
        match &self.mapped {
            Some(_) => format!(
                "put the old mapping back: map {} to {live} in regions and reconfigure; until then the site is left out of quotes and deploys into it fail",
                self.site
            ),
            None => format!(
                "map a site to {live} again (the name {} keeps the site's identity) and reconfigure, or let its nodes end; its nodes are still kept, inventoried and destroyed",
                self.site
            ),
        }
    }
}

/// The live sites the map puts elsewhere, and those at a location no site name maps to, in
/// site order. A live site whose name the map dropped while another name now maps to its
/// location is in step: that name is a separate site.
pub fn out_of_step(config: &Config, live_sites: &BTreeMap<SiteName, LiveSite>) -> Vec<OutOfStep> {
    live_sites
        .iter()
        .filter_map(|(site, live)| {
            let mapped = match config.regions.site(site.as_str()) {
                Some((_, s)) if s.cloud == live.cloud && s.location == live.location => {
                    return None;
                }
                Some((_, s)) => Some((s.cloud, s.location.clone())),
                None => {
                    let claimed = config
                        .regions
                        .sites()
                        .any(|(_, s)| s.cloud == live.cloud && s.location == live.location);
                    if claimed {
                        return None;
                    }
                    None
                }
            };
            Some(OutOfStep {
                site: site.clone(),
                live_cloud: live.cloud,
                live_location: live.location.clone(),
                mapped,
            })
        })
        .collect()
}
