//! Errors of the store: each names the kind of object and the id, field or column at fault,
//! or the store operation that met a database failure.
//!
//! Database errors are classified once, here: unique violations become [`StoreError::Unique`]
//! naming the field, foreign-key violations [`StoreError::Reference`]; everything else becomes
//! [`StoreError::Database`] naming its operation (through [`OperationExt::op`] or
//! [`classify_write`]; there is deliberately no `From<sqlx::Error>`, so no call site can
//! forget to say what it was doing) and keeps the driver's error as its source. No variant
//! carries a secret or a connection password.

use std::fmt;

use sqlx::error::ErrorKind;

/// The kinds of object the store keeps, as named in errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Org,
    Project,
    User,
    Token,
    JoinToken,
    Membership,
    Provider,
    Pool,
    Node,
    Event,
    UsageLine,
    Secret,
    Certificate,
    AcmeAccount,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Org => "org",
            Kind::Project => "project",
            Kind::User => "user",
            Kind::Token => "API token",
            Kind::JoinToken => "join token",
            Kind::Membership => "membership",
            Kind::Provider => "provider",
            Kind::Pool => "pool",
            Kind::Node => "node",
            Kind::Event => "event",
            Kind::UsageLine => "usage line",
            Kind::Secret => "secret",
            Kind::Certificate => "certificate",
            Kind::AcmeAccount => "ACME account",
        })
    }
}

/// The error for a `kind` object with `id` that does not exist.
pub(crate) fn not_found(kind: Kind, id: impl ToString) -> StoreError {
    StoreError::NotFound {
        kind,
        id: id.to_string(),
    }
}

/// What went wrong in a store operation.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No object of this kind with this id (or name path).
    #[error("{kind} {id} not found")]
    NotFound { kind: Kind, id: String },
    /// A compare-and-set write found the object changed since it was read.
    #[error("{kind} {id} was changed concurrently (expected {expected}, found {found})")]
    Conflict {
        kind: Kind,
        id: String,
        expected: String,
        found: String,
    },
    /// A value that must be unique is already used.
    #[error("{kind} {field} {value:?} is already used{scope}")]
    Unique {
        kind: Kind,
        field: &'static str,
        value: String,
        /// Where it must be unique (" in project p-…"), or empty for the whole zone.
        scope: String,
    },
    /// The object refers to another that does not exist (or to one of another org).
    #[error("{kind} refers to a missing {target}")]
    Reference {
        kind: Kind,
        /// What it refers to, with ids (`org o-…`, `project p-… or provider pv-…`).
        target: String,
    },
    /// The request cannot be carried out as asked (the message says why).
    #[error("{kind} {id}: {reason}")]
    Invalid {
        kind: Kind,
        id: String,
        reason: String,
    },
    /// A stored value does not parse; the database was changed outside the store.
    #[error("stored value in {column} is invalid: {reason}")]
    Corrupt { column: String, reason: String },
    /// The database could not be reached or opened.
    #[error("cannot connect to the store at {url}")]
    Connect {
        /// The URL with any password removed.
        url: String,
        #[source]
        source: sqlx::Error,
    },
    /// Migrating the schema failed.
    #[error("migrating the store schema failed")]
    Migrate(#[source] sqlx::migrate::MigrateError),
    /// A sensitive value was to be written or read before the store was given its sealing
    /// key ([`Store::set_sealing_key`](crate::Store::set_sealing_key)).
    #[error("the store has no sealing key, so it cannot {operation} sensitive params")]
    NoSealingKey { operation: &'static str },
    /// The store's sealed values were sealed with another key than the one given.
    #[error(
        "the store's secrets were sealed with key {sealed_with}, but the sealing key given is \
         {given}; start the zone with the key file that sealed them"
    )]
    WrongSealingKey { sealed_with: String, given: String },
    /// A sealed value does not open.
    #[error(transparent)]
    Seal(#[from] crate::seal::SealError),
    /// Any other database error, with the operation that met it (`create pool`,
    /// `read due nodes`).
    #[error("{operation}: the store's database call failed")]
    Database {
        operation: &'static str,
        #[source]
        source: sqlx::Error,
    },
}

impl StoreError {
    /// Whether trying again later may succeed without anything else changing.
    pub fn is_retryable(&self) -> bool {
        match self {
            StoreError::Connect { .. } | StoreError::Database { .. } => true,
            StoreError::NotFound { .. }
            | StoreError::Conflict { .. }
            | StoreError::Unique { .. }
            | StoreError::Reference { .. }
            | StoreError::Invalid { .. }
            | StoreError::Corrupt { .. }
            | StoreError::NoSealingKey { .. }
            | StoreError::WrongSealingKey { .. }
            | StoreError::Seal(_)
            | StoreError::Migrate(_) => false,
        }
    }
}

