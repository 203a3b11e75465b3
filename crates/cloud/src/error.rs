//! The one error type of the cloud layer, and the pure rules that turn an HTTP answer into
//! it.
//!
//! Every client (Hetzner Cloud, Vultr, Robot) reports failures as a [`CloudError`]; callers
//! decide what to do with its neutral [`CloudError::class`] (an exhaustive match, so a new
//! variant forces a decision) and never read a cloud's codes or messages themselves. Each variant names the operation that failed (`hetzner.servers.create`) and
//! does not repeat its source's message.
//!
//! Classification of error answers ([`classify_response`]):
//!
//! | cloud | answer | variant |
//! |---|---|---|
//! | all | 404 | `NotFound` (a `get` turns it into `None`) |
//! | Hetzner | 429 | `RateLimited`, wait derived from `Retry-After` / `RateLimit-*` |
//! | Hetzner | 412 `resource_unavailable` | `NoCapacity` |
//! | Vultr | 429 | `RateLimited`, `Retry-After` or a short default |
//! | Vultr | 400 whose message contains "not available" | `NoCapacity` |
//! | Robot | 403 `RATE_LIMIT_EXCEEDED` (or 429) | `RateLimited`, `interval / max_request` |
//! | all | anything else | `Provider { status, code, message }` |

use std::fmt;
use std::time::{Duration, SystemTime};

use orc_common::{CloudFault, FaultClass};
use serde::Deserialize;

use crate::ids::HcloudActionId;
use crate::ratelimit::RateLimitHeaders;

/// Which cloud API a client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CloudApi {
    Hetzner,
    Vultr,
    Robot,
}

impl CloudApi {
    /// The API's lower-case name (`hetzner`).
    pub fn as_str(self) -> &'static str {
        match self {
            CloudApi::Hetzner => "hetzner",
            CloudApi::Vultr => "vultr",
            CloudApi::Robot => "robot",
        }
    }
}

