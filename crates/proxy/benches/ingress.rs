//! The ingress proxy beside what an operator would put there instead, in one run on one
//! machine: `orc-proxy`, Debian's nginx and Debian's Caddy, each a reverse proxy to the
//! same upstream (an nginx that answers a short text), loaded by `wrk` with 1, 16 and 64
//! connections over plain HTTP/1.1 and over HTTPS (HTTP/1.1 on TLS), keep-alive on.
//!
//! `cargo bench -p orc-proxy --bench ingress` prints a table of requests per second and
//! p99 latency; the figures in docs/apps.md come from it. It needs `nginx`, `caddy` and
//! `wrk` (`apt-get install nginx caddy wrk`) and says so when one is missing. Every
//! process it starts listens on loopback only and is stopped at the end.
//!
//! Each proxy sets the forwarding headers an ingress sets (`X-Forwarded-For`, the client's
//! `Host`) and keeps connections to the upstream alive; nginx runs one worker per core,
//! Caddy as Go decides, orc-proxy on a Tokio runtime with one thread per core. Everything
//! shares the machine's cores with `wrk` and the upstream, so the figures compare the
//! proxies with each other, not with a dedicated machine.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use orc_proxy::{Certificate, Proxy, ProxyConfig, Route, Routes};

/// How long each load runs.
const RUN: Duration = Duration::from_secs(5);
/// The connection counts measured.
const CONNECTIONS: [u32; 3] = [1, 16, 64];
/// The name every request carries and every certificate is for.
const HOST: &str = "localhost";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .expect("its address")
        .port()
}

fn require(program: &str) -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .chain([PathBuf::from("/usr/sbin")])
            .map(|dir| dir.join(program))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        panic!("the ingress benchmark needs {program}: apt-get install nginx caddy wrk")
    })
}

/// A child process, stopped when dropped: SIGTERM first (an nginx master stops its
/// workers on it; on SIGKILL they would be left), SIGKILL after 5 s.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for_port(port: u16, who: &str) {
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{who} did not listen on 127.0.0.1:{port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An nginx with `http` as its http block, in a directory of its own under `dir`.
fn nginx(dir: &Path, name: &str, workers: usize, http: &str, ports: &[u16]) -> Running {
    let root = dir.join(name);
    std::fs::create_dir_all(&root).expect("nginx's directory");
    let temp: String = ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"]
        .iter()
        .map(|t| format!("{t}_temp_path {}/{t};\n", root.display()))
        .collect();
    let conf = root.join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "worker_processes {workers};\npid {root}/nginx.pid;\nerror_log stderr;\n\
             events {{ worker_connections 4096; }}\n\
             http {{\naccess_log off;\n{temp}{http}\n}}\n",
            root = root.display()
        ),
    )
    .expect("nginx.conf");
    let child = Command::new(require("nginx"))
        .arg("-p")
        .arg(&root)
        .arg("-c")
        .arg(&conf)
        .args(["-e", "stderr", "-g", "daemon off;"])
        .stdout(Stdio::null())
        .spawn()
        .expect("nginx starts");
    let running = Running(child);
    for port in ports {
        wait_for_port(*port, name);
    }
    running
}

/// One wrk run: requests per second and p99 in milliseconds.
fn wrk(url: &str, connections: u32, run: Duration) -> (f64, f64) {
    let threads = connections.min(2);
    let out = Command::new(require("wrk"))
        .args([
            "-t",
            &threads.to_string(),
            "-c",
            &connections.to_string(),
            "-d",
            &format!("{}s", run.as_secs()),
            "--latency",
            "-H",
            &format!("Host: {HOST}"),
            url,
        ])
        .output()
        .expect("wrk runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text.contains("Non-2xx") && !text.contains("Socket errors"),
        "{url} answered with errors:\n{text}"
    );
    let rps = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no Requests/sec from wrk:\n{text}"));
    let p99 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("99%"))
        .map(|v| millis(v.trim()))
        .unwrap_or_else(|| panic!("no 99% line from wrk:\n{text}"));
    (rps, p99)
}

/// `812.00us`, `2.34ms`, `1.20s` in milliseconds.
fn millis(text: &str) -> f64 {
    let (number, scale) = if let Some(n) = text.strip_suffix("us") {
        (n, 0.001)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1000.0)
    } else {
        (text, 1.0)
    };
    number.parse::<f64>().unwrap_or(f64::NAN) * scale
}

/// orc-proxy's table: `HOST` to the upstream, with the certificate when HTTPS is measured
/// (plain HTTP to a name with a certificate is a redirect, so the plain runs go without).
fn table(upstream: u16, certificate: Option<&Certificate>) -> Routes {
    let mut routes = Routes::default();
    routes.http.insert(
        HOST.to_string(),
        Route::new(
            "bench/upstream",
            [SocketAddr::from(([127, 0, 0, 1], upstream))],
        ),
    );
    if let Some(certificate) = certificate {
        routes
            .certificates
            .insert(HOST.to_string(), certificate.clone());
    }
    routes
}

