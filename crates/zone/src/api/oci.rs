//! The registry's images: the OCI distribution API under `/v2/`, beside the package API.
//!
//! Any OCI client (docker, podman, skopeo, containerd) pushes and pulls here with the
//! zone's API tokens as credentials: `Authorization: Basic` with the token as the password
//! (any user name), or `Authorization: Bearer TOKEN`; a request without either is answered
//! 401 with a `Basic` challenge, which is what makes clients send their login.
//!
//! Repositories are `<org>/<name>`. Pushing needs the registry right on the org (member or
//! owner org-wide, or an operator), pulling any role in it. Blobs are content-addressed and
//! checked against their digest before they are kept, once per digest for the zone, but an
//! org sees only the blobs it holds: those it sent within the hour and those its manifests
//! name. A cross-repository mount is taken within the org and refused (as a fresh upload)
//! from any other. Errors are the distribution spec's JSON (`{"errors":[{"code":…}]}`).

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde::Serialize;
use tokio_stream::StreamExt as _;

use super::ApiState;
use super::access::Requirements as _;
use super::error::ApiError;
use super::extract::caller_of_token;
use super::registry::MAX_BLOB_BYTES;
use super::tenancy::visible_org;
use crate::apps::{BlobError, Blobs};
use crate::model::{Org, Role};
use crate::store::ImageManifestRow;
use orc_zone_api_types::error::ErrorCode;
use orc_zone_model::access::Caller;
use orc_zone_model::oci::{Manifest, PullGrant, PullKey, Repository, valid_tag, valid_upload_id};
use orc_zone_model::registry::Digest;

/// An error as the distribution spec writes it.
#[derive(Debug)]
struct OciError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

#[derive(Serialize)]
struct ErrorsBody<'a> {
    errors: [ErrorEntry<'a>; 1],
}

#[derive(Serialize)]
struct ErrorEntry<'a> {
    code: &'a str,
    message: &'a str,
}

impl OciError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    fn unsupported(message: impl Into<String>) -> Self {
        Self::new(StatusCode::METHOD_NOT_ALLOWED, "UNSUPPORTED", message)
    }
}

impl From<ApiError> for OciError {
    fn from(error: ApiError) -> Self {
        let (status, code) = match error.code {
            ErrorCode::Unauthenticated => (StatusCode::UNAUTHORIZED, "UNAUTHORIZED"),
            ErrorCode::Forbidden => (StatusCode::FORBIDDEN, "DENIED"),
            ErrorCode::NotFound => (StatusCode::NOT_FOUND, "NAME_UNKNOWN"),
            ErrorCode::Invalid => (StatusCode::BAD_REQUEST, "NAME_INVALID"),
            ErrorCode::PayloadTooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "SIZE_INVALID"),
            _ => (StatusCode::SERVICE_UNAVAILABLE, "UNAVAILABLE"),
        };
        Self::new(status, code, error.message)
    }
}

impl From<crate::store::StoreError> for OciError {
    fn from(error: crate::store::StoreError) -> Self {
        ApiError::from(error).into()
    }
}

impl IntoResponse for OciError {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&ErrorsBody {
            errors: [ErrorEntry {
                code: self.code,
                message: &self.message,
            }],
        })
        .unwrap_or_default();
        let mut response = (
            self.status,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"orc registry\", charset=\"UTF-8\""),
            );
        }
        response
    }
}

type OciResult<T> = Result<T, OciError>;

/// Every `/v2/…` request.
pub(super) async fn serve(State(state): State<ApiState>, request: Request) -> Response {
    let mut response = match route(&state, request).await {
        Ok(response) => response,
        Err(error) => error.into_response(),
    };
    response.headers_mut().insert(
        "docker-distribution-api-version",
        HeaderValue::from_static("registry/2.0"),
    );
    response
}

