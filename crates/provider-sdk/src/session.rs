//! The decisions of one stream, as a pure state machine: it takes what the zone sent and
//! says what the runner must do next. The runner owns the I/O, timers and tasks and only
//! carries out the [`Step`]s, so every rule here is tested without a runtime.
//!
//! Rules:
//! - `Welcome` and `RoleChange` both set the role; either counts as the zone accepting the
//!   stream ("welcomed"), which resets the reconnect backoff.
//! - Inventory runs only while serving, and only when an interval is configured.
//! - Quotes, deploys and destroys are handed on with their request id, whatever the role:
//!   the zone decides who gets work.
//! - A message that cannot be read changes nothing. If it is a quote or deploy whose node
//!   id can still be read, it is answered with a `failed` refusal, so the zone does not wait
//!   for an answer that would never come; otherwise it is dropped.

use std::time::Duration;

use orc_proto::{
    ConvertError, Deploy, NodeId, ProviderBody, Quote, QuoteReply, Refusal, RefusalKind,
    ReplicaRole, RequestId, ZoneBody, ZoneMessage, pb,
};

/// What the runner does about one message from the zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// Take on `role`, and run inventory passes every `inventory` from now (`None`: none).
    AdoptRole {
        role: ReplicaRole,
        inventory: Option<Duration>,
    },
    Quote {
        request_id: RequestId,
        quote: Quote,
    },
    Deploy {
        request_id: RequestId,
        deploy: Deploy,
    },
    Destroy {
        request_id: RequestId,
        node_id: NodeId,
    },
    /// Nothing beyond noting that the zone is alive.
    Nothing,
    /// The request could not be read; answer it with `reply`.
    Reject {
        error: ConvertError,
        request_id: RequestId,
        reply: ProviderBody,
    },
    /// The message could not be read and cannot be answered.
    Drop(ConvertError),
}

/// Tenant words of the refusal sent for a request that could not be read.
pub(crate) const UNREADABLE_REQUEST: &str = "The request could not be processed.";

/// The refusal answering an unreadable request, when its kind and node id are known.
fn rejection(message: &pb::ZoneMessage) -> Option<ProviderBody> {
    use pb::zone_message::Body;
    let refusal = Refusal::new(RefusalKind::Failed, UNREADABLE_REQUEST);
    match message.body.as_ref()? {
        Body::Quote(q) => Some(ProviderBody::QuoteReply {
            node_id: NodeId::new(q.node_id.clone()).ok()?,
            reply: QuoteReply::Refused(refusal),
        }),
        Body::Deploy(d) => Some(ProviderBody::DeployRefused {
            node_id: NodeId::new(d.node_id.clone()).ok()?,
            refusal,
        }),
        Body::Destroy(_) | Body::Welcome(_) | Body::RoleChange(_) | Body::KeepAlive(_) => None,
    }
}

/// State of one stream.
#[derive(Debug, Clone)]
pub(crate) struct SessionState {
    inventory_interval: Option<Duration>,
    role: Option<ReplicaRole>,
}

impl SessionState {
    pub(crate) fn new(inventory_interval: Option<Duration>) -> Self {
        SessionState {
            inventory_interval,
            role: None,
        }
    }

    /// Whether the zone has welcomed this stream.
    pub(crate) fn welcomed(&self) -> bool {
        self.role.is_some()
    }

