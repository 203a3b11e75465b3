//! Orgs, projects, users, tokens and memberships, and the lookups other handlers share
//! (an org or project by name, checked against the caller's roles).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use orc_common::text::quoted;

use super::ApiState;
use super::access::Requirements as _;
use super::error::{ApiError, ApiResult, ErrorBody, ErrorCode};
use super::extract::{JsonBody, PathArgs};
use super::views::{
    CreateMembership, CreateOrg, CreateProject, CreateToken, CreateUser, MembershipView,
    NewTokenView, OrgView, ProjectAccessView, ProjectView, SetPassword, TokenView, UserView,
    WhoAmIView,
};
use crate::model::{
    ApiToken, MembershipId, Name, Org, Project, ProjectId, Role, Timestamp, TokenId, User,
    sys_org_id, sys_project_id,
};
use crate::store::StoreError;
use orc_zone_model::access::Caller;

/// Parses a name given in `field`, naming the field if it is not a DNS label.
pub(super) fn parse_name(field: &str, text: &str) -> ApiResult<Name> {
    text.parse::<Name>()
        .map_err(|e| ApiError::invalid(field, format!("{field}: {e}")))
}

/// The org named `org` if the caller has any role in it (404 otherwise).
pub(super) async fn visible_org(state: &ApiState, caller: &Caller, org: &str) -> ApiResult<Org> {
    let name = parse_name("org", org)?;
    let missing = || ApiError::not_found("org", format!("org {org} not found"));
    let org = match state.store.org_by_name(&name).await {
        Ok(o) => o,
        Err(StoreError::NotFound { .. }) => return Err(missing()),
        Err(e) => return Err(e.into()),
    };
    if caller.sees_org(&org) {
        Ok(org)
    } else {
        Err(missing())
    }
}

/// The project `org/project` if the caller holds at least `needed` in it: 404 when they hold
/// no role, 403 when it is too low.
pub(super) async fn project_with_role(
    state: &ApiState,
    caller: &Caller,
    org: &str,
    project: &str,
    needed: Role,
) -> ApiResult<(Org, Project)> {
    let org_row = visible_org(state, caller, org).await?;
    let name = parse_name("project", project)?;
    let path = format!("{org}/{project}");
    let project_row = match state.store.project_by_path(&org_row.name, &name).await {
        Ok(p) => p,
        Err(StoreError::NotFound { .. }) => {
            return Err(ApiError::not_found(
                "project",
                format!("project {path} not found"),
            ));
        }
        Err(e) => return Err(e.into()),
    };
    caller.require_project(&project_row, &path, needed)?;
    Ok((org_row, project_row))
}

/// The user named `user` (404 if absent).
async fn user_named(state: &ApiState, field: &str, user: &str) -> ApiResult<User> {
    let name = parse_name(field, user)?;
    match state.store.user_by_name(&name).await {
        Ok(u) => Ok(u),
        Err(StoreError::NotFound { .. }) => {
            Err(ApiError::not_found(field, format!("user {user} not found")))
        }
        Err(e) => Err(e.into()),
    }
}

/// The caller, their memberships, and every project they may open.
#[utoipa::path(get, path = "/api/whoami", tag = "users",
    responses((status = 200, body = WhoAmIView), (status = 401, body = ErrorBody)))]
pub(super) async fn whoami(
    State(state): State<ApiState>,
    caller: Caller,
) -> ApiResult<Json<WhoAmIView>> {
    let mut memberships = Vec::new();
    for m in &caller.memberships {
        memberships.push(membership_view(&state, m, Some(&caller.user)).await?);
    }
    let default_project = match &caller.token.default_project {
        Some(id) => match state.store.get_project(id).await {
            Ok(project) if caller.project_role(&project).is_some() => {
                Some(project_path(&state, &project).await?)
            }
            Ok(_) | Err(StoreError::NotFound { .. }) => None,
            Err(e) => return Err(e.into()),
        },
        None => None,
    };
    Ok(Json(WhoAmIView {
        user: UserView::from(&caller.user),
        token_id: caller.token.id.to_string(),
        default_project,
        memberships,
        zone_role: caller.zone_role().map(|r| r.to_string()),
        projects: projects_of(&state, &caller).await?,
    }))
}

