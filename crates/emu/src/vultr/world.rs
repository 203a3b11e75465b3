//! The Vultr emulator's state: per-account resources and the id and address allocators.
//!
//! Invariants: every account sees only its own `World`; ids and addresses come from one
//! allocator per emulator, so two accounts never share an id or address and a reset gives
//! the same ids again. Instance ids grow with creation order, so the id order of a
//! `BTreeMap` is also creation order. Progress over time is lazy: an instance stores when
//! its install started and its state is computed from the emulated clock when read.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use rust_decimal::Decimal;

/// Formats a timestamp the way Vultr does: `2024-01-31T12:00:00+00:00`.
pub(crate) fn vultr_time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S+00:00").to_string()
}

/// Deterministic allocators of ids and addresses.
#[derive(Debug, Default)]
pub(crate) struct Alloc {
    ids: u64,
    v4: u32,
    v6: u32,
    vpc_nets: u32,
    macs: u32,
    /// Materialised mode: public IPv4 addresses come from this slice of the fabric.
    pub public_slice: Option<crate::netns::Plan>,
}

/// Where Vultr's addresses start in a fabric's public slice (Hetzner's start at 0).
pub(crate) const FABRIC_OFFSET: u32 = 1500;

/// First public IPv4 handed out; instances get addresses from 100.64.0.0/10, which is
/// not routed on the internet.
const V4_BASE: u32 = u32::from_be_bytes([100, 64, 0, 0]);

impl Alloc {
    /// A version-4 UUID whose leading bits grow with every call, so ids sort in creation
    /// order, and whose remaining bits are a fixed mix of the counter.
    pub fn uuid(&mut self) -> String {
        self.ids += 1;
        let n = self.ids;
        let mut x = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        x ^= x >> 31;
        x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x ^= x >> 29;
        let hi = (0x4f0f_u64 << 48) | (n << 16) | (x >> 48);
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&hi.to_be_bytes());
        bytes[8..].copy_from_slice(&x.rotate_left(17).to_be_bytes());
        uuid::Builder::from_random_bytes(bytes)
            .into_uuid()
            .hyphenated()
            .to_string()
    }

    /// The next public IPv4 address (hosts .2 to .254 of each /24).
    pub fn ipv4(&mut self) -> Ipv4Addr {
        let n = self.v4;
        self.v4 += 1;
        if let Some(address) = self.public_slice.and_then(|p| p.public(FABRIC_OFFSET + n)) {
            return address;
        }
        Ipv4Addr::from(V4_BASE + (n / 253) * 256 + 2 + n % 253)
    }

    /// The next IPv6 /64, inside the documentation prefix 2001:db8::/32.
    pub fn ipv6_net(&mut self) -> Ipv6Addr {
        self.v6 += 1;
        let n = self.v6;
        Ipv6Addr::new(0x2001, 0xdb8, (n >> 16) as u16, n as u16, 0, 0, 0, 0)
    }

    /// The next automatically chosen VPC subnet, a /20 inside 10.0.0.0/8.
    pub fn vpc_subnet(&mut self) -> Ipv4Addr {
        let n = self.vpc_nets % 4096;
        self.vpc_nets += 1;
        Ipv4Addr::new(10, (n / 16) as u8, ((n % 16) * 16) as u8, 0)
    }

    /// The next locally administered MAC address.
    pub fn mac(&mut self) -> String {
        self.macs += 1;
        let b = self.macs.to_be_bytes();
        format!("5a:01:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3])
    }
}

/// A password, never shown by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// What an instance was installed from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Source {
    pub os_id: u64,
    pub os_name: String,
    pub app_id: u64,
    pub image_id: String,
}

/// Where an instance is in its life, derived from the clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// `status: pending`, `server_status: none`.
    Queued,
    /// `status: pending`, `server_status: locked`.
    Locked,
    /// `status: active`, `server_status: installingbooting`.
    Installing,
    /// `status: active`, `server_status: ok`.
    Ready,
    /// The install failed: `status: active`, `server_status: installingbooting` forever,
    /// `power_status: stopped`.
    Failed,
}

