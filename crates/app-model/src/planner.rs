//! Placement: which node runs each replica, as a pure function of the project's nodes, what
//! they already hold, and the workloads to place.
//!
//! The rules, in order:
//! 1. A node is eligible for a workload when it is ready, not cordoned, and has every label
//!    the workload's constraints name, with the same value.
//! 2. A workload with a local volume runs where its volume lives. If that node is gone, the
//!    workload is blocked with `volume_node_lost` and nothing runs elsewhere; if the node is
//!    only cordoned, it stays (a drain does not move data).
//! 3. A replica that already runs on a node that still has its labels and still fits stays
//!    there, cordoned or not, so a new plan moves nothing that need not move (a drain moves
//!    replicas by leaving them out of `current`).
//! 4. Every other replica goes to the eligible node with room that runs the fewest replicas
//!    of the same workload (spread), then the one with the most CPU and memory free, then
//!    by name, so the same input always gives the same plan.
//! 5. A replica that publishes node ports (`tcp/25565`) goes only to a node where no other
//!    replica, of any app, holds one of them: one per node per port. When no node is left,
//!    the workload is blocked with `node_port_in_use`.
//!
//! A workload that cannot place all its replicas is reported blocked with why; the replicas
//! that did fit are in the plan, and the caller decides whether a partial placement is
//! acceptable (a new deployment is not applied at all; a lost node's replicas move where
//! they can).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// The labels the zone sets on every node, which constraints may ask for: the node's pool,
/// its site (where the provider has sites) and its pool's region class.
pub const ZONE_LABELS: [&str; 3] = ["orc.pool", "orc.site", "orc.class"];

use serde::{Deserialize, Serialize};

/// A node the planner may use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanNode {
    /// Its name.
    pub name: String,
    /// Its labels: the zone's (`orc.pool`, `orc.site`, `orc.class`) and the operator's.
    pub labels: BTreeMap<String, String>,
    /// CPU it can give workloads, in millicores.
    pub cpu_millis: u64,
    /// Memory it can give workloads, in bytes.
    pub memory_bytes: u64,
    /// Cordoned: runs what it runs, takes nothing new.
    pub cordoned: bool,
}

/// Where a workload's local volume lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state", content = "node")]
pub enum VolumeHome {
    /// The workload has no local volume.
    NoVolume,
    /// It has one that is not on any node yet: the first placement decides.
    Unbound,
    /// It lives on this node.
    On(String),
}

/// A workload to place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanWorkload {
    /// Its key, unique in the plan, e.g. `shop/web`.
    pub key: String,
    /// How many replicas.
    pub replicas: u32,
    /// Each replica's CPU, in millicores.
    pub cpu_millis: u64,
    /// Each replica's memory, in bytes.
    pub memory_bytes: u64,
    /// Labels a node must have.
    pub constraints: BTreeMap<String, String>,
    /// Its local volume.
    pub volume: VolumeHome,
    /// The node each replica runs on now, by replica index, if it runs.
    pub current: Vec<Option<String>>,
    /// The node ports each replica publishes (`tcp/25565`, `udp/3478`).
    #[serde(default)]
    pub ports: Vec<String>,
}

/// Why a workload could not place every replica.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "reason")]
pub enum BlockReason {
    /// The project has no ready node.
    NoNodes,
    /// No ready node has every label the workload requires.
    LabelMismatch {
        /// The labels asked for.
        constraints: BTreeMap<String, String>,
    },
    /// Eligible nodes exist but have too little CPU or memory left.
    MissingCapacity {
        /// Replicas that fit.
        placed: u32,
        /// Replicas asked for.
        wanted: u32,
    },
    /// The node that holds the workload's local volume is gone.
    VolumeNodeLost {
        /// That node.
        node: String,
    },
    /// Eligible nodes with room exist, but another replica holds a node port it publishes
    /// on each of them.
    NodePortInUse {
        /// The ports it publishes.
        ports: Vec<String>,
        /// Replicas that found a node.
        placed: u32,
        /// Replicas asked for.
        wanted: u32,
    },
}

impl BlockReason {
    /// The reason's code, as `orc app status` and the API show it.
    pub fn code(&self) -> &'static str {
        match self {
            BlockReason::NoNodes => "no_nodes",
            BlockReason::LabelMismatch { .. } => "label_mismatch",
            BlockReason::MissingCapacity { .. } => "missing_capacity",
            BlockReason::VolumeNodeLost { .. } => "volume_node_lost",
            BlockReason::NodePortInUse { .. } => "node_port_in_use",
        }
    }
}

