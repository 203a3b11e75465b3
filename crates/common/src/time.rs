//! Time as a plain value, and the one seam through which code reads the clock.
//!
//! A [`Timestamp`] is UTC milliseconds since the Unix epoch. Decisions take the time they
//! need as an argument; whoever calls them reads it from a [`Clock`]: the wall clock
//! ([`SystemClock`]) in a running process, a [`ManualClock`] that moves only when told to in
//! tests. Only [`SystemClock`] and [`Timestamp::now`] read the wall clock.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// A point in time: UTC milliseconds since the Unix epoch.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(transparent)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// The wall clock now. Prefer a [`Clock`], so tests can drive the time.
    pub fn now() -> Self {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| Timestamp(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)))
            .unwrap_or_default()
    }

    /// From milliseconds since the Unix epoch.
    pub const fn from_unix_millis(millis: i64) -> Self {
        Timestamp(millis)
    }

    /// From seconds since the Unix epoch (saturating).
    pub const fn from_unix_secs(secs: i64) -> Self {
        Timestamp(secs.saturating_mul(1000))
    }

    /// Milliseconds since the Unix epoch.
    pub const fn millis(self) -> i64 {
        self.0
    }

    /// This time plus `millis` milliseconds (saturating).
    pub const fn plus_millis(self, millis: i64) -> Self {
        Timestamp(self.0.saturating_add(millis))
    }

    /// This time plus `days` whole days of 24 hours (saturating).
    pub const fn plus_days(self, days: i64) -> Self {
        self.plus_millis(days.saturating_mul(24 * 3600 * 1000))
    }

    /// This time plus `d` (saturating).
    pub fn plus(self, d: Duration) -> Self {
        self.plus_millis(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }

    /// How long after `earlier` this is; zero when it is not later.
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(u64::try_from(self.0.saturating_sub(earlier.0)).unwrap_or(0))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let abs = self.0.unsigned_abs();
        write!(f, "{sign}{}.{:03}s", abs / 1000, abs % 1000)
    }
}

/// A source of the current time.
pub trait Clock: fmt::Debug + Send + Sync + 'static {
    /// Now.
    fn now(&self) -> Timestamp;
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that moves only when told to. Clones share the same time.
#[derive(Clone, Default)]
pub struct ManualClock {
    millis: Arc<AtomicI64>,
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ManualClock({})", self.millis.load(Ordering::SeqCst))
    }
}

impl ManualClock {
    /// A clock showing `start`.
    pub fn new(start: Timestamp) -> Self {
        ManualClock {
            millis: Arc::new(AtomicI64::new(start.millis())),
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let by = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.millis.fetch_add(by, Ordering::SeqCst);
    }

    /// Sets the clock to `at`.
    pub fn set(&self, at: Timestamp) {
        self.millis.store(at.millis(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.millis.load(Ordering::SeqCst))
    }
}

/// A shared clock handle.
pub type SharedClock = Arc<dyn Clock>;

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for a timestamp (UTC, RFC 3339 with milliseconds).
pub fn format_time(at: Timestamp) -> String {
    let millis = at.0.rem_euclid(1000);
    let secs = at.0.div_euclid(1000);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Days since 1970-01-01 → the proleptic Gregorian (year, month 1–12, day 1–31). Howard
/// Hinnant's `civil_from_days`.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        year,
        u32::try_from(month).unwrap_or(1),
        u32::try_from(day).unwrap_or(1),
    )
}

/// A proleptic Gregorian date → days since 1970-01-01. Howard Hinnant's `days_from_civil`.
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let m = i64::from(month);
    let y = if m <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_print_in_utc_with_milliseconds() {
        assert_eq!(format_time(Timestamp(0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            format_time(Timestamp(1_795_976_631_123)),
            "2026-11-29T18:23:51.123Z"
        );
        assert_eq!(format_time(Timestamp(-1)), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn civil_dates_and_day_numbers_round_trip() {
        for days in [-800_000, -1, 0, 59, 60, 11_016, 20_454, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(days_from_civil(2000, 2, 29), 11_016);
        assert_eq!(civil_from_days(11_017), (2000, 3, 1));
    }

    #[test]
    fn arithmetic_saturates_and_never_runs_backwards() {
        let t = Timestamp::from_unix_secs(10);
        assert_eq!(t.millis(), 10_000);
        assert_eq!(t.plus(Duration::from_millis(250)).millis(), 10_250);
        assert_eq!(t.plus_millis(i64::MAX).millis(), i64::MAX);
        assert_eq!(t.since(Timestamp(4_000)), Duration::from_secs(6));
        assert_eq!(Timestamp(4_000).since(t), Duration::ZERO);
        assert_eq!(Timestamp(1_005).to_string(), "1.005s");
    }

    #[test]
    fn a_manual_clock_moves_only_when_told_and_clones_share_it() {
        let clock = ManualClock::new(Timestamp(1_000));
        let other = clock.clone();
        clock.advance(Duration::from_secs(2));
        assert_eq!(other.now(), Timestamp(3_000));
        other.set(Timestamp(7));
        assert_eq!(clock.now(), Timestamp(7));
    }
}
