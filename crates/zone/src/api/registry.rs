//! The app registry: binaries (by digest), packages and tags, and what a pool's app resolves
//! to.
//!
//! Publishing is two steps, so a large binary streams once and a binary the registry holds
//! already is not sent again: `PUT /api/orgs/{org}/registry/blobs/{digest}` with each
//! platform's binary (the zone keeps it only if its SHA-256 is `digest`), then
//! `PUT /api/orgs/{org}/apps/{app}/tags/{tag}` with the manifest and each platform's digest,
//! which makes the package and points the tag at it. Both need the registry right on the
//! org: member or owner org-wide (or a zone operator). Reading needs any role in the org.
//! Deleting a tag removes the packages nothing uses any more, and their binaries.
//!
//! Binaries are kept once per digest, but each org sees and names only the binaries it holds
//! (its packages name them, or it sent them within the last hour): asking whether the
//! registry holds a binary, or naming one in a package, answers for the path's org alone,
//! so an org neither learns what another sent nor builds on it without sending it itself.
//! A pool on `core` runs a package of an org its creator has a role in.
//!
//! The zone also serves the `orc` binary it runs (CLI and agent in one) for anyone to
//! download, with a `SHA256SUMS`: `GET /downloads/orc/SHA256SUMS` and
//! `GET /downloads/orc/orc-linux-<arch>`.

use std::collections::{BTreeMap, BTreeSet};

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio_stream::StreamExt as _;

use super::ApiState;
use super::access::Requirements as _;
use super::error::{ApiError, ApiResult, ErrorBody, ErrorCode};
use super::extract::{JsonBody, PathArgs};
use super::tenancy::{parse_name, visible_org};
use super::views::{
    AppTagView, BlobView, PackageView, PushPackage, PushedView, RegistryAppDetail, RegistryAppView,
};
use crate::apps::{BlobError, Blobs};
use crate::model::{Name, Org, Role};
use crate::store::StoreError;
use orc_zone_model::access::Caller;
use orc_zone_model::registry::{
    AppManifest, AppPackage, AppTag, BinaryRef, Digest, PackageDocument, PackageRef, Platform,
    valid_tag,
};

/// The largest binary the registry takes.
pub use crate::apps::blobs::MAX_BLOB_BYTES;

fn registry(state: &ApiState) -> ApiResult<&Blobs> {
    state.blobs.as_ref().ok_or_else(|| {
        ApiError::new(
            ErrorCode::Unavailable,
            "this zone keeps no app registry (it runs no core provider)",
        )
    })
}

fn parse_digest(field: &str, text: &str) -> ApiResult<Digest> {
    text.parse::<Digest>()
        .map_err(|e| ApiError::invalid(field, e.to_string()))
}

fn parse_tag(tag: &str) -> ApiResult<String> {
    if valid_tag(tag) {
        Ok(tag.to_string())
    } else {
        Err(ApiError::invalid(
            "tag",
            format!(
                "tag {tag:?} must be 1 to 64 letters, digits, '.', '-' or '_', starting with a letter or digit"
            ),
        ))
    }
}

/// The org, if the caller may publish to its registry (member or owner org-wide).
async fn publishing_org(state: &ApiState, caller: &Caller, org: &str) -> ApiResult<Org> {
    let org = visible_org(state, caller, org).await?;
    caller.require_org(&org, Role::Member).map_err(|e| {
        ApiError::forbidden(format!(
            "publishing to the registry of org {}: {}",
            org.name, e.message
        ))
    })?;
    Ok(org)
}

fn tag_view(org: &Org, tag: &AppTag, package: Option<&AppPackage>) -> AppTagView {
    AppTagView {
        package: format!("{}/{}:{}", org.name, tag.name, tag.tag),
        tag: tag.tag.clone(),
        digest: tag.digest.to_string(),
        version: package
            .map(|p| p.document.manifest.version.clone())
            .unwrap_or_default(),
        platforms: package
            .map(|p| {
                p.document
                    .binaries
                    .keys()
                    .map(ToString::to_string)
                    .collect()
            })
            .unwrap_or_default(),
        updated_at: tag.updated_at.millis(),
    }
}

/// Whether the registry holds a binary, and its size (`HEAD` answers the same, bodiless).
#[utoipa::path(get, path = "/api/orgs/{org}/registry/blobs/{digest}", tag = "registry",
    params(("org" = String, Path, description = "Org name"),
        ("digest" = String, Path, description = "sha256:<hex>")),
    responses((status = 200, body = BlobView), (status = 404, body = ErrorBody)))]
