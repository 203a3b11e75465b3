//! The catalog data model: what each cloud sells right now, as one snapshot per cloud.
//!
//! A snapshot is filled by a reader (the live reader through the HTTP clients, or
//! [`crate::seed`] from the emulator seed files) in the background and replaced whole; a
//! quote only reads it and never calls a cloud. Prices are in the account's currency (Hetzner
//! gross, VAT included) and are converted to US dollars only by the quote, at the cloud's
//! exchange rate.
//!
//! Invariants a reader must keep: a plan's `sold_in` is a subset of the keys of its
//! `prices`; memory is recorded in MiB exactly as the cloud reports it (a plan is an
//! exact-fit candidate only when that is a whole number of GiB). Listing order carries no
//! meaning: the quote breaks every tie explicitly.

use std::collections::{BTreeMap, BTreeSet};

use orc_common::{Architecture, Currency};
use rust_decimal::Decimal;
use serde::Serialize;

use crate::ids::{Cloud, ImageId, LocationId, PlanId, Timestamp};

/// A plan's price at one location, in the account currency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PlanPrice {
    pub monthly: Decimal,
    pub hourly: Decimal,
}

/// One plan (server type) of a cloud.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub id: PlanId,
    pub vcpus: u32,
    /// Memory in MiB as the cloud reports it.
    pub memory_mib: u64,
    pub arch: Architecture,
    /// Price per location where the cloud lists the plan.
    pub prices: BTreeMap<LocationId, PlanPrice>,
    /// Locations where the plan can be ordered right now (sold-out locations are absent).
    pub sold_in: BTreeSet<LocationId>,
}

impl Plan {
    /// Memory in whole GiB, or `None` when it is not a whole number of GiB.
    pub fn memory_gib_exact(&self) -> Option<u32> {
        if self.memory_mib.is_multiple_of(1024) {
            u32::try_from(self.memory_mib / 1024).ok()
        } else {
            None
        }
    }

    /// The price at `location` when the plan is sold there right now.
    pub fn sold_price(&self, location: &LocationId) -> Option<PlanPrice> {
        if self.sold_in.contains(location) {
            self.prices.get(location).copied()
        } else {
            None
        }
    }
}

/// One bootable image of a cloud.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Image {
    pub id: ImageId,
    /// The image's name where the cloud has one (Hetzner `ubuntu-24.04`).
    pub name: Option<String>,
    /// The cloud's own family (Vultr `family`, Hetzner `os_flavor`).
    pub family: String,
    /// The human title (Vultr `name`, Hetzner `description`).
    pub title: String,
    pub arch: Architecture,
}

/// How the cloud answered the last catalog read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum LastAnswer {
    /// The read succeeded.
    Ok { at: Timestamp },
    /// The read failed; the snapshot keeps the previous data. `summary` is operator detail.
    Failed { at: Timestamp, summary: String },
}

/// Everything a quote needs to know about one cloud's catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CatalogSnapshot {
    pub cloud: Cloud,
    /// The currency the account bills in.
    pub currency: Currency,
    pub plans: Vec<Plan>,
    pub images: Vec<Image>,
    /// Block storage per GiB-month in the account currency; `None` when unknown.
    pub block_storage_per_gib_month: Option<Decimal>,
    /// What one pool address (a public IPv4 the account holds apart from any instance)
    /// costs a month at each location, in the account currency; a location absent here has
    /// no known price.
    pub pool_address_monthly: BTreeMap<LocationId, Decimal>,
    /// When the data was read.
    pub read_at: Timestamp,
    pub last_answer: LastAnswer,
}

impl CatalogSnapshot {
    /// Whether the cloud sells any plan at `location` right now.
    pub fn sells_at(&self, location: &LocationId) -> bool {
        self.plans.iter().any(|p| p.sold_in.contains(location))
    }

    /// What one pool address costs a month at `location`, in the account currency.
    pub fn pool_address_price(&self, location: &LocationId) -> Option<orc_common::Money> {
        self.pool_address_monthly
            .get(location)
            .map(|amount| orc_common::Money::new(*amount, self.currency, orc_common::Period::Month))
    }

    /// One plan by id.
    pub fn plan(&self, id: &str) -> Option<&Plan> {
        self.plans.iter().find(|p| p.id.as_str() == id)
    }
}

/// A plan as listed at one location: its index in [`CatalogSnapshot::plans`], its price there
/// and whether it is sold there right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocatedPlan {
    pub plan: usize,
    pub price: PlanPrice,
    pub sold: bool,
}

/// The latest snapshot of each cloud; a cloud not read yet has none.
///
/// Alongside the snapshots it keeps an index of the plans listed at each location, rebuilt
/// whenever a snapshot is replaced or updated, so a quote never searches a plan's price map.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Catalogs {
    snapshots: BTreeMap<Cloud, CatalogSnapshot>,
    #[serde(skip)]
    by_location: BTreeMap<Cloud, BTreeMap<LocationId, Vec<LocatedPlan>>>,
}

impl Catalogs {
    /// No snapshot yet.
    pub fn new() -> Self {
        Catalogs::default()
    }

    /// Replaces a cloud's snapshot whole.
    pub fn replace(&mut self, snapshot: CatalogSnapshot) {
        let cloud = snapshot.cloud;
        self.snapshots.insert(cloud, snapshot);
        self.reindex(cloud);
    }

    /// Changes a cloud's snapshot in place (a reader applying a partial refresh, or a test
    /// marking a plan sold out); the index is rebuilt afterwards.
    pub fn update(&mut self, cloud: Cloud, change: impl FnOnce(&mut CatalogSnapshot)) {
        if let Some(snapshot) = self.snapshots.get_mut(&cloud) {
            change(snapshot);
            self.reindex(cloud);
        }
    }

    fn reindex(&mut self, cloud: Cloud) {
        let mut index: BTreeMap<LocationId, Vec<LocatedPlan>> = BTreeMap::new();
        let Some(snapshot) = self.snapshots.get(&cloud) else {
            self.by_location.remove(&cloud);
            return;
        };
        for (i, plan) in snapshot.plans.iter().enumerate() {
            for (location, price) in &plan.prices {
                index
                    .entry(location.clone())
                    .or_default()
                    .push(LocatedPlan {
                        plan: i,
                        price: *price,
                        sold: plan.sold_in.contains(location),
                    });
            }
        }
        self.by_location.insert(cloud, index);
    }

    /// The snapshot of `cloud`, if read.
    pub fn get(&self, cloud: Cloud) -> Option<&CatalogSnapshot> {
        self.snapshots.get(&cloud)
    }

    /// The plans `cloud` lists at `location`, in snapshot order.
    pub fn plans_at(&self, cloud: Cloud, location: &LocationId) -> &[LocatedPlan] {
        self.by_location
            .get(&cloud)
            .and_then(|index| index.get(location))
            .map_or(&[], Vec::as_slice)
    }

    /// Every snapshot, in cloud order.
    pub fn iter(&self) -> impl Iterator<Item = &CatalogSnapshot> {
        self.snapshots.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_exact_only_in_whole_gib() {
        let mut plan = Plan {
            id: PlanId::new("p").unwrap(),
            vcpus: 1,
            memory_mib: 4096,
            arch: Architecture::X86_64,
            prices: BTreeMap::new(),
            sold_in: BTreeSet::new(),
        };
        assert_eq!(plan.memory_gib_exact(), Some(4));
        plan.memory_mib = 512;
        assert_eq!(plan.memory_gib_exact(), None);
        plan.memory_mib = 59392;
        assert_eq!(plan.memory_gib_exact(), Some(58));
    }
}
