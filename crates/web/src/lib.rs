//! The zone's web layer, on the edge's HTTPS listener:
//!
//! - [`edge`]: the access edge, the reverse proxy in front of pools' http endpoints, with
//!   sign-in, sessions and the access assertions it signs;
//! - [`console`]: the web console on the edge's own host, a client of the zone's API in
//!   process ([`console::ZoneApi`]), so a page can do no more than `orc` could;
//! - [`access_keys`]: the edge's signing keys and the JWKS that publishes them;
//! - [`passwords`]: users' password hashes;
//! - [`visitor`]: who a request comes from, and whether a change came from the zone's own
//!   pages;
//! - [`store`]: [`EdgeStore`](store::EdgeStore), what the edge keeps in the zone's store,
//!   as the operations it needs.
//!
//! Must never depend on the store, the API's handlers, the hub or the reconcilers: it
//! programs against the model, the API's types, and the two seams above, which the zone
//! implements (`orc-zone`'s `web` module). See `docs/architecture.md`.

pub mod access_keys;
pub mod console;
pub mod edge;
pub mod passwords;
pub mod store;
pub mod visitor;

use orc_zone_model::{model, pricing, registry};
