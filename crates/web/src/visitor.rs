//! Who a request to the web layer comes from, as the edge identified them ([`Person`]), and
//! whether a change came from the zone's own pages ([`from_own_pages`]): what the edge and
//! the console it mounts both read.

use axum::http::{HeaderMap, Method, header};
use orc_zone_model::access::zone_role_in;
use orc_zone_model::session::WebSession;
use orc_zone_model::{ApiToken, Membership, Org, User};

/// Someone the edge knows.
#[derive(Debug, Clone)]
pub struct Person {
    pub user: User,
    pub memberships: Vec<Membership>,
    /// Came with `Authorization: Bearer` (the header is then not forwarded).
    pub by_bearer: bool,
    /// The token the person came with: as a bearer, or to sign in to the session.
    pub token: Option<ApiToken>,
    /// The session the cookie carries, if it was one.
    pub session: Option<WebSession>,
}

impl Person {
    /// The assertion's subject: `token:<id>` for a bearer, else `user:<name>`.
    pub(crate) fn subject(&self) -> String {
        match &self.token {
            Some(token) if self.by_bearer => format!("token:{}", token.id),
            _ => format!("user:{}", self.user.name),
        }
    }

    /// Whether the person has any role in `org` or the zone.
    pub fn sees_org(&self, org: &Org) -> bool {
        zone_role_in(&self.memberships).is_some()
            || self.memberships.iter().any(|m| m.org_id == org.id)
    }
}

/// Whether a request that changes something (any method but GET, HEAD, OPTIONS and TRACE)
/// came from the pages of `own_origin` (`https://<domain>[:port]`): its `Origin` is that
/// origin, or, without an `Origin`, the browser says `Sec-Fetch-Site: same-origin`. Every
/// browser sends one or the other with a form post, so a post without either came from no
/// page of ours (a script replaying a cookie, or a page elsewhere whose browser hid its
/// origin) and is refused. Safe methods are always taken.
pub fn from_own_pages(own_origin: &str, method: &Method, headers: &HeaderMap) -> bool {
    if method.is_safe() {
        return true;
    }
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    match text(header::ORIGIN.as_str()) {
        Some(origin) => origin.eq_ignore_ascii_case(own_origin),
        None => text("sec-fetch-site").is_some_and(|site| site.eq_ignore_ascii_case("same-origin")),
    }
}
