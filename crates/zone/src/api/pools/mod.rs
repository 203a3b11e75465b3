//! Pools and what hangs off them: nodes, app logs, events, usage, and quotes.
//!
//! Viewers read; members create, resize, reconfigure and delete pools and ask for quotes.
//! Every write that changes desired state wakes the reconcilers. A pool is deleted in two
//! steps: `DELETE` marks it deleting (its nodes turn `destroying`), and the pool reconciler
//! removes the row once every node has ended.

mod checks;
mod events;
mod nodes;
mod quote;

use std::collections::{BTreeMap, BTreeSet};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use orc_common::text::quoted;
use orc_common::{Architecture, ClassId, OsId, Shape};
use rust_decimal::Decimal;

use super::ApiState;
use super::error::{ApiError, ApiResult, ErrorBody, ErrorCode};
use super::extract::{JsonBody, PathArgs, QueryArgs, parse_query_value};
use super::providers::{site_gateways, visible_provider};
use super::registry::{check_manifest_params, resolve_app};
use super::tenancy::{parse_name, project_with_role};
use super::views::LogLineView;
use super::views::{
    AgentView, CreatePool, EndpointAccessView, EndpointView, EventView, EventsQuery, NodeView,
    NodesQuery, ParkedView, PlacedView, PoolEndpointsView, PoolView, QuoteRequest, QuoteView,
    ReconfigurePool, ResizePool, ShapeView, SlotEndpointView, UsageLineView, UsageQuery, UsageView,
    private_address,
};
use crate::backend::NodeBackend;
use crate::model::{
    AppSpec, Endpoint, EventId, EventScope, Month, NodeId, NodeState, Org, Pool, PoolSpec, Project,
    Provider, Role, SensitiveParams,
};
use crate::pricing::{markup_at_admission, tenant_price};
use crate::store::StoreError;
use orc_zone_model::access::Caller;

use self::checks::*;
pub(in crate::api) use self::events::*;
pub(in crate::api) use self::nodes::*;
pub(in crate::api) use self::quote::*;

/// The most nodes one pool may ask for.
pub const MAX_POOL_SIZE: u32 = 10_000;

/// The pool `org/project/pool` with the project, if the caller holds `needed`.
async fn pool_with_role(
    state: &ApiState,
    caller: &Caller,
    org: &str,
    project: &str,
    pool: &str,
    needed: Role,
) -> ApiResult<(Org, Project, Pool)> {
    let (org_row, project_row) = project_with_role(state, caller, org, project, needed).await?;
    let name = parse_name("pool", pool)?;
    match state
        .store
        .pool_by_path(&org_row.name, &project_row.name, &name)
        .await
    {
        Ok(p) => Ok((org_row, project_row, p)),
        Err(StoreError::NotFound { .. }) => Err(ApiError::not_found(
            "pool",
            format!("pool {org}/{project}/{pool} not found"),
        )),
        Err(e) => Err(e.into()),
    }
}

async fn pool_view(
    state: &ApiState,
    org: &Org,
    project: &Project,
    pool: &Pool,
) -> ApiResult<PoolView> {
    let provider = state.store.get_provider(&pool.spec.provider_id).await?;
    let counts = state.store.count_live_nodes_by_state(&pool.id).await?;
    let provider_name = super::providers::provider_full_name(state, &provider).await?;
    let mut view = PoolView::new(
        format!("{}/{}/{}", org.name, project.name, pool.name),
        pool,
        &provider_name,
        &counts,
    );
    if view.nodes.parked > 0 {
        view.parked = state
            .store
            .list_nodes_by_pool(&pool.id, false)
            .await?
            .iter()
            .find(|n| n.status.state == NodeState::Parked)
            .map(|n| ParkedView {
                refusal: n.status.refusal.map(|r| r.to_string()),
                words: n.status.state_words.clone(),
            });
    }
    view.address =
        state
            .store
            .pool_address(&pool.id)
            .await?
            .map(|a| super::views::PoolAddressView {
                ipv4: a.ipv4,
                site: a.site,
            });
    Ok(view)
}

/// The project's pools, by name.
#[utoipa::path(get, path = "/api/orgs/{org}/projects/{project}/pools", tag = "pools",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name")),
    responses((status = 200, body = Vec<PoolView>), (status = 404, body = ErrorBody)))]
