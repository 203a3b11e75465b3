//! Live catalogs: what each keyed cloud sells right now, read through the HTTP clients into
//! the pure crate's [`CatalogSnapshot`]s.
//!
//! Reads happen in the background ([`LiveCatalogs::refresh`], called by the serving
//! replica's refresh loop, and once by `orc-prov-partner quote`); a quote only reads the
//! snapshots under a short read lock and never calls a cloud.
//!
//! What one read fetches, per cloud:
//! - Hetzner: `GET /server_types` (plans, vCPUs, memory GB → MiB, architecture, gross
//!   per-location prices, and `locations[].available` for stock), `GET /images?type=system`
//!   (bootable images: available and not deprecated), `GET /pricing` (account currency and
//!   the gross volume price per GB-month, used as the block-storage price per GiB-month).
//! - Vultr: `GET /plans` (vCPUs, memory MB, the static price and location catalogue),
//!   `GET /os` (images), and `GET /regions/{r}/availability` for each Vultr location the
//!   region map names, which is what is sold there right now. Vultr bills in US dollars and
//!   its API has no block-storage price, so [`VULTR_BLOCK_STORAGE_USD_PER_GIB_MONTH`] is
//!   used.
//!
//! Invariants: a failed read keeps the previous snapshot and records the failure as its
//! last answer (operator detail, also logged at DEBUG; the WARN line names only the cloud
//! and the operation); a site whose location its cloud does not sell now is logged once at INFO
//! when it starts (and once when it stops) being left out, not on every read.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, RwLock};

use orc_cloud::hetzner::{HcloudArchitecture, ImageFilter, ImageType};
use orc_cloud::{CloudError, HetznerClient, VultrClient, VultrRegionId};
use orc_common::{Architecture, Currency};
use orc_partner::catalog::{CatalogSnapshot, Catalogs, Image, LastAnswer, Plan, PlanPrice};
use orc_partner::ids::{Cloud, ImageId, LocationId, PlanId, SiteName, Timestamp};
use orc_partner::params::Config;
use rust_decimal::Decimal;
use tokio::sync::watch;

use crate::clients::CloudClients;

pub use orc_partner::seed::VULTR_BLOCK_STORAGE_USD_PER_GIB_MONTH;

/// Hours in a month, for a Vultr plan that lists no hourly price.
const HOURS_PER_MONTH: u32 = 730;

fn arch_of(arch: HcloudArchitecture) -> Architecture {
    Architecture::from(arch)
}

/// Reads one Hetzner Cloud project's catalog.
pub async fn read_hetzner(
    client: &HetznerClient,
    now: Timestamp,
) -> Result<CatalogSnapshot, CloudError> {
    let types = client.list_server_types().await?;
    let images = client
        .list_images(&ImageFilter {
            kind: Some(ImageType::System),
            ..ImageFilter::default()
        })
        .await?;
    let pricing = client.pricing().await?;
    let mib_per_gb = Decimal::from(1024);
    let mut plans = Vec::with_capacity(types.len());
    for t in &types {
        let Ok(memory_mib) = u64::try_from((t.memory * mib_per_gb).trunc()) else {
            continue;
        };
        let prices: BTreeMap<LocationId, PlanPrice> = t
            .prices
            .iter()
            .map(|p| {
                (
                    LocationId::new(p.location.clone()),
                    PlanPrice {
                        monthly: p.price_monthly.gross,
                        hourly: p.price_hourly.gross,
                    },
                )
            })
            .collect();
        let sold_in = t
            .locations
            .iter()
            .filter(|l| l.available)
            .map(|l| LocationId::new(l.name.clone()))
            .filter(|l| prices.contains_key(l))
            .collect();
        plans.push(Plan {
            id: PlanId::new(t.name.clone()),
            vcpus: t.cores,
            memory_mib,
            arch: arch_of(t.architecture),
            prices,
            sold_in,
        });
    }
    let images = images
        .iter()
        .filter(|i| i.kind == ImageType::System && i.status == "available")
        .filter(|i| i.deprecated.is_none())
        .map(|i| Image {
            id: ImageId::new(i.id.to_string()),
            name: i.name.clone(),
            family: i.os_flavor.clone(),
            title: i.description.clone(),
            arch: arch_of(i.architecture),
        })
        .collect();
    Ok(CatalogSnapshot {
        cloud: Cloud::Hetzner,
        currency: pricing.currency,
        plans,
        images,
        block_storage_per_gib_month: Some(pricing.volume.price_per_gb_month.gross),
        read_at: now,
        last_answer: LastAnswer::Ok { at: now },
    })
}

