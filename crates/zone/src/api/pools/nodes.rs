//! A pool's nodes and its app slots' logs.

use super::*;

/// The pool's nodes, by slot.
#[utoipa::path(get, path = "/api/orgs/{org}/projects/{project}/pools/{pool}/nodes",
    tag = "pools", params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("pool" = String, Path, description = "Pool name"), NodesQuery),
    responses((status = 200, body = Vec<NodeView>), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(in crate::api) async fn list_nodes(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, pool)): PathArgs<(String, String, String)>,
    QueryArgs(query): QueryArgs<NodesQuery>,
) -> ApiResult<Json<Vec<NodeView>>> {
    let include_ended: bool =
        parse_query_value("include_ended", query.include_ended.as_deref())?.unwrap_or(false);
    let (_, _, pool) = pool_with_role(&state, &caller, &org, &project, &pool, Role::Viewer).await?;
    let nodes = state
        .store
        .list_nodes_by_pool(&pool.id, include_ended)
        .await?;
    let provider = state.store.get_provider(&pool.spec.provider_id).await?;
    let gateways: BTreeMap<String, Option<String>> = site_gateways(&state, &provider)
        .await?
        .into_iter()
        .map(|(site, n)| (site, private_address(&n.status.addresses)))
        .collect();
    let agents: BTreeMap<NodeId, orc_zone_model::NodeAgent> = state
        .store
        .node_agents_of_pool(&pool.id)
        .await?
        .into_iter()
        .map(|a| (a.node_id.clone(), a))
        .collect();
    // Where a node went is the zone operators' to see; a tenant sees the neutral site. The
    // markup is its provider's project's and the operators': a tenant's price includes it.
    let operator = caller.zone_role().is_some();
    let ingress: BTreeSet<NodeId> = state
        .store
        .ingress_nodes(&pool.project_id)
        .await?
        .into_iter()
        .collect();
    let sees_markup = provider.project_id == pool.project_id || caller.is_operator();
    Ok(Json(
        nodes
            .iter()
            .map(|n| {
                let mut view = NodeView::from(n);
                view.gateway = n
                    .status
                    .site
                    .as_ref()
                    .and_then(|site| gateways.get(site).cloned().flatten());
                if operator {
                    view.placed = PlacedView::of(n);
                }
                if !sees_markup {
                    view.markup = None;
                }
                view.agent = agents.get(&n.id).map(|agent| {
                    let live = state.agents.as_ref().and_then(|a| a.live(&n.id));
                    AgentView::of(agent, live.map(|t| t.millis()))
                });
                view.ingress = ingress.contains(&n.id);
                view
            })
            .collect(),
    ))
}

/// Query of `GET …/pools/{pool}/logs`.
#[derive(Debug, Clone, Default, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct LogsQuery {
    /// Only this slot.
    pub slot: Option<String>,
    /// `error`, `warn`, `info` (default), `debug` or `trace`.
    pub level: Option<String>,
}

/// The kept logs of an app pool's slots (project owners and members).
#[utoipa::path(get, path = "/api/orgs/{org}/projects/{project}/pools/{pool}/logs",
    tag = "pools", params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("pool" = String, Path, description = "Pool name"), LogsQuery),
    responses((status = 200, body = Vec<LogLineView>), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub(in crate::api) async fn pool_logs(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, pool)): PathArgs<(String, String, String)>,
    QueryArgs(query): QueryArgs<LogsQuery>,
) -> ApiResult<Json<Vec<LogLineView>>> {
    let slot: Option<u32> = parse_query_value("slot", query.slot.as_deref())?;
    let level = query.level.as_deref().unwrap_or("info");
    if !matches!(level, "error" | "warn" | "info" | "debug" | "trace") {
        return Err(ApiError::invalid(
            "level",
            format!(
                "level {} is not one of error, warn, info, debug, trace",
                quoted(level)
            ),
        ));
    }
    let (org_row, project_row, pool) =
        pool_with_role(&state, &caller, &org, &project, &pool, Role::Member).await?;
    let path = format!("{}/{}/{}", org_row.name, project_row.name, pool.name);
    if pool.spec.app.is_none() {
        return Err(ApiError::invalid(
            "pool",
            format!(
                "pool {path} is not an app pool: only app pools (on provider core) keep logs \
                 here; see its events for its nodes"
            ),
        ));
    }
    if let Some(slot) = slot
        && slot >= pool.size
    {
        let has = match pool.size {
            0 => "it has no slots now".to_string(),
            1 => "it has slot 0 only".to_string(),
            n => format!("it has slots 0 to {}", n - 1),
        };
        return Err(ApiError::invalid(
            "slot",
            format!("slot {slot} is not a slot of pool {path}: {has}"),
        ));
    }
    let Some(source) = &state.logs else {
        return Err(ApiError::new(
            ErrorCode::Unavailable,
            "this zone keeps no app logs (it runs no app supervisor)",
        ));
    };
    let lines = source
        .logs(&pool, slot, level)
        .await
        .map_err(|e| ApiError::new(ErrorCode::Unavailable, e))?;
    Ok(Json(lines))
}