    /// Reads one message from the zone.
    pub(crate) fn on_zone_message(&mut self, message: pb::ZoneMessage) -> Step {
        let request_id = RequestId(message.request_id);
        let reply = rejection(&message);
        let message = match ZoneMessage::try_from(message) {
            Ok(message) => message,
            Err(error) => {
                return match reply {
                    Some(reply) => Step::Reject {
                        error,
                        request_id,
                        reply,
                    },
                    None => Step::Drop(error),
                };
            }
        };
        match message.body {
            ZoneBody::Welcome { role } | ZoneBody::RoleChange { role } => {
                self.role = Some(role);
                let inventory = match role {
                    ReplicaRole::Serving => self.inventory_interval,
                    ReplicaRole::Standby => None,
                };
                Step::AdoptRole { role, inventory }
            }
            ZoneBody::KeepAlive => Step::Nothing,
            ZoneBody::Quote(quote) => Step::Quote { request_id, quote },
            ZoneBody::Deploy(deploy) => Step::Deploy { request_id, deploy },
            ZoneBody::Destroy(destroy) => Step::Destroy {
                request_id,
                node_id: destroy.node_id,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use orc_proto::{Bootstrap, OsId, QuoteToken};

    fn wire(request_id: u64, body: ZoneBody) -> pb::ZoneMessage {
        ZoneMessage {
            request_id: RequestId(request_id),
            body,
        }
        .into()
    }

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn roles_start_and_stop_inventory() {
        let mut state = SessionState::new(Some(MINUTE));
        assert!(!state.welcomed());
        let step = state.on_zone_message(wire(
            0,
            ZoneBody::Welcome {
                role: ReplicaRole::Standby,
            },
        ));
        assert_eq!(
            step,
            Step::AdoptRole {
                role: ReplicaRole::Standby,
                inventory: None
            }
        );
        assert!(state.welcomed());
        let step = state.on_zone_message(wire(
            0,
            ZoneBody::RoleChange {
                role: ReplicaRole::Serving,
            },
        ));
        assert_eq!(
            step,
            Step::AdoptRole {
                role: ReplicaRole::Serving,
                inventory: Some(MINUTE)
            }
        );
        let mut without = SessionState::new(None);
        let step = without.on_zone_message(wire(
            0,
            ZoneBody::Welcome {
                role: ReplicaRole::Serving,
            },
        ));
        assert_eq!(
            step,
            Step::AdoptRole {
                role: ReplicaRole::Serving,
                inventory: None
            }
        );
    }

    #[test]
    fn requests_keep_their_request_id() {
        let mut state = SessionState::new(Some(MINUTE));
        let node = NodeId::new("n1").unwrap();
        let deploy = Deploy {
            node_id: node.clone(),
            quote_token: QuoteToken::new("t").unwrap(),
            os: OsId::new("debian-12").unwrap(),
            ssh_keys: vec![],
            bootstrap: Bootstrap::default(),
        };
        assert_eq!(
            state.on_zone_message(wire(41, ZoneBody::Deploy(deploy.clone()))),
            Step::Deploy {
                request_id: RequestId(41),
                deploy
            }
        );
        assert_eq!(
            state.on_zone_message(wire(
                42,
                ZoneBody::Destroy(orc_proto::Destroy {
                    node_id: node.clone()
                })
            )),
            Step::Destroy {
                request_id: RequestId(42),
                node_id: node
            }
        );
        assert_eq!(
            state.on_zone_message(wire(0, ZoneBody::KeepAlive)),
            Step::Nothing
        );
        assert!(!state.welcomed());
    }

    #[test]
    fn unreadable_messages_are_dropped_with_their_error() {
        let mut state = SessionState::new(Some(MINUTE));
        let step = state.on_zone_message(pb::ZoneMessage {
            request_id: 3,
            body: Some(pb::zone_message::Body::Destroy(pb::Destroy {
                node_id: String::new(),
            })),
        });
        match step {
            Step::Drop(e) => assert_eq!(e.to_string(), "destroy.node_id is missing"),
            other => panic!("expected a drop, got {other:?}"),
        }
        assert!(!state.welcomed());
    }

    #[test]
    fn unreadable_requests_with_a_node_id_are_refused_as_failed() {
        let mut state = SessionState::new(Some(MINUTE));
        let step = state.on_zone_message(pb::ZoneMessage {
            request_id: 9,
            body: Some(pb::zone_message::Body::Quote(pb::Quote {
                node_id: "n1".into(),
                ..Default::default()
            })),
        });
        assert_eq!(
            step,
            Step::Reject {
                error: ConvertError::Missing {
                    field: "quote.pool".into()
                },
                request_id: RequestId(9),
                reply: ProviderBody::QuoteReply {
                    node_id: NodeId::new("n1").unwrap(),
                    reply: QuoteReply::Refused(Refusal::new(
                        RefusalKind::Failed,
                        UNREADABLE_REQUEST
                    )),
                },
            }
        );
        let step = state.on_zone_message(pb::ZoneMessage {
            request_id: 10,
            body: Some(pb::zone_message::Body::Deploy(pb::Deploy {
                node_id: "n2".into(),
                ..Default::default()
            })),
        });
        match step {
            Step::Reject {
                error, request_id, ..
            } => {
                assert_eq!(error.field(), "deploy.quote_token");
                assert_eq!(request_id, RequestId(10));
            }
            other => panic!("expected a rejection, got {other:?}"),
        }
    }
}