/// Names the store operation a database call belongs to: `query.await.op("create pool")?`.
/// The one way a `sqlx::Error` becomes a [`StoreError`] outside [`classify_write`] and
/// connecting, so every database error says which operation met it.
pub(crate) trait OperationExt<T> {
    /// The result, with a database error wrapped as [`StoreError::Database`] naming
    /// `operation`.
    fn op(self, operation: &'static str) -> Result<T, StoreError>;
}

impl<T> OperationExt<T> for Result<T, sqlx::Error> {
    fn op(self, operation: &'static str) -> Result<T, StoreError> {
        self.map_err(|source| StoreError::Database { operation, source })
    }
}

/// A unique constraint the schema declares, and how errors name it.
#[derive(Debug)]
pub(crate) struct UniqueRule {
    /// Constraint or index name, as PostgreSQL reports it.
    pub postgres: &'static str,
    /// Text SQLite's message contains for it (`table.column` or the index name).
    pub sqlite: &'static str,
    pub kind: Kind,
    pub field: &'static str,
}

const fn rule(
    postgres: &'static str,
    sqlite: &'static str,
    kind: Kind,
    field: &'static str,
) -> UniqueRule {
    UniqueRule {
        postgres,
        sqlite,
        kind,
        field,
    }
}

/// Every unique constraint that user input can hit.
const UNIQUE_RULES: &[UniqueRule] = &[
    rule("orgs_name_unique", "orgs.name", Kind::Org, "name"),
    rule(
        "projects_name_unique",
        "projects.name",
        Kind::Project,
        "name",
    ),
    rule("users_name_unique", "users.name", Kind::User, "name"),
    rule(
        "api_tokens_secret_unique",
        "api_tokens.secret_sha256",
        Kind::Token,
        "secret",
    ),
    rule(
        "memberships_scope_unique",
        "memberships_scope_unique",
        Kind::Membership,
        "scope",
    ),
    rule(
        "providers_name_unique",
        "providers.name",
        Kind::Provider,
        "name",
    ),
    rule(
        "providers_sys_name_unique",
        "providers.sys_name",
        Kind::Provider,
        "name",
    ),
    rule(
        "providers_resource_uri_unique",
        "providers.resource_uri",
        Kind::Provider,
        "resource URI",
    ),
    rule("pools_name_unique", "pools.name", Kind::Pool, "name"),
    rule("nodes_live_slot_unique", "nodes.slot", Kind::Node, "slot"),
];

/// The unique rule a database error violated, if it is a unique violation we know.
pub(crate) fn violated_unique(err: &sqlx::Error) -> Option<&'static UniqueRule> {
    let db = err.as_database_error()?;
    if db.kind() != ErrorKind::UniqueViolation {
        return None;
    }
    let constraint = db.constraint().unwrap_or("");
    let message = db.message();
    UNIQUE_RULES
        .iter()
        .find(|rule| constraint == rule.postgres || message.contains(rule.sqlite))
}

/// Whether a database error is a foreign-key violation.
pub(crate) fn is_foreign_key_violation(err: &sqlx::Error) -> bool {
    err.as_database_error()
        .is_some_and(|db| db.kind() == ErrorKind::ForeignKeyViolation)
}

/// Classifies the error of an insert or update of a `kind` object by `operation`: a known
/// unique violation names its field (`value_of(field)` gives the offending value and where it
/// must be unique), a foreign-key violation names `target`, anything else stays a database
/// error naming `operation`.
pub(crate) fn classify_write(
    err: sqlx::Error,
    operation: &'static str,
    kind: Kind,
    value_of: impl Fn(&'static str) -> (String, String),
    target: impl FnOnce() -> String,
) -> StoreError {
    if let Some(rule) = violated_unique(&err) {
        let (value, scope) = value_of(rule.field);
        return StoreError::Unique {
            kind: rule.kind,
            field: rule.field,
            value,
            scope,
        };
    }
    if is_foreign_key_violation(&err) {
        return StoreError::Reference {
            kind,
            target: target(),
        };
    }
    StoreError::Database {
        operation,
        source: err,
    }
}

/// Removes the password from a database URL, for messages.
pub(crate) fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (authority, tail) = match rest.find(['/', '?']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{scheme}://{user}@{host}{tail}")
        }
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_password() {
        assert_eq!(
            redact_url("postgres://orc:s3cret@127.0.0.1:5432/zone?sslmode=disable"),
            "postgres://orc@127.0.0.1:5432/zone?sslmode=disable"
        );
        assert_eq!(
            redact_url("sqlite:///var/lib/orc/zone.db"),
            "sqlite:///var/lib/orc/zone.db"
        );
        assert_eq!(redact_url("postgres://u@h/db"), "postgres://u@h/db");
    }
}