/// What a path under `/v2/` names.
#[derive(Debug, PartialEq, Eq)]
enum Target<'a> {
    Base,
    Manifest(&'a str, &'a str),
    Blob(&'a str, &'a str),
    Uploads(&'a str),
    Upload(&'a str, &'a str),
    Tags(&'a str),
}

fn target(path: &str) -> Option<Target<'_>> {
    let rest = path.strip_prefix("/v2")?;
    if rest.is_empty() || rest == "/" {
        return Some(Target::Base);
    }
    let rest = rest.strip_prefix('/')?;
    if let Some(name) = rest.strip_suffix("/tags/list") {
        return Some(Target::Tags(name));
    }
    if let Some(name) = rest
        .strip_suffix("/blobs/uploads/")
        .or_else(|| rest.strip_suffix("/blobs/uploads"))
    {
        return Some(Target::Uploads(name));
    }
    if let Some((name, id)) = rest.rsplit_once("/blobs/uploads/") {
        return Some(Target::Upload(name, id));
    }
    if let Some((name, digest)) = rest.rsplit_once("/blobs/") {
        return Some(Target::Blob(name, digest));
    }
    if let Some((name, reference)) = rest.rsplit_once("/manifests/") {
        return Some(Target::Manifest(name, reference));
    }
    None
}

/// Who asks: a person or app with an API token, or a node with the pull grant its
/// assignment carries (it reads its org's images and nothing else).
enum Who {
    Caller(Box<Caller>),
    Node(PullGrant),
}

async fn authenticate(state: &ApiState, parts: &axum::http::request::Parts) -> OciResult<Who> {
    let unauthorized = |message: &str| {
        OciError::new(
            StatusCode::UNAUTHORIZED,
            "UNAUTHORIZED",
            message.to_string(),
        )
    };
    let Some(value) = parts
        .headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return Err(unauthorized(
            "log in with an API token of the zone as the password (orc token create)",
        ));
    };
    let token = if let Some(encoded) = value.strip_prefix("Basic ") {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .ok_or_else(|| unauthorized("the Basic credentials are not base64 of USER:TOKEN"))?;
        decoded
            .split_once(':')
            .map(|(_, password)| password.to_string())
            .ok_or_else(|| unauthorized("the Basic credentials are not USER:TOKEN"))?
    } else if let Some(token) = value.strip_prefix("Bearer ") {
        token.trim().to_string()
    } else {
        return Err(unauthorized(
            "the Authorization header must be Basic or Bearer",
        ));
    };
    if token.is_empty() {
        return Err(unauthorized("the token is empty"));
    }
    if PullKey::is_grant(&token) {
        return state
            .pull_key
            .check(&token, state.now())
            .map(Who::Node)
            .ok_or_else(|| unauthorized("the pull grant is altered or expired"));
    }
    caller_of_token(state, parts, &token)
        .await
        .map(|caller| Who::Caller(Box::new(caller)))
        .map_err(|e| match e.code {
            ErrorCode::Unauthenticated => unauthorized(&e.message),
            _ => e.into(),
        })
}

fn registry(state: &ApiState) -> OciResult<&Blobs> {
    state.blobs.as_ref().ok_or_else(|| {
        OciError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "UNAVAILABLE",
            "this zone keeps no registry (it runs no core provider)",
        )
    })
}

fn repository(name: &str) -> OciResult<Repository> {
    Repository::parse(name).map_err(|e| OciError::new(StatusCode::BAD_REQUEST, "NAME_INVALID", e))
}

/// The org of `repository`, if the caller may read it (`write`: push to it).
async fn org_for(
    state: &ApiState,
    who: &Who,
    repository: &Repository,
    write: bool,
) -> OciResult<Org> {
    let unknown = || {
        OciError::new(
            StatusCode::NOT_FOUND,
            "NAME_UNKNOWN",
            format!("repository {repository} is not known to this registry"),
        )
    };
    let caller = match who {
        Who::Caller(caller) => caller,
        Who::Node(grant) => {
            let org = state
                .store
                .org_by_name(&repository.org)
                .await
                .map_err(|_| unknown())?;
            if org.id != grant.org {
                return Err(unknown());
            }
            if write {
                return Err(OciError::new(
                    StatusCode::FORBIDDEN,
                    "DENIED",
                    format!("node {} pulls; it does not push", grant.node),
                ));
            }
            return Ok(org);
        }
    };
    let org = visible_org(state, caller, repository.org.as_str())
        .await
        .map_err(|_| unknown())?;
    if write {
        caller.require_org(&org, Role::Member).map_err(|e| {
            OciError::new(
                StatusCode::FORBIDDEN,
                "DENIED",
                format!("pushing to {repository}: {}", e.message),
            )
        })?;
    }
    Ok(org)
}

