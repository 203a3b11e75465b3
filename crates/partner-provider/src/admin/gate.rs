//! The page's gate: every request must carry one access assertion the zone's edge signed for
//! `sys/partner/admin` in org `sys`, checked by [`orc_access::Verifier`] against the keys
//! published at `access_keys_url`.
//!
//! - The issuer expected is the origin of `access_keys_url` (`https://host[:port]`): the edge
//!   writes the zone's web URL, which publishes the keys, as `iss`.
//! - The keys are fetched over https trusting only the zone's CA (`ORC_ZONE_CA_FILE`), never
//!   the system's roots, with a timeout. They are cached; an unknown `kid` fetches them again
//!   at most once per interval (the verifier's rule). A fetch at start that fails is logged and
//!   does not stop the process: the zone may not be reachable yet.
//! - Without `access_keys_url` the gate is closed: every request is answered with a page
//!   naming the param. With it but without the zone's CA, no key can be fetched, and every
//!   request is answered with a page naming `ORC_ZONE_CA_FILE`.
//!
//! A refusal answers with the verifier's reason, which never repeats the token.

use std::time::Duration;

use axum::http::HeaderMap;
use orc_access::{Assertion, KeySource, KeysUrl, Refusal, Verifier, VerifierOptions};
use orc_partner::params::Config;
use orc_tls::PinnedCa;
use url::Url;

/// The org whose members the page lets in.
pub const ORG: &str = "sys";
/// The endpoint the assertion must be made for.
pub const AUDIENCE: &str = "sys/partner/admin";
/// How long one fetch of the keys may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// The zone's JWKS over https, trusting only the zone's CA.
#[derive(Debug, Clone)]
pub struct JwksSource {
    client: reqwest::Client,
    url: KeysUrl,
}

/// The keys' source could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("access_keys_url is refused")]
    KeysUrl(#[from] orc_access::verify::KeysUrlError),
    #[error("the zone's CA from {origin} cannot be used for the access keys")]
    Ca {
        origin: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("no https client can be built for the access keys")]
    Client(#[source] reqwest::Error),
}

impl JwksSource {
    /// A source of the keys at `url`, trusting only `ca`.
    pub fn new(url: &str, ca: &PinnedCa) -> Result<JwksSource, GateError> {
        let url = KeysUrl::parse(url)?;
        let mut builder = reqwest::Client::builder()
            .tls_built_in_root_certs(false)
            .https_only(true)
            .timeout(FETCH_TIMEOUT)
            .connect_timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none());
        let certs =
            reqwest::Certificate::from_pem_bundle(ca.pem().as_bytes()).map_err(|source| {
                GateError::Ca {
                    origin: ca.origin().to_string(),
                    source,
                }
            })?;
        for cert in certs {
            builder = builder.add_root_certificate(cert);
        }
        Ok(JwksSource {
            client: builder.build().map_err(GateError::Client)?,
            url,
        })
    }
}

impl KeySource for JwksSource {
    async fn fetch(&self) -> Result<String, String> {
        let answer = self
            .client
            .get(self.url.as_str())
            .send()
            .await
            .map_err(|e| format!("the access keys could not be fetched: {e}"))?;
        let status = answer.status();
        if !status.is_success() {
            return Err(format!("the access keys answered {status}"));
        }
        answer
            .text()
            .await
            .map_err(|e| format!("the access keys could not be read: {e}"))
    }
}

/// The issuer the edge writes for the zone whose keys are at `url`: its origin.
pub fn issuer_of(url: &Url) -> String {
    url.origin().ascii_serialization()
}

/// Why a request is not let in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Turned {
    /// `access_keys_url` is not set.
    Closed,
    /// `ORC_ZONE_CA_FILE` is not given, so the keys cannot be fetched.
    NoZoneCa,
    /// The assertion was refused.
    Refused(Refusal),
}

/// The page's gate.
#[derive(Debug)]
pub enum Gate {
    /// No `access_keys_url`: the page is closed.
    Closed,
    /// `access_keys_url` is set but the zone's CA is not given.
    NoZoneCa,
    /// Every request is checked.
    Open(Verifier<JwksSource>),
}

impl Gate {
    /// The gate `config` asks for, fetching keys trusting `ca`.
    pub fn from_config(config: &Config, ca: Option<&PinnedCa>) -> Result<Gate, GateError> {
        let Some(url) = &config.access_keys_url else {
            return Ok(Gate::Closed);
        };
        let Some(ca) = ca else {
            return Ok(Gate::NoZoneCa);
        };
        let source = JwksSource::new(url.as_str(), ca)?;
        let options = VerifierOptions::new(&issuer_of(url), ORG, AUDIENCE);
        Ok(Gate::Open(Verifier::new(options, source)))
    }

    /// Fetches the keys at start; a failure is logged and the process goes on (the keys are
    /// fetched again when a request names one).
    pub async fn load_keys(&self, now_secs: u64) {
        if let Gate::Open(verifier) = self {
            match verifier.load_keys(now_secs).await {
                Ok(n) => tracing::info!(keys = n, "The admin page loaded the zone's access keys"),
                Err(reason) => tracing::warn!(
                    reason = %reason,
                    "The admin page could not load the zone's access keys yet; it tries again when a request comes"
                ),
            }
        }
    }

    /// Checks one request's headers at `now_secs`.
    pub async fn check(&self, headers: &HeaderMap, now_secs: u64) -> Result<Assertion, Turned> {
        match self {
            Gate::Closed => Err(Turned::Closed),
            Gate::NoZoneCa => Err(Turned::NoZoneCa),
            Gate::Open(verifier) => verifier
                .verify(headers, now_secs)
                .await
                .map_err(Turned::Refused),
        }
    }
}
