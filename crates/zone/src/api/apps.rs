//! Apps on a project's nodes: plan, deploy, status, history, rollback, remove.
//!
//! A deploy takes the app the client evaluated from its `orch.pkl`, checks it again, and
//! resolves every image of the zone's registry to the digest its tag names now. The same
//! resolved app again is a no-op; anything else makes a new, immutable revision. Placement
//! is the pure planner's, over the project's ready nodes (their pool's shape, less what the
//! node itself needs, and less what other apps hold); an app that cannot be placed is
//! BLOCKED with the reason and nothing of it is applied.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use orc_app_model::planner::{self, PlanInput, PlanNode, PlanWorkload, VolumeHome};
use orc_app_model::revision::{DeploymentState, ResolvedApp, ResolvedImage, diff};
use orc_app_model::{AppSpec, ImageRef};

use super::ApiState;
use super::error::{ApiError, ApiResult, ErrorBody};
use super::extract::{JsonBody, PathArgs};
use super::tenancy::{parse_name, project_with_role};
use super::views::{
    AppPlanView, AppReplicaView, AppRevisionView, AppStatusView, BlockedView, ChangeView,
    DeployApp, ImageView, ProjectAppView, RollbackApp,
};
use crate::model::{AgentState, Name, NodeState, Org, Project, Role};
use crate::store::{AppReplicaRow, AppRevisionRow};
use orc_zone_model::access::Caller;

/// CPU and memory a node keeps for itself and the agent.
const SYSTEM_CPU_MILLIS: u64 = 200;
const SYSTEM_MEMORY_BYTES: u64 = 256 << 20;