fn digest(text: &str) -> OciResult<Digest> {
    let invalid = || {
        OciError::new(
            StatusCode::BAD_REQUEST,
            "DIGEST_INVALID",
            format!("{text:?} is not a sha256 digest (sha256:<64 hex digits>)"),
        )
    };
    if !text.starts_with("sha256:") {
        return Err(invalid());
    }
    text.parse().map_err(|_| invalid())
}

fn query(uri: &axum::http::Uri, key: &str) -> Option<String> {
    uri.query().and_then(|q| {
        serde_urlencoded::from_str::<Vec<(String, String)>>(q)
            .ok()?
            .into_iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    })
}

async fn route(state: &ApiState, request: Request) -> OciResult<Response> {
    let (parts, body) = request.into_parts();
    let who = authenticate(state, &parts).await?;
    let path = parts.uri.path().to_string();
    let Some(target) = target(&path) else {
        return Err(OciError::new(
            StatusCode::NOT_FOUND,
            "NAME_UNKNOWN",
            format!("{path} is not a registry path"),
        ));
    };
    let method = parts.method.clone();
    match target {
        Target::Base => Ok((
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            "{}",
        )
            .into_response()),
        Target::Tags(name) if method == Method::GET => {
            tags(state, &who, &repository(name)?, &parts.uri).await
        }
        Target::Blob(name, d) if method == Method::GET || method == Method::HEAD => {
            get_blob(
                state,
                &who,
                &repository(name)?,
                &digest(d)?,
                method == Method::HEAD,
            )
            .await
        }
        Target::Blob(name, d) if method == Method::DELETE => {
            delete_blob(state, &who, &repository(name)?, &digest(d)?).await
        }
        Target::Uploads(name) if method == Method::POST => {
            start_upload(state, &who, &repository(name)?, &parts.uri, body).await
        }
        Target::Upload(name, id) => {
            let repository = repository(name)?;
            let org = org_for(state, &who, &repository, true).await?;
            let blobs = registry(state)?;
            let owner = owner(&org, &repository);
            let size = match valid_upload_id(id).then(|| blobs.upload(id)).flatten() {
                Some((holder, size)) if holder == owner => size,
                _ => {
                    return Err(OciError::new(
                        StatusCode::NOT_FOUND,
                        "BLOB_UPLOAD_UNKNOWN",
                        format!("no upload {id} is open for {repository}"),
                    ));
                }
            };
            match method {
                Method::GET => Ok(upload_progress(
                    StatusCode::NO_CONTENT,
                    &repository,
                    id,
                    size,
                )),
                Method::PATCH => {
                    patch_upload(blobs, &repository, id, size, &parts.headers, body).await
                }
                Method::PUT => {
                    finish_upload(state, blobs, &org, &repository, id, &parts.uri, body).await
                }
                Method::DELETE => {
                    blobs.cancel_upload(id);
                    Ok(StatusCode::NO_CONTENT.into_response())
                }
                _ => Err(OciError::unsupported(format!(
                    "{method} is not served on an upload"
                ))),
            }
        }
        Target::Manifest(name, reference) => {
            let repository = repository(name)?;
            match method {
                Method::GET | Method::HEAD => {
                    get_manifest(state, &who, &repository, reference, method == Method::HEAD).await
                }
                Method::PUT => {
                    put_manifest(state, &who, &repository, reference, &parts.headers, body).await
                }
                Method::DELETE => delete_manifest(state, &who, &repository, reference).await,
                _ => Err(OciError::unsupported(format!(
                    "{method} is not served on a manifest"
                ))),
            }
        }
        _ => Err(OciError::unsupported(format!(
            "{method} is not served on {path}"
        ))),
    }
}

fn owner(org: &Org, repository: &Repository) -> String {
    format!("{}/{}", org.id, repository.name)
}

