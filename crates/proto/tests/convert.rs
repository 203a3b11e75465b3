//! Wire ↔ domain conversions: valid messages round-trip unchanged, and every required field
//! that is missing or invalid is named by its path in the error.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, UNIX_EPOCH};

use orc_common::{Architecture, Money, Shape};
use orc_proto::pb::{self, provider_message::Body as PBody, zone_message::Body as ZBody};
use orc_proto::*;
use rust_decimal::Decimal;

/// One change to a valid wire message that must make its conversion fail.
type Mutation<T> = fn(&mut T);

fn node(s: &str) -> NodeId {
    NodeId::new(s).unwrap()
}

fn price() -> Money {
    Money::usd_per_month(Decimal::new(549, 2))
}

fn provider_messages() -> Vec<ProviderMessage> {
    let bodies = vec![
        ProviderBody::Hello(Hello {
            provider: ProviderName::new("partner").unwrap(),
            resource_uri: ResourceUri::new("urn:orc:partner:acme").unwrap(),
            replica: Replica {
                host: "h1".into(),
                pid: 42,
                slot: 1,
            },
            version: "0.1.0".into(),
            protocol_version: PROTOCOL_VERSION,
        }),
        ProviderBody::Catalog(Catalog {
            classes: vec![ClassInfo {
                id: ClassId::new("eu-central").unwrap(),
                title: "Europe Central".into(),
                offerings: vec![
                    Offering {
                        shape: Shape {
                            vcpus: 2,
                            memory_gib: 4,
                            arch: Architecture::X86_64,
                            disks_gib: vec![],
                        },
                        plan: None,
                    },
                    Offering {
                        shape: Shape {
                            vcpus: 4,
                            memory_gib: 8,
                            arch: Architecture::Arm64,
                            disks_gib: vec![],
                        },
                        plan: Some("cax21".into()),
                    },
                ],
            }],
            os: vec![OsInfo {
                id: OsId::new("debian-12").unwrap(),
                title: "Debian 12".into(),
            }],
            availability: Availability {
                classes: vec![ClassAvailability {
                    class: ClassId::new("eu-central").unwrap(),
                    can_place: true,
                }],
                public_ipv4_offered: 3,
            },
            site_gateways: true,
        }),
        ProviderBody::QuoteReply {
            node_id: node("n1"),
            reply: QuoteReply::Offer(Offer {
                site: SiteName::new("eu-central-a").unwrap(),
                price: Some(price()),
                words: "2 vCPU · 4 GiB · eu-central".into(),
                quote_token: QuoteToken::new("qt").unwrap(),
                expires: UNIX_EPOCH + Duration::from_millis(1_900_000_000_123),
            }),
        },
        ProviderBody::QuoteReply {
            node_id: node("n1"),
            reply: QuoteReply::Offer(Offer {
                site: SiteName::new("eu-central-a").unwrap(),
                price: None,
                words: "unpriced".into(),
                quote_token: QuoteToken::new("qt").unwrap(),
                expires: UNIX_EPOCH + Duration::from_secs(1),
            }),
        },
        ProviderBody::DeployProgress(DeployProgress {
            node_id: node("n1"),
            words: "identified".into(),
            product_uuid: Some("4c4c4544-0042-4810-8058-b4c04f4e3332".into()),
        }),
        ProviderBody::DeployDone(Deployed {
            node_id: node("n1"),
            site: SiteName::new("eu-central-a").unwrap(),
            addresses: vec![
                IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7)),
                "2001:db8::7".parse().unwrap(),
            ],
            price: None,
            instance_ref: InstanceRef::new("i-1").unwrap(),
            placed: Some(Whereabouts {
                cloud: "hetzner".into(),
                location: "fsn1".into(),
                plan: "cx22".into(),
            }),
        }),
        ProviderBody::DestroyDone {
            node_id: node("n1"),
        },
        ProviderBody::Inventory(Inventory {
            nodes: vec![InventoryNode {
                node_id: node("n1"),
                site: SiteName::new("eu-central-a").unwrap(),
                instance_ref: InstanceRef::new("i-1").unwrap(),
                state: InstanceState::Running,
            }],
            sites: vec![
                InventorySite {
                    site: SiteName::new("eu-central-a").unwrap(),
                    public_ipv4: Some(Ipv4Addr::new(192, 0, 2, 1)),
                    private_prefix: Some("10.1.0.0/16".into()),
                },
                InventorySite {
                    site: SiteName::new("eu-central-b").unwrap(),
                    public_ipv4: None,
                    private_prefix: None,
                },
            ],
            pool_addresses: vec![PoolAddress {
                pool: PoolPath::new("acme/web/app").unwrap(),
                site: SiteName::new("eu-central-a").unwrap(),
                ipv4: Ipv4Addr::new(192, 0, 2, 7),
            }],
        }),
        ProviderBody::KeepAlive,
    ];
    let mut all: Vec<ProviderMessage> = bodies
        .into_iter()
        .enumerate()
        .map(|(i, body)| ProviderMessage {
            request_id: RequestId(i as u64),
            body,
        })
        .collect();
    for kind in RefusalKind::ALL {
        let refusal = Refusal::new(kind, format!("words for {kind}"));
        for body in [
            ProviderBody::QuoteReply {
                node_id: node("n2"),
                reply: QuoteReply::Refused(refusal.clone()),
            },
            ProviderBody::DeployRefused {
                node_id: node("n2"),
                refusal: refusal.clone(),
            },
            ProviderBody::DestroyRefused {
                node_id: node("n2"),
                refusal: refusal.clone(),
            },
        ] {
            all.push(ProviderMessage {
                request_id: RequestId(7),
                body,
            });
        }
    }
    all
}

