//! The seam between the reconcilers and whatever carries out a node's work.
//!
//! A [`NodeBackend`] answers quotes, deploys and destroys for the providers it serves. Two
//! implement it: the hub (`crate::hub::Hub`, remote providers over their gRPC stream) and the
//! built-in `core` provider ([`Apps`] of `orc-zone-apps`, app binaries run as child processes
//! on the zone host; its impl is here, so the supervisor never depends on the controller).
//! The reconcilers never know which one they talk to: [`Backends`] routes the zone's own
//! `sys/sys/core` ([`Provider::is_core`](crate::model::Provider::is_core); a namesake in
//! another project is not it) to the core backend and every other provider to the remote
//! one.
//!
//! Invariants every backend keeps:
//! - requests are idempotent by node id: a deploy of a node that already exists returns the
//!   existing instance, and a destroy of a node the backend does not hold succeeds;
//! - a backend never retries on its own behalf: a request that cannot be carried out returns a
//!   [`BackendError`] (the zone could not ask) or a refusal inside the reply (the provider
//!   said no), and the reconcilers decide when to ask again.
//!
//! [`NodeBackend`] uses `impl Future` returns (not dyn-compatible); [`Backends`] erases the
//! type through the private `ErasedBackend` trait so the reconcilers hold one concrete type.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use orc_zone_apps::Apps;

use crate::model::{NodeId, Provider, Timestamp};

/// Why a backend could not get an answer for a request. A refusal by the provider is not an
/// error: it comes back inside the reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// No replica of the provider is connected (or, for `core`, the supervisor is down).
    #[error("provider {provider} has no connected replica")]
    NoReplica { provider: String },
    /// The replica's stream ended before it answered and no other replica took the request
    /// over within the request's timeout.
    #[error("provider {provider} disconnected before answering")]
    Disconnected { provider: String },
    /// No answer within the request's timeout.
    #[error("provider {provider} did not answer {request} within {timeout_ms} ms")]
    Timeout {
        provider: String,
        /// `quote`, `deploy` or `destroy`.
        request: &'static str,
        timeout_ms: u64,
    },
    /// The backend answered something that does not fit the request (e.g. a reply for
    /// another node).
    #[error("provider {provider} broke the protocol: {detail}")]
    Protocol { provider: String, detail: String },
    /// The backend is shutting down.
    #[error("the backend is shutting down")]
    ShuttingDown,
    /// The zone could not prepare the node's bootstrap (its join token); the request was
    /// not sent.
    #[error("the node's bootstrap could not be prepared: {detail}")]
    Bootstrap { detail: String },
}

impl BackendError {
    /// Whether asking again later may succeed. Every kind may: none of them says anything
    /// about the node itself, only about the path to its provider.
    pub fn is_retryable(&self) -> bool {
        match self {
            BackendError::NoReplica { .. }
            | BackendError::Disconnected { .. }
            | BackendError::Timeout { .. }
            | BackendError::Protocol { .. }
            | BackendError::ShuttingDown
            | BackendError::Bootstrap { .. } => true,
        }
    }
}

/// Where the reconcilers send a node's work: the hub (remote providers over gRPC) or the
/// built-in `core` provider (apps).
///
/// The returned futures may borrow `self` but not `provider`: clone what they need from it
/// (an implementation written as `async move { … }` after `let provider = provider.clone();`
/// fits).
pub trait NodeBackend: Send + Sync + 'static {
    /// Asks what a node would cost, and where.
    fn quote(
        &self,
        provider: &Provider,
        quote: orc_proto::Quote,
    ) -> impl Future<Output = Result<orc_proto::QuoteReply, BackendError>> + Send;

    /// Creates the node (idempotent by node id).
    fn deploy(
        &self,
        provider: &Provider,
        deploy: orc_proto::Deploy,
    ) -> impl Future<Output = Result<orc_proto::DeployResult, BackendError>> + Send;

    /// Removes the node (idempotent: an absent node is destroyed).
    fn destroy(
        &self,
        provider: &Provider,
        node: NodeId,
    ) -> impl Future<Output = Result<orc_proto::DestroyResult, BackendError>> + Send;

    /// When the provider's configuration last changed (a new hello, or a catalog that differs
    /// from the previous one), as the backend saw it. Nodes parked with `operator_fix` are
    /// asked again only once this is later than their parking. `None`: the backend does not
    /// track configuration, and such nodes are asked again at the reconcilers' re-check
    /// interval.
    fn config_changed_at(&self, provider: &Provider) -> Option<Timestamp> {
        let _ = provider;
        None
    }

    /// Whether `provider`'s sites need a gateway node each (its catalog says so). `false`
    /// while its catalog is unknown.
    fn site_gateways(&self, provider: &Provider) -> bool {
        let _ = provider;
        false
    }
}

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Dyn-compatible twin of [`NodeBackend`], implemented for every backend.
trait ErasedBackend: Send + Sync + 'static {
    fn quote<'a>(
        &'a self,
        provider: &'a Provider,
        quote: orc_proto::Quote,
    ) -> BoxFuture<'a, Result<orc_proto::QuoteReply, BackendError>>;
    fn deploy<'a>(
        &'a self,
        provider: &'a Provider,
        deploy: orc_proto::Deploy,
    ) -> BoxFuture<'a, Result<orc_proto::DeployResult, BackendError>>;
    fn destroy<'a>(
        &'a self,
        provider: &'a Provider,
        node: NodeId,
    ) -> BoxFuture<'a, Result<orc_proto::DestroyResult, BackendError>>;
    fn config_changed_at(&self, provider: &Provider) -> Option<Timestamp>;
    fn site_gateways(&self, provider: &Provider) -> bool;
}

