//! The Vultr catalogue (plans, regions, operating systems) from `seed/vultr-catalog.json`,
//! and the routes that serve it: `/v2/plans`, `/v2/regions`,
//! `/v2/regions/{region}/availability`, `/v2/os`.
//!
//! Plans, regions and OS entries are served exactly as captured (field for field), in
//! catalogue order. `plans[].locations` is the static catalogue; live stock is the
//! availability route, which leaves out plans sold out through the control API and every
//! plan of a disabled region.

use std::str::FromStr;
use std::sync::{Arc, LazyLock};

use axum::extract::State;
use axum::http::StatusCode;
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;
use serde::Deserialize;
use serde_json::{Value, json};

use super::Vultr;
use super::http::{Id, Params, Reply, VultrError, json};
use super::page::{Order, paginate};

/// A plan of the catalogue.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub id: String,
    pub kind: String,
    pub vcpu_count: u64,
    pub ram: u64,
    pub disk: u64,
    pub bandwidth: u64,
    pub monthly: Decimal,
    pub hourly: Decimal,
    pub locations: Vec<String>,
    raw: Value,
}

impl Plan {
    /// Whether `?type=` selects this plan: `all`, a plan type (`vc2`, `vhf`, `vhp`, `voc`,
    /// …) or a `voc` family (`voc-g`, `voc-c`, `voc-m`, `voc-s`, matched on the id).
    fn has_type(&self, wanted: &str) -> bool {
        wanted == "all"
            || self.kind == wanted
            || (wanted.starts_with("voc-") && self.id.starts_with(&format!("{wanted}-")))
    }

    /// Plans offered with Windows: at least 2 GB of RAM and a public IPv4.
    fn runs_windows(&self) -> bool {
        self.ram >= 2048 && !self.ipv6_only()
    }

    /// `-v6` plans have no public IPv4.
    pub fn ipv6_only(&self) -> bool {
        self.id.ends_with("-v6")
    }
}

/// A region of the catalogue.
#[derive(Debug, Clone)]
pub(crate) struct Region {
    pub id: String,
    pub options: Vec<String>,
    raw: Value,
}

/// An operating system of the catalogue.
#[derive(Debug, Clone)]
pub(crate) struct Os {
    pub id: u64,
    pub name: String,
    pub family: String,
    raw: Value,
}

/// The whole catalogue.
#[derive(Debug)]
pub(crate) struct Catalog {
    pub plans: Vec<Plan>,
    pub regions: Vec<Region>,
    pub os: Vec<Os>,
}

#[derive(Deserialize)]
struct Seed {
    plans: Vec<Value>,
    regions: Vec<Value>,
    os: Vec<Value>,
}

#[derive(Deserialize)]
struct PlanFields {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    vcpu_count: u64,
    ram: u64,
    disk: u64,
    bandwidth: u64,
    monthly_cost: serde_json::Number,
    hourly_cost: serde_json::Number,
    locations: Vec<String>,
}

#[derive(Deserialize)]
struct RegionFields {
    id: String,
    options: Vec<String>,
}

#[derive(Deserialize)]
struct OsFields {
    id: u64,
    name: String,
    family: String,
}

/// The seed's own annotations (keys starting with `_`) are not part of the wire object.
fn wire_object(mut raw: Value) -> Value {
    if let Value::Object(map) = &mut raw {
        map.retain(|k, _| !k.starts_with('_'));
    }
    raw
}

fn decimal(n: &serde_json::Number) -> Result<Decimal, String> {
    Decimal::from_str(&n.to_string()).map_err(|e| format!("price {n}: {e}"))
}

