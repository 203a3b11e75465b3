//! Vultr v2 wire types, as the API sends them (the instance uses the flat `v6_network`,
//! `v6_main_ip`, `v6_network_size` keys seen on the wire, not the published schema's
//! `v6_networks` array).
//!
//! Costs are JSON numbers on the wire; they are read into [`Decimal`] from the number's
//! shortest decimal representation (`0.007` stays `0.007`), never kept as floats. Memory is
//! in MB (MiB) on the wire; [`Plan::memory_gib`] gives exact GiB.

use chrono::{DateTime, FixedOffset};
use orc_common::{Money, Period};
use rust_decimal::Decimal;
use serde::{Deserialize, Deserializer};

use orc_common::Currency;

use crate::ids::{
    VultrBlockId, VultrInstanceId, VultrOsId, VultrPlanId, VultrRegionId, VultrReservedIpId,
    VultrSshKeyId, VultrVpcId,
};
use crate::secret::Secret;

/// A plan (`vc2-2c-4gb`) and where it is in the catalogue.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Plan {
    pub id: VultrPlanId,
    pub vcpu_count: u32,
    /// Memory in MB (MiB).
    pub ram: u64,
    /// Disk in GB.
    pub disk: u64,
    #[serde(default = "one")]
    pub disk_count: u32,
    /// Monthly transfer in GB.
    #[serde(default)]
    pub bandwidth: u64,
    /// USD per month.
    pub monthly_cost: Decimal,
    /// USD per hour.
    #[serde(default)]
    pub hourly_cost: Option<Decimal>,
    /// `vc2`, `vhf`, `vhp`, `voc`, …
    #[serde(rename = "type")]
    pub kind: String,
    /// Regions where the catalogue lists the plan; live stock is
    /// [`crate::VultrClient::region_availability`].
    #[serde(default)]
    pub locations: Vec<VultrRegionId>,
    #[serde(default)]
    pub disk_type: Option<String>,
    #[serde(default)]
    pub cpu_vendor: Option<String>,
    #[serde(default)]
    pub storage_type: Option<String>,
    #[serde(default)]
    pub vcpu_type: Option<String>,
    #[serde(default)]
    pub invoice_type: Option<String>,
}

fn one() -> u32 {
    1
}

impl Plan {
    /// Memory in GiB, exact (`512` MB is `0.5`).
    pub fn memory_gib(&self) -> Decimal {
        Decimal::from(self.ram) / Decimal::from(1024)
    }

    /// The monthly price.
    pub fn monthly(&self) -> Money {
        Money::new(self.monthly_cost, Currency::USD, Period::Month)
    }

    /// The hourly price, when the catalogue gives one.
    pub fn hourly(&self) -> Option<Money> {
        self.hourly_cost
            .map(|amount| Money::new(amount, Currency::USD, Period::Hour))
    }
}

/// A region (`fra`, `ewr`, …).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Region {
    pub id: VultrRegionId,
    #[serde(default)]
    pub city: String,
    #[serde(default)]
    pub country: String,
    #[serde(default)]
    pub continent: String,
    #[serde(default)]
    pub options: Vec<String>,
}

/// An operating system image.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Os {
    pub id: VultrOsId,
    pub name: String,
    #[serde(default)]
    pub arch: String,
    #[serde(default)]
    pub family: String,
}

/// An instance's billing/lifecycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InstanceStatus {
    Pending,
    Active,
    Suspended,
    Resizing,
    #[serde(other)]
    Unknown,
}

/// Whether the instance is powered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PowerStatus {
    Running,
    Stopped,
    #[serde(other)]
    Unknown,
}

/// Installation progress of an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerStatus {
    None,
    Locked,
    Installingbooting,
    Ok,
    #[serde(other)]
    Unknown,
}

/// A virtual machine.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Instance {
    pub id: VultrInstanceId,
    #[serde(default)]
    pub os: String,
    /// Memory in MB.
    #[serde(default)]
    pub ram: u64,
    /// Disk in GB (0 while installing).
    #[serde(default)]
    pub disk: u64,
    /// `0.0.0.0` until the instance is active.
    #[serde(default)]
    pub main_ip: String,
    #[serde(default)]
    pub vcpu_count: u32,
    pub region: VultrRegionId,
    pub plan: VultrPlanId,
    pub date_created: DateTime<FixedOffset>,
    pub status: InstanceStatus,
    pub power_status: PowerStatus,
    pub server_status: ServerStatus,
    #[serde(default)]
    pub allowed_bandwidth: u64,
    #[serde(default)]
    pub netmask_v4: String,
    #[serde(default)]
    pub gateway_v4: String,
    #[serde(default)]
    pub v6_network: String,
    #[serde(default)]
    pub v6_main_ip: String,
    #[serde(default)]
    pub v6_network_size: u32,
    #[serde(default)]
    pub label: String,
    #[serde(default)]
    pub internal_ip: String,
    #[serde(default)]
    pub hostname: String,
    #[serde(default)]
    pub os_id: Option<VultrOsId>,
    #[serde(default)]
    pub app_id: Option<u64>,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub image_id: Option<String>,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub firewall_group_id: Option<String>,
    #[serde(default)]
    pub features: Vec<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    /// Only in the create answer (and for a few minutes after).
    #[serde(default, deserialize_with = "empty_secret_as_none")]
    pub default_password: Option<Secret>,
}

