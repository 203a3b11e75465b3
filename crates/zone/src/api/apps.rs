//! Apps on a project's nodes: plan, deploy, status, history, rollback, remove.
//!
//! A deploy takes the app the client evaluated from its `orch.pkl`, checks it again, and
//! resolves every image of the zone's registry to the digest its tag names now. The same
//! resolved app again is a no-op; anything else makes a new, immutable revision. Whether it
//! can be placed is the pure planner's answer over the project's nodes (their pool's shape,
//! less what the node itself needs, and less what other apps hold); one that cannot is
//! BLOCKED with the reason and nothing of it is applied. Moving replicas is the rollout
//! controller's ([`crate::rollouts`]), which a deploy wakes.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use orc_app_model::planner;
use orc_app_model::revision::{DeploymentState, ResolvedApp, ResolvedImage, diff};
use orc_app_model::{AppSpec, ImageRef};
use orc_runtime::registry::{self, RegistryAuth};

use super::ApiState;
use super::error::{ApiError, ApiResult, ErrorBody, ErrorCode};
use super::extract::{JsonBody, PathArgs};
use super::tenancy::{parse_name, project_with_role};
use super::views::{
    AppPlanView, AppReplicaView, AppRevisionView, AppRouteView, AppStatusView, BlockedView,
    ChangeView, DeployApp, ImageView, ProjectAppView, RollbackApp,
};
use crate::model::{Name, Org, Project, ProjectId, Role};
use crate::rollouts::{self, Cluster, Documents};
use crate::store::{AppReplicaRow, AppRevisionRow};
use orc_zone_model::access::Caller;

fn document_of(row: &AppRevisionRow) -> ApiResult<ResolvedApp> {
    Ok(rollouts::document(row)?)
}

fn images_of(app: &ResolvedApp) -> Vec<ImageView> {
    app.images
        .iter()
        .map(|(workload, image)| ImageView {
            workload: workload.clone(),
            reference: image.reference.clone(),
            digest: image.digest.clone(),
        })
        .collect()
}

/// Checks the app the client sent, naming the field of each problem.
fn checked(body: &DeployApp) -> ApiResult<AppSpec> {
    orc_app_model::check(&body.app).map_err(|invalid| {
        let first = invalid.problems.first();
        let field = first
            .map(|p| format!("app.{}", p.field))
            .unwrap_or_else(|| "app".into());
        let message = invalid
            .problems
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        ApiError::invalid(field, message)
    })
}

/// The login an app gives for registry `host`: its user name and the value of the secret
/// it names; `None` when it names none (an anonymous pull).
async fn registry_login(
    state: &ApiState,
    project: &Project,
    spec: &AppSpec,
    host: &str,
) -> ApiResult<Option<(String, String)>> {
    let Some(registry) = spec.registries.get(host) else {
        return Ok(None);
    };
    let field = format!("app.registries[\"{host}\"].passwordSecret");
    let name: orc_zone_store::SecretName = registry
        .password_secret
        .parse()
        .map_err(|e| ApiError::invalid(field.clone(), format!("{e}")))?;
    let value = state
        .store
        .secret_value(&project.id, &name)
        .await?
        .ok_or_else(|| {
            ApiError::invalid(
                field,
                format!(
                    "secret {name} is not set in project {}: set it with `orc secret set {name}`",
                    project.name
                ),
            )
        })?;
    Ok(Some((registry.username.clone(), value.to_string())))
}