pub(super) async fn get_blob(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, digest)): PathArgs<(String, String)>,
) -> ApiResult<Json<BlobView>> {
    let org = visible_org(&state, &caller, &org).await?;
    let digest = parse_digest("digest", &digest)?;
    let blobs = registry(&state)?;
    match held_blob(&state, blobs, &org, &digest).await? {
        Some(size) => Ok(Json(BlobView {
            digest: digest.to_string(),
            size,
        })),
        None => Err(ApiError::not_found(
            "digest",
            format!("the registry of org {} holds no binary {digest}", org.name),
        )),
    }
}

/// The size of binary `digest` if `org` holds it and it is on disk.
async fn held_blob(
    state: &ApiState,
    blobs: &Blobs,
    org: &Org,
    digest: &Digest,
) -> ApiResult<Option<u64>> {
    if state.store.app_blob_of(&org.id, digest).await?.is_none() {
        return Ok(None);
    }
    Ok(blobs.size(digest))
}

/// Sends a binary. The body is the binary itself; it is kept only if its SHA-256 is
/// `digest`.
#[utoipa::path(put, path = "/api/orgs/{org}/registry/blobs/{digest}", tag = "registry",
    request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    params(("org" = String, Path, description = "Org name"),
        ("digest" = String, Path, description = "sha256:<hex> of the body")),
    responses((status = 201, body = BlobView), (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub(super) async fn put_blob(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, digest)): PathArgs<(String, String)>,
    body: Body,
) -> ApiResult<(StatusCode, Json<BlobView>)> {
    let org = publishing_org(&state, &caller, &org).await?;
    let digest = parse_digest("digest", &digest)?;
    let blobs = registry(&state)?;
    let stream = body
        .into_data_stream()
        .map(|chunk| chunk.map_err(std::io::Error::other));
    let reader = tokio_util::io::StreamReader::new(stream);
    let size = blobs
        .put(&digest, reader, MAX_BLOB_BYTES)
        .await
        .map_err(|e| match e {
            BlobError::Mismatch { .. } => ApiError::invalid("body", e.to_string()),
            BlobError::TooLarge { .. } => ApiError::new(ErrorCode::PayloadTooLarge, e.to_string()),
            other => {
                tracing::warn!(error = %other, "cannot keep a registry binary");
                ApiError::new(
                    ErrorCode::Unavailable,
                    "the registry cannot keep the binary right now",
                )
            }
        })?;
    state
        .store
        .put_app_blob_upload(&org.id, &digest, size, state.now())
        .await?;
    tracing::info!(org = %org.name, %digest, size, "registry binary kept");
    Ok((
        StatusCode::CREATED,
        Json(BlobView {
            digest: digest.to_string(),
            size,
        }),
    ))
}

/// Publishes a package under a tag: the manifest and the digest of each platform's binary
/// (each sent before). Pushing a tag again moves it; the package it named stays while a
/// pool runs it.
#[utoipa::path(put, path = "/api/orgs/{org}/apps/{app}/tags/{tag}", tag = "registry",
    request_body = PushPackage,
    params(("org" = String, Path, description = "Org name"),
        ("app" = String, Path, description = "App name"),
        ("tag" = String, Path, description = "Tag")),
    responses((status = 200, body = PushedView), (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn push_tag(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, app, tag)): PathArgs<(String, String, String)>,
    body: JsonBody<PushPackage>,
) -> ApiResult<Json<PushedView>> {
    let org = publishing_org(&state, &caller, &org).await?;
    let name = parse_name("app", &app)?;
    let tag = parse_tag(&tag)?;
    let body = body.parse()?;
    let blobs = registry(&state)?;
    let mut binaries = BTreeMap::new();
    for (platform, digest) in &body.binaries {
        let field = format!("binaries.{platform}");
        let platform: Platform =
            platform
                .parse()
                .map_err(|e: orc_zone_model::registry::RegistryError| {
                    ApiError::invalid(&field, e.to_string())
                })?;
        let digest = parse_digest(&field, digest)?;
        let size = held_blob(&state, blobs, &org, &digest).await?.ok_or_else(|| {
            ApiError::invalid(
                &field,
                format!("the registry of org {} holds no binary {digest} for {platform}: send it first (PUT …/registry/blobs/{digest})", org.name),
            )
        })?;
        binaries.insert(platform, BinaryRef { digest, size });
    }
    let document = PackageDocument {
        manifest: body.manifest,
        binaries,
    };
    document
        .validate(&name, Platform::host())
        .map_err(|e| registry_invalid(&e))?;
    let digest = document.digest();
    let package = AppPackage {
        org_id: org.id.clone(),
        name: name.clone(),
        digest: digest.clone(),
        document,
        created_at: state.now(),
    };
    state.store.put_app_package(&package).await?;
    let moved_from = state
        .store
        .set_app_tag(&org.id, &name, &tag, &digest, state.now())
        .await?
        .filter(|before| before != &digest);
    let reference = format!("{}/{}:{}", org.name, name, tag);
    tracing::info!(package = %reference, %digest, "app published");
    if moved_from.is_some() {
        collect_garbage(&state).await;
    }
    let stored = state
        .store
        .app_tag(&org.id, &name, &tag)
        .await?
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::Conflict,
                format!("tag {reference} was deleted while it was pushed"),
            )
        })?;
    Ok(Json(PushedView {
        tag: tag_view(&org, &stored, Some(&package)),
        moved_from: moved_from.map(|d| d.to_string()),
    }))
}

