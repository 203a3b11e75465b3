//! A project's mesh from the API: `orc mesh status`, `orc mesh connect` and
//! `orc mesh disconnect`.
//!
//! The status joins three sources: the store (members, addresses, each agent's config
//! generations), the mesh plan the zone last published (each node's expected peers) and the
//! agents' latest interface reports, which this controller holds in memory. Viewers read it.
//!
//! A workstation is a person's machine on the project's mesh. Members of the project
//! connect one by sending its public key; the answer is its config without the private key,
//! which the CLI made and keeps. Connecting and disconnecting are `mesh.workstation` events
//! and wake the mesh reconciler, so the project's nodes learn the new peer within a pass.

use std::collections::{BTreeMap, BTreeSet};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use orc_mesh::config::MESH_INTERFACE;
use orc_zone_store::{MeshMember, MeshMemberKind, NewMeshMember};

use super::ApiState;
use super::error::{ApiError, ApiResult, ErrorBody, ErrorCode};
use super::extract::{JsonBody, PathArgs};
use super::tenancy::{parse_name, project_with_role};
use super::views::{
    ConnectWorkstation, ConnectedWorkstation, MeshMemberView, MeshPeerView, MeshView,
    WorkstationView,
};
use crate::mesh::MeshChange;
use crate::model::{EventScope, NodeId, Org, Project, Role};
use orc_zone_model::access::Caller;

/// A peer whose last handshake is older than this is not counted as up. WireGuard renews a
/// session every 2 min while traffic flows and keep-alives hold idle paths open, so a live
/// peer is never older than this.
pub const HANDSHAKE_WINDOW_SECONDS: u64 = 180;

fn project_scope(org: &Org, project: &Project) -> EventScope {
    EventScope {
        org_id: Some(org.id.clone()),
        project_id: Some(project.id.clone()),
        provider_id: None,
        pool_id: None,
        node_id: None,
    }
}

async fn mesh_event(state: &ApiState, scope: &EventScope, words: &str) {
    if let Err(e) = state
        .store
        .record_event(scope, "mesh.workstation", words, state.now())
        .await
    {
        tracing::warn!(error = %e, "mesh event not recorded");
    }
}

/// The id of workstation `name` of `project`: one per name and project.
fn workstation_id(project: &Project, name: &str) -> String {
    format!("ws-{}-{name}", project.id)
}

fn workstation_view(member: &MeshMember) -> WorkstationView {
    WorkstationView {
        id: member.id.clone(),
        name: member.name.clone(),
        address: member.address.to_string(),
        public_key: member.public_key.clone().unwrap_or_default(),
        created_at: member.created_at.millis(),
    }
}

async fn project_members(state: &ApiState, project: &Project) -> ApiResult<Vec<MeshMember>> {
    Ok(state.store.mesh_members_of(&project.id).await?)
}

/// What the status knows of one node's mesh.
struct NodeMesh {
    /// The keys of the peers the last plan gives it.
    planned: BTreeSet<orc_mesh::PublicKey>,
    /// The keys of the peers its last report saw within the window; `None`: no report.
    up: Option<BTreeSet<orc_mesh::PublicKey>>,
    report: Option<crate::agents::MeshStatusReport>,
    /// Whether its agent's stream is open.
    live: bool,
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The project's mesh: its prefix and every member, with what the zone planned for it and
/// what its agent last reported.
#[utoipa::path(get, path = "/api/orgs/{org}/projects/{project}/mesh", tag = "mesh",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name")),
    responses((status = 200, body = MeshView), (status = 404, body = ErrorBody)))]
