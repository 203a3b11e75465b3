//! The Robot emulator's state: each account's dedicated servers (seeded from
//! `seed/hetzner-robot.json`), SSH keys and reverse DNS entries.
//!
//! Invariants: every account starts from its own copy of the seed, so accounts never see
//! each other's changes; server power, manual resets and rescue boots are tracked per
//! server, and anything that depends on time is computed from the emulated clock when read.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::LazyLock;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Utc};
use md5::{Digest, Md5};
use serde::Deserialize;
use serde_json::{Value, json};

/// A server as seeded.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct SeedServer {
    pub server_ip: Option<String>,
    pub server_ipv6_net: Option<String>,
    pub server_number: u64,
    pub server_name: String,
    pub product: String,
    pub dc: String,
    pub traffic: String,
    pub status: String,
    pub cancelled: bool,
    pub paid_until: String,
    pub ip: Vec<String>,
    pub subnet: Option<Vec<Value>>,
    pub reset: bool,
    pub rescue: bool,
    pub vnc: bool,
    pub windows: bool,
    pub plesk: bool,
    pub cpanel: bool,
    pub wol: bool,
    pub hot_swap: bool,
    pub linked_storagebox: Option<u64>,
    #[serde(rename = "_reset_types")]
    pub reset_types: Vec<String>,
    #[serde(rename = "_operating_status")]
    pub operating_status: String,
}

/// A key as seeded or stored.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Key {
    pub name: String,
    pub fingerprint: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub size: u32,
    pub data: String,
    pub created_at: String,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Seed {
    pub servers: Vec<SeedServer>,
    pub keys: Vec<Key>,
    pub rescue_os_choices: Vec<String>,
    pub rescue_arch_choices: Vec<u32>,
}

/// The seed compiled into the binary.
pub(crate) static SEED: LazyLock<Seed> = LazyLock::new(|| {
    serde_json::from_str(include_str!("../../seed/hetzner-robot.json"))
        .unwrap_or_else(|e| panic!("seed/hetzner-robot.json is invalid: {e}"))
});

/// An activated rescue system, waiting for the next boot. Its password is generated on
/// activation and shown only in that answer, never stored.
#[derive(Debug, Clone)]
pub(crate) struct Rescue {
    pub os: String,
    pub arch: u32,
    pub keys: Vec<Key>,
}

/// One dedicated server and what the emulator tracks about it.
#[derive(Debug, Clone)]
pub(crate) struct Server {
    pub seed: SeedServer,
    pub name: String,
    /// Whether the server is powered on.
    pub powered: bool,
    /// The rescue system is activated for the next boot.
    pub rescue: Option<Rescue>,
    /// The last boot went into the rescue system.
    pub booted_rescue: bool,
    /// A manual reset (`man`) is pending until this time.
    pub manual_until: Option<DateTime<Utc>>,
    /// How many times it booted (1: the boot it was delivered with).
    pub boots: u64,
    /// The `authorized_keys` lines of the rescue system it last booted into.
    pub rescue_keys: Vec<String>,
    /// Its address in a fabric (materialised mode), which replaced the seed's.
    pub fabric_ip: Option<std::net::Ipv4Addr>,
}

impl Server {
    pub(crate) fn from_seed(seed: &SeedServer) -> Self {
        Server {
            name: seed.server_name.clone(),
            seed: seed.clone(),
            powered: true,
            rescue: None,
            booted_rescue: false,
            manual_until: None,
            boots: 1,
            rescue_keys: Vec::new(),
            fabric_ip: None,
        }
    }

    /// Boots the server: it is on, and in the rescue system when one was activated (the
    /// activation is used up by the boot).
    pub fn boot(&mut self) {
        self.powered = true;
        self.boots += 1;
        let rescue = self.rescue.take();
        self.booted_rescue = rescue.is_some();
        self.rescue_keys = rescue
            .map(|r| r.keys.iter().map(|k| k.data.clone()).collect())
            .unwrap_or_default();
    }

    /// Whether `id` names this server: its number or one of its IPv4 addresses.
    pub fn answers_to(&self, id: &str) -> bool {
        id.parse::<u64>()
            .is_ok_and(|n| n == self.seed.server_number)
            || self.seed.server_ip.as_deref() == Some(id)
            || self.seed.ip.iter().any(|ip| ip == id)
    }

