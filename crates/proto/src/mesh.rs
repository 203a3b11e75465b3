//! The agent protocol's mesh messages and `orc_mesh`'s config, both ways. Reading names
//! the field that is wrong ([`MeshWireError`]); an agent refuses a config it cannot read
//! rather than apply part of it.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::str::FromStr;

use ipnet::Ipv4Net;
use orc_mesh::PublicKey;
use orc_mesh::changes::{InterfaceChanges, MeshChanges};
use orc_mesh::config::{
    ForwardPort, GatewayRole, HostEntry, Interface, MeshConfig, Peer, PeerList, PoolForward, Route,
    Shared, UdpForward,
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

fn peer_to_wire(p: &Peer) -> pb::WireguardPeer {
    pb::WireguardPeer {
        name: p.name.clone(),
        public_key: p.public_key.as_bytes().to_vec(),
        endpoint: p.endpoint.map(|e| e.to_string()).unwrap_or_default(),
        allowed_ips: strings(&p.allowed_ips),
        keepalive_seconds: p.keepalive.map_or(0, u32::from),
    }
}

fn key_from_wire(field: &'static str, bytes: &[u8]) -> Result<PublicKey, MeshWireError> {
    PublicKey::from_slice(bytes).map_err(|_| MeshWireError {
        field,
        value: format!("{} bytes", bytes.len()),
        expected: "32 bytes",
    })
}

fn peer_from_wire(p: &pb::WireguardPeer) -> Result<Peer, MeshWireError> {
    Ok(Peer {
        name: p.name.clone(),
        public_key: key_from_wire("peers.public_key", &p.public_key)?,
        endpoint: opt::<SocketAddrV4>("peers.endpoint", &p.endpoint, "an IPv4 address and port")?,
        allowed_ips: nets("peers.allowed_ips", &p.allowed_ips)?,
        keepalive: match p.keepalive_seconds {
            0 => None,
            s => Some(port("peers.keepalive_seconds", s)?),
        },
    })
}

fn peers_from_wire(peers: &[pb::WireguardPeer]) -> Result<Vec<Peer>, MeshWireError> {
    peers.iter().map(peer_from_wire).collect()
}

fn route_to_wire(r: &Route) -> pb::Route {
    pb::Route {
        destination: r.destination.to_string(),
        interface: r.interface.clone(),
    }
}

fn routes_from_wire(routes: &[pb::Route]) -> Result<Vec<Route>, MeshWireError> {
    routes
        .iter()
        .map(|r| {
            Ok(Route {
                destination: read("routes.destination", &r.destination, "an IPv4 CIDR")?,
                interface: r.interface.clone(),
            })
        })
        .collect()
}

fn host_to_wire(h: &HostEntry) -> pb::HostEntry {
    pb::HostEntry {
        name: h.name.clone(),
        address: h.address.to_string(),
    }
}

fn hosts_from_wire(hosts: &[pb::HostEntry]) -> Result<Vec<HostEntry>, MeshWireError> {
    hosts
        .iter()
        .map(|h| {
            Ok(HostEntry {
                name: h.name.clone(),
                address: read("hosts.address", &h.address, "an IPv4 address")?,
            })
        })
        .collect()
}

fn gateway_to_wire(g: &GatewayRole) -> pb::GatewayRole {
    pb::GatewayRole {
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
    }
}

fn gateway_from_wire(g: &pb::GatewayRole) -> Result<GatewayRole, MeshWireError> {
    Ok(GatewayRole {
        site: g.site.clone(),
        site_prefix: read("gateway.site_prefix", &g.site_prefix, "an IPv4 CIDR")?,
        stable_ipv4: read::<Ipv4Addr>("gateway.stable_ipv4", &g.stable_ipv4, "an IPv4 address")?,
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
                    address: read("pool_forwards.address", &p.address, "an IPv4 address")?,
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
                    peers: i.peers.iter().map(peer_to_wire).collect(),
                })
                .collect(),
            routes: config.routes.iter().map(route_to_wire).collect(),
            gateway: config.gateway.as_ref().map(gateway_to_wire),
            hosts: config.hosts.iter().map(host_to_wire).collect(),
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
                    peers: PeerList::new(peers_from_wire(&i.peers)?),
                })
            })
            .collect::<Result<_, MeshWireError>>()?;
        let mut hosts = hosts_from_wire(&mesh.hosts)?;
        hosts.sort();
        Ok(MeshConfig {
            interfaces,
            routes: routes_from_wire(&mesh.routes)?,
            gateway: mesh.gateway.as_ref().map(gateway_from_wire).transpose()?,
            hosts: Shared::new(hosts),
        })
    }
}

