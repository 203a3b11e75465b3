//! What the quote must remember between quotes: cap counters, reservations of in-flight
//! deploys, cooldowns, counting status, pins of public pools and where site names are live.
//!
//! A pure data structure: the provider process owns one, updates it from inventory, deploy
//! results and its own clock, and hands it to [`crate::quote::quote`] by reference. Times are
//! always passed in.
//!
//! Invariants:
//! - Caps hold under concurrent deploys: an offer is reserved ([`QuoteState::reserve`]) before
//!   the next quote is answered, and a reservation counts toward its cloud's caps exactly like
//!   a running node until it is committed (the node runs) or released (the deploy failed or
//!   the offer expired). A reservation held by the node being quoted is not counted against
//!   it, so re-quoting a node is idempotent.
//! - Tenant nodes count toward `max_nodes`; every node, gateways included, counts toward
//!   monthly spend at the USD price recorded when it was created.
//! - A capped cloud whose count is not [`CountStatus::Counted`] never places a node.

use std::collections::BTreeMap;
use std::time::Duration;

use rust_decimal::Decimal;
use serde::Serialize;

use crate::ids::{Cloud, LocationId, NodeId, PoolPath, SiteName, Timestamp};
use crate::quote::Purpose;

/// How long a site sits out quotes after its cloud refused a create for lack of room.
pub const COOLDOWN: Duration = Duration::from_secs(10 * 60);

/// How long quotes answer `counting` for a cloud being counted before it sits out instead.
pub const COUNTING_WINDOW: Duration = Duration::from_secs(30);

/// Committed usage of one cloud, from its last count plus committed deploys.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CloudUsage {
    /// Tenant nodes held (gateways excluded).
    pub tenant_nodes: u32,
    /// Monthly spend of every node, gateways included, in USD at recorded rates.
    pub monthly_spend_usd: Decimal,
}

/// Where a capped cloud's count stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum CountStatus {
    /// Counting started at `since`.
    Counting { since: Timestamp },
    /// The last count failed at `at`; the cloud sits out until a count succeeds.
    Failed { at: Timestamp },
    /// The usage is known.
    Counted,
}

/// Capacity held by an in-flight deploy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reservation {
    pub cloud: Cloud,
    pub site: SiteName,
    pub purpose: Purpose,
    /// The node's USD monthly price, when priced.
    pub usd_monthly: Option<Decimal>,
    /// When the reservation lapses if neither committed nor released.
    pub expires_at: Timestamp,
}

/// Where a site name is live, from node site tags and stable addresses' reverse DNS.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LiveSite {
    pub cloud: Cloud,
    pub location: LocationId,
}

/// The quote engine's memory. See the module docs for its invariants.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct QuoteState {
    usage: BTreeMap<Cloud, CloudUsage>,
    counting: BTreeMap<Cloud, CountStatus>,
    reservations: BTreeMap<NodeId, Reservation>,
    cooldowns: BTreeMap<SiteName, Timestamp>,
    pins: BTreeMap<PoolPath, SiteName>,
    live_sites: BTreeMap<SiteName, LiveSite>,
}

impl QuoteState {
    /// Empty state: nothing counted, reserved, cooling, pinned or live.
    pub fn new() -> Self {
        QuoteState::default()
    }

    /// A count of `cloud` started (after promotion to serving, or a retry).
    pub fn start_counting(&mut self, cloud: Cloud, now: Timestamp) {
        self.counting
            .insert(cloud, CountStatus::Counting { since: now });
    }

    /// A count of `cloud` failed; the cloud sits out until a later count succeeds.
    pub fn count_failed(&mut self, cloud: Cloud, now: Timestamp) {
        self.counting.insert(cloud, CountStatus::Failed { at: now });
    }

    /// A count of `cloud` finished with `usage` (committed nodes only).
    pub fn count_done(&mut self, cloud: Cloud, usage: CloudUsage) {
        self.usage.insert(cloud, usage);
        self.counting.insert(cloud, CountStatus::Counted);
    }

    /// The count status of `cloud`; `None` when never counted.
    pub fn count_status(&self, cloud: Cloud) -> Option<CountStatus> {
        self.counting.get(&cloud).copied()
    }

    /// Holds capacity for `node` until committed, released or expired. Replaces an earlier
    /// reservation of the same node.
    pub fn reserve(&mut self, node: NodeId, reservation: Reservation) {
        self.reservations.insert(node, reservation);
    }

    /// Drops `node`'s reservation (deploy failed or abandoned).
    pub fn release(&mut self, node: &NodeId) -> Option<Reservation> {
        self.reservations.remove(node)
    }

    /// Turns `node`'s reservation into committed usage (the node runs).
    pub fn commit(&mut self, node: &NodeId) -> Option<Reservation> {
        let reservation = self.reservations.remove(node)?;
        let usage = self.usage.entry(reservation.cloud).or_default();
        if reservation.purpose == Purpose::Tenant {
            usage.tenant_nodes = usage.tenant_nodes.saturating_add(1);
        }
        usage.monthly_spend_usd = usage
            .monthly_spend_usd
            .saturating_add(reservation.usd_monthly.unwrap_or_default());
        Some(reservation)
    }

    /// Removes a node that ended from committed usage.
    pub fn node_ended(&mut self, cloud: Cloud, purpose: Purpose, usd_monthly: Option<Decimal>) {
        let usage = self.usage.entry(cloud).or_default();
        if purpose == Purpose::Tenant {
            usage.tenant_nodes = usage.tenant_nodes.saturating_sub(1);
        }
        usage.monthly_spend_usd = usage
            .monthly_spend_usd
            .saturating_sub(usd_monthly.unwrap_or_default())
            .max(Decimal::ZERO);
    }