    /// Whether `ip` belongs to the server: one of its IPv4s or inside one of its IPv6 /64s.
    pub fn owns_ip(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(v4) => self.seed.ip.iter().any(|a| a.parse() == Ok(v4)),
            IpAddr::V6(v6) => self
                .seed
                .server_ipv6_net
                .iter()
                .filter_map(|n| n.parse::<Ipv6Addr>().ok())
                .any(|net| net.segments()[..4] == v6.segments()[..4]),
        }
    }

    /// `server_ip`, `server_ipv6_net`, `server_number`: the head of most Robot objects.
    pub fn head(&self) -> serde_json::Map<String, Value> {
        let mut m = serde_json::Map::new();
        m.insert("server_ip".into(), json!(self.seed.server_ip));
        m.insert("server_ipv6_net".into(), json!(self.seed.server_ipv6_net));
        m.insert("server_number".into(), json!(self.seed.server_number));
        m
    }

    /// The list form of `GET /server`.
    pub fn summary(&self) -> Value {
        let mut m = self.head();
        let s = &self.seed;
        m.insert("server_name".into(), json!(self.name));
        m.insert("product".into(), json!(s.product));
        m.insert("dc".into(), json!(s.dc));
        m.insert("traffic".into(), json!(s.traffic));
        m.insert("status".into(), json!(s.status));
        m.insert("cancelled".into(), json!(s.cancelled));
        m.insert("paid_until".into(), json!(s.paid_until));
        m.insert("ip".into(), json!(s.ip));
        m.insert("subnet".into(), json!(s.subnet));
        Value::Object(m)
    }

    /// The detailed form of `GET /server/{n}`.
    pub fn detail(&self) -> Value {
        let mut v = self.summary();
        let s = &self.seed;
        if let Value::Object(m) = &mut v {
            for (k, b) in [
                ("reset", s.reset),
                ("rescue", s.rescue),
                ("vnc", s.vnc),
                ("windows", s.windows),
                ("plesk", s.plesk),
                ("cpanel", s.cpanel),
                ("wol", s.wol),
                ("hot_swap", s.hot_swap),
            ] {
                m.insert(k.into(), json!(b));
            }
            m.insert("linked_storagebox".into(), json!(s.linked_storagebox));
        }
        v
    }
}

/// One account's world.
#[derive(Debug)]
pub(crate) struct World {
    pub servers: Vec<Server>,
    pub keys: BTreeMap<String, Key>,
    pub rdns: BTreeMap<IpAddr, String>,
    /// The account's place among the emulator's accounts (the order they were first used).
    pub index: u32,
    /// Fabric addresses given out so far.
    pub placed: u32,
}

/// Where Robot's addresses start in a fabric's public slice (Hetzner's start at 0, Vultr's
/// at 1500), and how many one account may take.
pub(crate) const FABRIC_OFFSET: u32 = 3000;
pub(crate) const FABRIC_PER_ACCOUNT: u32 = 64;

impl World {
    /// A fresh copy of the seed.
    pub fn seeded() -> Self {
        World {
            servers: SEED.servers.iter().map(Server::from_seed).collect(),
            keys: SEED
                .keys
                .iter()
                .map(|k| (k.fingerprint.clone(), k.clone()))
                .collect(),
            rdns: BTreeMap::new(),
            index: 0,
            placed: 0,
        }
    }

    /// Gives every server without one an address of `plan`'s public slice, in place of the
    /// seed's (materialised mode); a server beyond the account's share keeps the seed's.
    pub fn address_in(&mut self, plan: crate::netns::Plan) {
        for server in self.servers.iter_mut().filter(|s| s.fabric_ip.is_none()) {
            if self.placed >= FABRIC_PER_ACCOUNT {
                break;
            }
            let n = FABRIC_OFFSET + self.index * FABRIC_PER_ACCOUNT + self.placed;
            let Some(ip) = plan.public(n) else {
                break;
            };
            self.placed += 1;
            server.fabric_ip = Some(ip);
            server.seed.server_ip = Some(ip.to_string());
            server.seed.ip = vec![ip.to_string()];
        }
    }

    pub fn server_mut(&mut self, id: &str) -> Option<&mut Server> {
        self.servers.iter_mut().find(|s| s.answers_to(id))
    }
}

/// Why an OpenSSH public key line was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum KeyError {
    #[error("the key is not `<type> <base64 blob> [comment]`")]
    Shape,
    #[error("the key type is not one Robot accepts")]
    Type,
}

/// A parsed public key: Robot's type name, size in bits and MD5 fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParsedKey {
    pub kind: &'static str,
    pub size: u32,
    pub fingerprint: String,
}