/// Resolves an image of another registry to the digest its tag names now (or checks that
/// its digest exists), with the login the app gives for that registry.
async fn resolve_other(
    state: &ApiState,
    project: &Project,
    spec: &AppSpec,
    reference: &ImageRef,
    field: &str,
) -> ApiResult<String> {
    let host = reference.host.clone().unwrap_or_default();
    let login = registry_login(state, project, spec, &host).await?;
    let auth = match login {
        Some((username, password)) => RegistryAuth::Basic { username, password },
        None => RegistryAuth::Anonymous,
    };
    let wanted = reference
        .digest
        .clone()
        .or_else(|| reference.tag.clone())
        .unwrap_or_else(|| "latest".into());
    let url = format!(
        "{}/v2/{}/manifests/{wanted}",
        registry::base_url(&host),
        reference.repository
    );
    let client = reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(10))
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))?;
    let unreachable = |why: String| {
        ApiError::invalid(
            field.to_string(),
            format!(
                "registry {host} cannot tell what {} names: {why}",
                reference
            ),
        )
    };
    let response = registry::get(&client, &url, registry::MANIFEST_ACCEPT, &auth)
        .await
        .map_err(unreachable)?;
    let status = response.status();
    if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
        return Err(ApiError::invalid(
            field.to_string(),
            format!(
                "registry {host} refused to show {reference} ({status}): give its login in \
                 `registries[\"{host}\"]` with the password in a secret"
            ),
        ));
    }
    if status == StatusCode::NOT_FOUND {
        return Err(ApiError::invalid(
            field.to_string(),
            format!("registry {host} has no image {reference}"),
        ));
    }
    if !status.is_success() {
        return Err(unreachable(status.to_string()));
    }
    let header = response
        .headers()
        .get("docker-content-digest")
        .and_then(|h| h.to_str().ok())
        .map(str::to_string);
    let body = response
        .bytes()
        .await
        .map_err(|e| unreachable(e.to_string()))?;
    let computed = {
        use sha2::Digest as _;
        let hash = sha2::Sha256::digest(&body);
        let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
        format!("sha256:{hex}")
    };
    if let Some(said) = header
        && said != computed
    {
        return Err(unreachable(format!(
            "it said {said}, but the manifest it sent is {computed}"
        )));
    }
    if let Some(digest) = &reference.digest
        && digest != &computed
    {
        return Err(unreachable(format!(
            "the manifest it sent for {digest} is {computed}"
        )));
    }
    Ok(computed)
}

/// Resolves every workload's image to a digest: a tag of the zone's registry to the
/// manifest it names now, a digest to itself once the registry is known to hold it; an
/// image of another registry as that registry answers, with the app's login for it.
async fn resolve(
    state: &ApiState,
    org: &Org,
    project: &Project,
    spec: &AppSpec,
) -> ApiResult<ResolvedApp> {
    let mut images = BTreeMap::new();
    for (kind, name, workload) in spec.workloads() {
        let field = format!("app.{}[\"{name}\"].image", kind.property());
        let reference = ImageRef::parse(&workload.image)
            .map_err(|e| ApiError::invalid(field.clone(), e.to_string()))?;
        let Some(image_org) = reference.org() else {
            let digest = resolve_other(state, project, spec, &reference, &field).await?;
            images.insert(
                name.to_string(),
                ResolvedImage {
                    reference: workload.image.clone(),
                    digest,
                },
            );
            continue;
        };
        if image_org != org.name.as_str() {
            return Err(ApiError::invalid(
                field,
                format!(
                    "{} belongs to org {image_org}; the nodes of {} pull images of their own org only",
                    workload.image, org.name
                ),
            ));
        }
        let repository: Name = reference
            .repository
            .split('/')
            .nth(1)
            .unwrap_or_default()
            .parse()
            .map_err(|e: crate::model::ModelError| {
                ApiError::invalid(field.clone(), e.to_string())
            })?;
        let digest = match (&reference.digest, &reference.tag) {
            (Some(digest), _) => {
                let parsed: orc_zone_model::registry::Digest =
                    digest
                        .parse()
                        .map_err(|e: orc_zone_model::registry::RegistryError| {
                            ApiError::invalid(field.clone(), e.to_string())
                        })?;
                if state
                    .store
                    .image_manifest(&org.id, &repository, &parsed)
                    .await?
                    .is_none()
                {
                    return Err(ApiError::invalid(
                        field,
                        format!("the zone's registry holds no image {}", workload.image),
                    ));
                }
                digest.clone()
            }
            (None, Some(tag)) => state
                .store
                .image_tag(&org.id, &repository, tag)
                .await?
                .map(|d| d.to_string())
                .ok_or_else(|| {
                    ApiError::invalid(
                        field.clone(),
                        format!(
                            "tag {tag} of {}/{repository} does not exist in the zone's registry: \
                             push it first (skopeo copy … docker://<zone>/{}/{repository}:{tag})",
                            org.name, org.name
                        ),
                    )
                })?,
            // `ImageRef::parse` names `latest` when the reference names neither.
            (None, None) => unreachable!("an image reference has a tag or a digest"),
        };
        images.insert(
            name.to_string(),
            ResolvedImage {
                reference: workload.image.clone(),
                digest,
            },
        );
    }
    Ok(ResolvedApp {
        spec: spec.clone(),
        images,
    })
}

