//! Every string a tenant can read from the partner, in one place.
//!
//! Invariant: these functions take only neutral inputs — a shape, a class id or title, a
//! neutral site name, a node id — and never a cloud, plan, image, city or cloud location, so
//! no tenant-facing string can name one. A test builds many quote outcomes over the real seed
//! catalogs and checks every tenant string against every cloud name, plan id, city and
//! location id they contain.
//!
//! Operators get full detail elsewhere ([`crate::explain`], logs).

use orc_common::Shape;

/// A node's price line: `2 vCPU · 4 GiB · eu-central`.
pub fn price_line(shape: &Shape, class: &str) -> String {
    format!("{shape} · {class}")
}

/// A public pool's address price line: `public IPv4 · eu-central`.
pub fn pool_address_line(class: &str) -> String {
    format!("public IPv4 · {class}")
}

/// Every site of the class is out of stock, at a cap, cooling down or retired.
pub fn no_capacity(class_title: &str) -> String {
    format!("no capacity in {class_title} right now")
}

/// A public pool's pinned site cannot take another node of this shape.
pub fn no_capacity_pinned(class_title: &str) -> String {
    format!("no capacity in {class_title} for this shape right now")
}

/// No site of the class sells the shape at all: the nearest shapes offered instead.
pub fn shape_not_offered(class_title: &str, shape: &Shape, nearest: &[Shape]) -> String {
    if nearest.is_empty() {
        return format!("no site in {class_title} offers {shape}, nor any other shape now");
    }
    format!(
        "no site in {class_title} offers {shape}; nearest offered: {}",
        list(nearest)
    )
}

/// Sites of the class sell the shape, but none boots the OS at it: the OS ids they do boot.
pub fn os_not_offered(class_title: &str, os: &str, shape: &Shape, offered: &[String]) -> String {
    if offered.is_empty() {
        return format!("no site in {class_title} offers {os} at {shape}");
    }
    format!(
        "no site in {class_title} offers {os} at {shape}; offered at this shape: {}",
        offered.join(", ")
    )
}

/// Extra disks were asked for and no site of the class that sells the shape offers them.
pub fn disks_not_offered(class_title: &str, shape: &Shape) -> String {
    format!("no site in {class_title} offers extra disks at {shape}; ask without disks")
}

fn list(shapes: &[Shape]) -> String {
    shapes
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A cheaper capped cloud is being counted after a failover or roll.
pub fn counting() -> String {
    "counting capacity, try again shortly".to_string()
}

/// A transient failure (or a cloud that sits out while its count is retried).
pub fn could_not_finish(class_title: &str) -> String {
    format!("could not finish in {class_title} right now; it will be retried")
}

/// Only the provider's operator can fix this (no key, no image for the OS, …).
pub fn needs_operator(node: &str, site: &str) -> String {
    format!(
        "node {node} cannot be created at site {site} until the provider's operator changes its configuration"
    )
}

/// Only the provider's operator can fix this, and no site is involved (unknown class).
pub fn needs_operator_in_class(node: &str, class: &str) -> String {
    format!(
        "node {node} cannot be created in {class} until the provider's operator changes its configuration"
    )
}

/// Any other create failure; the node takes its normal backoff.
pub fn could_not_create(node: &str, site: &str) -> String {
    format!("node {node} could not be created at site {site} this time")
}

/// Deploy progress: the site's private network and address are being prepared.
pub fn progress_preparing_site(site: &str) -> String {
    format!("preparing site {site}")
}

/// Deploy progress: the machine is being created.
pub fn progress_creating() -> String {
    "creating the machine".to_string()
}

/// Deploy progress: the extra disks are being attached.
pub fn progress_disks() -> String {
    "attaching the extra disks".to_string()
}

/// Deploy progress: the site gateway is taking its addresses.
pub fn progress_gateway_addresses() -> String {
    "connecting the site gateway".to_string()
}

/// Deploy progress: waiting for the machine to come up.
pub fn progress_starting() -> String {
    "waiting for the machine to start".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use orc_common::Architecture;

    #[test]
    fn price_line_reads_like_the_guide() {
        let shape = Shape {
            vcpus: 2,
            memory_gib: 4,
            arch: Architecture::X86_64,
            disks_gib: vec![],
        };
        assert_eq!(
            price_line(&shape, "eu-central"),
            "2 vCPU · 4 GiB · eu-central"
        );
        assert_eq!(
            no_capacity_pinned("Europe Central"),
            "no capacity in Europe Central for this shape right now"
        );
    }
}
