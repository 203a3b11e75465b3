//! Builds catalog snapshots from the emulator seed files (`crates/emu/seed/*.json`).
//!
//! Used by tests, the benchmark and the `bench-quote`/`quote` commands to quote against real
//! captured prices without a cloud. Pure: it takes the file text, never a path.
//!
//! Rules, matching how the live reader reads the real APIs:
//! - Hetzner: prices are net; the account is billed gross, so price = net × (1 + vat_rate/100)
//!   (× 1.19 in the seed). A type's location with `available: false` is not sold there. Only
//!   `system` images that are `available` and not deprecated are bootable.
//! - Vultr: `plans[].locations` are the locations where a plan is sold; the price is the same
//!   everywhere. Vultr's block-storage price is not part of the capture, so the seed loader
//!   uses [`VULTR_BLOCK_STORAGE_USD_PER_GIB_MONTH`]; the live reader must fill the real one.

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;

use orc_common::{Architecture, Currency};
use rust_decimal::Decimal;
use serde::Deserialize;
use serde_json::Number;

use crate::catalog::{CatalogSnapshot, Image, LastAnswer, Plan, PlanPrice};
use crate::ids::{Cloud, EmptyId, ImageId, LocationId, PlanId, Timestamp};

/// Vultr's published block-storage price (NVMe, USD per GiB-month), absent from the seed.
pub const VULTR_BLOCK_STORAGE_USD_PER_GIB_MONTH: Decimal = Decimal::from_parts(10, 0, 0, false, 2);

/// Vultr's published price of a reserved IPv4 (USD a month), which its API does not list.
pub const VULTR_RESERVED_IPV4_USD_MONTH: Decimal = Decimal::from_parts(3, 0, 0, false, 0);