/// The labels the zone sets on a node: its pool, its pool's region class, its site.
pub(super) async fn zone_labels(
    state: &ApiState,
    node: &crate::model::Node,
) -> ApiResult<BTreeMap<String, String>> {
    let pool = state.store.get_pool(&node.pool_id).await?;
    Ok(rollouts::zone_labels_of(&pool, node))
}

fn blocked_views(plan: &planner::Plan) -> Vec<BlockedView> {
    plan.blocked
        .iter()
        .map(|(workload, reason)| BlockedView {
            workload: workload.clone(),
            code: reason.code().to_string(),
            reason: reason.to_string(),
        })
        .collect()
}

async fn current_revision(
    state: &ApiState,
    project: &Project,
    app: &Name,
) -> ApiResult<Option<AppRevisionRow>> {
    Ok(state.store.newest_app_revision(&project.id, app).await?)
}

/// What deploying an app would change.
#[utoipa::path(post, path = "/api/orgs/{org}/projects/{project}/apps/plan", tag = "apps",
    request_body = DeployApp,
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name")),
    responses((status = 200, body = AppPlanView), (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn plan_app(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project)): PathArgs<(String, String)>,
    body: JsonBody<DeployApp>,
) -> ApiResult<Json<AppPlanView>> {
    let (org, project) = project_with_role(&state, &caller, &org, &project, Role::Viewer).await?;
    let body = body.parse()?;
    let spec = checked(&body)?;
    let resolved = resolve(&state, &org, &project, &spec).await?;
    let current = current_revision(&state, &project, &spec.name).await?;
    let old = current.as_ref().map(document_of).transpose()?;
    let cluster = Cluster::read(&state.store, &mut Documents::default(), &project).await?;
    let replicas = state
        .store
        .list_app_replicas(&project.id, &spec.name)
        .await?;
    let plan = rollouts::feasibility(&resolved, &cluster, &replicas);
    let mut blocked = blocked_views(&plan);
    blocked.extend(
        rollouts::missing_secrets(&state.store, &project.id, &resolved)
            .await?
            .into_iter()
            .map(|(workload, reason)| BlockedView {
                workload,
                code: "missing_secret".into(),
                reason,
            }),
    );
    blocked.extend(
        rollouts::claims_taken(&state.store, &project.id, &resolved)
            .await?
            .into_iter()
            .map(|(workload, code, reason)| BlockedView {
                workload,
                code: code.into(),
                reason,
            }),
    );
    Ok(Json(AppPlanView {
        app: spec.name.to_string(),
        current_revision: current.as_ref().map(|c| c.number),
        noop: current
            .as_ref()
            .is_some_and(|c| c.digest == resolved.digest()),
        changes: diff(old.as_ref(), &resolved)
            .into_iter()
            .map(|c| ChangeView {
                field: c.field,
                from: c.from,
                to: c.to,
            })
            .collect(),
        images: images_of(&resolved),
        blocked,
    }))
}

async fn deploy_resolved(
    state: &ApiState,
    caller: &Caller,
    org: &Org,
    project: &Project,
    resolved: ResolvedApp,
    origin: &str,
) -> ApiResult<(StatusCode, Json<AppRevisionView>)> {
    let name = resolved.spec.name.clone();
    let row = rollouts::new_revision(
        &state.store,
        project,
        &resolved,
        origin,
        Some(caller.user.name.as_str()),
        state.now(),
    )
    .await?;
    state.wake();
    let words = match &row.reason {
        None => format!("app {name} revision {} is deploying", row.number),
        Some(reason) => format!("app {name} revision {} is blocked: {reason}", row.number),
    };
    app_event(state, org, project, "app.deployed", &words).await;
    tracing::info!(app = %name, revision = row.number, state = %row.state, "app revision made");
    Ok((StatusCode::CREATED, Json(revision_view(&row)?)))
}

