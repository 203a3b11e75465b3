//! Capped exponential backoff, as a pure function of the attempt number: the one every retry
//! of the workspace uses (providers' and agents' reconnects, the reconcilers' retries).
//!
//! The delay before attempt `n` (0-based) is `min(max, initial · 2ⁿ)` ([`Backoff::ceiling`]);
//! with jitter, the upper half is jittered: the result lies in `[d/2, d]`
//! ([`Backoff::delay`]). Jitter spreads the reconnects of many replicas or agents after a
//! zone restart; the fixed lower half keeps one from hammering. The caller draws the jitter,
//! so this stays pure.

use std::time::Duration;

/// Backoff settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Delay before the first retry, before jitter.
    pub initial: Duration,
    /// Largest delay, before jitter.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            initial: Duration::from_millis(500),
            max: Duration::from_secs(30),
        }
    }
}

impl Backoff {
    /// The un-jittered delay before retry number `attempt` (0-based).
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
        self.initial.saturating_mul(factor).min(self.max)
    }

    /// The delay before retry number `attempt`, with `jitter` in `[0, 1]` choosing a point
    /// in the upper half. Values outside that range are clamped.
    pub fn delay(&self, attempt: u32, jitter: f64) -> Duration {
        let ceiling = self.ceiling(attempt);
        let half = ceiling / 2;
        half + (ceiling - half).mul_f64(jitter.clamp(0.0, 1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_until_the_cap() {
        let b = Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(1),
        };
        let ceilings: Vec<u128> = (0..6).map(|n| b.ceiling(n).as_millis()).collect();
        assert_eq!(ceilings, vec![100, 200, 400, 800, 1000, 1000]);
        assert_eq!(b.ceiling(u32::MAX), Duration::from_secs(1));
    }

    #[test]
    fn jitter_stays_in_the_upper_half() {
        let b = Backoff::default();
        assert_eq!(b.delay(0, 0.0), Duration::from_millis(250));
        assert_eq!(b.delay(0, 1.0), Duration::from_millis(500));
        assert_eq!(b.delay(0, 7.0), Duration::from_millis(500));
        assert_eq!(b.delay(20, 0.5), Duration::from_millis(22_500));
    }
}
