//! The node state machine as pure functions: what to do with a due node ([`plan`]) and the
//! status a provider's answer leads to ([`after_offer`], [`after_deployed`],
//! [`after_refusal`], [`after_backend_error`]). No I/O here; the pass in `mod.rs` carries the
//! steps out. It stays in the controller rather than in `orc-zone-model` because it reads the
//! protocol's answer types, and `orc-proto` brings tonic with it.
//!
//! ```text
//! pending ─► quoting ─► deploying ─► running ─► destroying ─► ended
//!    ▲          │            │          │ ▲             ▲
//!    └─ retry ◄─┴── refused ─┘          ▼ │ reported    │ not reported again
//!       (parked: no_capacity,          lost ──────────────┘ within lost_replace_after
//!        operator_fix)
//! ```
//!
//! A lost node is restored to `running` when a later complete inventory lists it again;
//! otherwise it is destroyed (whatever is left of it) and, once ended, the pool pass gives
//! its slot a new node. Its billing stops at `lost_at`. A deploy refused `no_capacity`
//! is quoted again soon (the offer's site ran out, another may not have); a quote refused
//! `no_capacity` parks the node.
//!
//! Every step writes a lease (`next_attempt_at` in the future) before its request goes out,
//! so a node whose answer never comes (a zone restart, a lost stream) is due again once the
//! lease runs out and its request is sent again; requests are idempotent by node id.

use std::time::Duration;

use orc_common::RefusalKind;
use orc_proto::{Deployed, Offer, Refusal};

use super::ReconcileOptions;
use crate::model::{Node, NodeState, NodeStatus, Timestamp};
use crate::pricing::tenant_price;

/// Words a tenant reads while a lost node is being replaced.
pub const REPLACING_WORDS: &str =
    "The node was no longer reported by its provider; it is being replaced.";

/// What a due node needs next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Ask for a quote; the status is the claim to write first.
    Quote(NodeStatus),
    /// Send the deploy with this quote token; the status is the claim.
    Deploy {
        claim: NodeStatus,
        quote_token: String,
    },
    /// Send the destroy; the status is the claim.
    Destroy(NodeStatus),
    /// Record usage up to now, then write the status (next accrual).
    Accrue(NodeStatus),
    /// Nothing to send; write the status (a new due time or none).
    Requeue(NodeStatus),
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The retry delay after `attempts` failed attempts: `initial · 2^attempts`, capped.
pub fn backoff(options: &ReconcileOptions, attempts: u32) -> Duration {
    orc_common::Backoff {
        initial: options.backoff_initial,
        max: options.backoff_max,
    }
    .ceiling(attempts)
}

/// What to do with a due node. `markup` is what an admitted node records (from the
/// provider's strategy); `config_changed_at` is when the provider's configuration last
/// changed, if its backend tracks that; `billable` says whether a running node accrues usage.
pub fn plan(
    node: &Node,
    options: &ReconcileOptions,
    markup: Option<rust_decimal::Decimal>,
    config_changed_at: Option<Timestamp>,
    billable: bool,
    now: Timestamp,
) -> Step {
    let mut status = node.status.clone();
    match node.status.state {
        NodeState::Pending | NodeState::Quoting => {
            if node.status.state == NodeState::Pending && node.status.attempts == 0 {
                status.markup = markup;
            }
            status.state = NodeState::Quoting;
            status.next_attempt_at = Some(now.plus_millis(millis(options.quote_lease)));
            Step::Quote(status)
        }
        NodeState::Parked => {
            let waits_for_config = matches!(
                node.status.refusal,
                Some(RefusalKind::OperatorFix | RefusalKind::Unplaceable)
            );
            let changed = match config_changed_at {
                Some(at) => at > node.updated_at,
                None => true,
            };
            if waits_for_config && !changed {
                status.next_attempt_at =
                    Some(now.plus_millis(millis(options.operator_fix_recheck)));
                Step::Requeue(status)
            } else {
                status.state = NodeState::Quoting;
                status.next_attempt_at = Some(now.plus_millis(millis(options.quote_lease)));
                Step::Quote(status)
            }
        }
        NodeState::Deploying => match node.status.quote_token.clone() {
            Some(quote_token) => {
                status.next_attempt_at = Some(now.plus_millis(millis(options.deploy_lease)));
                Step::Deploy {
                    claim: status,
                    quote_token,
                }
            }
            None => {
                status.state = NodeState::Quoting;
                status.next_attempt_at = Some(now.plus_millis(millis(options.quote_lease)));
                Step::Quote(status)
            }
        },
        NodeState::Destroying => {
            status.next_attempt_at = Some(now.plus_millis(millis(options.destroy_lease)));
            Step::Destroy(status)
        }
        NodeState::Running => {
            if billable {
                status.next_attempt_at = Some(now.plus_millis(millis(options.usage_interval)));
                Step::Accrue(status)
            } else {
                status.next_attempt_at = None;
                Step::Requeue(status)
            }
        }
        NodeState::Lost => {
            let since = node.status.lost_at.unwrap_or(node.updated_at);
            let replace_at = since.plus_millis(millis(options.lost_replace_after));
            if now >= replace_at {
                status.state = NodeState::Destroying;
                status.state_words = Some(REPLACING_WORDS.to_string());
                status.next_attempt_at = Some(now.plus_millis(millis(options.destroy_lease)));
                Step::Destroy(status)
            } else {
                status.next_attempt_at = Some(replace_at);
                Step::Requeue(status)
            }
        }
        NodeState::Ended => {
            status.next_attempt_at = None;
            Step::Requeue(status)
        }
    }
}