impl fmt::Display for BlockReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BlockReason::NoNodes => write!(f, "no_nodes: the project has no ready node"),
            BlockReason::LabelMismatch { constraints } => {
                let wanted: Vec<String> = constraints
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                write!(f, "label_mismatch: no ready node has {}", wanted.join(", "))
            }
            BlockReason::MissingCapacity { placed, wanted } => write!(
                f,
                "missing_capacity: {placed} of {wanted} replicas fit on the eligible nodes"
            ),
            BlockReason::VolumeNodeLost { node } => write!(
                f,
                "volume_node_lost: its local volume is on {node}, which is gone"
            ),
            BlockReason::NodePortInUse {
                ports,
                placed,
                wanted,
            } => write!(
                f,
                "node_port_in_use: {placed} of {wanted} replicas found a node where {} is free",
                ports.join(" and ")
            ),
        }
    }
}

/// The planner's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// The node of each replica that has one, by workload key and replica index.
    pub placements: BTreeMap<String, Vec<Option<String>>>,
    /// Workloads that could not place every replica.
    pub blocked: BTreeMap<String, BlockReason>,
}

impl Plan {
    /// Whether every replica of every workload has a node.
    pub fn is_complete(&self) -> bool {
        self.blocked.is_empty()
    }
}

/// What the planner places into: nodes and what they already give to others.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanInput {
    /// The project's ready nodes.
    pub nodes: Vec<PlanNode>,
    /// CPU and memory already taken on each node by workloads outside this plan.
    pub taken: BTreeMap<String, (u64, u64)>,
    /// Node ports already held on each node by replicas outside this plan.
    #[serde(default)]
    pub ports_taken: BTreeMap<String, BTreeSet<String>>,
    /// What to place, in order of priority.
    pub workloads: Vec<PlanWorkload>,
}

struct Room {
    cpu: u64,
    memory: u64,
    ports: BTreeSet<String>,
}

/// Places every workload of `input`.
pub fn plan(input: &PlanInput) -> Plan {
    let index: BTreeMap<&str, usize> = input
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    let mut room: Vec<Room> = input
        .nodes
        .iter()
        .map(|node| {
            let (cpu, memory) = input.taken.get(&node.name).copied().unwrap_or((0, 0));
            Room {
                cpu: node.cpu_millis.saturating_sub(cpu),
                memory: node.memory_bytes.saturating_sub(memory),
                ports: input
                    .ports_taken
                    .get(&node.name)
                    .cloned()
                    .unwrap_or_default(),
            }
        })
        .collect();
    let mut out = Plan::default();
    // Replicas that stay where they are take their room first, so a replica that must
    // move cannot take the place of one that need not.
    let mut kept: Vec<Vec<Option<usize>>> = Vec::with_capacity(input.workloads.len());
    for workload in &input.workloads {
        let mut slots = vec![None; workload.replicas as usize];
        for (replica, node) in workload.current.iter().enumerate().take(slots.len()) {
            let Some(&i) = node.as_deref().and_then(|n| index.get(n)) else {
                continue;
            };
            let node = &input.nodes[i];
            // A cordon stops new placement, not what runs.
            let eligible = matches_labels(node, workload);
            let volume_ok = match &workload.volume {
                VolumeHome::On(home) => *home == node.name,
                VolumeHome::NoVolume | VolumeHome::Unbound => true,
            };
            if eligible && volume_ok && fits(&room[i], workload) {
                take(&mut room[i], workload);
                slots[replica] = Some(i);
            }
        }
        kept.push(slots);
    }
    for (workload, mut slots) in input.workloads.iter().zip(kept) {
        let blocked = place(input, &index, &mut room, workload, &mut slots);
        out.placements.insert(
            workload.key.clone(),
            slots
                .iter()
                .map(|slot| slot.map(|i| input.nodes[i].name.clone()))
                .collect(),
        );
        if let Some(reason) = blocked {
            out.blocked.insert(workload.key.clone(), reason);
        }
    }
    out
}

