//! Pricing: what a tenant pays for a node, and how its hours become usage lines.
//!
//! Rules this module encodes (pure functions; the reconcilers apply them):
//! - a provider without a pricing strategy yields **unpriced** nodes: no price at all, which
//!   is not a price of zero;
//! - a markup strategy (0 allowed) is copied onto each node when the node is admitted and
//!   never changes afterwards, so changing a provider's strategy affects new nodes only;
//! - the tenant price is the provider's offer price times `1 + markup`, kept in the offer's
//!   currency and period;
//! - a priced node accrues node-hours into one usage line per (project, month, pool, node,
//!   price line), split at UTC month boundaries;
//! - a public pool's node has one more line, its IPv4 address, at rate 0;
//! - gateways (pools named `gw-*` in org `sys`) are never billed to a tenant.

use orc_common::time::{civil_from_days, days_from_civil};
use orc_common::{Money, Period, Shape};
use rust_decimal::Decimal;

use crate::model::{
    Markup, Month, NewUsage, NodeId, OrgId, PoolId, PricingStrategy, ProjectId, Timestamp,
    sys_org_id,
};

/// Milliseconds in an hour.
const HOUR_MS: i64 = 3_600_000;
/// Hours in a billing month, for monthly prices: 365 × 24 / 12.
pub const HOURS_PER_MONTH: Decimal = Decimal::from_parts(730, 0, 0, false, 0);

/// The markup a node records when it is admitted: `None` for a provider without a strategy.
pub fn markup_at_admission(strategy: PricingStrategy) -> Option<Decimal> {
    match strategy {
        PricingStrategy::None => None,
        PricingStrategy::Markup(markup) => Some(Markup::value(markup)),
    }
}

/// The tenant's price of a node: the provider's price with the node's recorded markup.
/// `None` (unpriced) when the node has no markup (its provider had no strategy) or the
/// provider quoted no price.
pub fn tenant_price(provider_price: Option<&Money>, markup: Option<Decimal>) -> Option<Money> {
    let price = provider_price?;
    let markup = markup?;
    let factor = Decimal::ONE.checked_add(markup)?;
    price.checked_mul(factor).ok()
}

/// The tenant's price line of a node, e.g. `2 vCPU · 4 GiB · eu-central`.
pub fn price_line(shape: &Shape, class: &str) -> String {
    format!("{} vCPU · {} GiB · {class}", shape.vcpus, shape.memory_gib)
}

/// Whether a pool is a gateway (never billed to a tenant): org `sys`, name `gw-*`.
pub fn is_gateway(org_id: &OrgId, pool_name: &str) -> bool {
    *org_id == sys_org_id() && pool_name.starts_with("gw-")
}

/// The price per hour of `price`: hourly as is, monthly over [`HOURS_PER_MONTH`]; a one-off
/// price accrues nothing per hour (`None`).
pub fn hourly_rate(price: &Money) -> Option<Money> {
    match price.period {
        Period::Hour => Some(*price),
        Period::Month => Some(Money::new(
            price.amount / HOURS_PER_MONTH,
            price.currency,
            Period::Hour,
        )),
        Period::Once => None,
    }
}

/// Hours in `millis` milliseconds, exactly as a decimal.
pub fn hours_of(millis: i64) -> Decimal {
    Decimal::from(millis) / Decimal::from(HOUR_MS)
}

/// Milliseconds in `hours`, rounded to the nearest millisecond.
pub fn millis_of(hours: Decimal) -> i64 {
    let millis = (hours * Decimal::from(HOUR_MS)).round();
    i64::try_from(millis).unwrap_or(i64::MAX)
}

const DAY_MS: i64 = 86_400_000;

/// The UTC month of an instant.
pub fn month_of(at: Timestamp) -> Month {
    let (year, month, _) = civil_from_days(at.millis().div_euclid(DAY_MS));
    format!("{year:04}-{month:02}")
        .parse()
        .unwrap_or_else(|_| unreachable!("year and month are in range"))
}

/// The first instant of the month after the one holding `at`.
pub fn next_month_start(at: Timestamp) -> Timestamp {
    let (year, month, _) = civil_from_days(at.millis().div_euclid(DAY_MS));
    let (year, month) = if month == 12 {
        (year + 1, 1)
    } else {
        (year, month + 1)
    };
    Timestamp(days_from_civil(year, month, 1).saturating_mul(DAY_MS))
}

/// Whose usage a node's hours go to, and at what rate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BillingSubject {
    pub project_id: ProjectId,
    pub pool_id: PoolId,
    pub node_id: NodeId,
    /// The price line.
    pub description: String,
    /// The tenant's price per hour.
    pub rate: Money,
    /// The pool has a public IPv4 address: one more line, at rate 0.
    pub public_ipv4: bool,
}

/// Description of the public IPv4 line of a public pool's node (always at rate 0).
pub const PUBLIC_IPV4_LINE: &str = "public IPv4";