/// Why a seed file could not be turned into a snapshot.
#[derive(Debug, thiserror::Error)]
pub enum SeedError {
    #[error("{cloud} seed is not the expected JSON: {source}")]
    Json {
        cloud: Cloud,
        #[source]
        source: serde_json::Error,
    },
    #[error("{cloud} seed has a number that is not a decimal: {value}")]
    Number { cloud: Cloud, value: String },
    #[error("{cloud} seed has an empty {kind}")]
    EmptyId { cloud: Cloud, kind: &'static str },
    #[error("{cloud} seed names an unknown {what} {value:?}")]
    Unknown {
        cloud: Cloud,
        what: &'static str,
        value: String,
    },
}

/// A snapshot plus the facts a test needs to prove tenant words name none of them.
#[derive(Debug, Clone)]
pub struct SeedCatalog {
    pub snapshot: CatalogSnapshot,
    /// City names of the cloud's locations.
    pub cities: BTreeSet<String>,
    /// Every location id the seed names.
    pub locations: BTreeSet<String>,
}

fn decimal(cloud: Cloud, n: &Number) -> Result<Decimal, SeedError> {
    let text = n.to_string();
    Decimal::from_str(&text)
        .or_else(|_| Decimal::from_scientific(&text))
        .map_err(|_| SeedError::Number { cloud, value: text })
}

#[derive(Deserialize)]
struct VultrSeed {
    currency: String,
    plans: Vec<VultrPlan>,
    regions: Vec<VultrRegion>,
    os: Vec<VultrOs>,
}

#[derive(Deserialize)]
struct VultrPlan {
    id: String,
    vcpu_count: u32,
    ram: u64,
    monthly_cost: Number,
    hourly_cost: Number,
    locations: Vec<String>,
}

#[derive(Deserialize)]
struct VultrRegion {
    id: String,
    city: String,
}

#[derive(Deserialize)]
struct VultrOs {
    id: u64,
    name: String,
    arch: String,
    family: String,
}

/// Reads `vultr-catalog.json`.
pub fn vultr(text: &str, read_at: Timestamp) -> Result<SeedCatalog, SeedError> {
    let cloud = Cloud::Vultr;
    let seed: VultrSeed =
        serde_json::from_str(text).map_err(|source| SeedError::Json { cloud, source })?;
    let currency = Currency::from_str(&seed.currency).map_err(|_| SeedError::Unknown {
        cloud,
        what: "currency",
        value: seed.currency.clone(),
    })?;
    let mut plans = Vec::with_capacity(seed.plans.len());
    for p in &seed.plans {
        let price = PlanPrice {
            monthly: decimal(cloud, &p.monthly_cost)?,
            hourly: decimal(cloud, &p.hourly_cost)?,
        };
        let sold_in: BTreeSet<LocationId> = p
            .locations
            .iter()
            .map(|l| id(cloud, LocationId::new(l)))
            .collect::<Result<_, _>>()?;
        plans.push(Plan {
            id: id(cloud, PlanId::new(p.id.clone()))?,
            vcpus: p.vcpu_count,
            memory_mib: p.ram,
            // The captured plan types (vc2, vhf, vhp, voc) are all x86_64.
            arch: Architecture::X86_64,
            prices: sold_in.iter().map(|l| (l.clone(), price)).collect(),
            sold_in,
        });
    }
    let mut images = Vec::new();
    for os in &seed.os {
        let arch = match os.arch.as_str() {
            "x64" => Architecture::X86_64,
            "arm64" | "aarch64" => Architecture::Arm64,
            _ => continue,
        };
        images.push(Image {
            id: id(cloud, ImageId::new(os.id.to_string()))?,
            name: None,
            family: os.family.clone(),
            title: os.name.clone(),
            arch,
        });
    }
    Ok(SeedCatalog {
        snapshot: CatalogSnapshot {
            cloud,
            currency,
            plans,
            images,
            block_storage_per_gib_month: Some(VULTR_BLOCK_STORAGE_USD_PER_GIB_MONTH),
            pool_address_monthly: seed
                .regions
                .iter()
                .filter_map(|r| {
                    Some((
                        LocationId::new(r.id.clone()).ok()?,
                        VULTR_RESERVED_IPV4_USD_MONTH,
                    ))
                })
                .collect(),
            read_at,
            last_answer: LastAnswer::Ok { at: read_at },
        },
        cities: seed.regions.iter().map(|r| r.city.clone()).collect(),
        locations: seed.regions.iter().map(|r| r.id.clone()).collect(),
    })
}

#[derive(Deserialize)]
struct HetznerSeed {
    currency: String,
    vat_rate: String,
    locations: Vec<HetznerLocation>,
    server_types: Vec<HetznerType>,
    images: Vec<HetznerImage>,
    volume_price_per_gb_month_net: Number,
    floating_ip_prices: HetznerIpPrices,
}

#[derive(Deserialize)]
struct HetznerIpPrices {
    ipv4: HetznerIpPrice,
}

#[derive(Deserialize)]
struct HetznerIpPrice {
    monthly_net: Number,
}

#[derive(Deserialize)]
struct HetznerLocation {
    name: String,
    city: String,
}

#[derive(Deserialize)]
struct HetznerType {
    name: String,
    cores: u32,
    memory: Number,
    architecture: String,
    locations: Vec<HetznerTypeLocation>,
    prices: Vec<HetznerPrice>,
}

#[derive(Deserialize)]
struct HetznerTypeLocation {
    name: String,
    available: bool,
}

#[derive(Deserialize)]
struct HetznerPrice {
    location: String,
    monthly_net: Number,
    hourly_net: Number,
}

#[derive(Deserialize)]
struct HetznerImage {
    id: u64,
    #[serde(rename = "type")]
    kind: String,
    status: String,
    name: Option<String>,
    description: String,
    os_flavor: String,
    architecture: String,
    deprecated: Option<String>,
}

fn hetzner_arch(cloud: Cloud, s: &str) -> Result<Architecture, SeedError> {
    match s {
        "x86" => Ok(Architecture::X86_64),
        "arm" => Ok(Architecture::Arm64),
        other => Err(SeedError::Unknown {
            cloud,
            what: "architecture",
            value: other.to_string(),
        }),
    }
}

/// Reads `hetzner-cloud-catalog.json`.
pub fn hetzner(text: &str, read_at: Timestamp) -> Result<SeedCatalog, SeedError> {
    let cloud = Cloud::Hetzner;
    let seed: HetznerSeed =
        serde_json::from_str(text).map_err(|source| SeedError::Json { cloud, source })?;
    let currency = Currency::from_str(&seed.currency).map_err(|_| SeedError::Unknown {
        cloud,
        what: "currency",
        value: seed.currency.clone(),
    })?;
    let vat = Decimal::from_str(&seed.vat_rate).map_err(|_| SeedError::Number {
        cloud,
        value: seed.vat_rate.clone(),
    })?;
    let gross = Decimal::ONE + vat / Decimal::ONE_HUNDRED;
    let mut plans = Vec::with_capacity(seed.server_types.len());
    for t in &seed.server_types {
        let memory_gb = decimal(cloud, &t.memory)?;
        let memory_mib = (memory_gb * Decimal::from(1024))
            .trunc()
            .try_into()
            .map_err(|_| SeedError::Number {
                cloud,
                value: t.memory.to_string(),
            })?;
        let mut prices = BTreeMap::new();
        for p in &t.prices {
            prices.insert(
                id(cloud, LocationId::new(p.location.clone()))?,
                PlanPrice {
                    monthly: decimal(cloud, &p.monthly_net)? * gross,
                    hourly: decimal(cloud, &p.hourly_net)? * gross,
                },
            );
        }
        let sold_in = t
            .locations
            .iter()
            .filter(|l| l.available)
            .map(|l| id(cloud, LocationId::new(l.name.clone())))
            .collect::<Result<BTreeSet<LocationId>, _>>()?
            .into_iter()
            .filter(|l| prices.contains_key(l))
            .collect();
        plans.push(Plan {
            id: id(cloud, PlanId::new(t.name.clone()))?,
            vcpus: t.cores,
            memory_mib,
            arch: hetzner_arch(cloud, &t.architecture)?,
            prices,
            sold_in,
        });
    }
    let mut images = Vec::new();
    for i in &seed.images {
        if i.kind != "system" || i.status != "available" || i.deprecated.is_some() {
            continue;
        }
        images.push(Image {
            id: id(cloud, ImageId::new(i.id.to_string()))?,
            name: i.name.clone(),
            family: i.os_flavor.clone(),
            title: i.description.clone(),
            arch: hetzner_arch(cloud, &i.architecture)?,
        });
    }
    Ok(SeedCatalog {
        snapshot: CatalogSnapshot {
            cloud,
            currency,
            plans,
            images,
            block_storage_per_gib_month: Some(
                decimal(cloud, &seed.volume_price_per_gb_month_net)? * gross,
            ),
            pool_address_monthly: {
                let floating = decimal(cloud, &seed.floating_ip_prices.ipv4.monthly_net)? * gross;
                seed.locations
                    .iter()
                    .filter_map(|l| Some((LocationId::new(l.name.clone()).ok()?, floating)))
                    .collect()
            },
            read_at,
            last_answer: LastAnswer::Ok { at: read_at },
        },
        cities: seed.locations.iter().map(|l| l.city.clone()).collect(),
        locations: seed.locations.iter().map(|l| l.name.clone()).collect(),
    })
}

/// An id of the seed, or the error naming its cloud and kind.
fn id<T>(cloud: Cloud, id: Result<T, EmptyId>) -> Result<T, SeedError> {
    id.map_err(|e| SeedError::EmptyId {
        cloud,
        kind: e.kind,
    })
}

#[cfg(test)]
pub(crate) mod testing {
    //! The real seed catalogs, read from `crates/emu/seed/` at test time.

