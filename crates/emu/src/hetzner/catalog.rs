//! The catalogue: server types, locations, historical datacenters, images and prices, read
//! from `seed/hetzner-cloud-catalog.json` at start, and the read-only endpoints serving it.
//!
//! Prices in the seed are net EUR; every gross figure is net × (1 + VAT) with VAT from the
//! seed. Net amounts are written with 10 decimals and gross with 16, as the API does.
//! Availability (`server_types[].locations[].available`) is the seed's value unless the
//! control API marked the (type, location) pair sold out or the location disabled.

use std::str::FromStr;

use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::Deserialize;
use serde_json::{Value, json};

use super::pagination::{ListQuery, SortValue, page_of, page_with, sort_items};
use super::{Account, ApiError, ApiResult, Hs, PathId, ok};
use crate::control::Faults;

const SEED: &str = include_str!("../../seed/hetzner-cloud-catalog.json");
/// `created` of every seed image (the seed records none).
const IMAGE_CREATED: &str = "2024-04-25T09:00:00Z";

#[derive(Debug, Deserialize)]
struct Seed {
    vat_rate: String,
    currency: String,
    locations: Vec<Location>,
    datacenters_historical: Vec<SeedDatacenter>,
    server_types: Vec<SeedServerType>,
    images: Vec<Value>,
    primary_ip_prices: SeedIpPrices,
    floating_ip_prices: SeedIpPrices,
    volume_price_per_gb_month_net: serde_json::Number,
    image_price_per_gb_month_net: serde_json::Number,
    server_backup_percentage: String,
}

/// A location, exactly as the API shows it.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
pub(crate) struct Location {
    pub id: u64,
    pub name: String,
    pub description: String,
    pub country: String,
    pub city: String,
    pub latitude: f64,
    pub longitude: f64,
    pub network_zone: String,
}

#[derive(Debug, Clone, Deserialize)]
struct SeedDatacenter {
    id: u64,
    name: String,
    description: String,
    location: String,
}

#[derive(Debug, Clone, Deserialize)]
struct SeedServerType {
    id: u64,
    name: String,
    description: String,
    category: String,
    cores: u32,
    memory: serde_json::Number,
    disk: u64,
    storage_type: String,
    cpu_type: String,
    architecture: String,
    locations: Vec<SeedTypeLocation>,
    prices: Vec<SeedPrice>,
}

#[derive(Debug, Clone, Deserialize)]
struct SeedTypeLocation {
    name: String,
    available: bool,
    recommended: bool,
    deprecation: Value,
}

#[derive(Debug, Clone, Deserialize)]
struct SeedPrice {
    location: String,
    monthly_net: serde_json::Number,
    hourly_net: serde_json::Number,
    included_traffic: u64,
    price_per_tb_traffic_net: serde_json::Number,
}

#[derive(Debug, Clone, Deserialize)]
struct SeedIpPrices {
    ipv4: SeedIpPrice,
    ipv6: SeedIpPrice,
}

#[derive(Debug, Clone, Deserialize)]
struct SeedIpPrice {
    monthly_net: serde_json::Number,
    #[serde(default)]
    hourly_net: Option<serde_json::Number>,
}

/// A server type of the catalogue.
#[derive(Debug, Clone)]
pub(crate) struct ServerType {
    pub id: u64,
    pub name: String,
    pub architecture: String,
    pub disk: u64,
    seed: SeedServerType,
}

/// An image of the catalogue.
#[derive(Debug, Clone)]
pub(crate) struct Image {
    pub id: u64,
    pub name: Option<String>,
    pub kind: String,
    pub status: String,
    pub architecture: String,
    pub deprecated: bool,
    pub created: DateTime<Utc>,
    raw: serde_json::Map<String, Value>,
}

