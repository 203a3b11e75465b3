//! The project's names, answered by the agent: a small authoritative DNS server on the
//! node's mesh address, UDP port 53, for the names of its config's `hosts`
//! (`<node>.<project>.<org>.internal`, each at its mesh address) and the project's service
//! names (`<service>.<app>.<project>.<org>.internal`, each with the addresses of its ready
//! replicas, as the node's workloads last said; a service with none has no record).
//!
//! - A name of the table: its A record (TTL [`TTL`] seconds); another type of record for it
//!   is an empty answer (NODATA), as for a name that has no such record.
//! - Another name under `internal.`: NXDOMAIN. Anything else: REFUSED; it resolves no other
//!   name, so it is no open resolver, and it listens on the mesh address alone.
//!
//! Only the project's own members reach the address (the mesh carries nothing else), and the
//! table holds only their names: one project's names are never answered to another.
//!
//! Where the node runs systemd-resolved, the agent also points the `internal` domain of the
//! mesh interface at this server, so every program on the node resolves the names.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::{Arc, PoisonError, RwLock};

use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::{RData, Record, RecordType, rdata::A};
use orc_mesh::config::HostEntry;
use tokio::net::UdpSocket;
use tokio::task::JoinHandle;

use super::MeshError;

/// The port it answers on.
pub const DNS_PORT: u16 = 53;
/// How long resolvers may keep an answer: short, since nodes come and go.
pub const TTL: u32 = 5;
/// The domain its names are under.
pub const DOMAIN: &str = "internal";

/// Names (lower case, without the final dot) and their addresses.
pub type Hosts = BTreeMap<String, Vec<Ipv4Addr>>;

/// The service names, shared by the node's apps (which write them) and its name server.
pub type ServiceNames = Arc<RwLock<Hosts>>;

/// The answer to `request` from the first of `tables` that has the name; `None` when the
/// request is not a DNS query at all (it is dropped, as a server drops noise).
pub fn answer(request: &[u8], tables: &[&Hosts]) -> Option<Vec<u8>> {
    let request = Message::from_vec(request).ok()?;
    if request.metadata.message_type != MessageType::Query {
        return None;
    }
    let mut response = Message::response(request.metadata.id, request.metadata.op_code);
    response.metadata.recursion_desired = request.metadata.recursion_desired;
    response.metadata.recursion_available = false;
    response.queries = request.queries.clone();
    let code = match (request.metadata.op_code, request.queries.as_slice()) {
        (OpCode::Query, [query]) => {
            let name = query.name().to_lowercase().to_ascii();
            let name = name.trim_end_matches('.');
            match tables.iter().find_map(|t| t.get(name)) {
                Some(addresses) => {
                    response.metadata.authoritative = true;
                    if matches!(query.query_type(), RecordType::A | RecordType::ANY) {
                        for address in addresses {
                            response.answers.push(Record::from_rdata(
                                query.name().clone(),
                                TTL,
                                RData::A(A(*address)),
                            ));
                        }
                    }
                    ResponseCode::NoError
                }
                None if name == DOMAIN || name.ends_with(&format!(".{DOMAIN}")) => {
                    response.metadata.authoritative = true;
                    ResponseCode::NXDomain
                }
                None => ResponseCode::Refused,
            }
        }
        (OpCode::Query, _) => ResponseCode::FormErr,
        _ => ResponseCode::NotImp,
    };
    response.metadata.response_code = code;
    response.to_vec().ok()
}

/// The table of a config's host entries.
pub fn hosts_of(entries: &[HostEntry]) -> Hosts {
    entries
        .iter()
        .map(|h| {
            (
                h.name.trim_end_matches('.').to_ascii_lowercase(),
                vec![h.address],
            )
        })
        .collect()
}

/// The running server: its table and the address it is bound to.
#[derive(Default)]
pub struct NameServer {
    hosts: Arc<RwLock<Hosts>>,
    services: ServiceNames,
    serving: Option<(Ipv4Addr, JoinHandle<()>)>,
}