/// One IPv4 address of an instance, as `GET /instances/{id}/ipv4` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct InstanceIpv4 {
    pub ip: String,
    #[serde(default)]
    pub netmask: String,
    #[serde(default)]
    pub gateway: String,
    /// `main_ip`, `secondary_ip` or `private`.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// The reverse DNS name (for a private address, the address itself).
    #[serde(default)]
    pub reverse: String,
}

/// A VPC network.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Vpc {
    pub id: VultrVpcId,
    pub region: VultrRegionId,
    #[serde(default)]
    pub date_created: Option<DateTime<FixedOffset>>,
    #[serde(default)]
    pub description: String,
    pub v4_subnet: String,
    pub v4_subnet_mask: u8,
}

/// A reserved IP (IPv4 address or IPv6 /64).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ReservedIp {
    pub id: VultrReservedIpId,
    pub region: VultrRegionId,
    /// `v4` or `v6`.
    pub ip_type: String,
    pub subnet: String,
    pub subnet_size: u8,
    #[serde(default)]
    pub label: String,
    /// The instance it is attached to (empty on the wire when free).
    #[serde(default, deserialize_with = "empty_as_none")]
    pub instance_id: Option<String>,
}

impl ReservedIp {
    /// The instance holding the address, if any.
    pub fn instance(&self) -> Option<VultrInstanceId> {
        self.instance_id.clone().map(VultrInstanceId)
    }
}

/// An SSH public key.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SshKey {
    pub id: VultrSshKeyId,
    #[serde(default)]
    pub date_created: Option<DateTime<FixedOffset>>,
    pub name: String,
    pub ssh_key: String,
}

/// A block storage volume.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Block {
    pub id: VultrBlockId,
    /// USD per month.
    pub cost: Decimal,
    #[serde(default)]
    pub status: String,
    pub size_gb: u64,
    pub region: VultrRegionId,
    /// The instance it is attached to (empty on the wire when detached).
    #[serde(default, deserialize_with = "empty_as_none")]
    pub attached_to_instance: Option<String>,
    #[serde(default)]
    pub date_created: Option<DateTime<FixedOffset>>,
    #[serde(default)]
    pub label: String,
    #[serde(default)]
    pub mount_id: String,
    #[serde(default)]
    pub block_type: Option<String>,
}

/// The account's balance and permissions. Money is USD; a negative balance is credit.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Account {
    pub name: String,
    pub email: String,
    #[serde(default)]
    pub acls: Vec<String>,
    pub balance: Decimal,
    pub pending_charges: Decimal,
    #[serde(default)]
    pub last_payment_date: String,
    #[serde(default)]
    pub last_payment_amount: Decimal,
}

fn empty_as_none<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let value = Option::<String>::deserialize(d)?;
    Ok(value.filter(|s| !s.is_empty()))
}

fn empty_secret_as_none<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Secret>, D::Error> {
    let value = Option::<String>::deserialize(d)?;
    Ok(value.filter(|s| !s.is_empty()).map(Secret::new))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn dec(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    #[test]
    fn json_numbers_become_exact_decimals() {
        let json = r#"{"id":"vc2-1c-0.5gb","vcpu_count":1,"ram":512,"disk":10,"bandwidth":512,
            "monthly_cost":3.5,"hourly_cost":0.007,"type":"vc2","locations":["ewr"]}"#;
        let plan: Plan = serde_json::from_str(json).unwrap();
        assert_eq!(plan.monthly_cost, dec("3.5"));
        assert_eq!(plan.hourly_cost, Some(dec("0.007")));
        assert_eq!(plan.memory_gib(), dec("0.5"));
        assert_eq!(plan.monthly().to_string(), "3.5 USD/month");
    }

    #[test]
    fn empty_attachment_strings_mean_none() {
        let json = r#"{"id":"r1","region":"fra","ip_type":"v4","subnet":"192.0.2.1","subnet_size":32,"label":"","instance_id":""}"#;
        let ip: ReservedIp = serde_json::from_str(json).unwrap();
        assert_eq!(ip.instance(), None);
    }

    proptest! {
        #[test]
        fn cents_round_trip_through_json_numbers(cents in 0u64..100_000_000, scale in 0u32..4) {
            let expected = Decimal::new(cents as i64, scale);
            let json = format!(r#"{{"name":"a","email":"e","balance":{expected},"pending_charges":0}}"#);
            let account: Account = serde_json::from_str(&json).unwrap();
            prop_assert_eq!(account.balance, expected);
        }
    }
}
