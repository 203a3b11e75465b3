//! `GET /v2/account`: the account's details and what it owes, in USD.
//!
//! `pending_charges` is the instances' usage this period (hourly price per started hour,
//! capped at the monthly price), destroyed instances included; block storage is not
//! charged. The balance and last payment are fixed sample values (a 25 USD prepayment at
//! the time the emulator was seeded); a negative balance is credit, as on Vultr.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use rust_decimal::Decimal;
use serde_json::json;

use super::Vultr;
use super::catalog::money;
use super::http::{Reply, json};
use super::instances::charge;
use super::world::vultr_time;

/// Permissions a full-access API key has.
const ACLS: [&str; 13] = [
    "manage_users",
    "subscriptions_view",
    "subscriptions",
    "billing",
    "support",
    "provisioning",
    "dns",
    "abuse",
    "upgrade",
    "firewall",
    "alerts",
    "objstore",
    "loadbalancer",
];

/// `GET /v2/account`.
pub(crate) async fn get_account(State(v): State<Arc<Vultr>>, headers: HeaderMap) -> Reply {
    let account = v.account(&headers)?;
    let now = v.core.now();
    let pending = v.world(&account, |w, _| {
        w.instances
            .values()
            .map(|i| charge(i, v.catalog.plan(&i.plan), now))
            .fold(w.closed_charges, |a, b| a + b)
    });
    let paid = Decimal::from(-25);
    json(
        StatusCode::OK,
        json!({"account": {
            "name": account,
            "email": super::account_email(&account),
            "acls": ACLS,
            "balance": money(paid),
            "pending_charges": money(pending.round_dp(2)),
            "last_payment_date": vultr_time(v.seeded()),
            "last_payment_amount": money(paid),
        }}),
    )
}
