//! The agent's part of the mesh: its WireGuard key, and applying the mesh config the zone
//! sends ([`orc_mesh::MeshConfig`]) as the difference from what it applied before.
//!
//! - **Key.** Made on the machine at the first start and kept in the state dir
//!   (`wireguard-key`, 0600); only its public half is reported, in the facts.
//! - **Interfaces.** Userspace WireGuard ([`orc_wg::Device`]): an interface that exists
//!   keeps running and gets its new peer set (sessions of peers that stay are kept); one
//!   whose address or port changed is made again; one no longer wanted is removed.
//! - **Routes.** `ip route replace` for each route wanted, `ip route del` for each one
//!   applied before and wanted no more.
//! - **Gateway.** Forwarding on, and the site's NAT and forwarding as one nftables table
//!   ([`nft`]), written again whenever the role or the health of a pool's nodes changes:
//!   every second each pool target's first TCP port is dialled, and a target that did not
//!   answer twice in a row leaves the forwarding set until it answers again. The site's
//!   pool addresses go on the interface of its stable address ([`pool_addresses`]).
//! - **Names.** The project's node names, answered on the mesh address ([`dns`]).
//!
//! Every step is checked; the first that fails is the error the agent reports for the
//! generation, and the next config tries again from what is actually applied.

pub mod dns;
pub mod nft;
pub mod pool_addresses;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use orc_mesh::MeshConfig;
use orc_mesh::config::{GatewayRole, Interface, Route};
use tokio::process::Command;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The key's file in the state dir.
pub const KEY_FILE: &str = "wireguard-key";

/// How often a gateway checks its pool targets.
pub const HEALTH_INTERVAL: Duration = Duration::from_secs(1);
/// How long one check may take.
pub const HEALTH_TIMEOUT: Duration = Duration::from_millis(500);
/// Failed checks in a row before a target leaves the forwarding set.
pub const HEALTH_FAILURES: u32 = 2;

/// Why a mesh config could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum MeshError {
    #[error("the WireGuard key in {path}: {reason}")]
    Key { path: PathBuf, reason: String },
    #[error("WireGuard interface {name}: {source}")]
    Device {
        name: String,
        #[source]
        source: orc_wg::Error,
    },
    #[error("`{command}` failed: {output}")]
    Command { command: String, output: String },
}

/// The node's WireGuard key pair.
#[derive(Clone)]
pub struct MeshKey {
    private: orc_wg::Key,
    public: orc_mesh::PublicKey,
}

impl std::fmt::Debug for MeshKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MeshKey({})", self.public)
    }
}

impl MeshKey {
    /// The key in `dir`, made (and written 0600) when there is none.
    pub fn load_or_create(dir: &Path) -> Result<MeshKey, MeshError> {
        let path = dir.join(KEY_FILE);
        let bad = |reason: String| MeshError::Key {
            path: path.clone(),
            reason,
        };
        let private = match std::fs::read_to_string(&path) {
            Ok(text) => {
                let key: orc_mesh::PublicKey = text
                    .parse()
                    .map_err(|_| bad("not a base64 WireGuard key".into()))?;
                key.0
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key = orc_wg::generate_private_key().map_err(|e| bad(e.to_string()))?;
                crate::state::write_private(&path, orc_mesh::PublicKey(key).to_string())
                    .map_err(|e| bad(e.to_string()))?;
                key
            }
            Err(e) => return Err(bad(e.to_string())),
        };
        Ok(MeshKey {
            private,
            public: orc_mesh::PublicKey(orc_wg::public_key(&private)),
        })
    }

    pub fn public(&self) -> orc_mesh::PublicKey {
        self.public
    }
}

/// An interface as applied: its config without peers, and the device.
struct Applied {
    address: Option<ipnet::Ipv4Net>,
    listen_port: u16,
    device: orc_wg::Device,
}

/// What the agent applied of the mesh.
pub struct Mesh {
    key: MeshKey,
    devices: BTreeMap<String, Applied>,
    routes: BTreeSet<Route>,
    gateway: Option<GatewayRun>,
    pool_addresses: pool_addresses::PoolAddresses,
    names: dns::NameServer,
}

impl std::fmt::Debug for Mesh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mesh")
            .field("key", &self.key)
            .field("interfaces", &self.devices.keys().collect::<Vec<_>>())
            .field("routes", &self.routes)
            .finish_non_exhaustive()
    }
}

impl Mesh {
    /// The mesh of the agent holding `key`; its name server also answers `services`.
    pub fn new(key: MeshKey, services: dns::ServiceNames) -> Mesh {
        Mesh {
            key,
            devices: BTreeMap::new(),
            routes: BTreeSet::new(),
            gateway: None,
            pool_addresses: pool_addresses::PoolAddresses::default(),
            names: dns::NameServer::new(services),
        }
    }

