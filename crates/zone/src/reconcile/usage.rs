//! Usage accrual: a priced node's running hours become usage lines.
//!
//! The lines themselves are the billing mark: a node's billing starts with a zero-hour line
//! created when it starts running, and the instant up to which it is billed is that line's
//! creation time plus every hour recorded on its price lines (the rate-0 IPv4 line of a
//! public pool follows along and is not counted). Accrual recomputes that mark from the
//! store each time, so a repeated or interrupted accrual never bills an hour twice. Accruals
//! run one at a time in the process.

use tokio::sync::Mutex;

use crate::model::Timestamp;
use crate::pricing::{BillingSubject, millis_of, opening_usage, usage_between};
use crate::store::{Store, StoreResult};

static ACCRUALS: Mutex<()> = Mutex::const_new(());

/// Opens a node's billing at `now` (no-op if it already has usage lines).
pub(crate) async fn open_usage(
    store: &Store,
    subject: &BillingSubject,
    now: Timestamp,
) -> StoreResult<()> {
    let _one_at_a_time = ACCRUALS.lock().await;
    if store
        .billed_usage(&subject.node_id, &subject.description)
        .await?
        .is_none()
    {
        for usage in opening_usage(subject, now) {
            store.record_usage(&usage, now).await?;
        }
    }
    Ok(())
}

/// Records the node's usage from where it is billed up to `now`, split by month. A node
/// with no usage line yet has its billing opened at `now` instead.
pub async fn accrue_usage(
    store: &Store,
    subject: &BillingSubject,
    now: Timestamp,
) -> StoreResult<()> {
    let _one_at_a_time = ACCRUALS.lock().await;
    match store
        .billed_usage(&subject.node_id, &subject.description)
        .await?
    {
        None => {
            for usage in opening_usage(subject, now) {
                store.record_usage(&usage, now).await?;
            }
        }
        Some(billed) => {
            let until = billed.since.plus_millis(millis_of(billed.hours));
            for usage in usage_between(subject, until, now) {
                store.record_usage(&usage, now).await?;
            }
        }
    }
    Ok(())
}
