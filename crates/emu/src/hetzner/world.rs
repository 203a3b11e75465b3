//! Per-account state: the resources one bearer token can see, and the id counters shared by
//! all accounts of one emulator.
//!
//! Time is lazy. A server keeps a timeline of future status changes (and possibly its
//! disappearance); [`World::settle`] applies the ones due at `now` and runs before every
//! request. An action stores when it started and when it finishes, and its status is read
//! off the clock. A resource is locked while one of its actions is still running.
//!
//! Invariants: ids come from counters and are never reused within a run; a primary IP or a
//! floating IP is assigned to at most one server and a server holds at most one primary IP
//! of each family; removing a server releases everything that pointed at it.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

use super::networks::Cidr;

/// A server's `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Status {
    Initializing,
    Starting,
    Running,
    Stopping,
    Off,
    Deleting,
    Rebuilding,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Initializing => "initializing",
            Status::Starting => "starting",
            Status::Running => "running",
            Status::Stopping => "stopping",
            Status::Off => "off",
            Status::Deleting => "deleting",
            Status::Rebuilding => "rebuilding",
        }
    }

    pub const ALL: [&'static str; 9] = [
        "running",
        "initializing",
        "starting",
        "stopping",
        "off",
        "deleting",
        "migrating",
        "rebuilding",
        "unknown",
    ];
}

/// Something that happens to a server at a given time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    Becomes(Status),
    Gone,
}

/// IP family of a primary or floating IP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    V4,
    V6,
}

impl Family {
    pub fn as_str(self) -> &'static str {
        match self {
            Family::V4 => "ipv4",
            Family::V6 => "ipv6",
        }
    }

    pub fn parse(s: &str) -> Option<Family> {
        match s {
            "ipv4" => Some(Family::V4),
            "ipv6" => Some(Family::V6),
            _ => None,
        }
    }
}

/// A server's attachment to a network.
#[derive(Debug, Clone)]
pub(crate) struct PrivateNet {
    pub network: u64,
    pub ip: Ipv4Addr,
    pub alias_ips: Vec<Ipv4Addr>,
    pub mac_address: String,
}

#[derive(Debug, Clone)]
pub(crate) struct Server {
    pub id: u64,
    pub name: String,
    pub created: DateTime<Utc>,
    pub labels: BTreeMap<String, String>,
    pub server_type: u64,
    pub location: String,
    pub image: Option<u64>,
    pub status: Status,
    /// Future events, oldest first.
    pub timeline: Vec<(DateTime<Utc>, Event)>,
    pub ipv4: Option<u64>,
    pub ipv6: Option<u64>,
    pub private_net: Vec<PrivateNet>,
    pub rescue_enabled: bool,
    pub protect_delete: bool,
    pub protect_rebuild: bool,
    /// The user data of the current disk (materialised mode runs it at its first boot).
    pub user_data: Option<std::sync::Arc<str>>,
    /// 1 at creation, one more at every rebuild.
    pub boot: u64,
}

#[derive(Debug, Clone)]
pub(crate) struct Action {
    pub id: u64,
    pub command: &'static str,
    pub started: DateTime<Utc>,
    pub finishes: DateTime<Utc>,
    pub fails: bool,
    pub resources: Vec<(u64, &'static str)>,
}

impl Action {
    pub fn running(&self, now: DateTime<Utc>) -> bool {
        now < self.finishes
    }

    pub fn status(&self, now: DateTime<Utc>) -> &'static str {
        if self.running(now) {
            "running"
        } else if self.fails {
            "error"
        } else {
            "success"
        }
    }

    pub fn touches(&self, kind: &str, id: u64) -> bool {
        self.resources.iter().any(|(i, k)| *i == id && *k == kind)
    }

    pub fn to_json(&self, now: DateTime<Utc>) -> Value {
        let running = self.running(now);
        let progress = if running {
            let total = (self.finishes - self.started).num_milliseconds().max(1);
            let done = (now - self.started).num_milliseconds().max(0);
            (done * 100 / total).min(99)
        } else {
            100
        };
        let error = (!running && self.fails)
            .then(|| json!({"code": "action_failed", "message": "Action failed"}));
        json!({
            "id": self.id,
            "command": self.command,
            "status": self.status(now),
            "progress": progress,
            "started": ts(self.started),
            "finished": (!running).then(|| ts(self.finishes)),
            "resources": self.resources.iter().map(|(id, kind)| json!({"id": id, "type": kind})).collect::<Vec<_>>(),
            "error": error,
        })
    }
}

