//! The supervisor's decisions as pure functions: how long to wait before restarting a slot
//! that exited, and which slot a rolling replacement takes next.
//!
//! Restarts back off exponentially (`initial · 2ⁿ`, capped at `max`) where `n` counts the
//! exits in a row; a process that stayed up for `stable_after` resets the count.
//!
//! A rolling replacement moves a pool's slots to its newest generation one at a time. A slot
//! of an older generation that is down is replaced at once (it serves nobody). A slot that is
//! up is replaced only when every slot already on the newest generation is ready: for a pool
//! whose slots register with the zone as provider replicas, ready means its process has
//! registered and taken its role (serving or standing by); for any other app, that it has
//! stayed up for the settle time. So a new generation that crashes, or never registers,
//! stalls the rollout instead of taking the whole pool down. Of the slots still to replace,
//! standbys go before the serving replica, so the resource changes hands once.

use std::time::Duration;

/// When a slot that exited is started again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    /// Delay after the first exit.
    pub initial: Duration,
    /// The longest delay.
    pub max: Duration,
    /// A process up at least this long counts as healthy: the next exit starts over.
    pub stable_after: Duration,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(60),
            stable_after: Duration::from_secs(60),
        }
    }
}

impl RestartPolicy {
    /// Exits in a row after an exit of a process that ran for `ran_for`, given the count
    /// before it.
    pub fn exits_in_a_row(&self, before: u32, ran_for: Duration) -> u32 {
        if ran_for >= self.stable_after {
            1
        } else {
            before.saturating_add(1)
        }
    }

    /// The wait before the next start after `exits_in_a_row` exits (at least 1).
    pub fn delay(&self, exits_in_a_row: u32) -> Duration {
        let doublings = exits_in_a_row.saturating_sub(1).min(32);
        let factor = 1u64 << doublings;
        let nanos = self.initial.as_nanos().saturating_mul(u128::from(factor));
        let max = self.max.as_nanos();
        let capped = nanos.min(max).min(u128::from(u64::MAX));
        Duration::from_nanos(u64::try_from(capped).unwrap_or(u64::MAX))
    }
}

/// What the rollout planner knows of one slot of a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotView {
    pub slot: u32,
    /// The pool generation the slot's process was started with.
    pub generation: u64,
    /// How long the current process has been up; `None` while it is not running.
    pub up_for: Option<Duration>,
    /// For a pool whose slots register with the zone: how the current process is
    /// registered. `None` for a pool whose slots do not register.
    pub registered: Option<Registered>,
}

/// Whether a slot's current process is attached to the zone as a provider replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registered {
    /// Not (yet) attached.
    No,
    /// Attached, standing by.
    Standby,
    /// Attached, serving.
    Serving,
}

impl SlotView {
    /// Whether a slot of the newest generation is ready for the next slot to be replaced.
    fn ready(&self, settle: Duration) -> bool {
        match (self.up_for, self.registered) {
            (None, _) => false,
            (Some(_), Some(registered)) => registered != Registered::No,
            (Some(up), None) => up >= settle,
        }
    }
}

/// The next step of a pool's rolling replacement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RolloutStep {
    /// Every slot runs the newest generation.
    Done,
    /// A slot on the newest generation has not settled yet; look again later.
    Wait,
    /// Replace this slot with the newest generation now.
    Replace(u32),
}