impl Phase {
    pub fn status(self) -> &'static str {
        match self {
            Phase::Queued | Phase::Locked => "pending",
            Phase::Installing | Phase::Ready | Phase::Failed => "active",
        }
    }

    pub fn server_status(self) -> &'static str {
        match self {
            Phase::Queued => "none",
            Phase::Locked => "locked",
            Phase::Installing | Phase::Failed => "installingbooting",
            Phase::Ready => "ok",
        }
    }

    /// Delete and reinstall are refused with "Server is currently locked".
    pub fn is_locked(self) -> bool {
        match self {
            Phase::Queued | Phase::Locked => true,
            Phase::Installing | Phase::Ready | Phase::Failed => false,
        }
    }

    /// The public addresses are assigned and shown.
    pub fn has_addresses(self) -> bool {
        !self.is_locked()
    }
}

/// An instance's membership in a VPC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VpcPort {
    pub vpc_id: String,
    pub mac: String,
    pub ip: Ipv4Addr,
}

/// One virtual machine.
#[derive(Debug, Clone)]
pub(crate) struct Instance {
    pub id: String,
    pub region: String,
    pub plan: String,
    pub source: Source,
    pub label: String,
    pub hostname: String,
    pub tags: Vec<String>,
    /// Standard base64, as returned by `GET …/user-data`.
    pub user_data: String,
    pub firewall_group_id: String,
    pub user_scheme: String,
    pub backups: bool,
    pub ddos_protection: bool,
    pub created: DateTime<Utc>,
    /// Start of the current install (create or reinstall).
    pub install_started: DateTime<Utc>,
    /// A reinstall skips the queued and locked phases.
    pub reinstall: bool,
    pub install_fails: bool,
    pub powered: bool,
    /// Public IPv4 (the reserved IP's address when created with one); `None` when the
    /// instance has no public IPv4.
    pub v4: Option<Ipv4Addr>,
    pub v6_net: Option<Ipv6Addr>,
    pub vpcs: Vec<VpcPort>,
    pub reverse_v4: BTreeMap<Ipv4Addr, String>,
    pub reverse_v6: BTreeMap<Ipv6Addr, String>,
    pub default_password: Secret,
    pub kvm_token: String,
    /// 1 at creation, one more at every reinstall.
    pub boot: u64,
}

fn after(t: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    t.checked_add_signed(TimeDelta::from_std(d).unwrap_or(TimeDelta::MAX))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

impl Instance {
    /// The phase at `now` when an install takes `install` of emulated time: the first
    /// quarter queued, the second locked, the second half installing.
    pub fn phase(&self, now: DateTime<Utc>, install: Duration) -> Phase {
        let done = after(self.install_started, install);
        if self.reinstall {
            return if now >= done {
                Phase::Ready
            } else {
                Phase::Installing
            };
        }
        if now < after(self.install_started, install / 4) {
            Phase::Queued
        } else if now < after(self.install_started, install / 2) {
            Phase::Locked
        } else if self.install_fails {
            Phase::Failed
        } else if now < done {
            Phase::Installing
        } else {
            Phase::Ready
        }
    }

    pub fn power_status(&self, phase: Phase) -> &'static str {
        match phase {
            Phase::Failed => "stopped",
            Phase::Queued | Phase::Locked | Phase::Installing | Phase::Ready => {
                if self.powered {
                    "running"
                } else {
                    "stopped"
                }
            }
        }
    }

    /// The IPv6 main address: the network's ::5400:5ff:fe00:1-style host.
    pub fn v6_main(&self) -> Option<Ipv6Addr> {
        self.v6_net.map(|net| {
            let s = net.segments();
            Ipv6Addr::new(s[0], s[1], s[2], s[3], 0x5400, 0x05ff, 0xfe00, 1)
        })
    }

    /// Whether `ip` lies in the instance's IPv6 /64.
    pub fn owns_v6(&self, ip: Ipv6Addr) -> bool {
        self.v6_net
            .is_some_and(|net| net.segments()[..4] == ip.segments()[..4])
    }
}

/// Default reverse DNS name of a public IPv4 address.
pub(crate) fn default_ptr(ip: Ipv4Addr) -> String {
    format!("{}.vultrusercontent.com", ip.to_string().replace('.', "-"))
}

/// Gateway of the /23 an IPv4 address sits in.
pub(crate) fn gateway_of(ip: Ipv4Addr) -> Ipv4Addr {
    Ipv4Addr::from((u32::from(ip) & 0xFFFF_FE00) + 1)
}

/// A reserved (floating) IP.
#[derive(Debug, Clone)]
pub(crate) struct ReservedIp {
    pub id: String,
    pub region: String,
    pub v6: bool,
    pub subnet: String,
    pub subnet_size: u8,
    pub label: String,
    pub instance_id: Option<String>,
}