impl std::fmt::Debug for NameServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NameServer")
            .field("address", &self.serving.as_ref().map(|(a, _)| a))
            .finish_non_exhaustive()
    }
}

impl NameServer {
    /// A server that also answers `services`.
    pub fn new(services: ServiceNames) -> NameServer {
        NameServer {
            hosts: Arc::default(),
            services,
            serving: None,
        }
    }

    /// Serves `entries` on `address` (its mesh address), binding again when the address
    /// changed; `None` (no mesh) stops it.
    pub async fn apply(
        &mut self,
        address: Option<Ipv4Addr>,
        entries: &[HostEntry],
        interface: &str,
    ) -> Result<(), MeshError> {
        *self.hosts.write().unwrap_or_else(PoisonError::into_inner) = hosts_of(entries);
        if self.serving.as_ref().map(|(a, _)| *a) == address {
            return Ok(());
        }
        self.stop();
        let Some(address) = address else {
            return Ok(());
        };
        let at = SocketAddr::V4(SocketAddrV4::new(address, DNS_PORT));
        let socket = UdpSocket::bind(at).await.map_err(|e| MeshError::Command {
            command: format!("listen for DNS on {at}"),
            output: e.to_string(),
        })?;
        let task = tokio::spawn(serve(socket, self.hosts.clone(), self.services.clone()));
        tracing::info!(%at, "answers the project's node names");
        self.serving = Some((address, task));
        resolved_link(interface, address).await;
        Ok(())
    }

    /// Stops answering.
    pub fn stop(&mut self) {
        if let Some((_, task)) = self.serving.take() {
            task.abort();
        }
    }
}