fn location(value: &str) -> (header::HeaderName, HeaderValue) {
    (
        header::LOCATION,
        HeaderValue::from_str(value).unwrap_or_else(|_| HeaderValue::from_static("/v2/")),
    )
}

fn digest_header(digest: &Digest) -> (header::HeaderName, HeaderValue) {
    (
        header::HeaderName::from_static("docker-content-digest"),
        HeaderValue::from_str(digest.as_str()).unwrap_or_else(|_| HeaderValue::from_static("")),
    )
}

fn upload_progress(status: StatusCode, repository: &Repository, id: &str, size: u64) -> Response {
    let mut response = status.into_response();
    let headers = response.headers_mut();
    let (name, value) = location(&format!("/v2/{repository}/blobs/uploads/{id}"));
    headers.insert(name, value);
    // The range of bytes received, inclusive; `0-0` before the first.
    let range = format!("0-{}", size.saturating_sub(1));
    if let Ok(value) = HeaderValue::from_str(&range) {
        headers.insert(header::RANGE, value);
    }
    if let Ok(value) = HeaderValue::from_str(id) {
        headers.insert("docker-upload-uuid", value);
    }
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
    response
}

fn blob_created(repository: &Repository, digest: &Digest) -> Response {
    let mut response = StatusCode::CREATED.into_response();
    let headers = response.headers_mut();
    let (name, value) = location(&format!("/v2/{repository}/blobs/{digest}"));
    headers.insert(name, value);
    let (name, value) = digest_header(digest);
    headers.insert(name, value);
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
    response
}

/// The size of blob `digest` if `org` holds it and it is on disk.
async fn held(
    state: &ApiState,
    blobs: &Blobs,
    org: &Org,
    digest: &Digest,
) -> OciResult<Option<u64>> {
    let holds = state.store.app_blob_of(&org.id, digest).await?.is_some()
        || state.store.image_blob_of(&org.id, digest).await?.is_some();
    Ok(if holds { blobs.size(digest) } else { None })
}

fn blob_error(error: BlobError) -> OciError {
    match error {
        BlobError::Mismatch { .. } => {
            OciError::new(StatusCode::BAD_REQUEST, "DIGEST_INVALID", error.to_string())
        }
        BlobError::TooLarge { max, .. } => OciError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "SIZE_INVALID",
            format!("a blob may be at most {max} bytes"),
        ),
        other => {
            tracing::warn!(error = %other, "the registry cannot keep a blob");
            OciError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "UNAVAILABLE",
                "the registry cannot keep the blob right now",
            )
        }
    }
}

fn body_reader(body: Body) -> impl tokio::io::AsyncRead + Unpin {
    tokio_util::io::StreamReader::new(
        body.into_data_stream()
            .map(|chunk| chunk.map_err(std::io::Error::other)),
    )
}

async fn get_blob(
    state: &ApiState,
    who: &Who,
    repository: &Repository,
    digest: &Digest,
    head: bool,
) -> OciResult<Response> {
    let org = org_for(state, who, repository, false).await?;
    let blobs = registry(state)?;
    let Some(size) = held(state, blobs, &org, digest).await? else {
        return Err(OciError::new(
            StatusCode::NOT_FOUND,
            "BLOB_UNKNOWN",
            format!("{repository} holds no blob {digest}"),
        ));
    };
    let body = if head {
        Body::empty()
    } else {
        let file = tokio::fs::File::open(blobs.path(digest))
            .await
            .map_err(|e| {
                tracing::warn!(%digest, error = %e, "a registry blob cannot be read");
                OciError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "UNAVAILABLE",
                    "the blob cannot be read right now",
                )
            })?;
        Body::from_stream(tokio_util::io::ReaderStream::new(file))
    };
    let mut response = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/octet-stream")],
        body,
    )
        .into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(size));
    let (name, value) = digest_header(digest);
    headers.insert(name, value);
    Ok(response)
}

