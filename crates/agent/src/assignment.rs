//! What the zone assigns this node, kind by kind. Each kind arrives in the stream's config
//! message under the config's one generation, is applied here before the generation is
//! acknowledged, and reports what it sees back on a tick of its own.
//!
//! Today there is one kind, the mesh ([`MeshAssignment`]). A second kind (the node's
//! workloads) sits beside it in [`Assignments`], with the same three steps: take its part of
//! a config (whole, or changes to the one received last on this stream), apply it, and
//! report its state when it changed.

use std::time::Duration;

use orc_proto::agent_pb;
use tokio::time::{Interval, MissedTickBehavior};

use crate::mesh::Mesh;

/// How often the agent looks at its mesh interfaces and reports them to the zone when
/// anything changed (a handshake, traffic, a peer).
const MESH_STATUS_INTERVAL: Duration = Duration::from_secs(10);

/// Every kind of assignment, as one stream keeps them.
#[derive(Debug)]
pub(crate) struct Assignments {
    pub(crate) mesh: MeshAssignment,
}

impl Assignments {
    /// A stream's assignments, starting from the config generation applied before it.
    pub(crate) fn new(applied_generation: u64) -> Self {
        Assignments {
            mesh: MeshAssignment::new(applied_generation),
        }
    }
}

/// Why a kind could not take its part of a config.
#[derive(Debug)]
pub(crate) enum NotApplied {
    /// The config's changes do not follow what this stream received last: the stream is
    /// out of step and starts again.
    OutOfStep(String),
    /// The part could not be applied; the error goes back with the generation.
    Failed(String),
}

/// The mesh, as the zone assigns it on one stream.
#[derive(Debug)]
pub(crate) struct MeshAssignment {
    /// The config generation whose mesh is applied.
    applied: u64,
    /// The generation and mesh received last on this stream: what the zone's changes apply
    /// to.
    received: Option<(u64, orc_mesh::MeshConfig)>,
    /// The status sent last, so an unchanged one is not sent again.
    reported: Option<agent_pb::MeshStatus>,
    tick: Interval,
}

impl MeshAssignment {
    fn new(applied_generation: u64) -> Self {
        let mut tick = tokio::time::interval(MESH_STATUS_INTERVAL);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        MeshAssignment {
            applied: applied_generation,
            received: None,
            reported: None,
            tick,
        }
    }

    /// Takes the mesh of `config` (whole, or changes to the one received last, which it
    /// replaces) and applies it to `mesh` when the mesh runs.
    pub(crate) async fn apply(
        &mut self,
        mesh: Option<&mut Mesh>,
        config: &agent_pb::Config,
    ) -> Result<(), NotApplied> {
        let wanted = match (&config.mesh_changes, &config.mesh) {
            (Some(changes), _) => match self.received.take() {
                Some((base, old)) if base == changes.base_generation => {
                    orc_mesh::MeshChanges::try_from(changes)
                        .map_err(|e| e.to_string())
                        .and_then(|c| c.apply(&old).map_err(|e| e.to_string()))
                }
                last => {
                    return Err(NotApplied::OutOfStep(format!(
                        "config generation {} changes generation {}, but the config received \
                         last on this stream is {}",
                        config.generation,
                        changes.base_generation,
                        last.map_or_else(|| "none".to_string(), |(g, _)| g.to_string())
                    )));
                }
            },
            (None, Some(wire)) => orc_mesh::MeshConfig::try_from(wire).map_err(|e| e.to_string()),
            (None, None) => Ok(orc_mesh::MeshConfig::default()),
        };
        if let Ok(wanted) = &wanted {
            self.received = Some((config.generation, wanted.clone()));
        }
        match (mesh, wanted) {
            (Some(mesh), Ok(wanted)) => mesh
                .apply(&wanted)
                .await
                .map_err(|e| NotApplied::Failed(e.to_string())),
            (Some(_), Err(e)) => Err(NotApplied::Failed(e)),
            (None, _) => Ok(()),
        }
    }

    /// The whole config of `generation` was applied: the status reports it, and goes out at
    /// once.
    pub(crate) fn applied(&mut self, generation: u64) {
        self.applied = generation;
        self.tick.reset_immediately();
    }

    /// Waits for the next look at the interfaces.
    pub(crate) async fn tick(&mut self) {
        self.tick.tick().await;
    }

    /// What the mesh's interfaces see now, when it differs from what was sent last; `None`
    /// when nothing changed or the mesh does not run.
    pub(crate) fn report(&mut self, mesh: Option<&Mesh>) -> Option<agent_pb::MeshStatus> {
        let status = status(mesh?, self.applied);
        if self.reported.as_ref() == Some(&status) {
            return None;
        }
        self.reported = Some(status.clone());
        Some(status)
    }
}

/// What `mesh`'s interfaces see now, for the config `generation` applied.
fn status(mesh: &Mesh, generation: u64) -> agent_pb::MeshStatus {
    let interfaces = mesh
        .stats()
        .into_iter()
        .map(|(name, mut peers)| {
            peers.sort_by_key(|p| p.public_key);
            agent_pb::InterfaceStatus {
                name,
                peers: peers
                    .into_iter()
                    .map(|p| agent_pb::PeerStatus {
                        public_key: p.public_key.to_vec(),
                        last_handshake: p
                            .last_handshake
                            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                            .map_or(0, |d| d.as_secs().max(1)),
                        rx_bytes: p.rx_bytes,
                        tx_bytes: p.tx_bytes,
                    })
                    .collect(),
            }
        })
        .collect();
    agent_pb::MeshStatus {
        applied_generation: generation,
        interfaces,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(generation: u64, changes_from: Option<u64>) -> agent_pb::Config {
        agent_pb::Config {
            generation,
            mesh: changes_from
                .is_none()
                .then(|| (&orc_mesh::MeshConfig::default()).into()),
            mesh_changes: changes_from.map(|base| agent_pb::MeshChanges {
                base_generation: base,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn changes_apply_only_to_the_config_received_last_on_the_stream() {
        let mut assigned = Assignments::new(0);
        // Changes before any whole config: out of step.
        let first = assigned.mesh.apply(None, &config(4, Some(3))).await;
        assert!(
            matches!(&first, Err(NotApplied::OutOfStep(e)) if e.contains("received last on this stream is none")),
            "{first:?}"
        );
        assigned.mesh.apply(None, &config(5, None)).await.unwrap();
        assigned
            .mesh
            .apply(None, &config(6, Some(5)))
            .await
            .unwrap();
        let skipped = assigned.mesh.apply(None, &config(8, Some(7))).await;
        assert!(
            matches!(&skipped, Err(NotApplied::OutOfStep(e)) if e.contains("last on this stream is 6")),
            "{skipped:?}"
        );
    }

    #[tokio::test]
    async fn without_a_running_mesh_there_is_nothing_to_report() {
        let mut assigned = Assignments::new(3);
        assigned.mesh.applied(4);
        assert_eq!(assigned.mesh.report(None), None);
    }
}
