//! The agent protocol's mesh messages and `orc_mesh`'s config, both ways. Reading names
//! the field that is wrong ([`MeshWireError`]); an agent refuses a config it cannot read
//! rather than apply part of it.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::str::FromStr;

use ipnet::Ipv4Net;
use orc_mesh::PublicKey;
use orc_mesh::config::{
    ForwardPort, GatewayRole, HostEntry, Interface, MeshConfig, Peer, PoolForward, Route,
    UdpForward,
};

use crate::agent_pb as pb;

/// A mesh message with a field that does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("mesh config field {field}: {value:?} is not {expected}")]
pub struct MeshWireError {
    pub field: &'static str,
    pub value: String,
    pub expected: &'static str,
}

fn read<T: FromStr>(
    field: &'static str,
    value: &str,
    expected: &'static str,
) -> Result<T, MeshWireError> {
    value.parse().map_err(|_| MeshWireError {
        field,
        value: value.to_string(),
        expected,
    })
}

fn opt<T: FromStr>(
    field: &'static str,
    value: &str,
    expected: &'static str,
) -> Result<Option<T>, MeshWireError> {
    if value.is_empty() {
        Ok(None)
    } else {
        read(field, value, expected).map(Some)
    }
}

fn port(field: &'static str, value: u32) -> Result<u16, MeshWireError> {
    u16::try_from(value).map_err(|_| MeshWireError {
        field,
        value: value.to_string(),
        expected: "a port",
    })
}

fn nets(field: &'static str, values: &[String]) -> Result<Vec<Ipv4Net>, MeshWireError> {
    values
        .iter()
        .map(|v| read(field, v, "an IPv4 CIDR"))
        .collect()
}

fn strings<T: ToString>(values: &[T]) -> Vec<String> {
    values.iter().map(ToString::to_string).collect()
}

impl From<&MeshConfig> for pb::Mesh {
    fn from(config: &MeshConfig) -> pb::Mesh {
        pb::Mesh {
            interfaces: config
                .interfaces
                .iter()
                .map(|i| pb::WireguardInterface {
                    name: i.name.clone(),
                    address: i.address.map(|a| a.to_string()).unwrap_or_default(),
                    listen_port: u32::from(i.listen_port),
                    peers: i
                        .peers
                        .iter()
                        .map(|p| pb::WireguardPeer {
                            name: p.name.clone(),
                            public_key: p.public_key.as_bytes().to_vec(),
                            endpoint: p.endpoint.map(|e| e.to_string()).unwrap_or_default(),
                            allowed_ips: strings(&p.allowed_ips),
                            keepalive_seconds: p.keepalive.map_or(0, u32::from),
                        })
                        .collect(),
                })
                .collect(),
            routes: config
                .routes
                .iter()
                .map(|r| pb::Route {
                    destination: r.destination.to_string(),
                    interface: r.interface.clone(),
                })
                .collect(),
            gateway: config.gateway.as_ref().map(|g| pb::GatewayRole {
                site: g.site.clone(),
                site_prefix: g.site_prefix.to_string(),
                stable_ipv4: g.stable_ipv4.to_string(),
                no_nat: strings(&g.no_nat),
                blocked: strings(&g.blocked),
                udp_forwards: g
                    .udp_forwards
                    .iter()
                    .map(|f| pb::UdpForward {
                        port: u32::from(f.port),
                        to: f.to.to_string(),
                    })
                    .collect(),
                pool_forwards: g
                    .pool_forwards
                    .iter()
                    .map(|p| pb::PoolForward {
                        pool: p.pool.clone(),
                        address: p.address.to_string(),
                        ports: p
                            .ports
                            .iter()
                            .map(|port| pb::ForwardPort {
                                protocol: port.protocol.clone(),
                                port: u32::from(port.port),
                            })
                            .collect(),
                        targets: strings(&p.targets),
                    })
                    .collect(),
            }),
            hosts: config
                .hosts
                .iter()
                .map(|h| pb::HostEntry {
                    name: h.name.clone(),
                    address: h.address.to_string(),
                })
                .collect(),
        }
    }
}

impl TryFrom<&pb::Mesh> for MeshConfig {
    type Error = MeshWireError;