    pub fn public_key(&self) -> orc_mesh::PublicKey {
        self.key.public
    }

    /// Per-peer statistics of every interface, by interface name.
    pub fn stats(&self) -> BTreeMap<String, Vec<orc_wg::PeerStats>> {
        self.devices
            .iter()
            .map(|(name, applied)| (name.clone(), applied.device.stats()))
            .collect()
    }

    /// Applies `config` as the difference from what is applied.
    pub async fn apply(&mut self, config: &MeshConfig) -> Result<(), MeshError> {
        // Interfaces first: routes and NAT refer to them.
        let wanted: BTreeSet<&str> = config.interfaces.iter().map(|i| i.name.as_str()).collect();
        let unwanted: Vec<String> = self
            .devices
            .keys()
            .filter(|name| !wanted.contains(name.as_str()))
            .cloned()
            .collect();
        for name in unwanted {
            if let Some(applied) = self.devices.remove(&name) {
                applied.device.shutdown().await;
                tracing::info!(interface = %name, "removed a mesh interface");
            }
        }
        for interface in &config.interfaces {
            self.apply_interface(interface).await?;
        }

        let routes: BTreeSet<Route> = config.routes.iter().cloned().collect();
        for route in &routes {
            run(
                "ip",
                &[
                    "route",
                    "replace",
                    &route.destination.to_string(),
                    "dev",
                    &route.interface,
                ],
            )
            .await?;
        }
        for gone in self.routes.difference(&routes) {
            // Gone with its interface, perhaps: a missing route is no failure.
            let _ = run("ip", &["route", "del", &gone.destination.to_string()]).await;
        }
        self.routes = routes;

        match (
            &config.gateway,
            self.gateway.as_ref().map(|g| g.role.clone()),
        ) {
            (Some(role), Some(current)) if *role == current => {}
            (Some(role), _) => {
                if let Some(old) = self.gateway.take() {
                    old.stop();
                }
                set_forwarding().await?;
                self.gateway = Some(GatewayRun::start(role.clone()).await?);
                tracing::info!(site = %role.site, forwards = role.udp_forwards.len(), pools = role.pool_forwards.len(), "the site's NAT and forwards are set");
            }
            (None, Some(_)) => {
                if let Some(old) = self.gateway.take() {
                    old.stop();
                }
                nft(&nft::removal_script()).await?;
            }
            (None, None) => {}
        }
        self.pool_addresses.apply(config.gateway.as_ref()).await?;
        let mesh_address = config
            .interface(orc_mesh::config::MESH_INTERFACE)
            .and_then(|i| i.address)
            .map(|net| net.addr());
        self.names
            .apply(
                mesh_address,
                &config.hosts,
                orc_mesh::config::MESH_INTERFACE,
            )
            .await?;
        Ok(())
    }

    async fn apply_interface(&mut self, interface: &Interface) -> Result<(), MeshError> {
        let device_error = |source| MeshError::Device {
            name: interface.name.clone(),
            source,
        };
        let same = self.devices.get(&interface.name).is_some_and(|a| {
            a.address == interface.address && a.listen_port == interface.listen_port
        });
        if !same {
            if let Some(old) = self.devices.remove(&interface.name) {
                old.device.shutdown().await;
            }
            let device = orc_wg::Device::create(orc_wg::DeviceConfig {
                name: interface.name.clone(),
                private_key: self.key.private,
                listen_port: interface.listen_port,
                address: interface.address,
                mtu: if interface.name == orc_mesh::config::BACKBONE_INTERFACE {
                    orc_mesh::config::BACKBONE_MTU
                } else {
                    orc_mesh::config::MESH_MTU
                },
                batching: orc_wg::Batching::Auto,
            })
            .await
            .map_err(device_error)?;
            tracing::info!(interface = %interface.name, address = ?interface.address, port = interface.listen_port, "made a mesh interface");
            self.devices.insert(
                interface.name.clone(),
                Applied {
                    address: interface.address,
                    listen_port: interface.listen_port,
                    device,
                },
            );
        }
        let peers: Vec<orc_wg::PeerConfig> = interface
            .peers
            .iter()
            .map(|p| orc_wg::PeerConfig {
                public_key: p.public_key.0,
                endpoint: p.endpoint,
                allowed_ips: p.allowed_ips.clone(),
                keepalive: p.keepalive,
            })
            .collect();
        let applied = &self.devices[&interface.name];
        applied.device.set_peers(&peers).map_err(device_error)
    }

    /// Removes every interface and the gateway's table (the agent is leaving).
    pub async fn clear(&mut self) {
        if let Some(gateway) = self.gateway.take() {
            gateway.stop();
            let _ = nft(&nft::removal_script()).await;
        }
        let _ = self.pool_addresses.apply(None).await;
        self.names.stop();
        for (_, applied) in std::mem::take(&mut self.devices) {
            applied.device.shutdown().await;
        }
        self.routes.clear();
    }
}

