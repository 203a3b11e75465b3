//! Every hostile assertion is refused, and valid ones are accepted across a key rotation.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::HeaderMap;
use orc_access::testing::{es256, header_of, headers, hostile_requests};
use orc_access::verify::RefusalStatus;
use orc_access::{
    Assertion, KeyRing, KeySource, KeysUrl, Refusal, SigningKey, Verifier, VerifierOptions,
};
use serde_json::Value;

const ZONE: &str = "https://orc.localhost:7443";
const NOW: u64 = 1_800_000_000;

/// A JWKS served from memory, counting fetches.
struct Published {
    jwks: Mutex<String>,
    fetches: AtomicUsize,
}

impl Published {
    fn new(ring: &KeyRing) -> Published {
        Published {
            jwks: Mutex::new(ring.jwks().to_string()),
            fetches: AtomicUsize::new(0),
        }
    }

    fn publish(&self, ring: &KeyRing) {
        *self.jwks.lock().unwrap() = ring.jwks().to_string();
    }
}

impl KeySource for &Published {
    async fn fetch(&self) -> Result<String, String> {
        self.fetches.fetch_add(1, Ordering::SeqCst);
        Ok(self.jwks.lock().unwrap().clone())
    }
}

fn claims() -> Assertion {
    Assertion {
        iss: ZONE.to_string(),
        sub: "user:ada".to_string(),
        name: "Ada".to_string(),
        org: "sys".to_string(),
        aud: "sys/partner/admin".to_string(),
        iat: NOW - 10,
        exp: NOW + 290,
        jti: "a-1".to_string(),
    }
}

fn verifier(published: &Published) -> Verifier<&Published> {
    Verifier::new(
        VerifierOptions::new(ZONE, "sys", "sys/partner/admin"),
        published,
    )
}

#[tokio::test]
async fn every_hostile_assertion_is_refused() {
    let key = SigningKey::generate().unwrap();
    let ring = KeyRing::new(key.clone());
    let published = Published::new(&ring);
    let verifier = verifier(&published);
    let good = ring.sign(&claims()).unwrap();
    assert!(
        verifier.verify(&headers(&[&good]), NOW).await.is_ok(),
        "the valid assertion the cases are made from checks"
    );
    let forged_right = es256(
        &key,
        &header_of(&key),
        &serde_json::to_value(claims()).unwrap(),
    );
    assert!(
        verifier
            .verify(&headers(&[&forged_right]), NOW)
            .await
            .is_ok(),
        "the hand-made signing of the cases makes assertions that check"
    );
    let s64 = good.rsplit('.').next().unwrap();
    let cases = hostile_requests(&key, &ring, &claims(), NOW);
    assert!(cases.len() >= 40, "{} cases", cases.len());
    let mut accepted = Vec::new();
    for (name, request) in &cases {
        match verifier.verify(request, NOW).await {
            Ok(_) => accepted.push(*name),
            Err(Refusal { reason, .. }) => {
                assert!(
                    !reason.contains(&good[..20]) && !reason.contains(s64),
                    "{name}: the reason repeats the token: {reason}"
                );
            }
        }
    }
    assert!(accepted.is_empty(), "accepted: {accepted:?}");
}

#[tokio::test]
async fn a_valid_assertion_for_another_endpoint_is_forbidden_and_a_broken_one_unauthorized() {
    let ring = KeyRing::new(SigningKey::generate().unwrap());
    let published = Published::new(&ring);
    let verifier = verifier(&published);
    let other = Assertion {
        aud: "web/app/http".to_string(),
        ..claims()
    };
    let refused = verifier
        .verify(&headers(&[&ring.sign(&other).unwrap()]), NOW)
        .await
        .unwrap_err();
    assert_eq!(refused.status, RefusalStatus::Forbidden);
    assert_eq!(refused.status.code(), 403);
    assert!(
        refused.reason.contains("web/app/http"),
        "{}",
        refused.reason
    );
    let missing = verifier.verify(&HeaderMap::new(), NOW).await.unwrap_err();
    assert_eq!(missing.status.code(), 401);
    assert!(missing.reason.contains("access edge"), "{}", missing.reason);
}