    use std::sync::OnceLock;

    use super::*;
    use crate::catalog::Catalogs;

    pub(crate) fn seed_text(file: &str) -> String {
        let path = format!("{}/../emu/seed/{file}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
    }

    static VULTR: OnceLock<SeedCatalog> = OnceLock::new();
    static HETZNER: OnceLock<SeedCatalog> = OnceLock::new();
    static CATALOGS: OnceLock<Catalogs> = OnceLock::new();

    /// The Vultr seed, parsed once per test binary.
    pub(crate) fn seed_vultr() -> SeedCatalog {
        VULTR
            .get_or_init(|| {
                vultr(
                    &seed_text("vultr-catalog.json"),
                    Timestamp::from_unix_secs(1),
                )
                .unwrap()
            })
            .clone()
    }

    /// The Hetzner seed, parsed once per test binary.
    pub(crate) fn seed_hetzner() -> SeedCatalog {
        HETZNER
            .get_or_init(|| {
                hetzner(
                    &seed_text("hetzner-cloud-catalog.json"),
                    Timestamp::from_unix_secs(1),
                )
                .unwrap()
            })
            .clone()
    }

    /// Both seeds as catalogs (a fresh copy each call).
    pub(crate) fn seed_catalogs() -> Catalogs {
        CATALOGS
            .get_or_init(|| {
                let mut catalogs = Catalogs::new();
                catalogs.replace(seed_vultr().snapshot);
                catalogs.replace(seed_hetzner().snapshot);
                catalogs
            })
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;
    use rust_decimal::dec;

    #[test]
    fn hetzner_prices_are_gross_and_sold_follows_available() {
        let h = seed_hetzner();
        let cx23 = h.snapshot.plan("cx23").unwrap();
        let fsn1 = LocationId::new("fsn1").unwrap();
        assert_eq!(cx23.prices[&fsn1].monthly, dec!(6.5331));
        assert_eq!(cx23.memory_gib_exact(), Some(4));
        assert!(cx23.sold_in.contains(&fsn1));
        assert!(!cx23.prices.contains_key(&LocationId::new("ash").unwrap()));
        assert_eq!(h.snapshot.currency, Currency::EUR);
        assert_eq!(h.snapshot.block_storage_per_gib_month, Some(dec!(0.068068)));
        assert!(h.snapshot.images.iter().all(|i| i.title != "docker-ce"));
        assert!(h.cities.contains("Falkenstein"));

        let mut json: serde_json::Value =
            serde_json::from_str(&seed_text("hetzner-cloud-catalog.json")).unwrap();
        json["server_types"][0]["locations"][0]["available"] = serde_json::Value::Bool(false);
        assert_eq!(json["server_types"][0]["name"], "cx23");
        assert_eq!(json["server_types"][0]["locations"][0]["name"], "fsn1");
        let text = json.to_string();
        let sold_out = hetzner(&text, Timestamp::from_unix_secs(1)).unwrap();
        assert!(
            !sold_out
                .snapshot
                .plan("cx23")
                .unwrap()
                .sold_in
                .contains(&fsn1)
        );
    }

    /// Every built-in selector resolves on the seed catalogs, except Ubuntu 26.04, which
    /// neither cloud publishes yet.
    #[test]
    fn builtin_os_selectors_resolve_on_the_seed_catalogs() {
        let (v, h) = (seed_vultr(), seed_hetzner());
        let mut resolved = Vec::new();
        for (id, entry) in crate::maps::OsMap::builtin().entries() {
            for (cloud, selector) in &entry.selectors {
                let images = match cloud {
                    Cloud::Vultr => &v.snapshot.images,
                    Cloud::Hetzner => &h.snapshot.images,
                };
                let image = selector.resolve(images, Architecture::X86_64);
                resolved.push(format!(
                    "{id} {cloud} {}",
                    image.map_or("-".to_string(), |i| format!("{} {}", i.id, i.title))
                ));
            }
        }
        assert_eq!(
            resolved,
            [
                "alma-10 hetzner 200000015 AlmaLinux 10",
                "alma-10 vultr 2593 AlmaLinux 10 x64",
                "alma-9 hetzner 200000013 AlmaLinux 9",
                "alma-9 vultr 1868 AlmaLinux 9 x64",
                "debian-12 hetzner 200000005 Debian 12",
                "debian-13 hetzner 200000007 Debian 13",
                "debian-13 vultr 2625 Debian 13 x64 (trixie)",
                "rocky-10 hetzner 200000011 Rocky Linux 10",
                "rocky-10 vultr 2594 Rocky Linux 10 x64",
                "rocky-9 hetzner 200000009 Rocky Linux 9",
                "rocky-9 vultr 1869 Rocky Linux 9 x64",
                "ubuntu-22.04 hetzner 200000001 Ubuntu 22.04",
                "ubuntu-22.04 vultr 1743 Ubuntu 22.04 LTS x64",
                "ubuntu-24.04 hetzner 200000003 Ubuntu 24.04",
                "ubuntu-24.04 vultr 2284 Ubuntu 24.04 LTS x64",
                "ubuntu-26.04 hetzner -",
                "ubuntu-26.04 vultr -",
                "windows-2022 vultr 501 Windows 2022 Standard x64",
                "windows-2025 vultr 2514 Windows 2025 Standard x64",
            ]
        );
    }

    #[test]
    fn vultr_plans_are_sold_where_listed_and_half_gib_is_not_exact() {
        let v = seed_vultr();
        let plan = v.snapshot.plan("vc2-2c-4gb").unwrap();
        assert_eq!(
            plan.prices[&LocationId::new("ewr").unwrap()].monthly,
            dec!(20)
        );
        assert_eq!(plan.memory_gib_exact(), Some(4));
        assert_eq!(
            v.snapshot.plan("vc2-1c-0.5gb").unwrap().memory_gib_exact(),
            None
        );
        assert_eq!(v.snapshot.currency, Currency::USD);
        assert!(v.locations.contains("ewr"));
        assert!(v.cities.contains("Amsterdam"));
    }
}