pub(in crate::api) async fn list_pools(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project)): PathArgs<(String, String)>,
) -> ApiResult<Json<Vec<PoolView>>> {
    let (org, project) = project_with_role(&state, &caller, &org, &project, Role::Viewer).await?;
    let mut out = Vec::new();
    for pool in state.store.list_pools(&project.id).await? {
        out.push(pool_view(&state, &org, &project, &pool).await?);
    }
    Ok(Json(out))
}

/// Creates a pool and its first `pending` nodes (members).
#[utoipa::path(post, path = "/api/orgs/{org}/projects/{project}/pools", tag = "pools",
    request_body = CreatePool,
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name")),
    responses((status = 201, body = PoolView), (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub(in crate::api) async fn create_pool(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project)): PathArgs<(String, String)>,
    body: JsonBody<CreatePool>,
) -> ApiResult<(StatusCode, Json<PoolView>)> {
    let (org, project) = project_with_role(&state, &caller, &org, &project, Role::Member).await?;
    let body = body.parse()?;
    let name = parse_name("name", &body.name)?;
    check_size(body.size)?;
    let shape = parse_shape(&body.shape)?;
    let provider = visible_provider(&state, &project, "provider", &body.provider)
        .await
        .map_err(|e| ApiError::invalid("provider", e.message))?;
    let (class, os) = parse_class_and_os(&state, &provider, &body.class, &body.os)?;
    let endpoints = parse_endpoints(&body.endpoints)?;
    let ssh_keys = parse_ssh_keys(&body.ssh_keys)?;
    check_params("params", &body.params)?;
    check_params("sensitive_params", &body.sensitive_params)?;
    check_placement(&body.placement)?;
    let mut endpoints = endpoints;
    let app = match &body.app {
        Some(package) => {
            check_package(package)?;
            let on_core = provider.is_core();
            let resolved = resolve_app(&state, &caller, package, on_core).await?;
            check_plain_params(package, &resolved.sensitive, &body.params)?;
            if let Some(manifest) = &resolved.manifest {
                check_manifest_params(package, manifest, &body.params, &body.sensitive_params)?;
                if endpoints.is_empty() {
                    endpoints = manifest_endpoints(manifest);
                }
            }
            Some(AppSpec {
                package: package.clone(),
                digest: resolved.digest,
                params: body.params.clone(),
                sensitive: SensitiveParams(body.sensitive_params.clone()),
            })
        }
        None if body.params.is_empty() && body.sensitive_params.is_empty() => None,
        None => {
            return Err(ApiError::invalid(
                "params",
                "params are given to an app: set app as well",
            ));
        }
    };
    if app.is_none() && provider.is_core() {
        return Err(ApiError::invalid(
            "app",
            "pools on provider core run an app: set app (org/name:tag)",
        ));
    }
    if app.is_none() {
        let probe = preview_quote(
            &state,
            format!("{}/{}/{}", org.name, project.name, name),
            shape.clone(),
            &class,
            &os,
            body.public,
            &body.placement,
        )
        .await?;
        check_placeable(&state, &provider, probe).await?;
    }
    let new = crate::model::NewPool {
        project_id: project.id.clone(),
        name,
        size: body.size,
        spec: PoolSpec {
            provider_id: provider.id.clone(),
            shape,
            region_class: class,
            os,
            public: body.public,
            endpoints,
            app,
            placement: body.placement.clone(),
            ssh_keys,
        },
    };
    let change = state
        .store
        .create_pool(&new, state.now())
        .await
        .map_err(|e| {
            ApiError::from(e).naming(&project.id, &format!("{}/{}", org.name, project.name))
        })?;
    let words = format!(
        "created with {} node(s) on provider {}",
        change.pool.size,
        super::providers::provider_full_name(&state, &provider).await?
    );
    pool_event(&state, &org, &project, &change.pool, "pool.created", &words).await;
    state.wake();
    let view = pool_view(&state, &org, &project, &change.pool).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// Records a pool's lifecycle event; a failure to record is logged, never the request's.
pub(in crate::api) async fn pool_event(
    state: &ApiState,
    org: &Org,
    project: &Project,
    pool: &Pool,
    kind: &str,
    words: &str,
) {
    let scope = EventScope {
        org_id: Some(org.id.clone()),
        project_id: Some(project.id.clone()),
        provider_id: Some(pool.spec.provider_id.clone()),
        pool_id: Some(pool.id.clone()),
        node_id: None,
    };
    if let Err(e) = state
        .store
        .record_event(&scope, kind, words, state.now())
        .await
    {
        tracing::warn!(pool = %pool.id, error = %e, "pool event not recorded");
    }
}

/// One pool.
#[utoipa::path(get, path = "/api/orgs/{org}/projects/{project}/pools/{pool}", tag = "pools",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("pool" = String, Path, description = "Pool name")),
    responses((status = 200, body = PoolView), (status = 404, body = ErrorBody)))]