#[tokio::test]
async fn assertions_check_across_a_key_rotation_and_unknown_kids_fetch_at_most_once_per_interval() {
    let first = SigningKey::generate().unwrap();
    let mut ring = KeyRing::new(first.clone());
    let published = Published::new(&ring);
    let verifier = verifier(&published);
    let by_first = ring.sign(&claims()).unwrap();
    let ok = verifier.verify(&headers(&[&by_first]), NOW).await.unwrap();
    assert_eq!(ok, claims());
    assert_eq!(published.fetches.load(Ordering::SeqCst), 1);
    // Cached: no fetch for a known kid.
    verifier
        .verify(&headers(&[&by_first]), NOW + 1)
        .await
        .unwrap();
    assert_eq!(published.fetches.load(Ordering::SeqCst), 1);

    // Rotated: the new key signs, the old one stays published for an hour.
    let second = SigningKey::generate().unwrap();
    ring.rotate(second.clone(), NOW, 3600);
    published.publish(&ring);
    let later = NOW + 60;
    let fresh = Assertion {
        iat: later,
        exp: later + 300,
        ..claims()
    };
    let by_second = ring.sign(&fresh).unwrap();
    let signed_header: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(by_second.split('.').next().unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(signed_header, header_of(&second), "the new key signs");
    // Within the refetch interval of the first fetch, an unknown kid does not fetch again.
    assert!(
        verifier
            .verify(&headers(&[&by_second]), NOW + 10)
            .await
            .is_err()
    );
    assert_eq!(published.fetches.load(Ordering::SeqCst), 2 - 1);
    verifier
        .verify(&headers(&[&by_second]), later)
        .await
        .unwrap();
    assert_eq!(published.fetches.load(Ordering::SeqCst), 2);
    let old_but_valid = Assertion {
        iat: later,
        exp: later + 300,
        jti: "a-2".to_string(),
        ..claims()
    };
    let by_first_later = first.sign(&old_but_valid).unwrap();
    verifier
        .verify(&headers(&[&by_first_later]), later)
        .await
        .expect("the retiring key still checks during the overlap");
    // Unknown kids in a burst: one fetch per interval at most.
    let stranger = SigningKey::generate().unwrap().sign(&fresh).unwrap();
    for _ in 0..5 {
        assert!(
            verifier
                .verify(&headers(&[&stranger]), later + 40)
                .await
                .is_err()
        );
    }
    assert_eq!(published.fetches.load(Ordering::SeqCst), 3);

    // The overlap ends: the first key is retired and no longer checks, the second does.
    let end = NOW + 3600;
    assert_eq!(ring.retire(end), vec![first.kid().to_string()]);
    published.publish(&ring);
    let jwks = ring.jwks();
    assert_eq!(jwks["keys"].as_array().unwrap().len(), 1);
    let fresh_verifier = crate::verifier(&published);
    let at_end = Assertion {
        iat: end,
        exp: end + 300,
        ..claims()
    };
    assert!(
        fresh_verifier
            .verify(&headers(&[&first.sign(&at_end).unwrap()]), end)
            .await
            .is_err()
    );
    fresh_verifier
        .verify(&headers(&[&second.sign(&at_end).unwrap()]), end)
        .await
        .unwrap();
}

#[test]
fn keys_urls_are_https_only() {
    for bad in [
        "http://orc.localhost:8080/.well-known/orc-access/jwks.json",
        "HTTP://orc.localhost/x",
        "ftp://orc.localhost/jwks.json",
        "orc.localhost/jwks.json",
        "https:///jwks.json",
        "https://user@orc.localhost/jwks.json",
        "",
    ] {
        let error = KeysUrl::parse(bad).unwrap_err();
        assert!(
            error.to_string().contains("access_keys_url"),
            "{bad}: {error}"
        );
    }
    let url =
        KeysUrl::parse("https://orc.localhost:7443/.well-known/orc-access/jwks.json").unwrap();
    assert_eq!(
        url.as_str(),
        "https://orc.localhost:7443/.well-known/orc-access/jwks.json"
    );
}

#[test]
fn the_jwks_publishes_no_private_part_and_a_stored_key_reads_back() {
    let key = SigningKey::generate().unwrap();
    let jwk = key.jwk();
    let fields: Vec<&str> = jwk
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(fields, ["alg", "crv", "kid", "kty", "use", "x", "y"]);
    assert!(!format!("{key:?}").contains(&URL_SAFE_NO_PAD.encode(key.pkcs8())));
    let again = SigningKey::from_pkcs8(Some(key.kid()), key.pkcs8()).unwrap();
    assert_eq!(again.jwk(), jwk);
    let broken = SigningKey::from_pkcs8(Some("orc-x"), b"not a key").unwrap_err();
    assert!(broken.to_string().contains("orc-x"), "{broken}");
}