impl BillingSubject {
    fn line(&self, month: Month, hours: Decimal) -> Vec<NewUsage> {
        let main = NewUsage {
            project_id: self.project_id.clone(),
            month,
            pool_id: Some(self.pool_id.clone()),
            node_id: Some(self.node_id.clone()),
            description: self.description.clone(),
            hours,
            rate: self.rate,
            amount: hours * self.rate.amount,
        };
        let mut lines = Vec::with_capacity(2);
        if self.public_ipv4 {
            lines.push(NewUsage {
                description: PUBLIC_IPV4_LINE.to_string(),
                rate: Money::zero(self.rate.currency, Period::Hour),
                amount: Decimal::ZERO,
                ..main.clone()
            });
        }
        lines.insert(0, main);
        lines
    }
}

/// Usage for the running time `[from, to)`, per UTC month it touches: the node's price
/// line first, then (public pools) its IPv4 line at rate 0. Empty when `to` is not after
/// `from`. The start of a node's billing is recorded with [`opening_usage`] instead.
pub fn usage_between(subject: &BillingSubject, from: Timestamp, to: Timestamp) -> Vec<NewUsage> {
    let mut out = Vec::new();
    let mut start = from;
    while start < to {
        let end = next_month_start(start).min(to);
        out.extend(subject.line(month_of(start), hours_of(end.millis() - start.millis())));
        start = end;
    }
    out
}

/// The zero-hour lines that open a node's billing at `at`: the price line's creation time
/// marks when the node started running.
pub fn opening_usage(subject: &BillingSubject, at: Timestamp) -> Vec<NewUsage> {
    subject.line(month_of(at), Decimal::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;
    use orc_common::Currency;

    fn usd_hour(amount: Decimal) -> Money {
        Money::new(amount, "USD".parse::<Currency>().unwrap(), Period::Hour)
    }

    #[test]
    fn pricing_unpriced_is_not_zero_and_markup_zero_keeps_price() {
        let price = usd_hour(Decimal::new(10, 2));
        assert_eq!(tenant_price(Some(&price), None), None);
        assert_eq!(tenant_price(None, Some(Decimal::ZERO)), None);
        assert_eq!(tenant_price(Some(&price), Some(Decimal::ZERO)), Some(price));
        let marked = tenant_price(Some(&price), Some(Decimal::new(15, 2))).unwrap();
        assert_eq!(marked.amount, Decimal::new(1150, 4));
        assert_eq!(markup_at_admission(PricingStrategy::None), None);
        let markup = Markup::new(Decimal::ZERO).unwrap();
        assert_eq!(
            markup_at_admission(PricingStrategy::Markup(markup)),
            Some(Decimal::ZERO)
        );
    }

    #[test]
    fn pricing_price_line_and_gateways() {
        let shape = Shape {
            vcpus: 2,
            memory_gib: 4,
            arch: Default::default(),
            disks_gib: vec![],
        };
        assert_eq!(
            price_line(&shape, "eu-central"),
            "2 vCPU · 4 GiB · eu-central"
        );
        assert!(is_gateway(&sys_org_id(), "gw-eu-central"));
        assert!(!is_gateway(&sys_org_id(), "partner"));
        assert!(!is_gateway(&OrgId::from_counter(99), "gw-eu-central"));
    }

    #[test]
    fn pricing_months_and_splits() {
        // 2026-01-31T23:00:00Z and 2026-02-01T01:00:00Z.
        let jan_end = Timestamp(1_769_900_400_000);
        let feb = Timestamp(1_769_907_600_000);
        assert_eq!(month_of(jan_end).as_str(), "2026-01");
        assert_eq!(month_of(feb).as_str(), "2026-02");
        assert_eq!(next_month_start(jan_end), Timestamp(1_769_904_000_000));
        assert_eq!(month_of(Timestamp(0)).as_str(), "1970-01");
        assert_eq!(
            next_month_start(Timestamp(1_796_083_200_000 - 1)).millis(),
            1_796_083_200_000
        );
        let subject = BillingSubject {
            project_id: ProjectId::from_counter(5),
            pool_id: PoolId::from_counter(6),
            node_id: NodeId::from_counter(7),
            description: "2 vCPU · 4 GiB · eu-central".into(),
            rate: usd_hour(Decimal::new(10, 2)),
            public_ipv4: false,
        };
        let lines = usage_between(&subject, jan_end, feb);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].month.as_str(), "2026-01");
        assert_eq!(lines[0].hours, Decimal::ONE);
        assert_eq!(lines[1].month.as_str(), "2026-02");
        assert_eq!(lines[1].amount, Decimal::new(10, 2));
        assert!(usage_between(&subject, feb, feb).is_empty());
        let public = BillingSubject {
            public_ipv4: true,
            ..subject.clone()
        };
        let lines = usage_between(&public, jan_end, jan_end.plus_millis(1_800_000));
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1].description, PUBLIC_IPV4_LINE);
        assert_eq!(lines[1].hours, Decimal::new(5, 1));
        assert_eq!(lines[1].rate.amount, Decimal::ZERO);
        assert_eq!(lines[1].amount, Decimal::ZERO);
        let monthly = Money::new(Decimal::new(730, 0), "USD".parse().unwrap(), Period::Month);
        assert_eq!(hourly_rate(&monthly).unwrap().amount, Decimal::ONE);
        assert_eq!(millis_of(hours_of(1234)), 1234);
    }
}
