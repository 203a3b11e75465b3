//! How a machine operation failed, by what the caller can do about it.
//!
//! A [`MachineError`] is built from a cloud client's neutral [`CloudFault`] (the cloud crate
//! classifies its own answers; nothing here reads a status code or a cloud's error code)
//! or directly by a provider for failures of its own. It carries the cloud's words for
//! operators; the zone only ever sees the refusal kind ([`MachineError::refusal_kind`]) and
//! the adapter's generic [words](super::words).

use std::time::Duration;

use orc_common::{CloudFault, FaultClass};
use orc_proto::RefusalKind;

/// How a machine operation failed, by what the caller can do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MachineError {
    /// The machine (or what the operation names) does not exist.
    #[error("{what} does not exist")]
    NotFound { what: String },
    /// The cloud asked to wait before the next request.
    #[error("rate limited; a request is allowed again in {retry_after:?}")]
    RateLimited { retry_after: Duration },
    /// The request clashes with the cloud's current state (a name taken, a machine
    /// locked by another action).
    #[error("conflict: {message}")]
    Conflict { message: String },
    /// The plan or location has no capacity now.
    #[error("no capacity: {message}")]
    Capacity { message: String },
    /// Only the operator can fix this (a bad token, a bad config, an unknown location).
    #[error("configuration: {problem}")]
    Config { problem: String },
    /// Any other failure, with the cloud's status (when an answer came), machine code and
    /// message.
    #[error("the provider answered {}{}: {message}", status_words(.status), code_words(.code))]
    Provider {
        status: Option<u16>,
        code: Option<String>,
        message: String,
    },
}

fn status_words(status: &Option<u16>) -> String {
    match status {
        Some(status) => status.to_string(),
        None => "nothing".to_string(),
    }
}

fn code_words(code: &Option<String>) -> String {
    match code {
        Some(code) => format!(" {code}"),
        None => String::new(),
    }
}

impl MachineError {
    /// The refusal kind the zone acts on: rate limits are transient, capacity is
    /// no_capacity, configuration needs the operator, everything else failed.
    pub fn refusal_kind(&self) -> RefusalKind {
        match self {
            MachineError::RateLimited { .. } => RefusalKind::Transient,
            MachineError::Capacity { .. } => RefusalKind::NoCapacity,
            MachineError::Config { .. } => RefusalKind::OperatorFix,
            MachineError::NotFound { .. } => RefusalKind::Failed,
            MachineError::Conflict { .. } => RefusalKind::Failed,
            MachineError::Provider { .. } => RefusalKind::Failed,
        }
    }

    /// True for [`MachineError::NotFound`].
    pub fn is_not_found(&self) -> bool {
        match self {
            MachineError::NotFound { .. } => true,
            MachineError::RateLimited { .. }
            | MachineError::Conflict { .. }
            | MachineError::Capacity { .. }
            | MachineError::Config { .. }
            | MachineError::Provider { .. } => false,
        }
    }
}

