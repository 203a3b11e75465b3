//! A steady stream of HTTPS requests to one name at one address, counted: what a rolling
//! update or a lost node costs the people using an app.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What the requests came to.
#[derive(Debug, Default)]
pub struct LoadReport {
    pub sent: u64,
    pub elapsed: Duration,
    /// Answers by body (`v1`, `v2`).
    pub pages: BTreeMap<String, u64>,
    /// Failed requests by what failed (a status, or the error's words).
    pub failures: BTreeMap<String, u64>,
}

impl LoadReport {
    pub fn failed(&self) -> u64 {
        self.failures.values().sum()
    }

    pub fn rate(&self) -> f64 {
        self.sent as f64 / self.elapsed.as_secs_f64().max(0.001)
    }
}

/// Requests running in the background until [`Load::finish`].
pub struct Load {
    stop: Arc<AtomicBool>,
    started: Instant,
    thread: std::thread::JoinHandle<LoadReport>,
}

impl Load {
    /// `rate` requests a second to `https://{name}/` at `address:443`, trusting `root`, each
    /// allowed 5 s.
    pub fn start(name: &str, address: &str, root: &Path, rate: u32) -> Load {
        let pem = std::fs::read(root).expect("the root certificate");
        let root = reqwest::Certificate::from_pem(&pem).expect("a PEM certificate");
        let target: SocketAddr = format!("{address}:443").parse().expect("an IPv4 address");
        let client = reqwest::Client::builder()
            .add_root_certificate(root)
            .resolve(name, target)
            .timeout(Duration::from_secs(5))
            .pool_max_idle_per_host(64)
            .build()
            .expect("an HTTPS client");
        let url = format!("https://{name}/");
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(run(client, url, rate, stopping))
        });
        Load {
            stop,
            started: Instant::now(),
            thread,
        }
    }

    /// How long it has run.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Stops sending, waits for the requests in flight, and reports.
    pub fn finish(self) -> LoadReport {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("the load thread")
    }
}

async fn run(client: reqwest::Client, url: String, rate: u32, stop: Arc<AtomicBool>) -> LoadReport {
    let started = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs(1) / rate);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut requests = tokio::task::JoinSet::new();
    let mut report = LoadReport::default();
    let count = |report: &mut LoadReport, outcome: Result<String, String>| match outcome {
        Ok(page) => *report.pages.entry(page).or_default() += 1,
        Err(why) => *report.failures.entry(why).or_default() += 1,
    };
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let (client, url) = (client.clone(), url.clone());
        requests.spawn(async move {
            let response = client.get(&url).send().await.map_err(|e| words(&e))?;
            let status = response.status();
            let body = response.text().await.map_err(|e| words(&e))?;
            if status.is_success() {
                Ok(body.trim().to_string())
            } else {
                Err(format!("{status}: {}", body.trim()))
            }
        });
        report.sent += 1;
        while let Some(done) = requests.try_join_next() {
            count(&mut report, done.unwrap_or_else(|e| Err(e.to_string())));
        }
    }
    while let Some(done) = requests.join_next().await {
        count(&mut report, done.unwrap_or_else(|e| Err(e.to_string())));
    }
    report.elapsed = started.elapsed();
    report
}

/// An error with its causes.
fn words(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
