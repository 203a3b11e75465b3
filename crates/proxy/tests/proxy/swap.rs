//! Swapping the table under load: no request fails, and every request sent after the swap
//! reaches the new backend, on connections opened before it too.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use orc_proxy::Routes;

use crate::support::{Backend, client_to, eventually, proxy, route};

fn routes_to(backend: &Backend) -> Routes {
    Routes {
        http: BTreeMap::from([("app.example.com".into(), route("a/app", &[backend]))]),
        ..Routes::default()
    }
}

/// What one request of a client loop saw.
struct Outcome {
    /// The request was sent after `set_routes` had returned.
    after_swap: bool,
    answer: Result<(u16, String), String>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swapping_the_table_under_load_loses_no_request_and_moves_new_ones() {
    let proxy = proxy().await;
    let a = Backend::start("a").await;
    let b = Backend::start("b").await;
    proxy.set_routes(routes_to(&a)).await.unwrap();

    let swapped = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let url = format!("http://app.example.com:{}/", proxy.http_addr().port());
    let loops: Vec<_> = (0..4)
        .map(|_| {
            // One keep-alive client per loop: its connection outlives the swap.
            let client = client_to(proxy.http_addr(), &["app.example.com"]);
            let (swapped, stop, url) = (swapped.clone(), stop.clone(), url.clone());
            tokio::spawn(async move {
                let mut outcomes = Vec::new();
                while !stop.load(Ordering::SeqCst) {
                    let after_swap = swapped.load(Ordering::SeqCst);
                    let answer = match client.get(&url).send().await {
                        Ok(response) => {
                            let status = response.status().as_u16();
                            response
                                .text()
                                .await
                                .map(|body| (status, body))
                                .map_err(|e| e.to_string())
                        }
                        Err(e) => Err(e.to_string()),
                    };
                    outcomes.push(Outcome { after_swap, answer });
                }
                outcomes
            })
        })
        .collect();

    eventually("100 requests to reach a", async || a.hits() >= 100).await;
    proxy.set_routes(routes_to(&b)).await.unwrap();
    swapped.store(true, Ordering::SeqCst);
    eventually("100 requests to reach b", async || b.hits() >= 100).await;
    stop.store(true, Ordering::SeqCst);

    let mut outcomes = Vec::new();
    for client_loop in loops {
        outcomes.extend(client_loop.await.unwrap());
    }
    let failed: Vec<&String> = outcomes
        .iter()
        .filter_map(|o| o.answer.as_ref().err())
        .collect();
    assert!(failed.is_empty(), "failed requests: {failed:?}");
    for outcome in &outcomes {
        let (status, body) = outcome.answer.as_ref().unwrap();
        assert_eq!(*status, 200, "{body}");
        if outcome.after_swap {
            assert_eq!(body, "b", "a request sent after the swap reached {body}");
        }
    }
    let after = outcomes.iter().filter(|o| o.after_swap).count();
    assert!(after >= 1, "no request was sent after the swap");
    assert_eq!(outcomes.len(), a.hits() + b.hits());
    assert_eq!(
        proxy.stats().routes["a/app"].requests as usize,
        outcomes.len()
    );
}
