//! The Validate view: drafts of `regions`, `os_map`, `gateway` and `ptr_domain` checked with
//! the same parsers the partner uses at start, written back normalised, and — when catalogs
//! and live sites are known — annotated with warnings an operator should read before applying
//! them (a location not sold, an OS that resolves nowhere, a live site removed or remapped).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use orc_common::Architecture;
use serde::Serialize;

use crate::catalog::Catalogs;
use crate::ids::SiteName;
use crate::maps::{GatewayShape, MapError, OsMap, PtrDomain, RegionMap};
use crate::params;
use crate::state::LiveSite;

/// The drafts pasted into the view; `None` means not given.
#[derive(Debug, Clone, Default)]
pub struct Drafts {
    pub regions: Option<String>,
    pub os_map: Option<String>,
    pub gateway: Option<String>,
    pub ptr_domain: Option<String>,
}

/// The verdict on one draft.
#[derive(Debug, Clone, Serialize)]
pub struct DraftReport {
    /// The param name.
    pub param: &'static str,
    /// The normalised param text, when the draft is valid.
    pub normalised: Option<String>,
    /// Every problem, when it is not.
    pub errors: Vec<String>,
    /// Things to check before applying a valid draft.
    pub warnings: Vec<String>,
}

/// The verdict on every draft given.
#[derive(Debug, Clone, Serialize)]
pub struct ValidateReport {
    pub drafts: Vec<DraftReport>,
}

impl ValidateReport {
    /// Whether every draft is valid.
    pub fn is_valid(&self) -> bool {
        self.drafts.iter().all(|d| d.errors.is_empty())
    }

    /// Plain text: each param's normalised text or its errors, then its warnings.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for d in &self.drafts {
            match &d.normalised {
                Some(text) => {
                    let _ = writeln!(out, "{} (valid):\n{text}", d.param);
                }
                None => {
                    let _ = writeln!(out, "{} (invalid):", d.param);
                    for e in &d.errors {
                        let _ = writeln!(out, "  error: {e}");
                    }
                }
            }
            for w in &d.warnings {
                let _ = writeln!(out, "  warning: {w}");
            }
        }
        out
    }
}

fn report<T>(
    param: &'static str,
    parsed: Result<T, Vec<MapError>>,
    normalise: impl Fn(&T) -> String,
    warn: impl Fn(&T) -> Vec<String>,
) -> DraftReport {
    match parsed {
        Ok(value) => DraftReport {
            param,
            normalised: Some(normalise(&value)),
            errors: Vec::new(),
            warnings: warn(&value),
        },
        Err(errors) => DraftReport {
            param,
            normalised: None,
            errors: errors.iter().map(ToString::to_string).collect(),
            warnings: Vec::new(),
        },
    }
}

fn region_warnings(
    map: &RegionMap,
    catalogs: &Catalogs,
    live: &BTreeMap<SiteName, LiveSite>,
) -> Vec<String> {
    let mut warnings = Vec::new();
    for (class, site) in map.sites() {
        if let Some(snapshot) = catalogs.get(site.cloud)
            && !snapshot.sells_at(&site.location)
        {
            warnings.push(format!(
                "site {} of {class}: {}:{} is not sold right now; it is left out of quotes",
                site.name, site.cloud, site.location
            ));
        }
    }
    for (name, at) in live {
        match map.site(name.as_str()) {
            None => warnings.push(format!(
                "live site {name} (at {}:{}) is removed by this draft",
                at.cloud, at.location
            )),
            Some((_, site)) if site.cloud != at.cloud || site.location != at.location => {
                warnings.push(format!(
                    "live site {name} is at {}:{} but this draft maps it to {}:{}",
                    at.cloud, at.location, site.cloud, site.location
                ));
            }
            Some(_) => {}
        }
    }
    warnings
}

fn os_warnings(map: &OsMap, catalogs: &Catalogs) -> Vec<String> {
    let mut warnings = Vec::new();
    for (id, entry) in map.entries() {
        let mut resolved_anywhere = false;
        for (cloud, selector) in &entry.selectors {
            let Some(snapshot) = catalogs.get(*cloud) else {
                resolved_anywhere = true;
                continue;
            };
            let found = [Architecture::X86_64, Architecture::Arm64]
                .iter()
                .any(|&arch| selector.resolve(&snapshot.images, arch).is_some());
            if found {
                resolved_anywhere = true;
            } else {
                warnings.push(format!("{id}: no image on {cloud} matches its selector"));
            }
        }
        if !resolved_anywhere {
            warnings.push(format!(
                "{id} resolves on no cloud; tenants cannot place it"
            ));
        }
    }
    warnings
}

/// Checks every draft given, with warnings from `catalogs` and the live sites.
pub fn validate_drafts(
    drafts: &Drafts,
    catalogs: &Catalogs,
    live: &BTreeMap<SiteName, LiveSite>,
) -> ValidateReport {
    let mut out = Vec::new();
    if let Some(text) = &drafts.regions {
        out.push(report(
            params::REGIONS,
            RegionMap::parse(text),
            RegionMap::to_normalised_json,
            |m| region_warnings(m, catalogs, live),
        ));
    }
    if let Some(text) = &drafts.os_map {
        out.push(report(
            params::OS_MAP,
            OsMap::parse(text),
            OsMap::to_normalised_json,
            |m| os_warnings(m, catalogs),
        ));
    }
    if let Some(text) = &drafts.gateway {
        out.push(report(
            params::GATEWAY,
            GatewayShape::parse(text),
            GatewayShape::to_normalised_json,
            |_| Vec::new(),
        ));
    }
    if let Some(text) = &drafts.ptr_domain {
        out.push(report(
            params::PTR_DOMAIN,
            PtrDomain::parse(text),
            |d| d.as_str().to_string(),
            |_| Vec::new(),
        ));
    }
    ValidateReport { drafts: out }
}
