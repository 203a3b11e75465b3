//! Providers as a project sees them: its own and every zone-scoped one. Owners of the project
//! a provider registered in change its scope and its pricing strategy.

use std::collections::BTreeMap;
use std::str::FromStr;

use axum::Json;
use axum::extract::State;
use orc_common::text::quoted;
use rust_decimal::Decimal;

use super::ApiState;
use super::error::{ApiError, ApiResult, ErrorBody};
use super::extract::{JsonBody, PathArgs};
use super::tenancy::project_with_role;
use super::views::{
    CatalogView, ChangeScope, ClassView, OfferingView, OsView, ProviderView, SetPricing, SiteView,
};
use crate::model::{
    Markup, Name, Node, NodeState, PricingStrategy, Project, Provider, ProviderId, ProviderScope,
    Role, sys_project_id,
};
use crate::store::StoreError;
use orc_zone_model::access::Caller;
use orc_zone_model::gateway::{gateway_pool_site, is_gateway_pool_of};

/// The provider `text` names among those visible to `project` (`field` names where the
/// request gave it). A provider is named by its id; by its full name
/// `<org>/<project>/<name>`; or by a bare name, which is first the operator's (a provider of
/// org `sys` visible to the project: bare names are unique across that org) and only then the
/// project's own of that name. So no tenant's provider can pass for the operator's, and a
/// tenant's name never blocks one the operator registers later.
pub(super) async fn visible_provider(
    state: &ApiState,
    project: &Project,
    field: &str,
    text: &str,
) -> ApiResult<Provider> {
    let visible = state.store.list_providers_for(&project.id).await?;
    let not_visible = || {
        ApiError::not_found(
            field,
            format!("no provider {} is visible to this project", quoted(text)),
        )
    };
    if let Ok(id) = ProviderId::from_str(text) {
        return visible
            .into_iter()
            .find(|p| p.id == id)
            .ok_or_else(not_visible);
    }
    if let Some((org, rest)) = text.split_once('/') {
        let Some((home, name)) = rest.split_once('/') else {
            return Err(not_visible());
        };
        let (Ok(org), Ok(home), Ok(name)) = (
            org.parse::<Name>(),
            home.parse::<Name>(),
            name.parse::<Name>(),
        ) else {
            return Err(not_visible());
        };
        let home = match state.store.project_by_path(&org, &home).await {
            Ok(home) => home,
            Err(StoreError::NotFound { .. }) => return Err(not_visible()),
            Err(e) => return Err(e.into()),
        };
        return visible
            .into_iter()
            .find(|p| p.project_id == home.id && p.name == name)
            .ok_or_else(not_visible);
    }
    let named = |p: &&Provider| p.name.as_str() == text;
    visible
        .iter()
        .filter(|p| p.is_operators())
        .find(named)
        .or_else(|| {
            visible
                .iter()
                .filter(|p| p.project_id == project.id)
                .find(named)
        })
        .cloned()
        .ok_or_else(not_visible)
}

/// The name people read and give for `p` ([`Provider::full_name`]).
pub(super) async fn provider_full_name(state: &ApiState, p: &Provider) -> ApiResult<String> {
    if p.is_operators() {
        return Ok(p.name.to_string());
    }
    let project = state.store.get_project(&p.project_id).await?;
    let org = state.store.get_org(&project.org_id).await?;
    Ok(p.full_name(&org.name, &project.name))
}

/// `org/project` of the project a provider registered in.
async fn provider_home(state: &ApiState, p: &Provider) -> ApiResult<String> {
    let project = state.store.get_project(&p.project_id).await?;
    let org = state.store.get_org(&project.org_id).await?;
    Ok(format!("{}/{}", org.name, project.name))
}

pub(super) async fn provider_view(state: &ApiState, p: &Provider) -> ApiResult<ProviderView> {
    let home = provider_home(state, p).await?;
    let replicas = state.directory.replicas(p);
    let catalog = state.directory.catalog(p).as_ref().map(catalog_view);
    let mut view = ProviderView::new(p, home, replicas, catalog);
    view.name = provider_full_name(state, p).await?;
    Ok(view)
}