/// Every project `caller` may open, with their roles there, by path: all of the zone's
/// for a member of org `sys`, else those of the orgs they have a role in.
async fn projects_of(state: &ApiState, caller: &Caller) -> ApiResult<Vec<ProjectAccessView>> {
    let orgs = if caller.zone_role().is_some() {
        state.store.list_orgs().await?
    } else {
        let mut ids: Vec<_> = caller.memberships.iter().map(|m| &m.org_id).collect();
        ids.sort_by_key(|id| id.to_string());
        ids.dedup();
        let mut orgs = Vec::new();
        for id in ids {
            match state.store.get_org(id).await {
                Ok(org) => orgs.push(org),
                Err(StoreError::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        orgs
    };
    let mut projects = Vec::new();
    for org in orgs {
        let org_role = caller.org_role(&org).map(|r| r.to_string());
        for project in state.store.list_projects(&org.id).await? {
            if let Some(role) = caller.project_role(&project) {
                projects.push(ProjectAccessView {
                    project: format!("{}/{}", org.name, project.name),
                    role: role.to_string(),
                    org_role: org_role.clone(),
                });
            }
        }
    }
    projects.sort_by(|a, b| a.project.cmp(&b.project));
    Ok(projects)
}

/// `org/project` of the project with this id, or `None` once it is deleted.
async fn project_path_of(state: &ApiState, id: &ProjectId) -> ApiResult<Option<String>> {
    match state.store.get_project(id).await {
        Ok(project) => Ok(Some(project_path(state, &project).await?)),
        Err(StoreError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// `org/project` of `project`.
async fn project_path(state: &ApiState, project: &Project) -> ApiResult<String> {
    let org = state.store.get_org(&project.org_id).await?;
    Ok(format!("{}/{}", org.name, project.name))
}

/// The view of a token, with its default project's path.
async fn token_view(state: &ApiState, user: &User, token: &ApiToken) -> ApiResult<TokenView> {
    let project = match &token.default_project {
        Some(id) => project_path_of(state, id).await?,
        None => None,
    };
    Ok(TokenView::new(user, token, project))
}

async fn membership_view(
    state: &ApiState,
    m: &crate::model::Membership,
    user: Option<&User>,
) -> ApiResult<MembershipView> {
    let user_name = match user {
        Some(u) if u.id == m.user_id => u.name.to_string(),
        Some(_) | None => state.store.get_user(&m.user_id).await?.name.to_string(),
    };
    let org = state.store.get_org(&m.org_id).await?;
    let project = match &m.project_id {
        Some(p) => Some(state.store.get_project(p).await?.name.to_string()),
        None => None,
    };
    Ok(MembershipView::new(
        m,
        &user_name,
        org.name.as_str(),
        project.as_deref(),
    ))
}

/// Orgs the caller has a role in (every org for zone operators and sys members), by name.
#[utoipa::path(get, path = "/api/orgs", tag = "orgs",
    responses((status = 200, body = Vec<OrgView>), (status = 401, body = ErrorBody)))]
pub(super) async fn list_orgs(
    State(state): State<ApiState>,
    caller: Caller,
) -> ApiResult<Json<Vec<OrgView>>> {
    let orgs = state.store.list_orgs().await?;
    Ok(Json(
        orgs.iter()
            .filter(|o| caller.sees_org(o))
            .map(OrgView::from)
            .collect(),
    ))
}

/// Creates an org (zone operators only).
#[utoipa::path(post, path = "/api/orgs", tag = "orgs", request_body = CreateOrg,
    responses((status = 201, body = OrgView), (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub(super) async fn create_org(
    State(state): State<ApiState>,
    caller: Caller,
    body: JsonBody<CreateOrg>,
) -> ApiResult<(StatusCode, Json<OrgView>)> {
    caller.require_operator()?;
    let body = body.parse()?;
    let name = parse_name("name", &body.name)?;
    let org = state.store.create_org(&name, state.now()).await?;
    Ok((StatusCode::CREATED, Json(OrgView::from(&org))))
}

/// One org.
#[utoipa::path(get, path = "/api/orgs/{org}", tag = "orgs",
    params(("org" = String, Path, description = "Org name")),
    responses((status = 200, body = OrgView), (status = 404, body = ErrorBody)))]
pub(super) async fn get_org(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs(org): PathArgs<String>,
) -> ApiResult<Json<OrgView>> {
    let org = visible_org(&state, &caller, &org).await?;
    Ok(Json(OrgView::from(&org)))
}

/// The org's projects the caller has a role in, by name.
#[utoipa::path(get, path = "/api/orgs/{org}/projects", tag = "orgs",
    params(("org" = String, Path, description = "Org name")),
    responses((status = 200, body = Vec<ProjectView>), (status = 404, body = ErrorBody)))]
pub(super) async fn list_projects(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs(org): PathArgs<String>,
) -> ApiResult<Json<Vec<ProjectView>>> {
    let org = visible_org(&state, &caller, &org).await?;
    let projects = state.store.list_projects(&org.id).await?;
    Ok(Json(
        projects
            .iter()
            .filter(|p| caller.project_role(p).is_some())
            .map(|p| ProjectView::new(&org, p))
            .collect(),
    ))
}

/// Creates a project (org owners).
#[utoipa::path(post, path = "/api/orgs/{org}/projects", tag = "orgs", request_body = CreateProject,
    params(("org" = String, Path, description = "Org name")),
    responses((status = 201, body = ProjectView), (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub(super) async fn create_project(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs(org): PathArgs<String>,
    body: JsonBody<CreateProject>,
) -> ApiResult<(StatusCode, Json<ProjectView>)> {
    let org = visible_org(&state, &caller, &org).await?;
    caller.require_org(&org, Role::Owner)?;
    let body = body.parse()?;
    let name = parse_name("name", &body.name)?;
    let project = state
        .store
        .create_project(&org.id, &name, state.now())
        .await
        .map_err(|e| ApiError::from(e).naming(&org.id, &format!("org {}", org.name)))?;
    Ok((StatusCode::CREATED, Json(ProjectView::new(&org, &project))))
}

/// One project.
#[utoipa::path(get, path = "/api/orgs/{org}/projects/{project}", tag = "orgs",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name")),
    responses((status = 200, body = ProjectView), (status = 404, body = ErrorBody)))]
pub(super) async fn get_project(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project)): PathArgs<(String, String)>,
) -> ApiResult<Json<ProjectView>> {
    let (org, project) = project_with_role(&state, &caller, &org, &project, Role::Viewer).await?;
    Ok(Json(ProjectView::new(&org, &project)))
}

