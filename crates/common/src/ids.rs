//! The typed identifiers of orc's one vocabulary: the protocol, the partner, the providers
//! and the zone all name a node, a pool, a site, a class or an OS with these types.
//!
//! Each is a non-empty string newtype, so a node id can never be passed where a site name
//! is expected, and none is ever empty: construction ([`NodeId::new`], [`TryFrom`],
//! [`FromStr`](std::str::FromStr), serde) refuses an empty value, naming the kind of id.
//! The naming rules of a particular source (a tenant's pool name, an operator's site map)
//! are its parser's job; these types only give a checked value its type.
//!
//! The same macro also declares *counter ids*, `string_id!(Name, "kind", prefix "x-")`: ids a
//! zone mints from its one monotonic counter, `<prefix><12 base32 digits>` (e.g.
//! `pl-0000000000ab`), so they sort in creation order, never repeat and are DNS labels.
//! Parsing one checks the prefix and the digits ([`MalformedId`]).

/// An id was empty.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} must not be empty")]
pub struct EmptyId {
    /// Which kind of id was empty, e.g. "node id".
    pub kind: &'static str,
}

/// A counter id whose text is not its kind's prefix followed by [`COUNTER_DIGITS`] base32
/// digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{} is not a valid {kind} id (expected {prefix} followed by 12 base32 digits)",
    crate::text::quoted(.value)
)]
pub struct MalformedId {
    /// Which kind of id, e.g. "pool".
    pub kind: &'static str,
    /// The prefix every id of the kind starts with.
    pub prefix: &'static str,
    /// The text that was refused.
    pub value: String,
}

/// Digits of a counter id's counter part: Crockford base32 in lower case (no i, l, o, u), so
/// the fixed-width text sorts like the number.
const COUNTER_ALPHABET: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";
/// Width of a counter id's counter part: 12 base32 digits hold 60 bits.
pub const COUNTER_DIGITS: usize = 12;

/// The text of the counter id `prefix` + `value`.
pub fn counter_text(prefix: &str, mut value: u64) -> String {
    let mut digits = [b'0'; COUNTER_DIGITS];
    for slot in digits.iter_mut().rev() {
        *slot = COUNTER_ALPHABET[(value & 31) as usize];
        value >>= 5;
    }
    let mut text = String::with_capacity(prefix.len() + COUNTER_DIGITS);
    text.push_str(prefix);
    text.extend(digits.iter().map(|&b| char::from(b)));
    text
}

/// Whether `text` is a counter id of `prefix`.
pub fn is_counter_text(prefix: &str, text: &str) -> bool {
    text.strip_prefix(prefix).is_some_and(|rest| {
        rest.len() == COUNTER_DIGITS && rest.bytes().all(|b| COUNTER_ALPHABET.contains(&b))
    })
}