async fn app_event(state: &ApiState, org: &Org, project: &Project, kind: &str, words: &str) {
    let scope = crate::model::EventScope {
        org_id: Some(org.id.clone()),
        project_id: Some(project.id.clone()),
        ..Default::default()
    };
    if let Err(e) = state
        .store
        .record_event(&scope, kind, words, state.now())
        .await
    {
        tracing::warn!(error = %e, "app event not recorded");
    }
}

fn revision_view(row: &AppRevisionRow) -> ApiResult<AppRevisionView> {
    let document = document_of(row)?;
    Ok(AppRevisionView {
        number: row.number,
        digest: row.digest.clone(),
        origin: row.origin.clone(),
        state: row.state.clone(),
        reason: row.reason.clone(),
        created_by: row.created_by.clone(),
        created_at: row.created_at.millis(),
        images: images_of(&document),
        app: serde_json::to_value(&document.spec).unwrap_or_default(),
    })
}

/// Deploys an app: a new revision, or nothing when the same resolved app runs (200).
#[utoipa::path(post, path = "/api/orgs/{org}/projects/{project}/apps", tag = "apps",
    request_body = DeployApp,
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name")),
    responses((status = 201, body = AppRevisionView), (status = 200, body = AppRevisionView),
        (status = 400, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(super) async fn deploy_app(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project)): PathArgs<(String, String)>,
    body: JsonBody<DeployApp>,
) -> ApiResult<(StatusCode, Json<AppRevisionView>)> {
    let (org, project) = project_with_role(&state, &caller, &org, &project, Role::Member).await?;
    let body = body.parse()?;
    let spec = checked(&body)?;
    let resolved = resolve(&state, &org, &project, &spec).await?;
    if let Some(current) = current_revision(&state, &project, &spec.name).await?
        && current.digest == resolved.digest()
        && current.state != DeploymentState::Failed.as_str()
    {
        return Ok((StatusCode::OK, Json(revision_view(&current)?)));
    }
    deploy_resolved(&state, &caller, &org, &project, resolved, "deploy").await
}

async fn app_rows(
    state: &ApiState,
    project: &Project,
    app: &str,
) -> ApiResult<(Name, AppRevisionRow)> {
    let name = parse_name("app", app)?;
    let current = current_revision(state, project, &name)
        .await?
        .ok_or_else(|| ApiError::not_found("app", format!("app {app} not found")))?;
    Ok((name, current))
}

fn app_view(
    row: &AppRevisionRow,
    replicas: &[AppReplicaRow],
    document: &ResolvedApp,
) -> ProjectAppView {
    let wanted: u32 = document.spec.workloads().map(|(_, _, w)| w.replicas).sum();
    ProjectAppView {
        name: row.app.to_string(),
        revision: row.number,
        state: row.state.clone(),
        reason: row.reason.clone(),
        ready: replicas
            .iter()
            .filter(|r| r.ready && r.revision == row.number)
            .count() as u32,
        replicas: wanted,
        updated_at: row.updated_at.millis(),
    }
}

/// The apps of a project.
#[utoipa::path(get, path = "/api/orgs/{org}/projects/{project}/apps", tag = "apps",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name")),
    responses((status = 200, body = Vec<ProjectAppView>), (status = 404, body = ErrorBody)))]
pub(super) async fn list_apps(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project)): PathArgs<(String, String)>,
) -> ApiResult<Json<Vec<ProjectAppView>>> {
    let (_, project) = project_with_role(&state, &caller, &org, &project, Role::Viewer).await?;
    let mut out = Vec::new();
    for row in state.store.list_apps(&project.id).await? {
        let replicas = state.store.list_app_replicas(&project.id, &row.app).await?;
        let document = document_of(&row)?;
        out.push(app_view(&row, &replicas, &document));
    }
    Ok(Json(out))
}

/// An app: its newest revision's state and each replica.
#[utoipa::path(get, path = "/api/orgs/{org}/projects/{project}/apps/{app}", tag = "apps",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("app" = String, Path, description = "App name")),
    responses((status = 200, body = AppStatusView), (status = 404, body = ErrorBody)))]
