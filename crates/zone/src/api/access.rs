//! What the API requires of a caller, as its errors say it: the roles themselves and who
//! holds which are [`orc_zone_model::access`].

use orc_zone_model::access::{Caller, rank};

use super::error::ApiError;
use crate::model::{Org, Project, Role};

/// The API's checks of a [`Caller`]'s roles: a 404 for what they may not see, a 403 naming
/// the role needed for what they may see but not do.
pub trait Requirements {
    /// Requires at least `needed` in the project. `path` names it in errors.
    fn require_project(
        &self,
        project: &Project,
        path: &str,
        needed: Role,
    ) -> Result<Role, ApiError>;

    /// Requires at least `needed` org-wide in the org.
    fn require_org(&self, org: &Org, needed: Role) -> Result<Role, ApiError>;

    /// Requires the zone operator role (owner of org `sys`).
    fn require_operator(&self) -> Result<(), ApiError>;
}

impl Requirements for Caller {
    fn require_project(
        &self,
        project: &Project,
        path: &str,
        needed: Role,
    ) -> Result<Role, ApiError> {
        match self.project_role(project) {
            None => Err(ApiError::not_found(
                "project",
                format!("project {path} not found"),
            )),
            Some(role) if rank(role) >= rank(needed) => Ok(role),
            Some(role) => Err(ApiError::forbidden(format!(
                "this needs the {needed} role in project {path}; you are {role}"
            ))),
        }
    }

    fn require_org(&self, org: &Org, needed: Role) -> Result<Role, ApiError> {
        if !self.sees_org(org) {
            return Err(ApiError::not_found(
                "org",
                format!("org {} not found", org.name),
            ));
        }
        match self.org_role(org) {
            Some(role) if rank(role) >= rank(needed) => Ok(role),
            Some(role) => Err(ApiError::forbidden(format!(
                "this needs the {needed} role in org {}; you are {role} there",
                org.name
            ))),
            None => Err(ApiError::forbidden(format!(
                "this needs the {needed} role in org {}; you have a role in one of its \
                 projects only",
                org.name
            ))),
        }
    }

    fn require_operator(&self) -> Result<(), ApiError> {
        if self.is_operator() {
            Ok(())
        } else {
            Err(ApiError::forbidden(
                "this needs the owner role in org sys (zone operator)",
            ))
        }
    }
}