/// The architecture of a Vultr plan: its API names none, and only plan ids with `arm` in
/// them are ARM.
fn vultr_plan_arch(id: &str) -> Architecture {
    if id.contains("arm") {
        Architecture::Arm64
    } else {
        Architecture::X86_64
    }
}

/// Reads one Vultr account's catalog; `regions` are the locations whose live stock is read.
pub async fn read_vultr(
    client: &VultrClient,
    regions: &BTreeSet<LocationId>,
    now: Timestamp,
) -> Result<CatalogSnapshot, CloudError> {
    let listed = client.list_plans(None).await?;
    let os = client.list_os().await?;
    let mut stock: BTreeMap<LocationId, BTreeSet<String>> = BTreeMap::new();
    for region in regions {
        let available = client
            .region_availability(&VultrRegionId::from(region.as_str()))
            .await?;
        stock.insert(
            region.clone(),
            available.iter().map(|p| p.to_string()).collect(),
        );
    }
    let mut plans = Vec::with_capacity(listed.len());
    for p in &listed {
        let hourly = p
            .hourly_cost
            .unwrap_or_else(|| p.monthly_cost / Decimal::from(HOURS_PER_MONTH));
        let price = PlanPrice {
            monthly: p.monthly_cost,
            hourly,
        };
        let id = p.id.to_string();
        let prices: BTreeMap<LocationId, PlanPrice> = p
            .locations
            .iter()
            .map(|l| (LocationId::new(l.to_string()), price))
            .collect();
        let sold_in = prices
            .keys()
            .filter(|l| stock.get(*l).is_some_and(|s| s.contains(&id)))
            .cloned()
            .collect();
        plans.push(Plan {
            arch: vultr_plan_arch(&id),
            id: PlanId::new(id),
            vcpus: p.vcpu_count,
            memory_mib: p.ram,
            prices,
            sold_in,
        });
    }
    let images = os
        .iter()
        .filter_map(|o| {
            let arch = match o.arch.as_str() {
                "x64" => Architecture::X86_64,
                "arm64" | "aarch64" => Architecture::Arm64,
                _ => return None,
            };
            Some(Image {
                id: ImageId::new(o.id.to_string()),
                name: None,
                family: o.family.clone(),
                title: o.name.clone(),
                arch,
            })
        })
        .collect();
    Ok(CatalogSnapshot {
        cloud: Cloud::Vultr,
        currency: Currency::USD,
        plans,
        images,
        block_storage_per_gib_month: Some(VULTR_BLOCK_STORAGE_USD_PER_GIB_MONTH),
        read_at: now,
        last_answer: LastAnswer::Ok { at: now },
    })
}

/// The locations of `cloud` that the region map names.
pub fn mapped_locations(config: &Config, cloud: Cloud) -> BTreeSet<LocationId> {
    config
        .regions
        .sites()
        .filter(|(_, site)| site.cloud == cloud)
        .map(|(_, site)| site.location.clone())
        .collect()
}

/// The latest snapshots of every keyed cloud, shared by the quote path and the reader.
#[derive(Debug)]
pub struct LiveCatalogs {
    catalogs: RwLock<Catalogs>,
    /// Last read failure of a cloud that has no snapshot yet (operator detail).
    unread: Mutex<BTreeMap<Cloud, String>>,
    /// Sites currently left out because their location is not sold.
    unsold: Mutex<BTreeSet<SiteName>>,
    read_once: watch::Sender<bool>,
}

impl Default for LiveCatalogs {
    fn default() -> Self {
        LiveCatalogs {
            catalogs: RwLock::new(Catalogs::new()),
            unread: Mutex::new(BTreeMap::new()),
            unsold: Mutex::new(BTreeSet::new()),
            read_once: watch::Sender::new(false),
        }
    }
}