/// The org's memberships, by id (org members and owners).
#[utoipa::path(get, path = "/api/orgs/{org}/memberships", tag = "memberships",
    params(("org" = String, Path, description = "Org name")),
    responses((status = 200, body = Vec<MembershipView>), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(super) async fn list_memberships(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs(org): PathArgs<String>,
) -> ApiResult<Json<Vec<MembershipView>>> {
    let org = visible_org(&state, &caller, &org).await?;
    caller.require_org(&org, Role::Viewer)?;
    let mut out = Vec::new();
    for m in state.store.list_memberships_of_org(&org.id).await? {
        out.push(membership_view(&state, &m, None).await?);
    }
    Ok(Json(out))
}

/// Gives a user a role in the org or one of its projects (org owners; project owners for
/// their project).
#[utoipa::path(post, path = "/api/orgs/{org}/memberships", tag = "memberships",
    request_body = CreateMembership,
    params(("org" = String, Path, description = "Org name")),
    responses((status = 201, body = MembershipView), (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)))]
pub(super) async fn create_membership(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs(org): PathArgs<String>,
    body: JsonBody<CreateMembership>,
) -> ApiResult<(StatusCode, Json<MembershipView>)> {
    let org_row = visible_org(&state, &caller, &org).await?;
    // Only owners (of the org, or of a project of it) grant roles: authorize that much
    // before judging the body, which names the project whose owner is needed.
    if !caller.is_operator() && !caller.owns_in(&org_row) {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            format!("granting roles in org {} needs an owner", org_row.name),
        ));
    }
    let body = body.parse()?;
    let role: Role = body.role.parse().map_err(|_| {
        ApiError::invalid(
            "role",
            format!(
                "role {} is not one of owner, member, viewer",
                quoted(&body.role)
            ),
        )
    })?;
    let project = match &body.project {
        Some(p) => {
            let (_, project) = project_with_role(&state, &caller, &org, p, Role::Owner)
                .await
                .map_err(|e| e.with_field("project"))?;
            Some(project)
        }
        None => {
            caller.require_org(&org_row, Role::Owner)?;
            None
        }
    };
    let user = grantee(&state, &caller, &org_row, &body.user).await?;
    let m = state
        .store
        .add_membership(
            &user.id,
            &org_row.id,
            project.as_ref().map(|p| &p.id),
            role,
            state.now(),
        )
        .await?;
    let view = membership_view(&state, &m, Some(&user)).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// The user `name` a role in `org` may go to, as `caller` grants it. A zone operator grants
