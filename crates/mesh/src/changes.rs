//! What changed from one agent config to the next, so that a change to a mesh of N members
//! sends each agent one peer, not N.
//!
//! [`MeshChanges::between`] computes the changes, [`MeshChanges::apply`] makes the new config
//! from the old one; `apply(old, between(old, new)) == new` for any two configs. Peer tables
//! that many agents share are compared once per pair of tables, not once per agent: a
//! [`ChangeCache`] keeps each pair's changes for the agents that follow.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ipnet::Ipv4Net;

use crate::config::{GatewayRole, HostEntry, Interface, MeshConfig, Peer, PeerList, Route, Shared};
use crate::key::PublicKey;

/// The changes from one config to the next. A part left `None` is unchanged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MeshChanges {
    /// Interfaces that are new, gone or changed, by name.
    pub interfaces: Vec<InterfaceChanges>,
    /// The routes, whole, when they changed.
    pub routes: Option<Vec<Route>>,
    /// The gateway role, whole, when it changed (`Some(None)`: it ended).
    pub gateway: Option<Option<GatewayRole>>,
    /// Host names new or with a new address, sorted.
    pub hosts_set: Vec<HostEntry>,
    /// Host names gone, sorted.
    pub hosts_removed: Vec<String>,
}

/// The changes of one interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceChanges {
    pub name: String,
    /// The interface is gone (the rest is empty).
    pub removed: bool,
    /// Its address and port now (whether or not they changed: they are small).
    pub address: Option<Ipv4Net>,
    pub listen_port: u16,
    /// Peers new or changed, sorted by key.
    pub peers_set: Vec<Peer>,
    /// Keys of peers gone, sorted.
    pub peers_removed: Vec<PublicKey>,
}

/// A set of changes that does not fit the config it is applied to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChangesError {
    #[error("the changes remove interface {0}, which the config does not have")]
    NoInterface(String),
}

/// One list's changes: entries new or changed, keys gone.
type ListChanges<T, K> = Arc<(Vec<T>, Vec<K>)>;

/// Changes by the digests of the old and the new list.
type ByDigests<T, K> = Mutex<HashMap<([u8; 32], [u8; 32]), ListChanges<T, K>>>;

/// The changes between pairs of shared peer tables, by their digests. Clear it when the
/// tables it was filled from are no longer current.
#[derive(Debug, Default)]
pub struct ChangeCache {
    peers: ByDigests<Peer, PublicKey>,
    hosts: ByDigests<HostEntry, String>,
}

impl ChangeCache {
    pub fn clear(&self) {
        lock(&self.peers).clear();
        lock(&self.hosts).clear();
    }

    fn peers(
        &self,
        old: &Shared<Vec<Peer>>,
        new: &Shared<Vec<Peer>>,
    ) -> ListChanges<Peer, PublicKey> {
        cached(&self.peers, old, new, |p| p.public_key)
    }

