//! Authentication of provider streams: a zone API token in `authorization: Bearer …` and the
//! project in `x-orc-project: <org>/<project>`. A user's token admits a stream when the user
//! is owner or member of the project (directly or through an org-wide membership); an app
//! pool's service credential admits only a stream in the pool's own project. The stream acts
//! as the token's principal (`user:<id>` or `pool:<id>`), and only that principal may attach
//! replicas of the resources it registered. A pool's principal registers one resource only:
//! the first it registered is the one it serves from then on ([`serves_one_resource`]), so
//! an app slot cannot publish further providers in its project. Errors never show the token.

use tonic::Status;
use tonic::metadata::MetadataMap;

use crate::model::{Name, Project, Role, Timestamp, TokenSecret};
use crate::store::{Store, StoreError};

/// The metadata key naming the project a provider registers in.
pub const PROJECT_HEADER: &str = "x-orc-project";

fn header<'a>(metadata: &'a MetadataMap, key: &'static str) -> Result<&'a str, Status> {
    metadata
        .get(key)
        .ok_or_else(|| Status::unauthenticated(format!("the {key} metadata is missing")))?
        .to_str()
        .map_err(|_| Status::unauthenticated(format!("the {key} metadata is not text")))
}

fn unavailable(error: &StoreError) -> Status {
    tracing::warn!(%error, "store error while authenticating a provider stream");
    Status::unavailable("the zone's store is not available")
}

/// Whether `principal` may serve one resource only: an app pool's service credential
/// (`pool:<id>`), which attaches only as the first resource its pool registered.
pub(crate) fn serves_one_resource(principal: &str) -> bool {
    principal.starts_with("pool:")
}

/// What a stream's credentials admit it to.
#[derive(Debug, Clone)]
pub(crate) struct Admitted {
    /// The project the stream registers in.
    pub project: Project,
    /// Who the stream acts as: `user:<id>` or `pool:<id>`.
    pub principal: String,
}

/// The project the stream's credentials admit it to, and the principal it acts as.
pub(crate) async fn authenticate(
    store: &Store,
    metadata: &MetadataMap,
    now: Timestamp,
) -> Result<Admitted, Status> {
    let token = header(metadata, "authorization")?
        .strip_prefix("Bearer ")
        .ok_or_else(|| {
            Status::unauthenticated("the authorization metadata must be `Bearer <token>`")
        })?
        .trim();
    let path = header(metadata, PROJECT_HEADER)?;
    let (org, project) = path.split_once('/').ok_or_else(|| {
        Status::invalid_argument(format!(
            "{PROJECT_HEADER} must be <org>/<project>, not {path:?}"
        ))
    })?;
    let org: Name = org
        .parse()
        .map_err(|e| Status::invalid_argument(format!("{PROJECT_HEADER}: org {e}")))?;
    let project: Name = project
        .parse()
        .map_err(|e| Status::invalid_argument(format!("{PROJECT_HEADER}: project {e}")))?;
    let token = store
        .authenticate_token(&TokenSecret::from_presented(token.to_string()), now)
        .await
        .map_err(|e| unavailable(&e))?
        .ok_or_else(|| Status::unauthenticated("the token is unknown, revoked or expired"))?;
    let project = match store.project_by_path(&org, &project).await {
        Ok(p) => p,
        Err(StoreError::NotFound { .. }) => {
            return Err(Status::permission_denied(format!(
                "project {org}/{project} does not exist or is not yours"
            )));
        }
        Err(e) => return Err(unavailable(&e)),
    };
    let principal = token.principal();
    if let Some(pool_id) = &token.service_pool {
        let pool = match store.get_pool(pool_id).await {
            Ok(pool) => pool,
            Err(StoreError::NotFound { .. }) => {
                return Err(Status::permission_denied(format!(
                    "the service credential's app pool {pool_id} no longer exists"
                )));
            }
            Err(e) => return Err(unavailable(&e)),
        };
        if pool.project_id != project.id {
            return Err(Status::permission_denied(format!(
                "a service credential of app pool {pool_id} opens streams only in its own project"
            )));
        }
        return Ok(Admitted { project, principal });
    }
    let memberships = store
        .list_memberships_of_user(&token.user_id)
        .await
        .map_err(|e| unavailable(&e))?;
    let may_register = memberships.iter().any(|m| {
        let covers =
            m.org_id == project.org_id && m.project_id.as_ref().is_none_or(|p| *p == project.id);
        let role_allows = match m.role {
            Role::Owner | Role::Member => true,
            Role::Viewer => false,
        };
        covers && role_allows
    });
    if may_register {
        Ok(Admitted { project, principal })
    } else {
        Err(Status::permission_denied(format!(
            "project {org}/{} does not exist or is not yours; providers need owner or member",
            project.name
        )))
    }
}
