//! Hetzner Cloud wire types, as the official API description defines them.
//!
//! Prices are decimal strings on the wire and [`Decimal`] here (never floats); memory is a
//! JSON number of GB that is read as a [`Decimal`] so `0.5` stays exact. Enumerations have
//! an `Unknown` catch-all so a value added by Hetzner does not break decoding.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use orc_common::{Architecture, Currency, Money, Period};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::ids::{
    HcloudActionId, HcloudFloatingIpId, HcloudImageId, HcloudLocationId, HcloudNetworkId,
    HcloudPrimaryIpId, HcloudServerId, HcloudServerTypeId, HcloudSshKeyId, HcloudVolumeId,
};
use crate::secret::Secret;

/// Labels of a resource; ordered so listings and comparisons are stable.
pub type Labels = BTreeMap<String, String>;

/// CPU architecture as Hetzner names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HcloudArchitecture {
    X86,
    Arm,
}

impl HcloudArchitecture {
    /// The wire spelling (`x86`, `arm`).
    pub fn as_str(self) -> &'static str {
        match self {
            HcloudArchitecture::X86 => "x86",
            HcloudArchitecture::Arm => "arm",
        }
    }
}

impl From<HcloudArchitecture> for Architecture {
    fn from(arch: HcloudArchitecture) -> Self {
        match arch {
            HcloudArchitecture::X86 => Architecture::X86_64,
            HcloudArchitecture::Arm => Architecture::Arm64,
        }
    }
}

impl From<Architecture> for HcloudArchitecture {
    fn from(arch: Architecture) -> Self {
        match arch {
            Architecture::X86_64 => HcloudArchitecture::X86,
            Architecture::Arm64 => HcloudArchitecture::Arm,
        }
    }
}

/// A net and a gross (VAT included) amount in the project's currency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct NetGross {
    pub net: Decimal,
    pub gross: Decimal,
}

/// When a resource kind is being retired.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Deprecation {
    pub announced: DateTime<Utc>,
    pub unavailable_after: DateTime<Utc>,
}

/// A location (`fsn1`, `ash`, …).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Location {
    pub id: HcloudLocationId,
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub country: String,
    #[serde(default)]
    pub city: String,
    #[serde(default)]
    pub latitude: f64,
    #[serde(default)]
    pub longitude: f64,
    /// `eu-central`, `us-east`, `us-west`, `ap-southeast`.
    pub network_zone: String,
}

/// Shared or dedicated vCPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CpuType {
    Shared,
    Dedicated,
    #[serde(other)]
    Unknown,
}

/// The price of a server type in one location.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ServerTypePrice {
    pub location: String,
    pub price_hourly: NetGross,
    pub price_monthly: NetGross,
    /// Included traffic in bytes.
    #[serde(default)]
    pub included_traffic: u64,
    #[serde(default)]
    pub price_per_tb_traffic: Option<NetGross>,
}

impl ServerTypePrice {
    /// The monthly net price as money in `currency` (server-type prices carry no currency;
    /// it is the project's, see [`Pricing::currency`]).
    pub fn monthly_net(&self, currency: Currency) -> Money {
        Money::new(self.price_monthly.net, currency, Period::Month)
    }

    /// The hourly net price as money in `currency`.
    pub fn hourly_net(&self, currency: Currency) -> Money {
        Money::new(self.price_hourly.net, currency, Period::Hour)
    }
}

/// Whether a server type can be ordered in one location.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ServerTypeLocation {
    #[serde(default)]
    pub id: Option<HcloudLocationId>,
    pub name: String,
    /// False while the type is sold out there.
    #[serde(default = "yes")]
    pub available: bool,
    #[serde(default)]
    pub recommended: bool,
    #[serde(default)]
    pub deprecation: Option<Deprecation>,
}

fn yes() -> bool {
    true
}

/// A server type (`cx23`, `cpx22`, …) with its prices per location.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ServerType {
    pub id: HcloudServerTypeId,
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub category: Option<String>,
    pub cores: u32,
    /// Memory in GB (binary gigabytes, as Hetzner counts them).
    pub memory: Decimal,
    /// Local disk in GB.
    pub disk: u64,
    #[serde(default)]
    pub storage_type: String,
    pub cpu_type: CpuType,
    pub architecture: HcloudArchitecture,
    #[serde(default)]
    pub deprecated: bool,
    #[serde(default)]
    pub deprecation: Option<Deprecation>,
    pub prices: Vec<ServerTypePrice>,
    #[serde(default)]
    pub locations: Vec<ServerTypeLocation>,
}