fn quote() -> Quote {
    Quote {
        pool: PoolPath::new("acme/web/app").unwrap(),
        node_id: node("n1"),
        purpose: Purpose::Tenant,
        shape: Shape {
            vcpus: 2,
            memory_gib: 4,
            arch: Architecture::Arm64,
            disks_gib: vec![10, 20],
        },
        class: ClassId::new("eu-central").unwrap(),
        os: OsId::new("debian-12").unwrap(),
        pinned_site: Some(SiteName::new("eu-central-b").unwrap()),
        public: true,
        placement: [("plan".to_string(), "cx23".to_string())].into(),
        preview: true,
    }
}

#[test]
fn a_placement_key_outside_the_alphabet_is_refused_by_name() {
    let mut wire = pb::Quote::from(quote());
    wire.placement.insert("Plan!".into(), "cx23".into());
    let err = Quote::try_from(wire).unwrap_err();
    assert_eq!(err.field(), "placement");
    assert!(err.to_string().contains("Plan!"), "{err}");

    let mut wire = pb::Quote::from(quote());
    wire.placement.insert("location".into(), String::new());
    let err = Quote::try_from(wire).unwrap_err();
    assert_eq!(err.field(), "placement.location");
}

fn zone_messages() -> Vec<ZoneMessage> {
    [
        ZoneBody::Welcome {
            role: ReplicaRole::Serving,
        },
        ZoneBody::RoleChange {
            role: ReplicaRole::Standby,
        },
        ZoneBody::Quote(quote()),
        ZoneBody::Quote(Quote {
            pinned_site: None,
            purpose: Purpose::Gateway,
            ..quote()
        }),
        ZoneBody::Deploy(Deploy {
            node_id: node("n1"),
            quote_token: QuoteToken::new("qt").unwrap(),
            os: OsId::new("debian-12").unwrap(),
            ssh_keys: vec!["ssh-ed25519 AAAA test".into()],
            bootstrap: Bootstrap(b"#!/bin/sh".to_vec()),
        }),
        ZoneBody::Destroy(Destroy {
            node_id: node("n1"),
        }),
        ZoneBody::KeepAlive,
    ]
    .into_iter()
    .enumerate()
    .map(|(i, body)| ZoneMessage {
        request_id: RequestId(100 + i as u64),
        body,
    })
    .collect()
}

#[test]
fn every_provider_message_round_trips() {
    for message in provider_messages() {
        let wire = pb::ProviderMessage::from(message.clone());
        assert_eq!(ProviderMessage::try_from(wire).unwrap(), message);
    }
}

#[test]
fn every_zone_message_round_trips() {
    for message in zone_messages() {
        let wire = pb::ZoneMessage::from(message.clone());
        assert_eq!(ZoneMessage::try_from(wire).unwrap(), message);
    }
}

