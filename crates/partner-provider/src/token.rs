//! Quote tokens: what an offer promised, carried by the zone back to the deploy.
//!
//! A token is version `p1` of the providers' one codec ([`orc_provider_sdk::token`]): a
//! small JSON object naming the node, class, site, cloud, location, plan, image, exchange
//! rate, account price and expiry.
//! It is self-contained on purpose: the partner keeps no state of its own, so a deploy sent
//! to another replica after a failover must still know exactly what was offered. The zone
//! never reads inside a token; the partner trusts it as much as it trusts the zone.

use orc_partner::admission::Offered;
use orc_partner::ids::{Cloud, Timestamp};
pub use orc_provider_sdk::token::BadToken;
use orc_provider_sdk::token::{decode_token, encode_token};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

/// The partner's token version ([`orc_provider_sdk::token`]).
const VERSION: &str = "p1";

/// The content of a quote token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OfferToken {
    pub node: String,
    pub class: String,
    pub site: String,
    pub cloud: Cloud,
    pub location: String,
    pub plan: String,
    pub image: String,
    /// `true` for a site gateway.
    pub gateway: bool,
    /// USD per unit of the account currency; `None`: unpriced.
    pub rate: Option<Decimal>,
    /// Plan price per month in the account currency.
    pub account_monthly: Decimal,
    /// Milliseconds since the Unix epoch after which the offer lapses.
    pub expires_ms: i64,
    /// The node's pool (`<org>/<project>/<name>`).
    #[serde(default)]
    pub pool: String,
    /// The pool exposes an endpoint publicly (it gets a pool address at its site).
    #[serde(default)]
    pub public: bool,
    /// Sizes of the extra disks, GiB.
    #[serde(default)]
    pub disks_gib: Vec<u32>,
}

impl OfferToken {
    /// The token text.
    pub fn encode(&self) -> String {
        encode_token(VERSION, self)
    }

    /// Reads a token.
    pub fn decode(text: &str) -> Result<OfferToken, BadToken> {
        decode_token(VERSION, text)
    }

    /// What the offer promised, as deploy admission reads it.
    pub fn offered(&self) -> Offered<'_> {
        Offered {
            node: &self.node,
            class: &self.class,
            site: &self.site,
            cloud: self.cloud,
            location: &self.location,
            gateway: self.gateway,
            expires: Timestamp::from_unix_millis(self.expires_ms),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_foreign_text_is_refused() {
        let t = OfferToken {
            node: "n-1".into(),
            class: "eu-central".into(),
            site: "eu-central-a".into(),
            cloud: Cloud::ALL[0],
            location: "fsn1".into(),
            plan: "cx23".into(),
            image: "200000003".into(),
            gateway: false,
            rate: None,
            account_monthly: "6.5331".parse().unwrap(),
            expires_ms: 10,
            pool: "acme/web/api".into(),
            public: true,
            disks_gib: vec![20],
        };
        let text = t.encode();
        assert!(text.starts_with("p1."), "{text}");
        assert_eq!(OfferToken::decode(&text), Ok(t.clone()));
        assert_eq!(t.offered().expires, Timestamp::from_unix_millis(10));
        assert_eq!(t.offered().site, "eu-central-a");
        assert!(OfferToken::decode("fake-token").is_err());
        assert!(OfferToken::decode("p1.!!").is_err());
        assert!(OfferToken::decode("p1.e30").is_err());
    }
}
