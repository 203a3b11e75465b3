//! Who is asking: the session a sign-in made, or an API token sent as a bearer; signing in
//! and out; and the assertion the edge signs for the app.
//!
//! A bearer that is a pool's service credential is refused: it opens only that pool's
//! provider stream. A session is checked against the store on every request (so signing
//! out, a revoked token, a lifetime or idle time that ran out end it at once, on every
//! controller), and its last request is written at most once a minute.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Mutex;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{Extensions, HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use orc_access::Assertion;

use super::{EdgeState, client_ip, pages};
use crate::model::{Org, Timestamp, TokenHash, TokenSecret};
use crate::visitor::Person;
use orc_zone_model::session::{SessionSecret, SignedInWith};

/// The session cookie. `__Secure-`: browsers accept it only with `Secure`, over https.
pub const SESSION_COOKIE: &str = "__Secure-orc_session";

/// A session's last request is written when it is older than this.
const TOUCH_EVERY_MS: i64 = 60_000;

/// The largest sign-in form read.
const MAX_FORM_BYTES: usize = 16 * 1024;

/// The value of the session cookie among the request's cookies.
fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value.trim().to_string())
        .filter(|v| !v.is_empty())
}

fn bearer(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
}

/// The key a credential is kept under: its kind and SHA-256, never its value.
fn kept_as(kind: char, hash: TokenHash) -> String {
    format!("{kind}:{}", hash.to_hex())
}

/// Who sent a request with `headers`: `None` for nobody; an error page when the store
/// fails or a bearer is refused. Known credentials are kept for a moment
/// ([`super::recent`]). A request from someone marks its connection (in `extensions`)
/// authenticated ([`orc_tls::ConnectionAuth`]).
pub(super) async fn identify(
    edge: &EdgeState,
    headers: &HeaderMap,
    extensions: &Extensions,
) -> Result<Option<Person>, Response> {
    let found = identify_headers(edge, headers).await?;
    if found.is_some()
        && let Some(connection) = extensions.get::<orc_tls::ConnectionAuth>()
    {
        connection.mark_authenticated();
    }
    Ok(found)
}

async fn identify_headers(
    edge: &EdgeState,
    headers: &HeaderMap,
) -> Result<Option<Person>, Response> {
    let now = edge.now();
    // A bearer wins over a cookie, as it names the caller explicitly.
    let (key, credential) = match (bearer(headers), session_cookie(headers)) {
        (Some(value), _) => {
            let secret = TokenSecret::from_presented(value);
            (kept_as('b', secret.hash()), Credential::Bearer(secret))
        }
        (None, Some(value)) => {
            let secret = SessionSecret::from_presented(value);
            (kept_as('s', secret.hash()), Credential::Session(secret))
        }
        (None, None) => return Ok(None),
    };
    if let Some(person) = edge.inner.people.get(&key, now) {
        return Ok(Some(person));
    }
    let found = look_up(edge, credential).await?;
    if let Some(person) = &found {
        edge.inner.people.put(key, person.clone(), now);
    }
    Ok(found)
}

/// What a request presented.
enum Credential {
    Bearer(TokenSecret),
    Session(SessionSecret),
}

/// Who `credential` belongs to, from the store.
async fn look_up(edge: &EdgeState, credential: Credential) -> Result<Option<Person>, Response> {
    let store = edge.inner.store.as_ref();
    let now = edge.now();
    let failed = |e: crate::store::StoreFailure| super::store_failure(&e);
    let secret = match credential {
        Credential::Session(secret) => secret,
        Credential::Bearer(secret) => {
            let Some(token) = store
                .authenticate_token(&secret, now)
                .await
                .map_err(failed)?
            else {
                return Err(unauthenticated(
                    edge,
                    AGAIN,
                    "The bearer token is unknown, revoked or expired.",
                ));
            };
            if token.service_pool.is_some() {
                return Err(unauthenticated(
                    edge,
                    AGAIN,
                    "A pool's service credential opens only that pool's provider stream, not \
                 endpoints.",
                ));
            }
            let user = store.user(&token.user_id).await.map_err(failed)?;
            let memberships = store.memberships_of(&user.id).await.map_err(failed)?;
            return Ok(Some(Person {
                user,
                memberships,
                by_bearer: true,
                token: Some(token),
                session: None,
            }));
        }
    };
    let policy = edge.inner.config.sessions;
    let Some(session) = store
        .web_session(&secret, &policy, now)
        .await
        .map_err(failed)?
    else {
        return Ok(None);
    };
    if now.millis() - session.last_seen_at.millis() >= TOUCH_EVERY_MS {
        store
            .touch_web_session(&session.id, now)
            .await
            .map_err(failed)?;
    }
    let user = store.user(&session.user_id).await.map_err(failed)?;
    let memberships = store.memberships_of(&user.id).await.map_err(failed)?;
    let token = match &session.signed_in_with {
        SignedInWith::Token(id) => Some(store.token(id).await.map_err(failed)?),
        SignedInWith::Password => None,
    };
    Ok(Some(Person {
        user,
        memberships,
        by_bearer: false,
        token,
        session: Some(session),
    }))
}