/// to any user; an owner of the org or of one of its projects only to a user who holds a
/// role in the org already (an operator gives a user their first). Every other name reads
/// as one that does not exist, with the same 404, so an owner learns nothing of the zone's
/// users beyond their org. The apps user never holds a role.
async fn grantee(state: &ApiState, caller: &Caller, org: &Org, name: &str) -> ApiResult<User> {
    let missing = || ApiError::not_found("user", format!("user {} not found", quoted(name)));
    let user = match user_named(state, "user", name).await {
        Ok(user) => user,
        Err(e) if e.code == ErrorCode::NotFound => return Err(missing()),
        Err(e) => return Err(e),
    };
    if !caller.is_operator() {
        let in_org = state
            .store
            .list_memberships_of_user(&user.id)
            .await?
            .iter()
            .any(|m| m.org_id == org.id);
        if !in_org {
            return Err(missing());
        }
    }
    if user.name.as_str() == orc_zone_apps::APPS_USER {
        return Err(ApiError::invalid(
            "user",
            format!(
                "user {} is the zone's apps user: app slots use a service credential of their \
                 own pool, and it holds no role",
                user.name
            ),
        ));
    }
    Ok(user)
}

/// Removes a membership (org owners; project owners for their project).
#[utoipa::path(delete, path = "/api/orgs/{org}/memberships/{membership}", tag = "memberships",
    params(("org" = String, Path, description = "Org name"),
        ("membership" = String, Path, description = "Membership id (m-…)")),
    responses((status = 204), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn delete_membership(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, membership)): PathArgs<(String, String)>,
) -> ApiResult<StatusCode> {
    let org_row = visible_org(&state, &caller, &org).await?;
    let id: MembershipId = membership
        .parse()
        .map_err(|e| ApiError::invalid("membership", format!("{e}")))?;
    let missing = || ApiError::not_found("membership", format!("membership {id} not found"));
    let m = state
        .store
        .list_memberships_of_org(&org_row.id)
        .await?
        .into_iter()
        .find(|m| m.id == id)
        .ok_or_else(missing)?;
    match &m.project_id {
        Some(p) => {
            let project = state.store.get_project(p).await?;
            caller.require_project(&project, &format!("{org}/{}", project.name), Role::Owner)?;
        }
        None => {
            caller.require_org(&org_row, Role::Owner)?;
        }
    }
    state.store.remove_membership(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Every user, by name (zone operators).
#[utoipa::path(get, path = "/api/users", tag = "users",
    responses((status = 200, body = Vec<UserView>), (status = 403, body = ErrorBody)))]