    /// Drops reservations that lapsed at or before `now`.
    pub fn expire_reservations(&mut self, now: Timestamp) {
        self.reservations.retain(|_, r| r.expires_at > now);
    }

    /// The reservation held by `node`, if any.
    pub fn reservation(&self, node: &NodeId) -> Option<&Reservation> {
        self.reservations.get(node)
    }

    /// Committed usage plus live reservations of `cloud`, leaving out `except`'s own.
    pub fn usage_with_reservations(
        &self,
        cloud: Cloud,
        except: &NodeId,
        now: Timestamp,
    ) -> CloudUsage {
        let mut usage = self.usage.get(&cloud).copied().unwrap_or_default();
        for (node, r) in &self.reservations {
            if r.cloud != cloud || node == except || r.expires_at <= now {
                continue;
            }
            if r.purpose == Purpose::Tenant {
                usage.tenant_nodes = usage.tenant_nodes.saturating_add(1);
            }
            usage.monthly_spend_usd = usage
                .monthly_spend_usd
                .saturating_add(r.usd_monthly.unwrap_or_default());
        }
        usage
    }

    /// The site's cloud refused a create for lack of room at `now`: it sits out for
    /// [`COOLDOWN`].
    pub fn cool_down(&mut self, site: SiteName, now: Timestamp) {
        self.cooldowns.insert(site, now.plus(COOLDOWN));
    }

    /// Until when `site` sits out, if it is cooling down at `now`.
    pub fn cooling_until(&self, site: &SiteName, now: Timestamp) -> Option<Timestamp> {
        self.cooldowns
            .get(site)
            .copied()
            .filter(|until| *until > now)
    }

    /// Pins a public pool to the site that holds its address (or its oldest live member).
    pub fn pin(&mut self, pool: PoolPath, site: SiteName) {
        self.pins.insert(pool, site);
    }

    /// Lifts a pool's pin (it no longer exposes anything publicly).
    pub fn unpin(&mut self, pool: &PoolPath) {
        self.pins.remove(pool);
    }

    /// The site a pool is pinned to.
    pub fn pin_of(&self, pool: &PoolPath) -> Option<&SiteName> {
        self.pins.get(pool)
    }

    /// Records where a site name is live.
    pub fn set_live(&mut self, site: SiteName, at: LiveSite) {
        self.live_sites.insert(site, at);
    }

    /// Forgets a site that is no longer live.
    pub fn clear_live(&mut self, site: &SiteName) {
        self.live_sites.remove(site);
    }

    /// Where `site` is live, if it is.
    pub fn live_at(&self, site: &SiteName) -> Option<&LiveSite> {
        self.live_sites.get(site)
    }

    /// Every live site in name order.
    pub fn live_sites(&self) -> &BTreeMap<SiteName, LiveSite> {
        &self.live_sites
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rust_decimal::dec;

    fn reservation(purpose: Purpose, usd: Decimal, expires: i64) -> Reservation {
        Reservation {
            cloud: Cloud::Vultr,
            site: SiteName::new("s").unwrap(),
            purpose,
            usd_monthly: Some(usd),
            expires_at: Timestamp::from_unix_secs(expires),
        }
    }

    #[test]
    fn reservations_count_until_released_committed_or_expired() {
        let mut state = QuoteState::new();
        let now = Timestamp::from_unix_secs(100);
        let (a, b, gw) = (
            NodeId::new("a").unwrap(),
            NodeId::new("b").unwrap(),
            NodeId::new("gw").unwrap(),
        );
        state.reserve(a.clone(), reservation(Purpose::Tenant, dec!(20), 200));
        state.reserve(b.clone(), reservation(Purpose::Tenant, dec!(10), 150));
        state.reserve(gw.clone(), reservation(Purpose::Gateway, dec!(5), 200));
        let other = NodeId::new("other").unwrap();
        let u = state.usage_with_reservations(Cloud::Vultr, &other, now);
        assert_eq!((u.tenant_nodes, u.monthly_spend_usd), (2, dec!(35)));
        let own = state.usage_with_reservations(Cloud::Vultr, &a, now);
        assert_eq!((own.tenant_nodes, own.monthly_spend_usd), (1, dec!(15)));
        let later =
            state.usage_with_reservations(Cloud::Vultr, &other, Timestamp::from_unix_secs(160));
        assert_eq!(later.tenant_nodes, 1);

        state.commit(&a).unwrap();
        state.commit(&gw).unwrap();
        state.release(&b).unwrap();
        let u = state.usage_with_reservations(Cloud::Vultr, &other, now);
        assert_eq!((u.tenant_nodes, u.monthly_spend_usd), (1, dec!(25)));
        state.node_ended(Cloud::Vultr, Purpose::Tenant, Some(dec!(20)));
        let u = state.usage_with_reservations(Cloud::Vultr, &other, now);
        assert_eq!((u.tenant_nodes, u.monthly_spend_usd), (0, dec!(5)));

        state.reserve(b.clone(), reservation(Purpose::Tenant, dec!(1), 150));
        state.expire_reservations(Timestamp::from_unix_secs(150));
        assert!(state.reservation(&b).is_none());
    }

    #[test]
    fn cooldown_lasts_ten_minutes() {
        let mut state = QuoteState::new();
        let site = SiteName::new("eu-central-a").unwrap();
        let t0 = Timestamp::from_unix_secs(1000);
        state.cool_down(site.clone(), t0);
        assert_eq!(
            state.cooling_until(&site, t0.plus(Duration::from_secs(599))),
            Some(t0.plus(COOLDOWN))
        );
        assert_eq!(state.cooling_until(&site, t0.plus(COOLDOWN)), None);
    }
}