/// The heading for a visitor who brought a credential the edge does not take.
const AGAIN: &str = "Sign in again";
/// The heading for a visitor who brought none.
const FIRST: &str = "Sign in";

fn unauthenticated(edge: &EdgeState, title: &str, why: &str) -> Response {
    let mut response = pages::refusal(StatusCode::UNAUTHORIZED, title, why, Some(&edge.url()));
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"orc\""),
    );
    response
}

/// The answer to someone not signed in: a browser asking for a page goes to the sign-in
/// page and comes back here after; anything else gets a 401.
pub(super) fn ask_to_sign_in(edge: &EdgeState, host: &str, request: &Request) -> Response {
    let wants_page = request.method() == Method::GET
        && request
            .headers()
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("text/html"));
    if !wants_page {
        return unauthenticated(
            edge,
            FIRST,
            "Sign in at the zone's edge, or send Authorization: Bearer with an API token.",
        );
    }
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let back = format!("{}{path}", edge.url_of(host));
    let location = format!(
        "{}/sign-in?{}",
        edge.url(),
        serde_urlencoded::to_string([("next", back.as_str())]).unwrap_or_default()
    );
    let mut response = super::empty(StatusCode::SEE_OTHER);
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    super::page_headers(response.headers_mut());
    response
}

/// A signed assertion for `person` opening `audience` in `org`.
pub(super) fn assertion(
    edge: &EdgeState,
    person: &Person,
    org: &Org,
    audience: &str,
) -> Result<String, Box<Response>> {
    let now = u64::try_from(edge.now().millis() / 1000).unwrap_or(0);
    let lifetime = edge
        .inner
        .config
        .assertion_lifetime
        .as_secs()
        .clamp(1, orc_access::MAX_LIFETIME_SECS);
    let claims = Assertion {
        iss: edge.inner.issuer.clone(),
        sub: person.subject(),
        name: person.user.name.to_string(),
        org: org.name.to_string(),
        aud: audience.to_string(),
        iat: now,
        exp: now + lifetime,
        jti: uuid::Uuid::new_v4().to_string(),
    };
    edge.inner.keys.sign(&claims).map_err(|e| {
        tracing::error!(error = %e, "the access edge could not sign an assertion");
        Box::new(pages::refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "Try again shortly",
            "The zone could not vouch for this request right now.",
            None,
        ))
    })
}

/// The sign-in form's fields.
#[derive(Debug, Default, serde::Deserialize)]
struct SignInForm {
    #[serde(default)]
    token: String,
    #[serde(default)]
    user: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    next: String,
}

/// Whether a form post came from the edge's own pages ([`super::from_own_pages`]): a post
/// from another site, or one that names no origin, is refused, so no page elsewhere can sign
/// a person in or out.
fn same_origin(edge: &EdgeState, request: &Request) -> bool {
    super::from_own_pages(&edge.url(), request.method(), request.headers())
}