#[derive(Debug, Clone)]
pub(crate) struct PrimaryIp {
    pub id: u64,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub created: DateTime<Utc>,
    pub location: String,
    pub ip: String,
    pub family: Family,
    pub dns_ptr: BTreeMap<String, String>,
    pub protect_delete: bool,
    pub auto_delete: bool,
    pub assignee: Option<u64>,
}

#[derive(Debug, Clone)]
pub(crate) struct FloatingIp {
    pub id: u64,
    pub name: String,
    pub description: Option<String>,
    pub ip: String,
    pub family: Family,
    pub server: Option<u64>,
    pub dns_ptr: BTreeMap<String, String>,
    pub home_location: String,
    pub protect_delete: bool,
    pub labels: BTreeMap<String, String>,
    pub created: DateTime<Utc>,
}

#[derive(Debug, Clone)]
pub(crate) struct Subnet {
    pub kind: String,
    pub ip_range: Cidr,
    pub network_zone: String,
    pub gateway: Ipv4Addr,
    pub vswitch_id: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Route {
    pub destination: Cidr,
    pub gateway: Ipv4Addr,
}

#[derive(Debug, Clone)]
pub(crate) struct Network {
    pub id: u64,
    pub name: String,
    pub ip_range: Cidr,
    pub subnets: Vec<Subnet>,
    pub routes: Vec<Route>,
    pub protect_delete: bool,
    pub labels: BTreeMap<String, String>,
    pub created: DateTime<Utc>,
    pub expose_routes_to_vswitch: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct SshKey {
    pub id: u64,
    pub name: String,
    pub fingerprint: String,
    pub public_key: String,
    pub labels: BTreeMap<String, String>,
    pub created: DateTime<Utc>,
}

#[derive(Debug, Clone)]
pub(crate) struct Volume {
    pub id: u64,
    pub name: String,
    pub size: u64,
    pub location: String,
    pub server: Option<u64>,
    pub protect_delete: bool,
    pub labels: BTreeMap<String, String>,
    pub created: DateTime<Utc>,
    pub format: Option<String>,
}

/// Everything one account owns.
#[derive(Debug, Default)]
pub(crate) struct World {
    pub servers: BTreeMap<u64, Server>,
    pub actions: BTreeMap<u64, Action>,
    pub primary_ips: BTreeMap<u64, PrimaryIp>,
    pub floating_ips: BTreeMap<u64, FloatingIp>,
    pub networks: BTreeMap<u64, Network>,
    pub ssh_keys: BTreeMap<u64, SshKey>,
    pub volumes: BTreeMap<u64, Volume>,
}

impl World {
    /// Applies every server event due at `now`.
    pub fn settle(&mut self, now: DateTime<Utc>) {
        let mut gone = Vec::new();
        for server in self.servers.values_mut() {
            let due = server
                .timeline
                .iter()
                .take_while(|(t, _)| *t <= now)
                .count();
            for (_, event) in server.timeline.drain(..due) {
                match event {
                    Event::Becomes(s) => server.status = s,
                    Event::Gone => gone.push(server.id),
                }
            }
        }
        for id in gone {
            self.remove_server(id);
        }
    }

    /// Removes a server: auto-delete primary IPs go with it, other IPs and volumes are
    /// released.
    fn remove_server(&mut self, id: u64) {
        self.servers.remove(&id);
        self.primary_ips
            .retain(|_, ip| !(ip.assignee == Some(id) && ip.auto_delete));
        for ip in self.primary_ips.values_mut() {
            if ip.assignee == Some(id) {
                ip.assignee = None;
            }
        }
        for ip in self.floating_ips.values_mut() {
            if ip.server == Some(id) {
                ip.server = None;
            }
        }
        for v in self.volumes.values_mut() {
            if v.server == Some(id) {
                v.server = None;
            }
        }
    }