fn registry_invalid(e: &orc_zone_model::registry::RegistryError) -> ApiError {
    use orc_zone_model::registry::RegistryError as E;
    let field = match e {
        E::ManifestField { field, .. } => format!("manifest.{field}"),
        E::Manifest { .. } => "manifest".to_string(),
        E::NoBinary | E::MissingPlatform { .. } | E::Platform { .. } | E::Digest { .. } => {
            "binaries".to_string()
        }
        E::Reference { .. } => "app".to_string(),
    };
    ApiError::invalid(field, e.to_string())
}

/// The org's apps with their tags, by name.
#[utoipa::path(get, path = "/api/orgs/{org}/apps", tag = "registry",
    params(("org" = String, Path, description = "Org name")),
    responses((status = 200, body = Vec<RegistryAppView>), (status = 404, body = ErrorBody)))]
pub(super) async fn list_apps(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs(org): PathArgs<String>,
) -> ApiResult<Json<Vec<RegistryAppView>>> {
    let org = visible_org(&state, &caller, &org).await?;
    let mut apps: BTreeMap<Name, Vec<AppTagView>> = BTreeMap::new();
    for tag in state.store.list_app_tags(&org.id).await? {
        let package = state
            .store
            .app_package(&org.id, &tag.name, &tag.digest)
            .await?;
        apps.entry(tag.name.clone())
            .or_default()
            .push(tag_view(&org, &tag, package.as_ref()));
    }
    Ok(Json(
        apps.into_iter()
            .map(|(name, tags)| RegistryAppView {
                repository: format!("{}/{}", org.name, name),
                name: name.to_string(),
                tags,
            })
            .collect(),
    ))
}

/// An app's packages, oldest first, each with its manifest, binaries, tags and the pools
/// (that the caller can see) running it.
#[utoipa::path(get, path = "/api/orgs/{org}/apps/{app}", tag = "registry",
    params(("org" = String, Path, description = "Org name"),
        ("app" = String, Path, description = "App name")),
    responses((status = 200, body = RegistryAppDetail), (status = 404, body = ErrorBody)))]
pub(super) async fn get_app(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, app)): PathArgs<(String, String)>,
) -> ApiResult<Json<RegistryAppDetail>> {
    let org = visible_org(&state, &caller, &org).await?;
    let name = parse_name("app", &app)?;
    let packages = state.store.list_app_packages(&org.id, &name).await?;
    if packages.is_empty() {
        return Err(ApiError::not_found(
            "app",
            format!("the registry of org {} holds no app {name}", org.name),
        ));
    }
    let tags = state.store.list_app_tags(&org.id).await?;
    let running = pools_running(&state, &caller).await?;
    let mut out = Vec::new();
    for package in packages {
        out.push(PackageView {
            digest: package.digest.to_string(),
            tags: tags
                .iter()
                .filter(|t| t.name == name && t.digest == package.digest)
                .map(|t| t.tag.clone())
                .collect(),
            binaries: package
                .document
                .binaries
                .iter()
                .map(|(p, b)| {
                    (
                        p.to_string(),
                        BlobView {
                            digest: b.digest.to_string(),
                            size: b.size,
                        },
                    )
                })
                .collect(),
            pools: running.get(&package.digest).cloned().unwrap_or_default(),
            manifest: package.document.manifest,
            created_at: package.created_at.millis(),
        });
    }
    Ok(Json(RegistryAppDetail {
        repository: format!("{}/{}", org.name, name),
        name: name.to_string(),
        packages: out,
    }))
}

