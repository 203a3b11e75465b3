//! The adapter's words for tenants: generic, never naming a cloud, plan or city.

use orc_proto::RefusalKind;

/// Progress note when a deploy starts.
pub const CREATING: &str = "creating the machine";
/// A deploy failed for a reason the tenant cannot act on.
pub const COULD_NOT_CREATE: &str = "the machine could not be created";

/// Words of a refused quote.
pub fn quote(kind: RefusalKind) -> &'static str {
    match kind {
        RefusalKind::NoCapacity => "no machine of this kind can be placed here right now",
        RefusalKind::Counting => "the provider is still reading what it holds",
        RefusalKind::Transient => "the provider is busy; the request will be tried again",
        RefusalKind::OperatorFix => "this request needs a change to the provider's configuration",
        RefusalKind::Failed => "the request could not be priced",
        RefusalKind::Unplaceable => "nothing offered here matches this request",
    }
}

/// Words of a refused deploy.
pub fn deploy(kind: RefusalKind) -> &'static str {
    match kind {
        RefusalKind::NoCapacity => "no machine of this kind can be placed here right now",
        RefusalKind::Counting => "the provider is still reading what it holds",
        RefusalKind::Transient => "the provider is busy; the machine will be created later",
        RefusalKind::OperatorFix => "the machine needs a change to the provider's configuration",
        RefusalKind::Failed => COULD_NOT_CREATE,
        RefusalKind::Unplaceable => "nothing offered here matches this machine",
    }
}

/// Words of a refused destroy.
pub fn destroy(kind: RefusalKind) -> &'static str {
    match kind {
        RefusalKind::NoCapacity | RefusalKind::Counting | RefusalKind::Transient => {
            "the provider is busy; the machine will be removed later"
        }
        RefusalKind::OperatorFix => {
            "removing the machine needs a change to the provider's configuration"
        }
        RefusalKind::Failed | RefusalKind::Unplaceable => "the machine could not be removed",
    }
}