/// Requires that the provider registered in `project` (scope and pricing are changed there).
async fn require_home(state: &ApiState, project: &Project, p: &Provider) -> ApiResult<()> {
    if p.project_id == project.id {
        return Ok(());
    }
    let home = provider_home(state, p).await?;
    let name = provider_full_name(state, p).await?;
    let own = state
        .store
        .list_providers_for(&project.id)
        .await?
        .into_iter()
        .find(|own| own.project_id == project.id && own.name == p.name);
    let hint = match own {
        Some(own) => format!(
            "; this project's own is {}",
            provider_full_name(state, &own).await?
        ),
        None => String::new(),
    };
    Err(ApiError::forbidden(format!(
        "provider {name} belongs to project {home}; change it there{hint}"
    )))
}

/// Providers visible to the project: its own and every zone-scoped one, by id.
#[utoipa::path(get, path = "/api/orgs/{org}/projects/{project}/providers", tag = "providers",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name")),
    responses((status = 200, body = Vec<ProviderView>), (status = 404, body = ErrorBody)))]
pub(super) async fn list_providers(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project)): PathArgs<(String, String)>,
) -> ApiResult<Json<Vec<ProviderView>>> {
    let (_, project) = project_with_role(&state, &caller, &org, &project, Role::Viewer).await?;
    let mut out = Vec::new();
    for p in state.store.list_providers_for(&project.id).await? {
        let view = provider_view(&state, &p).await?;
        out.push(as_seen_from(view, &p, &project, &caller));
    }
    Ok(Json(out))
}

/// What a project that only uses a provider sees of it: not the markup its operator set
/// (prices already include it), nor the hosts and process ids of its replicas. Its own
/// project and the zone's operators see everything.
fn as_seen_from(
    mut view: ProviderView,
    provider: &Provider,
    project: &Project,
    caller: &Caller,
) -> ProviderView {
    if provider.project_id == project.id || caller.is_operator() {
        return view;
    }
    view.pricing.markup = None;
    for replica in &mut view.replicas {
        replica.host = String::new();
        replica.pid = 0;
    }
    view
}

/// One provider visible to the project, with its replicas and catalog.
#[utoipa::path(get, path = "/api/orgs/{org}/projects/{project}/providers/{provider}",
    tag = "providers",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("provider" = String, Path, description = "Provider: bare name, full name org/project/name, or id")),
    responses((status = 200, body = ProviderView), (status = 404, body = ErrorBody)))]
pub(super) async fn get_provider(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, provider)): PathArgs<(String, String, String)>,
) -> ApiResult<Json<ProviderView>> {
    let (_, project) = project_with_role(&state, &caller, &org, &project, Role::Viewer).await?;
    let p = visible_provider(&state, &project, "provider", &provider).await?;
    let view = provider_view(&state, &p).await?;
    Ok(Json(as_seen_from(view, &p, &project, &caller)))
}

/// Changes who may use the provider: `{"scope": "zone"}` makes it visible to every project
/// of the zone, which only a zone operator (owner of org `sys`) may do (names cannot clash:
/// bare names are unique across org `sys`, every other provider is read by its full name);
/// `{"scope": "project"}` narrows it to its own project again (owners of that project, or an
/// operator).
#[utoipa::path(post,
    path = "/api/orgs/{org}/projects/{project}/providers/{provider}/change-scope",
    tag = "providers", request_body = ChangeScope,
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("provider" = String, Path, description = "Provider: bare name, full name org/project/name, or id")),
    responses((status = 200, body = ProviderView), (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn change_scope(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, provider)): PathArgs<(String, String, String)>,
    body: JsonBody<ChangeScope>,
) -> ApiResult<Json<ProviderView>> {
    let (_, project) = project_with_role(&state, &caller, &org, &project, Role::Owner).await?;
    let body = body.parse()?;
    let scope: ProviderScope = body.scope.parse().map_err(|_| {
        ApiError::invalid(
            "scope",
            format!("scope {} is not one of zone, project", quoted(&body.scope)),
        )
    })?;
    let p = visible_provider(&state, &project, "provider", &provider).await?;
    require_home(&state, &project, &p).await?;
    if scope == ProviderScope::Zone && p.scope != ProviderScope::Zone {
        // Every tenant's pools may land on a zone-scoped provider, which then sees their
        // deploys and sets their prices: publishing one is the operator's decision.
        if !caller.is_operator() {
            return Err(ApiError::forbidden(
                "making a provider visible to the whole zone needs the owner role in org sys \
                 (zone operator)",
            ));
        }
    }
    let p = state
        .store
        .set_provider_scope(&p.id, scope, state.now())
        .await?;
    state.wake();
    Ok(Json(provider_view(&state, &p).await?))
}