/// The status after a refusal of a quote or deploy (the node is quoted again later) or of a
/// destroy (`destroying` is kept and the destroy sent again later).
pub fn after_refusal(
    claimed: &NodeStatus,
    refusal: &Refusal,
    destroying: bool,
    options: &ReconcileOptions,
    now: Timestamp,
) -> NodeStatus {
    let mut status = claimed.clone();
    let kind = refusal.kind;
    status.refusal = Some(kind);
    status.state_words = Some(refusal.words.clone());
    status.attempts = claimed.attempts.saturating_add(1);
    status.quote_token = None;
    let (state, delay) = match kind {
        // The site the offer named has none left: the provider no longer offers it, so
        // another quote may well place the node elsewhere at once.
        RefusalKind::NoCapacity if claimed.state == NodeState::Deploying => {
            (NodeState::Pending, options.backoff_initial)
        }
        RefusalKind::NoCapacity => (NodeState::Parked, options.no_capacity_retry),
        RefusalKind::Counting => (NodeState::Pending, options.counting_retry),
        RefusalKind::Transient => (NodeState::Pending, backoff(options, claimed.attempts)),
        RefusalKind::OperatorFix => (NodeState::Parked, options.operator_fix_recheck),
        RefusalKind::Failed => (NodeState::Pending, backoff(options, claimed.attempts)),
        // Only a new catalog can change the answer: wait for one, as for operator_fix.
        RefusalKind::Unplaceable => (NodeState::Parked, options.operator_fix_recheck),
    };
    status.state = if destroying {
        NodeState::Destroying
    } else {
        state
    };
    status.next_attempt_at = Some(now.plus_millis(millis(delay)));
    status
}

/// The status after an offer: deploy next, at once.
pub fn after_offer(claimed: &NodeStatus, offer: &Offer, now: Timestamp) -> NodeStatus {
    let mut status = claimed.clone();
    status.state = NodeState::Deploying;
    status.site = Some(offer.site.to_string());
    status.quote_token = Some(offer.quote_token.to_string());
    status.price = tenant_price(offer.price.as_ref(), claimed.markup);
    status.state_words = Some(offer.words.clone());
    status.refusal = None;
    status.attempts = 0;
    status.next_attempt_at = Some(now);
    status
}

/// The status after a deploy: running, accruing usage from now when `billable`.
pub fn after_deployed(
    claimed: &NodeStatus,
    deployed: &Deployed,
    billable: bool,
    options: &ReconcileOptions,
    now: Timestamp,
) -> NodeStatus {
    let mut status = claimed.clone();
    status.state = NodeState::Running;
    status.site = Some(deployed.site.to_string());
    status.instance_ref = Some(deployed.instance_ref.to_string());
    status.placed = deployed.placed.clone();
    status.addresses = deployed.addresses.iter().map(ToString::to_string).collect();
    if status.price.is_none() {
        status.price = tenant_price(deployed.price.as_ref(), claimed.markup);
    }
    status.quote_token = None;
    status.refusal = None;
    status.state_words = None;
    status.attempts = 0;
    status.next_attempt_at = billable.then(|| now.plus_millis(millis(options.usage_interval)));
    status
}

