//! Every hostile assertion is refused, and valid ones are accepted across a key rotation.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use base64::Engine as _;
use base64::engine::general_purpose::{URL_SAFE, URL_SAFE_NO_PAD};
use http::{HeaderMap, HeaderValue};
use orc_access::verify::RefusalStatus;
use orc_access::{
    ASSERTION_HEADER, Assertion, KeyRing, KeySource, KeysUrl, Refusal, SigningKey, Verifier,
    VerifierOptions,
};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
use serde_json::{Value, json};

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

fn headers(values: &[&str]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for value in values {
        map.append(ASSERTION_HEADER, HeaderValue::from_str(value).unwrap());
    }
    map
}

fn b64(value: &Value) -> String {
    URL_SAFE_NO_PAD.encode(value.to_string())
}

/// Signs `header.claims` with ES256 and `key`, whatever the header says.
fn es256(key: &SigningKey, header: &Value, claims: &Value) -> String {
    let input = format!("{}.{}", b64(header), b64(claims));
    let pair = EcdsaKeyPair::from_pkcs8(
        &ECDSA_P256_SHA256_FIXED_SIGNING,
        key.pkcs8(),
        &SystemRandom::new(),
    )
    .unwrap();
    let signature = pair.sign(&SystemRandom::new(), input.as_bytes()).unwrap();
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref()))
}

/// Signs `header.claims` with HMAC (`algorithm`) keyed with `secret`.
fn hmac(algorithm: ring::hmac::Algorithm, secret: &[u8], header: &Value, claims: &Value) -> String {
    let input = format!("{}.{}", b64(header), b64(claims));
    let tag = ring::hmac::sign(&ring::hmac::Key::new(algorithm, secret), input.as_bytes());
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
}

fn header_of(key: &SigningKey) -> Value {
    json!({ "alg": "ES256", "typ": "JWT", "kid": key.kid() })
}

fn claims_json() -> Value {
    serde_json::to_value(claims()).unwrap()
}

fn with(mut claims: Value, field: &str, value: Value) -> Value {
    claims[field] = value;
    claims
}

fn without(mut claims: Value, field: &str) -> Value {
    claims.as_object_mut().unwrap().remove(field);
    claims
}

fn set_header(mut header: Value, field: &str, value: Value) -> Value {
    header[field] = value;
    header
}

