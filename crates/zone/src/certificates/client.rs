//! The ACME side of certificates: an account at a directory and one order per domain,
//! answered by HTTP-01 (RFC 8555), over the zone's own HTTP client (reqwest with rustls
//! and the web's roots, plus the roots the operator adds for a private directory).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use axum::body::Bytes;
use http_body_util::BodyExt as _;
use instant_acme::{
    Account, AccountCredentials, AuthorizationStatus, BodyWrapper, BytesResponse, ChallengeType,
    HttpClient, Identifier, NewAccount, NewOrder, OrderStatus, RetryPolicy,
};

/// How long one request to the directory may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// An ACME request over reqwest.
struct Requests(reqwest::Client);

impl HttpClient for Requests {
    fn request(
        &self,
        request: axum::http::Request<BodyWrapper<Bytes>>,
    ) -> Pin<Box<dyn Future<Output = Result<BytesResponse, instant_acme::Error>> + Send>> {
        let client = self.0.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let body = match body.collect().await {
                Ok(collected) => collected.to_bytes(),
                Err(never) => match never {},
            };
            let response = client
                .request(parts.method, parts.uri.to_string())
                .headers(parts.headers)
                .body(body)
                .send()
                .await
                .map_err(|e| instant_acme::Error::Other(Box::new(e)))?;
            let status = response.status();
            let headers = response.headers().clone();
            let bytes = response
                .bytes()
                .await
                .map_err(|e| instant_acme::Error::Other(Box::new(e)))?;
            let mut out = axum::http::Response::new(http_body_util::Full::new(bytes));
            *out.status_mut() = status;
            *out.headers_mut() = headers;
            Ok(BytesResponse::from(out))
        })
    }
}

/// Where the zone gets certificates and who it is there.
#[derive(Clone)]
pub struct Directory {
    pub url: String,
    /// `mailto:` contacts for the account (expiry notices), if any.
    pub contact: Option<String>,
    http: reqwest::Client,
}

impl std::fmt::Debug for Directory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Directory")
            .field("url", &self.url)
            .field("contact", &self.contact)
            .finish_non_exhaustive()
    }
}

impl Directory {
    /// The directory at `url`, reached over HTTPS checked against the web's roots and
    /// `extra_roots` (PEM, for a private ACME server).
    pub fn new(
        url: &str,
        contact: Option<String>,
        extra_roots: Option<&str>,
    ) -> Result<Directory, String> {
        let mut http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("orc/", env!("CARGO_PKG_VERSION")));
        if let Some(pem) = extra_roots {
            let roots = reqwest::Certificate::from_pem_bundle(pem.as_bytes())
                .map_err(|e| format!("the ACME directory's CA certificates: {e}"))?;
            if roots.is_empty() {
                return Err("the ACME directory's CA file holds no certificate".into());
            }
            for root in roots {
                http = http.add_root_certificate(root);
            }
        }
        Ok(Directory {
            url: url.to_string(),
            contact,
            http: http.build().map_err(|e| e.to_string())?,
        })
    }

    fn requests(&self) -> Box<dyn HttpClient> {
        Box::new(Requests(self.http.clone()))
    }

    /// A new account at the directory; its credentials (with its private key) are for the
    /// store, sealed.
    pub async fn create_account(&self) -> Result<(Account, String), String> {
        let contact: Vec<String> = self
            .contact
            .iter()
            .map(|c| {
                if c.starts_with("mailto:") {
                    c.clone()
                } else {
                    format!("mailto:{c}")
                }
            })
            .collect();
        let contact: Vec<&str> = contact.iter().map(String::as_str).collect();
        let (account, credentials) = Account::builder_with_http(self.requests())
            .create(
                &NewAccount {
                    contact: &contact,
                    terms_of_service_agreed: true,
                    only_return_existing: false,
                },
                self.url.clone(),
                None,
            )
            .await
            .map_err(|e| format!("no account at {}: {}", self.url, words(&e)))?;
        let credentials = serde_json::to_string(&credentials).map_err(|e| e.to_string())?;
        Ok((account, credentials))
    }

    /// The account `credentials` stand for.
    pub async fn account(&self, credentials: &str) -> Result<Account, String> {
        let credentials: AccountCredentials = serde_json::from_str(credentials)
            .map_err(|e| format!("the stored ACME account cannot be read: {e}"))?;
        Account::builder_with_http(self.requests())
            .from_credentials(credentials)
            .await
            .map_err(|e| format!("the ACME account at {}: {}", self.url, words(&e)))
    }
}

/// A challenge the ingress nodes must answer before the directory checks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Http01 {
    pub token: String,
    pub key_authorization: String,
}

/// What answering challenges takes: publishing them to the nodes that serve the domain
/// (done when it returns) and taking them back.
pub trait Answer: Send + Sync {
    fn publish(&self, challenges: &[Http01]) -> impl Future<Output = Result<(), String>> + Send;
    fn withdraw(&self, challenges: &[Http01]) -> impl Future<Output = ()> + Send;
}

