//! Cryptokey routing: the allowed-IPs table that maps an IPv4 address to the peer whose
//! allowed IPs contain it, by longest prefix match.
//!
//! The table is built whole from a peer set and never changed in place (the device swaps
//! in a new one under its peer lock), so it is a map per prefix length: a lookup probes
//! the lengths present, longest first. Pure data, no I/O.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

/// Prefix → value, looked up by longest prefix match.
#[derive(Debug, Clone)]
pub struct AllowedIps<T> {
    /// One map per prefix length present, longest first; keys are masked network addresses.
    by_length: Vec<(u8, HashMap<u32, T>)>,
}

impl<T> Default for AllowedIps<T> {
    fn default() -> Self {
        AllowedIps {
            by_length: Vec::new(),
        }
    }
}

impl<T> AllowedIps<T> {
    /// An empty table.
    pub fn new() -> Self {
        AllowedIps::default()
    }

    /// Routes `prefix` (host bits ignored) to `value`; returns the value it replaces.
    pub fn insert(&mut self, prefix: Ipv4Net, value: T) -> Option<T> {
        let length = prefix.prefix_len();
        let key = masked(prefix.addr(), length);
        let at = match self.by_length.binary_search_by(|(l, _)| length.cmp(l)) {
            Ok(at) => at,
            Err(at) => {
                self.by_length.insert(at, (length, HashMap::new()));
                at
            }
        };
        self.by_length[at].1.insert(key, value)
    }

    /// The value of the longest prefix that contains `address`.
    pub fn lookup(&self, address: Ipv4Addr) -> Option<&T> {
        self.by_length
            .iter()
            .find_map(|(length, map)| map.get(&masked(address, *length)))
    }

    /// The value routed for exactly `prefix` (host bits ignored).
    #[cfg(test)]
    pub fn get(&self, prefix: Ipv4Net) -> Option<&T> {
        let length = prefix.prefix_len();
        self.by_length
            .iter()
            .find(|(l, _)| *l == length)
            .and_then(|(_, map)| map.get(&masked(prefix.addr(), length)))
    }

    /// Number of prefixes in the table.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.by_length.iter().map(|(_, map)| map.len()).sum()
    }
}

fn masked(address: Ipv4Addr, length: u8) -> u32 {
    let bits = u32::from(address);
    match length {
        0 => 0,
        l => bits & (u32::MAX << (32 - u32::from(l))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn net(text: &str) -> Ipv4Net {
        text.parse().unwrap()
    }

    fn ip(text: &str) -> Ipv4Addr {
        text.parse().unwrap()
    }

    #[test]
    fn longest_prefix_wins() {
        let mut table = AllowedIps::new();
        table.insert(net("0.0.0.0/0"), "default");
        table.insert(net("10.99.0.0/16"), "mesh");
        table.insert(net("10.99.2.0/24"), "site");
        table.insert(net("10.99.2.7/32"), "host");
        assert_eq!(table.lookup(ip("10.99.2.7")), Some(&"host"));
        assert_eq!(table.lookup(ip("10.99.2.8")), Some(&"site"));
        assert_eq!(table.lookup(ip("10.99.3.1")), Some(&"mesh"));
        assert_eq!(table.lookup(ip("192.0.2.1")), Some(&"default"));
        assert_eq!(table.len(), 4);
    }

    #[test]
    fn no_route_without_a_covering_prefix() {
        let mut table = AllowedIps::new();
        table.insert(net("10.99.0.2/32"), 2);
        assert_eq!(table.lookup(ip("10.99.0.2")), Some(&2));
        assert_eq!(table.lookup(ip("10.99.0.3")), None);
        assert!(AllowedIps::<u8>::new().lookup(ip("10.0.0.1")).is_none());
    }

    #[test]
    fn host_bits_of_a_prefix_are_ignored_and_reinsert_replaces() {
        let mut table = AllowedIps::new();
        assert_eq!(table.insert(net("10.1.2.3/24"), 'a'), None);
        assert_eq!(table.insert(net("10.1.2.0/24"), 'b'), Some('a'));
        assert_eq!(table.lookup(ip("10.1.2.200")), Some(&'b'));
        assert_eq!(table.get(net("10.1.2.9/24")), Some(&'b'));
        assert_eq!(table.get(net("10.1.2.0/25")), None);
        assert_eq!(table.len(), 1);
    }

    proptest! {
        /// The table agrees with a linear scan for the longest containing prefix.
        #[test]
        fn agrees_with_a_linear_scan(
            prefixes in proptest::collection::vec((any::<u32>(), 0u8..=32), 0..24),
            probes in proptest::collection::vec(any::<u32>(), 1..32),
        ) {
            let mut table = AllowedIps::new();
            let mut reference: Vec<(Ipv4Net, usize)> = Vec::new();
            for (i, (bits, length)) in prefixes.iter().enumerate() {
                let prefix = Ipv4Net::new(Ipv4Addr::from(*bits), *length).unwrap().trunc();
                table.insert(prefix, i);
                reference.retain(|(p, _)| *p != prefix);
                reference.push((prefix, i));
            }
            for probe in probes {
                let address = Ipv4Addr::from(probe);
                let expected = reference
                    .iter()
                    .filter(|(p, _)| p.contains(&address))
                    .max_by_key(|(p, _)| p.prefix_len())
                    .map(|(_, i)| *i);
                prop_assert_eq!(table.lookup(address).copied(), expected);
            }
        }
    }
}
