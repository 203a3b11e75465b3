//! Where the slots of app pools serve their http endpoints: asked by the access edge, which
//! forwards to them, and by the API, which shows them; answered by whatever runs the slots.

use std::net::SocketAddr;

use crate::model::PoolId;

/// Where the slots of app pools serve their http endpoints.
pub trait EndpointDirectory: Send + Sync + 'static {
    /// `(slot, endpoint, address)` of every slot of `pool` that serves one, by slot.
    fn http_endpoints(&self, pool: &PoolId) -> Vec<(u32, String, SocketAddr)>;
}

/// `https://<host>[:port]`, the port left out when it is 443: the address of a name the
/// access edge serves.
pub fn host_url(host: &str, port: u16) -> String {
    if port == 443 {
        format!("https://{host}")
    } else {
        format!("https://{host}:{port}")
    }
}
