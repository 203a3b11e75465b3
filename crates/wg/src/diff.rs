//! The difference between the peer set a device has and the one it is asked for, computed
//! without I/O so that [`Device::set_peers`](crate::Device::set_peers) can refuse a bad set
//! before changing anything and keep every session the new set still wants.
//!
//! A peer is identified by its public key. A peer whose key stays keeps its tunnel (and so
//! its established session); only its endpoint, allowed IPs and keepalive change. The
//! endpoint counts as changed only when the *configured* endpoint changes, so a roamed
//! endpoint learnt from the peer survives re-applying the same config.

use std::collections::{BTreeMap, BTreeSet};

use ipnet::Ipv4Net;

use crate::config::{Key, PeerConfig};
use crate::error::Error;
use crate::key::show;

/// What to do to go from the current peer set to the desired one.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct PeerChanges {
    /// Peers to remove, with their sessions.
    pub removed: Vec<Key>,
    /// Peers to add.
    pub added: Vec<PeerConfig>,
    /// Peers that stay with a different config.
    pub updated: Vec<PeerUpdate>,
    /// The whole desired set, normalised (allowed IPs truncated, sorted, deduplicated):
    /// the current set once the changes are applied.
    pub desired: BTreeMap<Key, PeerConfig>,
}

/// A peer that stays, with its new config.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct PeerUpdate {
    pub config: PeerConfig,
    /// Whether the configured endpoint differs from the one configured before.
    pub endpoint_changed: bool,
}

