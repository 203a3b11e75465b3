//! What a tenant may ask for in a region class: the shapes its sites sell and, at one shape,
//! the operating systems they boot. Stock does not matter here (a sold-out plan is still
//! offered: it comes back); only what the catalogs list and the operator's config allows.
//!
//! The quote uses this to word an `unplaceable` refusal, and the catalog sent to the zone
//! lists each class's shapes from it. Pure: never calls a cloud or reads a clock.

use std::collections::BTreeSet;

use orc_common::{Architecture, Shape};

use crate::catalog::{CatalogSnapshot, Catalogs, Plan};
use crate::ids::OsId;
use crate::maps::{RegionClass, Site};
use crate::params::{CloudConfig, Config};
use crate::quote::{image_named, plan_allowed};

/// How many offered shapes an `unplaceable` refusal names at most.
pub const NEAREST_SHOWN: usize = 6;

/// The sites of `class` that could serve a tenant at all: the cloud is keyed and enabled,
/// its location allowed, its catalog read.
fn serving_sites<'a>(
    class: &'a RegionClass,
    config: &'a Config,
    catalogs: &'a Catalogs,
) -> impl Iterator<Item = (&'a Site, &'a CloudConfig, &'a CatalogSnapshot)> + 'a {
    class.sites.iter().filter_map(move |site| {
        let cloud = config
            .cloud(site.cloud)
            .filter(|c| c.is_keyed() && c.enabled)?;
        if cloud
            .regions
            .as_ref()
            .is_some_and(|allowed| !allowed.contains(&site.location))
        {
            return None;
        }
        Some((site, cloud, catalogs.get(site.cloud)?))
    })
}

/// The plans listed at the site that the plan allow-list admits, whatever their stock.
fn listed_plans<'a>(
    site: &Site,
    cloud: &'a CloudConfig,
    snapshot: &'a CatalogSnapshot,
    catalogs: &'a Catalogs,
) -> impl Iterator<Item = &'a Plan> + 'a {
    catalogs
        .plans_at(site.cloud, &site.location)
        .iter()
        .filter_map(|lp| snapshot.plans.get(lp.plan))
        .filter(|plan| plan_allowed(cloud, plan))
}

fn shape_of(plan: &Plan) -> Option<Shape> {
    Some(Shape {
        vcpus: plan.vcpus,
        memory_gib: plan.memory_gib_exact()?,
        arch: plan.arch,
        disks_gib: Vec::new(),
    })
}

/// Every shape (vCPUs, whole GiB, architecture; no disks) some site of `class` sells, in
/// order of vCPUs, then memory, then architecture.
pub fn offered_shapes(class: &RegionClass, config: &Config, catalogs: &Catalogs) -> Vec<Shape> {
    let mut keys = BTreeSet::new();
    for (site, cloud, snapshot) in serving_sites(class, config, catalogs) {
        for plan in listed_plans(site, cloud, snapshot, catalogs) {
            if let Some(shape) = shape_of(plan) {
                keys.insert(shape.list_key());
            }
        }
    }
    keys.into_iter()
        .map(|(vcpus, memory_gib, arch)| Shape {
            vcpus,
            memory_gib,
            arch,
            disks_gib: Vec::new(),
        })
        .collect()
}

/// The OS ids a site of `class` boots at exactly `shape` (disks aside): the OS map has a
/// selector for the site's cloud that resolves to an image for the plan's architecture, and
/// the image allow-list admits it.
pub fn offered_os(
    class: &RegionClass,
    config: &Config,
    catalogs: &Catalogs,
    shape: &Shape,
) -> Vec<OsId> {
    let mut found = BTreeSet::new();
    for (site, cloud, snapshot) in serving_sites(class, config, catalogs) {
        let archs: BTreeSet<Architecture> = listed_plans(site, cloud, snapshot, catalogs)
            .filter(|plan| {
                plan.vcpus == shape.vcpus
                    && plan.arch == shape.arch
                    && plan.memory_gib_exact() == Some(shape.memory_gib)
            })
            .map(|plan| plan.arch)
            .collect();
        for (id, entry) in config.os_map.entries() {
            let Some(selector) = entry.selectors.get(&site.cloud) else {
                continue;
            };
            let boots = archs.iter().any(|&arch| {
                selector
                    .resolve(&snapshot.images, arch)
                    .is_some_and(|image| {
                        cloud
                            .images
                            .as_ref()
                            .is_none_or(|allowed| image_named(allowed, image))
                    })
            });
            if boots {
                found.insert(id.clone());
            }
        }
    }
    found.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(vcpus: u32, memory_gib: u32) -> Shape {
        Shape {
            vcpus,
            memory_gib,
            arch: Architecture::X86_64,
            disks_gib: Vec::new(),
        }
    }

    #[test]
    fn the_nearest_shapes_are_the_closest_in_list_order() {
        let offered: Vec<Shape> = [
            (1, 1),
            (1, 2),
            (2, 4),
            (2, 8),
            (4, 8),
            (4, 16),
            (8, 16),
            (8, 32),
            (16, 64),
        ]
        .into_iter()
        .map(|(c, m)| shape(c, m))
        .collect();
        let nearest = shape(3, 7).nearest(&offered, NEAREST_SHOWN);
        let words: Vec<String> = nearest.iter().map(ToString::to_string).collect();
        assert_eq!(
            words,
            [
                "1 vCPU · 1 GiB",
                "1 vCPU · 2 GiB",
                "2 vCPU · 4 GiB",
                "2 vCPU · 8 GiB",
                "4 vCPU · 8 GiB",
                "4 vCPU · 16 GiB"
            ]
        );
        let mut arm = shape(4, 8);
        arm.arch = Architecture::Arm64;
        let mixed = vec![shape(16, 64), arm.clone(), shape(4, 8)];
        assert_eq!(
            arm.nearest(&mixed, 1),
            [arm.clone()],
            "the same architecture comes first"
        );
    }
}
