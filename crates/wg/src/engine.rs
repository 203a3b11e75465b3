//! The WireGuard logic of a device between its I/O loops: the peer set with one boringtun
//! [`Tunn`] per peer, cryptokey routing, roaming, timers and statistics. It takes packets
//! and returns packets and where they go; it never touches a socket or the TUN device (the
//! loops in [`crate::io`] do).
//!
//! Locking: the peer set is behind one `RwLock`, taken for reading once per batch by the
//! datapath and for writing only by [`Engine::apply`]. Each peer's tunnel, endpoint and
//! counters are behind that peer's own `Mutex`, taken per packet; the two directions of a
//! stream mostly touch different peers' locks or take them briefly. No lock is held across
//! an `.await`.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, SocketAddrV4};
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant, SystemTime};

use boringtun::noise::errors::WireGuardError;
use boringtun::noise::handshake::parse_handshake_anon;
use boringtun::noise::rate_limiter::RateLimiter;
use boringtun::noise::{Packet, Tunn, TunnResult};
use boringtun::x25519;

use crate::config::{Key, PeerConfig};
use crate::diff::diff_peers;
use crate::error::Error;
use crate::key::KeyDisplay;
use crate::routing::AllowedIps;

/// Handshakes per second the device answers before it asks initiators for a cookie
/// (WireGuard's denial-of-service defence); boringtun's own device uses the same figure.
const HANDSHAKE_RATE_LIMIT: u64 = 100;

/// Message type of a cookie reply: the one reply sent before a sender is authenticated.
const COOKIE_REPLY: u8 = 3;

/// Largest buffer a handshake or queued packet needs (an IPv4 packet plus WireGuard's
/// 32 bytes of overhead, or a 148-byte handshake).
pub(crate) const MAX_SEALED: usize = 65535 + 32;

/// A packet the engine wants sent on the UDP socket outside the bulk datapath (handshakes,
/// cookies, keepalives, packets that waited for a handshake).
#[derive(Debug)]
pub(crate) struct Control {
    pub packet: Vec<u8>,
    pub to: SocketAddrV4,
}

/// An encrypted packet in the caller's buffer, and where to send it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sealed {
    pub range: Range<usize>,
    pub to: SocketAddrV4,
}

/// Per-peer statistics, as [`Device::stats`](crate::Device::stats) reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerStats {
    /// The peer's public key.
    pub public_key: Key,
    /// Where packets to the peer go now: configured, or learnt from the peer (roaming).
    pub endpoint: Option<SocketAddrV4>,
    /// When the current session's handshake completed, if there is one.
    pub last_handshake: Option<SystemTime>,
    /// UDP payload bytes received from the peer and authenticated.
    pub rx_bytes: u64,
    /// UDP payload bytes sent to the peer.
    pub tx_bytes: u64,
}

pub(crate) struct Peer {
    public_key: Key,
    /// Our 24-bit index for this peer; boringtun puts it in the top bits of every session
    /// index it hands out, so a receiver index names its peer.
    index: u32,
    state: Mutex<PeerState>,
}

struct PeerState {
    tunn: Tunn,
    endpoint: Option<SocketAddrV4>,
    /// Persistent keepalive, kept here rather than in the tunnel so that changing it does
    /// not need a new tunnel (and a new session).
    keepalive: Option<Duration>,
    /// When an authenticated packet last went out; `None` until the first one.
    last_sent: Option<Instant>,
    /// When the latest handshake completed (recorded here, once, so that it reads the same
    /// every time it is asked for).
    last_handshake: Option<SystemTime>,
    rx_bytes: u64,
    tx_bytes: u64,
}