pub(super) async fn mesh_status(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project)): PathArgs<(String, String)>,
) -> ApiResult<Json<MeshView>> {
    let (org_row, project_row) =
        project_with_role(&state, &caller, &org, &project, Role::Viewer).await?;
    let prefix = state.store.mesh_prefixes().await?.remove(&project_row.id);
    let members = project_members(&state, &project_row).await?;
    let nodes: BTreeMap<String, orc_zone_store::MeshNode> = state
        .store
        .mesh_nodes()
        .await?
        .into_iter()
        .filter(|n| n.project_id == project_row.id)
        .map(|n| (n.node_id.to_string(), n))
        .collect();
    let now_ms = state.now().millis();
    let recent =
        (u64::try_from(now_ms).unwrap_or(0) / 1000).saturating_sub(HANDSHAKE_WINDOW_SECONDS);
    let agents = state.agents.as_ref();

    // Each node once: its agent's row, the peers the plan gives it, the peers its agent
    // last saw up, and that report.
    let mut rows = BTreeMap::new();
    let pools: BTreeSet<&crate::model::PoolId> = nodes.values().map(|n| &n.pool_id).collect();
    for pool in pools {
        for agent in state.store.node_agents_of_pool(pool).await? {
            rows.insert(agent.node_id.to_string(), agent);
        }
    }
    let mut seen: BTreeMap<String, NodeMesh> = BTreeMap::new();
    for member in members.iter().filter(|m| m.kind == MeshMemberKind::Node) {
        let Ok(id) = member.id.parse::<NodeId>() else {
            continue;
        };
        let planned = agents
            .map(|a| a.mesh_of(&id))
            .and_then(|config| {
                let interface = config.interface(MESH_INTERFACE)?;
                Some(interface.peers.iter().map(|p| p.public_key).collect())
            })
            .unwrap_or_default();
        let report = agents.and_then(|a| a.mesh_status(&id));
        let up = report.as_ref().map(|r| {
            r.interfaces
                .get(MESH_INTERFACE)
                .into_iter()
                .flatten()
                .filter(|p| p.last_handshake.is_some_and(|t| t >= recent))
                .map(|p| p.public_key)
                .collect()
        });
        let live = agents.and_then(|a| a.live(&id)).is_some();
        seen.insert(
            member.id.clone(),
            NodeMesh {
                planned,
                up,
                report,
                live,
            },
        );
    }
    let reported = seen.values().any(|n| n.report.is_some());

    let mut views = Vec::new();
    for member in &members {
        let view = match member.kind {
            MeshMemberKind::Node => {
                let node = nodes.get(&member.id);
                let agent = rows.get(&member.id);
                let mesh = seen.get(&member.id);
                let report = mesh.and_then(|m| m.report.as_ref());
                let state_word = match agent {
                    None => "not joined",
                    Some(_) if !mesh.is_some_and(|m| m.live) => "detached",
                    Some(a) if a.apply_error.is_some() => "failed",
                    Some(a) if a.applied_generation < a.desired_generation => "applying",
                    Some(_) => "in step",
                };
                let totals = report
                    .and_then(|r| r.interfaces.get(MESH_INTERFACE))
                    .map(|peers| {
                        peers.iter().fold((0u64, 0u64), |(rx, tx), p| {
                            (rx.saturating_add(p.rx_bytes), tx.saturating_add(p.tx_bytes))
                        })
                    });
                let planned = mesh.map_or(0, |m| m.planned.len());
                MeshMemberView {
                    id: member.id.clone(),
                    kind: "node".to_string(),
                    name: member.name.clone(),
                    address: member.address.to_string(),
                    pool: node.map(|n| n.pool_name.to_string()),
                    site: node.and_then(|n| n.site.clone()),
                    state: state_word.to_string(),
                    desired_generation: agent.map(|a| a.desired_generation),
                    applied_generation: agent.map(|a| a.applied_generation),
                    apply_error: agent.and_then(|a| a.apply_error.clone()),
                    peers: count(planned),
                    peers_up: mesh.and_then(|m| {
                        let up = m.up.as_ref()?;
                        Some(count(up.intersection(&m.planned).count()))
                    }),
                    rx_bytes: totals.map(|t| t.0),
                    tx_bytes: totals.map(|t| t.1),
                    reported_at: report.map(|r| r.received.millis()),
                }
            }
            MeshMemberKind::Workstation => {
                let key: Option<orc_mesh::PublicKey> =
                    member.public_key.as_deref().and_then(|k| k.parse().ok());
                let peers = key.map_or(0, |key| {
                    seen.values().filter(|n| n.planned.contains(&key)).count()
                });
                let seen_by = key.map(|key| {
                    seen.values()
                        .filter(|n| n.up.as_ref().is_some_and(|up| up.contains(&key)))
                        .count()
                });
                MeshMemberView {
                    id: member.id.clone(),
                    kind: "workstation".to_string(),
                    name: member.name.clone(),
                    address: member.address.to_string(),
                    pool: None,
                    site: None,
                    state: if seen_by.unwrap_or(0) > 0 {
                        "connected"
                    } else {
                        "idle"
                    }
                    .to_string(),
                    desired_generation: None,
                    applied_generation: None,
                    apply_error: None,
                    peers: count(peers),
                    peers_up: seen_by.filter(|_| reported).map(count),
                    rx_bytes: None,
                    tx_bytes: None,
                    reported_at: None,
                }
            }
        };
        views.push(view);
    }
    views.sort_by(|a, b| (&a.kind, &a.name).cmp(&(&b.kind, &b.name)));
    Ok(Json(MeshView {
        org: org_row.name.to_string(),
        project: project_row.name.to_string(),
        prefix: prefix.map(|p| p.to_string()),
        handshake_window_seconds: HANDSHAKE_WINDOW_SECONDS,
        members: views,
    }))
}

/// The project's workstations, by name.
#[utoipa::path(get, path = "/api/orgs/{org}/projects/{project}/mesh/workstations", tag = "mesh",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name")),
    responses((status = 200, body = Vec<WorkstationView>), (status = 404, body = ErrorBody)))]
pub(super) async fn list_workstations(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project)): PathArgs<(String, String)>,
) -> ApiResult<Json<Vec<WorkstationView>>> {
    let (_, project_row) = project_with_role(&state, &caller, &org, &project, Role::Viewer).await?;
    let mut views: Vec<WorkstationView> = project_members(&state, &project_row)
        .await?
        .iter()
        .filter(|m| m.kind == MeshMemberKind::Workstation)
        .map(workstation_view)
        .collect();
    views.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Json(views))
}