/// The pools (`org/project/pool`) the caller can see, by the package digest they run.
async fn pools_running(
    state: &ApiState,
    caller: &Caller,
) -> ApiResult<BTreeMap<Digest, Vec<String>>> {
    let mut out: BTreeMap<Digest, Vec<String>> = BTreeMap::new();
    for pool in state.store.list_all_pools().await? {
        let Some(digest) = pool.spec.app.as_ref().and_then(|a| a.digest.clone()) else {
            continue;
        };
        let project = state.store.get_project(&pool.project_id).await?;
        if caller.project_role(&project).is_none() {
            continue;
        }
        let org = state.store.get_org(&project.org_id).await?;
        out.entry(digest)
            .or_default()
            .push(format!("{}/{}/{}", org.name, project.name, pool.name));
    }
    Ok(out)
}

/// Removes a tag. Packages no tag names and no pool runs go, with their binaries.
#[utoipa::path(delete, path = "/api/orgs/{org}/apps/{app}/tags/{tag}", tag = "registry",
    params(("org" = String, Path, description = "Org name"),
        ("app" = String, Path, description = "App name"),
        ("tag" = String, Path, description = "Tag")),
    responses((status = 204), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn delete_tag(
    State(state): State<ApiState>,
    caller: Caller,
    PathArgs((org, app, tag)): PathArgs<(String, String, String)>,
) -> ApiResult<StatusCode> {
    let org = publishing_org(&state, &caller, &org).await?;
    let name = parse_name("app", &app)?;
    let tag = parse_tag(&tag)?;
    if !state.store.delete_app_tag(&org.id, &name, &tag).await? {
        return Err(ApiError::not_found(
            "tag",
            format!("the registry of org {} has no {name}:{tag}", org.name),
        ));
    }
    tracing::info!(package = %format!("{}/{name}:{tag}", org.name), "app tag deleted");
    collect_garbage(&state).await;
    Ok(StatusCode::NO_CONTENT)
}

/// How long a binary sent to the registry is kept for its org without a package naming it.
pub const UPLOAD_KEPT: std::time::Duration = std::time::Duration::from_secs(3600);

/// How long an image upload may stay open between its requests.
pub const UPLOAD_SESSION_KEPT: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// Removes packages nothing uses, uploads no package took up within [`UPLOAD_KEPT`], and
/// binaries neither names. A failure is logged: the next delete or move tries again.
pub(crate) async fn collect_garbage(state: &ApiState) {
    let Some(blobs) = state.blobs.clone() else {
        return;
    };
    let result = async {
        let pruned = state.store.prune_app_packages().await?;
        let kept = i64::try_from(UPLOAD_KEPT.as_millis()).unwrap_or(i64::MAX);
        state
            .store
            .expire_app_blob_uploads(state.now().plus_millis(-kept))
            .await?;
        let mut keep = state.store.app_binary_digests().await?;
        keep.extend(state.store.image_blob_digests().await?);
        Ok::<_, StoreError>((pruned, keep))
    }
    .await;
    match result {
        Ok((pruned, keep)) => {
            let removed = tokio::task::spawn_blocking(move || {
                blobs.expire_uploads(UPLOAD_SESSION_KEPT);
                blobs.remove_except(&keep)
            })
            .await;
            match removed {
                Ok(Ok(n)) => tracing::info!(
                    packages = pruned.len(),
                    binaries = n,
                    "unused registry packages removed"
                ),
                Ok(Err(e)) => tracing::warn!(error = %e, "cannot remove unused registry binaries"),
                Err(e) => tracing::warn!(error = %e, "cannot remove unused registry binaries"),
            }
        }
        Err(e) => tracing::warn!(error = %e, "cannot prune the registry"),
    }
}

/// What a pool's `app` resolves to.
#[derive(Debug, Clone)]
pub(crate) struct ResolvedApp {
    /// The package digest the tag names; `None` for an app the operator configured by name.
    pub digest: Option<Digest>,
    /// The package's manifest; `None` for an app the operator configured by name.
    pub manifest: Option<AppManifest>,
    /// The params the app declares sensitive.
    pub sensitive: BTreeSet<String>,
}

/// Resolves `package` (`org/name:tag`) for a pool on `core` that `caller` creates or
/// reconfigures: the registry's tag, else an app the operator configured by name (those are
/// org `sys`'s); refused naming the package otherwise. The package's org must be one the
/// caller has a role in (the pool's own org always is); any other reads as not published,
/// so the answer tells nothing of orgs the caller cannot see. A pool on another provider
/// only hands the package on, so nothing is resolved for it.
pub(crate) async fn resolve_app(
    state: &ApiState,
    caller: &Caller,
    package: &str,
    on_core: bool,
) -> ApiResult<ResolvedApp> {
    if !on_core {
        return Ok(ResolvedApp {
            digest: None,
            manifest: None,
            sensitive: state.apps.sensitive_params(package),
        });
    }
    let reference: PackageRef =
        package
            .parse()
            .map_err(|e: orc_zone_model::registry::RegistryError| {
                ApiError::invalid("app", e.to_string())
            })?;
    let unpublished = || {
        ApiError::invalid(
            "app",
            format!(
                "app {reference} is not published in this zone's registry: publish it with orc registry push {reference}"
            ),
        )
    };
    let org = match state.store.org_by_name(&reference.org).await {
        Ok(org) if caller.sees_org(&org) => org,
        Ok(_) | Err(StoreError::NotFound { .. }) => return Err(unpublished()),
        Err(e) => return Err(e.into()),
    };
    if let Some(tag) = state
        .store
        .app_tag(&org.id, &reference.name, &reference.tag)
        .await?
        && let Some(found) = state
            .store
            .app_package(&org.id, &reference.name, &tag.digest)
            .await?
    {
        return Ok(ResolvedApp {
            digest: Some(found.digest),
            sensitive: found.document.manifest.sensitive_params(),
            manifest: Some(found.document.manifest),
        });
    }
    if state.apps.resolve(package).is_ok() {
        return Ok(ResolvedApp {
            digest: None,
            manifest: None,
            sensitive: state.apps.sensitive_params(package),
        });
    }
    Err(unpublished())
}

/// Checks params against the app's manifest: each param the manifest requires is set, each
/// JSON param parses, and, when it declares params, every plain param given is one of them.
/// Errors name the param's field (`params.partner_id`).
pub(crate) fn check_manifest_params(
    package: &str,
    manifest: &AppManifest,
    params: &BTreeMap<String, String>,
    sensitive: &BTreeMap<String, String>,
) -> ApiResult<()> {
    // A sensitive param the manifest does not declare is still taken: an app may name its
    // secrets in another param (`param://NAME`).
    if !manifest.params.is_empty() {
        for name in params.keys() {
            if manifest.param(name).is_none() {
                return Err(ApiError::invalid(
                    format!("params.{name}"),
                    format!("app {package} takes no param {name}"),
                ));
            }
        }
    }
    for param in manifest.params.iter().filter(|p| p.required) {
        let given = params
            .get(&param.name)
            .or_else(|| sensitive.get(&param.name))
            .is_some_and(|v| !v.trim().is_empty());
        if !given {
            let field = if param.sensitive {
                "sensitive_params"
            } else {
                "params"
            };
            return Err(ApiError::invalid(
                format!("{field}.{}", param.name),
                format!("app {package} needs param {}", param.name),
            ));
        }
    }
    for param in manifest.params.iter().filter(|p| p.json) {
        if let Some(text) = params.get(&param.name).filter(|t| !t.trim().is_empty())
            && let Err(e) = serde_json::from_str::<serde_json::Value>(text)
        {
            return Err(ApiError::invalid(
                format!("params.{}", param.name),
                format!("param {} is not JSON: {e}", param.name),
            ));
        }
    }
    Ok(())
}

/// The `orc` binary this zone runs, for download.
#[utoipa::path(get, path = "/downloads/orc/{file}", tag = "registry", security(()),
    params(("file" = String, Path, description = "`SHA256SUMS` or `orc-linux-<arch>`")),
    responses((status = 200, description = "The file", content_type = "application/octet-stream"),
        (status = 404, body = ErrorBody)))]
pub(super) async fn download(
    State(state): State<ApiState>,
    PathArgs(file): PathArgs<String>,
) -> ApiResult<Response> {
    let binary = state
        .agent_binary
        .as_deref()
        .ok_or_else(|| ApiError::not_found("file", "this zone serves no orc binary"))?;
    let platform = Platform::host()
        .ok_or_else(|| ApiError::not_found("file", "this zone's platform has no download"))?;
    let name = format!("orc-{}", platform.file_suffix());
    if file == "SHA256SUMS" {
        return Ok((
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("{}  {name}\n", binary.sha256),
        )
            .into_response());
    }
    if file != name {
        return Err(ApiError::not_found(
            "file",
            format!("this zone serves {name} and SHA256SUMS only"),
        ));
    }
    super::nodes::stream_binary(binary).await
}

/// Every `every`, removes the packages nothing uses any more (a pool that ran one ended)
/// and their binaries.
pub async fn sweep(state: ApiState, every: std::time::Duration) {
    loop {
        tokio::time::sleep(every).await;
        collect_garbage(&state).await;
    }
}