impl LiveCatalogs {
    /// No snapshot yet.
    pub fn new() -> Self {
        LiveCatalogs::default()
    }

    /// Runs `f` over the current snapshots (a short read lock; never held across I/O).
    pub fn with<T>(&self, f: impl FnOnce(&Catalogs) -> T) -> T {
        let guard = self
            .catalogs
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&guard)
    }

    /// A copy of the current snapshots.
    pub fn snapshot(&self) -> Catalogs {
        self.with(Catalogs::clone)
    }

    /// Whether a full read of every keyed cloud has finished (successfully or not).
    pub fn has_read(&self) -> bool {
        *self.read_once.borrow()
    }

    /// Waits until the first full read has finished.
    pub async fn first_read(&self) {
        let mut rx = self.read_once.subscribe();
        let _ = rx.wait_for(|done| *done).await;
    }

    /// Reads every keyed cloud once and replaces its snapshot; a cloud that fails keeps its
    /// previous snapshot with the failure as its last answer. Answers the failures.
    pub async fn refresh(
        &self,
        clients: &CloudClients,
        config: &Config,
        now: Timestamp,
    ) -> BTreeMap<Cloud, String> {
        let mut failures = BTreeMap::new();
        if let Some(client) = &clients.hetzner {
            let read = read_hetzner(client, now).await;
            self.apply(Cloud::Hetzner, read, now, &mut failures);
        }
        if let Some(client) = &clients.vultr {
            let regions = mapped_locations(config, Cloud::Vultr);
            let read = read_vultr(client, &regions, now).await;
            self.apply(Cloud::Vultr, read, now, &mut failures);
        }
        self.log_unsold_sites(config);
        self.read_once.send_replace(true);
        failures
    }

    fn apply(
        &self,
        cloud: Cloud,
        read: Result<CatalogSnapshot, CloudError>,
        now: Timestamp,
        failures: &mut BTreeMap<Cloud, String>,
    ) {
        let mut catalogs = self
            .catalogs
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut unread = self
            .unread
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match read {
            Ok(snapshot) => {
                tracing::debug!(
                    %cloud,
                    plans = snapshot.plans.len(),
                    images = snapshot.images.len(),
                    "catalog read"
                );
                catalogs.replace(snapshot);
                unread.remove(&cloud);
            }
            Err(e) => {
                let summary = e.to_string();
                tracing::warn!(
                    %cloud,
                    operation = e.operation().unwrap_or("-"),
                    "The cloud's catalog could not be read; the previous one stays in use"
                );
                tracing::debug!(%cloud, error = %summary, "the cloud's answer");
                catalogs.update(cloud, |s| {
                    s.last_answer = LastAnswer::Failed {
                        at: now,
                        summary: summary.clone(),
                    };
                });
                if catalogs.get(cloud).is_none() {
                    unread.insert(cloud, summary.clone());
                }
                failures.insert(cloud, summary);
            }
        }
    }

    /// The last read error of a cloud that has never been read.
    pub fn unread_error(&self, cloud: Cloud) -> Option<String> {
        self.unread
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&cloud)
            .cloned()
    }

    fn log_unsold_sites(&self, config: &Config) {
        let now_unsold: BTreeSet<(SiteName, Cloud, LocationId)> = self.with(|catalogs| {
            config
                .regions
                .sites()
                .filter_map(|(_, site)| {
                    let snapshot = catalogs.get(site.cloud)?;
                    (!snapshot.sells_at(&site.location))
                        .then(|| (site.name.clone(), site.cloud, site.location.clone()))
                })
                .collect()
        });
        let mut unsold = self
            .unsold
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (site, cloud, location) in &now_unsold {
            if !unsold.contains(site) {
                tracing::info!(
                    %site, %cloud, %location,
                    "Site {site} is left out of quotes: its cloud does not sell {cloud}:{location} right now"
                );
            }
        }
        let names: BTreeSet<SiteName> = now_unsold.into_iter().map(|(s, _, _)| s).collect();
        for site in unsold.difference(&names) {
            tracing::info!(%site, "Site {site} is sold again and back in quotes");
        }
        *unsold = names;
    }

    /// Sites currently left out because their location is not sold.
    pub fn unsold_sites(&self) -> BTreeSet<SiteName> {
        self.unsold
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}
