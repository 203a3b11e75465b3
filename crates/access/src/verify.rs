//! The app's side: the strict check of the assertion on every request.
//!
//! What is accepted is narrow on purpose: exactly one [`ASSERTION_HEADER`](crate::ASSERTION_HEADER)
//! (never a cookie or a query), three unpadded base64url parts, a header of `alg` (exactly
//! `ES256`), `kid` and at most `typ` (`JWT`) and no other field (no `jwk`, `jku`, `x5u`,
//! `x5c`, `crit`: a key never comes from the token), a `kid` the zone publishes, a valid
//! signature, exactly the claims of [`Assertion`], the expected issuer, org and audience, and
//! times that hold within the skew: issued not in the future, not expired, and at most
//! [`MAX_LIFETIME_SECS`](crate::MAX_LIFETIME_SECS) from issue to expiry.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Mutex;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::HeaderMap;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;

use crate::claims::Assertion;
use crate::{ALGORITHM, ASSERTION_HEADER, MAX_LIFETIME_SECS};

/// The longest assertion looked at.
const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// The largest JWKS document read.
const MAX_JWKS_BYTES: usize = 64 * 1024;

/// What a refused request is answered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalStatus {
    /// 401: no assertion, or one that does not check.
    Unauthorized,
    /// 403: a valid assertion for another endpoint, org or zone.
    Forbidden,
}

impl RefusalStatus {
    pub fn code(self) -> u16 {
        match self {
            RefusalStatus::Unauthorized => 401,
            RefusalStatus::Forbidden => 403,
        }
    }
}

/// Why a request was refused. The reason names what is wrong and never repeats the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Refusal {
    pub status: RefusalStatus,
    pub reason: String,
}

fn unauthorized(reason: impl Into<String>) -> Refusal {
    Refusal {
        status: RefusalStatus::Unauthorized,
        reason: reason.into(),
    }
}

fn forbidden(reason: impl Into<String>) -> Refusal {
    Refusal {
        status: RefusalStatus::Forbidden,
        reason: reason.into(),
    }
}

/// The URL of the zone's JWKS: https only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeysUrl(String);

/// Why a JWKS URL is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeysUrlError {
    #[error("access_keys_url must be an https:// URL (the zone's web URL with {path}), not {given:?}", path = crate::JWKS_PATH)]
    NotHttps { given: String },
    #[error("access_keys_url {given:?} names no host")]
    NoHost { given: String },
}

