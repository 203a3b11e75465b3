//! Pools and what hangs off them: nodes, app logs, events, usage, and quotes.
//!
//! Viewers read; members create, resize, reconfigure and delete pools and ask for quotes.
//! Every write that changes desired state wakes the reconcilers. A pool is deleted in two
//! steps: `DELETE` marks it deleting (its nodes turn `destroying`), and the pool reconciler
//! removes the row once every node has ended.

use std::collections::{BTreeMap, BTreeSet};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use orc_common::text::quoted;
use orc_common::{Architecture, Shape};
use rust_decimal::Decimal;

use super::ApiState;
use super::error::{ApiError, ApiResult, ErrorBody, ErrorCode};
use super::extract::{JsonBody, PathArgs, QueryArgs, parse_query_value};
use super::providers::{site_gateways, visible_provider};
use super::registry::{check_manifest_params, resolve_app};
use super::tenancy::{parse_name, project_with_role};
use super::views::{
    AgentView, CreatePool, EndpointAccessView, EndpointView, EventView, EventsQuery, LogLineView,
    NodeView, NodesQuery, ParkedView, PlacedView, PoolEndpointsView, PoolView, QuoteRequest,
    QuoteView, ReconfigurePool, ResizePool, ShapeView, SlotEndpointView, UsageLineView, UsageQuery,
    UsageView, private_address,
};
use crate::backend::NodeBackend;
use crate::model::{
    AppSpec, Endpoint, EventId, EventScope, Month, NodeId, NodeState, Org, Pool, PoolSpec, Project,
    Provider, Role, SensitiveParams,
};
use crate::pricing::{markup_at_admission, tenant_price};
use crate::store::StoreError;
use orc_zone_model::access::Caller;

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

/// The pool's SSH keys, normalised, each checked and named by its place in the list when it
/// is not a public key; a key given twice is kept once.
fn parse_ssh_keys(lines: &[String]) -> ApiResult<Vec<String>> {
    use orc_zone_model::ssh::{SSH_KEYS_MAX, SshPublicKey};
    if lines.len() > SSH_KEYS_MAX {
        return Err(ApiError::invalid(
            "ssh_keys",
            format!(
                "ssh_keys holds {} keys; a pool takes at most {SSH_KEYS_MAX}",
                lines.len()
            ),
        ));
    }
    let mut keys: Vec<String> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let key = SshPublicKey::parse(line).map_err(|e| {
            ApiError::invalid(
                format!("ssh_keys[{i}]"),
                format!("ssh_keys[{i}] is not an OpenSSH public key: it {e}"),
            )
        })?;
        let line = key.line();
        if !keys.contains(&line) {
            keys.push(line);
        }
    }
    Ok(keys)
}

/// Checks a requested shape, naming the field at fault.
fn parse_shape(shape: &ShapeView) -> ApiResult<Shape> {
    if !(1..=1024).contains(&shape.cpu) {
        return Err(ApiError::invalid(
            "shape.cpu",
            format!("shape.cpu must be 1 to 1024 vCPUs, not {}", shape.cpu),
        ));
    }
    if !(1..=16_384).contains(&shape.mem) {
        return Err(ApiError::invalid(
            "shape.mem",
            format!("shape.mem must be 1 to 16384 GiB, not {}", shape.mem),
        ));
    }
    let arch = match shape.arch.as_deref() {
        None | Some("x86_64") => Architecture::X86_64,
        Some("arm64") => Architecture::Arm64,
        Some(other) => {
            return Err(ApiError::invalid(
                "shape.arch",
                format!("shape.arch {} is not one of x86_64, arm64", quoted(other)),
            ));
        }
    };
    for (i, disk) in shape.disks.iter().enumerate() {
        if !(1..=65_536).contains(disk) {
            return Err(ApiError::invalid(
                format!("shape.disks[{i}]"),
                format!("a disk must be 1 to 65536 GiB, not {disk}"),
            ));
        }
    }
    if shape.disks.len() > 16 {
        return Err(ApiError::invalid("shape.disks", "at most 16 extra disks"));
    }
    Ok(Shape {
        vcpus: shape.cpu,
        memory_gib: shape.mem,
        arch,
        disks_gib: shape.disks.clone(),
    })
}

