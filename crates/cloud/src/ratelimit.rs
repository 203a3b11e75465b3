//! Rate limits on both sides: reading the provider's rate-limit headers, the client-side
//! token bucket per account, and the bounded retry policy.
//!
//! Client side, every request first takes a token from its account's bucket (the `governor`
//! crate), so a platform never spends a cloud's hourly budget faster than the cloud refills
//! it. The bucket belongs to the account, not to one client: every client of a process
//! built for the same API, origin, credentials and quota shares one bucket
//! ([`AccountLimiter::for_account`]), so two replicas of a provider in one process, or a
//! fresh client made for one lookup, draw on the budget the cloud counts instead of each
//! spending it in full. Robot limits each endpoint separately, so its client keeps one
//! bucket per first path segment.
//!
//! Hetzner's `RateLimit-Reset` is the moment the bucket is *full* again, not when the next
//! request is allowed. The wait for one token is therefore the time to full divided by the
//! number of missing tokens (`limit − remaining`); with no usable reset it is
//! `3600 / limit` seconds, the refill interval of an hourly budget.

use std::collections::BTreeMap;
use std::fmt;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use reqwest::header::HeaderMap;

/// The rate-limit headers of one answer, as far as they were present and readable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RateLimitHeaders {
    /// `RateLimit-Limit`: bucket capacity (Hetzner: requests per hour).
    pub limit: Option<u64>,
    /// `RateLimit-Remaining`: tokens left.
    pub remaining: Option<u64>,
    /// `RateLimit-Reset`: Unix seconds when the bucket is full again.
    pub reset: Option<u64>,
    /// `Retry-After` (delta seconds or an HTTP date, relative to `now` at parse time).
    pub retry_after: Option<Duration>,
}

impl RateLimitHeaders {
    /// Reads the headers; unreadable values count as absent.
    pub fn from_headers(headers: &HeaderMap, now: SystemTime) -> Self {
        let number = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        let retry_after = headers
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, now));
        RateLimitHeaders {
            limit: number("ratelimit-limit"),
            remaining: number("ratelimit-remaining"),
            reset: number("ratelimit-reset"),
            retry_after,
        }
    }

    /// How long a Hetzner client should wait before one more request is allowed.
    pub fn hetzner_wait(&self, now: SystemTime) -> Duration {
        if let Some(wait) = self.retry_after {
            return wait;
        }
        let hourly = |limit: u64| Duration::from_secs_f64(3600.0 / limit.max(1) as f64);
        match (self.limit, self.remaining, self.reset) {
            (Some(limit), remaining, Some(reset)) if limit > 0 => {
                let now_secs = now
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_secs_f64();
                let until_full = reset as f64 - now_secs;
                let missing = limit.saturating_sub(remaining.unwrap_or(0)).max(1);
                if until_full > 0.0 {
                    Duration::from_secs_f64(until_full / missing as f64)
                } else {
                    hourly(limit)
                }
            }
            (Some(limit), _, _) => hourly(limit),
            (None, _, _) => Duration::from_secs(1),
        }
    }
}

/// Parses `Retry-After`: delta seconds, or an HTTP date (a date in the past means now).
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let date = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let at = UNIX_EPOCH.checked_add(Duration::from_secs(u64::try_from(date.timestamp()).ok()?))?;
    Some(at.duration_since(now).unwrap_or_default())
}

/// A client-side request budget: `requests` per `per`, of which all may be spent at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateQuota {
    pub requests: NonZeroU32,
    pub per: Duration,
}

impl RateQuota {
    /// Hetzner Cloud: 3,600 requests an hour per project, bursts allowed.
    pub const HETZNER: RateQuota = RateQuota {
        requests: NonZeroU32::new(3600).expect("non-zero"),
        per: Duration::from_secs(3600),
    };
    /// Vultr: about 30 requests a second.
    pub const VULTR: RateQuota = RateQuota {
        requests: NonZeroU32::new(30).expect("non-zero"),
        per: Duration::from_secs(1),
    };
    /// Robot: 50 requests an hour per endpoint, the lowest limit Hetzner documents for an
    /// endpoint orc uses (`POST /reset`).
    pub const ROBOT: RateQuota = RateQuota {
        requests: NonZeroU32::new(50).expect("non-zero"),
        per: Duration::from_secs(3600),
    };

    fn quota(self) -> Quota {
        let period = self.per / self.requests.get();
        Quota::with_period(period.max(Duration::from_nanos(1)))
            .unwrap_or_else(|| Quota::per_second(self.requests))
            .allow_burst(self.requests)
    }
}

