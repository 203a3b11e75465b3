//! Byte streams to replicas on nodes, relayed by their agents over the agent stream: how the
//! access edge, on the zone's host, reaches a private service's replica, which is on the
//! project's mesh and nowhere else. The agent connects to the replica's address on its own
//! node and relays; the zone gets one end of an in-memory pipe.

use std::time::Duration;

use orc_proto::agent_pb::{self, zone_message};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _, DuplexStream};
use tokio::sync::mpsc;

use super::{AgentHub, zone_message as wrap};
use crate::model::NodeId;

/// How long the agent may take to connect.
const OPEN_TIMEOUT: Duration = Duration::from_secs(10);
/// The pipe's buffer, each way.
const PIPE: usize = 64 * 1024;
/// The most bytes one message carries.
const CHUNK: usize = 32 * 1024;

/// What the agent says of a tunnel.
#[derive(Debug)]
pub(super) enum TunnelEvent {
    /// Connected (the first), or bytes from the replica.
    Data(Vec<u8>),
    /// The replica's side ended: cleanly (`None`) or with why.
    End(Option<String>),
}

/// Why a tunnel did not open.
#[derive(Debug, thiserror::Error)]
pub enum TunnelError {
    #[error("node {0} has no agent attached")]
    NotConnected(NodeId),
    #[error("the agent of node {node} could not connect to {address}: {why}")]
    Refused {
        node: NodeId,
        address: String,
        why: String,
    },
    #[error("the agent of node {node} did not connect to {address} within {} s", OPEN_TIMEOUT.as_secs())]
    Timeout { node: NodeId, address: String },
}

impl AgentHub {
    /// A byte stream to `address` (a replica's `10.96.3.2:8080`) through the agent of
    /// `node`, once the agent connected.
    pub async fn tunnel(&self, node: &NodeId, address: &str) -> Result<DuplexStream, TunnelError> {
        let id = self.next_id();
        let (events, mut from_agent) = mpsc::channel::<TunnelEvent>(64);
        let outbound = {
            let mut state = self.state();
            let attached = state
                .attached
                .get_mut(node)
                .ok_or_else(|| TunnelError::NotConnected(node.clone()))?;
            attached.tunnels.insert(id, events);
            attached.outbound.clone()
        };
        let open = agent_pb::TunnelOpen {
            tunnel_id: id,
            address: address.to_string(),
        };
        let _ = outbound.send(Ok(wrap(zone_message::Body::TunnelOpen(open))));
        let forget = |hub: &AgentHub| {
            if let Some(attached) = hub.state().attached.get_mut(node) {
                attached.tunnels.remove(&id);
            }
        };
        match tokio::time::timeout(OPEN_TIMEOUT, from_agent.recv()).await {
            Ok(Some(TunnelEvent::Data(_))) => {}
            Ok(Some(TunnelEvent::End(why))) => {
                forget(self);
                return Err(TunnelError::Refused {
                    node: node.clone(),
                    address: address.to_string(),
                    why: why.unwrap_or_else(|| "the connection ended at once".into()),
                });
            }
            Ok(None) => {
                return Err(TunnelError::NotConnected(node.clone()));
            }
            Err(_) => {
                forget(self);
                let end = agent_pb::TunnelClose {
                    tunnel_id: id,
                    error: "not connected in time".into(),
                };
                let _ = outbound.send(Ok(wrap(zone_message::Body::TunnelClose(end))));
                return Err(TunnelError::Timeout {
                    node: node.clone(),
                    address: address.to_string(),
                });
            }
        }
        let (ours, theirs) = tokio::io::duplex(PIPE);
        let (mut read, mut write) = tokio::io::split(ours);
        let hub = self.clone();
        let node = node.clone();
        tokio::spawn(async move {
            let up_outbound = outbound.clone();
            // What the zone's side writes goes to the agent.
            let up = async move {
                let mut buf = vec![0u8; CHUNK];
                loop {
                    match read.read(&mut buf).await {
                        Ok(0) | Err(_) => {
                            let end = agent_pb::TunnelClose {
                                tunnel_id: id,
                                error: String::new(),
                            };
                            let _ =
                                up_outbound.send(Ok(wrap(zone_message::Body::TunnelClose(end))));
                            // Keep taking the replica's answer.
                            std::future::pending::<()>().await;
                        }
                        Ok(n) => {
                            let data = agent_pb::TunnelData {
                                tunnel_id: id,
                                data: buf[..n].to_vec(),
                            };
                            if up_outbound
                                .send(Ok(wrap(zone_message::Body::TunnelData(data))))
                                .is_err()
                            {
                                return;
                            }
                        }
                    }
                }
            };
            // What the replica sends comes back.
            let down = async move {
                while let Some(event) = from_agent.recv().await {
                    match event {
                        TunnelEvent::Data(data) => {
                            if write.write_all(&data).await.is_err() {
                                return true;
                            }
                        }
                        TunnelEvent::End(_) => {
                            let _ = write.shutdown().await;
                            return false;
                        }
                    }
                }
                // The agent's stream went away.
                let _ = write.shutdown().await;
                false
            };
            let abandoned = tokio::select! {
                () = up => true,
                abandoned = down => abandoned,
            };
            if abandoned {
                let end = agent_pb::TunnelClose {
                    tunnel_id: id,
                    error: "the zone's side went away".into(),
                };
                let _ = outbound.send(Ok(wrap(zone_message::Body::TunnelClose(end))));
            }
            if let Some(attached) = hub.state().attached.get_mut(&node) {
                attached.tunnels.remove(&id);
            }
        });
        Ok(theirs)
    }

    /// Passes what the agent said of tunnel `id` on.
    pub(super) async fn tunnel_event(&self, node: &NodeId, id: u64, event: TunnelEvent) {
        let sender = {
            let mut state = self.state();
            let Some(attached) = state.attached.get_mut(node) else {
                return;
            };
            if matches!(event, TunnelEvent::End(_)) {
                attached.tunnels.remove(&id)
            } else {
                attached.tunnels.get(&id).cloned()
            }
        };
        if let Some(sender) = sender {
            let _ = sender.send(event).await;
        }
    }
}