fn document_of(row: &AppRevisionRow) -> ApiResult<ResolvedApp> {
    serde_json::from_str(&row.document).map_err(|e| {
        tracing::error!(app = %row.app, revision = row.number, error = %e, "a stored revision does not read");
        ApiError::new(
            orc_zone_api_types::error::ErrorCode::Internal,
            format!("revision {} of app {} does not read", row.number, row.app),
        )
    })
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

/// Resolves every workload's image to a digest: a tag of the zone's registry to the
/// manifest it names now, a digest to itself once the registry is known to hold it.
async fn resolve(state: &ApiState, org: &Org, spec: &AppSpec) -> ApiResult<ResolvedApp> {
    let mut images = BTreeMap::new();
    for (kind, name, workload) in spec.workloads() {
        let field = format!("app.{}[\"{name}\"].image", kind.property());
        let reference = ImageRef::parse(&workload.image)
            .map_err(|e| ApiError::invalid(field.clone(), e.to_string()))?;
        let Some(image_org) = reference.org() else {
            return Err(ApiError::invalid(
                field,
                format!(
                    "{} is in another registry ({}); this zone deploys images of its own \
                     registry: copy it in with `skopeo copy docker://{} docker://<zone>/{}/…`",
                    workload.image,
                    reference.host.as_deref().unwrap_or(""),
                    workload.image,
                    org.name
                ),
            ));
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
    Ok(zone_labels_of(&pool, node))
}

/// [`zone_labels`] of a node of `pool`.
fn zone_labels_of(
    pool: &crate::model::Pool,
    node: &crate::model::Node,
) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([
        ("orc.pool".to_string(), pool.name.to_string()),
        ("orc.class".to_string(), pool.spec.region_class.to_string()),
    ]);
    if let Some(site) = &node.status.site {
        labels.insert("orc.site".to_string(), site.clone());
    }
    labels
}

/// The project's ready nodes as the planner sees them (the zone's labels and the ones given
/// them, cordons), and what apps other than `except` hold on them.
async fn cluster(
    state: &ApiState,
    project: &Project,
    except: &Name,
) -> ApiResult<(Vec<PlanNode>, BTreeMap<String, (u64, u64)>)> {
    let mut nodes = Vec::new();
    for pool in state.store.list_pools(&project.id).await? {
        let agents = state.store.node_agents_of_pool(&pool.id).await?;
        for node in state.store.list_nodes_by_pool(&pool.id, false).await? {
            let ready = node.status.state == NodeState::Running
                && agents
                    .iter()
                    .any(|a| a.node_id == node.id && a.state == AgentState::Ready);
            if !ready {
                continue;
            }
            let mut labels = state.store.node_labels(&node.id).await?;
            labels.extend(zone_labels_of(&pool, &node));
            nodes.push(PlanNode {
                name: node.id.to_string(),
                labels,
                cpu_millis: (u64::from(pool.spec.shape.vcpus) * 1000)
                    .saturating_sub(SYSTEM_CPU_MILLIS),
                memory_bytes: (u64::from(pool.spec.shape.memory_gib) << 30)
                    .saturating_sub(SYSTEM_MEMORY_BYTES),
                cordoned: state.store.node_cordoned(&node.id).await?,
            });
        }
    }
    let mut taken: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut documents: BTreeMap<(Name, u64), Option<ResolvedApp>> = BTreeMap::new();
    for (app, workload, _slot, revision, node) in
        state.store.app_replicas_on_nodes(&project.id).await?
    {
        if &app == except {
            continue;
        }
        let key = (app.clone(), revision);
        if !documents.contains_key(&key) {
            let row = state
                .store
                .app_revision(&project.id, &app, revision)
                .await?;
            documents.insert(key.clone(), row.and_then(|r| document_of(&r).ok()));
        }
        if let Some(Some(doc)) = documents.get(&key)
            && let Some((_, w)) = doc.spec.workload(&workload)
        {
            let entry = taken.entry(node.to_string()).or_default();
            entry.0 += w.resources.cpu_millis();
            entry.1 += w.resources.memory_bytes();
        }
    }
    Ok((nodes, taken))
}

/// Places `app`'s workloads; replicas already placed stay where they can.
fn place(
    app: &ResolvedApp,
    nodes: Vec<PlanNode>,
    taken: BTreeMap<String, (u64, u64)>,
    current: &[AppReplicaRow],
) -> planner::Plan {
    let workloads = app
        .spec
        .workloads()
        .map(|(_, name, w)| {
            let mut slots: Vec<Option<String>> = vec![None; w.replicas as usize];
            for row in current.iter().filter(|r| r.workload == name.as_str()) {
                if let Some(slot) = slots.get_mut(row.slot as usize) {
                    *slot = row.node_id.as_ref().map(ToString::to_string);
                }
            }
            let volume = if w.volumes.is_empty() {
                VolumeHome::NoVolume
            } else {
                match slots.first().cloned().flatten() {
                    Some(node) => VolumeHome::On(node),
                    None => VolumeHome::Unbound,
                }
            };
            PlanWorkload {
                key: name.to_string(),
                replicas: w.replicas,
                cpu_millis: w.resources.cpu_millis(),
                memory_bytes: w.resources.memory_bytes(),
                constraints: w.constraints.clone(),
                volume,
                current: slots,
            }
        })
        .collect();
    planner::plan(&PlanInput {
        nodes,
        taken,
        workloads,
    })
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
    let resolved = resolve(&state, &org, &spec).await?;
    let current = current_revision(&state, &project, &spec.name).await?;
    let old = current.as_ref().map(document_of).transpose()?;
    let (nodes, taken) = cluster(&state, &project, &spec.name).await?;
    let replicas = state
        .store
        .list_app_replicas(&project.id, &spec.name)
        .await?;
    let plan = place(&resolved, nodes, taken, &replicas);
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
        blocked: blocked_views(&plan),
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
    let (nodes, taken) = cluster(state, project, &name).await?;
    let replicas = state.store.list_app_replicas(&project.id, &name).await?;
    let plan = place(&resolved, nodes, taken, &replicas);
    let (deployment, reason) = if plan.is_complete() {
        (DeploymentState::Deploying, None)
    } else {
        let reasons: Vec<String> = plan
            .blocked
            .iter()
            .map(|(w, r)| format!("{w}: {r}"))
            .collect();
        (DeploymentState::Blocked, Some(reasons.join("; ")))
    };
    let document = serde_json::to_string(&resolved).unwrap_or_default();
    let now = state.now();
    let row = state
        .store
        .create_app_revision(
            &project.id,
            &name,
            &resolved.digest(),
            &document,
            origin,
            deployment.as_str(),
            reason.as_deref(),
            Some(caller.user.name.as_str()),
            now,
        )
        .await?;
    if plan.is_complete() {
        // Never half-applied: a blocked revision places nothing and the replicas that run
        // stay as they are.
        let rows: Vec<AppReplicaRow> = plan
            .placements
            .iter()
            .flat_map(|(workload, slots)| {
                slots
                    .iter()
                    .enumerate()
                    .map(move |(slot, node)| AppReplicaRow {
                        workload: workload.clone(),
                        slot: slot as u32,
                        revision: row.number,
                        node_id: node.as_ref().and_then(|n| n.parse().ok()),
                        state: "pending".into(),
                        ready: false,
                        restarts: 0,
                        updated_at: now,
                    })
            })
            .collect();
        state
            .store
            .replace_app_replicas(&project.id, &name, &rows)
            .await?;
    }
    let words = match &reason {
        None => format!("app {name} revision {} is deploying", row.number),
        Some(reason) => format!("app {name} revision {} is blocked: {reason}", row.number),
    };
    app_event(state, org, project, "app.deployed", &words).await;
    tracing::info!(app = %name, revision = row.number, state = %deployment, "app revision made");
    Ok((StatusCode::CREATED, Json(revision_view(&row)?)))
}

/// Places `app`'s running revision again over the cluster as it is now: replicas on
/// `evict` move where there is room (or wait with no node), unless their workload keeps a
/// local volume there; the others stay. Never a new revision.
pub(super) async fn replace_placement(
    state: &ApiState,
    project: &Project,
    app: &Name,
    evict: Option<&crate::model::NodeId>,
) -> ApiResult<()> {
    let current = state.store.list_app_replicas(&project.id, app).await?;
    let Some(revision) = current.iter().map(|r| r.revision).max() else {
        return Ok(());
    };
    let Some(row) = state.store.app_revision(&project.id, app, revision).await? else {
        return Ok(());
    };
    let resolved = document_of(&row)?;
    let (nodes, taken) = cluster(state, project, app).await?;
    let staying: Vec<AppReplicaRow> = current
        .iter()
        .map(|r| {
            let bound = resolved
                .spec
                .workload(&r.workload)
                .is_some_and(|(_, w)| !w.volumes.is_empty());
            if evict.is_some() && r.node_id.as_ref() == evict && !bound {
                AppReplicaRow {
                    node_id: None,
                    ..r.clone()
                }
            } else {
                r.clone()
            }
        })
        .collect();
    let plan = place(&resolved, nodes, taken, &staying);
    let now = state.now();
    let rows: Vec<AppReplicaRow> = plan
        .placements
        .iter()
        .flat_map(|(workload, slots)| {
            let current = &current;
            slots.iter().enumerate().map(move |(slot, node)| {
                let node_id: Option<crate::model::NodeId> =
                    node.as_ref().and_then(|n| n.parse().ok());
                let before = current
                    .iter()
                    .find(|r| &r.workload == workload && r.slot as usize == slot);
                match before {
                    Some(b) if b.node_id == node_id => b.clone(),
                    _ => AppReplicaRow {
                        workload: workload.clone(),
                        slot: slot as u32,
                        revision,
                        node_id,
                        state: "pending".into(),
                        ready: false,
                        restarts: 0,
                        updated_at: now,
                    },
                }
            })
        })
        .collect();
    state
        .store
        .replace_app_replicas(&project.id, app, &rows)
        .await?;
    Ok(())
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
    let resolved = resolve(&state, &org, &spec).await?;
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
    Ok(Json(AppStatusView {
        app: app_view(&row, &replicas, &document),
        images: images_of(&document),
        replicas: replicas
            .iter()
            .map(|r| AppReplicaView {
                workload: r.workload.clone(),
                slot: r.slot,
                revision: r.revision,
                node: r.node_id.as_ref().map(ToString::to_string),
                state: r.state.clone(),
                ready: r.ready,
                restarts: r.restarts,
            })
            .collect(),
    }))
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
