//! Live catalogs: what each keyed cloud sells right now, read through the HTTP clients into
//! the pure crate's [`CatalogSnapshot`]s.
//!
//! Reads happen in the background ([`LiveCatalogs::refresh`], called by the serving
//! replica's refresh loop, and once by `orc-prov-partner quote`); a quote only reads the
//! snapshots under a short read lock and never calls a cloud.
//!
//! What one read fetches is each cloud's own (`crate::clouds::CloudOps::read_catalog`:
//! plans with their per-location prices and stock, bootable images, the account currency
//! and the block-storage price); a cloud that reads live stock per location reads it for
//! the locations the region map names.
//!
//! Invariants: a failed read keeps the previous snapshot and records the failure as its
//! last answer (operator detail, also logged at DEBUG; the WARN line names only the cloud
//! and the operation); a site whose location its cloud does not sell now is logged once at INFO
//! when it starts (and once when it stops) being left out, not on every read.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, RwLock};

use orc_cloud::CloudError;
use orc_partner::catalog::{CatalogSnapshot, Catalogs, LastAnswer};
use orc_partner::ids::{Cloud, LocationId, SiteName, Timestamp};
use orc_partner::params::Config;
use tokio::sync::watch;

use crate::clients::CloudClients;

pub use orc_partner::seed::VULTR_BLOCK_STORAGE_USD_PER_GIB_MONTH;

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
        for cloud in clients.keyed() {
            let Some(ops) = clients.get(cloud) else {
                continue;
            };
            let mapped = mapped_locations(config, cloud);
            let read = ops.read_catalog(&mapped, now).await;
            self.apply(cloud, read, now, &mut failures);
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

    /// The last read error of every cloud that has never been read.
    pub fn unread_errors(&self) -> BTreeMap<Cloud, String> {
        self.unread
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Replaces every snapshot, as a completed read would (tests and benches set a known
    /// catalog this way).
    #[cfg(feature = "testing")]
    pub(crate) fn install(&self, catalogs: Catalogs) {
        *self
            .catalogs
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = catalogs;
        self.read_once.send_replace(true);
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