impl Catalog {
    /// Parses the seed document.
    pub fn parse(text: &str) -> Result<Catalog, String> {
        let seed: Seed = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let plans = seed
            .plans
            .into_iter()
            .map(wire_object)
            .map(|raw| {
                let f: PlanFields =
                    serde_json::from_value(raw.clone()).map_err(|e| format!("plan {raw}: {e}"))?;
                Ok(Plan {
                    monthly: decimal(&f.monthly_cost)?,
                    hourly: decimal(&f.hourly_cost)?,
                    id: f.id,
                    kind: f.kind,
                    vcpu_count: f.vcpu_count,
                    ram: f.ram,
                    disk: f.disk,
                    bandwidth: f.bandwidth,
                    locations: f.locations,
                    raw,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let regions = seed
            .regions
            .into_iter()
            .map(wire_object)
            .map(|raw| {
                let f: RegionFields = serde_json::from_value(raw.clone())
                    .map_err(|e| format!("region {raw}: {e}"))?;
                Ok(Region {
                    id: f.id,
                    options: f.options,
                    raw,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let os = seed
            .os
            .into_iter()
            .map(wire_object)
            .map(|raw| {
                let f: OsFields =
                    serde_json::from_value(raw.clone()).map_err(|e| format!("os {raw}: {e}"))?;
                Ok(Os {
                    id: f.id,
                    name: f.name,
                    family: f.family,
                    raw,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Catalog { plans, regions, os })
    }

    pub fn plan(&self, id: &str) -> Option<&Plan> {
        self.plans.iter().find(|p| p.id == id)
    }

    pub fn region(&self, id: &str) -> Option<&Region> {
        self.regions.iter().find(|r| r.id == id)
    }

    pub fn os(&self, id: u64) -> Option<&Os> {
        self.os.iter().find(|o| o.id == id)
    }
}

/// The catalogue compiled into the binary.
pub(crate) static CATALOG: LazyLock<Catalog> = LazyLock::new(|| {
    Catalog::parse(include_str!("../../seed/vultr-catalog.json"))
        .unwrap_or_else(|e| panic!("seed/vultr-catalog.json is invalid: {e}"))
});

/// A USD amount as a JSON number: integral amounts without a fraction.
pub(crate) fn money(d: Decimal) -> Value {
    let d = d.normalize();
    if d.scale() == 0
        && let Some(i) = d.to_i64()
    {
        return json!(i);
    }
    d.to_f64().map_or(Value::Null, |f| json!(f))
}

/// `GET /v2/plans[?type=][&os=windows]`.
pub(crate) async fn list_plans(State(v): State<Arc<Vultr>>, params: Params) -> Reply {
    let kind = params.get("type").unwrap_or("all");
    let windows = match params.get("os") {
        None => false,
        Some(os) if os.eq_ignore_ascii_case("windows") => true,
        Some(os) => {
            return Err(VultrError::bad_request(format!(
                "Invalid os filter {os:?}: the only accepted value is \"windows\"."
            )));
        }
    };
    let items = v
        .catalog
        .plans
        .iter()
        .filter(|p| p.has_type(kind) && (!windows || p.runs_windows()))
        .map(|p| (p.id.clone(), p.raw.clone()))
        .collect();
    let page = paginate(items, &params, Order::Listed)?;
    json(
        StatusCode::OK,
        json!({"plans": page.items, "meta": page.meta()}),
    )
}

/// `GET /v2/regions`.
pub(crate) async fn list_regions(State(v): State<Arc<Vultr>>, params: Params) -> Reply {
    let items = v
        .catalog
        .regions
        .iter()
        .map(|r| (r.id.clone(), r.raw.clone()))
        .collect();
    let page = paginate(items, &params, Order::Listed)?.with_lookahead_total();
    json(
        StatusCode::OK,
        json!({"regions": page.items, "meta": page.meta()}),
    )
}

/// `GET /v2/regions/{region}/availability[?type=]`: live stock.
pub(crate) async fn region_availability(
    State(v): State<Arc<Vultr>>,
    Id(region): Id<String>,
    params: Params,
) -> Reply {
    if v.catalog.region(&region).is_none() {
        return Err(VultrError::not_found("Invalid region."));
    }
    let kind = params.get("type").unwrap_or("all");
    let faults = v.core.faults();
    let disabled = faults.is_disabled(&region);
    let plans: Vec<&str> = v
        .catalog
        .plans
        .iter()
        .filter(|p| {
            !disabled
                && p.has_type(kind)
                && p.locations.contains(&region)
                && !faults.is_sold_out(&p.id, &region)
        })
        .map(|p| p.id.as_str())
        .collect();
    drop(faults);
    json(StatusCode::OK, json!({"available_plans": plans}))
}

/// `GET /v2/os`.
pub(crate) async fn list_os(State(v): State<Arc<Vultr>>, params: Params) -> Reply {
    let items = v
        .catalog
        .os
        .iter()
        .map(|o| (o.id.to_string(), o.raw.clone()))
        .collect();
    let page = paginate(items, &params, Order::Listed)?;
    json(
        StatusCode::OK,
        json!({"os": page.items, "meta": page.meta()}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_parses_with_the_documented_plans() {
        let c = &*CATALOG;
        assert_eq!(c.plans.len(), 65);
        let p = c.plan("vc2-1c-1gb").unwrap();
        assert_eq!((p.vcpu_count, p.ram, p.disk), (1, 1024, 25));
        assert_eq!(p.monthly, Decimal::from(5));
        assert_eq!(p.hourly, Decimal::new(7, 3));
        assert!(c.region("fra").is_some());
        assert_eq!(c.os(2284).unwrap().family, "ubuntu");
        let all = serde_json::to_string(&c.os.iter().map(|o| &o.raw).collect::<Vec<_>>()).unwrap();
        assert!(
            !all.contains("\"_"),
            "seed annotations stay out of the wire objects"
        );
    }

    #[test]
    fn type_filters_match_types_and_voc_families() {
        let c = &*CATALOG;
        let g: Vec<&str> = c
            .plans
            .iter()
            .filter(|p| p.has_type("voc-g"))
            .map(|p| p.id.as_str())
            .collect();
        assert!(!g.is_empty());
        assert!(g.iter().all(|id| id.starts_with("voc-g-")));
        assert!(
            c.plans
                .iter()
                .filter(|p| p.has_type("vc2"))
                .all(|p| p.kind == "vc2")
        );
        assert!(!c.plan("vc2-1c-1gb").unwrap().runs_windows());
        assert!(c.plan("vc2-1c-2gb").unwrap().runs_windows());
    }

    #[test]
    fn money_drops_integral_fractions() {
        assert_eq!(money(Decimal::new(500, 2)), json!(5));
        assert_eq!(money(Decimal::new(125, 2)), json!(1.25));
    }
}