#[test]
fn money_travels_as_decimal_text() {
    let wire = pb::Money::from(Money::usd_per_month(Decimal::new(1_000_000_001, 9)));
    assert_eq!(wire.amount, "1.000000001");
    assert_eq!(wire.currency, "USD");
    assert_eq!(wire.period, pb::Period::Month as i32);
}

fn provider_error(mutate: impl FnOnce(&mut pb::ProviderMessage), pick: usize) -> ConvertError {
    let mut wire = pb::ProviderMessage::from(provider_messages()[pick].clone());
    mutate(&mut wire);
    ProviderMessage::try_from(wire).unwrap_err()
}

fn zone_error(mutate: impl FnOnce(&mut pb::ZoneMessage), pick: usize) -> ConvertError {
    let mut wire = pb::ZoneMessage::from(zone_messages()[pick].clone());
    mutate(&mut wire);
    ZoneMessage::try_from(wire).unwrap_err()
}

macro_rules! body {
    ($msg:expr, $variant:path) => {
        match $msg.body.as_mut().unwrap() {
            $variant(inner) => inner,
            other => panic!("unexpected body {other:?}"),
        }
    };
}

fn missing(field: &str) -> ConvertError {
    ConvertError::Missing {
        field: field.to_string(),
    }
}

#[test]
fn hello_names_each_missing_field() {
    let cases: Vec<(Mutation<pb::Hello>, &str)> = vec![
        (|h| h.provider.clear(), "hello.provider"),
        (|h| h.resource_uri.clear(), "hello.resource_uri"),
        (|h| h.replica = None, "hello.replica"),
        (
            |h| h.replica.as_mut().unwrap().host.clear(),
            "hello.replica.host",
        ),
        (|h| h.version.clear(), "hello.version"),
        (|h| h.protocol_version = 0, "hello.protocol_version"),
    ];
    for (mutate, field) in cases {
        let err = provider_error(|m| mutate(body!(m, PBody::Hello)), 0);
        assert_eq!(err, missing(field));
        assert_eq!(err.to_string(), format!("{field} is missing"));
    }
}

#[test]
fn catalog_names_each_missing_field() {
    let cases: Vec<(Mutation<pb::Catalog>, &str)> = vec![
        (|c| c.classes[0].id.clear(), "catalog.classes[0].id"),
        (|c| c.classes[0].title.clear(), "catalog.classes[0].title"),
        (|c| c.os[0].id.clear(), "catalog.os[0].id"),
        (|c| c.os[0].title.clear(), "catalog.os[0].title"),
        (|c| c.availability = None, "catalog.availability"),
        (
            |c| c.availability.as_mut().unwrap().classes[0].class.clear(),
            "catalog.availability.classes[0].class",
        ),
    ];
    for (mutate, field) in cases {
        assert_eq!(
            provider_error(|m| mutate(body!(m, PBody::Catalog)), 1),
            missing(field)
        );
    }
}

#[test]
fn offer_names_each_missing_or_invalid_field() {
    let cases: Vec<(Mutation<pb::QuoteReply>, ConvertError)> = vec![
        (|r| r.node_id.clear(), missing("quote_reply.node_id")),
        (|r| r.outcome = None, missing("quote_reply.outcome")),
        (|r| offer(r).site.clear(), missing("quote_reply.offer.site")),
        (
            |r| offer(r).words.clear(),
            missing("quote_reply.offer.words"),
        ),
        (
            |r| offer(r).quote_token.clear(),
            missing("quote_reply.offer.quote_token"),
        ),
        (
            |r| offer(r).expires_unix_ms = 0,
            missing("quote_reply.offer.expires_unix_ms"),
        ),
        (
            |r| offer(r).price.as_mut().unwrap().amount.clear(),
            missing("quote_reply.offer.price.amount"),
        ),
        (
            |r| offer(r).price.as_mut().unwrap().currency.clear(),
            missing("quote_reply.offer.price.currency"),
        ),
        (
            |r| offer(r).price.as_mut().unwrap().period = 0,
            missing("quote_reply.offer.price.period"),
        ),
        (
            |r| offer(r).price.as_mut().unwrap().amount = "5,49".into(),
            ConvertError::Invalid {
                field: "quote_reply.offer.price.amount".into(),
                reason: "\"5,49\" is not a decimal".into(),
            },
        ),
        (
            |r| offer(r).price.as_mut().unwrap().currency = "DOLLAR".into(),
            ConvertError::Invalid {
                field: "quote_reply.offer.price.currency".into(),
                reason: "\"DOLLAR\" is not a three-letter currency code".into(),
            },
        ),
        (
            |r| offer(r).price.as_mut().unwrap().period = 99,
            ConvertError::Invalid {
                field: "quote_reply.offer.price.period".into(),
                reason: "unknown value 99".into(),
            },
        ),
    ];
    for (mutate, expected) in cases {
        assert_eq!(
            provider_error(|m| mutate(body!(m, PBody::QuoteReply)), 2),
            expected
        );
    }
}