/// The whole catalogue, read once.
#[derive(Debug)]
pub(crate) struct Catalog {
    pub locations: Vec<Location>,
    pub server_types: Vec<ServerType>,
    pub images: Vec<Image>,
    datacenters: Vec<SeedDatacenter>,
    vat: Decimal,
    currency: String,
    vat_rate: String,
    primary_ip_prices: SeedIpPrices,
    floating_ip_prices: SeedIpPrices,
    volume_price: Decimal,
    image_price: Decimal,
    backup_percentage: String,
}

fn dec(n: &serde_json::Number) -> Decimal {
    Decimal::from_str(&n.to_string())
        .or_else(|_| Decimal::from_scientific(&n.to_string()))
        .unwrap_or_default()
}

impl Catalog {
    /// Reads the seed compiled into the binary. The seed is part of the source tree and
    /// checked by the tests, so a broken seed is a build defect and stops the emulator.
    pub fn load() -> Self {
        let seed: Seed = serde_json::from_str(SEED).expect("hetzner seed catalogue is valid");
        let vat = Decimal::from_str(&seed.vat_rate).unwrap_or_default() / Decimal::from(100);
        let created = DateTime::parse_from_rfc3339(IMAGE_CREATED)
            .map(|d| d.with_timezone(&Utc))
            .unwrap_or_default();
        let images = seed
            .images
            .into_iter()
            .filter_map(|v| {
                let Value::Object(mut raw) = v else {
                    return None;
                };
                raw.remove("id_provenance");
                raw.insert("created".into(), json!(IMAGE_CREATED));
                let s = |k: &str| raw.get(k).and_then(Value::as_str).map(str::to_string);
                Some(Image {
                    id: raw.get("id")?.as_u64()?,
                    name: s("name"),
                    kind: s("type")?,
                    status: s("status")?,
                    architecture: s("architecture")?,
                    deprecated: raw.get("deprecated").is_some_and(|d| !d.is_null()),
                    created,
                    raw,
                })
            })
            .collect();
        let server_types = seed
            .server_types
            .into_iter()
            .map(|t| ServerType {
                id: t.id,
                name: t.name.clone(),
                architecture: t.architecture.clone(),
                disk: t.disk,
                seed: t,
            })
            .collect();
        Catalog {
            locations: seed.locations,
            server_types,
            images,
            datacenters: seed.datacenters_historical,
            vat,
            currency: seed.currency,
            vat_rate: seed.vat_rate,
            primary_ip_prices: seed.primary_ip_prices,
            floating_ip_prices: seed.floating_ip_prices,
            volume_price: dec(&seed.volume_price_per_gb_month_net),
            image_price: dec(&seed.image_price_per_gb_month_net),
            backup_percentage: seed.server_backup_percentage,
        }
    }

    /// A location by name or by decimal id.
    pub fn location(&self, name_or_id: &str) -> Option<&Location> {
        self.locations
            .iter()
            .find(|l| l.name == name_or_id || l.id.to_string() == name_or_id)
    }

    pub fn location_json(&self, name: &str) -> Value {
        self.location(name).map(|l| json!(l)).unwrap_or(Value::Null)
    }

    /// A server type by name or by decimal id.
    pub fn server_type(&self, name_or_id: &str) -> Option<&ServerType> {
        self.server_types
            .iter()
            .find(|t| t.name == name_or_id || t.id.to_string() == name_or_id)
    }

    pub fn server_type_by_id(&self, id: u64) -> Option<&ServerType> {
        self.server_types.iter().find(|t| t.id == id)
    }

    pub fn image_by_id(&self, id: u64) -> Option<&Image> {
        self.images.iter().find(|i| i.id == id)
    }

    /// An image by id, or by name for the given architecture (names exist once per
    /// architecture).
    pub fn image(&self, name_or_id: &str, architecture: &str) -> Option<&Image> {
        if let Ok(id) = name_or_id.parse::<u64>() {
            return self.image_by_id(id);
        }
        self.images
            .iter()
            .find(|i| i.name.as_deref() == Some(name_or_id) && i.architecture == architecture)
    }

    pub fn image_json(&self, image: &Image) -> Value {
        Value::Object(image.raw.clone())
    }