impl<B: NodeBackend> ErasedBackend for B {
    fn quote<'a>(
        &'a self,
        provider: &'a Provider,
        quote: orc_proto::Quote,
    ) -> BoxFuture<'a, Result<orc_proto::QuoteReply, BackendError>> {
        Box::pin(NodeBackend::quote(self, provider, quote))
    }
    fn deploy<'a>(
        &'a self,
        provider: &'a Provider,
        deploy: orc_proto::Deploy,
    ) -> BoxFuture<'a, Result<orc_proto::DeployResult, BackendError>> {
        Box::pin(NodeBackend::deploy(self, provider, deploy))
    }
    fn destroy<'a>(
        &'a self,
        provider: &'a Provider,
        node: NodeId,
    ) -> BoxFuture<'a, Result<orc_proto::DestroyResult, BackendError>> {
        Box::pin(NodeBackend::destroy(self, provider, node))
    }
    fn config_changed_at(&self, provider: &Provider) -> Option<Timestamp> {
        NodeBackend::config_changed_at(self, provider)
    }
    fn site_gateways(&self, provider: &Provider) -> bool {
        NodeBackend::site_gateways(self, provider)
    }
}

/// The backends of a zone: `core` for the built-in provider, `remote` for every other.
/// Cheap to clone.
#[derive(Clone)]
pub struct Backends {
    remote: Arc<dyn ErasedBackend>,
    core: Arc<dyn ErasedBackend>,
}

impl fmt::Debug for Backends {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Backends").finish_non_exhaustive()
    }
}

impl Backends {
    /// Routes the zone's own `core` provider to `core` and every other provider to `remote`.
    pub fn new(remote: impl NodeBackend, core: impl NodeBackend) -> Self {
        Backends {
            remote: Arc::new(remote),
            core: Arc::new(core),
        }
    }

    /// One backend for every provider (tests and benchmarks).
    pub fn single<B: NodeBackend>(backend: Arc<B>) -> Self {
        Backends {
            remote: backend.clone(),
            core: backend,
        }
    }

    fn route(&self, provider: &Provider) -> &dyn ErasedBackend {
        if provider.is_core() {
            &*self.core
        } else {
            &*self.remote
        }
    }
}

impl NodeBackend for Backends {
    fn quote(
        &self,
        provider: &Provider,
        quote: orc_proto::Quote,
    ) -> impl Future<Output = Result<orc_proto::QuoteReply, BackendError>> + Send {
        let provider = provider.clone();
        async move { self.route(&provider).quote(&provider, quote).await }
    }

    fn deploy(
        &self,
        provider: &Provider,
        deploy: orc_proto::Deploy,
    ) -> impl Future<Output = Result<orc_proto::DeployResult, BackendError>> + Send {
        let provider = provider.clone();
        async move { self.route(&provider).deploy(&provider, deploy).await }
    }

    fn destroy(
        &self,
        provider: &Provider,
        node: NodeId,
    ) -> impl Future<Output = Result<orc_proto::DestroyResult, BackendError>> + Send {
        let provider = provider.clone();
        async move { self.route(&provider).destroy(&provider, node).await }
    }

    fn config_changed_at(&self, provider: &Provider) -> Option<Timestamp> {
        self.route(provider).config_changed_at(provider)
    }

    fn site_gateways(&self, provider: &Provider) -> bool {
        self.route(provider).site_gateways(provider)
    }
}

impl<B: NodeBackend> NodeBackend for Arc<B> {
    fn quote(
        &self,
        provider: &Provider,
        quote: orc_proto::Quote,
    ) -> impl Future<Output = Result<orc_proto::QuoteReply, BackendError>> + Send {
        (**self).quote(provider, quote)
    }

    fn deploy(
        &self,
        provider: &Provider,
        deploy: orc_proto::Deploy,
    ) -> impl Future<Output = Result<orc_proto::DeployResult, BackendError>> + Send {
        (**self).deploy(provider, deploy)
    }

    fn destroy(
        &self,
        provider: &Provider,
        node: NodeId,
    ) -> impl Future<Output = Result<orc_proto::DestroyResult, BackendError>> + Send {
        (**self).destroy(provider, node)
    }

    fn config_changed_at(&self, provider: &Provider) -> Option<Timestamp> {
        (**self).config_changed_at(provider)
    }

    fn site_gateways(&self, provider: &Provider) -> bool {
        (**self).site_gateways(provider)
    }
}

/// The `core` provider: every request is answered by the app supervisor on this host.
impl NodeBackend for Apps {
    async fn quote(
        &self,
        _provider: &Provider,
        quote: orc_proto::Quote,
    ) -> Result<orc_proto::QuoteReply, BackendError> {
        Ok(self.quote_slot(&quote).await)
    }

    async fn deploy(
        &self,
        _provider: &Provider,
        deploy: orc_proto::Deploy,
    ) -> Result<orc_proto::DeployResult, BackendError> {
        if self.is_shutting_down() {
            return Err(BackendError::ShuttingDown);
        }
        Ok(self.deploy_slot(&deploy).await)
    }

    async fn destroy(
        &self,
        _provider: &Provider,
        node: NodeId,
    ) -> Result<orc_proto::DestroyResult, BackendError> {
        Ok(self.destroy_slot(&node).await)
    }
}
