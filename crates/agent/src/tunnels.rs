//! TCP connections the agent opens for the zone and relays over its stream: how the zone's
//! access edge reaches a private service's replica on this node. A tunnel goes only to an
//! address of the node's workload subnet (a replica of this node), never elsewhere.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use orc_proto::agent_pb::{self, agent_message};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::mpsc;

/// How long connecting to a replica may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The most bytes one message carries.
const CHUNK: usize = 32 * 1024;

/// What the zone sends down an open tunnel.
enum Down {
    Data(Vec<u8>),
    /// The zone writes no more.
    End,
}

/// The tunnels of one stream, by id.
#[derive(Default, Clone)]
pub(crate) struct Tunnels {
    open: Arc<Mutex<BTreeMap<u64, mpsc::Sender<Down>>>>,
}

fn message(body: agent_message::Body) -> agent_pb::AgentMessage {
    agent_pb::AgentMessage { body: Some(body) }
}

fn close(id: u64, error: &str) -> agent_pb::AgentMessage {
    message(agent_message::Body::TunnelClose(agent_pb::TunnelClose {
        tunnel_id: id,
        error: error.to_string(),
    }))
}

impl Tunnels {
    /// Opens tunnel `open` to a replica of `subnet` (`None`: the node has no workloads, so
    /// nothing to reach); what comes back goes out on `tx`.
    pub(crate) fn open(
        &self,
        open: agent_pb::TunnelOpen,
        subnet: Option<ipnet::Ipv4Net>,
        tx: mpsc::Sender<agent_pb::AgentMessage>,
    ) {
        let id = open.tunnel_id;
        let address = match open.address.parse::<SocketAddr>() {
            Ok(SocketAddr::V4(a)) if subnet.is_some_and(|net| net.contains(a.ip())) => a,
            _ => {
                tracing::warn!(tunnel = id, address = %open.address, "the zone asked for a tunnel to an address that is no replica of this node");
                let _ = tx.try_send(close(
                    id,
                    &format!("{} is not a replica address of this node", open.address),
                ));
                return;
            }
        };
        let (down, mut from_zone) = mpsc::channel::<Down>(64);
        self.lock().insert(id, down);
        let tunnels = self.clone();
        tokio::spawn(async move {
            let stream =
                tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(address))
                    .await;
            let stream = match stream {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => {
                    tunnels.lock().remove(&id);
                    let _ = tx.send(close(id, &format!("{address}: {e}"))).await;
                    return;
                }
                Err(_) => {
                    tunnels.lock().remove(&id);
                    let _ = tx
                        .send(close(id, &format!("{address} did not answer in time")))
                        .await;
                    return;
                }
            };
            let _ = stream.set_nodelay(true);
            tracing::debug!(tunnel = id, %address, "tunnel open");
            let _ = tx
                .send(message(agent_message::Body::TunnelData(
                    agent_pb::TunnelData {
                        tunnel_id: id,
                        data: Vec::new(),
                    },
                )))
                .await;
            let (mut read, mut write) = stream.into_split();
            let up_tx = tx.clone();
            let up = async move {
                let mut buf = vec![0u8; CHUNK];
                loop {
                    match read.read(&mut buf).await {
                        Ok(0) => {
                            let _ = up_tx.send(close(id, "")).await;
                            return;
                        }
                        Ok(n) => {
                            let data = agent_pb::TunnelData {
                                tunnel_id: id,
                                data: buf[..n].to_vec(),
                            };
                            if up_tx
                                .send(message(agent_message::Body::TunnelData(data)))
                                .await
                                .is_err()
                            {
                                return;
                            }
                        }
                        Err(e) => {
                            let _ = up_tx.send(close(id, &e.to_string())).await;
                            return;
                        }
                    }
                }
            };
            let down = async move {
                while let Some(next) = from_zone.recv().await {
                    match next {
                        Down::Data(data) => {
                            if write.write_all(&data).await.is_err() {
                                return;
                            }
                        }
                        Down::End => {
                            let _ = write.shutdown().await;
                            // Keep reading the replica's answer until it ends.
                            std::future::pending::<()>().await;
                        }
                    }
                }
            };
            // The tunnel ends when the replica's side ends, or the zone drops it.
            tokio::select! {
                () = up => {}
                () = down => {}
            }
            tunnels.lock().remove(&id);
            tracing::debug!(tunnel = id, "tunnel closed");
        });
    }

    /// Bytes from the zone for tunnel `id`.
    pub(crate) async fn data(&self, id: u64, data: Vec<u8>) {
        let sender = self.lock().get(&id).cloned();
        if let Some(sender) = sender {
            let _ = sender.send(Down::Data(data)).await;
        }
    }

    /// The zone ended tunnel `id`: with an error, at once; otherwise after what it sent.
    pub(crate) async fn close(&self, id: u64, error: &str) {
        if error.is_empty() {
            let sender = self.lock().get(&id).cloned();
            if let Some(sender) = sender {
                let _ = sender.send(Down::End).await;
            }
        } else {
            self.lock().remove(&id);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, mpsc::Sender<Down>>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn next(rx: &mut mpsc::Receiver<agent_pb::AgentMessage>) -> agent_message::Body {
        tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("an answer in time")
            .expect("the stream is open")
            .body
            .expect("a body")
    }

    #[tokio::test]
    async fn a_tunnel_relays_both_ways_and_reaches_only_the_nodes_replicas() {
        // A replica: answers what it reads, upper-cased, until its peer stops writing.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let replica = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut read = Vec::new();
            stream.read_to_end(&mut read).await.unwrap();
            stream.write_all(&read.to_ascii_uppercase()).await.unwrap();
        });
        let tunnels = Tunnels::default();
        let (tx, mut rx) = mpsc::channel(16);
        let subnet: ipnet::Ipv4Net = "127.0.0.0/8".parse().unwrap();

        // Outside the node's workload subnet: refused, nothing dialled.
        tunnels.open(
            agent_pb::TunnelOpen {
                tunnel_id: 1,
                address: "10.1.2.3:80".into(),
            },
            Some(subnet),
            tx.clone(),
        );
        match next(&mut rx).await {
            agent_message::Body::TunnelClose(end) => {
                assert_eq!(end.tunnel_id, 1);
                assert!(end.error.contains("not a replica address"), "{}", end.error);
            }
            other => panic!("{other:?}"),
        }
        // No workloads on the node: nothing to reach.
        tunnels.open(
            agent_pb::TunnelOpen {
                tunnel_id: 2,
                address: replica.to_string(),
            },
            None,
            tx.clone(),
        );
        assert!(
            matches!(next(&mut rx).await, agent_message::Body::TunnelClose(end) if end.tunnel_id == 2)
        );

        // To a replica: connected, bytes down, the end of what the zone sends, bytes up.
        tunnels.open(
            agent_pb::TunnelOpen {
                tunnel_id: 3,
                address: replica.to_string(),
            },
            Some(subnet),
            tx.clone(),
        );
        match next(&mut rx).await {
            agent_message::Body::TunnelData(data) => {
                assert_eq!((data.tunnel_id, data.data.len()), (3, 0), "connected");
            }
            other => panic!("{other:?}"),
        }
        tunnels.data(3, b"hello ".to_vec()).await;
        tunnels.data(3, b"replica".to_vec()).await;
        tunnels.close(3, "").await;
        let mut answer = Vec::new();
        loop {
            match next(&mut rx).await {
                agent_message::Body::TunnelData(data) => answer.extend(data.data),
                agent_message::Body::TunnelClose(end) => {
                    assert_eq!((end.tunnel_id, end.error.as_str()), (3, ""));
                    break;
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(answer, b"HELLO REPLICA");
        // Ended: forgotten.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(tunnels.lock().is_empty());
    }
}