async fn delete_blob(
    state: &ApiState,
    who: &Who,
    repository: &Repository,
    digest: &Digest,
) -> OciResult<Response> {
    let org = org_for(state, who, repository, true).await?;
    if state.store.image_blob_of(&org.id, digest).await?.is_some() {
        return Err(OciError::new(
            StatusCode::CONFLICT,
            "DENIED",
            format!(
                "blob {digest} is part of a manifest of org {}: delete the manifest instead",
                org.name
            ),
        ));
    }
    if state.store.app_blob_of(&org.id, digest).await?.is_none() {
        return Err(OciError::new(
            StatusCode::NOT_FOUND,
            "BLOB_UNKNOWN",
            format!("{repository} holds no blob {digest}"),
        ));
    }
    state.store.forget_app_blob_upload(&org.id, digest).await?;
    Ok(StatusCode::ACCEPTED.into_response())
}

async fn start_upload(
    state: &ApiState,
    who: &Who,
    repository: &Repository,
    uri: &axum::http::Uri,
    body: Body,
) -> OciResult<Response> {
    let org = org_for(state, who, repository, true).await?;
    let blobs = registry(state)?;
    if let Some(mounted) = query(uri, "mount") {
        let mounted = digest(&mounted)?;
        // Only within the org: a mount from another org's repository starts an upload, so
        // no org learns what another holds.
        let from_same_org = query(uri, "from")
            .and_then(|from| Repository::parse(&from).ok())
            .is_some_and(|from| from.org == repository.org);
        if from_same_org && held(state, blobs, &org, &mounted).await?.is_some() {
            return Ok(blob_created(repository, &mounted));
        }
    }
    if let Some(expected) = query(uri, "digest") {
        let expected = digest(&expected)?;
        let size = blobs
            .put(&expected, body_reader(body), MAX_BLOB_BYTES)
            .await
            .map_err(blob_error)?;
        state
            .store
            .put_app_blob_upload(&org.id, &expected, size, state.now())
            .await?;
        return Ok(blob_created(repository, &expected));
    }
    let id = blobs
        .start_upload(&owner(&org, repository))
        .map_err(blob_error)?;
    Ok(upload_progress(StatusCode::ACCEPTED, repository, &id, 0))
}

async fn patch_upload(
    blobs: &Blobs,
    repository: &Repository,
    id: &str,
    size: u64,
    headers: &HeaderMap,
    body: Body,
) -> OciResult<Response> {
    if let Some(range) = headers
        .get(header::CONTENT_RANGE)
        .and_then(|v| v.to_str().ok())
    {
        let start = range
            .trim_start_matches("bytes ")
            .split('-')
            .next()
            .and_then(|s| s.trim().parse::<u64>().ok());
        if start != Some(size) {
            return Err(OciError::new(
                StatusCode::RANGE_NOT_SATISFIABLE,
                "BLOB_UPLOAD_INVALID",
                format!("the chunk starts at {range}, but the upload holds {size} bytes"),
            ));
        }
    }
    let size = blobs
        .append_upload(id, body_reader(body), MAX_BLOB_BYTES)
        .await
        .map_err(blob_error)?;
    Ok(upload_progress(StatusCode::ACCEPTED, repository, id, size))
}

async fn finish_upload(
    state: &ApiState,
    blobs: &Blobs,
    org: &Org,
    repository: &Repository,
    id: &str,
    uri: &axum::http::Uri,
    body: Body,
) -> OciResult<Response> {
    let Some(expected) = query(uri, "digest") else {
        return Err(OciError::new(
            StatusCode::BAD_REQUEST,
            "DIGEST_INVALID",
            "closing an upload needs ?digest=sha256:…",
        ));
    };
    let expected = digest(&expected)?;
    blobs
        .append_upload(id, body_reader(body), MAX_BLOB_BYTES)
        .await
        .map_err(blob_error)?;
    let finishing = blobs.clone();
    let id_owned = id.to_string();
    let wanted = expected.clone();
    let size = tokio::task::spawn_blocking(move || finishing.finish_upload(&id_owned, &wanted))
        .await
        .map_err(|e| {
            OciError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "UNAVAILABLE",
                e.to_string(),
            )
        })?
        .map_err(blob_error)?;
    state
        .store
        .put_app_blob_upload(&org.id, &expected, size, state.now())
        .await?;
    Ok(blob_created(repository, &expected))
}