    fn try_from(mesh: &pb::Mesh) -> Result<MeshConfig, MeshWireError> {
        let interfaces = mesh
            .interfaces
            .iter()
            .map(|i| {
                Ok(Interface {
                    name: i.name.clone(),
                    address: opt("interfaces.address", &i.address, "an IPv4 CIDR")?,
                    listen_port: port("interfaces.listen_port", i.listen_port)?,
                    peers: i
                        .peers
                        .iter()
                        .map(|p| {
                            Ok(Peer {
                                name: p.name.clone(),
                                public_key: PublicKey::from_slice(&p.public_key).map_err(|_| {
                                    MeshWireError {
                                        field: "peers.public_key",
                                        value: format!("{} bytes", p.public_key.len()),
                                        expected: "32 bytes",
                                    }
                                })?,
                                endpoint: opt::<SocketAddrV4>(
                                    "peers.endpoint",
                                    &p.endpoint,
                                    "an IPv4 address and port",
                                )?,
                                allowed_ips: nets("peers.allowed_ips", &p.allowed_ips)?,
                                keepalive: match p.keepalive_seconds {
                                    0 => None,
                                    s => Some(port("peers.keepalive_seconds", s)?),
                                },
                            })
                        })
                        .collect::<Result<_, MeshWireError>>()?,
                })
            })
            .collect::<Result<_, MeshWireError>>()?;
        let routes = mesh
            .routes
            .iter()
            .map(|r| {
                Ok(Route {
                    destination: read("routes.destination", &r.destination, "an IPv4 CIDR")?,
                    interface: r.interface.clone(),
                })
            })
            .collect::<Result<_, MeshWireError>>()?;
        let gateway = mesh
            .gateway
            .as_ref()
            .map(|g| {
                Ok::<_, MeshWireError>(GatewayRole {
                    site: g.site.clone(),
                    site_prefix: read("gateway.site_prefix", &g.site_prefix, "an IPv4 CIDR")?,
                    stable_ipv4: read::<Ipv4Addr>(
                        "gateway.stable_ipv4",
                        &g.stable_ipv4,
                        "an IPv4 address",
                    )?,
                    no_nat: nets("gateway.no_nat", &g.no_nat)?,
                    blocked: nets("gateway.blocked", &g.blocked)?,
                    udp_forwards: g
                        .udp_forwards
                        .iter()
                        .map(|f| {
                            Ok(UdpForward {
                                port: port("udp_forwards.port", f.port)?,
                                to: read("udp_forwards.to", &f.to, "an IPv4 address and port")?,
                            })
                        })
                        .collect::<Result<_, MeshWireError>>()?,
                    pool_forwards: g
                        .pool_forwards
                        .iter()
                        .map(|p| {
                            Ok(PoolForward {
                                pool: p.pool.clone(),
                                address: read(
                                    "pool_forwards.address",
                                    &p.address,
                                    "an IPv4 address",
                                )?,
                                ports: p
                                    .ports
                                    .iter()
                                    .map(|fp| {
                                        Ok(ForwardPort {
                                            protocol: fp.protocol.clone(),
                                            port: port("pool_forwards.ports.port", fp.port)?,
                                        })
                                    })
                                    .collect::<Result<_, MeshWireError>>()?,
                                targets: p
                                    .targets
                                    .iter()
                                    .map(|t| read("pool_forwards.targets", t, "an IPv4 address"))
                                    .collect::<Result<_, MeshWireError>>()?,
                            })
                        })
                        .collect::<Result<_, MeshWireError>>()?,
                })
            })
            .transpose()?;
        let hosts = mesh
            .hosts
            .iter()
            .map(|h| {
                Ok(HostEntry {
                    name: h.name.clone(),
                    address: read("hosts.address", &h.address, "an IPv4 address")?,
                })
            })
            .collect::<Result<_, MeshWireError>>()?;
        Ok(MeshConfig {
            interfaces,
            routes,
            gateway,
            hosts,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> MeshConfig {
        MeshConfig {
            interfaces: vec![Interface {
                name: "orc-mesh".into(),
                address: Some("10.88.0.2/24".parse().unwrap()),
                listen_port: 51820,
                peers: vec![Peer {
                    name: "n-2".into(),
                    public_key: PublicKey([7; 32]),
                    endpoint: Some("198.18.1.10:52011".parse().unwrap()),
                    allowed_ips: vec!["10.88.0.3/32".parse().unwrap()],
                    keepalive: Some(25),
                }],
            }],
            routes: vec![Route {
                destination: "10.128.1.0/24".parse().unwrap(),
                interface: "orc-backbone".into(),
            }],
            gateway: Some(GatewayRole {
                site: "partner/eu-central-a".into(),
                site_prefix: "10.128.0.0/24".parse().unwrap(),
                stable_ipv4: "198.18.1.10".parse().unwrap(),
                no_nat: vec!["10.128.0.0/24".parse().unwrap()],
                blocked: vec!["10.88.0.0/16".parse().unwrap()],
                udp_forwards: vec![UdpForward {
                    port: 52011,
                    to: "10.128.0.11:51820".parse().unwrap(),
                }],
                pool_forwards: vec![PoolForward {
                    pool: "acme/web/api".into(),
                    address: "198.18.1.20".parse().unwrap(),
                    ports: vec![ForwardPort {
                        protocol: "tcp".into(),
                        port: 80,
                    }],
                    targets: vec!["10.128.0.11".parse().unwrap()],
                }],
            }),
            hosts: vec![HostEntry {
                name: "n-2.web.acme.internal".into(),
                address: "10.88.0.3".parse().unwrap(),
            }],
        }
    }

    #[test]
    fn a_mesh_config_crosses_the_wire_unchanged() {
        let config = sample();
        let wire = pb::Mesh::from(&config);
        assert_eq!(MeshConfig::try_from(&wire).unwrap(), config);
        let empty = MeshConfig::default();
        assert_eq!(
            MeshConfig::try_from(&pb::Mesh::from(&empty)).unwrap(),
            empty
        );
    }

    #[test]
    fn a_bad_field_is_named() {
        let mut wire = pb::Mesh::from(&sample());
        wire.interfaces[0].peers[0].endpoint = "nowhere".into();
        let err = MeshConfig::try_from(&wire).unwrap_err();
        assert_eq!(err.field, "peers.endpoint");
        let mut wire = pb::Mesh::from(&sample());
        wire.interfaces[0].peers[0].public_key = vec![1, 2, 3];
        let err = MeshConfig::try_from(&wire).unwrap_err();
        assert_eq!(
            err.to_string(),
            "mesh config field peers.public_key: \"3 bytes\" is not 32 bytes"
        );
        let mut wire = pb::Mesh::from(&sample());
        wire.gateway.as_mut().unwrap().udp_forwards[0].port = 70_000;
        assert_eq!(
            MeshConfig::try_from(&wire).unwrap_err().field,
            "udp_forwards.port"
        );
    }
}
