//! Waiting for a condition that another task or process makes true.

use std::future::Future;
use std::time::Duration;

/// How often a condition is checked again.
const POLL: Duration = Duration::from_millis(20);

/// Checks `probe` until it answers `Some`, at most for `limit`; panics naming `what` when
/// the time is up. For conditions another task makes true; never a proof that something
/// did not happen (use paused time or an injected clock for that).
pub async fn eventually_some<T, F, Fut>(what: &str, limit: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("gave up after {limit:?} waiting for {what}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// [`eventually_some`] for a condition that is simply true or false.
pub async fn eventually<F, Fut>(what: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    eventually_some(what, limit, || {
        let done = check();
        async move { done.await.then_some(()) }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test(start_paused = true)]
    async fn waits_until_the_probe_answers() {
        let calls = Arc::new(AtomicU32::new(0));
        let seen = calls.clone();
        let value = eventually_some("the third call", Duration::from_secs(5), move || {
            let n = seen.fetch_add(1, Ordering::SeqCst) + 1;
            async move { (n == 3).then_some(n) }
        })
        .await;
        assert_eq!(value, 3);
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    #[should_panic(expected = "gave up after 1s waiting for nothing")]
    async fn gives_up_naming_what_it_waited_for() {
        eventually("nothing", Duration::from_secs(1), || async { false }).await;
    }
}
