//! The app's check of one access assertion with its key cached (the case of every request
//! but the first after a rotation): signature, header and claims. Target p99 ≤ 100 µs.
//!
//! `cargo bench -p orc-access --bench verify` prints p50, p99 and max over 20,000 checks,
//! and the time to sign one (the edge's cost per request).

use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderValue};
use orc_access::{
    ASSERTION_HEADER, Assertion, KeyRing, KeySource, SigningKey, Verifier, VerifierOptions,
};

struct Fixed(String);

impl KeySource for Fixed {
    async fn fetch(&self) -> Result<String, String> {
        Ok(self.0.clone())
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let ring = KeyRing::new(SigningKey::generate().expect("a key"));
    let now = 1_800_000_000;
    let assertion = Assertion {
        iss: "https://orc.localhost:7443".into(),
        sub: "user:ada".into(),
        name: "Ada".into(),
        org: "sys".into(),
        aud: "sys/partner/admin".into(),
        iat: now,
        exp: now + 300,
        jti: "bench".into(),
    };
    let verifier = Verifier::new(
        VerifierOptions::new("https://orc.localhost:7443", "sys", "sys/partner/admin"),
        Fixed(ring.jwks().to_string()),
    );
    let rounds = 20_000;
    let started = Instant::now();
    let mut token = String::new();
    for _ in 0..rounds / 10 {
        token = ring.sign(&assertion).expect("signed");
    }
    let sign = started.elapsed() / (rounds / 10);
    let mut headers = HeaderMap::new();
    headers.insert(ASSERTION_HEADER, HeaderValue::from_str(&token).unwrap());
    runtime.block_on(verifier.load_keys(now)).expect("keys");
    let mut times: Vec<Duration> = Vec::with_capacity(rounds as usize);
    for _ in 0..rounds {
        let t = Instant::now();
        let checked = runtime.block_on(verifier.verify(std::hint::black_box(&headers), now + 1));
        times.push(t.elapsed());
        assert!(checked.is_ok());
    }
    times.sort();
    let at = |p: f64| times[((times.len() - 1) as f64 * p).round() as usize];
    println!(
        "access/verify  cached key: p50={:.1} µs  p99={:.1} µs  max={:.1} µs ({rounds} checks)",
        at(0.5).as_secs_f64() * 1e6,
        at(0.99).as_secs_f64() * 1e6,
        times.last().unwrap().as_secs_f64() * 1e6
    );
    println!(
        "access/sign  one assertion: {:.1} µs",
        sign.as_secs_f64() * 1e6
    );
}