fn offer(r: &mut pb::QuoteReply) -> &mut pb::Offer {
    match r.outcome.as_mut().unwrap() {
        pb::quote_reply::Outcome::Offer(o) => o,
        pb::quote_reply::Outcome::Refusal(_) => panic!("expected an offer"),
    }
}

#[test]
fn refusals_name_kind_and_words() {
    // Index 9 is the first refusal: a quote reply refused with `no_capacity`.
    let first_refusal = 9;
    let err = provider_error(
        |m| match body!(m, PBody::QuoteReply).outcome.as_mut().unwrap() {
            pb::quote_reply::Outcome::Refusal(r) => r.kind = 0,
            pb::quote_reply::Outcome::Offer(_) => panic!("expected a refusal"),
        },
        first_refusal,
    );
    assert_eq!(err, missing("quote_reply.refusal.kind"));
    let err = provider_error(
        |m| {
            body!(m, PBody::DeployRefused)
                .refusal
                .as_mut()
                .unwrap()
                .words
                .clear()
        },
        first_refusal + 1,
    );
    assert_eq!(err, missing("deploy_refused.refusal.words"));
    let err = provider_error(
        |m| body!(m, PBody::DeployRefused).refusal = None,
        first_refusal + 1,
    );
    assert_eq!(err, missing("deploy_refused.refusal"));
    let err = provider_error(
        |m| body!(m, PBody::DestroyRefused).node_id.clear(),
        first_refusal + 2,
    );
    assert_eq!(err, missing("destroy_refused.node_id"));
}

#[test]
fn deploy_results_name_each_missing_or_invalid_field() {
    let err = provider_error(|m| body!(m, PBody::DeployProgress).node_id.clear(), 4);
    assert_eq!(err, missing("deploy_progress.node_id"));
    let err = provider_error(|m| body!(m, PBody::DeployProgress).words.clear(), 4);
    assert_eq!(err, missing("deploy_progress.words"));
    let cases: Vec<(Mutation<pb::DeployDone>, ConvertError)> = vec![
        (|d| d.node_id.clear(), missing("deploy_done.node_id")),
        (|d| d.site.clear(), missing("deploy_done.site")),
        (
            |d| d.instance_ref.clear(),
            missing("deploy_done.instance_ref"),
        ),
        (
            |d| d.addresses[1] = "not-an-ip".into(),
            ConvertError::Invalid {
                field: "deploy_done.addresses[1]".into(),
                reason: "\"not-an-ip\" is not an IP address".into(),
            },
        ),
    ];
    for (mutate, expected) in cases {
        assert_eq!(
            provider_error(|m| mutate(body!(m, PBody::DeployDone)), 5),
            expected
        );
    }
    let err = provider_error(|m| body!(m, PBody::DestroyDone).node_id.clear(), 6);
    assert_eq!(err, missing("destroy_done.node_id"));
}