impl ServerType {
    /// The price in `location`, if the type is offered there.
    pub fn price_in(&self, location: &str) -> Option<&ServerTypePrice> {
        self.prices.iter().find(|p| p.location == location)
    }

    /// True when the type is offered in `location` and not sold out there.
    pub fn available_in(&self, location: &str) -> bool {
        self.locations
            .iter()
            .any(|l| l.name == location && l.available)
    }
}

/// Image kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImageType {
    System,
    App,
    Snapshot,
    Backup,
    #[serde(other)]
    Unknown,
}

impl ImageType {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ImageType::System => "system",
            ImageType::App => "app",
            ImageType::Snapshot => "snapshot",
            ImageType::Backup => "backup",
            ImageType::Unknown => "unknown",
        }
    }
}

/// Delete (and rebuild) protection flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct Protection {
    #[serde(default)]
    pub delete: bool,
    #[serde(default)]
    pub rebuild: bool,
}

/// An OS image, snapshot or backup.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Image {
    pub id: HcloudImageId,
    #[serde(rename = "type")]
    pub kind: ImageType,
    #[serde(default)]
    pub status: String,
    /// `None` for snapshots and backups.
    pub name: Option<String>,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub image_size: Option<Decimal>,
    #[serde(default)]
    pub disk_size: Decimal,
    #[serde(default)]
    pub os_flavor: String,
    #[serde(default)]
    pub os_version: Option<String>,
    #[serde(default)]
    pub rapid_deploy: bool,
    #[serde(default)]
    pub deprecated: Option<DateTime<Utc>>,
    #[serde(default)]
    pub labels: Labels,
    pub architecture: HcloudArchitecture,
}

/// Lifecycle state of a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerStatus {
    Initializing,
    Starting,
    Running,
    Stopping,
    Off,
    Deleting,
    Migrating,
    Rebuilding,
    #[serde(other)]
    Unknown,
}

/// A reverse DNS entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct DnsPtr {
    pub ip: String,
    pub dns_ptr: String,
}

/// A server's public IPv4.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PublicIpv4 {
    /// The primary IP holding the address.
    #[serde(default)]
    pub id: Option<HcloudPrimaryIpId>,
    pub ip: String,
    #[serde(default)]
    pub blocked: bool,
    #[serde(default)]
    pub dns_ptr: String,
}

/// A server's public IPv6 network (`2a01:4f8:…::/64`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PublicIpv6 {
    #[serde(default)]
    pub id: Option<HcloudPrimaryIpId>,
    pub ip: String,
    #[serde(default)]
    pub blocked: bool,
    #[serde(default)]
    pub dns_ptr: Option<Vec<DnsPtr>>,
}

/// A server's public addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct PublicNet {
    #[serde(default)]
    pub ipv4: Option<PublicIpv4>,
    #[serde(default)]
    pub ipv6: Option<PublicIpv6>,
    #[serde(default)]
    pub floating_ips: Vec<HcloudFloatingIpId>,
}

/// A server's address in a private network.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PrivateNet {
    pub network: HcloudNetworkId,
    pub ip: String,
    #[serde(default)]
    pub alias_ips: Vec<String>,
    #[serde(default)]
    pub mac_address: String,
}

/// A cloud server.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Server {
    pub id: HcloudServerId,
    pub name: String,
    pub status: ServerStatus,
    pub created: DateTime<Utc>,
    #[serde(default)]
    pub public_net: PublicNet,
    #[serde(default)]
    pub private_net: Vec<PrivateNet>,
    pub server_type: ServerType,
    pub location: Location,
    #[serde(default)]
    pub image: Option<Image>,
    #[serde(default)]
    pub rescue_enabled: bool,
    #[serde(default)]
    pub locked: bool,
    #[serde(default)]
    pub protection: Protection,
    #[serde(default)]
    pub labels: Labels,
    #[serde(default)]
    pub volumes: Vec<HcloudVolumeId>,
    #[serde(default)]
    pub primary_disk_size: u64,
    #[serde(default)]
    pub included_traffic: Option<u64>,
    #[serde(default)]
    pub outgoing_traffic: Option<u64>,
    #[serde(default)]
    pub ingoing_traffic: Option<u64>,
}