fn place(
    input: &PlanInput,
    index: &BTreeMap<&str, usize>,
    room: &mut [Room],
    workload: &PlanWorkload,
    slots: &mut [Option<usize>],
) -> Option<BlockReason> {
    let wanted = slots.len() as u32;
    if slots.iter().all(Option::is_some) {
        return None;
    }
    if input.nodes.is_empty() {
        return Some(BlockReason::NoNodes);
    }
    let candidates: Vec<usize> = match &workload.volume {
        VolumeHome::On(home) => match index.get(home.as_str()) {
            Some(&i) if matches_labels(&input.nodes[i], workload) => vec![i],
            Some(_) => Vec::new(),
            None => {
                return Some(BlockReason::VolumeNodeLost { node: home.clone() });
            }
        },
        VolumeHome::NoVolume | VolumeHome::Unbound => (0..input.nodes.len())
            .filter(|&i| !input.nodes[i].cordoned && matches_labels(&input.nodes[i], workload))
            .collect(),
    };
    if candidates.is_empty() {
        return Some(BlockReason::LabelMismatch {
            constraints: workload.constraints.clone(),
        });
    }
    // Replicas of this workload on each candidate, by position in `candidates`.
    let mut count = vec![0u32; candidates.len()];
    for i in slots.iter().flatten() {
        if let Some(at) = candidates.iter().position(|c| c == i) {
            count[at] += 1;
        }
    }
    let mut ports_in_the_way = false;
    for slot in slots.iter_mut().filter(|slot| slot.is_none()) {
        let mut best: Option<(usize, u32, f64)> = None;
        for (at, &i) in candidates.iter().enumerate() {
            if !fits_resources(&room[i], workload) {
                continue;
            }
            if !ports_free(&room[i], workload) {
                ports_in_the_way = true;
                continue;
            }
            let share = free_share(&room[i], &input.nodes[i]);
            let better = match best {
                None => true,
                Some((b, b_count, b_share)) => (count[at], -share, &input.nodes[i].name)
                    .partial_cmp(&(b_count, -b_share, &input.nodes[candidates[b]].name))
                    .is_some_and(|o| o.is_lt()),
            };
            if better {
                best = Some((at, count[at], share));
            }
        }
        let Some((at, _, _)) = best else { break };
        let i = candidates[at];
        take(&mut room[i], workload);
        count[at] += 1;
        *slot = Some(i);
    }
    let placed = slots.iter().filter(|s| s.is_some()).count() as u32;
    if placed == wanted {
        None
    } else if ports_in_the_way {
        Some(BlockReason::NodePortInUse {
            ports: workload.ports.clone(),
            placed,
            wanted,
        })
    } else {
        Some(BlockReason::MissingCapacity { placed, wanted })
    }
}

fn matches_labels(node: &PlanNode, workload: &PlanWorkload) -> bool {
    workload
        .constraints
        .iter()
        .all(|(key, value)| node.labels.get(key) == Some(value))
}

fn fits(room: &Room, workload: &PlanWorkload) -> bool {
    fits_resources(room, workload) && ports_free(room, workload)
}

fn fits_resources(room: &Room, workload: &PlanWorkload) -> bool {
    room.cpu >= workload.cpu_millis && room.memory >= workload.memory_bytes
}

fn ports_free(room: &Room, workload: &PlanWorkload) -> bool {
    workload.ports.iter().all(|p| !room.ports.contains(p))
}

fn take(room: &mut Room, workload: &PlanWorkload) {
    room.cpu -= workload.cpu_millis;
    room.memory -= workload.memory_bytes;
    room.ports.extend(workload.ports.iter().cloned());
}