fn main() {
    let temp = tempfile::tempdir().expect("a temporary directory");
    let dir = temp.path();
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());

    // The certificate every proxy serves for `HOST`.
    let key = rcgen::KeyPair::generate().expect("a key");
    let cert = rcgen::CertificateParams::new(vec![HOST.to_string()])
        .expect("the name")
        .self_signed(&key)
        .expect("a certificate");
    let certificate = Certificate {
        chain_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    };
    std::fs::write(dir.join("cert.pem"), &certificate.chain_pem).expect("cert.pem");
    std::fs::write(dir.join("key.pem"), &certificate.key_pem).expect("key.pem");

    // The upstream: an nginx that answers every request with a short text.
    let upstream = free_port();
    let _upstream = nginx(
        dir,
        "upstream",
        1,
        &format!(
            "server {{ listen 127.0.0.1:{upstream}; keepalive_requests 1000000;\n\
             location / {{ return 200 \"hello, ingress!\\n\"; }} }}"
        ),
        &[upstream],
    );

    // nginx as the reverse proxy.
    let (nginx_http, nginx_https) = (free_port(), free_port());
    let _nginx = nginx(
        dir,
        "nginx",
        cores,
        &format!(
            "upstream up {{ server 127.0.0.1:{upstream}; keepalive 128; }}\n\
             server {{ listen 127.0.0.1:{nginx_http}; listen 127.0.0.1:{nginx_https} ssl;\n\
             keepalive_requests 1000000;\n\
             ssl_certificate {d}/cert.pem; ssl_certificate_key {d}/key.pem;\n\
             location / {{ proxy_pass http://up; proxy_http_version 1.1;\n\
             proxy_set_header Connection \"\"; proxy_set_header Host $host;\n\
             proxy_set_header X-Forwarded-For $remote_addr; }} }}",
            d = dir.display()
        ),
        &[nginx_http, nginx_https],
    );

    // Caddy as the reverse proxy.
    let (caddy_http, caddy_https) = (free_port(), free_port());
    let caddyfile = dir.join("Caddyfile");
    std::fs::write(
        &caddyfile,
        format!(
            "{{\n  admin off\n  auto_https off\n}}\n\
             http://{HOST}:{caddy_http} {{\n  bind 127.0.0.1\n  reverse_proxy 127.0.0.1:{upstream}\n}}\n\
             https://{HOST}:{caddy_https} {{\n  bind 127.0.0.1\n  tls {d}/cert.pem {d}/key.pem\n  reverse_proxy 127.0.0.1:{upstream}\n}}\n",
            d = dir.display()
        ),
    )
    .expect("the Caddyfile");
    let caddy = Command::new(require("caddy"))
        .args(["run", "--adapter", "caddyfile", "--config"])
        .arg(&caddyfile)
        .env("HOME", dir)
        .env("XDG_DATA_HOME", dir.join("caddy-data"))
        .env("XDG_CONFIG_HOME", dir.join("caddy-config"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("caddy starts");
    let _caddy = Running(caddy);
    wait_for_port(caddy_http, "caddy");
    wait_for_port(caddy_https, "caddy");

    // orc-proxy, on a runtime with one thread per core.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cores)
        .enable_all()
        .build()
        .expect("a runtime");
    let proxy = runtime.block_on(async {
        Proxy::start(ProxyConfig {
            http_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            https_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            tcp_bind_ip: [127, 0, 0, 1].into(),
            ..ProxyConfig::default()
        })
        .await
        .expect("orc-proxy starts")
    });
    let (orc_http, orc_https) = (proxy.http_addr().port(), proxy.https_addr().port());

    let proxies: [(&str, u16, u16); 3] = [
        ("orc-proxy", orc_http, orc_https),
        ("nginx", nginx_http, nginx_https),
        ("caddy", caddy_http, caddy_https),
    ];
    println!(
        "ingress benchmark: {cores} cores, {} s per run, wrk with keep-alive, upstream nginx",
        RUN.as_secs()
    );
    println!("| proxy | protocol | connections | requests/s | p99 |");
    println!("|---|---|---|---|---|");
    for (protocol, https) in [("HTTP/1.1", false), ("HTTPS", true)] {
        let routes = table(upstream, https.then_some(&certificate));
        runtime
            .block_on(proxy.set_routes(routes))
            .expect("the routes apply");
        for connections in CONNECTIONS {
            for (name, http_port, https_port) in proxies {
                let url = if https {
                    format!("https://{HOST}:{https_port}/")
                } else {
                    format!("http://127.0.0.1:{http_port}/")
                };
                // A short warm-up fills connection pools and caches.
                wrk(&url, connections, Duration::from_secs(1));
                let (rps, p99) = wrk(&url, connections, RUN);
                println!("| {name} | {protocol} | {connections} | {rps:.0} | {p99:.2} ms |");
            }
        }
    }
    runtime.block_on(async {
        proxy.shutdown(Duration::from_secs(1)).await;
    });
}
