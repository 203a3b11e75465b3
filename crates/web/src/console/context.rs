//! What every console handler shares for one request ([`Cx`]): the person's API, who they
//! are to it, the form, and the page frame; and the answers every page gives.

use super::*;

/// What every handler shares for one request.
pub(super) struct Cx<'a> {
    pub(super) console: &'a Console,
    pub(super) api: ApiAs,
    pub(super) caller: Caller,
    /// The caller as the API describes them, once asked ([`Cx::me`]).
    pub(super) me: tokio::sync::OnceCell<WhoAmIView>,
    pub(super) query: String,
    pub(super) body: Vec<(String, String)>,
}

pub(super) type PageResult = Result<Response, Response>;

impl Cx<'_> {
    pub(super) fn query_value(&self, name: &str) -> Option<String> {
        serde_urlencoded::from_str::<Vec<(String, String)>>(&self.query)
            .ok()?
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }

    pub(super) fn form(&self, name: &str) -> String {
        forms::value(&self.body, name).unwrap_or("").to_string()
    }

    /// Who the caller is to the API (`GET /api/whoami`): asked once per request.
    pub(super) async fn me(&self) -> Result<&WhoAmIView, Response> {
        self.me
            .get_or_try_init(|| async {
                self.api
                    .get::<WhoAmIView>("/api/whoami")
                    .await
                    .map_err(|e| self.refused(&e))
            })
            .await
    }

    /// The frame of a page: who, the projects they may open, the current one.
    pub(super) async fn frame(
        &self,
        section: Section,
        current: Option<Current>,
    ) -> Result<Frame, Response> {
        let me = self.me().await?;
        Ok(Frame {
            user: self.caller.user.name.to_string(),
            zone_member: me.zone_role.is_some(),
            projects: me.projects.iter().map(|p| p.project.clone()).collect(),
            current,
            section,
        })
    }

    /// The project `org/project` and the person's role there, as the API's access rules
    /// give it; the same "not found" as the API for a project they have no role in.
    pub(super) async fn current(&self, org: &str, project: &str) -> Result<Current, Response> {
        let path = format!("/api/orgs/{}/projects/{}", seg(org), seg(project));
        let _: ProjectView = self.api.get(&path).await.map_err(|e| self.refused(&e))?;
        let wanted = format!("{org}/{project}");
        let access = self
            .me()
            .await?
            .projects
            .iter()
            .find(|p| p.project == wanted)
            .ok_or_else(|| self.refused(&not_found_refusal()))?;
        Ok(Current {
            org: org.to_string(),
            project: project.to_string(),
            role: access.role.clone(),
            org_wide: access.org_role.is_some(),
        })
    }

    /// A refusal of the API as a page (in a bare frame: no further look-ups).
    pub(super) fn refused(&self, refusal: &ApiRefusal) -> Response {
        let frame = Frame {
            user: self.caller.user.name.to_string(),
            zone_member: zone_role_in(&self.caller.memberships).is_some(),
            projects: Vec::new(),
            current: None,
            section: Section::Projects,
        };
        let title = match refusal.status {
            StatusCode::NOT_FOUND => "Not found",
            StatusCode::FORBIDDEN => "Not allowed",
            _ => "Not done",
        };
        html(
            refusal.status,
            views::problem(&frame, title, &refusal.message),
        )
    }
}

pub(super) fn not_found_refusal() -> ApiRefusal {
    ApiRefusal {
        status: StatusCode::NOT_FOUND,
        message: "There is no such page of the console, or nothing here you may see.".into(),
        field: None,
    }
}

pub(super) async fn not_found(cx: &Cx<'_>) -> Response {
    cx.refused(&not_found_refusal())
}

/// Headers of every console page: no caching (pages can show a token once), no framing,
/// scripts and event streams from this host only.
pub(super) fn console_headers(headers: &mut HeaderMap) {
    for (name, value) in [
        (header::CACHE_CONTROL, "no-store"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "same-origin"),
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; style-src 'unsafe-inline'; script-src 'self'; \
             connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
}

pub(super) fn html(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    console_headers(response.headers_mut());
    response
}

/// `303 See Other` to a console path (after a form post, so a reload posts nothing).
pub(super) fn see_other(path: &str) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::SEE_OTHER;
    if let Ok(value) = HeaderValue::from_str(path) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    console_headers(response.headers_mut());
    response
}

/// `/api/orgs/<org>/projects/<project>`.
pub(super) fn api_project(current: &Current) -> String {
    format!(
        "/api/orgs/{}/projects/{}",
        seg(&current.org),
        seg(&current.project)
    )
}