/// The status after the zone could not reach the provider: the same step again after the
/// backoff (a quote falls back to pending).
pub fn after_backend_error(
    claimed: &NodeStatus,
    options: &ReconcileOptions,
    now: Timestamp,
) -> NodeStatus {
    let mut status = claimed.clone();
    if status.state == NodeState::Quoting {
        status.state = NodeState::Pending;
    }
    status.attempts = claimed.attempts.saturating_add(1);
    status.next_attempt_at = Some(now.plus_millis(millis(backoff(options, claimed.attempts))));
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{NodeId, PoolId};
    use rust_decimal::Decimal;

    fn node(state: NodeState, attempts: u32) -> Node {
        let mut status = NodeStatus::pending(Timestamp(0));
        status.state = state;
        status.attempts = attempts;
        Node {
            id: NodeId::from_counter(10),
            pool_id: PoolId::from_counter(9),
            slot: 0,
            status,
            version: 1,
            created_at: Timestamp(0),
            updated_at: Timestamp(1_000),
        }
    }

    #[test]
    fn reconcile_backoff_doubles_and_is_capped() {
        let options = ReconcileOptions::default();
        assert_eq!(backoff(&options, 0), Duration::from_secs(2));
        assert_eq!(backoff(&options, 3), Duration::from_secs(16));
        assert_eq!(backoff(&options, 30), Duration::from_secs(300));
        assert_eq!(backoff(&options, u32::MAX), Duration::from_secs(300));
    }

    #[test]
    fn reconcile_markup_is_recorded_only_at_admission() {
        let options = ReconcileOptions::default();
        let now = Timestamp(5_000);
        let markup = Some(Decimal::new(2, 1));
        let Step::Quote(claim) = plan(
            &node(NodeState::Pending, 0),
            &options,
            markup,
            None,
            false,
            now,
        ) else {
            panic!("a pending node is quoted");
        };
        assert_eq!(claim.markup, markup);
        assert_eq!(claim.state, NodeState::Quoting);
        assert_eq!(
            claim.next_attempt_at,
            Some(Timestamp(65_000)),
            "quote lease"
        );
        // A node retried after a refusal keeps the markup it was admitted with.
        let mut retried = node(NodeState::Pending, 2);
        retried.status.markup = None;
        let Step::Quote(claim) = plan(&retried, &options, markup, None, false, now) else {
            panic!("a retried node is quoted");
        };
        assert_eq!(claim.markup, None);
    }

    #[test]
    fn reconcile_operator_fix_requeues_until_the_config_changes() {
        let options = ReconcileOptions::default();
        let mut parked = node(NodeState::Parked, 1);
        parked.status.refusal = Some(RefusalKind::OperatorFix);
        let now = Timestamp(40_000);
        match plan(&parked, &options, None, Some(Timestamp(500)), false, now) {
            Step::Requeue(status) => {
                assert_eq!(status.state, NodeState::Parked);
                assert_eq!(status.next_attempt_at, Some(Timestamp(70_000)));
            }
            other => panic!("expected a requeue, got {other:?}"),
        }
        assert!(matches!(
            plan(&parked, &options, None, Some(Timestamp(2_000)), false, now),
            Step::Quote(_)
        ));
        parked.status.refusal = Some(RefusalKind::NoCapacity);
        assert!(matches!(
            plan(&parked, &options, None, Some(Timestamp(500)), false, now),
            Step::Quote(_)
        ));
    }

    #[test]
    fn reconcile_running_nodes_are_due_only_when_billed() {
        let options = ReconcileOptions::default();
        let running = node(NodeState::Running, 0);
        match plan(&running, &options, None, None, true, Timestamp(0)) {
            Step::Accrue(status) => {
                assert_eq!(status.next_attempt_at, Some(Timestamp(3_600_000)))
            }
            other => panic!("expected accrual, got {other:?}"),
        }
        match plan(&running, &options, None, None, false, Timestamp(0)) {
            Step::Requeue(status) => assert_eq!(status.next_attempt_at, None),
            other => panic!("expected no due time, got {other:?}"),
        }
    }
}