/// Puts a workstation on the project's mesh and answers its WireGuard config (all but the
/// private key, which stays on the workstation).
#[utoipa::path(post, path = "/api/orgs/{org}/projects/{project}/mesh/workstations", tag = "mesh",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name")),
    request_body = ConnectWorkstation,
    responses((status = 201, body = ConnectedWorkstation), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub(super) async fn connect_workstation(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project)): PathArgs<(String, String)>,
    body: JsonBody<ConnectWorkstation>,
) -> ApiResult<(StatusCode, Json<ConnectedWorkstation>)> {
    let (org_row, project_row) =
        project_with_role(&state, &caller, &org, &project, Role::Member).await?;
    let request = body.parse()?;
    let name = parse_name("name", &request.name)?;
    let key: orc_mesh::PublicKey = request.public_key.trim().parse().map_err(|e| {
        ApiError::invalid(
            "public_key",
            format!("public_key: {e} (a WireGuard public key is 32 bytes in base64)"),
        )
    })?;
    let path = format!("{org}/{project}");
    let members = project_members(&state, &project_row).await?;
    if members
        .iter()
        .any(|m| m.kind == MeshMemberKind::Workstation && m.name == name.as_str())
    {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!(
                "workstation {name} is already on the mesh of {path}; disconnect it first \
                 (orc mesh disconnect {path} --name {name}) or choose another name"
            ),
        )
        .with_field("name"));
    }
    if members
        .iter()
        .any(|m| m.public_key.as_deref() == Some(key.to_string().as_str()))
    {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!("this public key is already on the mesh of {path}; make a new key"),
        )
        .with_field("public_key"));
    }
    let new = NewMeshMember {
        id: workstation_id(&project_row, name.as_str()),
        kind: MeshMemberKind::Workstation,
        project_id: project_row.id.clone(),
        name: name.to_string(),
        public_key: Some(key.to_string()),
    };
    let now = state.now();
    let Some(member) = state
        .store
        .ensure_mesh_member(&new, &state.mesh.range, now)
        .await?
    else {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!(
                "the mesh of {path} has no free address (or the zone's mesh range {} has no \
                 free prefix); disconnect a workstation or end a node first",
                state.mesh.range
            ),
        ));
    };
    let world = state
        .mesh_signal
        .project_world(&state.store, &state.mesh, &project_row.id)
        .await?;
    let config = orc_mesh::plan_workstation(&world, &member.id).unwrap_or_default();
    let interface = config.interface(MESH_INTERFACE);
    let prefix_len = world
        .projects
        .iter()
        .find(|p| p.id == project_row.id.as_str())
        .map_or(32, |p| p.prefix.prefix_len());
    let interface_address = interface.and_then(|i| i.address).map_or_else(
        || format!("{}/{prefix_len}", member.address),
        |a| a.to_string(),
    );
    let peers = interface
        .map(|i| {
            i.peers
                .iter()
                .map(|p| MeshPeerView {
                    name: p.name.clone(),
                    public_key: p.public_key.to_string(),
                    endpoint: p.endpoint.map(|e| e.to_string()),
                    allowed_ips: p.allowed_ips.iter().map(ToString::to_string).collect(),
                    keepalive_seconds: p.keepalive,
                })
                .collect()
        })
        .unwrap_or_default();
    let words = format!(
        "{} connected workstation {name} at {} to the mesh",
        caller.user.name, member.address
    );
    mesh_event(&state, &project_scope(&org_row, &project_row), &words).await;
    state.mesh_signal.changed(MeshChange::Members);
    Ok((
        StatusCode::CREATED,
        Json(ConnectedWorkstation {
            workstation: workstation_view(&member),
            interface_address,
            peers,
        }),
    ))
}

/// Takes a workstation off the project's mesh; its address is quarantined before reuse.
#[utoipa::path(delete, path = "/api/orgs/{org}/projects/{project}/mesh/workstations/{name}",
    tag = "mesh",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("name" = String, Path, description = "Workstation name")),
    responses((status = 200, body = WorkstationView), (status = 404, body = ErrorBody)))]
pub(super) async fn disconnect_workstation(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, name)): PathArgs<(String, String, String)>,
) -> ApiResult<Json<WorkstationView>> {
    let (org_row, project_row) =
        project_with_role(&state, &caller, &org, &project, Role::Member).await?;
    let member = project_members(&state, &project_row)
        .await?
        .into_iter()
        .find(|m| m.kind == MeshMemberKind::Workstation && m.name == name)
        .ok_or_else(|| {
            ApiError::not_found(
                "name",
                format!("workstation {name} is not on the mesh of {org}/{project}"),
            )
        })?;
    let now = state.now();
    let quarantine = i64::try_from(state.mesh.quarantine.as_millis()).unwrap_or(i64::MAX);
    state
        .store
        .release_mesh_members(
            std::slice::from_ref(&member.id),
            now.plus_millis(quarantine),
        )
        .await?;
    let words = format!(
        "{} disconnected workstation {} from the mesh",
        caller.user.name, member.name
    );
    mesh_event(&state, &project_scope(&org_row, &project_row), &words).await;
    state.mesh_signal.changed(MeshChange::Members);
    Ok(Json(workstation_view(&member)))
}
