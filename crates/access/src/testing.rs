//! Hostile requests for an app's gate (feature `testing`): every way an access assertion can
//! be wrong that an app must refuse, built around one valid assertion. The check's own suite
//! (`tests/hostile.rs`) and every app's page suite run the same cases, so a case added here
//! is tried everywhere.
//!
//! For tests only: the helpers panic when a key cannot sign.

use base64::Engine as _;
use base64::engine::general_purpose::{URL_SAFE, URL_SAFE_NO_PAD};
use http::{HeaderMap, HeaderValue};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
use serde_json::{Value, json};

use crate::{ASSERTION_HEADER, Assertion, KeyRing, SigningKey};

/// A request carrying `values` as its assertion headers, in order.
pub fn headers(values: &[&str]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for value in values {
        map.append(
            ASSERTION_HEADER,
            HeaderValue::from_str(value).expect("a token is a header value"),
        );
    }
    map
}

fn b64(value: &Value) -> String {
    URL_SAFE_NO_PAD.encode(value.to_string())
}

/// Signs `header.claims` with ES256 and `key`, whatever the header says.
pub fn es256(key: &SigningKey, header: &Value, claims: &Value) -> String {
    let input = format!("{}.{}", b64(header), b64(claims));
    let pair = EcdsaKeyPair::from_pkcs8(
        &ECDSA_P256_SHA256_FIXED_SIGNING,
        key.pkcs8(),
        &SystemRandom::new(),
    )
    .expect("a generated P-256 key signs");
    let signature = pair
        .sign(&SystemRandom::new(), input.as_bytes())
        .expect("a generated P-256 key signs");
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref()))
}

/// Signs `header.claims` with HMAC (`algorithm`) keyed with `secret`.
pub fn hmac(
    algorithm: ring::hmac::Algorithm,
    secret: &[u8],
    header: &Value,
    claims: &Value,
) -> String {
    let input = format!("{}.{}", b64(header), b64(claims));
    let tag = ring::hmac::sign(&ring::hmac::Key::new(algorithm, secret), input.as_bytes());
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
}

pub fn header_of(key: &SigningKey) -> Value {
    json!({ "alg": "ES256", "typ": "JWT", "kid": key.kid() })
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

/// Every hostile request, named, built around `claims`: a valid assertion for the verifier
/// under test at `now` (issued shortly before `now`, holding less than 300 s), signed by
/// `key`, the current key of the published `ring`. None of them may be let in: wrong form,
/// algorithm, key, signature, header fields, claims, times, or a place other than the one
/// header. At least 40.
pub fn hostile_requests(
    key: &SigningKey,
    ring: &KeyRing,
    claims: &Assertion,
    now: u64,
) -> Vec<(&'static str, HeaderMap)> {
    let attacker = SigningKey::generate().expect("a P-256 key is made");
    // Another zone's key under this zone's kid.
    let impostor =
        SigningKey::from_pkcs8(Some(key.kid()), attacker.pkcs8()).expect("the key reads back");
    let header = header_of(key);
    let c = serde_json::to_value(claims).expect("claims are JSON");
    let good = ring.sign(claims).expect("the ring signs");
    let parts: Vec<&str> = good.split('.').collect();
    let (h64, c64, s64) = (parts[0], parts[1], parts[2]);
    let public = key.jwk();
    let public_point = {
        let x = URL_SAFE_NO_PAD
            .decode(public["x"].as_str().expect("a JWK of the key"))
            .expect("a JWK of the key");
        let y = URL_SAFE_NO_PAD
            .decode(public["y"].as_str().expect("a JWK of the key"))
            .expect("a JWK of the key");
        [vec![4], x, y].concat()
    };
    let flip = |s: &str, at: usize| {
        let mut bytes = URL_SAFE_NO_PAD.decode(s).expect("a JWK of the key");
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
    let signed = |claims: &Value| headers(&[&es256(key, &header, claims)]);
    // The claims, issued at `iat` and expiring at `exp`.
    let lived = |iat: u64, exp: u64| with(with(c.clone(), "iat", json!(iat)), "exp", json!(exp));
    let mut cases: Vec<(&'static str, HeaderMap)> = vec![
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
                key,
                &set_header(header.clone(), "kid", json!("orc-unknown")),
                &c,
            )]),
        ),
        (
            "no kid",
            headers(&[&es256(key, &json!({"alg": "ES256", "typ": "JWT"}), &c)]),
        ),
        (
            "a numeric kid",
            headers(&[&es256(
                key,
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
                key,
                &set_header(header.clone(), "jwk", attacker.jwk()),
                &c,
            )]),
        ),
        (
            "a jku header",
            headers(&[&es256(
                key,
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
                key,
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
                key,
                &set_header(header.clone(), "x5c", json!(["MIIB"])),
                &c,
            )]),
        ),
        (
            "a crit header",
            headers(&[&es256(
                key,
                &set_header(header.clone(), "crit", json!(["exp"])),
                &c,
            )]),
        ),
        (
            "typ other than JWT",
            headers(&[&es256(
                key,
                &set_header(header.clone(), "typ", json!("at+jwt")),
                &c,
            )]),
        ),
        (
            "another zone's key under this kid",
            headers(&[&impostor.sign(claims).expect("the impostor signs")]),
        ),
        (
            "signed by a key never published",
            headers(&[&attacker.sign(claims).expect("the attacker signs")]),
        ),
        (
            "the wrong audience",
            signed(&with(
                c.clone(),
                "aud",
                json!(format!("{}-other", claims.aud)),
            )),
        ),
        (
            "an audience array holding the right one",
            signed(&with(c.clone(), "aud", json!([claims.aud, "x"]))),
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
        ("expired", signed(&lived(now - 200, now - 100))),
        (
            "expired just past the skew",
            signed(&lived(now - 100, now - 30)),
        ),
        ("issued in the future", signed(&lived(now + 60, now + 120))),
        (
            "not valid before a time to come",
            signed(&with(c.clone(), "nbf", json!(now + 60))),
        ),
        (
            "a lifetime over five minutes",
            signed(&with(c.clone(), "exp", json!(claims.iat + 301))),
        ),
        ("an expiry before the issue", signed(&lived(now, now - 1))),
        (
            "a claim more (roles)",
            signed(&with(c.clone(), "roles", json!(["owner"]))),
        ),
        ("claims that are not an object", signed(&json!(claims.aud))),
        (
            "a token over 8 KiB",
            signed(&with(c.clone(), "name", json!("a".repeat(9000)))),
        ),
    ];
    // Only a cookie carries it.
    let mut cookie = HeaderMap::new();
    cookie.insert(
        "cookie",
        HeaderValue::from_str(&format!("orc_access={good}")).expect("a token is a header value"),
    );
    cases.push(("the assertion only in a cookie", cookie));
    let mut other_header = HeaderMap::new();
    other_header.insert(
        "authorization",
        HeaderValue::from_str(&format!("Bearer {good}")).expect("a token is a header value"),
    );
    cases.push(("the assertion as a bearer token", other_header));
    cases
}
