//! Rolling a workload to its target revision, one step at a time, as a pure function.
//!
//! The zone calls [`step`] for each workload of an app whenever something may have changed
//! (a deploy, a replica's report, a node gone or drained) and applies what it answers:
//! instances to take over, to remove and to add. The rules, in order:
//! 1. **Take over what need not change.** An instance of an older revision whose workload
//!    is defined the same way in the target (same definition, same image digest) is
//!    relabelled to the target where it runs, without a restart. One on a draining node is
//!    not taken over: it has to move.
//! 2. **Drop what cannot serve.** Instances of an older revision that wait for a node are
//!    removed, and so are the instances of any revision on a node that is gone, unless they
//!    keep a local volume there (then they stay, and the app reports `volume_node_lost`).
//! 3. **Too many of the target** (fewer replicas asked for): the surplus goes, the unready
//!    and the highest slots first.
//! 4. **Old instances go within the budget.** Unready old instances go at once; they serve
//!    nothing. Ready ones go while the ready instances left stay at least
//!    `replicas - maxUnavailable`.
//! 5. **New instances come within the budget:** as many as are missing, while the instances
//!    of all revisions stay at most `replicas + maxSurge`. A workload whose dependencies
//!    have no ready instance starts none (`dependsOn`), unless it already runs.
//!
//! A workload with a local volume rolls with no surge and one unavailable, whatever the app
//! says: its one instance stops before the next starts on the same volume. Every step can
//! be repeated: given what it answered applied, the next call goes on from there, and a
//! settled workload is answered with nothing to do.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// One instance of a workload, as the zone knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instance {
    /// Its slot: unique within the workload, kept for its life.
    pub slot: u32,
    /// The revision it runs.
    pub revision: u64,
    /// Whether it has a node (it may be waiting for one).
    pub placed: bool,
    /// Whether its probe passes.
    pub ready: bool,
    /// Its node is gone: it runs nowhere any more.
    pub node_lost: bool,
    /// Its node is being drained: it moves, within the budget.
    pub draining: bool,
}

/// A workload and everything that runs of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutInput {
    /// The revision to reach.
    pub target: u64,
    /// Replicas the target asks for.
    pub replicas: u32,
    /// Instances allowed above `replicas` while rolling.
    pub max_surge: u32,
    /// Instances allowed below `replicas` while rolling.
    pub max_unavailable: u32,
    /// The workload keeps a local volume.
    pub volume_bound: bool,
    /// Older revisions that define this workload exactly as the target does.
    pub same_as_target: BTreeSet<u64>,
    /// Every workload this one depends on has a ready instance.
    pub dependencies_ready: bool,
    /// What runs or waits now.
    pub instances: Vec<Instance>,
    /// Slots of instances on their way out (draining) that the step does not see: no new
    /// instance takes one until it is gone, since a slot names one instance on its node.
    pub held_slots: BTreeSet<u32>,
}

/// What to do next.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutStep {
    /// Slots relabelled to the target revision where they run.
    pub adopt: Vec<u32>,
    /// Slots to stop and remove.
    pub remove: Vec<u32>,
    /// New slots of the target revision, to be placed.
    pub add: Vec<u32>,
    /// Instances that would start but wait for their dependencies.
    pub waiting_on_dependencies: u32,
}

impl RolloutStep {
    /// Nothing to do.
    pub fn is_empty(&self) -> bool {
        self.adopt.is_empty() && self.remove.is_empty() && self.add.is_empty()
    }
}

/// How far a workload is from its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// Ready instances of the target revision.
    pub ready: u32,
    /// Replicas asked for.
    pub replicas: u32,
    /// Instances of other revisions still there.
    pub old: u32,
}

impl Progress {
    /// Every replica of the target is ready and nothing else runs.
    pub fn settled(&self) -> bool {
        self.ready == self.replicas && self.old == 0
    }
}

