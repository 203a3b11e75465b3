//! The emulated clock. Actions, instance installs and timestamps follow it.
//!
//! In [`ClockMode::Auto`] emulated time runs with real time (demos, `orc up`); in
//! [`ClockMode::Explicit`] it stands still until the control API advances it (tests), so a
//! test decides exactly when a server finishes booting.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockMode {
    Auto,
    Explicit,
}

#[derive(Debug)]
pub struct EmuClock {
    state: Mutex<ClockState>,
}

#[derive(Debug)]
struct ClockState {
    mode: ClockMode,
    /// Emulated time at `anchor`.
    base: DateTime<Utc>,
    anchor: Instant,
}

impl EmuClock {
    pub fn new(mode: ClockMode) -> Self {
        EmuClock::starting_at(mode, Utc::now())
    }

    pub fn starting_at(mode: ClockMode, start: DateTime<Utc>) -> Self {
        EmuClock {
            state: Mutex::new(ClockState {
                mode,
                base: start,
                anchor: Instant::now(),
            }),
        }
    }

    pub fn now(&self) -> DateTime<Utc> {
        let s = self.state.lock().expect("clock lock");
        s.now()
    }

    pub fn mode(&self) -> ClockMode {
        self.state.lock().expect("clock lock").mode
    }

    /// Switches mode without a jump in emulated time.
    pub fn set_mode(&self, mode: ClockMode) {
        let mut s = self.state.lock().expect("clock lock");
        let now = s.now();
        s.base = now;
        s.anchor = Instant::now();
        s.mode = mode;
    }

    /// Moves emulated time forward, in either mode.
    pub fn advance(&self, by: Duration) {
        let mut s = self.state.lock().expect("clock lock");
        let delta = TimeDelta::from_std(by).unwrap_or(TimeDelta::MAX);
        s.base = s.base.checked_add_signed(delta).unwrap_or(s.base);
    }
}

impl ClockState {
    fn now(&self) -> DateTime<Utc> {
        match self.mode {
            ClockMode::Explicit => self.base,
            ClockMode::Auto => {
                let elapsed = TimeDelta::from_std(self.anchor.elapsed()).unwrap_or(TimeDelta::MAX);
                self.base.checked_add_signed(elapsed).unwrap_or(self.base)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_clock_moves_only_when_advanced() {
        let clock = EmuClock::new(ClockMode::Explicit);
        let t0 = clock.now();
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(clock.now(), t0);
        clock.advance(Duration::from_secs(30));
        assert_eq!(clock.now() - t0, TimeDelta::seconds(30));
    }

    #[test]
    fn auto_clock_runs_and_mode_switch_keeps_time() {
        let clock = EmuClock::new(ClockMode::Auto);
        let t0 = clock.now();
        std::thread::sleep(Duration::from_millis(5));
        assert!(clock.now() > t0);
        clock.set_mode(ClockMode::Explicit);
        let frozen = clock.now();
        assert!(frozen > t0);
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(clock.now(), frozen);
    }
}
