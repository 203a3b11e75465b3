//! What placement knows of a node beyond its pool: labels, cordons, drains, and whether it
//! accepts public ingress.
//!
//! Labels a tenant gives a node are matched by services' `constraints`; the `orc.` prefix
//! is the zone's (`orc.pool`, `orc.site`, `orc.class`). A cordoned node runs what it runs
//! and takes nothing new. A drain cordons the node and marks it draining: the rollout
//! controller moves every movable replica on it elsewhere, within its app's rollout budget
//! (a replacement first when the app allows a surge), and a replica with a local volume
//! stays; the answer names both. Each change wakes the controller, which places replicas
//! that wait for a node with room or the labels they ask for.
//!
//! An ingress node runs the project's routes in its agent's proxy: HTTPS for services'
//! domains, the plain-HTTP catch-all and public TCP ports. The first node of a project to
//! join accepts ingress by itself (`crate::agents`); a person enables or disables it on any
//! node of the project but a site's gateway.

use axum::Json;
use axum::extract::State;
use orc_app_model::schema::Check;

use super::ApiState;
use super::apps::zone_labels;
use super::error::{ApiError, ApiResult, ErrorBody};
use super::extract::{JsonBody, PathArgs};
use super::nodes::node_with_role;
use super::views::{NodePlacementView, SetNodeLabel};
use crate::model::{Node, Org, Project, Role};
use crate::rollouts::Documents;
use orc_zone_model::access::Caller;

async fn view(state: &ApiState, node: &Node) -> ApiResult<NodePlacementView> {
    let cordon = state.store.node_cordon(&node.id).await?;
    Ok(NodePlacementView {
        node: node.id.to_string(),
        zone_labels: zone_labels(state, node).await?,
        labels: state.store.node_labels(&node.id).await?,
        cordoned: cordon.is_some(),
        ingress: state.store.node_ingress(&node.id).await?,
        draining: cordon == Some(true),
        moving: Vec::new(),
        kept: Vec::new(),
    })
}

/// Places the replicas of `project` that wait for a node, now that one may have room or
/// the labels they ask for.
async fn event(
    state: &ApiState,
    org: &Org,
    project: &Project,
    node: &Node,
    kind: &str,
    words: &str,
) {
    let scope = crate::model::EventScope {
        org_id: Some(org.id.clone()),
        project_id: Some(project.id.clone()),
        provider_id: None,
        pool_id: Some(node.pool_id.clone()),
        node_id: Some(node.id.clone()),
    };
    if let Err(e) = state
        .store
        .record_event(&scope, kind, words, state.now())
        .await
    {
        tracing::warn!(error = %e, kind, "node event not recorded");
    }
}

/// A node's labels and cordon.
#[utoipa::path(get, path = "/api/orgs/{org}/projects/{project}/nodes/{node}/placement", tag = "nodes",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("node" = String, Path, description = "Node id")),
    responses((status = 200, body = NodePlacementView), (status = 404, body = ErrorBody)))]
pub(super) async fn get_placement(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, node)): PathArgs<(String, String, String)>,
) -> ApiResult<Json<NodePlacementView>> {
    let (_, _, node) = node_with_role(&state, &caller, &org, &project, &node, Role::Viewer).await?;
    Ok(Json(view(&state, &node).await?))
}