/// Reads an SSH wire-format string (u32 length + bytes) at `pos`.
fn wire_string<'a>(blob: &'a [u8], pos: &mut usize) -> Option<&'a [u8]> {
    let len_bytes = blob.get(*pos..*pos + 4)?;
    let len = u32::from_be_bytes(len_bytes.try_into().ok()?) as usize;
    let start = *pos + 4;
    let s = blob.get(start..start.checked_add(len)?)?;
    *pos = start + len;
    Some(s)
}

/// Bits of an RSA key's modulus.
fn rsa_bits(blob: &[u8]) -> Option<u32> {
    let mut pos = 0;
    wire_string(blob, &mut pos)?;
    wire_string(blob, &mut pos)?;
    let n = wire_string(blob, &mut pos)?;
    let n: Vec<u8> = n.iter().copied().skip_while(|b| *b == 0).collect();
    let first = *n.first()?;
    Some((n.len() as u32 - 1) * 8 + (8 - first.leading_zeros()))
}

/// Parses an OpenSSH public key line: type, size and the MD5 fingerprint of the blob as
/// colon-separated hex.
pub(crate) fn parse_public_key(line: &str) -> Result<ParsedKey, KeyError> {
    let mut parts = line.split_whitespace();
    let (Some(kind), Some(b64)) = (parts.next(), parts.next()) else {
        return Err(KeyError::Shape);
    };
    let blob = STANDARD.decode(b64).map_err(|_| KeyError::Shape)?;
    let (kind, size) = match kind {
        "ssh-ed25519" => ("ED25519", 256),
        "ecdsa-sha2-nistp256" => ("ECDSA", 256),
        "ecdsa-sha2-nistp384" => ("ECDSA", 384),
        "ecdsa-sha2-nistp521" => ("ECDSA", 521),
        "ssh-dss" => ("DSA", 1024),
        "ssh-rsa" => ("RSA", rsa_bits(&blob).ok_or(KeyError::Shape)?),
        _ => return Err(KeyError::Type),
    };
    let digest = Md5::digest(&blob);
    let fingerprint = digest
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":");
    Ok(ParsedKey {
        kind,
        size,
        fingerprint,
    })
}

/// `{"key":{name, fingerprint, type, size, data, created_at}}`.
pub(crate) fn key_json(k: &Key) -> Value {
    json!({"key": {
        "name": k.name,
        "fingerprint": k.fingerprint,
        "type": k.kind,
        "size": k.size,
        "data": k.data,
        "created_at": k.created_at,
    }})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_has_three_servers_and_a_key() {
        let w = World::seeded();
        assert_eq!(w.servers.len(), 3);
        assert_eq!(w.keys.len(), 1);
        assert!(w.servers[0].answers_to("2001001"));
        assert!(w.servers[0].answers_to("198.51.100.10"));
        assert!(!w.servers[2].answers_to("null"));
    }

    #[test]
    fn fingerprint_is_md5_of_the_blob() {
        let line =
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBvXGWm0fHqu9y6gHjIQoPbVnB0jl+2/0A1+CEJ1x6bp x";
        let k = parse_public_key(line).unwrap();
        assert_eq!(k.kind, "ED25519");
        assert_eq!(k.size, 256);
        let blob = STANDARD
            .decode("AAAAC3NzaC1lZDI1NTE5AAAAIBvXGWm0fHqu9y6gHjIQoPbVnB0jl+2/0A1+CEJ1x6bp")
            .unwrap();
        let hex: Vec<String> = Md5::digest(&blob)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(k.fingerprint, hex.join(":"));
        assert_eq!(parse_public_key("ssh-foo AAAA"), Err(KeyError::Type));
        assert_eq!(parse_public_key("ssh-ed25519"), Err(KeyError::Shape));
    }

    #[test]
    fn rsa_size_comes_from_the_modulus() {
        let mut blob = Vec::new();
        for part in [&b"ssh-rsa"[..], &[1, 0, 1][..], &[0x00, 0xC0, 0, 0][..]] {
            blob.extend_from_slice(&(part.len() as u32).to_be_bytes());
            blob.extend_from_slice(part);
        }
        let line = format!("ssh-rsa {}", STANDARD.encode(&blob));
        assert_eq!(parse_public_key(&line).unwrap().size, 24);
    }

    #[test]
    fn ipv6_ownership_is_by_slash_64() {
        let w = World::seeded();
        assert!(w.servers[2].owns_ip("2a01:4f8:20b:9e1::2".parse().unwrap()));
        assert!(!w.servers[2].owns_ip("2a01:4f8:20b:9e2::2".parse().unwrap()));
        assert!(w.servers[0].owns_ip("198.51.100.10".parse().unwrap()));
    }
}
