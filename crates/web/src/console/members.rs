//! An org's members: the list, adding and removing one.

use super::*;

pub(super) async fn members_page(
    cx: &Cx<'_>,
    org: &str,
    errors: FieldErrors,
    notice: Option<String>,
    status: StatusCode,
) -> PageResult {
    let memberships: Vec<MembershipView> = cx
        .api
        .get(&format!("/api/orgs/{}/memberships", seg(org)))
        .await
        .map_err(|e| cx.refused(&e))?;
    let projects: Vec<ProjectView> = cx
        .api
        .get(&format!("/api/orgs/{}/projects", seg(org)))
        .await
        .map_err(|e| cx.refused(&e))?;
    let owns_in_org = cx
        .me()
        .await?
        .memberships
        .iter()
        .any(|m| m.org == org && m.role == Role::Owner.to_string());
    let manages = owns_in_org || cx.caller.is_operator();
    let frame = cx.frame(Section::Members, None).await?;
    let page = MembersPage {
        org: org.to_string(),
        memberships,
        projects: projects.into_iter().map(|p| p.name).collect(),
        manages,
        errors,
        notice,
    };
    Ok(html(status, views::members(&frame, &page)))
}

pub(super) async fn add_member(cx: &Cx<'_>, org: &str) -> PageResult {
    let project = cx.form("project");
    let body = CreateMembership {
        user: cx.form("user").trim().to_string(),
        role: cx.form("role"),
        project: (!project.is_empty()).then_some(project),
    };
    let answer: Result<MembershipView, ApiRefusal> = cx
        .api
        .send(
            Method::POST,
            &format!("/api/orgs/{}/memberships", seg(org)),
            &body,
        )
        .await;
    match answer {
        Ok(m) => {
            let notice = format!(
                "{} is now {} of {}.",
                m.user,
                m.role,
                m.project.unwrap_or(m.org)
            );
            members_page(cx, org, FieldErrors::new(), Some(notice), StatusCode::OK).await
        }
        Err(e) if e.status.is_client_error() && e.status != StatusCode::FORBIDDEN => {
            let mut errors = FieldErrors::new();
            errors.insert(e.field.unwrap_or_else(|| "user".into()), e.message);
            members_page(cx, org, errors, None, StatusCode::BAD_REQUEST).await
        }
        Err(e) => Err(cx.refused(&e)),
    }
}

pub(super) async fn remove_member(cx: &Cx<'_>, org: &str, id: &str) -> PageResult {
    cx.api
        .send_empty(
            Method::DELETE,
            &format!("/api/orgs/{}/memberships/{}", seg(org), seg(id)),
        )
        .await
        .map_err(|e| cx.refused(&e))?;
    Ok(see_other(&format!("/orgs/{}/members", seg(org))))
}