    /// Traffic included per month with this type in this location, in bytes.
    pub fn included_traffic(&self, t: &ServerType, location: &str) -> Option<u64> {
        t.seed
            .prices
            .iter()
            .find(|p| p.location == location)
            .map(|p| p.included_traffic)
    }

    /// Whether the type is sold in this location at all (sold out or not).
    pub fn offered(&self, t: &ServerType, location: &str) -> bool {
        t.seed.locations.iter().any(|l| l.name == location)
    }

    /// Whether a server of this type can be placed here now.
    pub fn available(&self, t: &ServerType, location: &str, faults: &Faults) -> bool {
        t.seed
            .locations
            .iter()
            .any(|l| l.name == location && l.available)
            && !faults.is_sold_out(&t.name, location)
            && !faults.is_disabled(location)
    }

    /// The datacenter that stands for a location in old clients' `datacenter` fields.
    pub fn datacenter_json(&self, location: &str, faults: &Faults) -> Value {
        self.datacenters
            .iter()
            .find(|d| d.location == location)
            .map(|d| self.render_datacenter(d, faults))
            .unwrap_or(Value::Null)
    }

    fn render_datacenter(&self, d: &SeedDatacenter, faults: &Faults) -> Value {
        let supported: Vec<u64> = self
            .server_types
            .iter()
            .filter(|t| self.offered(t, &d.location))
            .map(|t| t.id)
            .collect();
        let available: Vec<u64> = self
            .server_types
            .iter()
            .filter(|t| self.available(t, &d.location, faults))
            .map(|t| t.id)
            .collect();
        json!({
            "id": d.id,
            "name": d.name,
            "description": d.description,
            "location": self.location_json(&d.location),
            "server_types": {
                "supported": supported,
                "available": available,
                "available_for_migration": available,
            },
        })
    }

    fn net_gross(&self, net: Decimal) -> Value {
        let gross = (net * (Decimal::ONE + self.vat)).round_dp(16);
        json!({"net": format!("{net:.10}"), "gross": format!("{gross:.16}")})
    }

    fn type_prices(&self, t: &ServerType) -> Vec<Value> {
        t.seed
            .prices
            .iter()
            .map(|p| {
                json!({
                    "location": p.location,
                    "price_hourly": self.net_gross(dec(&p.hourly_net)),
                    "price_monthly": self.net_gross(dec(&p.monthly_net)),
                    "included_traffic": p.included_traffic,
                    "price_per_tb_traffic": self.net_gross(dec(&p.price_per_tb_traffic_net)),
                })
            })
            .collect()
    }

    /// A server type with its prices and per-location availability as of now.
    pub fn server_type_json(&self, t: &ServerType, faults: &Faults) -> Value {
        let s = &t.seed;
        let locations: Vec<Value> = s
            .locations
            .iter()
            .map(|l| {
                let id = self.location(&l.name).map(|loc| loc.id).unwrap_or_default();
                json!({
                    "id": id,
                    "name": l.name,
                    "deprecation": l.deprecation,
                    "available": l.available
                        && !faults.is_sold_out(&s.name, &l.name)
                        && !faults.is_disabled(&l.name),
                    "recommended": l.recommended,
                })
            })
            .collect();
        json!({
            "id": s.id,
            "name": s.name,
            "description": s.description,
            "category": s.category,
            "cores": s.cores,
            "memory": s.memory,
            "disk": s.disk,
            "storage_type": s.storage_type,
            "cpu_type": s.cpu_type,
            "architecture": s.architecture,
            "deprecated": false,
            "deprecation": null,
            "prices": self.type_prices(t),
            "locations": locations,
        })
    }

