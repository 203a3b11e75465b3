//! The one serving-role gate of a provider replica.
//!
//! A replica of a shared resource is either serving (it reads its cloud accounts, answers
//! work and reports inventory) or standing by (it reads nothing). Before the zone has said
//! either, it has no role (`None`). The gate is the only place that role is kept; its
//! transitions answer whether they changed anything, so the caller logs a change once and
//! starts or stops its background work exactly once.

use std::sync::{Mutex, PoisonError};

use orc_common::ReplicaRole;

/// The replica's current role, shared by its tasks.
#[derive(Debug, Default)]
pub struct RoleGate {
    role: Mutex<Option<ReplicaRole>>,
}

impl RoleGate {
    /// A gate with no role yet.
    pub fn new() -> RoleGate {
        RoleGate::default()
    }

    /// The role now; `None` until the zone says or work comes.
    pub fn current(&self) -> Option<ReplicaRole> {
        *self.role.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the replica is serving.
    pub fn is_serving(&self) -> bool {
        self.current() == Some(ReplicaRole::Serving)
    }

    /// Whether the replica is standing by (a replica with no role yet is not).
    pub fn is_standing_by(&self) -> bool {
        self.current() == Some(ReplicaRole::Standby)
    }

    /// Makes the replica serving; `true` when it was not serving before.
    pub fn serve(&self) -> bool {
        self.set(ReplicaRole::Serving)
    }

    /// Makes the replica stand by; `true` when it was not standing by before.
    pub fn stand_by(&self) -> bool {
        self.set(ReplicaRole::Standby)
    }

    fn set(&self, role: ReplicaRole) -> bool {
        let mut current = self.role.lock().unwrap_or_else(PoisonError::into_inner);
        let changed = *current != Some(role);
        *current = Some(role);
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transitions_report_a_change_once() {
        let gate = RoleGate::new();
        assert_eq!(gate.current(), None);
        assert!(!gate.is_serving() && !gate.is_standing_by());
        assert!(gate.serve());
        assert!(!gate.serve(), "serving again changes nothing");
        assert!(gate.is_serving());
        assert!(gate.stand_by());
        assert!(!gate.stand_by());
        assert!(gate.is_standing_by());
        assert!(gate.serve());
    }
}