/// Which account a bucket counts for: the API, the origin its requests go to (scheme, host
/// and port: a cloud counts per account, whatever the path), a fingerprint of the
/// credentials (never the credentials themselves) and the quota.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct AccountKey {
    api: &'static str,
    origin: String,
    credentials: u64,
    requests: u32,
    per: Duration,
}

impl AccountKey {
    pub(crate) fn new(
        api: &'static str,
        origin: &str,
        credentials: &str,
        quota: RateQuota,
    ) -> Self {
        let mut hasher = DefaultHasher::new();
        credentials.hash(&mut hasher);
        AccountKey {
            api,
            origin: origin.trim_end_matches('/').to_string(),
            credentials: hasher.finish(),
            requests: quota.requests.get(),
            per: quota.per,
        }
    }
}

/// The buckets of this process's accounts. A bucket outlives its clients, as the cloud's
/// count does: a client made after the last one was dropped finds the budget as spent.
fn accounts() -> &'static Mutex<BTreeMap<AccountKey, Arc<AccountLimiter>>> {
    static ACCOUNTS: OnceLock<Mutex<BTreeMap<AccountKey, Arc<AccountLimiter>>>> = OnceLock::new();
    ACCOUNTS.get_or_init(|| Mutex::new(BTreeMap::new()))
}

/// The token bucket(s) of one account.
pub(crate) struct AccountLimiter {
    quota: RateQuota,
    shared: Option<DefaultDirectRateLimiter>,
    per_endpoint: Option<Mutex<BTreeMap<String, Arc<DefaultDirectRateLimiter>>>>,
}

impl fmt::Debug for AccountLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccountLimiter")
            .field("quota", &self.quota)
            .field("per_endpoint", &self.per_endpoint.is_some())
            .finish()
    }
}

impl AccountLimiter {
    /// The quota the bucket(s) refill at.
    pub(crate) fn quota(&self) -> RateQuota {
        self.quota
    }

    /// One bucket for every request of the account.
    pub(crate) fn shared(quota: RateQuota) -> Self {
        AccountLimiter {
            quota,
            shared: Some(RateLimiter::direct(quota.quota())),
            per_endpoint: None,
        }
    }

    /// One bucket per endpoint (first path segment), as Robot counts.
    pub(crate) fn per_endpoint(quota: RateQuota) -> Self {
        AccountLimiter {
            quota,
            shared: None,
            per_endpoint: Some(Mutex::new(BTreeMap::new())),
        }
    }

    /// The account's bucket in this process: the one an earlier client of the same account
    /// made, else `fresh`, which is kept for the clients that follow.
    pub(crate) fn for_account(key: AccountKey, fresh: AccountLimiter) -> Arc<AccountLimiter> {
        let mut map = accounts()
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        map.entry(key).or_insert_with(|| Arc::new(fresh)).clone()
    }

    /// Waits until the account may send one more request to `path`.
    pub(crate) async fn acquire(&self, path: &str) {
        if let Some(limiter) = &self.shared {
            limiter.until_ready().await;
            return;
        }
        if let Some(map) = &self.per_endpoint {
            let endpoint = path.trim_start_matches('/').split('/').next().unwrap_or("");
            let limiter = {
                let mut map = map.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                map.entry(endpoint.to_string())
                    .or_insert_with(|| Arc::new(RateLimiter::direct(self.quota.quota())))
                    .clone()
            };
            limiter.until_ready().await;
        }
    }
}

/// When a failed request is sent again by the client itself.
///
/// A rate-limited request (Hetzner/Vultr 429, Robot 403 `RATE_LIMIT_EXCEEDED`) was refused
/// before anything happened, so it is repeated after the provider's wait when that wait is
/// at most `max_rate_limit_wait`. Transport errors and 502/503/504 are repeated only for
/// `GET`s, which change nothing. Every attempt counts against `max_attempts` and in the
/// request counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in total, the first included (at least 1).
    pub max_attempts: u32,
    /// The longest provider-requested wait the client sits out itself.
    pub max_rate_limit_wait: Duration,
    /// Wait before repeating a failed `GET`; doubled for every further attempt.
    pub get_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            max_rate_limit_wait: Duration::from_secs(5),
            get_backoff: Duration::from_millis(200),
        }
    }
}

