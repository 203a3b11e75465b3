//! Access assertions: what the zone's access edge adds to every request it lets through to
//! a pool's http endpoint, and what the app behind it checks.
//!
//! An assertion is a JWT signed with ES256 by one of the edge's keys. Its claims name the
//! zone that issued it (`iss`), the person (`sub`, and `name` to show), the endpoint it is
//! for (`aud`: `<project>/<pool>/<endpoint>`), when it was issued and until when it holds
//! (`iat`, `exp`, at most [`MAX_LIFETIME_SECS`] apart) and a unique id (`jti`). The edge
//! sends it in the [`ASSERTION_HEADER`] header, after removing any copy the client sent.
//!
//! - [`keys`]: the edge's signing keys ([`KeyRing`]): the current key signs, a key replaced
//!   by a rotation stays published until its overlap ends, then it is retired; the ring's
//!   public half is the JWKS document served at [`JWKS_PATH`].
//! - [`verify`]: the app's side ([`Verifier`]): one header, a header that names ES256 and a
//!   published `kid` and nothing else, a valid signature, the right issuer and audience, and
//!   times that hold with a small skew. It never takes the algorithm or a key from the
//!   token itself. Keys come from a [`KeySource`] (the JWKS URL, https only), cached and
//!   fetched again on an unknown `kid` at most once per interval.
//! - [`names`]: the edge's host names, `<project>--<pool>[-<endpoint>][-<slot>].<org>.<zone>`,
//!   made for a pool and read back against what an org holds.
//! - `testing` (feature `testing`): the hostile requests every app's gate is tested with.

pub mod claims;
pub mod keys;
pub mod names;
#[cfg(feature = "testing")]
pub mod testing;
pub mod verify;

pub use claims::Assertion;
pub use keys::{KeyRing, SigningKey};
pub use verify::{KeySource, KeysUrl, Refusal, Verifier, VerifierOptions};

/// The header that carries the assertion.
pub const ASSERTION_HEADER: &str = "x-orc-access-assertion";

/// Where the zone publishes its assertion keys, on its web URL.
pub const JWKS_PATH: &str = "/.well-known/orc-access/jwks.json";

/// The longest an assertion may hold, from `iat` to `exp`.
pub const MAX_LIFETIME_SECS: u64 = 300;

/// The algorithm of every assertion.
pub const ALGORITHM: &str = "ES256";