impl fmt::Display for CloudApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything that can go wrong when talking to a cloud.
#[derive(Debug, thiserror::Error)]
pub enum CloudError {
    /// The resource does not exist (HTTP 404). Lookups answer `None` instead.
    #[error("{operation}: {path} does not exist")]
    NotFound {
        operation: &'static str,
        path: String,
    },
    /// The provider refused the request before doing anything; try again after
    /// `retry_after`.
    #[error("{operation}: rate limited, a request is allowed again in {retry_after:?}")]
    RateLimited {
        operation: &'static str,
        retry_after: Duration,
    },
    /// The plan or location has no capacity right now (sold out or closed); another plan or
    /// location may work.
    #[error("{operation}: no capacity ({message})")]
    NoCapacity {
        operation: &'static str,
        message: String,
    },
    /// Any other error answer, with the provider's status, machine code (when the API has
    /// one) and message.
    #[error("{operation}: the provider answered {status}{}: {message}", code_suffix(.code))]
    Provider {
        operation: &'static str,
        status: u16,
        code: Option<String>,
        message: String,
    },
    /// The request did not complete (connection, TLS, timeout).
    #[error("{operation}: the request did not complete")]
    Transport {
        operation: &'static str,
        #[source]
        source: reqwest::Error,
    },
    /// The answer was not the JSON the API describes.
    #[error("{operation}: cannot decode the answer at `{at}`")]
    Decode {
        operation: &'static str,
        at: String,
        #[source]
        source: serde_json::Error,
    },
    /// The answer was well-formed but broke the API's rules (for example a pagination
    /// cursor that does not advance).
    #[error("{operation}: {problem}")]
    Protocol {
        operation: &'static str,
        problem: String,
    },
    /// A Hetzner action ended in `error`.
    #[error("{operation}: action {action} ({command}) failed with {code}: {message}")]
    ActionFailed {
        operation: &'static str,
        action: HcloudActionId,
        command: String,
        code: String,
        message: String,
    },
    /// Hetzner actions were still running when the caller's deadline passed.
    #[error("{operation}: actions {pending:?} were still running at the deadline")]
    Deadline {
        operation: &'static str,
        pending: Vec<HcloudActionId>,
    },
    /// The caller asked for something the client refuses to send (bad base URL, user data
    /// too large, empty selection).
    #[error("{what} is invalid: {problem}")]
    InvalidInput { what: &'static str, problem: String },
}

fn code_suffix(code: &Option<String>) -> String {
    match code {
        Some(code) if !code.is_empty() => format!(" {code}"),
        Some(_) | None => String::new(),
    }
}

impl CloudError {
    /// The failure in neutral words: the one place that reads the clouds' status codes,
    /// error codes and messages. Everything above the cloud layer acts on the class.
    ///
    /// | answer | class |
    /// |---|---|
    /// | 404 | `NotFound` |
    /// | 429, Robot's rate-limit answer | `RateLimited` |
    /// | sold out, location closed | `NoCapacity` |
    /// | Hetzner `primary_ip_assigned` or `server_already_attached`, Vultr "… already attached …" | `AlreadyAttached` |
    /// | 401, 403 | `Unauthorized` |
    /// | Hetzner `conflict` or `locked`, 423 | `Locked` |
    /// | 409, Hetzner `uniqueness_error` | `Conflict` |
    /// | 5xx, no answer, actions past the deadline | `Unavailable` |
    /// | a body the API does not describe | `Malformed` |
    /// | a request the client refused to send | `InvalidInput` |
    /// | any other answer, a failed action | `Rejected` |
    pub fn class(&self) -> FaultClass {
        match self {
            CloudError::NotFound { .. } => FaultClass::NotFound,
            CloudError::RateLimited { .. } => FaultClass::RateLimited,
            CloudError::NoCapacity { .. } => FaultClass::NoCapacity,
            CloudError::Provider {
                status,
                code,
                message,
                ..
            } => {
                let code = code.as_deref();
                if matches!(
                    code,
                    Some("primary_ip_assigned" | "server_already_attached")
                ) || message.to_ascii_lowercase().contains("already attached")
                {
                    FaultClass::AlreadyAttached
                } else if *status == 401 || *status == 403 {
                    FaultClass::Unauthorized
                } else if matches!(code, Some("conflict" | "locked")) || *status == 423 {
                    FaultClass::Locked
                } else if *status == 409 || code == Some("uniqueness_error") {
                    FaultClass::Conflict
                } else if *status >= 500 {
                    FaultClass::Unavailable
                } else {
                    FaultClass::Rejected
                }
            }
            CloudError::Transport { .. } | CloudError::Deadline { .. } => FaultClass::Unavailable,
            CloudError::Decode { .. } | CloudError::Protocol { .. } => FaultClass::Malformed,
            CloudError::ActionFailed { .. } => FaultClass::Rejected,
            CloudError::InvalidInput { .. } => FaultClass::InvalidInput,
        }
    }

    /// The failure as a [`CloudFault`]: its class, plus status, code and this error's
    /// message for operators.
    pub fn fault(&self) -> CloudFault {
        let (status, code) = match self {
            CloudError::Provider { status, code, .. } => (Some(*status), code.clone()),
            CloudError::ActionFailed { code, .. } => (None, Some(code.clone())),
            CloudError::NotFound { .. } => (Some(404), None),
            CloudError::RateLimited { .. }
            | CloudError::NoCapacity { .. }
            | CloudError::Transport { .. }
            | CloudError::Decode { .. }
            | CloudError::Protocol { .. }
            | CloudError::Deadline { .. }
            | CloudError::InvalidInput { .. } => (None, None),
        };
        // What is missing, without "does not exist": the class says that.
        let message = match self {
            CloudError::NotFound { operation, path } => format!("{operation}: {path}"),
            _ => self.to_string(),
        };
        CloudFault {
            class: self.class(),
            status,
            code,
            message,
            retry_after: self.retry_after(),
        }
    }

    /// True when the same request may succeed later without any change: rate limits,
    /// transport failures, 5xx answers, Hetzner `conflict`/`locked`, actions still running.
    pub fn retryable(&self) -> bool {
        self.class().retryable()
    }

