//! What a Robot product is made of.
//!
//! Robot's API names a server's product (`AX52`) but says nothing about its processor or
//! memory, so the provider carries a table of the products it knows. Operators add or
//! correct entries in the account config; a product in neither reports
//! [`ProductSpec::UNKNOWN`] (1 vCPU, 1 GiB) so that it is offered, but only to the smallest
//! shapes, until someone configures it.

use std::collections::BTreeMap;

use orc_common::Architecture;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

/// The hardware of one product, as far as placement cares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProductSpec {
    /// Hardware threads.
    pub vcpus: u32,
    /// Installed memory.
    pub memory_gib: u32,
    /// Usable disk space once the disks are mirrored (software RAID 1).
    #[serde(default)]
    pub disk_gib: u32,
    /// Processor architecture.
    #[serde(default = "x86_64")]
    pub arch: Architecture,
    /// The graphics card, for GPU products.
    #[serde(default)]
    pub gpu: Option<String>,
    /// What a claimed server costs per hour in EUR, for quotes (a decimal string). The
    /// servers are already paid for by contract, so nothing configured means zero.
    #[serde(default)]
    pub hourly_eur: Option<Decimal>,
}

fn x86_64() -> Architecture {
    Architecture::X86_64
}

impl ProductSpec {
    /// What a product nobody described reports.
    pub const UNKNOWN: ProductSpec = ProductSpec {
        vcpus: 1,
        memory_gib: 1,
        disk_gib: 0,
        arch: Architecture::X86_64,
        gpu: None,
        hourly_eur: None,
    };

    const fn x86(vcpus: u32, memory_gib: u32, disk_gib: u32) -> ProductSpec {
        ProductSpec {
            vcpus,
            memory_gib,
            disk_gib,
            arch: Architecture::X86_64,
            gpu: None,
            hourly_eur: None,
        }
    }
}

/// The products the provider knows without configuration: Hetzner's published hardware of
/// each line (threads, memory, mirrored NVMe capacity).
pub fn builtin_products() -> BTreeMap<String, ProductSpec> {
    let gpu = |mut spec: ProductSpec, card: &str| {
        spec.gpu = Some(card.to_string());
        spec
    };
    BTreeMap::from([
        // Intel Core i5-13500 (14 cores, 20 threads), 64 GB DDR4, 2 × 1.92 TB NVMe.
        (
            "GEX44".to_string(),
            gpu(ProductSpec::x86(20, 64, 1788), "NVIDIA RTX 4000 SFF Ada"),
        ),
        // Intel Xeon Gold 5412U (24 cores, 48 threads), 128 GB DDR5 ECC, 2 × 1.92 TB NVMe.
        (
            "GEX130".to_string(),
            gpu(ProductSpec::x86(48, 128, 1788), "NVIDIA RTX 6000 Ada"),
        ),
        // AMD Ryzen 5 3600 (6 cores, 12 threads), 64 GB DDR4, 2 × 512 GB NVMe.
        ("AX41-NVMe".to_string(), ProductSpec::x86(12, 64, 476)),
        // AMD Ryzen 7 PRO 8700GE (8 cores, 16 threads), 64 GB DDR5 ECC, 2 × 512 GB NVMe.
        ("AX42".to_string(), ProductSpec::x86(16, 64, 476)),
        // AMD Ryzen 7 7700 (8 cores, 16 threads), 64 GB DDR5, 2 × 1 TB NVMe.
        ("AX52".to_string(), ProductSpec::x86(16, 64, 931)),
        // AMD Ryzen 9 7950X3D (16 cores, 32 threads), 128 GB DDR5 ECC, 2 × 1.92 TB NVMe.
        ("AX102".to_string(), ProductSpec::x86(32, 128, 1788)),
        // Intel Core i5-13500 (14 cores, 20 threads), 64 GB DDR4, 2 × 512 GB NVMe.
        ("EX44".to_string(), ProductSpec::x86(20, 64, 476)),
    ])
}

/// The built-in table with the operator's entries laid over it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProductTable {
    products: BTreeMap<String, ProductSpec>,
}

impl ProductTable {
    /// The built-in products, then `overrides` (which win).
    pub fn with_overrides(overrides: &BTreeMap<String, ProductSpec>) -> Self {
        let mut products = builtin_products();
        products.extend(overrides.iter().map(|(k, v)| (k.clone(), v.clone())));
        ProductTable { products }
    }

    /// The spec of `product`, or `None` when nobody described it.
    pub fn known(&self, product: &str) -> Option<&ProductSpec> {
        self.products.get(product)
    }

    /// The spec of `product`, [`ProductSpec::UNKNOWN`] when nobody described it.
    pub fn spec(&self, product: &str) -> ProductSpec {
        self.known(product).cloned().unwrap_or(ProductSpec::UNKNOWN)
    }

    /// Every described product, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &ProductSpec)> {
        self.products.iter()
    }
}

impl Default for ProductTable {
    fn default() -> Self {
        ProductTable::with_overrides(&BTreeMap::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_knows_the_listed_lines_and_overrides_win() {
        let table = ProductTable::default();
        for name in ["GEX44", "GEX130", "AX41-NVMe", "AX52", "AX102", "EX44"] {
            assert!(table.known(name).is_some(), "{name} missing");
        }
        assert_eq!(table.spec("AX102").vcpus, 32);
        assert_eq!(table.spec("AX102").memory_gib, 128);
        assert!(table.spec("GEX44").gpu.is_some());
        assert_eq!(table.spec("SB-MYSTERY"), ProductSpec::UNKNOWN);
        assert_eq!(
            (ProductSpec::UNKNOWN.vcpus, ProductSpec::UNKNOWN.memory_gib),
            (1, 1)
        );

        let overrides = BTreeMap::from([
            ("SB-MYSTERY".to_string(), ProductSpec::x86(8, 32, 0)),
            ("AX52".to_string(), ProductSpec::x86(16, 128, 931)),
        ]);
        let table = ProductTable::with_overrides(&overrides);
        assert_eq!(table.spec("SB-MYSTERY").vcpus, 8);
        assert_eq!(table.spec("AX52").memory_gib, 128);
        assert_eq!(table.spec("EX44").vcpus, 20);
    }
}