    fn pricing_json(&self) -> Value {
        let ip = |p: &SeedIpPrice, hourly: bool| {
            let locations = self.locations.iter().map(|l| {
                let mut v = json!({
                    "location": l.name,
                    "price_monthly": self.net_gross(dec(&p.monthly_net)),
                });
                if hourly {
                    v["price_hourly"] =
                        self.net_gross(p.hourly_net.as_ref().map(dec).unwrap_or_default());
                }
                v
            });
            locations.collect::<Vec<_>>()
        };
        let server_types: Vec<Value> = self
            .server_types
            .iter()
            .map(|t| json!({"id": t.id, "name": t.name, "prices": self.type_prices(t)}))
            .collect();
        json!({"pricing": {
            "currency": self.currency,
            "vat_rate": self.vat_rate,
            "primary_ips": [
                {"type": "ipv4", "prices": ip(&self.primary_ip_prices.ipv4, true)},
                {"type": "ipv6", "prices": ip(&self.primary_ip_prices.ipv6, true)},
            ],
            "floating_ips": [
                {"type": "ipv4", "prices": ip(&self.floating_ip_prices.ipv4, false)},
                {"type": "ipv6", "prices": ip(&self.floating_ip_prices.ipv6, false)},
            ],
            "floating_ip": {"price_monthly": self.net_gross(dec(&self.floating_ip_prices.ipv4.monthly_net))},
            "image": {"price_per_gb_month": self.net_gross(self.image_price)},
            "volume": {"price_per_gb_month": self.net_gross(self.volume_price)},
            "server_backup": {"percentage": self.backup_percentage},
            "server_types": server_types,
            "load_balancer_types": [],
        }})
    }
}

pub(crate) async fn list_server_types(State(hz): Hs, _: Account, q: ListQuery) -> ApiResult {
    let name = q.get("name");
    let faults = hz.core.faults();
    let items: Vec<Value> = hz
        .catalog
        .server_types
        .iter()
        .filter(|t| name.is_none_or(|n| t.name == n))
        .map(|t| hz.catalog.server_type_json(t, &faults))
        .collect();
    drop(faults);
    page_of(&q, "server_types", items)
}

pub(crate) async fn get_server_type(State(hz): Hs, _: Account, PathId(id): PathId) -> ApiResult {
    let t = hz
        .catalog
        .server_type_by_id(id)
        .ok_or_else(|| ApiError::not_found("server type", id))?;
    let faults = hz.core.faults();
    ok(json!({"server_type": hz.catalog.server_type_json(t, &faults)}))
}

pub(crate) async fn list_locations(State(hz): Hs, _: Account, q: ListQuery) -> ApiResult {
    let name = q.get("name");
    let mut locations: Vec<&Location> = hz
        .catalog
        .locations
        .iter()
        .filter(|l| name.is_none_or(|n| l.name == n))
        .collect();
    let sorts = q.sort(&["id", "name"])?;
    sort_items(&mut locations, &sorts, |l, f| match f {
        "name" => SortValue::Text(l.name.clone()),
        _ => SortValue::Int(l.id),
    });
    page_of(
        &q,
        "locations",
        locations.iter().map(|l| json!(l)).collect(),
    )
}

pub(crate) async fn get_location(State(hz): Hs, _: Account, PathId(id): PathId) -> ApiResult {
    let l = hz
        .catalog
        .locations
        .iter()
        .find(|l| l.id == id)
        .ok_or_else(|| ApiError::not_found("location", id))?;
    ok(json!({"location": l}))
}

fn datacenters_gone() -> ApiError {
    ApiError::new(
        StatusCode::GONE,
        "deprecated_api_endpoint",
        "The datacenters endpoint has been removed",
    )
    .with_details(json!({"announcement": "https://docs.hetzner.cloud/changelog#2025-12-16-phasing-out-datacenters"}))
}

pub(crate) async fn list_datacenters(State(hz): Hs, _: Account, q: ListQuery) -> ApiResult {
    if !hz.options.serve_datacenters {
        return Err(datacenters_gone());
    }
    let name = q.get("name");
    let faults = hz.core.faults();
    let mut dcs: Vec<&SeedDatacenter> = hz
        .catalog
        .datacenters
        .iter()
        .filter(|d| name.is_none_or(|n| d.name == n))
        .collect();
    dcs.sort_by_key(|d| d.id);
    let items = dcs
        .iter()
        .map(|d| hz.catalog.render_datacenter(d, &faults))
        .collect();
    drop(faults);
    let mut extra = serde_json::Map::new();
    extra.insert(
        "recommendation".into(),
        json!(hz.catalog.datacenters.first().map(|d| d.id)),
    );
    page_with(&q, "datacenters", items, extra)
}