/// Checks `desired` and compares it with `current` (both keyed by public key).
///
/// Refuses a set that lists a key twice, lists `own` (this device's public key) or gives one
/// prefix to two peers. Overlapping prefixes of different lengths are fine: the longest wins.
pub(crate) fn diff_peers(
    own: &Key,
    current: &BTreeMap<Key, PeerConfig>,
    desired: &[PeerConfig],
) -> Result<PeerChanges, Error> {
    let mut wanted = BTreeMap::new();
    let mut owners: BTreeMap<Ipv4Net, Key> = BTreeMap::new();
    for peer in desired {
        if peer.public_key == *own {
            return Err(Error::OwnKey {
                peer: show(&peer.public_key),
            });
        }
        let allowed_ips: Vec<Ipv4Net> = peer
            .allowed_ips
            .iter()
            .map(Ipv4Net::trunc)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        for prefix in &allowed_ips {
            if let Some(first) = owners.insert(*prefix, peer.public_key) {
                return Err(Error::AllowedIpConflict {
                    prefix: *prefix,
                    first: show(&first),
                    second: show(&peer.public_key),
                });
            }
        }
        let normalised = PeerConfig {
            allowed_ips,
            ..peer.clone()
        };
        if wanted.insert(peer.public_key, normalised).is_some() {
            return Err(Error::DuplicatePeer {
                peer: show(&peer.public_key),
            });
        }
    }

    let mut changes = PeerChanges::default();
    for key in current.keys() {
        if !wanted.contains_key(key) {
            changes.removed.push(*key);
        }
    }
    for (key, config) in &wanted {
        match current.get(key) {
            None => changes.added.push(config.clone()),
            Some(before) if before != config => changes.updated.push(PeerUpdate {
                config: config.clone(),
                endpoint_changed: before.endpoint != config.endpoint,
            }),
            Some(_) => {}
        }
    }
    changes.desired = wanted;
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddrV4;

    const OWN: Key = [9; 32];

    fn peer(id: u8, endpoint: Option<&str>, allowed: &[&str]) -> PeerConfig {
        PeerConfig {
            public_key: [id; 32],
            endpoint: endpoint.map(|e| e.parse::<SocketAddrV4>().unwrap()),
            allowed_ips: allowed.iter().map(|a| a.parse().unwrap()).collect(),
            keepalive: None,
        }
    }

    fn current(peers: &[PeerConfig]) -> BTreeMap<Key, PeerConfig> {
        diff_peers(&OWN, &BTreeMap::new(), peers).unwrap().desired
    }

    #[test]
    fn from_nothing_everything_is_added() {
        let changes =
            diff_peers(&OWN, &BTreeMap::new(), &[peer(1, None, &["10.0.0.1/32"])]).unwrap();
        assert_eq!(changes.added.len(), 1);
        assert!(changes.removed.is_empty() && changes.updated.is_empty());
    }

    #[test]
    fn unlisted_peers_are_removed_and_the_same_set_changes_nothing() {
        let a = peer(1, Some("198.18.200.1:51820"), &["10.0.0.1/32"]);
        let b = peer(2, None, &["10.0.0.2/32"]);
        let now = current(&[a.clone(), b.clone()]);
        let same = diff_peers(&OWN, &now, &[b.clone(), a.clone()]).unwrap();
        assert!(same.added.is_empty() && same.removed.is_empty() && same.updated.is_empty());
        let only_b = diff_peers(&OWN, &now, &[b]).unwrap();
        assert_eq!(only_b.removed, vec![[1; 32]]);
        let none = diff_peers(&OWN, &now, &[]).unwrap();
        assert_eq!(none.removed, vec![[1; 32], [2; 32]]);
        assert!(none.desired.is_empty());
    }

    #[test]
    fn changes_to_a_kept_peer_are_updates_that_say_whether_the_endpoint_moved() {
        let now = current(&[peer(1, Some("198.18.200.1:51820"), &["10.0.0.1/32"])]);
        let more_ips = diff_peers(
            &OWN,
            &now,
            &[peer(
                1,
                Some("198.18.200.1:51820"),
                &["10.0.0.1/32", "10.1.0.0/24"],
            )],
        )
        .unwrap();
        assert_eq!(more_ips.updated.len(), 1);
        assert!(!more_ips.updated[0].endpoint_changed);
        assert!(more_ips.added.is_empty() && more_ips.removed.is_empty());

        let moved = diff_peers(
            &OWN,
            &now,
            &[peer(1, Some("198.18.200.9:51820"), &["10.0.0.1/32"])],
        )
        .unwrap();
        assert!(moved.updated[0].endpoint_changed);

        let mut keepalive = peer(1, Some("198.18.200.1:51820"), &["10.0.0.1/32"]);
        keepalive.keepalive = Some(25);
        let keepalive = diff_peers(&OWN, &now, &[keepalive]).unwrap();
        assert_eq!(keepalive.updated[0].config.keepalive, Some(25));
        assert!(!keepalive.updated[0].endpoint_changed);
    }

    #[test]
    fn allowed_ips_are_compared_as_sets_of_prefixes() {
        let now = current(&[peer(1, None, &["10.0.0.0/24", "10.0.1.0/24"])]);
        let reordered = diff_peers(
            &OWN,
            &now,
            &[peer(
                1,
                None,
                &["10.0.1.7/24", "10.0.0.0/24", "10.0.0.0/24"],
            )],
        )
        .unwrap();
        assert!(reordered.updated.is_empty(), "{reordered:?}");
    }

    #[test]
    fn bad_sets_are_refused_naming_what_is_wrong() {
        let none = BTreeMap::new();
        let twice = diff_peers(&OWN, &none, &[peer(1, None, &[]), peer(1, None, &[])]);
        assert!(matches!(twice, Err(Error::DuplicatePeer { .. })));
        let own = diff_peers(&OWN, &none, &[peer(9, None, &[])]);
        assert!(matches!(own, Err(Error::OwnKey { .. })));
        let conflict = diff_peers(
            &OWN,
            &none,
            &[
                peer(1, None, &["10.0.0.0/24"]),
                peer(2, None, &["10.0.0.9/24"]),
            ],
        );
        match conflict {
            Err(error @ Error::AllowedIpConflict { .. }) => {
                assert!(error.to_string().contains("10.0.0.0/24"), "{error}");
            }
            other => panic!("expected a conflict, got {other:?}"),
        }
        let nested = diff_peers(
            &OWN,
            &none,
            &[
                peer(1, None, &["10.0.0.0/16"]),
                peer(2, None, &["10.0.3.0/24"]),
            ],
        );
        assert!(nested.is_ok());
    }
}
