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

pub mod convert;
pub mod domain;
pub mod ids;

/// Generated protobuf messages and the `ProviderHub` service.
#[allow(missing_docs, missing_debug_implementations, unused_qualifications)]
#[allow(clippy::all)]
pub mod pb {
    tonic::include_proto!("orc.provider.v1");
}

pub use convert::ConvertError;
pub use domain::*;
pub use ids::*;

/// The protocol version this crate speaks, sent in every `Hello`.
///
/// Bumped only for a change an older peer cannot safely ignore; adding fields is not one.
pub const PROTOCOL_VERSION: u32 = 1;
