//! Cloud failures in neutral words.
//!
//! The cloud crate knows what each cloud's error answers mean; everything above it (the
//! partner, the one-cloud providers) acts on a [`FaultClass`] instead of reading codes or
//! messages. A [`CloudFault`] carries the class and, for operators' logs only, the cloud's
//! own status, code and message.

use std::fmt;
use std::time::Duration;

/// What kind of failure a cloud reported, by what the caller can do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultClass {
    /// The resource does not exist.
    NotFound,
    /// The cloud asked to wait before the next request.
    RateLimited,
    /// The plan or location has no capacity now; another plan or location may work.
    NoCapacity,
    /// The request clashes with the cloud's state for good (a name already taken).
    Conflict,
    /// The resource is busy with another action, or changed during the request; the same
    /// request may succeed shortly.
    Locked,
    /// An address or volume is still attached to another instance.
    AlreadyAttached,
    /// The cloud refused the credentials (401, 403).
    Unauthorized,
    /// The request did not complete, the cloud failed (5xx), or its actions outlasted the
    /// deadline; the same request may succeed later.
    Unavailable,
    /// The client refused to send the request (bad base URL, user data too large).
    InvalidInput,
    /// The answer was not what the API describes.
    Malformed,
    /// Any other refusal or failed action.
    Rejected,
}

impl FaultClass {
    /// True when the same request may succeed later without any change.
    pub fn retryable(self) -> bool {
        match self {
            FaultClass::RateLimited | FaultClass::Locked | FaultClass::Unavailable => true,
            FaultClass::NotFound
            | FaultClass::NoCapacity
            | FaultClass::Conflict
            | FaultClass::AlreadyAttached
            | FaultClass::Unauthorized
            | FaultClass::InvalidInput
            | FaultClass::Malformed
            | FaultClass::Rejected => false,
        }
    }

    /// A short lower-case name for logs and tests (`already_attached`).
    pub fn as_str(self) -> &'static str {
        match self {
            FaultClass::NotFound => "not_found",
            FaultClass::RateLimited => "rate_limited",
            FaultClass::NoCapacity => "no_capacity",
            FaultClass::Conflict => "conflict",
            FaultClass::Locked => "locked",
            FaultClass::AlreadyAttached => "already_attached",
            FaultClass::Unauthorized => "unauthorized",
            FaultClass::Unavailable => "unavailable",
            FaultClass::InvalidInput => "invalid_input",
            FaultClass::Malformed => "malformed",
            FaultClass::Rejected => "rejected",
        }
    }
}

impl fmt::Display for FaultClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A cloud failure: its class, and the cloud's own words for operators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudFault {
    pub class: FaultClass,
    /// The HTTP status of the answer, when one came.
    pub status: Option<u16>,
    /// The cloud's machine-readable code, when its API has one.
    pub code: Option<String>,
    /// The whole error as the cloud layer describes it (operation, cloud's message).
    pub message: String,
    /// How long the cloud asked to wait, for [`FaultClass::RateLimited`].
    pub retry_after: Option<Duration>,
}

impl fmt::Display for CloudFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.class)
    }
}

impl std::error::Error for CloudFault {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_waiting_classes_are_retryable() {
        let retryable: Vec<FaultClass> = [
            FaultClass::NotFound,
            FaultClass::RateLimited,
            FaultClass::NoCapacity,
            FaultClass::Conflict,
            FaultClass::Locked,
            FaultClass::AlreadyAttached,
            FaultClass::Unauthorized,
            FaultClass::Unavailable,
            FaultClass::InvalidInput,
            FaultClass::Malformed,
            FaultClass::Rejected,
        ]
        .into_iter()
        .filter(|c| c.retryable())
        .collect();
        assert_eq!(
            retryable,
            [
                FaultClass::RateLimited,
                FaultClass::Locked,
                FaultClass::Unavailable
            ]
        );
    }
}
