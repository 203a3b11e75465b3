//! The typed identifiers of orc's one vocabulary: the protocol, the partner, the providers
//! and the zone all name a node, a pool, a site, a class or an OS with these types.
//!
//! Each is a non-empty string newtype, so a node id can never be passed where a site name
//! is expected, and none is ever empty: construction ([`NodeId::new`], [`TryFrom`],
//! [`FromStr`](std::str::FromStr), serde) refuses an empty value, naming the kind of id.
//! The naming rules of a particular source (a tenant's pool name, an operator's site map)
//! are its parser's job; these types only give a checked value its type.

/// An id was empty.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} must not be empty")]
pub struct EmptyId {
    /// Which kind of id was empty, e.g. "node id".
    pub kind: &'static str,
}

/// Declares a non-empty string id type: `string_id!(/// docs\n Name, "kind of id");`. The one
/// id macro of the workspace; the kind names the id in the error for an empty value.
#[macro_export]
macro_rules! string_id {
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
    };
}

string_id!(
    /// A node's id, assigned by the zone. The idempotency key of deploy and destroy.
    NodeId,
    "node id"
);
string_id!(
    /// A pool's id, `<org>/<project>/<name>`.
    PoolId,
    "pool id"
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
