//! The one trait a provider implements, and the values the runner hands it.
//!
//! A provider is stateless towards the zone: everything it must remember lives in its
//! clouds (labels, tags) or in the zone's store. Every method may be called again with the
//! same node id after a reconnect or a failover, and must then answer as if called once:
//! deploy finds the instance it already made, destroy of an absent node succeeds.

use std::future::Future;

use orc_proto::{
    Catalog, Deploy, DeployProgress, DeployResult, DestroyResult, Inventory, NodeId, ProviderBody,
    ProviderName, Quote, QuoteReply, Replica, ReplicaRole, RequestId, ResourceUri, pb,
};
use tokio::sync::mpsc;

use crate::runner::wire;

/// What a replica says about itself in `Hello`; the runner adds the protocol version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelloInfo {
    pub provider: ProviderName,
    pub resource_uri: ResourceUri,
    pub replica: Replica,
    /// The provider's software version.
    pub version: String,
}

/// A provider process's side of the protocol.
///
/// The runner calls these concurrently: several quotes, deploys and destroys may be in
/// flight at once. It never runs two deploys (or two destroys) of the same node id at the
/// same time: a repeated request joins the one already running.
pub trait Provider: Send + Sync + 'static {
    /// Who this replica is. Called once per connection.
    fn hello(&self) -> HelloInfo;

    /// Classes, operating systems and current availability. Sent after hello and again
    /// every `catalog_interval`.
    fn catalog(&self) -> impl Future<Output = Catalog> + Send;

    /// Prices a node or refuses it. Must be fast and must not call a cloud.
    fn quote(&self, quote: Quote) -> impl Future<Output = QuoteReply> + Send;

    /// Creates the node, or finds the one already created for this node id.
    fn deploy(
        &self,
        deploy: Deploy,
        progress: ProgressSink,
    ) -> impl Future<Output = DeployResult> + Send;

    /// Removes the node. A node the provider does not hold is already destroyed.
    fn destroy(&self, node_id: NodeId) -> impl Future<Output = DestroyResult> + Send;

    /// The complete list of nodes and sites, or `None` when something could not be read
    /// (a partial list would make the zone mark nodes lost).
    fn inventory(&self) -> impl Future<Output = Option<Inventory>> + Send;

    /// The zone made this replica serving or standby. Called on welcome and on every role
    /// change, before any work of the new role arrives.
    fn on_role(&self, role: ReplicaRole) {
        let _ = role;
    }
}

/// Sends progress notes of one deploy to the zone.
///
/// Notes are best effort: when the stream that carried the deploy is gone, they are dropped
/// (the zone re-sends the deploy and gets the result on the new stream).
#[derive(Debug, Clone)]
pub struct ProgressSink {
    request_id: RequestId,
    node_id: NodeId,
    outbound: Option<mpsc::Sender<pb::ProviderMessage>>,
}

impl ProgressSink {
    pub(crate) fn new(
        request_id: RequestId,
        node_id: NodeId,
        outbound: mpsc::Sender<pb::ProviderMessage>,
    ) -> Self {
        ProgressSink {
            request_id,
            node_id,
            outbound: Some(outbound),
        }
    }

    /// A sink that drops every note, for calling a provider directly in tests.
    pub fn discard(node_id: NodeId) -> Self {
        ProgressSink {
            request_id: RequestId::UNSOLICITED,
            node_id,
            outbound: None,
        }
    }

    /// The node this deploy is for.
    pub fn node_id(&self) -> &NodeId {
        &self.node_id
    }

    /// Sends a note in tenant words ("creating the machine").
    pub async fn note(&self, words: impl Into<String>) {
        self.send(words.into(), None).await;
    }

    /// Says which machine the node is (its SMBIOS product UUID, read over SSH), so that the
    /// zone binds the node's join token to it; send it before delivering the token.
    pub async fn identified(&self, words: impl Into<String>, product_uuid: &str) {
        self.send(words.into(), Some(product_uuid.to_string()))
            .await;
    }

    async fn send(&self, words: String, product_uuid: Option<String>) {
        let Some(outbound) = &self.outbound else {
            return;
        };
        let body = ProviderBody::DeployProgress(DeployProgress {
            node_id: self.node_id.clone(),
            words,
            product_uuid,
        });
        if outbound.send(wire(self.request_id, body)).await.is_err() {
            tracing::debug!(node = %self.node_id, "deploy progress dropped: stream is gone");
        }
    }
}