/// Gives a node a label (its value replaced if it had one).
#[utoipa::path(put, path = "/api/orgs/{org}/projects/{project}/nodes/{node}/labels/{name}", tag = "nodes",
    request_body = SetNodeLabel,
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("node" = String, Path, description = "Node id"),
        ("name" = String, Path, description = "Label name")),
    responses((status = 200, body = NodePlacementView), (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn set_label(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, node, name)): PathArgs<(String, String, String, String)>,
    body: JsonBody<SetNodeLabel>,
) -> ApiResult<Json<NodePlacementView>> {
    let (org, project, node) =
        node_with_role(&state, &caller, &org, &project, &node, Role::Member).await?;
    // Constraints may ask for the zone's labels; only the zone sets them.
    if name.starts_with("orc.") {
        return Err(ApiError::invalid(
            "name",
            format!(
                "label {name:?} is refused: the orc. prefix is reserved for the labels the zone sets"
            ),
        ));
    }
    Check::LabelKey
        .test(&name)
        .map_err(|why| ApiError::invalid("name", format!("label {name:?} {why}")))?;
    let body = body.parse()?;
    Check::LabelValue
        .test(&body.value)
        .map_err(|why| ApiError::invalid("value", format!("the value {why}")))?;
    state
        .store
        .set_node_label(&node.id, &name, &body.value)
        .await?;
    let words = format!("label {name}={} given by {}", body.value, caller.user.name);
    event(&state, &org, &project, &node, "node.labelled", &words).await;
    state.wake();
    Ok(Json(view(&state, &node).await?))
}

/// Takes a label from a node.
#[utoipa::path(delete, path = "/api/orgs/{org}/projects/{project}/nodes/{node}/labels/{name}", tag = "nodes",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("node" = String, Path, description = "Node id"),
        ("name" = String, Path, description = "Label name")),
    responses((status = 200, body = NodePlacementView), (status = 404, body = ErrorBody)))]
pub(super) async fn remove_label(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, node, name)): PathArgs<(String, String, String, String)>,
) -> ApiResult<Json<NodePlacementView>> {
    let (org, project, node) =
        node_with_role(&state, &caller, &org, &project, &node, Role::Member).await?;
    if !state.store.remove_node_label(&node.id, &name).await? {
        return Err(ApiError::not_found(
            "name",
            format!("node {} has no label {name}", node.id),
        ));
    }
    let words = format!("label {name} taken by {}", caller.user.name);
    event(&state, &org, &project, &node, "node.unlabelled", &words).await;
    Ok(Json(view(&state, &node).await?))
}

/// Cordons a node: it runs what it runs and takes nothing new.
#[utoipa::path(post, path = "/api/orgs/{org}/projects/{project}/nodes/{node}/cordon", tag = "nodes",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("node" = String, Path, description = "Node id")),
    responses((status = 200, body = NodePlacementView), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(super) async fn cordon(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, node)): PathArgs<(String, String, String)>,
) -> ApiResult<Json<NodePlacementView>> {
    let (org, project, node) =
        node_with_role(&state, &caller, &org, &project, &node, Role::Member).await?;
    if state
        .store
        .set_node_cordon(
            &node.id,
            true,
            false,
            Some(caller.user.name.as_str()),
            state.now(),
        )
        .await?
    {
        event(
            &state,
            &org,
            &project,
            &node,
            "node.cordoned",
            &format!("cordoned by {}", caller.user.name),
        )
        .await;
    }
    Ok(Json(view(&state, &node).await?))
}

/// Lifts a node's cordon.
#[utoipa::path(post, path = "/api/orgs/{org}/projects/{project}/nodes/{node}/uncordon", tag = "nodes",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("node" = String, Path, description = "Node id")),
    responses((status = 200, body = NodePlacementView), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(super) async fn uncordon(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, node)): PathArgs<(String, String, String)>,
) -> ApiResult<Json<NodePlacementView>> {
    let (org, project, node) =
        node_with_role(&state, &caller, &org, &project, &node, Role::Member).await?;
    if state
        .store
        .set_node_cordon(&node.id, false, false, None, state.now())
        .await?
    {
        event(
            &state,
            &org,
            &project,
            &node,
            "node.uncordoned",
            &format!("cordon lifted by {}", caller.user.name),
        )
        .await;
    }
    state.wake();
    Ok(Json(view(&state, &node).await?))
}