pub(crate) async fn get_datacenter(State(hz): Hs, _: Account, PathId(id): PathId) -> ApiResult {
    if !hz.options.serve_datacenters {
        return Err(datacenters_gone());
    }
    let d = hz
        .catalog
        .datacenters
        .iter()
        .find(|d| d.id == id)
        .ok_or_else(|| ApiError::not_found("datacenter", id))?;
    let faults = hz.core.faults();
    ok(json!({"datacenter": hz.catalog.render_datacenter(d, &faults)}))
}

pub(crate) async fn list_images(State(hz): Hs, _: Account, q: ListQuery) -> ApiResult {
    let types = q.all_of("type", &["system", "app", "snapshot", "backup"])?;
    let statuses = q.all_of("status", &["available", "creating", "unavailable"])?;
    let architecture = q.all_of("architecture", &["x86", "arm"])?;
    let include_deprecated = q.flag("include_deprecated")?.unwrap_or(false);
    let bound_to = q.all("bound_to");
    let name = q.get("name");
    let selector = q.selector()?;
    let sorts = q.sort(&["id", "name", "created"])?;
    let mut images: Vec<&Image> = hz
        .catalog
        .images
        .iter()
        .filter(|i| types.is_empty() || types.contains(&i.kind))
        .filter(|i| statuses.is_empty() || statuses.contains(&i.status))
        .filter(|i| architecture.is_empty() || architecture.contains(&i.architecture))
        .filter(|i| include_deprecated || !i.deprecated)
        .filter(|_| bound_to.is_empty())
        .filter(|i| name.is_none_or(|n| i.name.as_deref() == Some(n)))
        .filter(|i| {
            selector.as_ref().is_none_or(|s| {
                let labels = i
                    .raw
                    .get("labels")
                    .and_then(|l| serde_json::from_value(l.clone()).ok())
                    .unwrap_or_default();
                s.matches(&labels)
            })
        })
        .collect();
    sort_items(&mut images, &sorts, |i, f| match f {
        "name" => SortValue::Text(i.name.clone().unwrap_or_default()),
        "created" => SortValue::Time(i.created),
        _ => SortValue::Int(i.id),
    });
    page_of(
        &q,
        "images",
        images.iter().map(|i| hz.catalog.image_json(i)).collect(),
    )
}

pub(crate) async fn get_image(State(hz): Hs, _: Account, PathId(id): PathId) -> ApiResult {
    let image = hz
        .catalog
        .image_by_id(id)
        .ok_or_else(|| ApiError::not_found("image", id))?;
    ok(json!({"image": hz.catalog.image_json(image)}))
}

pub(crate) async fn pricing(State(hz): Hs, _: Account) -> ApiResult {
    ok(hz.catalog.pricing_json())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hetzner_seed_loads_and_prices_carry_vat() {
        let c = Catalog::load();
        assert_eq!(c.locations.len(), 6);
        let cx23 = c.server_type("cx23").unwrap();
        let faults = Faults::default();
        let v = c.server_type_json(cx23, &faults);
        assert_eq!(v["prices"][0]["price_monthly"]["net"], "5.4900000000");
        assert_eq!(
            v["prices"][0]["price_monthly"]["gross"],
            "6.5331000000000000"
        );
        assert_eq!(v["cores"], json!(2));
        assert_eq!(v["locations"][0]["id"], json!(1));
        assert!(c.image("ubuntu-24.04", "arm").is_some());
        assert_ne!(
            c.image("ubuntu-24.04", "arm").unwrap().id,
            c.image("ubuntu-24.04", "x86").unwrap().id
        );
    }
}
