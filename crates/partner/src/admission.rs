//! Deploy admission: the checks a deploy makes before it touches a cloud, as a pure
//! decision over the config, what the quote token offered, the site guard's view and the
//! time.
//!
//! Two steps, because one fact needs a cloud lookup in between:
//! - [`admit`] runs first, on every deploy: the token is readable and for this node, the
//!   offer's site is still mapped to that cloud and location, the site is not live
//!   elsewhere ([`crate::state::QuoteState::live_at`]), the node id can be recorded as a
//!   mark, and the cloud holds a key and an owner tag;
//! - [`admit_create`] runs only when the node has no instance yet (a found instance is
//!   carried on whatever the offer's age): the offer has not lapsed and its cloud is not
//!   retired (a retired cloud still replaces gateways of its live sites).
//!
//! Invariants: never reads a clock, never calls a cloud, never panics; a refusal carries
//! its kind, the tenant's words from [`crate::words`] and the [`RefusalReason`] the
//! operator's log line names.

use crate::ids::{Cloud, Timestamp};
use crate::params::Config;
use crate::quote::RefusalKind;
use crate::state::LiveSite;
use crate::words;

/// What a quote token offered, as the deploy reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offered<'a> {
    pub node: &'a str,
    pub class: &'a str,
    pub site: &'a str,
    pub cloud: Cloud,
    pub location: &'a str,
    /// A site gateway rather than a tenant node.
    pub gateway: bool,
    /// When the offer lapses.
    pub expires: Timestamp,
}

/// Why a deploy was refused before any cloud was touched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RefusalReason {
    /// The quote token cannot be read.
    UnreadableToken,
    /// The quote token was made for another node.
    OtherNodesToken,
    /// The map no longer puts the offer's site at the offer's cloud location.
    Unmapped,
    /// The site is live at another cloud location than the map gives it.
    LiveElsewhere,
    /// The node id cannot be written as a mark (at most 63 letters, digits, `-`, `_`, `.`).
    UnrecordableNodeId,
    /// The site's cloud holds no key.
    Unkeyed,
    /// The site's cloud has no owner tag to mark instances with.
    NoOwnerTag,
    /// The offer lapsed before the deploy.
    Lapsed,
    /// The site's cloud is retired: it places no new tenant node.
    Retired,
}

impl RefusalReason {
    /// Whether the node's reservation is released (the zone quotes it afresh).
    pub fn releases_reservation(self) -> bool {
        match self {
            RefusalReason::Lapsed | RefusalReason::Retired => true,
            RefusalReason::UnreadableToken
            | RefusalReason::OtherNodesToken
            | RefusalReason::Unmapped
            | RefusalReason::LiveElsewhere
            | RefusalReason::UnrecordableNodeId
            | RefusalReason::Unkeyed
            | RefusalReason::NoOwnerTag => false,
        }
    }
}

/// A deploy refused: its kind, the tenant's words, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub kind: RefusalKind,
    pub words: String,
    pub reason: RefusalReason,
}

/// The answer of an admission step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    Admitted,
    Refused(Refused),
}