impl Drop for NameServer {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn serve(socket: UdpSocket, hosts: Arc<RwLock<Hosts>>, services: ServiceNames) {
    let mut buffer = vec![0u8; 1232];
    loop {
        let (n, from) = match socket.recv_from(&mut buffer).await {
            Ok(got) => got,
            Err(error) => {
                tracing::debug!(%error, "a DNS request could not be read");
                continue;
            }
        };
        let reply = {
            let hosts = hosts.read().unwrap_or_else(PoisonError::into_inner);
            let services = services.read().unwrap_or_else(PoisonError::into_inner);
            answer(&buffer[..n], &[&hosts, &services])
        };
        if let Some(reply) = reply {
            let _ = socket.send_to(&reply, from).await;
        }
    }
}

/// Points systemd-resolved's `internal` domain of `interface` at `address`, when the node
/// runs it; otherwise does nothing (a node without it asks the address directly).
async fn resolved_link(interface: &str, address: Ipv4Addr) {
    if !std::path::Path::new("/run/systemd/resolve").is_dir() {
        return;
    }
    let set = async {
        let dns = tokio::process::Command::new("resolvectl")
            .args(["dns", interface, &address.to_string()])
            .status()
            .await?;
        let domain = tokio::process::Command::new("resolvectl")
            .args(["domain", interface, &format!("~{DOMAIN}")])
            .status()
            .await?;
        Ok::<bool, std::io::Error>(dns.success() && domain.success())
    };
    match set.await {
        Ok(true) => tracing::info!(interface, "systemd-resolved asks the agent for .internal"),
        Ok(false) | Err(_) => {
            tracing::warn!(
                interface,
                "systemd-resolved runs, but resolvectl could not point .internal at the agent"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::Query;
    use hickory_proto::rr::Name;

    fn hosts() -> Hosts {
        hosts_of(&[
            HostEntry {
                name: "n-7.web.acme.internal".into(),
                address: "10.88.0.2".parse().unwrap(),
            },
            HostEntry {
                name: "N-8.web.acme.internal".into(),
                address: "10.88.0.3".parse().unwrap(),
            },
        ])
    }

    fn ask(name: &str, kind: RecordType) -> Message {
        let mut query = Message::query();
        query.metadata.recursion_desired = true;
        query.add_query(Query::query(Name::from_ascii(name).unwrap(), kind));
        let reply = answer(&query.to_vec().unwrap(), &[&hosts()]).expect("an answer");
        let reply = Message::from_vec(&reply).unwrap();
        assert_eq!(reply.metadata.id, query.metadata.id);
        assert_eq!(reply.metadata.message_type, MessageType::Response);
        assert_eq!(reply.queries, query.queries);
        reply
    }

    fn addresses(reply: &Message) -> Vec<Ipv4Addr> {
        reply
            .answers
            .iter()
            .filter_map(|r| match r.data {
                RData::A(a) => Some(a.0),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_node_name_is_answered_with_its_mesh_address() {
        let reply = ask("n-7.web.acme.internal.", RecordType::A);
        assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
        assert!(reply.metadata.authoritative);
        assert_eq!(
            addresses(&reply),
            ["10.88.0.2".parse::<Ipv4Addr>().unwrap()]
        );
        assert_eq!(reply.answers[0].ttl, TTL);
        // Names are not case-sensitive (the table's and the question's).
        let reply = ask("n-8.WEB.acme.internal.", RecordType::A);
        assert_eq!(
            addresses(&reply),
            ["10.88.0.3".parse::<Ipv4Addr>().unwrap()]
        );
    }

    #[test]
    fn a_service_name_is_answered_with_every_ready_replica_and_none_is_no_record() {
        let services: Hosts = BTreeMap::from([
            (
                "web.shop.web.acme.internal".to_string(),
                vec!["10.96.2.2".parse().unwrap(), "10.96.3.2".parse().unwrap()],
            ),
            ("db.shop.web.acme.internal".to_string(), Vec::new()),
        ]);
        let ask = |name: &str| {
            let mut query = Message::query();
            query.add_query(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
            let reply = answer(&query.to_vec().unwrap(), &[&hosts(), &services]).unwrap();
            Message::from_vec(&reply).unwrap()
        };
        let web = ask("web.shop.web.acme.internal.");
        assert_eq!(web.metadata.response_code, ResponseCode::NoError);
        assert_eq!(
            addresses(&web),
            [
                "10.96.2.2".parse::<Ipv4Addr>().unwrap(),
                "10.96.3.2".parse().unwrap()
            ]
        );
        let db = ask("db.shop.web.acme.internal.");
        assert_eq!(db.metadata.response_code, ResponseCode::NoError);
        assert!(
            db.answers.is_empty(),
            "no ready replica: the name exists, no record"
        );
        assert_eq!(
            addresses(&ask("n-7.web.acme.internal.")),
            ["10.88.0.2".parse::<Ipv4Addr>().unwrap()],
            "node names still answer"
        );
        assert_eq!(
            ask("api.shop.web.acme.internal.").metadata.response_code,
            ResponseCode::NXDomain
        );
    }

    #[test]
    fn another_record_type_of_a_known_name_is_an_empty_answer() {
        let reply = ask("n-7.web.acme.internal.", RecordType::AAAA);
        assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
        assert!(reply.answers.is_empty());
    }

    #[test]
    fn an_unknown_internal_name_does_not_exist_and_other_names_are_refused() {
        let reply = ask("n-9.web.acme.internal.", RecordType::A);
        assert_eq!(reply.metadata.response_code, ResponseCode::NXDomain);
        assert!(reply.answers.is_empty());
        let reply = ask("example.com.", RecordType::A);
        assert_eq!(reply.metadata.response_code, ResponseCode::Refused);
        assert!(!reply.metadata.recursion_available);
        assert!(reply.answers.is_empty());
    }

    #[test]
    fn noise_is_dropped_and_a_response_is_not_answered() {
        assert_eq!(answer(b"\x01\x02", &[&hosts()]), None);
        let mut response = Message::response(7, OpCode::Query);
        response.add_query(Query::query(
            Name::from_ascii("n-7.web.acme.internal.").unwrap(),
            RecordType::A,
        ));
        assert_eq!(answer(&response.to_vec().unwrap(), &[&hosts()]), None);
    }
}