/// The smaller of the free CPU and memory shares: how much room the tighter one has.
fn free_share(room: &Room, node: &PlanNode) -> f64 {
    let cpu = room.cpu as f64 / node.cpu_millis.max(1) as f64;
    let memory = room.memory as f64 / node.memory_bytes.max(1) as f64;
    cpu.min(memory)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GI: u64 = 1 << 30;

    fn node(name: &str, cpu: u64, memory: u64, labels: &[(&str, &str)]) -> PlanNode {
        PlanNode {
            name: name.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            cpu_millis: cpu,
            memory_bytes: memory,
            cordoned: false,
        }
    }

    fn workload(key: &str, replicas: u32, cpu: u64, memory: u64) -> PlanWorkload {
        PlanWorkload {
            key: key.into(),
            replicas,
            cpu_millis: cpu,
            memory_bytes: memory,
            constraints: BTreeMap::new(),
            volume: VolumeHome::NoVolume,
            current: Vec::new(),
            ports: Vec::new(),
        }
    }

    fn nodes_of(plan: &Plan, key: &str) -> Vec<String> {
        plan.placements[key]
            .iter()
            .map(|n| n.clone().unwrap_or_else(|| "-".into()))
            .collect()
    }

    #[test]
    fn node_ports_put_one_replica_per_node_and_block_naming_the_port() {
        let nodes = vec![
            node("a", 4000, 8 * GI, &[]),
            node("b", 4000, 8 * GI, &[]),
            node("c", 4000, 8 * GI, &[]),
        ];
        let game = PlanWorkload {
            ports: vec!["tcp/25565".into(), "udp/19132".into()],
            ..workload("game/server", 3, 100, GI / 8)
        };
        // Another app holds udp/19132 on c: two of three fit.
        let input = PlanInput {
            nodes: nodes.clone(),
            ports_taken: [("c".to_string(), ["udp/19132".to_string()].into())].into(),
            workloads: vec![game.clone()],
            ..PlanInput::default()
        };
        let plan = plan(&input);
        let mut placed = nodes_of(&plan, "game/server");
        placed.sort();
        assert_eq!(placed, ["-", "a", "b"]);
        assert_eq!(plan.blocked["game/server"].code(), "node_port_in_use");
        assert_eq!(
            plan.blocked["game/server"].to_string(),
            "node_port_in_use: 2 of 3 replicas found a node where tcp/25565 and udp/19132 is free"
        );
        // With the port free everywhere, each node runs one, never two.
        let plan = super::plan(&PlanInput {
            nodes,
            workloads: vec![game],
            ..PlanInput::default()
        });
        let mut placed = nodes_of(&plan, "game/server");
        placed.sort();
        assert_eq!(placed, ["a", "b", "c"]);
        assert!(plan.is_complete());
    }

    #[test]
    fn a_full_node_is_missing_capacity_not_a_port_in_use() {
        let game = PlanWorkload {
            ports: vec!["tcp/7777".into()],
            ..workload("game/server", 2, 3000, GI)
        };
        let plan = plan(&PlanInput {
            nodes: vec![node("a", 4000, 8 * GI, &[])],
            workloads: vec![game],
            ..PlanInput::default()
        });
        // The second replica misses both the room and the port on a: room is what it needs
        // first, so room is what is said.
        assert_eq!(plan.blocked["game/server"].code(), "missing_capacity");
        let small = PlanWorkload {
            ports: vec!["tcp/7777".into()],
            ..workload("game/server", 2, 100, GI / 8)
        };
        let plan = super::plan(&PlanInput {
            nodes: vec![node("a", 4000, 8 * GI, &[])],
            workloads: vec![small],
            ..PlanInput::default()
        });
        assert_eq!(plan.blocked["game/server"].code(), "node_port_in_use");
    }

    #[test]
    fn replicas_spread_across_eligible_nodes() {
        let input = PlanInput {
            nodes: vec![
                node("a", 2000, 4 * GI, &[]),
                node("b", 2000, 4 * GI, &[]),
                node("c", 2000, 4 * GI, &[]),
            ],
            workloads: vec![workload("app/web", 3, 100, GI / 8)],
            ..PlanInput::default()
        };
        let plan = plan(&input);
        let mut nodes = nodes_of(&plan, "app/web");
        nodes.sort();
        assert_eq!(nodes, ["a", "b", "c"]);
        assert!(plan.is_complete());
    }

    #[test]
    fn constraints_pick_only_matching_nodes_and_block_with_the_labels() {
        let input = PlanInput {
            nodes: vec![
                node("a", 2000, 4 * GI, &[("tier", "front")]),
                node("b", 2000, 4 * GI, &[]),
            ],
            workloads: vec![
                PlanWorkload {
                    constraints: [("tier".to_string(), "front".to_string())].into(),
                    ..workload("app/web", 2, 100, GI / 8)
                },
                PlanWorkload {
                    constraints: [("gpu".to_string(), "yes".to_string())].into(),
                    ..workload("app/ml", 1, 100, GI / 8)
                },
            ],
            ..PlanInput::default()
        };
        let plan = plan(&input);
        assert_eq!(nodes_of(&plan, "app/web"), ["a", "a"]);
        assert_eq!(plan.blocked["app/ml"].code(), "label_mismatch");
        assert_eq!(
            plan.blocked["app/ml"].to_string(),
            "label_mismatch: no ready node has gpu=yes"
        );
    }

    #[test]
    fn capacity_is_never_exceeded_and_the_shortfall_is_named() {
        let input = PlanInput {
            nodes: vec![node("a", 1000, 4 * GI, &[]), node("b", 1000, 4 * GI, &[])],
            taken: [("b".to_string(), (600, 0))].into(),
            workloads: vec![workload("app/web", 5, 400, GI / 8)],
            ..PlanInput::default()
        };
        let plan = plan(&input);
        // a holds 2 (800m), b holds 1 (600m taken + 400m).
        assert_eq!(
            plan.blocked["app/web"],
            BlockReason::MissingCapacity {
                placed: 3,
                wanted: 5
            }
        );
        let on_a = nodes_of(&plan, "app/web")
            .iter()
            .filter(|n| *n == "a")
            .count();
        assert_eq!(on_a, 2);
    }

    #[test]
    fn replicas_that_can_stay_stay() {
        let mut web = workload("app/web", 2, 100, GI / 8);
        web.current = vec![Some("c".into()), Some("c".into())];
        let input = PlanInput {
            nodes: vec![
                node("a", 2000, 4 * GI, &[]),
                node("b", 2000, 4 * GI, &[]),
                node("c", 2000, 4 * GI, &[]),
            ],
            workloads: vec![web],
            ..PlanInput::default()
        };
        assert_eq!(nodes_of(&plan(&input), "app/web"), ["c", "c"]);
    }

    #[test]
    fn a_lost_node_moves_movable_replicas_and_blocks_the_volume_bound_one() {
        let mut web = workload("app/web", 2, 100, GI / 8);
        web.current = vec![Some("gone".into()), Some("a".into())];
        let mut db = workload("app/db", 1, 100, GI / 8);
        db.volume = VolumeHome::On("gone".into());
        db.current = vec![Some("gone".into())];
        let input = PlanInput {
            nodes: vec![node("a", 2000, 4 * GI, &[]), node("b", 2000, 4 * GI, &[])],
            workloads: vec![web, db],
            ..PlanInput::default()
        };
        let plan = plan(&input);
        assert_eq!(nodes_of(&plan, "app/web"), ["b", "a"]);
        assert_eq!(
            plan.blocked["app/db"],
            BlockReason::VolumeNodeLost {
                node: "gone".into()
            }
        );
        assert_eq!(nodes_of(&plan, "app/db"), ["-"]);
    }

    #[test]
    fn a_cordoned_node_takes_nothing_new_but_keeps_what_it_runs() {
        let mut cordoned = node("a", 2000, 4 * GI, &[]);
        cordoned.cordoned = true;
        let mut web = workload("app/web", 2, 100, GI / 8);
        web.current = vec![Some("a".into()), None];
        let mut db = workload("app/db", 1, 100, GI / 8);
        db.volume = VolumeHome::On("a".into());
        db.current = vec![Some("a".into())];
        let input = PlanInput {
            nodes: vec![cordoned, node("b", 2000, 4 * GI, &[])],
            workloads: vec![web, db],
            ..PlanInput::default()
        };
        let plan = plan(&input);
        assert_eq!(nodes_of(&plan, "app/web"), ["a", "b"]);
        assert_eq!(nodes_of(&plan, "app/db"), ["a"]);
        assert!(plan.is_complete());
    }

    #[test]
    fn no_nodes_is_its_own_reason() {
        let input = PlanInput {
            workloads: vec![workload("app/web", 1, 100, GI / 8)],
            ..PlanInput::default()
        };
        assert_eq!(plan(&input).blocked["app/web"], BlockReason::NoNodes);
    }

    proptest::proptest! {
        #[test]
        fn no_node_is_ever_overcommitted_and_the_plan_is_deterministic(
            sizes in proptest::collection::vec((500u64..4000, 1u64..8), 1..12),
            demands in proptest::collection::vec((1u32..6, 50u64..1500, 1u64..4), 1..10),
        ) {
            let nodes: Vec<PlanNode> = sizes
                .iter()
                .enumerate()
                .map(|(i, (cpu, gib))| node(&format!("n{i}"), *cpu, gib * GI, &[]))
                .collect();
            let workloads: Vec<PlanWorkload> = demands
                .iter()
                .enumerate()
                .map(|(i, (replicas, cpu, eighths))| workload(&format!("app/w{i}"), *replicas, *cpu, eighths * GI / 8))
                .collect();
            let input = PlanInput { nodes: nodes.clone(), workloads: workloads.clone(), ..PlanInput::default() };
            let first = plan(&input);
            proptest::prop_assert_eq!(&first, &plan(&input));
            let mut used: BTreeMap<String, (u64, u64)> = BTreeMap::new();
            for w in &workloads {
                let placed = &first.placements[&w.key];
                for n in placed.iter().flatten() {
                    let entry = used.entry(n.clone()).or_default();
                    entry.0 += w.cpu_millis;
                    entry.1 += w.memory_bytes;
                }
                let count = placed.iter().flatten().count() as u32;
                proptest::prop_assert_eq!(count == w.replicas, !first.blocked.contains_key(&w.key));
            }
            for n in &nodes {
                let (cpu, memory) = used.get(&n.name).copied().unwrap_or_default();
                proptest::prop_assert!(cpu <= n.cpu_millis && memory <= n.memory_bytes);
            }
        }
    }
}