/// Whether `value` can be written as a mark value on every cloud (a Hetzner label value is
/// the strictest): 1 to 63 letters, digits, `-`, `_` and `.`, beginning and ending with a
/// letter or digit.
pub fn is_mark_value(value: &str) -> bool {
    let bytes = value.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

fn refused(kind: RefusalKind, words: String, reason: RefusalReason) -> Admission {
    Admission::Refused(Refused {
        kind,
        words,
        reason,
    })
}

/// The checks every deploy of `node` makes; `offer` is `None` when its token cannot be
/// read, and `live` is where the guard last saw the offer's site live.
pub fn admit(
    config: &Config,
    node: &str,
    offer: Option<&Offered<'_>>,
    live: Option<&LiveSite>,
) -> Admission {
    let failed = |site: &str, reason| {
        refused(
            RefusalKind::Failed,
            words::could_not_create(node, site),
            reason,
        )
    };
    let Some(offer) = offer else {
        return failed("(unknown)", RefusalReason::UnreadableToken);
    };
    if offer.node != node {
        return failed(offer.site, RefusalReason::OtherNodesToken);
    }
    let Some((_, mapped)) = config.regions.site(offer.site) else {
        return failed(offer.site, RefusalReason::Unmapped);
    };
    if mapped.cloud != offer.cloud || mapped.location.as_str() != offer.location {
        return failed(offer.site, RefusalReason::Unmapped);
    }
    if live.is_some_and(|l| l.cloud != mapped.cloud || l.location != mapped.location) {
        return failed(offer.site, RefusalReason::LiveElsewhere);
    }
    if !is_mark_value(node) {
        return failed(offer.site, RefusalReason::UnrecordableNodeId);
    }
    let needs_operator = |reason| {
        refused(
            RefusalKind::OperatorFix,
            words::needs_operator(node, offer.site),
            reason,
        )
    };
    let Some(cloud) = config.cloud(offer.cloud).filter(|c| c.is_keyed()) else {
        return needs_operator(RefusalReason::Unkeyed);
    };
    if cloud.owner_tag.is_none() && cloud.also_owned_tags.is_empty() {
        return needs_operator(RefusalReason::NoOwnerTag);
    }
    Admission::Admitted
}

/// The further checks of a deploy that creates the node's instance (none was found), at
/// `now`.
pub fn admit_create(config: &Config, offer: &Offered<'_>, now: Timestamp) -> Admission {
    if now >= offer.expires {
        return refused(
            RefusalKind::Failed,
            words::could_not_create(offer.node, offer.site),
            RefusalReason::Lapsed,
        );
    }
    let enabled = config.cloud(offer.cloud).is_some_and(|c| c.enabled);
    if !enabled && !offer.gateway {
        let title = config
            .regions
            .class(offer.class)
            .map_or_else(|| offer.class.to_string(), |c| c.title.clone());
        return refused(
            RefusalKind::NoCapacity,
            words::no_capacity(&title),
            RefusalReason::Retired,
        );
    }
    Admission::Admitted
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::LocationId;
    use crate::params::{MapSource, load_config};

    fn config(extra: &[(&str, &str)]) -> Config {
        let mut source = MapSource::new()
            .param("partner_id", "zone-1")
            .param("hetzner_api_token", "k")
            .param("hetzner_owner_tag", "t");
        for (name, value) in extra {
            source = source.param(name, value);
        }
        load_config(&source).unwrap()
    }

    fn offer() -> Offered<'static> {
        Offered {
            node: "n-1",
            class: "eu-central",
            site: "eu-central-a",
            cloud: Cloud::Hetzner,
            location: "fsn1",
            gateway: false,
            expires: Timestamp::from_unix_millis(1_000),
        }
    }

    fn reason(admission: Admission) -> Option<RefusalReason> {
        match admission {
            Admission::Admitted => None,
            Admission::Refused(r) => Some(r.reason),
        }
    }

    #[test]
    fn a_current_offer_for_this_node_is_admitted() {
        let cfg = config(&[]);
        let live = LiveSite {
            cloud: Cloud::Hetzner,
            location: LocationId::new("fsn1").unwrap(),
        };
        assert_eq!(
            admit(&cfg, "n-1", Some(&offer()), None),
            Admission::Admitted
        );
        assert_eq!(
            admit(&cfg, "n-1", Some(&offer()), Some(&live)),
            Admission::Admitted,
            "live where the map puts it"
        );
        let now = Timestamp::from_unix_millis(999);
        assert_eq!(admit_create(&cfg, &offer(), now), Admission::Admitted);
    }

    #[test]
    fn unreadable_or_foreign_tokens_fail_in_neutral_words() {
        let cfg = config(&[]);
        match admit(&cfg, "n-1", None, None) {
            Admission::Refused(r) => {
                assert_eq!(r.reason, RefusalReason::UnreadableToken);
                assert_eq!(r.kind, RefusalKind::Failed);
                assert_eq!(r.words, words::could_not_create("n-1", "(unknown)"));
            }
            Admission::Admitted => panic!("admitted"),
        }
        let other = Offered {
            node: "n-2",
            ..offer()
        };
        match admit(&cfg, "n-1", Some(&other), None) {
            Admission::Refused(r) => {
                assert_eq!(r.reason, RefusalReason::OtherNodesToken);
                assert_eq!(r.words, words::could_not_create("n-1", "eu-central-a"));
            }
            Admission::Admitted => panic!("admitted"),
        }
    }

    #[test]
    fn an_offer_at_a_place_the_map_no_longer_gives_fails() {
        let cfg = config(&[]);
        let moved = Offered {
            location: "nbg1",
            ..offer()
        };
        assert_eq!(
            reason(admit(&cfg, "n-1", Some(&moved), None)),
            Some(RefusalReason::Unmapped)
        );
        let other_cloud = Offered {
            cloud: Cloud::Vultr,
            ..offer()
        };
        assert_eq!(
            reason(admit(&cfg, "n-1", Some(&other_cloud), None)),
            Some(RefusalReason::Unmapped)
        );
        let gone = Offered {
            site: "no-such-site",
            ..offer()
        };
        assert_eq!(
            reason(admit(&cfg, "n-1", Some(&gone), None)),
            Some(RefusalReason::Unmapped)
        );
    }

    #[test]
    fn a_site_live_elsewhere_fails_without_naming_the_place() {
        let cfg = config(&[]);
        let live = LiveSite {
            cloud: Cloud::Hetzner,
            location: LocationId::new("nbg1").unwrap(),
        };
        match admit(&cfg, "n-1", Some(&offer()), Some(&live)) {
            Admission::Refused(r) => {
                assert_eq!(r.reason, RefusalReason::LiveElsewhere);
                assert_eq!(r.kind, RefusalKind::Failed);
                for name in ["hetzner", "fsn1", "nbg1", "Falkenstein", "Nuremberg"] {
                    assert!(!r.words.contains(name), "{}", r.words);
                }
            }
            Admission::Admitted => panic!("admitted"),
        }
    }

    #[test]
    fn a_node_id_that_cannot_be_a_mark_fails() {
        let cfg = config(&[]);
        let long = "n".repeat(64);
        for node in ["n_1/x", "-n1", long.as_str()] {
            let o = Offered { node, ..offer() };
            assert_eq!(
                reason(admit(&cfg, node, Some(&o), None)),
                Some(RefusalReason::UnrecordableNodeId),
                "{node}"
            );
        }
        assert!(is_mark_value("a.b_c-1") && !is_mark_value("") && !is_mark_value("a-"));
    }

    #[test]
    fn an_unkeyed_cloud_needs_the_operator() {
        let cfg = load_config(
            &MapSource::new()
                .param("partner_id", "zone-1")
                .param("vultr_api_key", "k")
                .param("vultr_owner_tag", "t"),
        )
        .unwrap();
        match admit(&cfg, "n-1", Some(&offer()), None) {
            Admission::Refused(r) => {
                assert_eq!(r.reason, RefusalReason::Unkeyed);
                assert_eq!(r.kind, RefusalKind::OperatorFix);
                assert_eq!(r.words, words::needs_operator("n-1", "eu-central-a"));
            }
            Admission::Admitted => panic!("admitted"),
        }
    }

    #[test]
    fn a_keyed_cloud_without_an_owner_tag_needs_the_operator() {
        let mut cfg = config(&[]);
        if let Some(cloud) = cfg.clouds.get_mut(&Cloud::Hetzner) {
            cloud.owner_tag = None;
            cloud.also_owned_tags.clear();
        }
        assert_eq!(
            reason(admit(&cfg, "n-1", Some(&offer()), None)),
            Some(RefusalReason::NoOwnerTag)
        );
    }

    #[test]
    fn a_lapsed_offer_fails_and_releases_its_reservation() {
        let cfg = config(&[]);
        match admit_create(&cfg, &offer(), Timestamp::from_unix_millis(1_000)) {
            Admission::Refused(r) => {
                assert_eq!(r.reason, RefusalReason::Lapsed);
                assert_eq!(r.kind, RefusalKind::Failed);
                assert_eq!(r.words, words::could_not_create("n-1", "eu-central-a"));
                assert!(r.reason.releases_reservation());
            }
            Admission::Admitted => panic!("admitted"),
        }
    }

    #[test]
    fn a_retired_cloud_places_no_tenant_node_but_replaces_gateways() {
        let cfg = config(&[("hetzner_enabled", "false")]);
        let now = Timestamp::from_unix_millis(0);
        match admit_create(&cfg, &offer(), now) {
            Admission::Refused(r) => {
                assert_eq!(r.reason, RefusalReason::Retired);
                assert_eq!(r.kind, RefusalKind::NoCapacity);
                let title = &cfg.regions.class("eu-central").unwrap().title;
                assert_eq!(r.words, words::no_capacity(title));
                assert!(r.reason.releases_reservation());
            }
            Admission::Admitted => panic!("admitted"),
        }
        let gateway = Offered {
            gateway: true,
            ..offer()
        };
        assert_eq!(admit_create(&cfg, &gateway, now), Admission::Admitted);
        assert!(!RefusalReason::Unmapped.releases_reservation());
    }
}