#[test]
fn inventory_must_be_complete_and_names_fields() {
    let cases: Vec<(Mutation<pb::Inventory>, ConvertError)> = vec![
        (
            |i| i.complete = false,
            ConvertError::Invalid {
                field: "inventory.complete".into(),
                reason: "an inventory must be complete; a provider that cannot read everything \
                         sends none"
                    .into(),
            },
        ),
        (
            |i| i.nodes[0].node_id.clear(),
            missing("inventory.nodes[0].node_id"),
        ),
        (
            |i| i.nodes[0].site.clear(),
            missing("inventory.nodes[0].site"),
        ),
        (
            |i| i.nodes[0].instance_ref.clear(),
            missing("inventory.nodes[0].instance_ref"),
        ),
        (
            |i| i.nodes[0].state = 0,
            missing("inventory.nodes[0].state"),
        ),
        (
            |i| i.sites[1].site.clear(),
            missing("inventory.sites[1].site"),
        ),
        (
            |i| i.sites[0].public_ipv4 = "2001:db8::1".into(),
            ConvertError::Invalid {
                field: "inventory.sites[0].public_ipv4".into(),
                reason: "\"2001:db8::1\" is not an IPv4 address".into(),
            },
        ),
    ];
    for (mutate, expected) in cases {
        assert_eq!(
            provider_error(|m| mutate(body!(m, PBody::Inventory)), 7),
            expected
        );
    }
}

/// Attack: a provider reports a site name with terminal escapes or a bidirectional override,
/// which the zone stored raw and copied into events and pages. A site name enters the zone
/// only as a DNS label, wherever a provider message carries one.
#[test]
fn site_names_enter_only_as_dns_labels() {
    let invalid = |field: &str, value: &str| ConvertError::Invalid {
        field: field.into(),
        reason: format!(
            "{} is no site name (1-63 of a-z, 0-9 and -, not starting or ending with -)",
            orc_common::text::quoted(value)
        ),
    };
    let (too_long, longest) = ("a".repeat(64), "a".repeat(63));
    for bad in [
        "eu-central-a\u{1b}[2J",
        "eu\u{202e}a-lartnec",
        "EU-Central",
        "eu central",
        "-eu",
        "eu-",
        too_long.as_str(),
    ] {
        let bad = bad.to_string();
        let in_node = bad.clone();
        assert_eq!(
            provider_error(
                move |m| body!(m, PBody::Inventory).nodes[0].site = in_node,
                7
            ),
            invalid("inventory.nodes[0].site", &bad)
        );
        let in_site = bad.clone();
        assert_eq!(
            provider_error(
                move |m| body!(m, PBody::Inventory).sites[0].site = in_site,
                7
            ),
            invalid("inventory.sites[0].site", &bad)
        );
    }
    for good in ["eu-central-a", "fsn1", "1a", longest.as_str()] {
        let mut wire = pb::ProviderMessage::from(provider_messages()[7].clone());
        body!(&mut wire, PBody::Inventory).sites[0].site = good.to_string();
        assert!(ProviderMessage::try_from(wire).is_ok(), "{good}");
    }
}

#[test]
fn envelope_without_body_is_refused() {
    let err = ProviderMessage::try_from(pb::ProviderMessage {
        request_id: 1,
        body: None,
    })
    .unwrap_err();
    assert_eq!(err, missing("body"));
    let err = ZoneMessage::try_from(pb::ZoneMessage {
        request_id: 1,
        body: None,
    })
    .unwrap_err();
    assert_eq!(err, missing("body"));
}

#[test]
fn zone_messages_name_each_missing_field() {
    assert_eq!(
        zone_error(|m| body!(m, ZBody::Welcome).role = 0, 0),
        missing("welcome.role")
    );
    assert_eq!(
        zone_error(|m| body!(m, ZBody::RoleChange).role = 0, 1),
        missing("role_change.role")
    );
    let cases: Vec<(Mutation<pb::Quote>, ConvertError)> = vec![
        (|q| q.pool.clear(), missing("quote.pool")),
        (|q| q.node_id.clear(), missing("quote.node_id")),
        (|q| q.purpose = 0, missing("quote.purpose")),
        (|q| q.shape = None, missing("quote.shape")),
        (
            |q| q.shape.as_mut().unwrap().vcpus = 0,
            missing("quote.shape.vcpus"),
        ),
        (
            |q| q.shape.as_mut().unwrap().memory_gib = 0,
            missing("quote.shape.memory_gib"),
        ),
        (
            |q| q.shape.as_mut().unwrap().arch = 0,
            missing("quote.shape.arch"),
        ),
        (
            |q| q.shape.as_mut().unwrap().disks_gib[1] = 0,
            ConvertError::Invalid {
                field: "quote.shape.disks_gib[1]".into(),
                reason: "a disk must have at least 1 GiB".into(),
            },
        ),
        (|q| q.class.clear(), missing("quote.class")),
        (|q| q.os.clear(), missing("quote.os")),
    ];
    for (mutate, expected) in cases {
        assert_eq!(zone_error(|m| mutate(body!(m, ZBody::Quote)), 2), expected);
    }
    let cases: Vec<(Mutation<pb::Deploy>, ConvertError)> = vec![
        (|d| d.node_id.clear(), missing("deploy.node_id")),
        (|d| d.quote_token.clear(), missing("deploy.quote_token")),
        (|d| d.os.clear(), missing("deploy.os")),
        (|d| d.ssh_keys[0].clear(), missing("deploy.ssh_keys[0]")),
    ];
    for (mutate, expected) in cases {
        assert_eq!(zone_error(|m| mutate(body!(m, ZBody::Deploy)), 4), expected);
    }
    assert_eq!(
        zone_error(|m| body!(m, ZBody::Destroy).node_id.clear(), 5),
        missing("destroy.node_id")
    );
}

