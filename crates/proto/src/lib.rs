//! The provider protocol of orc (`orc.provider.v1`): one bidirectional gRPC stream per
//! provider replica, opened by the provider.
//!
//! Two layers live here:
//! - [`pb`]: the generated prost messages and the tonic `ProviderHub` client and server.
//!   Only the wire code and the conversions touch these.
//! - [`domain`] and [`ids`]: the typed values both sides program against. Every proto
//!   message converts into its domain value with `TryFrom`, which names the missing or
//!   invalid field ([`ConvertError`]); every domain value converts back with `From`.
//!
//! This crate does no I/O of its own; the provider side of the stream lives in
//! `orc-provider-sdk`, the zone side in the zone controller.

pub mod bootstrap;
pub mod convert;
pub mod domain;
pub mod ids;
pub mod mesh;

/// Generated protobuf messages and the `ProviderHub` service.
#[allow(missing_docs, missing_debug_implementations, unused_qualifications)]
#[allow(clippy::all)]
pub mod pb {
    tonic::include_proto!("orc.provider.v1");
}

/// Generated protobuf messages and the `AgentHub` service (`orc.agent.v1`): the stream each
/// node's agent keeps open to the zone.
#[allow(missing_docs, missing_debug_implementations, unused_qualifications)]
#[allow(clippy::all)]
pub mod agent_pb {
    tonic::include_proto!("orc.agent.v1");
}

/// The agent protocol version this crate speaks, sent in every agent `Hello`.
pub const AGENT_PROTOCOL_VERSION: u32 = 1;

pub use convert::{ConvertError, WORDS_MAX_BYTES};
pub use domain::*;
pub use ids::*;

/// The protocol version this crate speaks, sent in every `Hello`.
///
/// Bumped only for a change an older peer cannot safely ignore; adding fields is not one.
pub const PROTOCOL_VERSION: u32 = 1;

/// The oldest protocol version this crate can still serve.
pub const OLDEST_SUPPORTED_PROTOCOL_VERSION: u32 = 1;

/// A peer speaks a protocol version this build cannot serve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "protocol version {offered} is not supported; this build speaks versions {oldest} to {newest}"
)]
pub struct UnsupportedProtocolVersion {
    pub offered: u32,
    pub oldest: u32,
    pub newest: u32,
}

/// Checks a peer's `protocol_version` (from `Hello`) against the versions this build serves.
/// The zone ends the stream with `FAILED_PRECONDITION` and this message when it fails.
pub fn check_protocol_version(offered: u32) -> Result<(), UnsupportedProtocolVersion> {
    if (OLDEST_SUPPORTED_PROTOCOL_VERSION..=PROTOCOL_VERSION).contains(&offered) {
        Ok(())
    } else {
        Err(UnsupportedProtocolVersion {
            offered,
            oldest: OLDEST_SUPPORTED_PROTOCOL_VERSION,
            newest: PROTOCOL_VERSION,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_versions_outside_the_supported_range_are_named() {
        assert_eq!(check_protocol_version(PROTOCOL_VERSION), Ok(()));
        let err = check_protocol_version(PROTOCOL_VERSION + 1).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "protocol version {} is not supported; this build speaks versions 1 to {}",
                PROTOCOL_VERSION + 1,
                PROTOCOL_VERSION
            )
        );
    }
}