pub(in crate::api) async fn get_pool(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, pool)): PathArgs<(String, String, String)>,
) -> ApiResult<Json<PoolView>> {
    let (org, project, pool) =
        pool_with_role(&state, &caller, &org, &project, &pool, Role::Viewer).await?;
    Ok(Json(pool_view(&state, &org, &project, &pool).await?))
}

/// Where a pool's endpoints are reached: each http endpoint's name at the access edge (any
/// slot, and each slot), and, for zone operators, where each slot listens.
#[utoipa::path(get, path = "/api/orgs/{org}/projects/{project}/pools/{pool}/endpoints", tag = "pools",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("pool" = String, Path, description = "Pool name")),
    responses((status = 200, body = PoolEndpointsView), (status = 404, body = ErrorBody)))]
pub(in crate::api) async fn pool_endpoints(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, pool)): PathArgs<(String, String, String)>,
) -> ApiResult<Json<PoolEndpointsView>> {
    use orc_access::names::EdgeName;
    let (org, project, pool) =
        pool_with_role(&state, &caller, &org, &project, &pool, Role::Viewer).await?;
    let operator = caller.is_operator();
    let http = pool.spec.http_endpoints();
    let listening = state
        .edge
        .as_ref()
        .map(|edge| edge.endpoints.http_endpoints(&pool.id))
        .unwrap_or_default();
    let mut endpoints: Vec<EndpointAccessView> = Vec::new();
    for endpoint in &pool.spec.endpoints {
        let is_http = endpoint.protocol == "http";
        let name_for = |slot: Option<u32>| EdgeName {
            project: project.name.to_string(),
            pool: pool.name.to_string(),
            endpoint: (http.len() > 1).then(|| endpoint.name.clone()),
            slot,
        };
        let edge = state.edge.as_ref().filter(|_| is_http);
        let mut slots: Vec<SlotEndpointView> = Vec::new();
        if is_http {
            for slot in 0..pool.size {
                let address = listening
                    .iter()
                    .find(|(s, e, _)| *s == slot && *e == endpoint.name)
                    .map(|(_, _, addr)| addr.to_string());
                slots.push(SlotEndpointView {
                    slot,
                    url: edge.map(|e| e.url_of(&name_for(Some(slot)), org.name.as_str())),
                    address: address.filter(|_| operator),
                });
            }
        }
        endpoints.push(EndpointAccessView {
            name: endpoint.name.clone(),
            protocol: endpoint.protocol.clone(),
            port: endpoint.port,
            url: edge.map(|e| e.url_of(&name_for(None), org.name.as_str())),
            slots,
        });
    }
    Ok(Json(PoolEndpointsView {
        pool: format!("{}/{}/{}", org.name, project.name, pool.name),
        endpoints,
    }))
}

/// Deletes a pool: it is marked deleting, its nodes are destroyed, then it disappears.
#[utoipa::path(delete, path = "/api/orgs/{org}/projects/{project}/pools/{pool}", tag = "pools",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("pool" = String, Path, description = "Pool name")),
    responses((status = 202, body = PoolView), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(in crate::api) async fn delete_pool(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, pool)): PathArgs<(String, String, String)>,
) -> ApiResult<(StatusCode, Json<PoolView>)> {
    let (org, project, pool) =
        pool_with_role(&state, &caller, &org, &project, &pool, Role::Member).await?;
    let path = format!("{}/{}/{}", org.name, project.name, pool.name);
    let change = state
        .store
        .mark_pool_deleting(&pool.id, state.now())
        .await
        .map_err(|e| ApiError::from(e).naming(&pool.id, &path))?;
    let words = "deletion asked: its nodes are destroyed, then the pool goes";
    pool_event(&state, &org, &project, &change.pool, "pool.deleting", words).await;
    state.wake();
    let view = pool_view(&state, &org, &project, &change.pool).await?;
    Ok((StatusCode::ACCEPTED, Json(view)))
}