#[test]
fn unknown_enum_values_are_invalid_not_panics() {
    let err = zone_error(|m| body!(m, ZBody::Welcome).role = 42, 0);
    assert_eq!(
        err,
        ConvertError::Invalid {
            field: "welcome.role".into(),
            reason: "unknown value 42".into()
        }
    );
    assert_eq!(err.field(), "welcome.role");
}

#[test]
fn an_inventory_of_ten_thousand_nodes_fits_tonics_default_limit() {
    use prost::Message;
    let nodes = (0..10_000)
        .map(|n| InventoryNode {
            node_id: node(&format!("0b7e2a4c-8d1f-4f6a-9c3e-{n:012}")),
            site: SiteName::new("eu-central-a").unwrap(),
            instance_ref: InstanceRef::new(format!("hcloud:{:09}", 100_000_000 + n)).unwrap(),
            state: InstanceState::Running,
        })
        .collect();
    let wire = pb::ProviderMessage::from(ProviderMessage {
        request_id: RequestId::UNSOLICITED,
        body: ProviderBody::Inventory(Inventory {
            nodes,
            sites: vec![],
            pool_addresses: vec![],
        }),
    });
    let bytes = wire.encoded_len();
    assert!(bytes < 4 << 20, "{bytes} bytes");
    assert!(bytes > 500_000, "{bytes} bytes");
}

#[test]
fn a_progress_note_without_a_machine_names_none() {
    let wire = orc_proto::pb::DeployProgress {
        node_id: "n1".into(),
        words: "creating the machine".into(),
        product_uuid: String::new(),
    };
    let note = DeployProgress::try_from(wire).unwrap();
    assert_eq!(note.product_uuid, None);
    assert_eq!(note.words, "creating the machine");
}

/// Attack: a provider puts terminal escapes, bidirectional overrides and a megabyte into the
/// words, titles and host names the zone shows. Each arrives as one clean line of at most
/// 1 KiB, the rule progress notes follow.
#[test]
fn words_from_a_provider_arrive_as_one_clean_line() {
    let hostile = format!("\u{1b}[2J\u{202e}evil\n{}", "A".repeat(100_000));
    let clean = |s: &str| {
        assert!(s.len() <= WORDS_MAX_BYTES, "{} bytes", s.len());
        assert!(!s.chars().any(orc_common::text::is_unsafe), "{s:?}");
        assert!(s.starts_with("[2Jevil "), "{:?}", &s[..20]);
    };
    let mut hello = pb::ProviderMessage::from(provider_messages()[0].clone());
    body!(&mut hello, PBody::Hello).version = hostile.clone();
    body!(&mut hello, PBody::Hello)
        .replica
        .as_mut()
        .unwrap()
        .host = hostile.clone();
    let ProviderBody::Hello(h) = ProviderMessage::try_from(hello).unwrap().body else {
        panic!("a hello");
    };
    clean(&h.version);
    clean(&h.replica.host);
    let mut catalog = pb::ProviderMessage::from(provider_messages()[1].clone());
    body!(&mut catalog, PBody::Catalog).classes[0].title = hostile.clone();
    let ProviderBody::Catalog(c) = ProviderMessage::try_from(catalog).unwrap().body else {
        panic!("a catalog");
    };
    clean(&c.classes[0].title);
}