impl KeysUrl {
    pub fn parse(url: &str) -> Result<KeysUrl, KeysUrlError> {
        let Some(rest) = url.strip_prefix("https://") else {
            return Err(KeysUrlError::NotHttps {
                given: url.to_string(),
            });
        };
        let host = rest.split(['/', '?', '#']).next().unwrap_or("");
        if host.is_empty() || host.contains('@') || url.chars().any(char::is_whitespace) {
            return Err(KeysUrlError::NoHost {
                given: url.to_string(),
            });
        }
        Ok(KeysUrl(url.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Where a verifier gets the zone's JWKS document (over https, trusting the zone's CA).
pub trait KeySource: Send + Sync {
    /// The JWKS document, or why it could not be read.
    fn fetch(&self) -> impl Future<Output = Result<String, String>> + Send;
}

/// What a verifier expects.
#[derive(Debug, Clone)]
pub struct VerifierOptions {
    /// The zone's web URL, as the edge writes it in `iss`.
    pub issuer: String,
    /// The org of the endpoint's project.
    pub org: String,
    /// `<project>/<pool>/<endpoint>`.
    pub audience: String,
    /// Clock skew allowed on each time, in seconds. Default 30.
    pub leeway_secs: u64,
    /// An unknown `kid` fetches the keys again at most this often, in seconds. Default 30.
    pub refetch_secs: u64,
}

impl VerifierOptions {
    pub fn new(issuer: &str, org: &str, audience: &str) -> VerifierOptions {
        VerifierOptions {
            issuer: issuer.to_string(),
            org: org.to_string(),
            audience: audience.to_string(),
            leeway_secs: 30,
            refetch_secs: 30,
        }
    }
}

#[derive(Default)]
struct Cache {
    keys: BTreeMap<String, DecodingKey>,
    /// When the keys were last fetched (seconds), successfully or not.
    fetched_at: Option<u64>,
}

/// Checks assertions against the zone's published keys.
pub struct Verifier<S> {
    options: VerifierOptions,
    source: S,
    cache: Mutex<Cache>,
    validation: Validation,
}

impl<S> std::fmt::Debug for Verifier<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl<S: KeySource> Verifier<S> {
    pub fn new(options: VerifierOptions, source: S) -> Verifier<S> {
        // Times, audience and issuer are checked below against the caller's clock and with
        // reasons of their own; the library checks the signature and the algorithm.
        let mut validation = Validation::new(Algorithm::ES256);
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        validation.required_spec_claims.clear();
        Verifier {
            options,
            source,
            cache: Mutex::new(Cache::default()),
            validation,
        }
    }

    pub fn options(&self) -> &VerifierOptions {
        &self.options
    }

    /// Checks the assertion of a request with `headers` at `now` (seconds since the Unix
    /// epoch); the assertion when it holds.
    pub async fn verify(&self, headers: &HeaderMap, now: u64) -> Result<Assertion, Refusal> {
        let mut values = headers.get_all(ASSERTION_HEADER).iter();
        let (Some(value), None) = (values.next(), values.next()) else {
            return Err(if headers.contains_key(ASSERTION_HEADER) {
                unauthorized("the request carries more than one access assertion")
            } else {
                unauthorized(
                    "the request carries no access assertion: open this page through the zone's access edge",
                )
            });
        };
        let token = value
            .to_str()
            .map_err(|_| unauthorized("the access assertion is not text"))?;
        self.verify_token(token, now).await
    }

    /// Checks one assertion at `now`.
    pub async fn verify_token(&self, token: &str, now: u64) -> Result<Assertion, Refusal> {
        let kid = check_form(token)?;
        let key = match self.cached_key(&kid) {
            Some(key) => key,
            None => {
                self.refresh(now).await;
                self.cached_key(&kid).ok_or_else(|| {
                    unauthorized(format!(
                        "the access assertion names key {kid:?}, which the zone does not publish"
                    ))
                })?
            }
        };
        let assertion = jsonwebtoken::decode::<Assertion>(token, &key, &self.validation)
            .map_err(|e| match e.kind() {
                jsonwebtoken::errors::ErrorKind::InvalidSignature => {
                    unauthorized("the access assertion's signature does not check")
                }
                jsonwebtoken::errors::ErrorKind::Json(_) => unauthorized(
                    "the access assertion's claims are not exactly iss, sub, name, org, aud, iat, exp and jti",
                ),
                _ => unauthorized(format!("the access assertion does not check: {e}")),
            })?
            .claims;
        self.check_claims(&assertion, now)?;
        Ok(assertion)
    }

    fn check_claims(&self, a: &Assertion, now: u64) -> Result<(), Refusal> {
        let options = &self.options;
        let leeway = options.leeway_secs;
        if a.iss != options.issuer {
            return Err(forbidden(format!(
                "the access assertion was issued by {:?}, not by this zone",
                a.iss
            )));
        }
        if a.org != options.org || a.aud != options.audience {
            return Err(forbidden(format!(
                "the access assertion is for {}/{}, not for {}/{}",
                a.org, a.aud, options.org, options.audience
            )));
        }
        if a.sub.is_empty() || a.jti.is_empty() {
            return Err(unauthorized(
                "the access assertion names no subject or has no id",
            ));
        }
        if a.iat > now.saturating_add(leeway) {
            return Err(unauthorized("the access assertion is issued in the future"));
        }
        if a.exp.saturating_add(leeway) <= now {
            return Err(unauthorized("the access assertion has expired"));
        }
        if a.exp <= a.iat || a.exp - a.iat > MAX_LIFETIME_SECS {
            return Err(unauthorized(format!(
                "the access assertion holds {} s; at most {MAX_LIFETIME_SECS} s are accepted",
                a.exp.saturating_sub(a.iat)
            )));
        }
        Ok(())
    }

    fn cached_key(&self, kid: &str) -> Option<DecodingKey> {
        self.lock().keys.get(kid).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Fetches the keys again, unless that was done less than the refetch interval ago.
    async fn refresh(&self, now: u64) {
        {
            let mut cache = self.lock();
            if cache
                .fetched_at
                .is_some_and(|at| now < at.saturating_add(self.options.refetch_secs))
            {
                return;
            }
            cache.fetched_at = Some(now);
        }
        // A failed fetch keeps the keys known so far: they still check assertions.
        if let Ok(keys) = self.source.fetch().await.and_then(|text| parse_jwks(&text)) {
            self.lock().keys = keys;
        }
    }

    /// Fetches the keys now, whatever the interval (at start); why it failed.
    pub async fn load_keys(&self, now: u64) -> Result<usize, String> {
        let keys = parse_jwks(&self.source.fetch().await?)?;
        let mut cache = self.lock();
        cache.fetched_at = Some(now);
        cache.keys = keys;
        Ok(cache.keys.len())
    }
}

/// The `kid` of a token whose form is acceptable.
fn check_form(token: &str) -> Result<String, Refusal> {
    if token.len() > MAX_TOKEN_BYTES {
        return Err(unauthorized("the access assertion is too long"));
    }
    let parts: Vec<&str> = token.split('.').collect();
    let [header, claims, signature] = parts[..] else {
        return Err(unauthorized(
            "the access assertion is not a signed JWT (three parts)",
        ));
    };
    let base64url = |part: &str| {
        !part.is_empty()
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if !(base64url(header) && base64url(claims) && base64url(signature)) {
        return Err(unauthorized(
            "the access assertion's parts are not unpadded base64url",
        ));
    }
    let header = URL_SAFE_NO_PAD
        .decode(header)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Map<String, Value>>(&bytes).ok())
        .ok_or_else(|| unauthorized("the access assertion's header is not a JSON object"))?;
    if let Some(field) = header
        .keys()
        .find(|k| !matches!(k.as_str(), "alg" | "kid" | "typ"))
    {
        return Err(unauthorized(format!(
            "the access assertion's header holds {field:?}; only alg, kid and typ are accepted"
        )));
    }
    if header.get("alg").and_then(Value::as_str) != Some(ALGORITHM) {
        return Err(unauthorized(format!(
            "the access assertion is not signed with {ALGORITHM}"
        )));
    }
    match header.get("typ") {
        None => {}
        Some(Value::String(typ)) if typ == "JWT" => {}
        Some(_) => return Err(unauthorized("the access assertion's typ is not JWT")),
    }
    match header.get("kid").and_then(Value::as_str) {
        Some(kid) if !kid.is_empty() && kid.len() <= 128 => Ok(kid.to_string()),
        _ => Err(unauthorized("the access assertion names no key (kid)")),
    }
}

/// The ES256 keys of a JWKS document, by `kid`; keys of other types are left out.
pub fn parse_jwks(text: &str) -> Result<BTreeMap<String, DecodingKey>, String> {
    if text.len() > MAX_JWKS_BYTES {
        return Err(format!("the JWKS is over {MAX_JWKS_BYTES} bytes"));
    }
    let document: Value =
        serde_json::from_str(text).map_err(|e| format!("the JWKS is not JSON: {e}"))?;
    let keys = document
        .get("keys")
        .and_then(Value::as_array)
        .ok_or("the JWKS has no keys array")?;
    let mut out = BTreeMap::new();
    for key in keys {
        let field = |name: &str| key.get(name).and_then(Value::as_str);
        if field("kty") != Some("EC") || field("crv") != Some("P-256") {
            continue;
        }
        if field("alg").is_some_and(|alg| alg != ALGORITHM) {
            continue;
        }
        let (Some(kid), Some(x), Some(y)) = (field("kid"), field("x"), field("y")) else {
            continue;
        };
        let Ok(decoding) = DecodingKey::from_ec_components(x, y) else {
            continue;
        };
        out.insert(kid.to_string(), decoding);
    }
    Ok(out)
}
