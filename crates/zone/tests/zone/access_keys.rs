//! The access edge's keys through a whole zone: the JWKS is public and holds public keys
//! only, an assertion the zone signs checks against it over https, a rotation keeps the
//! replaced key published for its overlap, only operators list and rotate, and the keys
//! outlive a restart.

use orc_access::{Assertion, KeySource, Verifier, VerifierOptions};
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::api_support::{TestZone, tenancy};

/// The zone's JWKS over https, trusting only the zone's CA.
struct ZoneKeys<'a>(&'a TestZone);

impl KeySource for ZoneKeys<'_> {
    async fn fetch(&self) -> Result<String, String> {
        let url = format!("{}{}", self.0.zone.url(), orc_access::JWKS_PATH);
        let answer = self
            .0
            .http
            .get(url)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        answer.text().await.map_err(|e| e.to_string())
    }
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn assertion(zone: &TestZone, jti: &str) -> Assertion {
    let now = now_secs();
    Assertion {
        iss: zone.zone.url(),
        sub: "user:admin".into(),
        name: "admin".into(),
        org: "sys".into(),
        aud: "sys/partner/admin".into(),
        iat: now,
        exp: now + 300,
        jti: jti.into(),
    }
}

async fn kids(z: &TestZone) -> Vec<String> {
    let jwks = z.call(Method::GET, orc_access::JWKS_PATH, None, None).await;
    assert_eq!(jwks.status, StatusCode::OK, "{}", jwks.body);
    jwks.body["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kid"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_jwks_is_public_rotations_overlap_and_only_operators_rotate() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;

    // Public, without a token: one key, its public half only.
    let jwks = z.call(Method::GET, orc_access::JWKS_PATH, None, None).await;
    assert_eq!(jwks.status, StatusCode::OK);
    let keys = jwks.body["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 1);
    let mut fields: Vec<&str> = keys[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    fields.sort();
    assert_eq!(fields, ["alg", "crv", "kid", "kty", "use", "x", "y"]);
    let first = keys[0]["kid"].as_str().unwrap().to_string();

    // What the zone signs checks against what it publishes, fetched over https.
    let verifier = Verifier::new(
        VerifierOptions::new(&z.zone.url(), "sys", "sys/partner/admin"),
        ZoneKeys(&z),
    );
    let signed = z.zone.access_keys().sign(&assertion(&z, "one")).unwrap();
    let checked = verifier.verify_token(&signed, now_secs()).await.unwrap();
    assert_eq!(checked.jti, "one");

    // A tenant may neither list nor rotate.
    for (method, path, body) in [
        (Method::GET, "/api/zone/access-keys", None),
        (
            Method::POST,
            "/api/zone/access-keys/rotate",
            Some(json!({})),
        ),
    ] {
        let refused = z.call(method, path, Some(&t.mia), body).await;
        assert_eq!(
            refused.status,
            StatusCode::FORBIDDEN,
            "{path}: {}",
            refused.body
        );
    }
    // A bad overlap is named.
    let too_long = z
        .post(
            "/api/zone/access-keys/rotate",
            &z.admin,
            json!({ "overlap_seconds": 8 * 24 * 3600 }),
        )
        .await;
    assert_eq!(too_long.status, StatusCode::BAD_REQUEST);
    assert_eq!(too_long.field(), Some("overlap_seconds"));
    assert_eq!(kids(&z).await, vec![first.clone()], "nothing rotated");

    // Rotated: the new key signs, the old one stays published for its overlap.
    let rotated = z
        .post(
            "/api/zone/access-keys/rotate",
            &z.admin,
            json!({ "overlap_seconds": 600 }),
        )
        .await;
    assert_eq!(rotated.status, StatusCode::OK, "{}", rotated.body);
    let second = rotated.body["kid"].as_str().unwrap().to_string();
    assert_ne!(second, first);
    assert_eq!(rotated.body["replaced"], first.as_str());
    assert_eq!(kids(&z).await, [second.clone(), first.clone()]);
    let listed = z.get("/api/zone/access-keys", &z.admin).await;
    assert_eq!(listed.body[0]["kid"], second.as_str());
    assert_eq!(listed.body[0]["current"], true);
    assert_eq!(listed.body[1]["current"], false);
    assert_eq!(listed.body[1]["retire_at"], rotated.body["replaced_until"]);
    let by_second = z.zone.access_keys().sign(&assertion(&z, "two")).unwrap();
    verifier
        .verify_token(&by_second, now_secs() + 31)
        .await
        .expect("the new key is fetched on its unknown kid");
    verifier
        .verify_token(&signed, now_secs())
        .await
        .expect("the replaced key still checks during its overlap");

    // A rotation with no overlap retires the second at once; the keys outlive a restart.
    let third = z
        .post(
            "/api/zone/access-keys/rotate",
            &z.admin,
            json!({ "overlap_seconds": 0 }),
        )
        .await;
    let third = third.body["kid"].as_str().unwrap().to_string();
    assert_eq!(kids(&z).await, [third.clone(), first.clone()]);
    let z = z.restart().await;
    assert_eq!(kids(&z).await, [third.clone(), first.clone()]);
    let after = z.zone.access_keys().sign(&assertion(&z, "three")).unwrap();
    let fresh = Verifier::new(
        VerifierOptions::new(&z.zone.url(), "sys", "sys/partner/admin"),
        ZoneKeys(&z),
    );
    assert_eq!(
        fresh.verify_token(&after, now_secs()).await.unwrap().jti,
        "three"
    );
    z.zone.shutdown().await;
}