impl RetryPolicy {
    /// Never repeats a request.
    pub fn none() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn clients_of_one_account_share_one_bucket() {
        let quota = RateQuota {
            requests: NonZeroU32::new(2).unwrap(),
            per: Duration::from_secs(3600),
        };
        let key = |token: &str| AccountKey::new("vultr", "http://127.0.0.1:1/", token, quota);
        let first = AccountLimiter::for_account(key("a"), AccountLimiter::shared(quota));
        let second = AccountLimiter::for_account(
            AccountKey::new("vultr", "http://127.0.0.1:1", "a", quota),
            AccountLimiter::shared(quota),
        );
        assert!(Arc::ptr_eq(&first, &second), "same account, same bucket");
        let other = AccountLimiter::for_account(key("b"), AccountLimiter::shared(quota));
        assert!(
            !Arc::ptr_eq(&first, &other),
            "other credentials, own bucket"
        );
        let spend = |limiter: &AccountLimiter| {
            limiter
                .shared
                .as_ref()
                .map(|bucket| bucket.check().is_ok())
                .unwrap_or(false)
        };
        assert!(spend(&first) && spend(&second));
        assert!(
            !spend(&first),
            "the two clients spent the account's two requests"
        );
        assert!(spend(&other));
        drop((first, second));
        let later = AccountLimiter::for_account(key("a"), AccountLimiter::shared(quota));
        assert!(
            !spend(&later),
            "a client made later finds the account's budget spent"
        );
    }

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn reset_is_when_the_bucket_is_full_so_one_token_is_a_fraction() {
        let now = at(1_000_000);
        let h = RateLimitHeaders::from_headers(
            &headers(&[
                ("RateLimit-Limit", "3600"),
                ("RateLimit-Remaining", "0"),
                ("RateLimit-Reset", "1003600"),
            ]),
            now,
        );
        assert_eq!(h.limit, Some(3600));
        assert_eq!(h.remaining, Some(0));
        assert_eq!(h.hetzner_wait(now), Duration::from_secs(1));
    }

    #[test]
    fn small_buckets_refill_faster() {
        let now = at(500);
        let h = RateLimitHeaders {
            limit: Some(10),
            remaining: Some(0),
            reset: Some(510),
            retry_after: None,
        };
        assert_eq!(h.hetzner_wait(now), Duration::from_secs(1));
    }

    #[test]
    fn without_reset_the_hourly_refill_interval_is_used() {
        let h = RateLimitHeaders {
            limit: Some(7200),
            ..RateLimitHeaders::default()
        };
        assert_eq!(h.hetzner_wait(at(0)), Duration::from_millis(500));
        let stale = RateLimitHeaders {
            limit: Some(3600),
            remaining: Some(0),
            reset: Some(10),
            retry_after: None,
        };
        assert_eq!(stale.hetzner_wait(at(20)), Duration::from_secs(1));
        assert_eq!(
            RateLimitHeaders::default().hetzner_wait(at(0)),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn retry_after_wins_and_accepts_dates() {
        let now = at(1_700_000_000);
        let h = RateLimitHeaders::from_headers(
            &headers(&[("Retry-After", "7"), ("RateLimit-Limit", "3600")]),
            now,
        );
        assert_eq!(h.hetzner_wait(now), Duration::from_secs(7));
        let date = "Tue, 14 Nov 2023 22:13:30 GMT";
        assert_eq!(
            parse_retry_after(date, at(1_700_000_000)),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            parse_retry_after(date, at(1_800_000_000)),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
    }

    #[test]
    fn unreadable_headers_count_as_absent() {
        let h = RateLimitHeaders::from_headers(
            &headers(&[("RateLimit-Limit", "lots"), ("RateLimit-Remaining", "-1")]),
            at(0),
        );
        assert_eq!(h, RateLimitHeaders::default());
    }

    proptest! {
        #[test]
        fn header_parsing_never_panics(
            limit in "[ -~]{0,12}",
            remaining in "[ -~]{0,12}",
            reset in "[ -~]{0,12}",
            retry in "[ -~]{0,30}",
            now in 0u64..4_000_000_000,
        ) {
            let map = headers(&[
                ("RateLimit-Limit", &limit),
                ("RateLimit-Remaining", &remaining),
                ("RateLimit-Reset", &reset),
                ("Retry-After", &retry),
            ]);
            let h = RateLimitHeaders::from_headers(&map, at(now));
            let _ = h.hetzner_wait(at(now));
        }

        #[test]
        fn one_token_never_takes_longer_than_the_whole_refill(
            limit in 1u64..100_000,
            remaining in 0u64..100_000,
            ahead in 0u64..100_000,
            now in 0u64..4_000_000_000,
        ) {
            let h = RateLimitHeaders {
                limit: Some(limit),
                remaining: Some(remaining.min(limit)),
                reset: Some(now + ahead),
                retry_after: None,
            };
            let wait = h.hetzner_wait(at(now));
            let whole = Duration::from_secs(ahead).max(Duration::from_secs_f64(3600.0 / limit as f64));
            prop_assert!(wait <= whole + Duration::from_millis(1), "{wait:?} > {whole:?}");
        }
    }
}