pub(super) async fn list_users(
    State(state): State<ApiState>,
    caller: Caller,
) -> ApiResult<Json<Vec<UserView>>> {
    caller.require_operator()?;
    let users = state.store.list_users().await?;
    Ok(Json(users.iter().map(UserView::from).collect()))
}

/// Creates a user (zone operators). Give them a token and a membership next.
#[utoipa::path(post, path = "/api/users", tag = "users", request_body = CreateUser,
    responses((status = 201, body = UserView), (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub(super) async fn create_user(
    State(state): State<ApiState>,
    caller: Caller,
    body: JsonBody<CreateUser>,
) -> ApiResult<(StatusCode, Json<UserView>)> {
    caller.require_operator()?;
    let body = body.parse()?;
    let name = parse_name("name", &body.name)?;
    let user = state.store.create_user(&name, state.now()).await?;
    Ok((StatusCode::CREATED, Json(UserView::from(&user))))
}

/// The user a token path names, if the caller may manage its tokens (themselves or a zone
/// operator).
async fn token_owner(state: &ApiState, caller: &Caller, user: &str) -> ApiResult<User> {
    if user == caller.user.name.as_str() {
        return Ok(caller.user.clone());
    }
    if !caller.is_operator() {
        return Err(ApiError::forbidden(
            "only the user themselves or a zone operator may manage a user's tokens",
        ));
    }
    user_named(state, "user", user).await
}

/// Sets a user's password, with which they sign in at the access edge; every session they
/// had ends. The user themselves or a zone operator.
#[utoipa::path(put, path = "/api/users/{user}/password", tag = "users", request_body = SetPassword,
    params(("user" = String, Path, description = "User name")),
    responses((status = 204, description = "Set; the user's sessions ended"),
        (status = 400, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub(super) async fn set_password(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs(user): PathArgs<String>,
    body: JsonBody<SetPassword>,
) -> ApiResult<StatusCode> {
    let user = password_owner(&state, &caller, &user).await?;
    let body = body.parse()?;
    let hash = orc_web::passwords::hash_blocking(body.password)
        .await
        .map_err(|e| ApiError::invalid("password", e.to_string()))?;
    state.store.set_password_hash(&user.id, Some(&hash)).await?;
    let ended = state
        .store
        .end_web_sessions_of(&user.id, state.now())
        .await?;
    tracing::info!(user = %user.name, sessions_ended = ended, "password set");
    Ok(StatusCode::NO_CONTENT)
}

/// Removes a user's password: they can then sign in at the edge with a token only, and
/// every session they had ends.
#[utoipa::path(delete, path = "/api/users/{user}/password", tag = "users",
    params(("user" = String, Path, description = "User name")),
    responses((status = 204, description = "Removed; the user's sessions ended"),
        (status = 403, body = ErrorBody)))]
pub(super) async fn remove_password(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs(user): PathArgs<String>,
) -> ApiResult<StatusCode> {
    let user = password_owner(&state, &caller, &user).await?;
    state.store.set_password_hash(&user.id, None).await?;
    state
        .store
        .end_web_sessions_of(&user.id, state.now())
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn password_owner(state: &ApiState, caller: &Caller, user: &str) -> ApiResult<User> {
    if user == caller.user.name.as_str() {
        return Ok(caller.user.clone());
    }
    if !caller.is_operator() {
        return Err(ApiError::forbidden(
            "only the user themselves or a zone operator may set a user's password",
        ));
    }
    user_named(state, "user", user).await
}

/// How long a token lives when its creator names no expiry.
pub const TOKEN_DEFAULT_DAYS: i64 = 90;
/// The longest a token may live.
pub const TOKEN_MAX_DAYS: i64 = 365;

/// A user's tokens, by id (never their values).
#[utoipa::path(get, path = "/api/users/{user}/tokens", tag = "users",
    params(("user" = String, Path, description = "User name")),
    responses((status = 200, body = Vec<TokenView>), (status = 403, body = ErrorBody)))]
pub(super) async fn list_tokens(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs(user): PathArgs<String>,
) -> ApiResult<Json<Vec<TokenView>>> {
    let user = token_owner(&state, &caller, &user).await?;
    let mut out = Vec::new();
    for t in state.store.list_tokens(&user.id).await? {
        out.push(token_view(&state, &user, &t).await?);
    }
    Ok(Json(out))
}

/// Creates a token; the answer carries its value, shown this once.
#[utoipa::path(post, path = "/api/users/{user}/tokens", tag = "users", request_body = CreateToken,
    params(("user" = String, Path, description = "User name")),
    responses((status = 201, body = NewTokenView), (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody)))]