/// Where `input` stands, before any step.
pub fn progress(input: &RolloutInput) -> Progress {
    let current = |i: &&Instance| i.revision == input.target && !i.draining;
    let ready = input
        .instances
        .iter()
        .filter(current)
        .filter(|i| i.ready && i.placed && !i.node_lost)
        .count()
        .min(input.replicas as usize) as u32;
    let target = input.instances.iter().filter(current).count();
    let old = input.instances.len() - target + target.saturating_sub(input.replicas as usize);
    Progress {
        ready,
        replicas: input.replicas,
        old: old as u32,
    }
}

/// An instance that answers where it runs.
fn serving(instance: &Instance) -> bool {
    instance.ready && instance.placed && !instance.node_lost
}

/// The next step of `input`'s rollout.
pub fn step(input: &RolloutInput) -> RolloutStep {
    let (max_surge, max_unavailable) = if input.volume_bound {
        (0, 1)
    } else {
        (input.max_surge, input.max_unavailable)
    };
    let wanted = input.replicas as usize;
    let mut out = RolloutStep::default();
    let mut new: Vec<&Instance> = Vec::new();
    let mut old: Vec<&Instance> = Vec::new();

    // 1 and 2.
    for instance in &input.instances {
        let lost = instance.node_lost && !input.volume_bound;
        let is_target = instance.revision == input.target;
        if lost || (!is_target && !instance.placed) {
            out.remove.push(instance.slot);
        } else if instance.draining && !input.volume_bound {
            old.push(instance);
        } else if is_target {
            new.push(instance);
        } else if input.same_as_target.contains(&instance.revision) && !instance.node_lost {
            out.adopt.push(instance.slot);
            new.push(instance);
        } else {
            old.push(instance);
        }
    }

    // 3. The surplus of the target: unready first, then the highest slots.
    if new.len() > wanted {
        new.sort_by_key(|i| (serving(i), std::cmp::Reverse(i.slot)));
        let surplus = new.len() - wanted;
        for instance in new.drain(..surplus) {
            out.remove.push(instance.slot);
            out.adopt.retain(|s| *s != instance.slot);
        }
    }

    // 4. Old instances: the unready at once, the ready within maxUnavailable.
    let (old_ready, old_unready): (Vec<&Instance>, Vec<&Instance>) =
        old.into_iter().partition(|i| serving(i));
    for instance in &old_unready {
        if !(instance.node_lost && input.volume_bound) {
            out.remove.push(instance.slot);
        }
    }
    let kept_unready = old_unready
        .iter()
        .filter(|i| i.node_lost && input.volume_bound)
        .count();
    let ready_new = new.iter().filter(|i| serving(i)).count();
    let ready_total = ready_new + old_ready.len();
    let floor = wanted.saturating_sub(max_unavailable as usize);
    let removable = ready_total.saturating_sub(floor).min(old_ready.len());
    // Drained instances first, then the oldest revisions, then the highest slots.
    let mut old_ready = old_ready;
    old_ready.sort_by_key(|i| (!i.draining, i.revision, std::cmp::Reverse(i.slot)));
    for instance in &old_ready[..removable] {
        out.remove.push(instance.slot);
    }
    let old_left = old_ready.len() - removable + kept_unready;

    // 5. New instances within maxSurge, once dependencies are ready.
    let total = new.len() + old_left;
    let missing = wanted.saturating_sub(new.len());
    let room = (wanted + max_surge as usize).saturating_sub(total);
    let mut add = missing.min(room);
    let runs = input.instances.iter().any(|i| i.placed);
    if add > 0 && !input.dependencies_ready && !runs {
        out.waiting_on_dependencies = add as u32;
        add = 0;
    }
    let used: BTreeSet<u32> = input
        .instances
        .iter()
        .map(|i| i.slot)
        .chain(input.held_slots.iter().copied())
        .collect();
    out.add = (0..).filter(|s| !used.contains(s)).take(add).collect();
    out.remove.sort_unstable();
    out.adopt.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(slot: u32, revision: u64, ready: bool) -> Instance {
        Instance {
            slot,
            revision,
            placed: true,
            ready,
            node_lost: false,
            draining: false,
        }
    }

    fn input(
        replicas: u32,
        surge: u32,
        unavailable: u32,
        instances: Vec<Instance>,
    ) -> RolloutInput {
        RolloutInput {
            target: 2,
            replicas,
            max_surge: surge,
            max_unavailable: unavailable,
            volume_bound: false,
            same_as_target: BTreeSet::new(),
            dependencies_ready: true,
            instances,
            held_slots: BTreeSet::new(),
        }
    }

    /// Applies `step` to `input` as the zone would: removals go, adoptions relabel, additions
    /// are placed and, when `become_ready`, turn ready before the next step.
    fn apply(input: &mut RolloutInput, step: &RolloutStep, become_ready: bool) {
        input.instances.retain(|i| !step.remove.contains(&i.slot));
        for i in &mut input.instances {
            if step.adopt.contains(&i.slot) {
                i.revision = input.target;
            }
            if i.revision == input.target && become_ready {
                i.ready = true;
            }
        }
        for slot in &step.add {
            input.instances.push(instance(*slot, input.target, false));
        }
    }

    /// Runs a rollout to its end, checking the budget after every step.
    fn roll(mut input: RolloutInput) -> (RolloutInput, usize) {
        let wanted = input.replicas as usize;
        for round in 0..50 {
            let step = step(&input);
            if step.is_empty() && progress(&input).settled() {
                return (input, round);
            }
            // The step itself stays within the budget: at most replicas + surge instances,
            // and at least replicas - unavailable of them ready (counted before new ones
            // turn ready).
            let mut after = input.clone();
            apply(&mut after, &step, false);
            assert!(
                after.instances.len() <= wanted + input.max_surge as usize,
                "round {round}: {} instances after {step:?}",
                after.instances.len()
            );
            let ready = after.instances.iter().filter(|i| i.ready).count();
            assert!(
                ready + input.max_unavailable as usize >= wanted,
                "round {round}: {ready} ready after {step:?}"
            );
            apply(&mut input, &step, true);
        }
        panic!("the rollout did not settle: {input:?}");
    }

    #[test]
    fn a_surge_rollout_never_drops_below_the_replicas() {
        let start = input(3, 1, 0, (0..3).map(|s| instance(s, 1, true)).collect());
        let (end, steps) = roll(start);
        assert_eq!(end.instances.len(), 3);
        assert!(end.instances.iter().all(|i| i.revision == 2 && i.ready));
        assert!(steps >= 3, "one at a time: {steps}");
    }

    #[test]
    fn an_unavailable_rollout_never_runs_more_than_the_replicas() {
        let start = input(4, 0, 2, (0..4).map(|s| instance(s, 1, true)).collect());
        let (end, _) = roll(start);
        assert_eq!(end.instances.len(), 4);
        assert!(end.instances.iter().all(|i| i.revision == 2));
    }

    #[test]
    fn wide_budgets_roll_in_fewer_steps() {
        let (_, narrow) = roll(input(
            6,
            1,
            0,
            (0..6).map(|s| instance(s, 1, true)).collect(),
        ));
        let (_, wide) = roll(input(
            6,
            3,
            3,
            (0..6).map(|s| instance(s, 1, true)).collect(),
        ));
        assert!(
            wide < narrow,
            "{wide} steps with wide budgets, {narrow} with narrow ones"
        );
    }

    #[test]
    fn the_first_step_adds_within_the_surge_and_removes_nothing_ready() {
        let start = input(3, 1, 0, (0..3).map(|s| instance(s, 1, true)).collect());
        let step = step(&start);
        assert_eq!(step.add, vec![3]);
        assert!(step.remove.is_empty());
    }

    #[test]
    fn an_unchanged_workload_is_taken_over_without_a_restart() {
        let mut start = input(2, 1, 0, vec![instance(0, 1, true), instance(1, 1, true)]);
        start.same_as_target.insert(1);
        let step = step(&start);
        assert_eq!(step.adopt, vec![0, 1]);
        assert!(step.remove.is_empty() && step.add.is_empty());
    }

    #[test]
    fn a_first_deploy_starts_every_replica_at_once() {
        let step = step(&input(3, 1, 0, Vec::new()));
        assert_eq!(step.add, vec![0, 1, 2]);
    }

    #[test]
    fn a_draining_instances_slot_is_not_taken_until_it_is_gone() {
        // Slot 0 drains, out of sight; the surge replica takes slot 3, not 0.
        let mut held = input(
            3,
            1,
            0,
            vec![
                instance(1, 1, true),
                instance(2, 1, true),
                instance(4, 2, true),
            ],
        );
        held.held_slots = BTreeSet::from([0, 3]);
        let step = step(&held);
        assert_eq!(step.add, vec![5], "{step:?}");
        held.held_slots.clear();
        assert_eq!(super::step(&held).add, vec![0]);
    }

    #[test]
    fn unready_old_instances_go_at_once_and_free_their_slots_only_next_time() {
        let start = input(2, 1, 0, vec![instance(0, 1, false), instance(1, 1, false)]);
        let step = step(&start);
        assert_eq!(step.remove, vec![0, 1]);
        assert_eq!(
            step.add,
            vec![2, 3],
            "slots freed in this step are not reused in it"
        );
    }

    #[test]
    fn instances_on_a_lost_node_are_replaced_but_a_volume_stays() {
        let mut lost = instance(1, 2, true);
        lost.node_lost = true;
        let start = input(2, 1, 0, vec![instance(0, 2, true), lost.clone()]);
        let step = step(&start);
        assert_eq!(step.remove, vec![1]);
        assert_eq!(step.add, vec![2]);

        let mut bound = input(1, 1, 0, vec![Instance { slot: 0, ..lost }]);
        bound.volume_bound = true;
        let step = super::step(&bound);
        assert!(step.is_empty(), "{step:?}");
        assert!(!progress(&bound).settled());
    }

    #[test]
    fn a_volume_bound_workload_stops_before_it_starts_again() {
        let mut start = input(1, 3, 0, vec![instance(0, 1, true)]);
        start.volume_bound = true;
        let step = step(&start);
        assert_eq!(step.remove, vec![0]);
        assert_eq!(step.add, vec![1]);
    }

    #[test]
    fn a_drained_instance_moves_within_the_budget() {
        let mut draining = instance(0, 2, true);
        draining.draining = true;
        let start = input(2, 1, 0, vec![draining, instance(1, 2, true)]);
        let first = step(&start);
        assert!(
            first.remove.is_empty(),
            "the replacement comes first: {first:?}"
        );
        assert_eq!(first.add, vec![2]);
        let mut next = start.clone();
        apply(&mut next, &first, true);
        next.instances.iter_mut().for_each(|i| i.ready = true);
        let second = step(&next);
        assert_eq!(second.remove, vec![0]);
        assert!(second.add.is_empty());
    }

    #[test]
    fn fewer_replicas_remove_the_unready_and_highest_first() {
        let start = input(
            2,
            1,
            0,
            vec![
                instance(0, 2, true),
                instance(1, 2, false),
                instance(2, 2, true),
                instance(3, 2, true),
            ],
        );
        let step = step(&start);
        assert_eq!(step.remove, vec![1, 3]);
    }

    #[test]
    fn dependencies_hold_back_a_first_start_but_not_an_update() {
        let mut start = input(2, 1, 0, Vec::new());
        start.dependencies_ready = false;
        let waiting = step(&start);
        assert!(waiting.add.is_empty());
        assert_eq!(waiting.waiting_on_dependencies, 2);

        let mut update = input(1, 1, 0, vec![instance(0, 1, true)]);
        update.dependencies_ready = false;
        assert_eq!(step(&update).add, vec![1]);
    }

    #[test]
    fn old_instances_waiting_for_a_node_are_dropped() {
        let mut waiting = instance(0, 1, false);
        waiting.placed = false;
        let step = step(&input(1, 1, 0, vec![waiting]));
        assert_eq!(step.remove, vec![0]);
        assert_eq!(step.add, vec![1]);
    }
}