    fn hosts(
        &self,
        old: &Shared<Vec<HostEntry>>,
        new: &Shared<Vec<HostEntry>>,
    ) -> ListChanges<HostEntry, String> {
        cached(&self.hosts, old, new, |h| h.name.clone())
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The changes from `old` to `new` (each sorted by `key`), from `cache` or computed and kept
/// there. Two agents that compute the same pair at once both get it right.
fn cached<T, K>(
    cache: &ByDigests<T, K>,
    old: &Shared<Vec<T>>,
    new: &Shared<Vec<T>>,
    key: impl Fn(&T) -> K,
) -> ListChanges<T, K>
where
    T: PartialEq + Clone + serde::Serialize,
    K: Ord,
{
    let digests = (old.digest(), new.digest());
    if let Some(hit) = lock(cache).get(&digests) {
        return hit.clone();
    }
    let changes = Arc::new(list_changes(old.iter(), new.iter(), key));
    lock(cache).insert(digests, changes.clone());
    changes
}

/// The entries of `new` that `old` does not hold as they are, and the keys of `old` that
/// `new` does not have; both lists sorted by `key`, as their inputs must be.
fn list_changes<'a, T: PartialEq + Clone + 'a, K: Ord>(
    old: impl Iterator<Item = &'a T>,
    new: impl Iterator<Item = &'a T>,
    key: impl Fn(&T) -> K,
) -> (Vec<T>, Vec<K>) {
    let (mut set, mut removed) = (Vec::new(), Vec::new());
    let (mut old, mut new) = (old.peekable(), new.peekable());
    loop {
        match (old.peek(), new.peek()) {
            (None, None) => break,
            (Some(o), None) => {
                removed.push(key(o));
                old.next();
            }
            (None, Some(n)) => {
                set.push((*n).clone());
                new.next();
            }
            (Some(o), Some(n)) => match key(o).cmp(&key(n)) {
                std::cmp::Ordering::Less => {
                    removed.push(key(o));
                    old.next();
                }
                std::cmp::Ordering::Greater => {
                    set.push((*n).clone());
                    new.next();
                }
                std::cmp::Ordering::Equal => {
                    if o != n {
                        set.push((*n).clone());
                    }
                    old.next();
                    new.next();
                }
            },
        }
    }
    (set, removed)
}

impl MeshChanges {
    /// True when `apply` would return the config unchanged.
    pub fn is_empty(&self) -> bool {
        self.interfaces.is_empty()
            && self.routes.is_none()
            && self.gateway.is_none()
            && self.hosts_set.is_empty()
            && self.hosts_removed.is_empty()
    }

    /// The changes from `old` to `new`.
    pub fn between(old: &MeshConfig, new: &MeshConfig) -> MeshChanges {
        MeshChanges::between_cached(old, new, &ChangeCache::default())
    }

    /// The changes from `old` to `new`, with the changes of shared tables from `cache`.
    pub fn between_cached(old: &MeshConfig, new: &MeshConfig, cache: &ChangeCache) -> MeshChanges {
        let mut interfaces = Vec::new();
        for wanted in &new.interfaces {
            let had = old.interface(&wanted.name);
            let (peers_set, peers_removed) = match had {
                Some(had) => peer_changes(&had.peers, &wanted.peers, cache),
                None => (wanted.peers.to_vec(), Vec::new()),
            };
            let head_changed = had
                .is_none_or(|h| h.address != wanted.address || h.listen_port != wanted.listen_port);
            if head_changed || !peers_set.is_empty() || !peers_removed.is_empty() {
                interfaces.push(InterfaceChanges {
                    name: wanted.name.clone(),
                    removed: false,
                    address: wanted.address,
                    listen_port: wanted.listen_port,
                    peers_set,
                    peers_removed,
                });
            }
        }
        for gone in old
            .interfaces
            .iter()
            .filter(|i| new.interface(&i.name).is_none())
        {
            interfaces.push(InterfaceChanges {
                name: gone.name.clone(),
                removed: true,
                address: None,
                listen_port: 0,
                peers_set: Vec::new(),
                peers_removed: Vec::new(),
            });
        }
        let (hosts_set, hosts_removed) = if old.hosts.same(&new.hosts) {
            (Vec::new(), Vec::new())
        } else {
            let changes = cache.hosts(&old.hosts, &new.hosts);
            (changes.0.clone(), changes.1.clone())
        };
        MeshChanges {
            interfaces,
            routes: (old.routes != new.routes).then(|| new.routes.clone()),
            gateway: (old.gateway != new.gateway).then(|| new.gateway.clone()),
            hosts_set,
            hosts_removed,
        }
    }

    /// The config these changes make of `old`.
    pub fn apply(&self, old: &MeshConfig) -> Result<MeshConfig, ChangesError> {
        // Interfaces keep their order; new ones come after the old.
        let mut interfaces = old.interfaces.clone();
        for change in &self.interfaces {
            let at = interfaces.iter().position(|i| i.name == change.name);
            if change.removed {
                let at = at.ok_or_else(|| ChangesError::NoInterface(change.name.clone()))?;
                interfaces.remove(at);
                continue;
            }
            let mut peers: BTreeMap<PublicKey, Peer> = at
                .map(|i| {
                    interfaces[i]
                        .peers
                        .iter()
                        .map(|p| (p.public_key, p.clone()))
                        .collect()
                })
                .unwrap_or_default();
            for key in &change.peers_removed {
                peers.remove(key);
            }
            for peer in &change.peers_set {
                peers.insert(peer.public_key, peer.clone());
            }
            let interface = Interface {
                name: change.name.clone(),
                address: change.address,
                listen_port: change.listen_port,
                peers: PeerList::new(peers.into_values().collect()),
            };
            match at {
                Some(i) => interfaces[i] = interface,
                None => interfaces.push(interface),
            }
        }
        let hosts = if self.hosts_set.is_empty() && self.hosts_removed.is_empty() {
            old.hosts.clone()
        } else {
            let mut hosts: BTreeMap<&str, &HostEntry> =
                old.hosts.iter().map(|h| (h.name.as_str(), h)).collect();
            for name in &self.hosts_removed {
                hosts.remove(name.as_str());
            }
            for host in &self.hosts_set {
                hosts.insert(host.name.as_str(), host);
            }
            let mut hosts: Vec<HostEntry> = hosts.into_values().cloned().collect();
            hosts.sort();
            Shared::new(hosts)
        };
        Ok(MeshConfig {
            interfaces,
            routes: self.routes.clone().unwrap_or_else(|| old.routes.clone()),
            gateway: self.gateway.clone().unwrap_or_else(|| old.gateway.clone()),
            hosts,
        })
    }
}

/// The peer changes from `old` to `new`: from the cache when both leave out the same key of
/// shared tables, else by walking both.
fn peer_changes(
    old: &PeerList,
    new: &PeerList,
    cache: &ChangeCache,
) -> (Vec<Peer>, Vec<PublicKey>) {
    let ((old_table, old_skip), (new_table, new_skip)) = (old.parts(), new.parts());
    if old_skip != new_skip {
        return list_changes(old.iter(), new.iter(), |p| p.public_key);
    }
    if old_table.same(new_table) {
        return (Vec::new(), Vec::new());
    }
    let changes = cache.peers(old_table, new_table);
    let keep = |key: &PublicKey| Some(*key) != new_skip;
    (
        changes
            .0
            .iter()
            .filter(|p| keep(&p.public_key))
            .cloned()
            .collect(),
        changes.1.iter().filter(|k| keep(k)).copied().collect(),
    )
}
