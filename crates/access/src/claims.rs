//! The claims of an access assertion.

use serde::{Deserialize, Serialize};

/// What an assertion says. Every field is required, and no other may appear: an assertion
/// with one missing or one more does not parse.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Assertion {
    /// The zone that issued it: its web URL.
    pub iss: String,
    /// The person: `user:<name>` for a user, `token:<id>` for an API token.
    pub sub: String,
    /// The person's name to show.
    pub name: String,
    /// The org of the endpoint's project. The audience names the project within its org,
    /// so an app checks both.
    pub org: String,
    /// The endpoint it is for: `<project>/<pool>/<endpoint>` (`sys/partner/admin`).
    pub aud: String,
    /// Issued at, seconds since the Unix epoch.
    pub iat: u64,
    /// Not valid at or after, seconds since the Unix epoch.
    pub exp: u64,
    /// A unique id.
    pub jti: String,
}
