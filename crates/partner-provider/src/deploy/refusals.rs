//! Refusals of deploys and destroys, and the operator's log line for each: the tenant gets
//! the provider's generic words from `orc_partner::words`; the cloud's own words go to
//! DEBUG.

use orc_cloud::CloudError;
use orc_partner::admission::{Admission, RefusalReason};
use orc_partner::ids::SiteName;
use orc_partner::words;
use orc_proto as proto;

use crate::provider::{PartnerProvider, refused};
use crate::sites::SiteError;
use crate::token::OfferToken;

/// A deploy refused as failed with `words`.
pub(super) fn refuse(words: String) -> proto::DeployResult {
    proto::DeployResult::Refused(refused(proto::RefusalKind::Failed, words))
}

impl PartnerProvider {
    /// The refusal of a deploy of `node` into `site` that admission refused, logged for the
    /// operator (releasing the node's reservation where the reason says so); `None` when
    /// admitted.
    pub(super) fn refusal(
        &self,
        node: &str,
        site: &str,
        admission: Admission,
    ) -> Option<proto::DeployResult> {
        let Admission::Refused(r) = admission else {
            return None;
        };
        match r.reason {
            RefusalReason::UnreadableToken => {
                tracing::warn!(node = %node, "a deploy came with a quote token the partner cannot read");
            }
            RefusalReason::OtherNodesToken => {
                tracing::warn!(node = %node, site, "a deploy came with another node's quote token");
            }
            RefusalReason::Unmapped => {
                tracing::info!(node = %node, site, "The site of this offer is no longer mapped where the offer put it; the deploy fails");
            }
            RefusalReason::LiveElsewhere => {
                tracing::info!(node = %node, site, "The site is live at another place than the map gives it; the deploy fails");
            }
            RefusalReason::UnrecordableNodeId => {
                tracing::warn!(node = %node, "This node id cannot be recorded on a cloud instance (at most 63 letters, digits, '-', '_' or '.')");
            }
            RefusalReason::Unkeyed => {
                tracing::info!(node = %node, site, "The site's cloud has no key; the operator must add one");
            }
            RefusalReason::NoOwnerTag => {
                tracing::info!(node = %node, site, "The site's cloud has no owner tag; the operator must set one");
            }
            RefusalReason::Lapsed => {
                tracing::info!(node = %node, site, "The offer lapsed before the deploy; the node will be quoted again");
            }
            RefusalReason::Retired => {
                tracing::info!(node = %node, site, "The site's cloud is retired; it places no new node");
            }
        }
        if r.reason.releases_reservation() {
            self.shared.quotes.release(node);
        }
        Some(proto::DeployResult::Refused(refused(r.kind, r.words)))
    }

    pub(super) fn needs_operator(&self, token: &OfferToken) -> proto::Refusal {
        refused(
            proto::RefusalKind::OperatorFix,
            words::needs_operator(&token.node, &token.site),
        )
    }

    pub(super) fn failed(&self, token: &OfferToken) -> proto::Refusal {
        refused(
            proto::RefusalKind::Failed,
            words::could_not_create(&token.node, &token.site),
        )
    }

    /// The refusal for a site step that failed, logged for the operator.
    pub(super) fn site_failure(&self, token: &OfferToken, error: &SiteError) -> proto::Refusal {
        match error {
            SiteError::Cloud(e) => self.deploy_failure(token, e),
            SiteError::NoClient(cloud) => {
                tracing::info!(node = %token.node, site = %token.site, %cloud, "The site's cloud has no key; the operator must add one");
                self.needs_operator(token)
            }
            SiteError::NoPrefix => {
                tracing::warn!(node = %token.node, site = %token.site, "No private prefix is left for a new site; the operator must free one");
                self.needs_operator(token)
            }
            SiteError::UnknownLocation(location) => {
                tracing::warn!(node = %token.node, site = %token.site, %location, "The cloud does not list the site's location");
                self.failed(token)
            }
            SiteError::BadAddress(text) => {
                tracing::warn!(node = %token.node, site = %token.site, answer = %text, "the cloud answered an address the partner cannot read");
                self.failed(token)
            }
        }
    }

    /// The refusal for a cloud error during a deploy at `site`, logged for the operator.
    pub(crate) fn deploy_failure(&self, token: &OfferToken, error: &CloudError) -> proto::Refusal {
        let node = &token.node;
        let site = &token.site;
        tracing::debug!(node = %node, site = %site, error = %error, "the cloud's answer");
        if error.is_capacity() {
            let at = self.shared.now();
            self.shared.quotes.with(|state| {
                if let Ok(site) = SiteName::new(site.as_str()) {
                    state.cool_down(site, at);
                }
            });
            self.shared.quotes.release(node);
            tracing::info!(node = %node, site = %site, "The cloud has no room for this node here right now; the site sits out quotes for ten minutes");
            refused(
                proto::RefusalKind::NoCapacity,
                words::no_capacity(&self.class_title(&token.class)),
            )
        } else if error.retryable() {
            tracing::info!(node = %node, site = %site, "The node could not be finished at this site this time; it will be retried");
            refused(
                proto::RefusalKind::Transient,
                words::could_not_finish(&self.class_title(&token.class)),
            )
        } else {
            self.shared.quotes.release(node);
            tracing::info!(node = %node, site = %site, "The node could not be created at this site");
            refused(
                proto::RefusalKind::Failed,
                words::could_not_create(node, site),
            )
        }
    }

    /// The refusal when the site's stable IPv4 is still on the previous gateway (its
    /// delete has not finished): the zone tries again.
    pub(super) fn address_held(&self, token: &OfferToken, error: &CloudError) -> proto::Refusal {
        tracing::debug!(node = %token.node, site = %token.site, error = %error, "the cloud's answer");
        tracing::info!(node = %token.node, site = %token.site, "The site's stable address is still held by the previous gateway; the deploy will be retried");
        refused(
            proto::RefusalKind::Transient,
            words::could_not_finish(&self.class_title(&token.class)),
        )
    }
}