#[tokio::test]
async fn every_hostile_assertion_is_refused() {
    let key = SigningKey::generate().unwrap();
    let ring = KeyRing::new(key.clone());
    let published = Published::new(&ring);
    let verifier = verifier(&published);
    let attacker = SigningKey::generate().unwrap();
    // Another zone's key under this zone's kid.
    let impostor = SigningKey::from_pkcs8(Some(key.kid()), attacker.pkcs8()).unwrap();
    let good = ring.sign(&claims()).unwrap();
    assert!(
        verifier.verify(&headers(&[&good]), NOW).await.is_ok(),
        "the valid assertion the cases are made from checks"
    );
    let forged_right = es256(&key, &header_of(&key), &claims_json());
    assert!(
        verifier
            .verify(&headers(&[&forged_right]), NOW)
            .await
            .is_ok(),
        "the hand-made signing of the cases makes assertions that check"
    );
    let header = header_of(&key);
    let c = claims_json();
    let [h64, c64, s64] = good.split('.').collect::<Vec<_>>()[..] else {
        unreachable!()
    };
    let public = key.jwk();
    let public_point = {
        let x = URL_SAFE_NO_PAD
            .decode(public["x"].as_str().unwrap())
            .unwrap();
        let y = URL_SAFE_NO_PAD
            .decode(public["y"].as_str().unwrap())
            .unwrap();
        [vec![4], x, y].concat()
    };
    let flip = |s: &str, at: usize| {
        let mut bytes = URL_SAFE_NO_PAD.decode(s).unwrap();
        bytes[at] ^= 1;
        URL_SAFE_NO_PAD.encode(bytes)
    };
    let none = |alg: &str| {
        format!(
            "{}.{c64}.",
            b64(&set_header(header.clone(), "alg", json!(alg)))
        )
    };
    let none_sig = |alg: &str| {
        format!(
            "{}.{c64}.{s64}",
            b64(&set_header(header.clone(), "alg", json!(alg)))
        )
    };
    let hs = |alg, secret: &[u8]| {
        hmac(
            alg,
            secret,
            &set_header(header.clone(), "alg", json!("HS256")),
            &c,
        )
    };

    // A token with the real header and `claims`, signed with the real key.
    let signed = |claims: &Value| headers(&[&es256(&key, &header, claims)]);
    // The claims, issued at `iat` and expiring at `exp`.
    let lived = |iat: u64, exp: u64| with(with(c.clone(), "iat", json!(iat)), "exp", json!(exp));
    let mut cases: Vec<(&str, HeaderMap)> = vec![
        ("no assertion at all", HeaderMap::new()),
        ("an empty assertion", headers(&[""])),
        ("two assertion headers", headers(&[&good, &good])),
        ("two headers, one forged", headers(&[&good, &none("none")])),
        ("two parts", headers(&[&format!("{h64}.{c64}")])),
        ("four parts", headers(&[&format!("{good}.{s64}")])),
        (
            "padded base64",
            headers(&[&format!(
                "{}.{c64}.{s64}",
                URL_SAFE.encode(header.to_string())
            )]),
        ),
        (
            "a standard base64 character in the signature",
            headers(&[&format!("{h64}.{c64}.+{}", &s64[1..])]),
        ),
        (
            "a header that is not JSON",
            headers(&[&format!("{}.{c64}.{s64}", URL_SAFE_NO_PAD.encode("{alg"))]),
        ),
        (
            "a header that is a JSON array",
            headers(&[&format!("{}.{c64}.{s64}", b64(&json!(["ES256"])))]),
        ),
        ("alg none", headers(&[&none("none")])),
        ("alg None", headers(&[&none("None")])),
        ("alg NONE", headers(&[&none("NONE")])),
        ("alg nOnE", headers(&[&none("nOnE")])),
        (
            "alg none with the real signature",
            headers(&[&none_sig("none")]),
        ),
        (
            "alg null",
            headers(&[&format!(
                "{}.{c64}.{s64}",
                b64(&set_header(header.clone(), "alg", Value::Null))
            )]),
        ),
        (
            "no alg",
            headers(&[&format!(
                "{}.{c64}.{s64}",
                b64(&json!({"kid": key.kid(), "typ": "JWT"}))
            )]),
        ),
        (
            "HS256 keyed with the public point",
            headers(&[&hs(ring::hmac::HMAC_SHA256, &public_point)]),
        ),
        (
            "HS256 keyed with the JWK",
            headers(&[&hs(ring::hmac::HMAC_SHA256, public.to_string().as_bytes())]),
        ),
        (
            "HS256 keyed with the JWKS",
            headers(&[&hs(
                ring::hmac::HMAC_SHA256,
                ring.jwks().to_string().as_bytes(),
            )]),
        ),
        (
            "HS512 keyed with the public point",
            headers(&[&hmac(
                ring::hmac::HMAC_SHA512,
                &public_point,
                &set_header(header.clone(), "alg", json!("HS512")),
                &c,
            )]),
        ),
        (
            "ES384 named, ES256 signature",
            headers(&[&none_sig("ES384")]),
        ),
        ("RS256 named", headers(&[&none_sig("RS256")])),
        ("EdDSA named", headers(&[&none_sig("EdDSA")])),
        ("es256 in lower case", headers(&[&none_sig("es256")])),
        ("a stripped signature", headers(&[&format!("{h64}.{c64}.")])),
        (
            "an altered signature",
            headers(&[&format!("{h64}.{c64}.{}", flip(s64, 5))]),
        ),
        (
            "a truncated signature",
            headers(&[&format!("{h64}.{c64}.{}", &s64[..s64.len() - 4])]),
        ),
        (
            "altered claims under the real signature",
            headers(&[&format!(
                "{h64}.{}.{s64}",
                b64(&with(c.clone(), "sub", json!("user:root")))
            )]),
        ),
        (
            "an unknown kid",
            headers(&[&es256(
                &key,
                &set_header(header.clone(), "kid", json!("orc-unknown")),
                &c,
            )]),
        ),
        (
            "no kid",
            headers(&[&es256(&key, &json!({"alg": "ES256", "typ": "JWT"}), &c)]),
        ),
        (
            "a numeric kid",
            headers(&[&es256(
                &key,
                &set_header(header.clone(), "kid", json!(7)),
                &c,
            )]),
        ),
        (
            "the attacker's key in a jwk header",
            headers(&[&es256(
                &attacker,
                &set_header(header_of(&attacker), "jwk", attacker.jwk()),
                &c,
            )]),
        ),
        (
            "a jwk header beside the real kid",
            headers(&[&es256(
                &key,
                &set_header(header.clone(), "jwk", attacker.jwk()),
                &c,
            )]),
        ),
        (
            "a jku header",
            headers(&[&es256(
                &key,
                &set_header(
                    header.clone(),
                    "jku",
                    json!("https://attacker.test/jwks.json"),
                ),
                &c,
            )]),
        ),
        (
            "an x5u header",
            headers(&[&es256(
                &key,
                &set_header(
                    header.clone(),
                    "x5u",
                    json!("https://attacker.test/cert.pem"),
                ),
                &c,
            )]),
        ),
        (
            "an x5c header",
            headers(&[&es256(
                &key,
                &set_header(header.clone(), "x5c", json!(["MIIB"])),
                &c,
            )]),
        ),
        (
            "a crit header",
            headers(&[&es256(
                &key,
                &set_header(header.clone(), "crit", json!(["exp"])),
                &c,
            )]),
        ),
        (
            "typ other than JWT",
            headers(&[&es256(
                &key,
                &set_header(header.clone(), "typ", json!("at+jwt")),
                &c,
            )]),
        ),
        (
            "another zone's key under this kid",
            headers(&[&impostor.sign(&claims()).unwrap()]),
        ),
        (
            "signed by a key never published",
            headers(&[&attacker.sign(&claims()).unwrap()]),
        ),
        (
            "the wrong audience",
            signed(&with(c.clone(), "aud", json!("sys/partner/other"))),
        ),
        (
            "an audience array holding the right one",
            signed(&with(c.clone(), "aud", json!(["sys/partner/admin", "x"]))),
        ),
        (
            "the wrong org",
            signed(&with(c.clone(), "org", json!("acme"))),
        ),
        (
            "the wrong issuer",
            signed(&with(c.clone(), "iss", json!("https://other.zone"))),
        ),
        ("no issuer", signed(&without(c.clone(), "iss"))),
        ("no subject", signed(&without(c.clone(), "sub"))),
        (
            "an empty subject",
            signed(&with(c.clone(), "sub", json!(""))),
        ),
        ("no id", signed(&without(c.clone(), "jti"))),
        ("no expiry", signed(&without(c.clone(), "exp"))),
        (
            "an expiry as text",
            signed(&with(c.clone(), "exp", json!("1800000290"))),
        ),
        ("expired", signed(&lived(NOW - 200, NOW - 100))),
        (
            "expired just past the skew",
            signed(&lived(NOW - 100, NOW - 30)),
        ),
        ("issued in the future", signed(&lived(NOW + 60, NOW + 120))),
        (
            "not valid before a time to come",
            signed(&with(c.clone(), "nbf", json!(NOW + 60))),
        ),
        (
            "a lifetime over five minutes",
            signed(&with(c.clone(), "exp", json!(NOW - 10 + 301))),
        ),
        ("an expiry before the issue", signed(&lived(NOW, NOW - 1))),
        (
            "a claim more (roles)",
            signed(&with(c.clone(), "roles", json!(["owner"]))),
        ),
        (
            "claims that are not an object",
            signed(&json!("sys/partner/admin")),
        ),
        (
            "a token over 8 KiB",
            signed(&with(c.clone(), "name", json!("a".repeat(9000)))),
        ),
    ];
    // Only a cookie carries it.
    let mut cookie = HeaderMap::new();
    cookie.insert(
        "cookie",
        HeaderValue::from_str(&format!("orc_access={good}")).unwrap(),
    );
    cases.push(("the assertion only in a cookie", cookie));
    let mut other_header = HeaderMap::new();
    other_header.insert(
        "authorization",
        HeaderValue::from_str(&format!("Bearer {good}")).unwrap(),
    );
    cases.push(("the assertion as a bearer token", other_header));

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
