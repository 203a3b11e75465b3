//! The `core` provider's answers to the zone's node backend: quote, deploy and destroy of a
//! slot.

use std::net::{IpAddr, Ipv4Addr};
use std::time::SystemTime;

use orc_zone_model::{CORE_LOCAL_SITE, NodeId};
use orc_zone_store::{Kind, StoreError};

use crate::error::LaunchError;
use crate::{Apps, OFFER_VALIDITY};

impl Apps {
    /// Answers a quote for a node of a `core` pool: an unpriced offer at site `local`, or an
    /// `operator_fix` refusal naming what is wrong with the pool's app (never a value).
    pub async fn quote_slot(&self, quote: &orc_proto::Quote) -> orc_proto::QuoteReply {
        let checked = async {
            let node_id = parse_node(&quote.node_id)?;
            let (pool, node) = self.core_node(&node_id).await?;
            self.launch_for(&pool, &node, false).await.map(|_| pool)
        };
        match checked.await {
            Ok(pool) => {
                let package = pool.spec.app.as_ref().map_or("app", |a| a.package.as_str());
                match orc_proto::QuoteToken::new(quote.node_id.as_str()) {
                    Ok(token) => orc_proto::QuoteReply::Offer(orc_proto::Offer {
                        site: site(),
                        price: None,
                        words: format!("{package} · {CORE_LOCAL_SITE}"),
                        quote_token: token,
                        expires: SystemTime::now() + OFFER_VALIDITY,
                    }),
                    Err(_) => refusal_reply(orc_proto::RefusalKind::Failed, "empty node id"),
                }
            }
            Err(error) => refusal_reply(error.refusal_kind(), &error.words()),
        }
    }

    /// Whether the supervisor is stopping its apps: no slot starts any more.
    pub fn is_shutting_down(&self) -> bool {
        *self.inner.shutdown.borrow()
    }

    /// Starts the node's slot, or returns it if it already runs (idempotent by node id).
    pub async fn deploy_slot(&self, deploy: &orc_proto::Deploy) -> orc_proto::DeployResult {
        match self.start_node(&deploy.node_id).await {
            Ok(node_id) => orc_proto::DeployResult::Deployed(deployed(&deploy.node_id, &node_id)),
            Err(error) => {
                tracing::warn!(node = %deploy.node_id, error = %error.words(), "core deploy refused");
                orc_proto::DeployResult::Refused(orc_proto::Refusal::new(
                    error.refusal_kind(),
                    error.words(),
                ))
            }
        }
    }

    /// Stops the node's slot; a node without a slot is destroyed already.
    pub async fn destroy_slot(&self, node: &NodeId) -> orc_proto::DestroyResult {
        let handle = self.inner.slots.lock().await.remove(node);
        if let Some(handle) = handle {
            handle.stop().await;
            self.release_http_ports(node);
            tracing::info!(node = %node, "core slot stopped");
        }
        orc_proto::DestroyResult::Destroyed
    }
}

pub(crate) fn parse_node(node: &NodeId) -> Result<NodeId, LaunchError> {
    NodeId::parse_minted(node.as_str()).map_err(|e| LaunchError::Store {
        what: format!("node {}", node.as_str()),
        source: StoreError::Invalid {
            kind: Kind::Node,
            id: node.as_str().to_string(),
            reason: e.to_string(),
        },
    })
}

pub(crate) fn site() -> orc_proto::SiteName {
    orc_proto::SiteName::new(CORE_LOCAL_SITE).expect("the local site name is not empty")
}

pub(crate) fn refusal_reply(kind: orc_proto::RefusalKind, words: &str) -> orc_proto::QuoteReply {
    orc_proto::QuoteReply::Refused(orc_proto::Refusal::new(kind, words))
}

pub(crate) fn deployed(node: &NodeId, node_id: &NodeId) -> orc_proto::Deployed {
    orc_proto::Deployed {
        node_id: node.clone(),
        site: site(),
        addresses: vec![IpAddr::V4(Ipv4Addr::LOCALHOST)],
        price: None,
        instance_ref: orc_proto::InstanceRef::new(format!("core/{node_id}"))
            .expect("a core instance ref is never empty"),
        placed: None,
    }
}