impl Peer {
    fn state(&self) -> MutexGuard<'_, PeerState> {
        // A panic while holding a peer lock cannot leave a half-updated tunnel that is worse
        // than a dropped packet; carry on with it.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The peer set: by key, by index and by allowed IP.
#[derive(Default)]
pub(crate) struct PeerTable {
    configs: BTreeMap<Key, PeerConfig>,
    by_key: BTreeMap<Key, Arc<Peer>>,
    by_index: HashMap<u32, Arc<Peer>>,
    routes: AllowedIps<Arc<Peer>>,
}

impl PeerTable {
    /// The peer the inner address `address` routes to.
    fn route(&self, address: Ipv4Addr) -> Option<&Arc<Peer>> {
        self.routes.lookup(address)
    }
}

pub(crate) struct Engine {
    secret: x25519::StaticSecret,
    public: x25519::PublicKey,
    rate_limiter: RateLimiter,
    peers: RwLock<PeerTable>,
    /// The next peer index to try (24 bits).
    next_index: Mutex<u32>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("public_key", &KeyDisplay(&self.public_key()))
            .field("peers", &self.table().by_key.len())
            .finish_non_exhaustive()
    }
}

impl Engine {
    pub(crate) fn new(private_key: &Key) -> Result<Engine, Error> {
        let secret = x25519::StaticSecret::from(*private_key);
        let public = x25519::PublicKey::from(&secret);
        let first_index = getrandom::u32().map_err(Error::Random)? & 0x00ff_ffff;
        Ok(Engine {
            rate_limiter: RateLimiter::new(&public, HANDSHAKE_RATE_LIMIT),
            secret,
            public,
            peers: RwLock::new(PeerTable::default()),
            next_index: Mutex::new(first_index),
        })
    }

    pub(crate) fn public_key(&self) -> Key {
        self.public.to_bytes()
    }

    /// The peer set, for reading for the length of one batch.
    pub(crate) fn table(&self) -> RwLockReadGuard<'_, PeerTable> {
        self.peers.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes `desired` the peer set: see [`crate::diff`].
    pub(crate) fn apply(&self, desired: &[PeerConfig]) -> Result<(), Error> {
        let mut table = self.peers.write().unwrap_or_else(PoisonError::into_inner);
        let changes = diff_peers(&self.public_key(), &table.configs, desired)?;
        for key in &changes.removed {
            if let Some(peer) = table.by_key.remove(key) {
                table.by_index.remove(&peer.index);
                tracing::debug!(peer = %KeyDisplay(key), "peer removed");
            }
        }
        for update in &changes.updated {
            if let Some(peer) = table.by_key.get(&update.config.public_key) {
                let mut state = peer.state();
                if update.endpoint_changed && update.config.endpoint.is_some() {
                    state.endpoint = update.config.endpoint;
                }
                state.keepalive = keepalive(update.config.keepalive);
            }
        }
        for config in &changes.added {
            let index = self.free_index(&table.by_index);
            let tunn = Tunn::new(
                self.secret.clone(),
                x25519::PublicKey::from(config.public_key),
                None,
                None,
                index,
                None,
            );
            let peer = Arc::new(Peer {
                public_key: config.public_key,
                index,
                state: Mutex::new(PeerState {
                    tunn,
                    endpoint: config.endpoint,
                    keepalive: keepalive(config.keepalive),
                    last_sent: None,
                    last_handshake: None,
                    rx_bytes: 0,
                    tx_bytes: 0,
                }),
            });
            table.by_index.insert(index, peer.clone());
            table.by_key.insert(config.public_key, peer);
            tracing::debug!(peer = %KeyDisplay(&config.public_key), "peer added");
        }
        let mut routes = AllowedIps::new();
        for (key, config) in &changes.desired {
            if let Some(peer) = table.by_key.get(key) {
                for prefix in &config.allowed_ips {
                    routes.insert(*prefix, peer.clone());
                }
            }
        }
        table.routes = routes;
        table.configs = changes.desired;
        Ok(())
    }

    fn free_index(&self, in_use: &HashMap<u32, Arc<Peer>>) -> u32 {
        let mut next = self
            .next_index
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        loop {
            let index = *next;
            *next = (index + 1) & 0x00ff_ffff;
            if !in_use.contains_key(&index) {
                return index;
            }
        }
    }

    pub(crate) fn stats(&self) -> Vec<PeerStats> {
        let table = self.table();
        table
            .by_key
            .values()
            .map(|peer| {
                let state = peer.state();
                PeerStats {
                    public_key: peer.public_key,
                    endpoint: state.endpoint,
                    last_handshake: state.last_handshake,
                    rx_bytes: state.rx_bytes,
                    tx_bytes: state.tx_bytes,
                }
            })
            .collect()
    }