pub(super) async fn create_token(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs(user): PathArgs<String>,
    body: JsonBody<CreateToken>,
) -> ApiResult<(StatusCode, Json<NewTokenView>)> {
    let user = token_owner(&state, &caller, &user).await?;
    let body = body.parse()?;
    let label = body.label.trim();
    if label.is_empty() || label.chars().count() > 100 {
        return Err(ApiError::invalid(
            "label",
            "label must be 1 to 100 characters",
        ));
    }
    if label
        .chars()
        .any(|c| orc_common::text::is_unsafe(c) || orc_common::text::is_invisible(c))
    {
        return Err(ApiError::invalid(
            "label",
            "label must not hold control, bidirectional formatting or invisible (zero-width) \
             characters",
        ));
    }
    let now = state.now();
    let expires_at = match body.expires_at {
        None => now.plus_days(TOKEN_DEFAULT_DAYS),
        Some(at) if at <= now.millis() => {
            return Err(ApiError::invalid(
                "expires_at",
                "expires_at must be in the future",
            ));
        }
        Some(at) if at > now.plus_days(TOKEN_MAX_DAYS).millis() => {
            return Err(ApiError::invalid(
                "expires_at",
                format!(
                    "a token lives at most {TOKEN_MAX_DAYS} days; make a new one before it expires"
                ),
            ));
        }
        Some(at) => Timestamp(at),
    };
    let project = match &body.project {
        Some(path) => Some(token_project(&state, &user, path).await?),
        None => None,
    };
    let (token, secret) = state
        .store
        .create_token(&user.id, label, Some(expires_at), project.as_ref(), now)
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(NewTokenView {
            token: token_view(&state, &user, &token).await?,
            value: secret.expose().to_string(),
        }),
    ))
}

/// Revokes a token.
#[utoipa::path(delete, path = "/api/users/{user}/tokens/{token}", tag = "users",
    params(("user" = String, Path, description = "User name"),
        ("token" = String, Path, description = "Token id (t-…)")),
    responses((status = 200, body = TokenView), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(super) async fn revoke_token(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((user, token)): PathArgs<(String, String)>,
) -> ApiResult<Json<TokenView>> {
    let user = token_owner(&state, &caller, &user).await?;
    let id: TokenId = token
        .parse()
        .map_err(|e| ApiError::invalid("token", format!("{e}")))?;
    let missing = || ApiError::not_found("token", format!("token {id} not found"));
    let record = match state.store.get_token(&id).await {
        Ok(t) => t,
        Err(StoreError::NotFound { .. }) => return Err(missing()),
        Err(e) => return Err(e.into()),
    };
    if record.user_id != user.id {
        return Err(missing());
    }
    let revoked = state.store.revoke_token(&id, state.now()).await?;
    Ok(Json(token_view(&state, &user, &revoked).await?))
}

/// The project `path` (`org/project`) names, if `user` holds a role in it (org-wide, in the
/// project, or in the zone). One answer for a missing project and one without a role, so
/// the answer tells nothing about projects the user cannot see.
async fn token_project(state: &ApiState, user: &User, path: &str) -> ApiResult<ProjectId> {
    let unusable = || {
        ApiError::invalid(
            "project",
            format!(
                "project {} does not exist or {} holds no role in it; give them one first \
                 (`orc member add`)",
                quoted(path),
                user.name
            ),
        )
    };
    let (org, name) = path.split_once('/').ok_or_else(|| {
        ApiError::invalid(
            "project",
            format!("project {} is not ORG/PROJECT", quoted(path)),
        )
    })?;
    let org = parse_name("project", org)?;
    let name = parse_name("project", name)?;
    let project = match state.store.project_by_path(&org, &name).await {
        Ok(p) => p,
        Err(StoreError::NotFound { .. }) => return Err(unusable()),
        Err(e) => return Err(e.into()),
    };
    let roles = state.store.list_memberships_of_user(&user.id).await?;
    match orc_zone_model::access::project_role_in(&roles, &project) {
        Some(_) => Ok(project.id),
        None => Err(unusable()),
    }
}

/// The org of the zone itself and its project hold the zone's own providers and gateways.
fn refuse_sys(what: &str, path: &str, is_sys: bool) -> ApiResult<()> {
    if is_sys {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!("{what} {path} is the zone's own and cannot be deleted"),
        ));
    }
    Ok(())
}