/// A VPC network.
#[derive(Debug, Clone)]
pub(crate) struct Vpc {
    pub id: String,
    pub region: String,
    pub description: String,
    pub subnet: Ipv4Addr,
    pub mask: u8,
    pub created: DateTime<Utc>,
    /// Next host number to hand an attached instance.
    pub next_host: u32,
}

impl Vpc {
    /// The next free address in the subnet (hosts from .3; .1 and .2 are the network's).
    pub fn next_ip(&mut self) -> Option<Ipv4Addr> {
        let size = 1u64 << (32 - u32::from(self.mask));
        if u64::from(self.next_host) + 1 >= size {
            return None;
        }
        let ip = Ipv4Addr::from(u32::from(self.subnet) + self.next_host);
        self.next_host += 1;
        Some(ip)
    }
}

/// An SSH key.
#[derive(Debug, Clone)]
pub(crate) struct SshKey {
    pub id: String,
    pub name: String,
    pub ssh_key: String,
    pub created: DateTime<Utc>,
}

/// A block storage volume.
#[derive(Debug, Clone)]
pub(crate) struct Block {
    pub id: String,
    pub region: String,
    pub size_gb: u64,
    pub label: String,
    pub block_type: String,
    pub created: DateTime<Utc>,
    pub attached: Option<String>,
    pub mount_id: String,
}

/// One account's resources.
#[derive(Debug, Default)]
pub(crate) struct World {
    pub instances: BTreeMap<String, Instance>,
    pub reserved_ips: BTreeMap<String, ReservedIp>,
    pub vpcs: BTreeMap<String, Vpc>,
    pub ssh_keys: BTreeMap<String, SshKey>,
    pub blocks: BTreeMap<String, Block>,
    /// Charges of instances already destroyed, USD.
    pub closed_charges: Decimal,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_sort_in_creation_order_and_are_uuid_v4() {
        let mut a = Alloc::default();
        let ids: Vec<String> = (0..300).map(|_| a.uuid()).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted);
        let parsed = uuid::Uuid::parse_str(&ids[0]).unwrap();
        assert_eq!(parsed.get_version_num(), 4);
        assert_ne!(ids[0], ids[1]);
    }

    #[test]
    fn addresses_are_distinct_and_skip_network_and_broadcast() {
        let mut a = Alloc::default();
        let ips: Vec<Ipv4Addr> = (0..600).map(|_| a.ipv4()).collect();
        assert!(
            ips.iter()
                .all(|ip| ip.octets()[3] >= 2 && ip.octets()[3] <= 254)
        );
        let set: std::collections::BTreeSet<_> = ips.iter().collect();
        assert_eq!(set.len(), 600);
        assert_eq!(
            gateway_of(Ipv4Addr::new(100, 64, 1, 7)),
            Ipv4Addr::new(100, 64, 0, 1)
        );
    }

    #[test]
    fn phases_follow_the_install_time() {
        let t0 = Utc::now();
        let mut a = Alloc::default();
        let mut i = Instance {
            id: a.uuid(),
            region: "ewr".into(),
            plan: "vc2-1c-1gb".into(),
            source: Source {
                os_id: 2284,
                os_name: "Ubuntu".into(),
                app_id: 0,
                image_id: String::new(),
            },
            label: String::new(),
            hostname: String::new(),
            tags: vec![],
            user_data: String::new(),
            firewall_group_id: String::new(),
            user_scheme: "root".into(),
            backups: false,
            ddos_protection: false,
            created: t0,
            install_started: t0,
            reinstall: false,
            install_fails: false,
            powered: true,
            v4: None,
            v6_net: None,
            vpcs: vec![],
            reverse_v4: BTreeMap::new(),
            reverse_v6: BTreeMap::new(),
            default_password: Secret("x".into()),
            kvm_token: String::new(),
            boot: 1,
        };
        let d = Duration::from_secs(20);
        let at = |s| t0 + TimeDelta::seconds(s);
        assert_eq!(i.phase(at(0), d), Phase::Queued);
        assert_eq!(i.phase(at(6), d), Phase::Locked);
        assert_eq!(i.phase(at(12), d), Phase::Installing);
        assert_eq!(i.phase(at(20), d), Phase::Ready);
        assert_eq!(i.phase(at(0), Duration::ZERO), Phase::Ready);
        i.install_fails = true;
        assert_eq!(i.phase(at(60), d), Phase::Failed);
        assert_eq!(i.power_status(Phase::Failed), "stopped");
        assert_eq!(format!("{:?}", i.default_password), "<redacted>");
    }
}
