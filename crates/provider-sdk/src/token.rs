//! The one quote-token codec of orc's providers.
//!
//! A quote token carries everything an offer promised, so that any replica can carry out
//! the deploy the zone sends back with it (providers keep no state of their own). The zone
//! never reads inside a token. Its text is `<version>.` followed by the base64url (no
//! padding) of the payload's JSON; each provider names its own version (`p1` for the
//! partner, `m2` for the one-cloud adapter), so a token of another provider, or of an older
//! layout, is refused by name instead of being misread.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A token that is not one this codec can read as the expected version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the quote token is not a {expected} offer ({problem})")]
pub struct BadToken {
    /// The version the reader expected.
    pub expected: &'static str,
    /// What is wrong with the text.
    pub problem: &'static str,
}

/// The token text for `payload` under `version` (letters and digits, no dot).
pub fn encode_token<T: Serialize>(version: &'static str, payload: &T) -> String {
    // A payload of plain fields always serialises; an empty body would be refused on read.
    let json = serde_json::to_vec(payload).unwrap_or_default();
    format!("{version}.{}", URL_SAFE_NO_PAD.encode(json))
}

/// Reads a token written by [`encode_token`] with the same `version`.
pub fn decode_token<T: DeserializeOwned>(version: &'static str, text: &str) -> Result<T, BadToken> {
    let bad = |problem| BadToken {
        expected: version,
        problem,
    };
    let body = text
        .strip_prefix(version)
        .and_then(|rest| rest.strip_prefix('.'))
        .ok_or_else(|| bad("unknown version"))?;
    let json = URL_SAFE_NO_PAD
        .decode(body)
        .map_err(|_| bad("not base64url"))?;
    serde_json::from_slice(&json).map_err(|_| bad("not the expected fields"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Offer {
        node: String,
        plan: String,
        expires_ms: u64,
    }

    #[test]
    fn tokens_round_trip_and_other_text_is_refused_by_name() {
        let offer = Offer {
            node: "n-1".into(),
            plan: "cx23".into(),
            expires_ms: 10,
        };
        let text = encode_token("t1", &offer);
        assert!(text.starts_with("t1."), "{text}");
        assert_eq!(decode_token::<Offer>("t1", &text), Ok(offer));
        let problem = |text: &str| decode_token::<Offer>("t1", text).unwrap_err().problem;
        assert_eq!(problem("t2.e30"), "unknown version");
        assert_eq!(problem("t1e30"), "unknown version");
        assert_eq!(problem("t1.!!"), "not base64url");
        assert_eq!(problem("t1.e30"), "not the expected fields");
        assert_eq!(
            decode_token::<Offer>("t1", "fake").unwrap_err().to_string(),
            "the quote token is not a t1 offer (unknown version)"
        );
    }
}
