//! [`Device`]: one WireGuard interface, its TUN device, its UDP socket and the tokio tasks
//! that move packets between them through the [`Engine`].

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;

use tokio::task::JoinHandle;

use crate::config::{Batching, DeviceConfig, Key, PeerConfig};
use crate::engine::{Engine, PeerStats};
use crate::error::Error;
use crate::io::{Io, spawn as spawn_datapath};

/// A userspace WireGuard interface.
///
/// Created in the network namespace of the calling thread, on the tokio runtime of the
/// caller. Dropping it (or [`shutdown`](Device::shutdown)) stops its tasks, which closes the
/// TUN device and so removes the interface.
#[derive(Debug)]
pub struct Device {
    name: String,
    listen_port: u16,
    batching: BatchingInUse,
    engine: Arc<Engine>,
    tasks: Vec<JoinHandle<()>>,
}

/// Which kernel batching a device ended up with (what [`Batching::Auto`] found).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchingInUse {
    /// The TUN device hands over TSO super-packets and takes GRO-coalesced ones.
    pub tun_offload: bool,
    /// Datagrams to one peer leave in one `sendmsg` (UDP GSO): the most segments per call.
    pub udp_gso_segments: usize,
    /// Datagrams arrive coalesced (UDP GRO): the most segments per datagram.
    pub udp_gro_segments: usize,
}

impl Device {
    /// Creates the interface `config.name` with its address, brings it up, binds the UDP
    /// port and starts the datapath. Needs `CAP_NET_ADMIN` and `/dev/net/tun`; must run
    /// inside a tokio runtime (the tasks are spawned on it).
    pub async fn create(config: DeviceConfig) -> Result<Device, Error> {
        check_name(&config.name)?;
        if !(576..=65455).contains(&config.mtu) {
            return Err(Error::InvalidMtu {
                name: config.name.clone(),
                mtu: config.mtu,
            });
        }
        let engine = Arc::new(Engine::new(&config.private_key)?);
        let tun_error = |source| Error::Tun {
            name: config.name.clone(),
            source,
        };
        let tun = match config.batching {
            Batching::Auto => match build_tun(&config, true) {
                Ok(tun) => tun,
                Err(error) => {
                    tracing::info!(
                        interface = %config.name,
                        %error,
                        "TUN offloads unavailable; one packet per system call"
                    );
                    build_tun(&config, false).map_err(tun_error)?
                }
            },
            Batching::Off => build_tun(&config, false).map_err(tun_error)?,
        };
        let udp_error = |source| Error::Udp {
            name: config.name.clone(),
            port: config.listen_port,
            source,
        };
        let udp =
            std::net::UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, config.listen_port))
                .map_err(udp_error)?;
        udp.set_nonblocking(true).map_err(udp_error)?;
        let listen_port = udp.local_addr().map_err(udp_error)?.port();
        let udp = tokio::net::UdpSocket::from_std(udp).map_err(udp_error)?;
        let io =
            Io::new(tun, udp, config.batching == Batching::Auto, config.mtu).map_err(udp_error)?;
        let batching = io.batching_in_use();
        let tasks = spawn_datapath(engine.clone(), Arc::new(io));
        tracing::info!(interface = %config.name, listen_port, ?batching, "WireGuard interface up");
        Ok(Device {
            name: config.name,
            listen_port,
            batching,
            engine,
            tasks,
        })
    }

    /// Makes `peers` the whole peer set: peers not listed are removed with their sessions,
    /// new ones are added, and peers that stay keep their session while their endpoint,
    /// allowed IPs and keepalive change. A refused set changes nothing.
    pub fn set_peers(&self, peers: &[PeerConfig]) -> Result<(), Error> {
        self.engine.apply(peers)
    }

    /// Per-peer statistics, sorted by public key.
    pub fn stats(&self) -> Vec<PeerStats> {
        self.engine.stats()
    }

    /// This device's public key.
    pub fn public_key(&self) -> Key {
        self.engine.public_key()
    }

    /// The interface name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The UDP port the device listens on.
    pub fn listen_port(&self) -> u16 {
        self.listen_port
    }

    /// Which kernel batching the datapath uses.
    pub fn batching(&self) -> BatchingInUse {
        self.batching
    }

    /// Stops the datapath and removes the interface; when this returns, the interface and
    /// the UDP port are gone.
    pub async fn shutdown(mut self) {
        for task in &self.tasks {
            task.abort();
        }
        for task in self.tasks.drain(..) {
            let _ = task.await;
        }
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // The tasks own the TUN device and the socket: once the runtime has dropped them the
        // interface is gone (use `shutdown` to wait for that).
        for task in &self.tasks {
            task.abort();
        }
    }
}

fn check_name(name: &str) -> Result<(), Error> {
    let usable = !name.is_empty()
        && name.len() <= 15
        && !name.contains('/')
        && !name.chars().any(char::is_whitespace);
    if usable {
        Ok(())
    } else {
        Err(Error::InvalidName {
            name: name.to_owned(),
        })
    }
}

fn build_tun(config: &DeviceConfig, offload: bool) -> io::Result<tun_rs::AsyncDevice> {
    let mut builder = tun_rs::DeviceBuilder::new()
        .name(&config.name)
        .mtu(config.mtu)
        .offload(offload);
    if let Some(address) = config.address {
        builder = builder.ipv4(address.addr(), address.prefix_len(), None);
    }
    builder.build_async()
}