/// Drains a node: cordons it and moves every movable replica on it to other nodes, each
/// within its app's rollout budget.
#[utoipa::path(post, path = "/api/orgs/{org}/projects/{project}/nodes/{node}/drain", tag = "nodes",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("node" = String, Path, description = "Node id")),
    responses((status = 200, body = NodePlacementView), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(super) async fn drain(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, node)): PathArgs<(String, String, String)>,
) -> ApiResult<Json<NodePlacementView>> {
    let (org, project, node) =
        node_with_role(&state, &caller, &org, &project, &node, Role::Member).await?;
    state
        .store
        .set_node_cordon(
            &node.id,
            true,
            true,
            Some(caller.user.name.as_str()),
            state.now(),
        )
        .await?;
    let mut moving = Vec::new();
    let mut kept = Vec::new();
    for app in state.store.apps_on_node(&project.id, &node.id).await? {
        let replicas = state.store.list_app_replicas(&project.id, &app).await?;
        let mut documents = Documents::default();
        for r in replicas
            .iter()
            .filter(|r| r.node_id.as_ref() == Some(&node.id))
        {
            let bound = documents
                .get(&state.store, &project.id, &app, r.revision)
                .await?
                .and_then(|d| {
                    d.spec
                        .workload(&r.workload)
                        .map(|(_, w)| !w.volumes.is_empty())
                })
                .unwrap_or(false);
            let name = format!("{app}/{}[{}]", r.workload, r.slot);
            if bound {
                kept.push(format!("{name}: its local volume lives on this node"));
            } else {
                moving.push(name);
            }
        }
    }
    state.wake();
    let words = format!(
        "drained by {}: {} replica(s) move, {} stay",
        caller.user.name,
        moving.len(),
        kept.len()
    );
    event(&state, &org, &project, &node, "node.drained", &words).await;
    let mut out = view(&state, &node).await?;
    out.moving = moving;
    out.kept = kept;
    Ok(Json(out))
}

/// Makes a node accept public ingress: its agent's proxy serves the project's domains, its
/// plain-HTTP catch-all and its public TCP ports.
#[utoipa::path(post, path = "/api/orgs/{org}/projects/{project}/nodes/{node}/ingress/enable", tag = "nodes",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("node" = String, Path, description = "Node id")),
    responses((status = 200, body = NodePlacementView), (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn enable_ingress(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, node)): PathArgs<(String, String, String)>,
) -> ApiResult<Json<NodePlacementView>> {
    set_ingress(state, caller, (org, project, node), true).await
}

/// Stops a node accepting public ingress; its proxy closes its listeners.
#[utoipa::path(post, path = "/api/orgs/{org}/projects/{project}/nodes/{node}/ingress/disable", tag = "nodes",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("node" = String, Path, description = "Node id")),
    responses((status = 200, body = NodePlacementView), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(super) async fn disable_ingress(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, node)): PathArgs<(String, String, String)>,
) -> ApiResult<Json<NodePlacementView>> {
    set_ingress(state, caller, (org, project, node), false).await
}

async fn set_ingress(
    state: ApiState,
    caller: Caller,
    (org, project, node): (String, String, String),
    enabled: bool,
) -> ApiResult<Json<NodePlacementView>> {
    let (org, project, node) =
        node_with_role(&state, &caller, &org, &project, &node, Role::Member).await?;
    let pool = state.store.get_pool(&node.pool_id).await?;
    if enabled && orc_zone_model::gateway::gateway_pool_site(&pool).is_some() {
        return Err(ApiError::invalid(
            "node",
            format!(
                "node {} is a site's gateway: it carries the site's traffic and serves no app",
                node.id
            ),
        ));
    }
    if state
        .store
        .set_node_ingress(
            &node.id,
            &project.id,
            enabled,
            caller.user.name.as_str(),
            state.now(),
        )
        .await?
    {
        let (kind, words) = if enabled {
            (
                "node.ingress_enabled",
                format!("accepts public ingress, as {} chose", caller.user.name),
            )
        } else {
            (
                "node.ingress_disabled",
                format!(
                    "no longer accepts public ingress, as {} chose",
                    caller.user.name
                ),
            )
        };
        event(&state, &org, &project, &node, kind, &words).await;
        if let Some(agents) = &state.agents {
            agents.assignments_changed();
        }
    }
    Ok(Json(view(&state, &node).await?))
}