    /// Encrypts one IP packet read from the TUN device into `dst` for the peer its
    /// destination routes to. `None` when nothing is to be sent: no route (dropped), no
    /// endpoint yet, or the packet waits in the tunnel for a handshake already under way.
    /// A handshake initiation comes back in place of a packet that has to wait for one.
    pub(crate) fn encapsulate(
        &self,
        table: &PeerTable,
        packet: &[u8],
        dst: &mut [u8],
        now: Instant,
    ) -> Option<Sealed> {
        let peer = table.route(ipv4_destination(packet)?)?;
        let mut state = peer.state();
        let to = state.endpoint?;
        match state.tunn.encapsulate(packet, dst) {
            TunnResult::WriteToNetwork(sealed) => {
                let len = sealed.len();
                // boringtun writes its output at the start of the buffer it is given.
                let range = 0..len;
                state.tx_bytes += len as u64;
                state.last_sent = Some(now);
                Some(Sealed { range, to })
            }
            TunnResult::Err(error) => {
                tracing::trace!(peer = %KeyDisplay(&peer.public_key), ?error, "encapsulate");
                None
            }
            TunnResult::Done
            | TunnResult::WriteToTunnelV4(..)
            | TunnResult::WriteToTunnelV6(..) => None,
        }
    }

    /// Handles one UDP datagram from `from`. Returns where in `dst` the decrypted IP packet
    /// is when there is one for the TUN device; replies (handshake responses, cookies, packets
    /// that waited for the handshake) go to `control`.
    ///
    /// Cryptokey routing: a packet whose inner source address does not route back to the peer
    /// that sent it is dropped. Roaming: every authenticated packet sets its peer's endpoint
    /// to the address it came from.
    pub(crate) fn decapsulate(
        &self,
        table: &PeerTable,
        datagram: &[u8],
        from: SocketAddrV4,
        dst: &mut [u8],
        control: &mut Vec<Control>,
        now: Instant,
    ) -> Option<Range<usize>> {
        let source = Some(IpAddr::V4(*from.ip()));
        let (peer, kind) = match Tunn::parse_incoming_packet(datagram).ok()? {
            Packet::HandshakeInit(init) => {
                // Answer with a cookie, before any Diffie-Hellman work, when under load.
                let mut cookie = [0u8; 64];
                match self
                    .rate_limiter
                    .verify_packet(source, datagram, &mut cookie)
                {
                    Ok(_) => {}
                    Err(TunnResult::WriteToNetwork(reply)) => {
                        control.push(Control {
                            packet: reply.to_vec(),
                            to: from,
                        });
                        return None;
                    }
                    Err(_) => return None,
                }
                let half = parse_handshake_anon(&self.secret, &self.public, &init).ok()?;
                (table.by_key.get(&half.peer_static_public)?, Kind::Handshake)
            }
            Packet::HandshakeResponse(response) => (
                table.by_index.get(&(response.receiver_idx >> 8))?,
                Kind::Handshake,
            ),
            Packet::PacketCookieReply(cookie) => (
                table.by_index.get(&(cookie.receiver_idx >> 8))?,
                Kind::Cookie,
            ),
            Packet::PacketData(data) => {
                (table.by_index.get(&(data.receiver_idx >> 8))?, Kind::Data)
            }
        };

        let mut state = peer.state();
        match state.tunn.decapsulate(source, datagram, dst) {
            TunnResult::WriteToTunnelV4(packet, inner_source) => {
                let len = packet.len();
                state.endpoint = Some(from);
                state.rx_bytes += datagram.len() as u64;
                let routed_back = table.route(inner_source).map(|routed| routed.index);
                if routed_back != Some(peer.index) {
                    tracing::trace!(
                        peer = %KeyDisplay(&peer.public_key),
                        %inner_source,
                        "dropped: source not in the peer's allowed IPs"
                    );
                    return None;
                }
                Some(0..len)
            }
            TunnResult::WriteToNetwork(reply) => {
                let authenticated = reply.first() != Some(&COOKIE_REPLY);
                control.push(Control {
                    packet: reply.to_vec(),
                    to: from,
                });
                if authenticated {
                    if kind == Kind::Handshake {
                        state.last_handshake = Some(SystemTime::now());
                    }
                    state.endpoint = Some(from);
                    state.rx_bytes += datagram.len() as u64;
                    state.last_sent = Some(now);
                    flush_queue(&mut state, from, control);
                }
                None
            }
            TunnResult::Done => {
                // A keepalive, or a cookie reply taken in.
                if kind == Kind::Data {
                    state.endpoint = Some(from);
                    state.rx_bytes += datagram.len() as u64;
                }
                None
            }
            TunnResult::WriteToTunnelV6(..) => None,
            TunnResult::Err(error) => {
                tracing::trace!(peer = %KeyDisplay(&peer.public_key), ?error, "decapsulate");
                None
            }
        }
    }

