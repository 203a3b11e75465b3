//! Typed identifiers carried by the protocol: the vocabulary's ids from `orc-common`, and
//! the stream's own [`RequestId`].

use std::fmt;

pub use orc_common::ids::{
    ClassId, EmptyId, InstanceRef, NodeId, OsId, PoolPath, ProviderName, QuoteToken, ResourceUri,
    SiteName,
};

/// Correlates a request from the zone with the provider's answers on one stream.
///
/// Zero is reserved for messages nobody asked for (hello, catalog, inventory, keep-alive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct RequestId(pub u64);

impl RequestId {
    /// The id of unsolicited messages.
    pub const UNSOLICITED: RequestId = RequestId(0);
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