    /// True when the plan or location is out of capacity, so another plan or location
    /// should be tried.
    pub fn is_capacity(&self) -> bool {
        self.class() == FaultClass::NoCapacity
    }

    /// True when the resource does not exist.
    pub fn is_not_found(&self) -> bool {
        self.class() == FaultClass::NotFound
    }

    /// How long to wait before the next request, when the provider said so.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            CloudError::RateLimited { retry_after, .. } => Some(*retry_after),
            CloudError::NotFound { .. }
            | CloudError::NoCapacity { .. }
            | CloudError::Provider { .. }
            | CloudError::Transport { .. }
            | CloudError::Decode { .. }
            | CloudError::Protocol { .. }
            | CloudError::ActionFailed { .. }
            | CloudError::Deadline { .. }
            | CloudError::InvalidInput { .. } => None,
        }
    }

    /// The operation that failed (`hetzner.servers.create`), when there was one.
    pub fn operation(&self) -> Option<&'static str> {
        match self {
            CloudError::NotFound { operation, .. }
            | CloudError::RateLimited { operation, .. }
            | CloudError::NoCapacity { operation, .. }
            | CloudError::Provider { operation, .. }
            | CloudError::Transport { operation, .. }
            | CloudError::Decode { operation, .. }
            | CloudError::Protocol { operation, .. }
            | CloudError::ActionFailed { operation, .. }
            | CloudError::Deadline { operation, .. } => Some(operation),
            CloudError::InvalidInput { .. } => None,
        }
    }
}

/// Vultr's wait after a 429 that carries no `Retry-After`: its window is one second and
/// its own client waits about half of that.
pub const VULTR_DEFAULT_RETRY_AFTER: Duration = Duration::from_millis(500);

/// The error code, message and Robot rate-limit fields found in an error body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorBody {
    pub code: Option<String>,
    pub message: String,
    /// Robot: requests allowed per `interval`.
    pub max_request: Option<u64>,
    /// Robot: the rate-limit interval in seconds.
    pub interval: Option<u64>,
}

#[derive(Deserialize)]
struct HetznerEnvelope {
    error: HetznerErrorBody,
}