/// Sets a pool's size: new slots get `pending` nodes, slots above it are destroyed.
#[utoipa::path(post, path = "/api/orgs/{org}/projects/{project}/pools/{pool}/resize",
    tag = "pools", request_body = ResizePool,
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("pool" = String, Path, description = "Pool name")),
    responses((status = 200, body = PoolView), (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)))]
pub(in crate::api) async fn resize_pool(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, pool)): PathArgs<(String, String, String)>,
    body: JsonBody<ResizePool>,
) -> ApiResult<Json<PoolView>> {
    let (org, project, pool) =
        pool_with_role(&state, &caller, &org, &project, &pool, Role::Member).await?;
    let body = body.parse()?;
    check_size(body.size)?;
    let change = state
        .store
        .resize_pool(&pool.id, body.size, state.now())
        .await
        .map_err(|e| {
            let path = format!("{}/{}/{}", org.name, project.name, pool.name);
            ApiError::from(e).naming(&pool.id, &path)
        })?;
    if change.pool.size != pool.size {
        let words = format!("resized from {} to {}", pool.size, change.pool.size);
        pool_event(&state, &org, &project, &change.pool, "pool.resized", &words).await;
    }
    state.wake();
    Ok(Json(pool_view(&state, &org, &project, &change.pool).await?))
}

/// Replaces the params of a pool's app (a rolling replacement of its slots follows).
#[utoipa::path(post, path = "/api/orgs/{org}/projects/{project}/pools/{pool}/reconfigure",
    tag = "pools", request_body = ReconfigurePool,
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("pool" = String, Path, description = "Pool name")),
    responses((status = 200, body = PoolView), (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)))]
pub(in crate::api) async fn reconfigure_pool(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, pool)): PathArgs<(String, String, String)>,
    body: JsonBody<ReconfigurePool>,
) -> ApiResult<Json<PoolView>> {
    let (org, project, pool) =
        pool_with_role(&state, &caller, &org, &project, &pool, Role::Member).await?;
    let body = body.parse()?;
    check_params("params", &body.params)?;
    if let Some(sensitive) = &body.sensitive_params {
        check_params("sensitive_params", sensitive)?;
    }
    if let Some(update) = &body.sensitive_params_update {
        check_params("sensitive_params_update", update)?;
        if body.sensitive_params.is_some() {
            return Err(ApiError::invalid(
                "sensitive_params_update",
                "give the full set in sensitive_params or the changes in \
                 sensitive_params_update, not both",
            ));
        }
    }
    let Some(app) = &pool.spec.app else {
        return Err(ApiError::invalid(
            "params",
            format!("pool {} runs no app, so it takes no params", pool.name),
        ));
    };
    let provider = state.store.get_provider(&pool.spec.provider_id).await?;
    let on_core = provider.is_core();
    let resolved = resolve_app(&state, &caller, &app.package, on_core).await?;
    check_plain_params(&app.package, &resolved.sensitive, &body.params)?;
    let sensitive = match (&body.sensitive_params, &body.sensitive_params_update) {
        (Some(s), _) => SensitiveParams(s.clone()),
        (None, Some(update)) => {
            let mut merged = app.sensitive.0.clone();
            merged.extend(update.clone());
            SensitiveParams(merged)
        }
        (None, None) => app.sensitive.clone(),
    };
    if let Some(manifest) = &resolved.manifest {
        check_manifest_params(&app.package, manifest, &body.params, &sensitive.0)?;
    }
    let mut spec = pool.spec.clone();
    spec.app = Some(AppSpec {
        package: app.package.clone(),
        digest: resolved.digest,
        params: body.params.clone(),
        sensitive,
    });
    let generation = body.generation.unwrap_or(pool.generation);
    let updated = state
        .store
        .reconfigure_pool(&pool.id, generation, &spec, state.now())
        .await
        .map_err(|e| {
            let path = format!("{}/{}/{}", org.name, project.name, pool.name);
            ApiError::from(e)
                .naming(&pool.id, &path)
                .with_field("generation")
        })?;
    state.wake();
    Ok(Json(pool_view(&state, &org, &project, &updated).await?))
}
