//! Why the `core` provider cannot start, and why a slot cannot be launched (with the refusal
//! kind the zone acts on).

use std::path::PathBuf;

use orc_zone_model::{NodeId, PoolId};
use orc_zone_store::StoreError;

use crate::blobs::BlobError;
use crate::config::ResolveError;
use crate::params::ParamError;
use crate::slot::SpawnError;

/// Why the `core` provider could not start.
#[derive(Debug, thiserror::Error)]
pub enum AppsError {
    /// The store refused a read or write the start needs.
    #[error("core provider: {what}")]
    Store {
        what: &'static str,
        #[source]
        source: StoreError,
    },
    /// The registry's blob dir cannot be created.
    #[error("core provider: {0}")]
    Blobs(#[from] BlobError),
    /// The apps directory under the data dir cannot be created.
    #[error("core provider: cannot create the apps directory {path}")]
    Dir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Why a slot of a pool cannot be launched.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The pool names no app.
    #[error("pool {pool} names no app to run")]
    NoApp { pool: PoolId },
    /// Only pools of org `sys` may run apps for now.
    #[error("pool {pool} is not in org sys; only org sys can run apps on this zone yet")]
    NotSysOrg { pool: PoolId },
    /// The package cannot be resolved to a binary.
    #[error("pool {pool}: {source}")]
    Resolve {
        pool: PoolId,
        #[source]
        source: ResolveError,
    },
    /// Some params cannot be handed to the app (each error names its param).
    #[error("pool {pool}: {}", join_errors(.errors))]
    Params {
        pool: PoolId,
        errors: Vec<ParamError>,
    },
    /// The node is not one of a `core` pool.
    #[error("node {node} is not a node of a pool on provider core")]
    NotCore { node: NodeId },
    /// The store could not be read.
    #[error("reading the store for {what}")]
    Store {
        what: String,
        #[source]
        source: StoreError,
    },
    /// The process could not be started.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    /// The zone is stopping its apps.
    #[error("the zone is stopping its apps")]
    ShuttingDown,
    /// No loopback port was free for one of the pool's http endpoints.
    #[error("pool {pool}: no loopback port for http endpoint {endpoint}")]
    NoPort {
        pool: PoolId,
        endpoint: String,
        #[source]
        source: std::io::Error,
    },
}

pub(crate) fn join_errors(errors: &[ParamError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl LaunchError {
    /// The refusal kind the zone acts on for this error.
    pub fn refusal_kind(&self) -> orc_proto::RefusalKind {
        use orc_proto::RefusalKind as K;
        match self {
            LaunchError::NoApp { .. }
            | LaunchError::NotSysOrg { .. }
            | LaunchError::Resolve { .. }
            | LaunchError::Params { .. } => K::OperatorFix,
            LaunchError::NotCore { .. } | LaunchError::Spawn(_) => K::Failed,
            LaunchError::ShuttingDown | LaunchError::NoPort { .. } => K::Transient,
            LaunchError::Store { source, .. } => {
                if source.is_retryable() {
                    K::Transient
                } else {
                    K::Failed
                }
            }
        }
    }

    /// The error with its causes, one sentence (no secret is ever part of it).
    pub fn words(&self) -> String {
        let mut words = self.to_string();
        let mut source = std::error::Error::source(self);
        while let Some(cause) = source {
            words.push_str(": ");
            words.push_str(&cause.to_string());
            source = cause.source();
        }
        words
    }
}