    /// Runs every peer's timers (handshake retries, rekeying, session expiry, boringtun's
    /// passive keepalive), this device's persistent keepalives, and sends packets that waited
    /// for a handshake. Call about every 250 ms; `reset_rate_limit` once a second.
    pub(crate) fn tick(
        &self,
        scratch: &mut [u8],
        control: &mut Vec<Control>,
        now: Instant,
        reset_rate_limit: bool,
    ) {
        if reset_rate_limit {
            self.rate_limiter.reset_count();
        }
        let table = self.table();
        for peer in table.by_key.values() {
            let mut state = peer.state();
            let endpoint = state.endpoint;
            match state.tunn.update_timers(scratch) {
                TunnResult::WriteToNetwork(packet) => {
                    if let Some(to) = endpoint {
                        control.push(Control {
                            packet: packet.to_vec(),
                            to,
                        });
                        state.last_sent = Some(now);
                    }
                }
                TunnResult::Err(WireGuardError::ConnectionExpired) => {
                    tracing::debug!(peer = %KeyDisplay(&peer.public_key), "session expired");
                }
                _ => {}
            }
            let Some(to) = endpoint else { continue };
            if let Some(interval) = state.keepalive {
                let due = state
                    .last_sent
                    .is_none_or(|sent| now.saturating_duration_since(sent) >= interval);
                if due {
                    if let TunnResult::WriteToNetwork(packet) = state.tunn.encapsulate(&[], scratch)
                    {
                        control.push(Control {
                            packet: packet.to_vec(),
                            to,
                        });
                    }
                    state.last_sent = Some(now);
                }
            }
            flush_queue(&mut state, to, control);
        }
    }
}

/// What an incoming datagram is, as far as the peer lookup needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Handshake,
    Cookie,
    Data,
}

/// Sends what the tunnel queued while it had no session (boringtun hands the packets back
/// one by one when called with an empty datagram).
fn flush_queue(state: &mut PeerState, to: SocketAddrV4, control: &mut Vec<Control>) {
    let mut scratch = [0u8; 2048];
    loop {
        // Packets larger than the stack buffer cannot be queued: the TUN MTU is far below it
        // for every packet that is not a super-packet, and super-packets are split first.
        match state.tunn.decapsulate(None, &[], &mut scratch) {
            TunnResult::WriteToNetwork(packet) => {
                state.tx_bytes += packet.len() as u64;
                control.push(Control {
                    packet: packet.to_vec(),
                    to,
                });
            }
            _ => return,
        }
    }
}

fn keepalive(seconds: Option<u16>) -> Option<Duration> {
    seconds
        .filter(|s| *s > 0)
        .map(|s| Duration::from_secs(u64::from(s)))
}

/// The destination address of an IPv4 packet; `None` for anything else.
pub(crate) fn ipv4_destination(packet: &[u8]) -> Option<Ipv4Addr> {
    if packet.len() < 20 || packet[0] >> 4 != 4 {
        return None;
    }
    Some(Ipv4Addr::new(
        packet[16], packet[17], packet[18], packet[19],
    ))
}
