//! TLS for the zone and its clients, and the accept loop the zone's listeners run.
//!
//! - [`ca`]: the zone's CA (ECDSA P-256), kept in two files, and the server certificates it
//!   signs;
//! - [`server`]: a rustls server config whose certificate the zone renews while it runs;
//! - [`client`]: pinning the zone's CA, and [`explain`]ing a failed connection;
//! - [`serve`]: the listeners' accept loop: TLS (or plain, on loopback), connection limits
//!   (in all, per source, and a reserve for authenticated connections), handshake,
//!   header-read and idle timeouts that shorten under pressure, HTTP/2 keep-alive,
//!   plain-text-on-a-TLS-port answered with a clear error, and graceful shutdown;
//! - [`limits`]: the rules of those limits and timeouts, free of I/O.
//!
//! Every TLS config here uses rustls with the ring provider.

pub mod ca;
pub mod client;
pub mod limits;
pub mod serve;
pub mod server;

pub use rustls;

use std::sync::Arc;

pub use ca::{
    CaError, NODE_CERT_LIFETIME, NodeCertificate, NodeIdentity, ServerIdentity, ZoneCa, fingerprint,
};
pub use client::{FingerprintPin, PinError, PinnedCa, TlsFailure, explain};
pub use serve::{ClientCertificate, ConnectionAuth, PeerAddr, ServeOptions, serve};
pub use server::{
    RenewingCert, certified, server_config, server_config_with_clients, server_config_with_resolver,
};

/// ALPN of an HTTP/2-only listener (the provider endpoint).
pub const ALPN_H2: &[&[u8]] = &[b"h2"];
/// ALPN of a listener that speaks both HTTP versions (the API).
pub const ALPN_HTTP: &[&[u8]] = &[b"h2", b"http/1.1"];

/// The crypto provider every config here uses.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}
