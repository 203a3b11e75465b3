//! Authentication of provider streams: a zone API token in `authorization: Bearer …` and the
//! project in `x-orc-project: <org>/<project>`. The token's user must be owner or member of
//! the project (directly or through an org-wide membership). Errors never show the token.

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

/// The project the stream's credentials admit it to.
pub(crate) async fn authenticate(
    store: &Store,
    metadata: &MetadataMap,
    now: Timestamp,
) -> Result<Project, Status> {
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
        Ok(project)
    } else {
        Err(Status::permission_denied(format!(
            "project {org}/{} does not exist or is not yours; providers need owner or member",
            project.name
        )))
    }
}