/// State of an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionStatus {
    Running,
    Success,
    Error,
    #[serde(other)]
    Unknown,
}

/// A resource an action touches.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ActionResource {
    pub id: u64,
    #[serde(rename = "type")]
    pub kind: String,
}

/// Why an action failed.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ActionError {
    pub code: String,
    pub message: String,
}

/// An asynchronous operation (`create_server`, `start_server`, …).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Action {
    pub id: HcloudActionId,
    pub command: String,
    pub status: ActionStatus,
    #[serde(default)]
    pub progress: u32,
    pub started: DateTime<Utc>,
    #[serde(default)]
    pub finished: Option<DateTime<Utc>>,
    #[serde(default)]
    pub resources: Vec<ActionResource>,
    #[serde(default)]
    pub error: Option<ActionError>,
}

/// The answer to a server create.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CreatedServer {
    pub server: Server,
    pub action: Action,
    #[serde(default)]
    pub next_actions: Vec<Action>,
    /// Set only when no SSH key was given.
    #[serde(default)]
    pub root_password: Option<Secret>,
}

impl CreatedServer {
    /// The create action followed by the next actions (the implicit power-on).
    pub fn action_ids(&self) -> Vec<HcloudActionId> {
        std::iter::once(self.action.id)
            .chain(self.next_actions.iter().map(|a| a.id))
            .collect()
    }
}

/// The answer to a rebuild.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Rebuilt {
    pub action: Action,
    #[serde(default)]
    pub root_password: Option<Secret>,
}

/// Subnet kinds; `cloud` is the one to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubnetType {
    Cloud,
    Server,
    Vswitch,
    #[serde(other)]
    Unknown,
}

/// A subnet of a network.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Subnet {
    #[serde(rename = "type")]
    pub kind: SubnetType,
    #[serde(default)]
    pub ip_range: Option<String>,
    pub network_zone: String,
    #[serde(default)]
    pub gateway: Option<String>,
}

/// A route of a network.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    pub destination: String,
    pub gateway: String,
}

/// A private network.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Network {
    pub id: HcloudNetworkId,
    pub name: String,
    pub ip_range: String,
    #[serde(default)]
    pub subnets: Vec<Subnet>,
    #[serde(default)]
    pub routes: Vec<Route>,
    #[serde(default)]
    pub servers: Vec<HcloudServerId>,
    #[serde(default)]
    pub protection: Protection,
    #[serde(default)]
    pub labels: Labels,
    pub created: DateTime<Utc>,
}

/// IPv4 or IPv6.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IpType {
    Ipv4,
    Ipv6,
}

/// Who holds a primary IP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AssigneeType {
    Server,
    Unassigned,
    #[serde(other)]
    Unknown,
}

/// A primary IP: a public address that can outlive its server.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PrimaryIp {
    pub id: HcloudPrimaryIpId,
    pub name: String,
    #[serde(default)]
    pub labels: Labels,
    pub created: DateTime<Utc>,
    #[serde(default)]
    pub blocked: bool,
    pub location: Location,
    pub ip: String,
    #[serde(default)]
    pub dns_ptr: Vec<DnsPtr>,
    #[serde(default)]
    pub protection: Protection,
    #[serde(rename = "type")]
    pub kind: IpType,
    pub auto_delete: bool,
    pub assignee_type: AssigneeType,
    pub assignee_id: Option<u64>,
}

impl PrimaryIp {
    /// The server holding the address, if any.
    pub fn server(&self) -> Option<HcloudServerId> {
        match self.assignee_type {
            AssigneeType::Server => self.assignee_id.map(HcloudServerId),
            AssigneeType::Unassigned | AssigneeType::Unknown => None,
        }
    }
}

/// The answer to a primary IP create.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CreatedPrimaryIp {
    pub primary_ip: PrimaryIp,
    #[serde(default)]
    pub action: Option<Action>,
}

/// A floating IP.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct FloatingIp {
    pub id: HcloudFloatingIpId,
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    pub ip: String,
    #[serde(rename = "type")]
    pub kind: IpType,
    pub server: Option<HcloudServerId>,
    #[serde(default)]
    pub dns_ptr: Vec<DnsPtr>,
    pub home_location: Location,
    #[serde(default)]
    pub blocked: bool,
    #[serde(default)]
    pub protection: Protection,
    #[serde(default)]
    pub labels: Labels,
    pub created: DateTime<Utc>,
}