/// A cloud failure by its class: not found, rate limited, no capacity, refused credentials
/// and requests the client would not send (configuration), a name taken or a resource
/// busy (conflict); every other class keeps the cloud's status, code and message.
impl From<CloudFault> for MachineError {
    fn from(fault: CloudFault) -> Self {
        let CloudFault {
            class,
            status,
            code,
            message,
            retry_after,
        } = fault;
        match class {
            FaultClass::NotFound => MachineError::NotFound { what: message },
            FaultClass::RateLimited => MachineError::RateLimited {
                retry_after: retry_after.unwrap_or_default(),
            },
            FaultClass::NoCapacity => MachineError::Capacity { message },
            FaultClass::Unauthorized => MachineError::Config {
                problem: match status {
                    Some(status) => format!("the cloud refused the credentials ({status})"),
                    None => "the cloud refused the credentials".to_string(),
                },
            },
            FaultClass::InvalidInput => MachineError::Config { problem: message },
            FaultClass::Conflict | FaultClass::Locked => MachineError::Conflict { message },
            FaultClass::AlreadyAttached
            | FaultClass::Unavailable
            | FaultClass::Malformed
            | FaultClass::Rejected => MachineError::Provider {
                status,
                code,
                message,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(class: FaultClass, status: Option<u16>, code: Option<&str>) -> CloudFault {
        CloudFault {
            class,
            status,
            code: code.map(str::to_string),
            message: "hetzner.servers.create: words".into(),
            retry_after: None,
        }
    }

    #[test]
    fn every_fault_class_maps_to_its_machine_error() {
        let words = || "hetzner.servers.create: words".to_string();
        let cases = [
            (
                fault(FaultClass::NotFound, Some(404), None),
                MachineError::NotFound { what: words() },
            ),
            (
                CloudFault {
                    retry_after: Some(Duration::from_secs(2)),
                    ..fault(FaultClass::RateLimited, None, None)
                },
                MachineError::RateLimited {
                    retry_after: Duration::from_secs(2),
                },
            ),
            (
                fault(FaultClass::NoCapacity, None, None),
                MachineError::Capacity { message: words() },
            ),
            (
                fault(FaultClass::Unauthorized, Some(401), Some("unauthorized")),
                MachineError::Config {
                    problem: "the cloud refused the credentials (401)".into(),
                },
            ),
            (
                fault(FaultClass::InvalidInput, None, None),
                MachineError::Config { problem: words() },
            ),
            (
                fault(FaultClass::Conflict, Some(409), Some("uniqueness_error")),
                MachineError::Conflict { message: words() },
            ),
            (
                fault(FaultClass::Locked, Some(423), Some("locked")),
                MachineError::Conflict { message: words() },
            ),
            (
                fault(FaultClass::Unavailable, Some(503), Some("unavailable")),
                MachineError::Provider {
                    status: Some(503),
                    code: Some("unavailable".into()),
                    message: words(),
                },
            ),
            (
                fault(FaultClass::Malformed, None, None),
                MachineError::Provider {
                    status: None,
                    code: None,
                    message: words(),
                },
            ),
            (
                fault(FaultClass::Rejected, Some(422), Some("invalid_input")),
                MachineError::Provider {
                    status: Some(422),
                    code: Some("invalid_input".into()),
                    message: words(),
                },
            ),
            (
                fault(
                    FaultClass::AlreadyAttached,
                    Some(422),
                    Some("primary_ip_assigned"),
                ),
                MachineError::Provider {
                    status: Some(422),
                    code: Some("primary_ip_assigned".into()),
                    message: words(),
                },
            ),
        ];
        for (fault, expected) in cases {
            assert_eq!(MachineError::from(fault.clone()), expected, "{fault}");
        }
    }

    #[test]
    fn refusal_kinds_follow_the_error_class() {
        let kind = |class, status| MachineError::from(fault(class, status, None)).refusal_kind();
        assert_eq!(kind(FaultClass::RateLimited, None), RefusalKind::Transient);
        assert_eq!(kind(FaultClass::NoCapacity, None), RefusalKind::NoCapacity);
        assert_eq!(
            kind(FaultClass::Unauthorized, Some(403)),
            RefusalKind::OperatorFix
        );
        assert_eq!(
            kind(FaultClass::InvalidInput, None),
            RefusalKind::OperatorFix
        );
        for class in [
            FaultClass::NotFound,
            FaultClass::Conflict,
            FaultClass::Locked,
            FaultClass::AlreadyAttached,
            FaultClass::Unavailable,
            FaultClass::Malformed,
            FaultClass::Rejected,
        ] {
            assert_eq!(kind(class, Some(500)), RefusalKind::Failed, "{class}");
        }
        assert!(MachineError::from(fault(FaultClass::NotFound, Some(404), None)).is_not_found());
        assert!(!MachineError::from(fault(FaultClass::Rejected, Some(404), None)).is_not_found());
    }
}