/// Declares a non-empty string id type: `string_id!(/// docs\n Name, "kind of id");`. The one
/// id macro of the workspace; the kind names the id in the error for an empty value. With
/// `prefix "x-"` it declares a counter id instead (see the module docs).
#[macro_export]
macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident, $kind:literal, prefix $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, ::serde::Serialize, ::serde::Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// The prefix every id of this kind starts with.
            pub const PREFIX: &'static str = $prefix;

            /// The id minted from counter value `value`.
            pub fn from_counter(value: u64) -> Self {
                $name($crate::ids::counter_text($prefix, value))
            }

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::ids::MalformedId;
            fn from_str(value: &str) -> Result<Self, $crate::ids::MalformedId> {
                if $crate::ids::is_counter_text($prefix, value) {
                    Ok($name(value.to_string()))
                } else {
                    Err($crate::ids::MalformedId { kind: $kind, prefix: $prefix, value: value.to_string() })
                }
            }
        }

        impl TryFrom<String> for $name {
            type Error = $crate::ids::MalformedId;
            fn try_from(value: String) -> Result<Self, $crate::ids::MalformedId> {
                value.parse()
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl ::std::fmt::Debug for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, ::serde::Serialize, ::serde::Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// Builds the id, refusing an empty string.
            pub fn new(value: impl Into<String>) -> Result<Self, $crate::ids::EmptyId> {
                let value = value.into();
                if value.is_empty() {
                    Err($crate::ids::EmptyId { kind: $kind })
                } else {
                    Ok(Self(value))
                }
            }

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The id as an owned string.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = $crate::ids::EmptyId;
            fn try_from(value: String) -> Result<Self, $crate::ids::EmptyId> {
                Self::new(value)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = $crate::ids::EmptyId;
            fn try_from(value: &str) -> Result<Self, $crate::ids::EmptyId> {
                Self::new(value)
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::ids::EmptyId;
            fn from_str(value: &str) -> Result<Self, $crate::ids::EmptyId> {
                Self::new(value)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }
    };
}

string_id!(
    /// A node's id, assigned by the zone. The idempotency key of deploy and destroy.
    NodeId,
    "node id"
);
impl NodeId {
    /// The prefix of the node ids a zone mints.
    pub const ZONE_PREFIX: &'static str = "n-";

    /// The node id a zone mints from its counter value `value` (`n-` and 12 base32 digits).
    pub fn from_counter(value: u64) -> Self {
        NodeId(counter_text(Self::ZONE_PREFIX, value))
    }

    /// Parses a node id a zone minted, refusing any other text.
    pub fn parse_minted(text: &str) -> Result<Self, MalformedId> {
        if is_counter_text(Self::ZONE_PREFIX, text) {
            Ok(NodeId(text.to_string()))
        } else {
            Err(MalformedId {
                kind: "node",
                prefix: Self::ZONE_PREFIX,
                value: text.to_string(),
            })
        }
    }
}

string_id!(
    /// A pool's path, `<org>/<project>/<name>`: how the protocol names the pool a node
    /// belongs to (a zone's own pool ids are counter ids).
    PoolPath,
    "pool path"
);
string_id!(
    /// A neutral site name such as `eu-central-a`; the only location the zone records.
    SiteName,
    "site name"
);
string_id!(
    /// A region class id such as `eu-central`.
    ClassId,
    "class id"
);
string_id!(
    /// An operating system id offered in the catalog, e.g. `debian-12`.
    OsId,
    "os id"
);
string_id!(
    /// The provider's own, opaque reference to an instance.
    InstanceRef,
    "instance ref"
);
string_id!(
    /// A provider's name, e.g. `partner`.
    ProviderName,
    "provider name"
);
string_id!(
    /// The URI of the resource a replica offers, e.g. `urn:orc:partner:acme`.
    ResourceUri,
    "resource uri"
);
string_id!(
    /// An opaque token from an offer, handed back in the deploy that accepts it.
    QuoteToken,
    "quote token"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_ids_are_refused_by_kind() {
        assert_eq!(
            NodeId::new("").unwrap_err().to_string(),
            "node id must not be empty"
        );
        assert_eq!(SiteName::try_from("").unwrap_err().kind, "site name");
        assert_eq!(NodeId::new("n-1").unwrap().as_str(), "n-1");
    }

    string_id!(
        /// A counter id for the tests.
        ThingId,
        "thing",
        prefix "th-"
    );

    #[test]
    fn counter_ids_sort_like_their_counter_and_refuse_other_text() {
        let a = ThingId::from_counter(31);
        let b = ThingId::from_counter(32);
        assert!(a < b);
        assert_eq!(b.as_str(), "th-000000000010");
        assert_eq!("th-000000000010".parse::<ThingId>().unwrap(), b);
        assert_eq!(
            ThingId::from_counter(u64::MAX >> 4).as_str().len(),
            "th-".len() + COUNTER_DIGITS
        );
        let err = "pl-000000000010".parse::<ThingId>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "\"pl-000000000010\" is not a valid thing id (expected th- followed by 12 base32 digits)"
        );
        assert!(
            "th-00000000001i".parse::<ThingId>().is_err(),
            "i is not a digit"
        );
        assert!("th-0000000001".parse::<ThingId>().is_err(), "too short");
        let json = serde_json::to_string(&b).unwrap();
        assert_eq!(serde_json::from_str::<ThingId>(&json).unwrap(), b);
        assert!(serde_json::from_str::<ThingId>("\"th-x\"").is_err());
    }

    #[test]
    fn ids_travel_as_plain_strings_and_refuse_empty_ones() {
        let site = SiteName::new("eu-central-a").unwrap();
        assert_eq!(serde_json::to_string(&site).unwrap(), "\"eu-central-a\"");
        let back: SiteName = serde_json::from_str("\"eu-central-a\"").unwrap();
        assert_eq!(back, site);
        let empty = serde_json::from_str::<SiteName>("\"\"").unwrap_err();
        assert!(
            empty.to_string().contains("site name must not be empty"),
            "{empty}"
        );
    }
}