/// The answer to a floating IP create.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CreatedFloatingIp {
    pub floating_ip: FloatingIp,
    #[serde(default)]
    pub action: Option<Action>,
}

/// An SSH public key stored in the project.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SshKey {
    pub id: HcloudSshKeyId,
    pub name: String,
    pub fingerprint: String,
    pub public_key: String,
    #[serde(default)]
    pub labels: Labels,
    pub created: DateTime<Utc>,
}

/// A block storage volume.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Volume {
    pub id: HcloudVolumeId,
    pub name: String,
    pub created: DateTime<Utc>,
    pub server: Option<HcloudServerId>,
    pub location: Location,
    /// Size in GB.
    pub size: u64,
    #[serde(default)]
    pub linux_device: String,
    #[serde(default)]
    pub protection: Protection,
    #[serde(default)]
    pub labels: Labels,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub format: Option<String>,
}

/// The answer to a volume create.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CreatedVolume {
    pub volume: Volume,
    #[serde(default)]
    pub action: Option<Action>,
    #[serde(default)]
    pub next_actions: Vec<Action>,
}

/// A price per GB and month.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct PerGbMonth {
    pub price_per_gb_month: NetGross,
}

/// An hourly and monthly price in one location.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct LocationPrice {
    pub location: String,
    #[serde(default)]
    pub price_hourly: Option<NetGross>,
    pub price_monthly: NetGross,
}

/// Prices of one kind of IP.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct IpPrices {
    #[serde(rename = "type")]
    pub kind: IpType,
    pub prices: Vec<LocationPrice>,
}

/// Prices of one server type.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ServerTypePrices {
    pub id: HcloudServerTypeId,
    pub name: String,
    pub prices: Vec<ServerTypePrice>,
}

/// The project's price list.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Pricing {
    /// The currency every price is in.
    pub currency: Currency,
    /// VAT in percent (`19.00`).
    pub vat_rate: Decimal,
    pub primary_ips: Vec<IpPrices>,
    #[serde(default)]
    pub floating_ips: Vec<IpPrices>,
    pub volume: PerGbMonth,
    #[serde(default)]
    pub image: Option<PerGbMonth>,
    #[serde(default)]
    pub server_types: Vec<ServerTypePrices>,
}

impl Pricing {
    /// The monthly net price of a primary IP of `kind` in `location`.
    pub fn primary_ip_monthly_net(&self, kind: IpType, location: &str) -> Option<Money> {
        self.primary_ips
            .iter()
            .find(|p| p.kind == kind)?
            .prices
            .iter()
            .find(|p| p.location == location)
            .map(|p| Money::new(p.price_monthly.net, self.currency, Period::Month))
    }

    /// The net volume price per GB and month.
    pub fn volume_per_gb_month_net(&self) -> Money {
        Money::new(
            self.volume.price_per_gb_month.net,
            self.currency,
            Period::Month,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    #[test]
    fn prices_stay_exact_decimals() {
        let json = r#"{"location":"fsn1","price_hourly":{"net":"0.0088000000","gross":"0.0104720000000000"},
            "price_monthly":{"net":"5.4900000000","gross":"6.5331000000000000"},
            "included_traffic":21990232555520,"price_per_tb_traffic":{"net":"1.0000000000","gross":"1.1900000000000000"}}"#;
        let price: ServerTypePrice = serde_json::from_str(json).unwrap();
        assert_eq!(price.price_monthly.net, dec("5.49"));
        assert_eq!(price.price_monthly.gross, dec("6.5331"));
        assert_eq!(
            price.monthly_net(Currency::EUR).to_string(),
            "5.49 EUR/month"
        );
    }

    #[test]
    fn fractional_memory_is_exact() {
        let json = r#"{"id":1,"name":"tiny","cores":1,"memory":0.5,"disk":20,"cpu_type":"shared",
            "architecture":"x86","prices":[],"locations":[]}"#;
        let t: ServerType = serde_json::from_str(json).unwrap();
        assert_eq!(t.memory, dec("0.5"));
    }

    #[test]
    fn unknown_enum_values_do_not_break_decoding() {
        let status: ServerStatus = serde_json::from_str("\"hibernating\"").unwrap();
        assert_eq!(status, ServerStatus::Unknown);
        let assignee: AssigneeType = serde_json::from_str("\"unassigned\"").unwrap();
        assert_eq!(assignee, AssigneeType::Unassigned);
    }
}
