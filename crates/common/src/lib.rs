//! Pure vocabulary shared by every orc crate: money, node shapes, typed identifiers, time
//! and its clock, secrets, and cloud failures in neutral words; with the feature `html`, the
//! one frame of the server-rendered pages (module `html`).
//!
//! Nothing here does I/O or depends on an async runtime or a web framework, so every crate
//! may use it and its tests run in milliseconds.

pub mod backoff;
pub mod fault;
#[cfg(feature = "html")]
pub mod html;
pub mod ids;
pub mod kinds;
pub mod money;
pub mod secret;
pub mod shape;
pub mod text;
pub mod time;

pub use backoff::Backoff;
pub use fault::{CloudFault, FaultClass};
pub use ids::{
    ClassId, EmptyId, InstanceRef, MalformedId, NodeId, OsId, PoolPath, ProviderName, QuoteToken,
    ResourceUri, SiteName,
};
pub use kinds::{Purpose, RefusalKind, ReplicaRole, UnknownRefusalKind, Whereabouts, ZoneAction};
pub use money::{Currency, Money, MoneyError, Period};
pub use secret::Secret;
pub use shape::{Architecture, Shape};
pub use time::{Clock, ManualClock, SharedClock, SystemClock, Timestamp};
