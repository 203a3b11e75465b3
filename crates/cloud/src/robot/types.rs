//! Hetzner Robot wire types. Robot wraps every object in a one-key envelope
//! (`{"server": …}`, `{"key": …}`); the client unwraps them.

use serde::{Deserialize, Serialize};

use crate::ids::{RobotKeyFingerprint, RobotServerNumber};
use crate::secret::Secret;

/// An IPv6 (or additional IPv4) subnet of a dedicated server.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RobotSubnet {
    pub ip: String,
    pub mask: String,
}

/// A dedicated server. The listing fills the common fields; a single `get` also fills the
/// capability flags.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RobotServer {
    /// `None` for IPv6-only servers.
    #[serde(default)]
    pub server_ip: Option<String>,
    #[serde(default)]
    pub server_ipv6_net: Option<String>,
    pub server_number: RobotServerNumber,
    #[serde(default)]
    pub server_name: String,
    #[serde(default)]
    pub product: String,
    #[serde(default)]
    pub dc: String,
    #[serde(default)]
    pub traffic: String,
    /// `ready` or `in process`.
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub cancelled: bool,
    /// `YYYY-MM-DD`.
    #[serde(default)]
    pub paid_until: String,
    #[serde(default)]
    pub ip: Option<Vec<String>>,
    #[serde(default)]
    pub subnet: Option<Vec<RobotSubnet>>,
    #[serde(default)]
    pub reset: Option<bool>,
    #[serde(default)]
    pub rescue: Option<bool>,
    #[serde(default)]
    pub vnc: Option<bool>,
    #[serde(default)]
    pub wol: Option<bool>,
    #[serde(default)]
    pub hot_swap: Option<bool>,
    #[serde(default)]
    pub linked_storagebox: Option<u64>,
}

/// Kinds of reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResetType {
    /// Ctrl-Alt-Del.
    Sw,
    /// The reset button.
    Hw,
    /// A technician does it by hand.
    Man,
    /// A short press of the power button (turns the server on if it is off).
    Power,
    /// A long press of the power button: the server stays off.
    PowerLong,
    #[serde(other)]
    Unknown,
}

impl ResetType {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ResetType::Sw => "sw",
            ResetType::Hw => "hw",
            ResetType::Man => "man",
            ResetType::Power => "power",
            ResetType::PowerLong => "power_long",
            ResetType::Unknown => "unknown",
        }
    }
}

/// The resets a server offers.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ResetOptions {
    pub server_number: RobotServerNumber,
    #[serde(default)]
    pub server_ip: Option<String>,
    #[serde(rename = "type")]
    pub types: Vec<ResetType>,
    #[serde(default)]
    pub operating_status: Option<String>,
}

/// A reset that was carried out.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ResetDone {
    pub server_number: RobotServerNumber,
    #[serde(rename = "type")]
    pub kind: ResetType,
}

/// One value when a setting is in force, the menu of choices otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

/// A key as the rescue system lists it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RescueKey {
    pub name: String,
    pub fingerprint: RobotKeyFingerprint,
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub size: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct RescueKeyEnvelope {
    pub key: RescueKey,
}

/// The rescue system of a server.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Rescue {
    pub server_number: RobotServerNumber,
    #[serde(default)]
    pub server_ip: Option<String>,
    /// The OS in force when active, the choices otherwise.
    pub os: OneOrMany<String>,
    #[serde(default)]
    pub arch: Option<OneOrMany<u32>>,
    pub active: bool,
    /// Only in the activation answer.
    #[serde(default)]
    pub password: Option<Secret>,
    #[serde(default, deserialize_with = "rescue_keys")]
    pub authorized_key: Vec<RescueKey>,
}

fn rescue_keys<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<RescueKey>, D::Error> {
    let wrapped = Option::<Vec<RescueKeyEnvelope>>::deserialize(d)?;
    Ok(wrapped
        .unwrap_or_default()
        .into_iter()
        .map(|k| k.key)
        .collect())
}

/// An SSH key stored in Robot.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RobotKey {
    pub name: String,
    pub fingerprint: RobotKeyFingerprint,
    /// `RSA`, `ED25519`, `ECDSA`.
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub size: u32,
    pub data: String,
    /// `YYYY-MM-DD HH:MM:SS`.
    #[serde(default)]
    pub created_at: String,
}

/// A reverse DNS entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Rdns {
    pub ip: String,
    pub ptr: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rescue_reads_both_menu_and_active_shapes() {
        let inactive = r#"{"server_ip":"198.51.100.10","server_ipv6_net":"2a01::","server_number":2001001,
            "os":["linux","vkvm"],"arch":[64,32],"active":false,"password":null,"authorized_key":[],"host_key":[]}"#;
        let r: Rescue = serde_json::from_str(inactive).unwrap();
        assert_eq!(r.os, OneOrMany::Many(vec!["linux".into(), "vkvm".into()]));
        assert!(r.password.is_none());
        let active = r#"{"server_ip":null,"server_number":2001001,"os":"linux","arch":64,"active":true,
            "password":"s3cret","authorized_key":[{"key":{"name":"ops","fingerprint":"56:29","type":"ED25519","size":256}}],"host_key":[]}"#;
        let r: Rescue = serde_json::from_str(active).unwrap();
        assert_eq!(r.os, OneOrMany::One("linux".into()));
        assert_eq!(r.authorized_key[0].fingerprint.as_str(), "56:29");
        assert!(!format!("{r:?}").contains("s3cret"));
    }
}