/// Picks the next slot to move to generation `target`.
pub fn next_rollout_step(target: u64, slots: &[SlotView], settle: Duration) -> RolloutStep {
    let mut outdated: Vec<&SlotView> = slots.iter().filter(|s| s.generation < target).collect();
    if outdated.is_empty() {
        return RolloutStep::Done;
    }
    outdated.sort_by_key(|s| s.slot);
    if let Some(down) = outdated.iter().find(|s| s.up_for.is_none()) {
        return RolloutStep::Replace(down.slot);
    }
    let unsettled = slots
        .iter()
        .filter(|s| s.generation >= target)
        .any(|s| !s.ready(settle));
    if unsettled {
        return RolloutStep::Wait;
    }
    let next = outdated
        .iter()
        .find(|s| s.registered != Some(Registered::Serving))
        .unwrap_or(&outdated[0]);
    RolloutStep::Replace(next.slot)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn restart_delay_doubles_up_to_the_cap_and_resets_when_stable() {
        let policy = RestartPolicy {
            initial: S,
            max: Duration::from_secs(10),
            stable_after: Duration::from_secs(30),
        };
        let delays: Vec<u64> = (1..=6).map(|n| policy.delay(n).as_secs()).collect();
        assert_eq!(delays, vec![1, 2, 4, 8, 10, 10]);
        assert_eq!(policy.delay(u32::MAX), Duration::from_secs(10));
        assert_eq!(policy.exits_in_a_row(4, S), 5);
        assert_eq!(policy.exits_in_a_row(4, Duration::from_secs(30)), 1);
    }

    fn view(slot: u32, generation: u64, up_secs: Option<u64>) -> SlotView {
        SlotView {
            slot,
            generation,
            up_for: up_secs.map(Duration::from_secs),
            registered: None,
        }
    }

    fn replica(slot: u32, generation: u64, registered: Registered) -> SlotView {
        SlotView {
            registered: Some(registered),
            ..view(slot, generation, Some(1))
        }
    }

    #[test]
    fn a_registering_pool_waits_for_the_new_replica_to_take_its_role_and_replaces_the_serving_one_last()
     {
        let settle = Duration::from_secs(5);
        use Registered::{No, Serving, Standby};
        // Slot 0 serves: the standby (slot 1) goes first.
        let all_old = [replica(0, 1, Serving), replica(1, 1, Standby)];
        assert_eq!(
            next_rollout_step(2, &all_old, settle),
            RolloutStep::Replace(1)
        );
        // Up long past the settle time but not attached yet: wait.
        let started = [
            replica(0, 1, Serving),
            SlotView {
                up_for: Some(Duration::from_secs(600)),
                ..replica(1, 2, No)
            },
        ];
        assert_eq!(next_rollout_step(2, &started, settle), RolloutStep::Wait);
        // Attached and standing by a moment after it started: the serving one goes.
        let attached = [replica(0, 1, Serving), replica(1, 2, Standby)];
        assert_eq!(
            next_rollout_step(2, &attached, settle),
            RolloutStep::Replace(0)
        );
        let done = [replica(0, 2, Standby), replica(1, 2, Serving)];
        assert_eq!(next_rollout_step(2, &done, settle), RolloutStep::Done);
    }

    #[test]
    fn rollout_replaces_one_slot_at_a_time_after_settling() {
        let settle = Duration::from_secs(5);
        let all_old = [view(0, 1, Some(100)), view(1, 1, Some(100))];
        assert_eq!(
            next_rollout_step(2, &all_old, settle),
            RolloutStep::Replace(0)
        );
        let first_new = [view(0, 2, Some(1)), view(1, 1, Some(100))];
        assert_eq!(next_rollout_step(2, &first_new, settle), RolloutStep::Wait);
        let first_down = [view(0, 2, None), view(1, 1, Some(100))];
        assert_eq!(next_rollout_step(2, &first_down, settle), RolloutStep::Wait);
        let settled = [view(0, 2, Some(5)), view(1, 1, Some(100))];
        assert_eq!(
            next_rollout_step(2, &settled, settle),
            RolloutStep::Replace(1)
        );
        let done = [view(0, 2, Some(9)), view(1, 2, Some(1))];
        assert_eq!(next_rollout_step(2, &done, settle), RolloutStep::Done);
    }

    #[test]
    fn outdated_slots_that_are_down_go_first_and_at_once() {
        let settle = Duration::from_secs(5);
        let slots = [view(0, 2, Some(1)), view(1, 1, Some(50)), view(2, 1, None)];
        assert_eq!(
            next_rollout_step(2, &slots, settle),
            RolloutStep::Replace(2)
        );
    }
}
