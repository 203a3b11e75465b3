//! The ingress proxy's tests, against real listeners on loopback: one binary, one module
//! per area.

mod balancing;
mod client_address;
mod http_routing;
mod https;
mod shutdown;
mod streaming;
mod support;
mod swap;
mod tcp;
mod upgrade;