/// The manifest `reference` (a tag or a digest) names in `repository`.
async fn find_manifest(
    state: &ApiState,
    org: &Org,
    repository: &Repository,
    reference: &str,
) -> OciResult<ImageManifestRow> {
    let unknown = || {
        OciError::new(
            StatusCode::NOT_FOUND,
            "MANIFEST_UNKNOWN",
            format!("{repository} has no manifest {reference}"),
        )
    };
    let wanted = if reference.starts_with("sha256:") {
        digest(reference)?
    } else {
        state
            .store
            .image_tag(&org.id, &repository.name, reference)
            .await?
            .ok_or_else(unknown)?
    };
    state
        .store
        .image_manifest(&org.id, &repository.name, &wanted)
        .await?
        .ok_or_else(unknown)
}

async fn get_manifest(
    state: &ApiState,
    who: &Who,
    repository: &Repository,
    reference: &str,
    head: bool,
) -> OciResult<Response> {
    let org = org_for(state, who, repository, false).await?;
    let blobs = registry(state)?;
    let manifest = find_manifest(state, &org, repository, reference).await?;
    let body = if head {
        Body::empty()
    } else {
        let bytes = tokio::fs::read(blobs.path(&manifest.digest))
            .await
            .map_err(|e| {
                tracing::warn!(digest = %manifest.digest, error = %e, "a manifest cannot be read");
                OciError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "UNAVAILABLE",
                    "the manifest cannot be read right now",
                )
            })?;
        Body::from(bytes)
    };
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&manifest.media_type) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(manifest.size));
    let (name, value) = digest_header(&manifest.digest);
    headers.insert(name, value);
    Ok(response)
}

async fn put_manifest(
    state: &ApiState,
    who: &Who,
    repository: &Repository,
    reference: &str,
    headers: &HeaderMap,
    body: Body,
) -> OciResult<Response> {
    let org = org_for(state, who, repository, true).await?;
    let blobs = registry(state)?;
    let by_digest = reference.starts_with("sha256:");
    if !by_digest && !valid_tag(reference) {
        return Err(OciError::new(
            StatusCode::BAD_REQUEST,
            "TAG_INVALID",
            format!(
                "tag {reference:?} must be 1 to 128 of A-Z, a-z, 0-9, '_', '.' and '-', not starting with '.' or '-'"
            ),
        ));
    }
    let bytes = axum::body::to_bytes(body, orc_zone_model::oci::MAX_MANIFEST_BYTES)
        .await
        .map_err(|_| {
            OciError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "MANIFEST_INVALID",
                format!(
                    "a manifest may be at most {} bytes",
                    orc_zone_model::oci::MAX_MANIFEST_BYTES
                ),
            )
        })?;
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let manifest = Manifest::parse(content_type, &bytes)
        .map_err(|e| OciError::new(StatusCode::BAD_REQUEST, "MANIFEST_INVALID", e))?;
    let actual = Digest::of(&bytes);
    if by_digest && digest(reference)? != actual {
        return Err(OciError::new(
            StatusCode::BAD_REQUEST,
            "DIGEST_INVALID",
            format!("the manifest sent as {reference} has digest {actual}"),
        ));
    }
    for (blob, _) in &manifest.references.blobs {
        if held(state, blobs, &org, blob).await?.is_none() {
            return Err(OciError::new(
                StatusCode::BAD_REQUEST,
                "MANIFEST_BLOB_UNKNOWN",
                format!(
                    "the manifest names blob {blob}, which {repository} does not hold: push it first"
                ),
            ));
        }
    }
    for (child, _) in &manifest.references.manifests {
        if state
            .store
            .image_manifest(&org.id, &repository.name, child)
            .await?
            .is_none()
        {
            return Err(OciError::new(
                StatusCode::BAD_REQUEST,
                "MANIFEST_BLOB_UNKNOWN",
                format!(
                    "the index names manifest {child}, which {repository} does not hold: push it first"
                ),
            ));
        }
    }
    let size = blobs
        .put(
            &actual,
            &bytes[..],
            orc_zone_model::oci::MAX_MANIFEST_BYTES as u64,
        )
        .await
        .map_err(blob_error)?;
    let references: Vec<(Digest, u64)> = manifest
        .references
        .blobs
        .iter()
        .chain(manifest.references.manifests.iter())
        .cloned()
        .collect();
    let row = ImageManifestRow {
        digest: actual.clone(),
        media_type: manifest.media_type.clone(),
        size,
    };
    let now = state.now();
    state
        .store
        .put_image_manifest(&org.id, &repository.name, &row, &references, now)
        .await?;
    if !by_digest {
        state
            .store
            .set_image_tag(&org.id, &repository.name, reference, &actual, now)
            .await?;
    }
    tracing::info!(repository = %repository, reference, digest = %actual, "image manifest kept");
    let mut response = StatusCode::CREATED.into_response();
    let headers = response.headers_mut();
    let (name, value) = location(&format!("/v2/{repository}/manifests/{actual}"));
    headers.insert(name, value);
    let (name, value) = digest_header(&actual);
    headers.insert(name, value);
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
    Ok(response)
}

