//! The projects a person may open, and the project switcher.

use super::*;

pub(super) async fn projects_page(cx: &Cx<'_>) -> PageResult {
    let orgs: Vec<OrgView> = cx.api.get("/api/orgs").await.map_err(|e| cx.refused(&e))?;
    let mut list = Vec::new();
    for org in orgs {
        let projects: Vec<ProjectView> = cx
            .api
            .get(&format!("/api/orgs/{}/projects", seg(&org.name)))
            .await
            .map_err(|e| cx.refused(&e))?;
        let frame_projects: Vec<ProjectView> = projects;
        list.push((org, frame_projects));
    }
    let frame = cx.frame(Section::Projects, None).await?;
    let visible: Vec<(OrgView, Vec<ProjectView>)> = list
        .into_iter()
        .map(|(org, projects)| {
            let projects = projects
                .into_iter()
                .filter(|p| frame.projects.contains(&format!("{}/{}", org.name, p.name)))
                .collect();
            (org, projects)
        })
        .collect();
    Ok(html(
        StatusCode::OK,
        views::projects(&frame, &ProjectsPage { orgs: visible }),
    ))
}

pub(super) fn switch(cx: &Cx<'_>) -> Response {
    match cx
        .query_value("to")
        .as_deref()
        .and_then(|t| t.split_once('/'))
    {
        Some((org, project)) => see_other(&format!(
            "/orgs/{}/projects/{}/pools",
            seg(org),
            seg(project)
        )),
        None => see_other("/orgs"),
    }
}