/// Checks class and OS against the provider's catalog when one is known.
fn check_catalog(state: &ApiState, provider: &Provider, class: &str, os: &str) -> ApiResult<()> {
    if class.trim().is_empty() {
        return Err(ApiError::invalid("class", "class must name a region class"));
    }
    if os.trim().is_empty() {
        return Err(ApiError::invalid(
            "os",
            "os must name an operating system id",
        ));
    }
    if let Some(catalog) = state.directory.catalog(provider) {
        if !catalog.classes.iter().any(|c| c.id.as_str() == class) {
            let known: BTreeSet<&str> = catalog.classes.iter().map(|c| c.id.as_str()).collect();
            return Err(ApiError::invalid(
                "class",
                format!(
                    "provider {} offers no class {class:?} (it offers: {})",
                    provider.name,
                    known.into_iter().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        if !catalog.os.iter().any(|o| o.id.as_str() == os) {
            let known: BTreeSet<&str> = catalog.os.iter().map(|o| o.id.as_str()).collect();
            return Err(ApiError::invalid(
                "os",
                format!(
                    "provider {} offers no os {os:?} (it offers: {})",
                    provider.name,
                    known.into_iter().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
    }
    Ok(())
}

fn valid_param_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.len() <= 64
}

fn check_params(field: &str, params: &BTreeMap<String, String>) -> ApiResult<()> {
    for name in params.keys() {
        if !valid_param_name(name) {
            return Err(ApiError::invalid(
                format!("{field}.{name}"),
                format!(
                    "param name {name:?} must start with a-z and hold only a-z, 0-9 and _ \
                     (at most 64)"
                ),
            ));
        }
    }
    Ok(())
}

/// Placement keys follow the param-name rule; values are short non-empty words.
fn check_placement(placement: &BTreeMap<String, String>) -> ApiResult<()> {
    check_params("placement", placement)?;
    for (key, value) in placement {
        let ok = !value.is_empty()
            && value.len() <= 128
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
        if !ok {
            return Err(ApiError::invalid(
                format!("placement.{key}"),
                format!(
                    "placement value {value:?} must be 1 to 128 of A-Z, a-z, 0-9, '.', '-' and '_'"
                ),
            ));
        }
    }
    Ok(())
}

/// Refuses a plain param that the app declares sensitive: plain params are shown to the
/// project's viewers and placed in the app's environment. The message names the param,
/// never its value.
fn check_plain_params(
    package: &str,
    sensitive: &BTreeSet<String>,
    params: &BTreeMap<String, String>,
) -> ApiResult<()> {
    match params.keys().find(|name| sensitive.contains(*name)) {
        Some(name) => Err(ApiError::invalid(
            "params",
            format!(
                "param {name} is sensitive for app {package}: send it in sensitive_params (orc: --sensitive {name}=@FILE), never as a plain param"
            ),
        )),
        None => Ok(()),
    }
}

fn check_package(package: &str) -> ApiResult<()> {
    let ok = package.split_once('/').is_some_and(|(org, rest)| {
        let (name, tag) = rest.split_once(':').unwrap_or((rest, ""));
        org.parse::<crate::model::Name>().is_ok()
            && name.parse::<crate::model::Name>().is_ok()
            && (tag.is_empty()
                || tag
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')))
    });
    if ok {
        Ok(())
    } else {
        Err(ApiError::invalid(
            "app",
            format!(
                "app {} is not a package reference of the form org/name:tag",
                quoted(package)
            ),
        ))
    }
}

/// The endpoints an app's manifest declares, as a pool's.
fn manifest_endpoints(manifest: &orc_zone_model::registry::AppManifest) -> Vec<Endpoint> {
    let mut out: Vec<Endpoint> = manifest
        .endpoints
        .iter()
        .map(|e| Endpoint {
            name: e.name.clone(),
            protocol: e.protocol.clone(),
            port: e.port,
        })
        .collect();
    out.sort();
    out
}

fn parse_endpoints(endpoints: &[EndpointView]) -> ApiResult<Vec<Endpoint>> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for (i, e) in endpoints.iter().enumerate() {
        if e.name.parse::<crate::model::Name>().is_err() || !seen.insert(e.name.clone()) {
            return Err(ApiError::invalid(
                format!("endpoints[{i}].name"),
                format!(
                    "endpoint name {} must be a unique DNS label",
                    quoted(&e.name)
                ),
            ));
        }
        if !matches!(e.protocol.as_str(), "http" | "tcp") {
            return Err(ApiError::invalid(
                format!("endpoints[{i}].protocol"),
                format!("protocol {} is not one of http, tcp", quoted(&e.protocol)),
            ));
        }
        if e.port == 0 {
            return Err(ApiError::invalid(
                format!("endpoints[{i}].port"),
                "port must be 1 to 65535",
            ));
        }
        out.push(Endpoint {
            name: e.name.clone(),
            protocol: e.protocol.clone(),
            port: e.port,
        });
    }
    out.sort();
    Ok(out)
}

fn check_size(size: u32) -> ApiResult<()> {
    if size > MAX_POOL_SIZE {
        return Err(ApiError::invalid(
            "size",
            format!("size must be 0 to {MAX_POOL_SIZE}, not {size}"),
        ));
    }
    Ok(())
}

/// The project's pools, by name.
#[utoipa::path(get, path = "/api/orgs/{org}/projects/{project}/pools", tag = "pools",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name")),
    responses((status = 200, body = Vec<PoolView>), (status = 404, body = ErrorBody)))]
pub(super) async fn list_pools(
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
pub(super) async fn create_pool(
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
    check_catalog(&state, &provider, &body.class, &body.os)?;
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
            &body.class,
            &body.os,
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
            region_class: body.class.clone(),
            os: body.os.clone(),
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
async fn pool_event(
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
pub(super) async fn get_pool(
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
pub(super) async fn pool_endpoints(
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
pub(super) async fn delete_pool(
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
pub(super) async fn resize_pool(
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
pub(super) async fn reconfigure_pool(
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

/// The pool's nodes, by slot.
#[utoipa::path(get, path = "/api/orgs/{org}/projects/{project}/pools/{pool}/nodes",
    tag = "pools", params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("pool" = String, Path, description = "Pool name"), NodesQuery),
    responses((status = 200, body = Vec<NodeView>), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(super) async fn list_nodes(
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
    // Where a node went is the zone operators' to see; a tenant sees the neutral site.
    let operator = caller.zone_role().is_some();
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
                view.agent = agents.get(&n.id).map(|agent| {
                    let live = state.agents.as_ref().and_then(|a| a.live(&n.id));
                    AgentView::of(agent, live.map(|t| t.millis()))
                });
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
pub(super) async fn pool_logs(
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

/// The project's events, oldest first.
#[utoipa::path(get, path = "/api/orgs/{org}/projects/{project}/events", tag = "events",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"), EventsQuery),
    responses((status = 200, body = Vec<EventView>), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(super) async fn list_events(
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
pub(super) async fn usage(
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
            .map(|(c, a)| (c, a.to_string()))
            .collect(),
    }))
}

/// The hours each running node of `lines` has run beyond its written usage, up to `now`.
/// The zone writes usage once an hour; a reader of the current month sees the time to date.
/// Read-only: the next accrual writes the same hours, so nothing is counted twice.
async fn hours_to_date(
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

fn proto_id<T>(
    field: &str,
    text: String,
    make: impl FnOnce(String) -> Result<T, orc_proto::EmptyId>,
) -> ApiResult<T> {
    make(text).map_err(|_| ApiError::invalid(field, format!("{field} must not be empty")))
}

/// Asks a provider what a node of this shape would cost, and where (members). Nothing is
/// created: the answer is a preview, like the request wizard's.
#[utoipa::path(post, path = "/api/orgs/{org}/projects/{project}/quote", tag = "pools",
    request_body = QuoteRequest,
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name")),
    responses((status = 200, body = QuoteView), (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 503, body = ErrorBody)))]
pub(super) async fn quote(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project)): PathArgs<(String, String)>,
    body: JsonBody<QuoteRequest>,
) -> ApiResult<Json<QuoteView>> {
    let (org_row, project_row) =
        project_with_role(&state, &caller, &org, &project, Role::Member).await?;
    let body = body.parse()?;
    let shape = parse_shape(&body.shape)?;
    let provider = visible_provider(&state, &project_row, "provider", &body.provider)
        .await
        .map_err(|e| ApiError::invalid("provider", e.message))?;
    if provider.is_core() {
        return Err(ApiError::invalid(
            "provider",
            "provider core runs apps on the zone host; its slots are not quoted in advance",
        ));
    }
    check_catalog(&state, &provider, &body.class, &body.os)?;
    check_placement(&body.placement)?;
    let Some(backends) = &state.backends else {
        return Err(ApiError::new(
            ErrorCode::Unavailable,
            "this zone has no provider connections to ask",
        ));
    };
    let request = preview_quote(
        &state,
        format!("{}/{}/quote-preview", org_row.name, project_row.name),
        shape,
        &body.class,
        &body.os,
        body.public,
        &body.placement,
    )
    .await?;
    let reply = backends.quote(&provider, request).await?;
    let name = super::providers::provider_full_name(&state, &provider).await?;
    Ok(Json(quote_view(&provider, &name, reply)))
}

/// A preview quote for a fresh node id of `pool` (`org/project/name`): the provider answers
/// it like any quote but holds nothing for it.
async fn preview_quote(
    state: &ApiState,
    pool: String,
    shape: Shape,
    class: &str,
    os: &str,
    public: bool,
    placement: &BTreeMap<String, String>,
) -> ApiResult<orc_proto::Quote> {
    let node = NodeId::from_counter(state.store.allocate_ids(1).await?);
    Ok(orc_proto::Quote {
        pool: proto_id("pool", pool, orc_proto::PoolPath::new)?,
        node_id: node,
        purpose: orc_proto::Purpose::Tenant,
        shape,
        class: proto_id("class", class.to_string(), orc_proto::ClassId::new)?,
        os: proto_id("os", os.to_string(), orc_proto::OsId::new)?,
        pinned_site: None,
        public,
        placement: placement.clone(),
        preview: true,
    })
}

/// How long pool creation waits for the provider's answer to its preview quote.
pub const PLACEABLE_CHECK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Refuses a pool that nothing its provider offers can ever place: a preview quote answered
/// `unplaceable` (no site sells the shape, the OS or the plan at all) ends the request with
/// the provider's words, which say what it offers instead. Any other answer, or none within
/// [`PLACEABLE_CHECK_TIMEOUT`] (no replica connected, a busy provider), lets the pool
/// through: a passing lack of capacity parks its nodes and they are retried.
async fn check_placeable(
    state: &ApiState,
    provider: &Provider,
    quote: orc_proto::Quote,
) -> ApiResult<()> {
    let Some(backends) = &state.backends else {
        return Ok(());
    };
    let answer =
        tokio::time::timeout(PLACEABLE_CHECK_TIMEOUT, backends.quote(provider, quote)).await;
    match answer {
        Ok(Ok(orc_proto::QuoteReply::Refused(refusal)))
            if refusal.kind == orc_proto::RefusalKind::Unplaceable =>
        {
            Err(ApiError::new(
                ErrorCode::Unplaceable,
                format!(
                    "provider {} can never place this pool: {}",
                    provider.name, refusal.words
                ),
            ))
        }
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => {
            tracing::debug!(provider = %provider.name, %error, "no placeability check for a new pool");
            Ok(())
        }
        Err(_) => {
            tracing::debug!(provider = %provider.name, "the placeability check of a new pool timed out");
            Ok(())
        }
    }
}

/// The tenant's view of a provider's quote reply, with the provider's pricing strategy;
/// `name` is the provider's full name.
pub fn quote_view(provider: &Provider, name: &str, reply: orc_proto::QuoteReply) -> QuoteView {
    match reply {
        orc_proto::QuoteReply::Offer(offer) => {
            let markup = markup_at_admission(provider.pricing);
            let price = tenant_price(offer.price.as_ref(), markup);
            QuoteView {
                provider: name.to_string(),
                outcome: "offer".to_string(),
                words: offer.words,
                site: Some(offer.site.to_string()),
                price: price.as_ref().map(super::views::MoneyView::from),
                markup: markup.map(|m| m.to_string()),
                refusal: None,
            }
        }
        orc_proto::QuoteReply::Refused(refusal) => QuoteView {
            provider: name.to_string(),
            outcome: "refused".to_string(),
            words: refusal.words,
            site: None,
            price: None,
            markup: None,
            refusal: Some(refusal.kind.as_str().to_string()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn param_names() {
        assert!(valid_param_name("partner_id"));
        assert!(!valid_param_name("Partner"));
        assert!(!valid_param_name("1a"));
        assert!(!valid_param_name("a-b"));
    }
}
