//! What can go wrong when the proxy starts and when a route table is set.
//!
//! A table is always applied as far as it can be: [`PartlyApplied`] lists the parts that
//! were left out ([`RouteProblem`]), each naming its host or port, and everything else
//! serves.

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};

/// Why [`Proxy::start`](crate::Proxy::start) failed.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A listener's address could not be bound.
    #[error("cannot listen for {listener} on {addr}")]
    Listen {
        /// `HTTP` or `HTTPS`.
        listener: &'static str,
        /// The address from the config.
        addr: SocketAddr,
        /// What the operating system said.
        #[source]
        source: io::Error,
    },
    /// A config value is out of range.
    #[error("proxy config: {field} {problem}")]
    Config {
        /// The field of [`ProxyConfig`](crate::ProxyConfig).
        field: &'static str,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// rustls refused the TLS settings.
    #[error("rustls refused the HTTPS listener's TLS settings")]
    Tls(#[source] rustls::Error),
    /// A serving thread or its runtime could not be started.
    #[error("cannot start a serving thread")]
    Runtime(#[source] io::Error),
}

/// One part of a route table that [`Proxy::set_routes`](crate::Proxy::set_routes) left out.
#[derive(Debug, thiserror::Error)]
pub enum RouteProblem {
    /// A TCP route's port could not be listened on (in use, privileged, …). It is tried
    /// again on every later `set_routes` that still has it.
    #[error("TCP port {port} cannot be opened on {ip}")]
    PortUnavailable {
        /// The route's public port.
        port: u16,
        /// The config's `tcp_bind_ip`.
        ip: IpAddr,
        /// What the operating system said.
        #[source]
        source: io::Error,
    },
    /// A TCP route on port 0, which no client can reach.
    #[error("TCP port 0 cannot be served (route {route})")]
    PortZero {
        /// The route's name.
        route: String,
    },
    /// A certificate that cannot be used; its host is served as if it had none.
    #[error("the certificate for {host} cannot be used: {defect}")]
    BadCertificate {
        /// The host it was given for.
        host: String,
        /// What is wrong with it.
        defect: CertificateDefect,
    },
    /// A host name key that is not a host name (a port, a path, spaces, empty).
    #[error("{table} entry {host:?} is not a host name (lower-case, no port)")]
    InvalidHost {
        /// `http` or `certificates`.
        table: &'static str,
        /// The key as given.
        host: String,
    },
}

impl RouteProblem {
    /// Whether the same table may apply fully later without changing it: a port in use may
    /// be freed by whoever holds it; the other problems are in the table itself.
    pub fn may_clear_by_itself(&self) -> bool {
        match self {
            RouteProblem::PortUnavailable { .. } => true,
            RouteProblem::PortZero { .. }
            | RouteProblem::BadCertificate { .. }
            | RouteProblem::InvalidHost { .. } => false,
        }
    }
}

/// What is wrong with a [`Certificate`](crate::Certificate).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CertificateDefect {
    /// `chain_pem` holds no `CERTIFICATE` block.
    #[error("the chain holds no PEM certificate")]
    NoCertificate,
    /// `chain_pem` is not valid PEM.
    #[error("the chain is not valid PEM")]
    ChainNotPem,
    /// `key_pem` holds no private key block, or it is not valid PEM.
    #[error("the key is not a PEM private key")]
    NoKey,
    /// The key's algorithm is not one rustls with ring can sign with.
    #[error("the key's algorithm is not supported")]
    UnsupportedKey,
    /// The key is not the leaf certificate's, or the leaf cannot be parsed.
    #[error("the key does not belong to the leaf certificate")]
    KeyMismatch,
}

/// The route table was applied except for the parts listed.
///
/// Its message lists every problem with its cause (an aggregate has no single
/// [`source`](std::error::Error::source) to chain them through).
#[derive(Debug, thiserror::Error)]
pub struct PartlyApplied {
    /// Each part left out, in the order of the table (certificates, hosts, then ports).
    pub problems: Vec<RouteProblem>,
}

impl fmt::Display for PartlyApplied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the route table was applied except for: ")?;
        for (i, problem) in self.problems.iter().enumerate() {
            if i > 0 {
                write!(f, "; ")?;
            }
            write!(f, "{problem}")?;
            let mut cause = std::error::Error::source(problem);
            while let Some(inner) = cause {
                write!(f, ": {inner}")?;
                cause = inner.source();
            }
        }
        Ok(())
    }
}