async fn delete_manifest(
    state: &ApiState,
    who: &Who,
    repository: &Repository,
    reference: &str,
) -> OciResult<Response> {
    let org = org_for(state, who, repository, true).await?;
    let deleted = if reference.starts_with("sha256:") {
        state
            .store
            .delete_image_manifest(&org.id, &repository.name, &digest(reference)?)
            .await?
    } else {
        state
            .store
            .delete_image_tag(&org.id, &repository.name, reference)
            .await?
    };
    if !deleted {
        return Err(OciError::new(
            StatusCode::NOT_FOUND,
            "MANIFEST_UNKNOWN",
            format!("{repository} has no manifest {reference}"),
        ));
    }
    tracing::info!(repository = %repository, reference, "image manifest or tag deleted");
    super::registry::collect_garbage(state).await;
    Ok(StatusCode::ACCEPTED.into_response())
}

async fn tags(
    state: &ApiState,
    who: &Who,
    repository: &Repository,
    uri: &axum::http::Uri,
) -> OciResult<Response> {
    let org = org_for(state, who, repository, false).await?;
    if !state
        .store
        .image_repository_exists(&org.id, &repository.name)
        .await?
    {
        return Err(OciError::new(
            StatusCode::NOT_FOUND,
            "NAME_UNKNOWN",
            format!("repository {repository} holds no image"),
        ));
    }
    let all = state
        .store
        .list_image_tags(&org.id, &repository.name)
        .await?;
    let last = query(uri, "last");
    let after: Vec<String> = all
        .into_iter()
        .filter(|t| last.as_ref().is_none_or(|l| t.as_str() > l.as_str()))
        .collect();
    let n = query(uri, "n").and_then(|n| n.parse::<usize>().ok());
    let page: Vec<String> = match n {
        Some(n) => after.iter().take(n).cloned().collect(),
        None => after.clone(),
    };
    let more = n.is_some_and(|n| after.len() > n);
    let body = serde_json::json!({ "name": repository.to_string(), "tags": page });
    let mut response = axum::Json(body).into_response();
    if more && let (Some(n), Some(last)) = (n, page.last()) {
        let link = format!("</v2/{repository}/tags/list?n={n}&last={last}>; rel=\"next\"");
        if let Ok(value) = HeaderValue::from_str(&link) {
            response.headers_mut().insert(header::LINK, value);
        }
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_what_they_address() {
        assert_eq!(target("/v2/"), Some(Target::Base));
        assert_eq!(target("/v2"), Some(Target::Base));
        assert_eq!(
            target("/v2/acme/web/tags/list"),
            Some(Target::Tags("acme/web"))
        );
        assert_eq!(
            target("/v2/acme/web/blobs/uploads/"),
            Some(Target::Uploads("acme/web"))
        );
        assert_eq!(
            target("/v2/acme/web/blobs/uploads/abc"),
            Some(Target::Upload("acme/web", "abc"))
        );
        assert_eq!(
            target("/v2/acme/web/blobs/sha256:00"),
            Some(Target::Blob("acme/web", "sha256:00"))
        );
        assert_eq!(
            target("/v2/acme/web/manifests/1.0"),
            Some(Target::Manifest("acme/web", "1.0"))
        );
        assert_eq!(target("/v2/acme/web"), None);
    }
}
