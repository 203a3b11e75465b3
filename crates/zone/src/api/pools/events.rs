//! A project's events, and its usage for a month with the hours of the nodes still
//! running.

use super::*;

/// The project's events, oldest first.
#[utoipa::path(get, path = "/api/orgs/{org}/projects/{project}/events", tag = "events",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"), EventsQuery),
    responses((status = 200, body = Vec<EventView>), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(in crate::api) async fn list_events(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project)): PathArgs<(String, String)>,
    QueryArgs(query): QueryArgs<EventsQuery>,
) -> ApiResult<Json<Vec<EventView>>> {
    let after: Option<EventId> = parse_query_value("after", query.after.as_deref())?;
    let limit: u32 = parse_query_value("limit", query.limit.as_deref())?.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::invalid("limit", "limit must be 1 to 1000"));
    }
    let (org_row, project_row) =
        project_with_role(&state, &caller, &org, &project, Role::Viewer).await?;
    let mut filter = EventScope {
        project_id: Some(project_row.id.clone()),
        ..EventScope::default()
    };
    if let Some(pool) = &query.pool {
        let name = parse_name("pool", pool)?;
        let pool = state
            .store
            .pool_by_path(&org_row.name, &project_row.name, &name)
            .await
            .map_err(|_| ApiError::not_found("pool", format!("pool {pool} not found")))?;
        filter.pool_id = Some(pool.id);
    }
    let newest = match query.newest.as_deref() {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(ApiError::invalid(
                "newest",
                format!("newest must be true or false, not {}", quoted(other)),
            ));
        }
    };
    let events = match (newest, &after) {
        (true, Some(_)) => {
            return Err(ApiError::invalid(
                "newest",
                "newest and after exclude each other: after reads on from an event",
            ));
        }
        (true, None) => state.store.list_newest_events(&filter, limit).await?,
        (false, _) => {
            state
                .store
                .list_events(&filter, after.as_ref(), limit)
                .await?
        }
    };
    // Pools by name, so people read `web`, not an id.
    let names: BTreeMap<String, String> = state
        .store
        .list_pools(&project_row.id)
        .await?
        .into_iter()
        .map(|p| (p.id.to_string(), p.name.to_string()))
        .collect();
    Ok(Json(
        events
            .iter()
            .map(|e| {
                let mut view = EventView::from(e);
                view.pool = view.pool_id.as_ref().and_then(|id| names.get(id).cloned());
                view
            })
            .collect(),
    ))
}

/// The project's usage (invoice lines) for a month, with totals per currency.
#[utoipa::path(get, path = "/api/orgs/{org}/projects/{project}/usage", tag = "events",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"), UsageQuery),
    responses((status = 200, body = UsageView), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(in crate::api) async fn usage(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project)): PathArgs<(String, String)>,
    QueryArgs(query): QueryArgs<UsageQuery>,
) -> ApiResult<Json<UsageView>> {
    let month: Month = match parse_query_value("month", query.month.as_deref())? {
        Some(m) => m,
        None => crate::pricing::month_of(state.now()),
    };
    let (_, project) = project_with_role(&state, &caller, &org, &project, Role::Viewer).await?;
    let mut lines = state.store.list_usage(&project.id, &month).await?;
    let now = state.now();
    let accruing = if month == crate::pricing::month_of(now) {
        hours_to_date(&state, &lines, now).await?
    } else {
        BTreeMap::new()
    };
    for line in &mut lines {
        if let Some(extra) = line.node_id.as_ref().and_then(|id| accruing.get(id)) {
            line.hours += *extra;
            line.amount += *extra * line.rate.amount;
        }
    }
    let mut totals: BTreeMap<String, Decimal> = BTreeMap::new();
    for line in &lines {
        *totals
            .entry(line.rate.currency.as_str().to_string())
            .or_default() += line.amount;
    }
    let names: BTreeMap<String, String> = state
        .store
        .list_pools(&project.id)
        .await?
        .into_iter()
        .map(|p| (p.id.to_string(), p.name.to_string()))
        .collect();
    Ok(Json(UsageView {
        month: month.to_string(),
        lines: lines
            .iter()
            .map(|line| {
                let mut view = UsageLineView::from(line);
                view.pool = view.pool_id.as_ref().and_then(|id| names.get(id).cloned());
                view.accruing = line
                    .node_id
                    .as_ref()
                    .is_some_and(|id| accruing.contains_key(id));
                view
            })
            .collect(),
        totals: totals
            .into_iter()
            .map(|(c, a)| (c, orc_zone_api_types::views::money_text(a)))
            .collect(),
    }))
}

/// The hours each running node of `lines` has run beyond its written usage, up to `now`.
/// The zone writes usage once an hour; a reader of the current month sees the time to date.
/// Read-only: the next accrual writes the same hours, so nothing is counted twice.
pub(in crate::api) async fn hours_to_date(
    state: &ApiState,
    lines: &[crate::model::UsageLine],
    now: crate::model::Timestamp,
) -> ApiResult<BTreeMap<NodeId, Decimal>> {
    let mut extra = BTreeMap::new();
    for line in lines {
        let Some(node_id) = &line.node_id else {
            continue;
        };
        if line.description == crate::pricing::PUBLIC_IPV4_LINE || extra.contains_key(node_id) {
            continue;
        }
        let node = match state.store.get_node(node_id).await {
            Ok(node) => node,
            Err(StoreError::NotFound { .. }) => continue,
            Err(e) => return Err(e.into()),
        };
        if node.status.state != NodeState::Running {
            continue;
        }
        let Some(billed) = state.store.billed_usage(node_id, &line.description).await? else {
            continue;
        };
        let until = billed
            .since
            .plus_millis(crate::pricing::millis_of(billed.hours));
        if now > until {
            extra.insert(
                node_id.clone(),
                crate::pricing::hours_of(now.millis() - until.millis()),
            );
        }
    }
    Ok(extra)
}