/// A certificate as issued.
#[derive(Clone)]
pub struct Issued {
    /// Leaf first.
    pub chain_pem: String,
    /// PKCS#8.
    pub key_pem: String,
    pub not_before_ms: i64,
    pub not_after_ms: i64,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued")
            .field("not_before_ms", &self.not_before_ms)
            .field("not_after_ms", &self.not_after_ms)
            .finish_non_exhaustive()
    }
}

/// How long the directory may take to validate and to issue.
const VALIDATION: Duration = Duration::from_secs(120);

/// Obtains a certificate for `domain` on `account`, answering its HTTP-01 challenges with
/// `answer`. The error says in words what failed, with the directory's own reason when it
/// gives one.
pub async fn obtain(
    account: &Account,
    domain: &str,
    answer: &impl Answer,
) -> Result<Issued, String> {
    let identifiers = [Identifier::Dns(domain.to_string())];
    let mut order = account
        .new_order(&NewOrder::new(&identifiers))
        .await
        .map_err(|e| format!("the order was refused: {}", words(&e)))?;
    let mut challenges = Vec::new();
    {
        let mut authorizations = order.authorizations();
        while let Some(next) = authorizations.next().await {
            let mut authorization =
                next.map_err(|e| format!("the authorization cannot be read: {}", words(&e)))?;
            match authorization.status {
                AuthorizationStatus::Valid => continue,
                AuthorizationStatus::Pending => {}
                status => return Err(format!("the authorization is {status:?}")),
            }
            let challenge = authorization
                .challenge(ChallengeType::Http01)
                .ok_or("the directory offers no HTTP-01 challenge")?;
            challenges.push((
                Http01 {
                    token: challenge.token.clone(),
                    key_authorization: challenge.key_authorization().as_str().to_string(),
                },
                challenge.url.clone(),
            ));
        }
    }
    let answers: Vec<Http01> = challenges.iter().map(|(c, _)| c.clone()).collect();
    let outcome = async {
        answer.publish(&answers).await?;
        {
            let mut authorizations = order.authorizations();
            while let Some(next) = authorizations.next().await {
                let mut authorization =
                    next.map_err(|e| format!("the authorization cannot be read: {}", words(&e)))?;
                if let Some(mut challenge) = authorization.challenge(ChallengeType::Http01)
                    && challenges.iter().any(|(_, url)| *url == challenge.url)
                {
                    challenge
                        .set_ready()
                        .await
                        .map_err(|e| format!("the challenge was not taken: {}", words(&e)))?;
                }
            }
        }
        let retries = RetryPolicy::new()
            .initial_delay(Duration::from_millis(250))
            .backoff(1.5)
            .timeout(VALIDATION);
        let status = order
            .poll_ready(&retries)
            .await
            .map_err(|e| format!("the directory did not validate the domain: {}", words(&e)))?;
        if status != OrderStatus::Ready {
            return Err(challenge_failure(&mut order).await);
        }
        let key_pem = order
            .finalize()
            .await
            .map_err(|e| format!("the order was not finalized: {}", words(&e)))?;
        let chain_pem = order
            .poll_certificate(&retries)
            .await
            .map_err(|e| format!("no certificate came: {}", words(&e)))?;
        let (not_before_ms, not_after_ms) = validity(&chain_pem)?;
        Ok(Issued {
            chain_pem,
            key_pem,
            not_before_ms,
            not_after_ms,
        })
    }
    .await;
    answer.withdraw(&answers).await;
    outcome
}

/// Why an order went invalid: the directory's reason on the failed challenge.
async fn challenge_failure(order: &mut instant_acme::Order) -> String {
    let mut authorizations = order.authorizations();
    while let Some(Ok(mut authorization)) = authorizations.next().await {
        let Ok(state) = authorization.refresh().await else {
            continue;
        };
        for challenge in &state.challenges {
            if let Some(problem) = &challenge.error {
                return format!(
                    "the HTTP-01 challenge failed: {}",
                    problem
                        .detail
                        .clone()
                        .or_else(|| problem.r#type.clone())
                        .unwrap_or_else(|| "no reason given".into())
                );
            }
        }
    }
    "the directory found the domain invalid and gave no reason".into()
}

/// An ACME error in words: the directory's own detail when it sent a problem document.
fn words(error: &instant_acme::Error) -> String {
    match error {
        instant_acme::Error::Api(problem) => problem
            .detail
            .clone()
            .or_else(|| problem.r#type.clone())
            .unwrap_or_else(|| "the directory refused without a reason".into()),
        instant_acme::Error::Other(inner) => {
            let mut text = inner.to_string();
            let mut source = inner.source();
            while let Some(cause) = source {
                text.push_str(": ");
                text.push_str(&cause.to_string());
                source = cause.source();
            }
            text
        }
        other => other.to_string(),
    }
}

/// When the leaf of `chain_pem` starts and ends, in Unix milliseconds.
pub fn validity(chain_pem: &str) -> Result<(i64, i64), String> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(chain_pem.as_bytes())
        .map_err(|e| format!("the certificate cannot be read: {e}"))?;
    let cert = pem
        .parse_x509()
        .map_err(|e| format!("the certificate cannot be read: {e}"))?;
    let validity = cert.validity();
    Ok((
        validity.not_before.timestamp() * 1000,
        validity.not_after.timestamp() * 1000,
    ))
}
