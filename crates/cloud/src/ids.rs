//! Typed identifiers of cloud resources, so a server id can never be passed where a volume
//! id is expected.
//!
//! Hetzner Cloud ids are integers (≤ 2^53 − 1 on the wire); Vultr ids are strings (UUIDs for
//! resources, short codes for plans and regions); Robot servers are numbered and SSH keys
//! are named by their MD5 fingerprint.

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! numeric_id {
    ($($(#[$meta:meta])* $name:ident;)*) => {$(
        $(#[$meta])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub u64);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }

        impl From<u64> for $name {
            fn from(id: u64) -> Self {
                $name(id)
            }
        }
    )*};
}

macro_rules! string_id {
    ($($(#[$meta:meta])* $name:ident;)*) => {$(
        $(#[$meta])*
        #[derive(
            Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub String);

        impl $name {
            /// The id as the API spells it.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(id: &str) -> Self {
                $name(id.to_string())
            }
        }

        impl From<String> for $name {
            fn from(id: String) -> Self {
                $name(id)
            }
        }
    )*};
}

numeric_id! {
    /// A Hetzner Cloud server.
    HcloudServerId;
    /// A Hetzner Cloud action (asynchronous operation).
    HcloudActionId;
    /// A Hetzner Cloud server type (`cx23` is 114).
    HcloudServerTypeId;
    /// A Hetzner Cloud location (`fsn1` is 1).
    HcloudLocationId;
    /// A Hetzner Cloud image.
    HcloudImageId;
    /// A Hetzner Cloud private network.
    HcloudNetworkId;
    /// A Hetzner Cloud primary IP.
    HcloudPrimaryIpId;
    /// A Hetzner Cloud floating IP.
    HcloudFloatingIpId;
    /// A Hetzner Cloud SSH key.
    HcloudSshKeyId;
    /// A Hetzner Cloud volume.
    HcloudVolumeId;
    /// A Hetzner Robot dedicated server (its "server number").
    RobotServerNumber;
    /// A Vultr operating system image (`2284` is Ubuntu 24.04).
    VultrOsId;
}

string_id! {
    /// A Vultr instance (UUID).
    VultrInstanceId;
    /// A Vultr plan (`vc2-2c-4gb`).
    VultrPlanId;
    /// A Vultr region (`fra`).
    VultrRegionId;
    /// A Vultr VPC (UUID).
    VultrVpcId;
    /// A Vultr reserved IP (UUID).
    VultrReservedIpId;
    /// A Vultr SSH key (UUID).
    VultrSshKeyId;
    /// A Vultr block storage volume (UUID).
    VultrBlockId;
    /// A Hetzner Robot SSH key, named by its MD5 fingerprint (`56:29:99:…`).
    RobotKeyFingerprint;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_transparent_on_the_wire() {
        let id: HcloudServerId = serde_json::from_str("103147789").unwrap();
        assert_eq!(id, HcloudServerId(103147789));
        assert_eq!(serde_json::to_string(&id).unwrap(), "103147789");
        let vid: VultrInstanceId = serde_json::from_str("\"4f0f12e5\"").unwrap();
        assert_eq!(vid.as_str(), "4f0f12e5");
        assert_eq!(vid.to_string(), "4f0f12e5");
    }
}