/// Sets the provider's pricing strategy: `{"markup": "0.15"}` (0 allowed); `{"markup": null}`
/// removes it, after which new nodes are unpriced. Nodes keep the markup they were admitted
/// with.
#[utoipa::path(put,
    path = "/api/orgs/{org}/projects/{project}/providers/{provider}/pricing",
    tag = "providers", request_body = SetPricing,
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("provider" = String, Path, description = "Provider: bare name, full name org/project/name, or id")),
    responses((status = 200, body = ProviderView), (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn set_pricing(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, provider)): PathArgs<(String, String, String)>,
    body: JsonBody<SetPricing>,
) -> ApiResult<Json<ProviderView>> {
    // Authorize before judging the body (apply_pricing checks again, with the provider).
    project_with_role(&state, &caller, &org, &project, Role::Owner).await?;
    let body = body.parse()?;
    let pricing = match &body.markup {
        None => PricingStrategy::None,
        Some(text) => {
            let value = Decimal::from_str(text.trim()).map_err(|_| {
                ApiError::invalid(
                    "markup",
                    format!(
                        "markup {} is not a decimal number such as \"0.15\"",
                        quoted(text)
                    ),
                )
            })?;
            PricingStrategy::Markup(
                Markup::new(value).map_err(|e| ApiError::invalid("markup", e.to_string()))?,
            )
        }
    };
    apply_pricing(&state, &caller, &org, &project, &provider, pricing).await
}

/// Removes the provider's pricing strategy: new nodes are unpriced.
#[utoipa::path(delete,
    path = "/api/orgs/{org}/projects/{project}/providers/{provider}/pricing",
    tag = "providers",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("provider" = String, Path, description = "Provider: bare name, full name org/project/name, or id")),
    responses((status = 200, body = ProviderView), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(super) async fn remove_pricing(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, provider)): PathArgs<(String, String, String)>,
) -> ApiResult<Json<ProviderView>> {
    apply_pricing(
        &state,
        &caller,
        &org,
        &project,
        &provider,
        PricingStrategy::None,
    )
    .await
}

async fn apply_pricing(
    state: &ApiState,
    caller: &Caller,
    org: &str,
    project: &str,
    provider: &str,
    pricing: PricingStrategy,
) -> ApiResult<Json<ProviderView>> {
    let (_, project) = project_with_role(state, caller, org, project, Role::Owner).await?;
    let p = visible_provider(state, &project, "provider", provider).await?;
    require_home(state, &project, &p).await?;
    let p = state
        .store
        .set_provider_pricing(&p.id, pricing, state.now())
        .await?;
    Ok(Json(provider_view(state, &p).await?))
}