/// `changes` on the wire, as changes to the config of generation `base_generation`.
pub fn changes_to_wire(changes: &MeshChanges, base_generation: u64) -> pb::MeshChanges {
    pb::MeshChanges {
        base_generation,
        interfaces: changes
            .interfaces
            .iter()
            .map(|i| pb::InterfaceChanges {
                name: i.name.clone(),
                removed: i.removed,
                address: i.address.map(|a| a.to_string()).unwrap_or_default(),
                listen_port: u32::from(i.listen_port),
                peers_set: i.peers_set.iter().map(peer_to_wire).collect(),
                peers_removed: i
                    .peers_removed
                    .iter()
                    .map(|k| k.as_bytes().to_vec())
                    .collect(),
            })
            .collect(),
        routes: changes.routes.as_ref().map(|routes| pb::RouteList {
            routes: routes.iter().map(route_to_wire).collect(),
        }),
        gateway: changes.gateway.as_ref().map(|role| pb::GatewayChange {
            role: role.as_ref().map(gateway_to_wire),
        }),
        hosts_set: changes.hosts_set.iter().map(host_to_wire).collect(),
        hosts_removed: changes.hosts_removed.clone(),
    }
}

impl TryFrom<&pb::MeshChanges> for MeshChanges {
    type Error = MeshWireError;

    fn try_from(changes: &pb::MeshChanges) -> Result<MeshChanges, MeshWireError> {
        let interfaces = changes
            .interfaces
            .iter()
            .map(|i| {
                Ok(InterfaceChanges {
                    name: i.name.clone(),
                    removed: i.removed,
                    address: opt("interfaces.address", &i.address, "an IPv4 CIDR")?,
                    listen_port: port("interfaces.listen_port", i.listen_port)?,
                    peers_set: peers_from_wire(&i.peers_set)?,
                    peers_removed: i
                        .peers_removed
                        .iter()
                        .map(|k| key_from_wire("peers_removed", k))
                        .collect::<Result<_, MeshWireError>>()?,
                })
            })
            .collect::<Result<_, MeshWireError>>()?;
        Ok(MeshChanges {
            interfaces,
            routes: changes
                .routes
                .as_ref()
                .map(|r| routes_from_wire(&r.routes))
                .transpose()?,
            gateway: changes
                .gateway
                .as_ref()
                .map(|g| g.role.as_ref().map(gateway_from_wire).transpose())
                .transpose()?,
            hosts_set: hosts_from_wire(&changes.hosts_set)?,
            hosts_removed: changes.hosts_removed.clone(),
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
                peers: PeerList::new(vec![Peer {
                    name: "n-2".into(),
                    public_key: PublicKey([7; 32]),
                    endpoint: Some("198.18.1.10:52011".parse().unwrap()),
                    allowed_ips: vec!["10.88.0.3/32".parse().unwrap()],
                    keepalive: Some(25),
                }]),
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
            hosts: Shared::new(vec![HostEntry {
                name: "n-2.web.acme.internal".into(),
                address: "10.88.0.3".parse().unwrap(),
            }]),
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

    #[test]
    fn mesh_changes_cross_the_wire_unchanged() {
        let old = sample();
        let mut new = sample();
        new.interfaces[0].peers = PeerList::new(vec![Peer {
            name: "n-3".into(),
            public_key: PublicKey([9; 32]),
            endpoint: None,
            allowed_ips: vec!["10.88.0.4/32".parse().unwrap()],
            keepalive: None,
        }]);
        new.gateway = None;
        new.routes.clear();
        let changes = MeshChanges::between(&old, &new);
        let wire = changes_to_wire(&changes, 7);
        assert_eq!(wire.base_generation, 7);
        assert_eq!(wire.interfaces[0].peers_removed, [vec![7u8; 32]]);
        assert!(wire.gateway.as_ref().unwrap().role.is_none());
        let back = MeshChanges::try_from(&wire).unwrap();
        assert_eq!(back, changes);
        assert_eq!(back.apply(&old).unwrap(), new);
        let mut bad = wire;
        bad.interfaces[0].peers_removed[0] = vec![1];
        assert_eq!(
            MeshChanges::try_from(&bad).unwrap_err().field,
            "peers_removed"
        );
    }
}