#[derive(Deserialize)]
struct HetznerErrorBody {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
struct VultrEnvelope {
    error: String,
}

#[derive(Deserialize)]
struct RobotEnvelope {
    error: RobotErrorBody,
}

#[derive(Deserialize)]
struct RobotErrorBody {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    max_request: Option<u64>,
    #[serde(default)]
    interval: Option<u64>,
}

impl ErrorBody {
    /// Reads an error body in `api`'s shape. A body in another shape (an HTML page from a
    /// proxy, an empty body) gives no code and a message naming the status.
    pub fn parse(api: CloudApi, status: u16, body: &[u8]) -> ErrorBody {
        let parsed = match api {
            CloudApi::Hetzner => serde_json::from_slice::<HetznerEnvelope>(body)
                .ok()
                .map(|e| ErrorBody {
                    code: e.error.code,
                    message: e.error.message.unwrap_or_default(),
                    max_request: None,
                    interval: None,
                }),
            CloudApi::Vultr => {
                serde_json::from_slice::<VultrEnvelope>(body)
                    .ok()
                    .map(|e| ErrorBody {
                        code: None,
                        message: e.error,
                        max_request: None,
                        interval: None,
                    })
            }
            CloudApi::Robot => {
                serde_json::from_slice::<RobotEnvelope>(body)
                    .ok()
                    .map(|e| ErrorBody {
                        code: e.error.code,
                        message: e.error.message.unwrap_or_default(),
                        max_request: e.error.max_request,
                        interval: e.error.interval,
                    })
            }
        };
        parsed.unwrap_or_else(|| ErrorBody {
            code: None,
            message: format!("HTTP {status} without an error body of this API"),
            max_request: None,
            interval: None,
        })
    }
}

/// True when a Vultr message reports a plan out of stock in a region.
pub fn vultr_message_is_capacity(message: &str) -> bool {
    message.to_ascii_lowercase().contains("not available")
}

/// Turns a non-success HTTP answer into a [`CloudError`].
pub fn classify_response(
    api: CloudApi,
    operation: &'static str,
    path: &str,
    status: u16,
    rate: &RateLimitHeaders,
    body: &[u8],
    now: SystemTime,
) -> CloudError {
    let parsed = ErrorBody::parse(api, status, body);
    if status == 404 {
        return CloudError::NotFound {
            operation,
            path: path.to_string(),
        };
    }
    match api {
        CloudApi::Hetzner => {
            if status == 429 {
                return CloudError::RateLimited {
                    operation,
                    retry_after: rate.hetzner_wait(now),
                };
            }
            if status == 412 && parsed.code.as_deref() == Some("resource_unavailable") {
                return CloudError::NoCapacity {
                    operation,
                    message: parsed.message,
                };
            }
        }
        CloudApi::Vultr => {
            if status == 429 {
                return CloudError::RateLimited {
                    operation,
                    retry_after: rate.retry_after.unwrap_or(VULTR_DEFAULT_RETRY_AFTER),
                };
            }
            if status == 400 && vultr_message_is_capacity(&parsed.message) {
                return CloudError::NoCapacity {
                    operation,
                    message: parsed.message,
                };
            }
        }
        CloudApi::Robot => {
            if status == 429
                || (status == 403 && parsed.code.as_deref() == Some("RATE_LIMIT_EXCEEDED"))
            {
                return CloudError::RateLimited {
                    operation,
                    retry_after: rate
                        .retry_after
                        .unwrap_or_else(|| robot_wait(parsed.max_request, parsed.interval)),
                };
            }
        }
    }
    CloudError::Provider {
        operation,
        status,
        code: parsed.code,
        message: parsed.message,
    }
}

/// Robot's wait for one request: `interval / max_request` seconds, one minute when the body
/// does not say.
pub fn robot_wait(max_request: Option<u64>, interval: Option<u64>) -> Duration {
    match (max_request, interval) {
        (Some(max), Some(interval)) if max > 0 => {
            Duration::from_secs_f64(interval as f64 / max as f64)
        }
        (Some(_), Some(_)) | (None, _) | (_, None) => Duration::from_secs(60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn classify(api: CloudApi, status: u16, body: &str) -> CloudError {
        classify_response(
            api,
            "test.op",
            "/things/1",
            status,
            &RateLimitHeaders::default(),
            body.as_bytes(),
            SystemTime::UNIX_EPOCH,
        )
    }

    #[test]
    fn hetzner_answers_are_classified() {
        let sold_out = r#"{"error":{"code":"resource_unavailable","message":"error during placement","details":null}}"#;
        let err = classify(CloudApi::Hetzner, 412, sold_out);
        assert!(err.is_capacity(), "{err:?}");
        assert!(!err.retryable());
        assert_eq!(
            err.to_string(),
            "test.op: no capacity (error during placement)"
        );

        let other_412 = r#"{"error":{"code":"primary_ip_version_mismatch","message":"x"}}"#;
        assert!(!classify(CloudApi::Hetzner, 412, other_412).is_capacity());

        let missing = r#"{"error":{"code":"not_found","message":"server not found"}}"#;
        assert!(classify(CloudApi::Hetzner, 404, missing).is_not_found());

        let locked = r#"{"error":{"code":"locked","message":"server is locked"}}"#;
        let err = classify(CloudApi::Hetzner, 423, locked);
        assert!(err.retryable());
        assert_eq!(
            err.to_string(),
            "test.op: the provider answered 423 locked: server is locked"
        );

        let invalid = r#"{"error":{"code":"invalid_input","message":"unsupported location for server type"}}"#;
        let err = classify(CloudApi::Hetzner, 422, invalid);
        assert!(!err.retryable() && !err.is_capacity());
        match err {
            CloudError::Provider { status, code, .. } => {
                assert_eq!((status, code.as_deref()), (422, Some("invalid_input")));
            }
            other => panic!("expected Provider, got {other:?}"),
        }

        let on_network = r#"{"error":{"code":"server_already_attached","message":"x"}}"#;
        assert_eq!(
            classify(CloudApi::Hetzner, 422, on_network).class(),
            FaultClass::AlreadyAttached
        );

        let limited = r#"{"error":{"code":"rate_limit_exceeded","message":"limit of 3600 requests per hour reached"}}"#;
        let err = classify(CloudApi::Hetzner, 429, limited);
        assert!(err.retryable());
        assert!(err.retry_after().is_some());
    }

    #[test]
    fn vultr_answers_are_classified() {
        let sold_out = r#"{"error":"Plan is not available in the selected region.","status":400}"#;
        assert!(classify(CloudApi::Vultr, 400, sold_out).is_capacity());
        let lower = r#"{"error":"this plan is NOT AVAILABLE here","status":400}"#;
        assert!(classify(CloudApi::Vultr, 400, lower).is_capacity());
        let bad_plan = r#"{"error":"Invalid plan chosen.","status":400}"#;
        let err = classify(CloudApi::Vultr, 400, bad_plan);
        assert!(!err.is_capacity());
        assert_eq!(
            err.to_string(),
            "test.op: the provider answered 400: Invalid plan chosen."
        );
        let locked =
            r#"{"error":"Unable to destroy server: Server is currently locked","status":500}"#;
        assert!(classify(CloudApi::Vultr, 500, locked).retryable());
        let limited = classify(
            CloudApi::Vultr,
            429,
            r#"{"error":"Rate limit reached","status":429}"#,
        );
        assert_eq!(limited.retry_after(), Some(VULTR_DEFAULT_RETRY_AFTER));
    }

    #[test]
    fn robot_rate_limit_is_a_403_with_a_code() {
        let body = r#"{"error":{"status":403,"code":"RATE_LIMIT_EXCEEDED","max_request":200,"interval":3600,"message":"rate limit exceeded"}}"#;
        let err = classify(CloudApi::Robot, 403, body);
        assert_eq!(err.retry_after(), Some(Duration::from_secs(18)));
        let forbidden = r#"{"error":{"status":403,"code":"FORBIDDEN","message":"no"}}"#;
        assert!(!classify(CloudApi::Robot, 403, forbidden).retryable());
        let missing =
            r#"{"error":{"status":404,"code":"SERVER_NOT_FOUND","message":"server not found"}}"#;
        assert!(classify(CloudApi::Robot, 404, missing).is_not_found());
    }

    #[test]
    fn a_foreign_body_still_gives_a_provider_error() {
        let err = classify(CloudApi::Hetzner, 502, "<html>bad gateway</html>");
        match &err {
            CloudError::Provider { status, code, .. } => {
                assert_eq!(*status, 502);
                assert_eq!(*code, None);
            }
            other => panic!("expected Provider, got {other:?}"),
        }
        assert!(err.retryable());
    }

    proptest! {
        #[test]
        fn classification_never_panics_and_is_consistent(
            status in 400u16..600,
            body in proptest::collection::vec(any::<u8>(), 0..200),
            api in prop_oneof![Just(CloudApi::Hetzner), Just(CloudApi::Vultr), Just(CloudApi::Robot)],
        ) {
            let err = classify_response(
                api, "op", "/p", status, &RateLimitHeaders::default(), &body, SystemTime::now(),
            );
            prop_assert_eq!(err.is_not_found(), status == 404);
            prop_assert_eq!(err.operation(), Some("op"));
            if err.is_capacity() {
                prop_assert!(!err.retryable());
            }
        }

        #[test]
        fn vultr_capacity_matches_any_case(prefix in "[a-z ]{0,10}", flips in proptest::collection::vec(any::<bool>(), 13)) {
            let phrase: String = "not available"
                .chars()
                .zip(flips)
                .map(|(c, up)| if up { c.to_ascii_uppercase() } else { c })
                .collect();
            let message = format!("{prefix}{phrase} in region");
            prop_assert!(vultr_message_is_capacity(&message));
        }
    }
}