/// `POST /sign-in`: a token, or a user name and password, for a session cookie.
pub(super) async fn sign_in(edge: &EdgeState, request: Request) -> Response {
    let client = client_ip(&request);
    let connection = request
        .extensions()
        .get::<orc_tls::ConnectionAuth>()
        .cloned();
    if !same_origin(edge, &request) {
        return pages::refusal(
            StatusCode::FORBIDDEN,
            "Sign in here",
            "Sign-in forms are taken only from the zone's own sign-in page.",
            Some(&edge.url()),
        );
    }
    if let Some(ip) = client
        && !edge.inner.sign_ins.allowed(ip, edge.now())
    {
        return pages::sign_in(
            &edge.url(),
            None,
            Some("Too many failed sign-ins from this address; wait a minute and try again."),
            StatusCode::TOO_MANY_REQUESTS,
        );
    }
    let body = match axum::body::to_bytes(request.into_body(), MAX_FORM_BYTES).await {
        Ok(body) => body,
        Err(_) => {
            return pages::sign_in(
                &edge.url(),
                None,
                Some("The form was too large."),
                StatusCode::PAYLOAD_TOO_LARGE,
            );
        }
    };
    let form: SignInForm = serde_urlencoded::from_bytes(&body).unwrap_or_default();
    let next = edge.next_target(&form.next);
    // Where the browser goes is settled before anything is made, so a sign-in never ends in
    // a redirect without a place (or a session without its cookie).
    let home = format!("{}/", edge.url());
    let Ok(location) = HeaderValue::from_str(next.as_deref().unwrap_or(&home)) else {
        return pages::refusal(
            StatusCode::BAD_REQUEST,
            "Sign in here",
            "The page to return to after signing in cannot be written in a redirect.",
            Some(&edge.url()),
        );
    };
    let store = edge.inner.store.as_ref();
    let now = edge.now();
    let policy = edge.inner.config.sessions;
    let failed = |e: crate::store::StoreFailure| super::store_failure(&e);
    let refuse = |message: &str| {
        if let Some(ip) = client {
            edge.inner.sign_ins.failed(ip, edge.now());
        }
        pages::sign_in(
            &edge.url(),
            next.as_deref(),
            Some(message),
            StatusCode::UNAUTHORIZED,
        )
    };
    let started = if !form.token.trim().is_empty() {
        let secret = TokenSecret::from_presented(form.token.trim().to_string());
        match store.authenticate_token(&secret, now).await {
            Err(e) => return failed(e),
            Ok(None) => return refuse("That token is unknown, revoked or expired."),
            Ok(Some(token)) if token.service_pool.is_some() => {
                return refuse("A pool's service credential cannot sign in.");
            }
            Ok(Some(token)) => {
                store
                    .create_web_session(
                        &token.user_id,
                        &SignedInWith::Token(token.id.clone()),
                        &policy,
                        now,
                    )
                    .await
            }
        }
    } else if !form.user.trim().is_empty() {
        let found = match form.user.trim().parse() {
            Ok(name) => match store.user_with_password(&name).await {
                Ok(found) => found,
                Err(e) => return failed(e),
            },
            Err(_) => None,
        };
        let stored = found.as_ref().and_then(|(_, hash)| hash.clone());
        let opened = crate::passwords::verify_blocking(form.password.clone(), stored).await;
        match found {
            Some((user, _)) if opened => {
                store
                    .create_web_session(&user.id, &SignedInWith::Password, &policy, now)
                    .await
            }
            _ => return refuse("That user name and password do not match."),
        }
    } else {
        return pages::sign_in(
            &edge.url(),
            next.as_deref(),
            Some("Give an API token, or a user name and password."),
            StatusCode::BAD_REQUEST,
        );
    };
    let (session, secret) = match started {
        Ok(started) => started,
        Err(e) => return failed(e),
    };
    if let Some(connection) = connection {
        connection.mark_authenticated();
    }
    tracing::info!(session = %session.id, user = %session.user_id, "signed in at the access edge");
    let mut response = super::empty(StatusCode::SEE_OTHER);
    let cookie = format!(
        "{SESSION_COOKIE}={}; Domain={}; Path=/; Max-Age={}; Secure; HttpOnly; SameSite=Lax",
        secret.expose(),
        edge.inner.domain,
        policy.lifetime.as_secs()
    );
    let headers = response.headers_mut();
    if let Ok(cookie) = HeaderValue::from_str(&cookie) {
        headers.insert(header::SET_COOKIE, cookie);
    }
    headers.insert(header::LOCATION, location);
    super::page_headers(headers);
    response
}