    /// Whether an action on this resource is still running.
    pub fn locked(&self, kind: &str, id: u64, now: DateTime<Utc>) -> bool {
        self.actions
            .values()
            .any(|a| a.running(now) && a.touches(kind, id))
    }
}

/// Id counters, at realistic magnitudes.
#[derive(Debug)]
pub(crate) struct Ids {
    server: u64,
    action: u64,
    primary_ip: u64,
    floating_ip: u64,
    network: u64,
    ssh_key: u64,
    volume: u64,
    ipv4: u32,
    ipv6: u32,
    floating: u32,
    mac: u64,
    /// Materialised mode: public IPv4 addresses (primary and floating) come from here.
    pub public_slice: Option<crate::netns::Plan>,
}

impl Default for Ids {
    fn default() -> Self {
        Ids {
            server: 110_000_000,
            action: 566_420_293_300_000,
            primary_ip: 90_000_000,
            floating_ip: 4_000_000,
            network: 10_000_000,
            ssh_key: 30_000_000,
            volume: 100_500_000,
            ipv4: 0,
            ipv6: 0,
            floating: 0,
            mac: 0,
            public_slice: None,
        }
    }
}

fn bump(counter: &mut u64) -> u64 {
    *counter += 1;
    *counter
}

impl Ids {
    pub fn server(&mut self) -> u64 {
        bump(&mut self.server)
    }
    pub fn action(&mut self) -> u64 {
        bump(&mut self.action)
    }
    pub fn primary_ip(&mut self) -> u64 {
        bump(&mut self.primary_ip)
    }
    pub fn floating_ip(&mut self) -> u64 {
        bump(&mut self.floating_ip)
    }
    pub fn network(&mut self) -> u64 {
        bump(&mut self.network)
    }
    pub fn ssh_key(&mut self) -> u64 {
        bump(&mut self.ssh_key)
    }
    pub fn volume(&mut self) -> u64 {
        bump(&mut self.volume)
    }

    /// A fresh public IPv4 address for a primary IP (from 116.203.0.0/16, as Hetzner's
    /// Falkenstein ranges look).
    pub fn public_ipv4(&mut self) -> String {
        self.ipv4 += 1;
        let n = self.ipv4;
        if let Some(address) = self.public_slice.and_then(|p| p.public(n - 1)) {
            return address.to_string();
        }
        format!("116.203.{}.{}", (n / 250) % 256, n % 250 + 2)
    }

    /// A fresh IPv6 /64 for a primary IP.
    pub fn public_ipv6(&mut self) -> String {
        self.ipv6 += 1;
        format!("2a01:4f8:c0c:{:x}::/64", self.ipv6)
    }

    /// A fresh floating address of the family.
    pub fn floating(&mut self, family: Family) -> String {
        if family == Family::V4 && self.public_slice.is_some() {
            return self.public_ipv4();
        }
        self.floating += 1;
        let n = self.floating;
        match family {
            Family::V4 => format!("78.46.{}.{}", (n / 250) % 256, n % 250 + 2),
            Family::V6 => format!("2a01:4f8:1c1c:{n:x}::/64"),
        }
    }

    /// A fresh MAC address for a private network interface.
    pub fn mac(&mut self) -> String {
        self.mac += 1;
        let b = self.mac.to_be_bytes();
        format!("86:00:00:{:02x}:{:02x}:{:02x}", b[5], b[6], b[7])
    }
}

/// All accounts' worlds and the shared counters.
#[derive(Debug, Default)]
pub(crate) struct Store {
    pub worlds: BTreeMap<String, World>,
    pub ids: Ids,
}

/// A timestamp as the API writes it.
pub(crate) fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The default reverse DNS name of a Hetzner IPv4 address.
pub(crate) fn default_ptr_v4(ip: &str) -> String {
    let mut parts: Vec<&str> = ip.split('.').collect();
    parts.reverse();
    format!("static.{}.clients.your-server.de", parts.join("."))
}

/// `dns_ptr` list of a primary or floating IP.
pub(crate) fn ptr_list(map: &BTreeMap<String, String>) -> Value {
    Value::Array(
        map.iter()
            .map(|(ip, ptr)| json!({"ip": ip, "dns_ptr": ptr}))
            .collect(),
    )
}

/// Whether `ip` is the address `assigned` (IPv4) or inside the /64 `assigned` (IPv6).
pub(crate) fn ip_matches(assigned: &str, family: Family, ip: &str) -> bool {
    match family {
        Family::V4 => assigned == ip,
        Family::V6 => {
            let (Some(prefix), Ok(addr)) =
                (assigned.split('/').next(), ip.parse::<std::net::Ipv6Addr>())
            else {
                return false;
            };
            prefix
                .parse::<std::net::Ipv6Addr>()
                .is_ok_and(|net| net.segments()[..4] == addr.segments()[..4])
        }
    }
}