/// The provider's sites: those its last complete inventory reported open, and those with
/// tenant nodes, with each site's gateway. The provider's own project counts every tenant's
/// nodes; another project that sees the provider counts only its own.
#[utoipa::path(get,
    path = "/api/orgs/{org}/projects/{project}/providers/{provider}/sites",
    tag = "providers",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("provider" = String, Path, description = "Provider: bare name, full name org/project/name, or id")),
    responses((status = 200, body = Vec<SiteView>), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(super) async fn list_sites(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, provider)): PathArgs<(String, String, String)>,
) -> ApiResult<Json<Vec<SiteView>>> {
    let (_, project) = project_with_role(&state, &caller, &org, &project, Role::Viewer).await?;
    let p = visible_provider(&state, &project, "provider", &provider).await?;
    let home = p.project_id == project.id;
    let mut sites: BTreeMap<String, SiteView> = BTreeMap::new();
    let blank = |site: &str| SiteView {
        site: site.to_string(),
        public_ipv4: None,
        private_prefix: None,
        reported: false,
        status: String::new(),
        tenant_nodes: 0,
        gateway: None,
    };
    for reported in state.store.provider_sites(&p.id).await? {
        let view = sites
            .entry(reported.site.clone())
            .or_insert_with(|| blank(&reported.site));
        view.public_ipv4 = reported.public_ipv4;
        view.private_prefix = reported.private_prefix;
        view.reported = true;
    }
    if home {
        for used in state.store.sites_in_use().await? {
            if used.provider_id == p.id {
                sites
                    .entry(used.site.clone())
                    .or_insert_with(|| blank(&used.site))
                    .tenant_nodes = used.nodes;
            }
        }
    } else {
        for pool in state.store.list_pools(&project.id).await? {
            if pool.spec.provider_id != p.id {
                continue;
            }
            for node in state.store.list_nodes_by_pool(&pool.id, false).await? {
                let live = matches!(
                    node.status.state,
                    NodeState::Deploying
                        | NodeState::Running
                        | NodeState::Lost
                        | NodeState::Destroying
                );
                if let (true, Some(site)) = (live, &node.status.site) {
                    sites
                        .entry(site.clone())
                        .or_insert_with(|| blank(site))
                        .tenant_nodes += 1;
                }
            }
        }
    }
    let gateways = site_gateways(&state, &p).await?;
    for (site, view) in &mut sites {
        view.gateway = gateways.get(site).map(|n| n.status.state.to_string());
        // `core` reports no inventory: its one site is the zone's own host, always there.
        if p.is_core() && site.as_str() == orc_zone_model::CORE_LOCAL_SITE {
            view.reported = true;
        }
        view.status = if view.reported {
            "open"
        } else {
            "not reported yet"
        }
        .to_string();
    }
    Ok(Json(sites.into_values().collect()))
}

/// Each site's gateway node (the live node of the provider's gateway pool there), by site.
pub(super) async fn site_gateways(
    state: &ApiState,
    p: &Provider,
) -> ApiResult<BTreeMap<String, Node>> {
    let mut out = BTreeMap::new();
    for pool in state.store.list_pools(&sys_project_id()).await? {
        if pool.spec.provider_id != p.id {
            continue;
        }
        if !is_gateway_pool_of(&pool, p) {
            continue;
        }
        let Some(site) = gateway_pool_site(&pool) else {
            continue;
        };
        if let Some(node) = state
            .store
            .list_nodes_by_pool(&pool.id, false)
            .await?
            .into_iter()
            .next()
        {
            out.insert(site.to_string(), node);
        }
    }
    Ok(out)
}

/// The view of a catalog a provider reported: classes and OS images sorted by id.
fn catalog_view(c: &orc_proto::Catalog) -> CatalogView {
    let mut classes: Vec<ClassView> = c
        .classes
        .iter()
        .map(|class| ClassView {
            id: class.id.to_string(),
            title: class.title.clone(),
            can_place: c
                .availability
                .classes
                .iter()
                .any(|a| a.class == class.id && a.can_place),
            offerings: class
                .offerings
                .iter()
                .map(|o| OfferingView {
                    cpu: o.shape.vcpus,
                    mem: o.shape.memory_gib,
                    arch: o.shape.arch.to_string(),
                    plan: o.plan.clone(),
                })
                .collect(),
        })
        .collect();
    classes.sort_by(|a, b| a.id.cmp(&b.id));
    let mut os: Vec<OsView> =
        c.os.iter()
            .map(|o| OsView {
                id: o.id.to_string(),
                title: o.title.clone(),
            })
            .collect();
    os.sort_by(|a, b| a.id.cmp(&b.id));
    CatalogView {
        classes,
        os,
        public_ipv4_offered: c.availability.public_ipv4_offered,
    }
}