/// `POST /sign-out`: ends the session and clears the cookie.
pub(super) async fn sign_out(edge: &EdgeState, request: Request) -> Response {
    if !same_origin(edge, &request) {
        return pages::refusal(
            StatusCode::FORBIDDEN,
            "Sign out here",
            "Sign-out is taken only from the zone's own pages.",
            Some(&edge.url()),
        );
    }
    if let Some(value) = session_cookie(request.headers()) {
        let secret = SessionSecret::from_presented(value);
        edge.inner.people.forget(&kept_as('s', secret.hash()));
        let policy = edge.inner.config.sessions;
        match edge
            .inner
            .store
            .web_session(&secret, &policy, edge.now())
            .await
        {
            Ok(Some(session)) => {
                if let Err(e) = edge
                    .inner
                    .store
                    .end_web_session(&session.id, edge.now())
                    .await
                {
                    return super::store_failure(&e);
                }
                tracing::info!(session = %session.id, "signed out at the access edge");
            }
            Ok(None) => {}
            Err(e) => return super::store_failure(&e),
        }
    }
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::SEE_OTHER;
    let cookie = format!(
        "{SESSION_COOKIE}=; Domain={}; Path=/; Max-Age=0; Secure; HttpOnly; SameSite=Lax",
        edge.inner.domain
    );
    let headers = response.headers_mut();
    if let (Ok(cookie), Ok(location)) = (
        HeaderValue::from_str(&cookie),
        HeaderValue::from_str(&format!("{}/sign-in", edge.url())),
    ) {
        headers.insert(header::SET_COOKIE, cookie);
        headers.insert(header::LOCATION, location);
    }
    super::page_headers(headers);
    response.into_response()
}

/// Failed sign-ins per client address in the current minute.
pub(super) struct SignInLimiter {
    per_minute: u32,
    failures: Mutex<BTreeMap<IpAddr, (i64, u32)>>,
}

impl SignInLimiter {
    pub(super) fn new(per_minute: u32) -> SignInLimiter {
        SignInLimiter {
            per_minute: per_minute.max(1),
            failures: Mutex::new(BTreeMap::new()),
        }
    }

    fn minute(at: Timestamp) -> i64 {
        at.millis().div_euclid(60_000)
    }

    /// Whether `ip` may try again at `now`.
    pub(super) fn allowed(&self, ip: IpAddr, now: Timestamp) -> bool {
        let failures = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        failures
            .get(&ip)
            .is_none_or(|(minute, count)| *minute != Self::minute(now) || *count < self.per_minute)
    }

    /// Counts a failed sign-in of `ip` at `now` (older minutes are forgotten).
    pub(super) fn failed(&self, ip: IpAddr, now: Timestamp) {
        let minute = Self::minute(now);
        let mut failures = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        failures.retain(|_, (m, _)| *m == minute);
        let entry = failures.entry(ip).or_insert((minute, 0));
        entry.1 = entry.1.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_cookie_is_found_among_others_and_a_bearer_needs_its_word() {
        let mut headers = HeaderMap::new();
        headers.append(header::COOKIE, HeaderValue::from_static("a=1; b=2"));
        headers.append(
            header::COOKIE,
            HeaderValue::from_static("x=y;  __Secure-orc_session=orc_abc ; z=1"),
        );
        assert_eq!(session_cookie(&headers).as_deref(), Some("orc_abc"));
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic abc"));
        assert_eq!(bearer(&headers), None);
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer orc_t"),
        );
        assert_eq!(bearer(&headers).as_deref(), Some("orc_t"));
    }

    #[test]
    fn failed_sign_ins_are_limited_per_address_and_minute() {
        let limiter = SignInLimiter::new(2);
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let other: IpAddr = "127.0.0.2".parse().unwrap();
        let t0 = Timestamp::from_unix_millis(120_000);
        assert!(limiter.allowed(ip, t0));
        limiter.failed(ip, t0);
        limiter.failed(ip, t0);
        assert!(!limiter.allowed(ip, t0.plus_millis(59_999)));
        assert!(limiter.allowed(other, t0));
        assert!(limiter.allowed(ip, t0.plus_millis(60_000)), "a new minute");
    }
}
