//! Who the caller is and what their roles allow.
//!
//! A user holds roles through memberships: org-wide (no project) or in one project. The
//! effective role in a project is the highest of the user's membership in that project, their
//! org-wide membership in its org, and their org-wide membership in org `sys` (the zone's
//! operators). Roles rank owner > member > viewer:
//! - viewer: reads everything of the project (pools, nodes, providers, events, usage);
//! - member: also writes pools (create, resize, reconfigure, delete) and asks for quotes;
//! - owner: also manages memberships and the project's providers (scope, pricing).
//!
//! An owner of org `sys` is a zone operator: they create orgs and users and act as owner
//! everywhere. A caller with no role at all in a project gets 404 for it, so the API does not
//! reveal which names exist to strangers; a caller whose role is too low gets 403 naming the
//! role needed.

use crate::model::{ApiToken, Membership, Org, Project, Role, User, sys_org_id};

/// An authenticated caller: who, with which token, and every role they hold.
#[derive(Debug, Clone)]
pub struct Caller {
    pub user: User,
    pub token: ApiToken,
    pub memberships: Vec<Membership>,
}

/// Rank of a role: higher allows more.
pub fn rank(role: Role) -> u8 {
    match role {
        Role::Viewer => 1,
        Role::Member => 2,
        Role::Owner => 3,
    }
}

fn higher(a: Option<Role>, b: Role) -> Option<Role> {
    match a {
        Some(a) if rank(a) >= rank(b) => Some(a),
        Some(_) | None => Some(b),
    }
}

/// The org-wide role in the `sys` org that `memberships` give (zone operators and members).
pub fn zone_role_in(memberships: &[Membership]) -> Option<Role> {
    let sys = sys_org_id();
    memberships
        .iter()
        .filter(|m| m.org_id == sys && m.project_id.is_none())
        .fold(None, |acc, m| higher(acc, m.role))
}

/// The effective role in `project` that `memberships` give: in the project, its org, or
/// the zone.
pub fn project_role_in(memberships: &[Membership], project: &Project) -> Option<Role> {
    memberships
        .iter()
        .filter(|m| {
            m.org_id == project.org_id
                && (m.project_id.is_none() || m.project_id.as_ref() == Some(&project.id))
        })
        .fold(zone_role_in(memberships), |acc, m| higher(acc, m.role))
}

impl Caller {
    /// The caller's org-wide role in the `sys` org (zone operators).
    pub fn zone_role(&self) -> Option<Role> {
        zone_role_in(&self.memberships)
    }

    /// Whether the caller operates the zone (owner of org `sys`).
    pub fn is_operator(&self) -> bool {
        self.zone_role() == Some(Role::Owner)
    }

    /// The caller's effective role in an org (org-wide memberships only).
    pub fn org_role(&self, org: &Org) -> Option<Role> {
        self.memberships
            .iter()
            .filter(|m| m.org_id == org.id && m.project_id.is_none())
            .fold(self.zone_role(), |acc, m| higher(acc, m.role))
    }

    /// Whether the caller has any role in the org or one of its projects.
    pub fn sees_org(&self, org: &Org) -> bool {
        self.zone_role().is_some() || self.memberships.iter().any(|m| m.org_id == org.id)
    }

    /// The caller's effective role in a project.
    pub fn project_role(&self, project: &Project) -> Option<Role> {
        project_role_in(&self.memberships, project)
    }

    /// Whether the caller owns `org` or one of its projects.
    pub fn owns_in(&self, org: &Org) -> bool {
        self.memberships
            .iter()
            .any(|m| m.org_id == org.id && m.role == Role::Owner)
    }
}