/// Deletes an org that holds no project (zone operators).
#[utoipa::path(delete, path = "/api/orgs/{org}", tag = "orgs",
    params(("org" = String, Path, description = "Org name")),
    responses((status = 204), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)))]
pub(super) async fn delete_org(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs(org): PathArgs<String>,
) -> ApiResult<StatusCode> {
    let org_row = visible_org(&state, &caller, &org).await?;
    caller.require_operator()?;
    refuse_sys("org", org_row.name.as_str(), org_row.id == sys_org_id())?;
    match state.store.delete_org(&org_row.id).await {
        Ok(()) => Ok(StatusCode::NO_CONTENT),
        Err(StoreError::Invalid { reason, .. }) => Err(ApiError::new(
            ErrorCode::Conflict,
            format!("org {org} is not empty: {reason}; delete them first (`orc project delete`)"),
        )),
        Err(e) => Err(e.into()),
    }
}

/// Deletes a project that holds no pool and no provider (org owners).
#[utoipa::path(delete, path = "/api/orgs/{org}/projects/{project}", tag = "orgs",
    params(("org" = String, Path, description = "Org name"),
        ("project" = String, Path, description = "Project name")),
    responses((status = 204), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)))]
pub(super) async fn delete_project(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, project)): PathArgs<(String, String)>,
) -> ApiResult<StatusCode> {
    let (org_row, project_row) =
        project_with_role(&state, &caller, &org, &project, Role::Viewer).await?;
    caller.require_org(&org_row, Role::Owner)?;
    let path = format!("{}/{}", org_row.name, project_row.name);
    refuse_sys("project", &path, project_row.id == sys_project_id())?;
    match state.store.delete_project(&project_row.id).await {
        Ok(()) => Ok(StatusCode::NO_CONTENT),
        Err(StoreError::Invalid { reason, .. }) => Err(ApiError::new(
            ErrorCode::Conflict,
            format!(
                "project {path} is not empty: {reason}; delete its pools first (`orc pool \
                 delete`)"
            ),
        )),
        Err(e) => Err(e.into()),
    }
}

/// Deletes a user with their roles and tokens (zone operators; not themselves, nor the
/// zone's own users).
#[utoipa::path(delete, path = "/api/users/{user}", tag = "users",
    params(("user" = String, Path, description = "User name")),
    responses((status = 204), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)))]
pub(super) async fn delete_user(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs(user): PathArgs<String>,
) -> ApiResult<StatusCode> {
    caller.require_operator()?;
    let user = user_named(&state, "user", &user).await?;
    if user.id == caller.user.id {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            "you cannot delete yourself; another zone operator can",
        ));
    }
    if [crate::model::ADMIN_USER, orc_zone_apps::APPS_USER].contains(&user.name.as_str()) {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!("user {} is the zone's own and cannot be deleted", user.name),
        ));
    }
    state.store.delete_user(&user.id).await?;
    Ok(StatusCode::NO_CONTENT)
}
