//! The supervisor's decisions as pure functions: how long to wait before restarting a slot
//! that exited, and which slot a rolling replacement takes next.
//!
//! Restarts back off exponentially (`initial · 2ⁿ`, capped at `max`) where `n` counts the
//! exits in a row; a process that stayed up for `stable_after` resets the count.
//!
//! A rolling replacement moves a pool's slots to its newest generation one at a time. A slot
//! of an older generation that is down is replaced at once (it serves nobody). A slot that is
//! up is replaced only when every slot already on the newest generation has stayed up for the
//! settle time; so a new generation that crashes stalls the rollout instead of taking the
//! whole pool down.

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
        .any(|s| s.up_for.is_none_or(|up| up < settle));
    if unsettled {
        RolloutStep::Wait
    } else {
        RolloutStep::Replace(outdated[0].slot)
    }
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
        }
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