pub(super) async fn get_app(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, app)): PathArgs<(String, String, String)>,
) -> ApiResult<Json<AppStatusView>> {
    let (_, project) = project_with_role(&state, &caller, &org, &project, Role::Viewer).await?;
    let (name, row) = app_rows(&state, &project, &app).await?;
    let replicas = state.store.list_app_replicas(&project.id, &name).await?;
    let document = document_of(&row)?;
    let mut documents = Documents::default();
    let mut node_ports: Vec<Vec<String>> = Vec::with_capacity(replicas.len());
    for r in &replicas {
        let ports = documents
            .get(&state.store, &project.id, &name, r.revision)
            .await?
            .and_then(|d| {
                d.spec
                    .services
                    .iter()
                    .find(|(n, _)| n.as_str() == r.workload)
                    .map(|(_, s)| {
                        s.node_ports()
                            .into_iter()
                            .map(|(protocol, port, _)| format!("{protocol}/{port}"))
                            .collect()
                    })
            })
            .unwrap_or_default();
        node_ports.push(ports);
    }
    let mut routes = routes_of(&document);
    let certificates = state
        .store
        .project_certificates(&project.id)
        .await
        .map_err(ApiError::from)?;
    for route in routes.iter_mut().filter(|r| r.kind == "https") {
        route.certificate = certificates
            .iter()
            .find(|c| c.domain == route.name)
            .map(|c| certificate_words(c, state.now()));
    }
    let ingress_addresses = if routes.is_empty() {
        Vec::new()
    } else {
        ingress_addresses(&state, &project.id).await?
    };
    Ok(Json(AppStatusView {
        app: app_view(&row, &replicas, &document),
        images: images_of(&document),
        routes,
        ingress_addresses,
        replicas: replicas
            .iter()
            .zip(node_ports)
            .map(|(r, node_ports)| AppReplicaView {
                node_ports,
                workload: r.workload.clone(),
                slot: r.slot,
                revision: r.revision,
                node: r.node_id.as_ref().map(ToString::to_string),
                address: r.address.map(|a| a.to_string()),
                // A replica leaving its service's names is draining, whatever it runs.
                state: if r.draining_at.is_some() {
                    "draining".to_string()
                } else {
                    r.state.clone()
                },
                ready: r.ready,
                restarts: r.restarts,
                message: r.message.clone(),
            })
            .collect(),
    }))
}

/// A domain's certificate in words, as `orc app status` shows it.
fn certificate_words(row: &crate::store::CertificateRow, now: crate::model::Timestamp) -> String {
    let day = |t: crate::model::Timestamp| {
        chrono::DateTime::from_timestamp_millis(t.millis())
            .map(|t| t.format("%Y-%m-%d").to_string())
            .unwrap_or_default()
    };
    let when = |t: crate::model::Timestamp| {
        chrono::DateTime::from_timestamp_millis(t.millis())
            .map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string())
            .unwrap_or_default()
    };
    let valid = row
        .not_after
        .filter(|end| *end > now && row.chain_pem.is_some());
    match (valid, &row.error) {
        (Some(end), None) => format!("valid until {}", day(end)),
        (Some(end), Some(error)) => format!(
            "valid until {}; renewal failed: {error} (next try {})",
            day(end),
            when(row.next_attempt_at)
        ),
        (None, Some(error)) => format!("failed: {error} (next try {})", when(row.next_attempt_at)),
        (None, None) => "being obtained".to_string(),
    }
}

/// What `document` opens on the ingress nodes, domains first.
fn routes_of(document: &ResolvedApp) -> Vec<AppRouteView> {
    let mut out = Vec::new();
    for (name, service) in &document.spec.services {
        for domain in service.domains() {
            out.push(AppRouteView {
                kind: "https".into(),
                name: domain.clone(),
                service: name.to_string(),
                certificate: None,
            });
        }
    }
    for (name, service) in &document.spec.services {
        if service.is_public() {
            out.push(AppRouteView {
                kind: "http".into(),
                name: "*".into(),
                service: name.to_string(),
                certificate: None,
            });
        }
        if let Some(port) = service.public_port() {
            out.push(AppRouteView {
                kind: "tcp".into(),
                name: port.to_string(),
                service: name.to_string(),
                certificate: None,
            });
        }
    }
    out
}

