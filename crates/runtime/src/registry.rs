//! Talking to an OCI registry as any client does: a request sent with the credential it
//! has, and a `401` answered by its challenge. A `Basic` challenge takes the user name and
//! password; a `Bearer` one sends them (or nothing, for an anonymous pull) to the challenge's
//! realm for a token scoped to the repository, then asks again with it.

use serde::Deserialize;

/// The media types a client accepts for a manifest: OCI's and Docker's, images and indexes.
pub const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json, \
    application/vnd.oci.image.index.v1+json, \
    application/vnd.docker.distribution.manifest.v2+json, \
    application/vnd.docker.distribution.manifest.list.v2+json";

/// What a client shows a registry.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum RegistryAuth {
    /// Nothing (a public registry).
    #[default]
    Anonymous,
    /// A token sent as `Authorization: Bearer` (the zone's own registry takes its pull
    /// grants so).
    Bearer(String),
    /// A user name and password, sent as `Basic` or traded for a token.
    Basic { username: String, password: String },
}

impl std::fmt::Debug for RegistryAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RegistryAuth::Anonymous => f.write_str("Anonymous"),
            RegistryAuth::Bearer(_) => f.write_str("Bearer(<secret>)"),
            RegistryAuth::Basic { username, .. } => {
                write!(f, "Basic {{ username: {username:?}, password: <secret> }}")
            }
        }
    }
}

/// The base URL of a registry host: `https://host`, or `http://host` for one on loopback
/// (`localhost`, `127.0.0.1`, `[::1]`, with or without a port), as container engines
/// treat them.
pub fn base_url(host: &str) -> String {
    let name = host
        .rsplit_once(':')
        .filter(|(_, port)| port.chars().all(|c| c.is_ascii_digit()) && !host.ends_with(']'))
        .map_or(host, |(name, _)| name);
    let loopback = name == "localhost"
        || name == "[::1]"
        || name
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|a| a.is_loopback());
    if loopback {
        format!("http://{host}")
    } else {
        format!("https://{host}")
    }
}

/// The parameters of a `WWW-Authenticate` challenge: its scheme and `key="value"` pairs.
fn challenge(header: &str) -> (String, Vec<(String, String)>) {
    let (scheme, rest) = header.trim().split_once(' ').unwrap_or((header.trim(), ""));
    let mut params = Vec::new();
    let mut rest = rest.trim();
    while let Some((key, after)) = rest.split_once('=') {
        let key = key
            .trim()
            .trim_start_matches(',')
            .trim()
            .to_ascii_lowercase();
        let after = after.trim_start();
        let (value, next) = match after.strip_prefix('"') {
            Some(quoted) => match quoted.find('"') {
                Some(end) => (quoted[..end].to_string(), &quoted[end + 1..]),
                None => (quoted.to_string(), ""),
            },
            None => match after.find(',') {
                Some(end) => (after[..end].trim().to_string(), &after[end..]),
                None => (after.trim().to_string(), ""),
            },
        };
        params.push((key, value));
        rest = next.trim_start_matches(',').trim();
    }
    (scheme.to_ascii_lowercase(), params)
}

#[derive(Deserialize)]
struct TokenAnswer {
    token: Option<String>,
    access_token: Option<String>,
}

fn with_auth(request: reqwest::RequestBuilder, auth: &RegistryAuth) -> reqwest::RequestBuilder {
    match auth {
        RegistryAuth::Anonymous => request,
        RegistryAuth::Bearer(token) => request.bearer_auth(token),
        RegistryAuth::Basic { username, password } => request.basic_auth(username, Some(password)),
    }
}

/// `GET url` accepting `accept`, with `auth`, answering a `401`'s challenge once. The
/// answer is returned whatever its status; an error only when the registry cannot be
/// reached or its token service refuses.
pub async fn get(
    client: &reqwest::Client,
    url: &str,
    accept: &str,
    auth: &RegistryAuth,
) -> Result<reqwest::Response, String> {
    let send =
        |auth: &RegistryAuth| with_auth(client.get(url).header("accept", accept), auth).send();
    let first = send(auth).await.map_err(|e| e.to_string())?;
    if first.status() != reqwest::StatusCode::UNAUTHORIZED {
        return Ok(first);
    }
    let Some(header) = first
        .headers()
        .get("www-authenticate")
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
    else {
        return Ok(first);
    };
    let (scheme, params) = challenge(&header);
    if scheme != "bearer" || matches!(auth, RegistryAuth::Bearer(_)) {
        return Ok(first);
    }
    let Some(realm) = params.iter().find(|(k, _)| k == "realm").map(|(_, v)| v) else {
        return Ok(first);
    };
    let query: Vec<(&str, &str)> = params
        .iter()
        .filter(|(k, _)| k == "service" || k == "scope")
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let answer = with_auth(client.get(realm).query(&query), auth)
        .send()
        .await
        .map_err(|e| format!("the registry's token service {realm}: {e}"))?;
    if !answer.status().is_success() {
        return Err(format!(
            "the registry's token service {realm} refused the credentials: {}",
            answer.status()
        ));
    }
    let token: TokenAnswer = answer
        .json()
        .await
        .map_err(|e| format!("the registry's token service {realm} answered no token: {e}"))?;
    let Some(token) = token.token.or(token.access_token) else {
        return Err(format!(
            "the registry's token service {realm} answered no token"
        ));
    };
    send(&RegistryAuth::Bearer(token))
        .await
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_challenge_reads_its_realm_service_and_scope() {
        let (scheme, params) = challenge(
            r#"Bearer realm="https://auth.example.net/token",service="registry.example.net",scope="repository:acme/web:pull""#,
        );
        assert_eq!(scheme, "bearer");
        assert_eq!(
            params,
            [
                (
                    "realm".to_string(),
                    "https://auth.example.net/token".to_string()
                ),
                ("service".to_string(), "registry.example.net".to_string()),
                ("scope".to_string(), "repository:acme/web:pull".to_string()),
            ]
        );
        assert_eq!(
            challenge(r#"Basic realm="Registry Realm""#),
            (
                "basic".to_string(),
                vec![("realm".to_string(), "Registry Realm".to_string())]
            )
        );
    }

    #[test]
    fn loopback_registries_are_plain_http_and_others_https() {
        assert_eq!(base_url("localhost:5000"), "http://localhost:5000");
        assert_eq!(base_url("127.0.0.1:5000"), "http://127.0.0.1:5000");
        assert_eq!(base_url("[::1]:5000"), "http://[::1]:5000");
        assert_eq!(
            base_url("registry.example.net"),
            "https://registry.example.net"
        );
        assert_eq!(base_url("ghcr.io:443"), "https://ghcr.io:443");
    }

    #[test]
    fn credentials_never_print() {
        let auth = RegistryAuth::Basic {
            username: "ci".into(),
            password: "hunter2".into(),
        };
        assert!(!format!("{auth:?}").contains("hunter2"));
        assert!(!format!("{:?}", RegistryAuth::Bearer("t0ken".into())).contains("t0ken"));
    }
}