/// A gateway role at work: its table, kept in step with its targets' health.
struct GatewayRun {
    role: GatewayRole,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl GatewayRun {
    async fn start(role: GatewayRole) -> Result<GatewayRun, MeshError> {
        // Every target counts as healthy until checked: a new gateway forwards at once.
        let healthy: BTreeSet<(Ipv4Addr, Ipv4Addr)> = role
            .pool_forwards
            .iter()
            .flat_map(|p| p.targets.iter().map(move |t| (p.address, *t)))
            .collect();
        nft(&nft::gateway_script(&role, |a, t| {
            healthy.contains(&(a, t))
        }))
        .await?;
        let stop = watch::Sender::new(false);
        let task = tokio::spawn(health_loop(role.clone(), healthy, stop.subscribe()));
        Ok(GatewayRun { role, stop, task })
    }

    fn stop(self) {
        self.stop.send_replace(true);
        self.task.abort();
    }
}

/// Checks every pool target each [`HEALTH_INTERVAL`] and writes the table again when the
/// set of healthy targets changed.
async fn health_loop(
    role: GatewayRole,
    mut healthy: BTreeSet<(Ipv4Addr, Ipv4Addr)>,
    mut stop: watch::Receiver<bool>,
) {
    let checks: Vec<(Ipv4Addr, Ipv4Addr, u16)> = role
        .pool_forwards
        .iter()
        .filter_map(|p| {
            let port = p.ports.iter().find(|port| port.protocol == "tcp")?.port;
            Some(p.targets.iter().map(move |t| (p.address, *t, port)))
        })
        .flatten()
        .collect();
    if checks.is_empty() {
        return;
    }
    let failures: Arc<Mutex<BTreeMap<(Ipv4Addr, Ipv4Addr), u32>>> = Arc::default();
    let mut tick = tokio::time::interval(HEALTH_INTERVAL);
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            _ = tick.tick() => {}
        }
        let mut probes = tokio::task::JoinSet::new();
        for &(address, target, port) in &checks {
            probes.spawn(async move {
                let dial =
                    tokio::net::TcpStream::connect(SocketAddr::V4(SocketAddrV4::new(target, port)));
                let up = matches!(tokio::time::timeout(HEALTH_TIMEOUT, dial).await, Ok(Ok(_)));
                (address, target, up)
            });
        }
        let mut now = healthy.clone();
        while let Some(Ok((address, target, up))) = probes.join_next().await {
            let mut failures = failures.lock().unwrap_or_else(PoisonError::into_inner);
            let count = failures.entry((address, target)).or_default();
            if up {
                *count = 0;
                now.insert((address, target));
            } else {
                *count += 1;
                if *count >= HEALTH_FAILURES {
                    now.remove(&(address, target));
                }
            }
        }
        if now != healthy {
            let script = nft::gateway_script(&role, |a, t| now.contains(&(a, t)));
            match nft(&script).await {
                Ok(()) => {
                    tracing::info!(
                        healthy = now.len(),
                        of = checks.len(),
                        "pool targets changed; forwards written again"
                    );
                    healthy = now;
                }
                Err(error) => tracing::warn!(%error, "the forwards could not be written again"),
            }
        }
    }
}

async fn set_forwarding() -> Result<(), MeshError> {
    std::fs::write("/proc/sys/net/ipv4/ip_forward", b"1\n").map_err(|e| MeshError::Command {
        command: "write /proc/sys/net/ipv4/ip_forward".into(),
        output: e.to_string(),
    })
}

pub(crate) async fn nft(script: &str) -> Result<(), MeshError> {
    use tokio::io::AsyncWriteExt as _;
    let mut child = Command::new("nft")
        .args(["-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| MeshError::Command {
            command: "nft -f -".into(),
            output: format!("cannot start nft ({e}); install nftables"),
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(script.as_bytes()).await;
    }
    let output = child
        .wait_with_output()
        .await
        .map_err(|e| MeshError::Command {
            command: "nft -f -".into(),
            output: e.to_string(),
        })?;
    if output.status.success() {
        Ok(())
    } else {
        Err(MeshError::Command {
            command: "nft -f -".into(),
            output: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        })
    }
}

async fn run(program: &str, args: &[&str]) -> Result<(), MeshError> {
    let command = format!("{program} {}", args.join(" "));
    let output = Command::new(program)
        .args(args)
        .output()
        .await
        .map_err(|e| MeshError::Command {
            command: command.clone(),
            output: e.to_string(),
        })?;
    if output.status.success() {
        Ok(())
    } else {
        Err(MeshError::Command {
            command,
            output: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        })
    }
}