/// Where `project`'s ingress is reached: each ingress node's public IPv4 (`198.51.100.7
/// (n-…)`), or, for a node without one (a partner node), its pool's public address when
/// the pool has one, once with every node behind it; a node reached neither way is named
/// with why.
async fn ingress_addresses(state: &ApiState, project: &ProjectId) -> ApiResult<Vec<String>> {
    let mut out = Vec::new();
    let mut pools: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for id in state.store.ingress_nodes(project).await? {
        let node = state.store.get_node(&id).await?;
        let private = orc_zone_api_types::views::private_address(&node.status.addresses);
        let public: Vec<&String> = node
            .status
            .addresses
            .iter()
            .filter(|a| Some(*a) != private.as_ref())
            .filter(|a| a.parse::<std::net::Ipv4Addr>().is_ok())
            .collect();
        if !public.is_empty() {
            for address in public {
                out.push(format!("{address} ({id})"));
            }
        } else if let Some(pool) = state.store.pool_address(&node.pool_id).await? {
            pools.entry(pool.ipv4).or_default().push(id.to_string());
        } else {
            out.push(format!(
                "none for {id}: it has no public IPv4 and its pool no public address (make the pool public with ports 80 and 443)"
            ));
        }
    }
    for (address, nodes) in pools {
        out.push(format!(
            "{address} (the pool address of {})",
            nodes.join(", ")
        ));
    }
    Ok(out)
}

/// Every revision of an app, newest first.
#[utoipa::path(get, path = "/api/orgs/{org}/projects/{project}/apps/{app}/revisions", tag = "apps",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("app" = String, Path, description = "App name")),
    responses((status = 200, body = Vec<AppRevisionView>), (status = 404, body = ErrorBody)))]
pub(super) async fn list_revisions(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, app)): PathArgs<(String, String, String)>,
) -> ApiResult<Json<Vec<AppRevisionView>>> {
    let (_, project) = project_with_role(&state, &caller, &org, &project, Role::Viewer).await?;
    let (name, _) = app_rows(&state, &project, &app).await?;
    let rows = state.store.list_app_revisions(&project.id, &name).await?;
    Ok(Json(
        rows.iter().map(revision_view).collect::<ApiResult<_>>()?,
    ))
}

/// Deploys an earlier revision again: a new revision with its app and image digests.
#[utoipa::path(post, path = "/api/orgs/{org}/projects/{project}/apps/{app}/rollback", tag = "apps",
    request_body = RollbackApp,
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("app" = String, Path, description = "App name")),
    responses((status = 201, body = AppRevisionView), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(super) async fn rollback_app(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, app)): PathArgs<(String, String, String)>,
    body: JsonBody<RollbackApp>,
) -> ApiResult<(StatusCode, Json<AppRevisionView>)> {
    let (org, project) = project_with_role(&state, &caller, &org, &project, Role::Member).await?;
    let body = body.parse()?;
    let (name, current) = app_rows(&state, &project, &app).await?;
    let target = state
        .store
        .app_revision(&project.id, &name, body.revision)
        .await?
        .ok_or_else(|| {
            ApiError::invalid(
                "revision",
                format!(
                    "app {name} has no revision {} (its newest is {})",
                    body.revision, current.number
                ),
            )
        })?;
    let resolved = document_of(&target)?;
    deploy_resolved(
        &state,
        &caller,
        &org,
        &project,
        resolved,
        &format!("rollback:{}", target.number),
    )
    .await
}

/// Removes an app: its replicas stop on their nodes; local volumes' data stays there.
#[utoipa::path(delete, path = "/api/orgs/{org}/projects/{project}/apps/{app}", tag = "apps",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name"),
        ("app" = String, Path, description = "App name")),
    responses((status = 204), (status = 404, body = ErrorBody)))]
pub(super) async fn remove_app(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project, app)): PathArgs<(String, String, String)>,
) -> ApiResult<StatusCode> {
    let (org, project) = project_with_role(&state, &caller, &org, &project, Role::Member).await?;
    let name = parse_name("app", &app)?;
    if !state.store.delete_app(&project.id, &name).await? {
        return Err(ApiError::not_found("app", format!("app {app} not found")));
    }
    app_event(
        &state,
        &org,
        &project,
        "app.removed",
        &format!("app {name} removed"),
    )
    .await;
    Ok(StatusCode::NO_CONTENT)
}
