//! Ingress on the node: the zone's routes for the project, served by the node's proxy
//! ([`orc_proxy`]) while the node accepts public ingress.
//!
//! The proxy starts with the first assignment that carries routes and stops (letting
//! requests in flight finish for [`DRAIN`]) with the first that carries none. Each new
//! table replaces the last at once. The last routes are kept on disk (`apps/ingress.pb`,
//! 0600: they hold certificates' keys), so after a restart the node serves them again
//! before the zone answers, as it runs its replicas.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use orc_proto::agent_pb;
use orc_proxy::{Certificate, Proxy, ProxyConfig, Route, Routes};
use prost::Message as _;
use tokio::sync::Mutex;

/// How long requests in flight may finish when the node stops accepting ingress.
pub const DRAIN: Duration = Duration::from_secs(5);

/// Where the proxy listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IngressListen {
    /// Plain HTTP: ACME challenges, redirects, the catch-all (`0.0.0.0:80`).
    pub http: SocketAddr,
    /// HTTPS (`0.0.0.0:443`).
    pub https: SocketAddr,
}

impl Default for IngressListen {
    fn default() -> Self {
        IngressListen {
            http: SocketAddr::from(([0, 0, 0, 0], 80)),
            https: SocketAddr::from(([0, 0, 0, 0], 443)),
        }
    }
}

/// The node's ingress.
#[derive(Debug)]
pub struct Ingress {
    listen: IngressListen,
    kept: PathBuf,
    proxy: Mutex<Option<Proxy>>,
}

impl Ingress {
    /// Ingress listening on `listen`, keeping its routes under `root`.
    pub fn new(listen: IngressListen, root: &std::path::Path) -> Ingress {
        Ingress {
            listen,
            kept: root.join("ingress.pb"),
            proxy: Mutex::new(None),
        }
    }

    /// Serves the routes kept on disk, if any.
    pub async fn resume(&self) {
        let Ok(bytes) = std::fs::read(&self.kept) else {
            return;
        };
        match agent_pb::Ingress::decode(bytes.as_slice()) {
            Ok(kept) => {
                if let Err(error) = self.serve(Some(&kept)).await {
                    tracing::warn!(%error, "the node's kept ingress routes cannot be served");
                }
            }
            Err(error) => {
                tracing::warn!(%error, path = %self.kept.display(), "the kept ingress routes do not read")
            }
        }
    }

    /// Takes the zone's routes (`None`: the node accepts no ingress): kept on disk, then
    /// served. An error says what could not be served (a port in use, a certificate that
    /// does not read); the rest is served anyway.
    pub async fn apply(&self, ingress: Option<&agent_pb::Ingress>) -> Result<(), String> {
        match ingress {
            Some(ingress) => {
                if let Some(dir) = self.kept.parent() {
                    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                }
                crate::state::write_private(&self.kept, ingress.encode_to_vec())
                    .map_err(|e| format!("{}: {e}", self.kept.display()))?;
            }
            None => match std::fs::remove_file(&self.kept) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(format!("{}: {e}", self.kept.display())),
            },
        }
        self.serve(ingress).await
    }

    async fn serve(&self, ingress: Option<&agent_pb::Ingress>) -> Result<(), String> {
        let mut held = self.proxy.lock().await;
        let Some(ingress) = ingress else {
            if let Some(proxy) = held.take() {
                let report = proxy.shutdown(DRAIN).await;
                tracing::info!(
                    cut = report.connections_cut,
                    "the node no longer accepts public ingress: its proxy stopped"
                );
            }
            return Ok(());
        };
        let routes = routes_of(ingress)?;
        if held.is_none() {
            let config = ProxyConfig {
                http_addr: self.listen.http,
                https_addr: self.listen.https,
                tcp_bind_ip: self.listen.http.ip(),
                ..ProxyConfig::default()
            };
            let proxy = Proxy::start(config)
                .await
                .map_err(|e| format!("the ingress proxy cannot start: {e}"))?;
            tracing::info!(http = %proxy.http_addr(), https = %proxy.https_addr(), "the node accepts public ingress");
            *held = Some(proxy);
        }
        let proxy = held.as_ref().expect("started above");
        proxy.set_routes(routes).await.map_err(|e| e.to_string())
    }

    /// The proxy's listening addresses, while it runs.
    pub async fn addresses(&self) -> Option<(SocketAddr, SocketAddr)> {
        self.proxy
            .lock()
            .await
            .as_ref()
            .map(|p| (p.http_addr(), p.https_addr()))
    }
}

/// The proxy's table from the zone's routes. A backend that is no socket address is an
/// error: the zone sends only `address:port`.
pub fn routes_of(ingress: &agent_pb::Ingress) -> Result<Routes, String> {
    let backends = |route: &str, list: &[String]| -> Result<Vec<SocketAddr>, String> {
        list.iter()
            .map(|b| {
                b.parse()
                    .map_err(|_| format!("route {route}: backend {b:?} is not an address"))
            })
            .collect()
    };
    let mut routes = Routes::default();
    for r in &ingress.routes {
        routes.http.insert(
            r.domain.to_ascii_lowercase(),
            Route::new(r.service.clone(), backends(&r.domain, &r.backends)?),
        );
    }
    if let Some(r) = &ingress.catch_all {
        routes.catch_all = Some(Route::new(
            r.service.clone(),
            backends("the catch-all", &r.backends)?,
        ));
    }
    for r in &ingress.tcp {
        let port = u16::try_from(r.port)
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("tcp route {}: {} is no port", r.service, r.port))?;
        routes.tcp.insert(
            port,
            Route::new(r.service.clone(), backends(&r.service, &r.backends)?),
        );
    }
    for c in &ingress.certificates {
        routes.certificates.insert(
            c.domain.to_ascii_lowercase(),
            Certificate {
                chain_pem: c.chain_pem.clone(),
                key_pem: c.key_pem.clone(),
            },
        );
    }
    for c in &ingress.challenges {
        routes
            .challenges
            .insert(c.token.clone(), c.key_authorization.clone());
    }
    Ok(routes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> agent_pb::Ingress {
        agent_pb::Ingress {
            routes: vec![agent_pb::HttpRoute {
                domain: "Shop.Example.com".into(),
                service: "shop/web".into(),
                backends: vec!["10.96.1.2:8080".into()],
            }],
            catch_all: Some(agent_pb::HttpRoute {
                domain: String::new(),
                service: "shop/web".into(),
                backends: vec!["10.96.1.2:8080".into()],
            }),
            tcp: vec![agent_pb::TcpRoute {
                port: 5432,
                service: "shop/db".into(),
                backends: vec!["10.96.1.3:5432".into()],
            }],
            certificates: Vec::new(),
            challenges: vec![agent_pb::Challenge {
                token: "tok".into(),
                key_authorization: "tok.thumb".into(),
            }],
        }
    }

    #[test]
    fn the_zones_routes_become_the_proxys_table() {
        let routes = routes_of(&sample()).unwrap();
        let web = &routes.http["shop.example.com"];
        assert_eq!(web.name, "shop/web");
        assert_eq!(web.backends, ["10.96.1.2:8080".parse().unwrap()]);
        assert_eq!(routes.catch_all.unwrap().name, "shop/web");
        assert_eq!(
            routes.tcp[&5432].backends,
            ["10.96.1.3:5432".parse().unwrap()]
        );
        assert_eq!(routes.challenges["tok"], "tok.thumb");
    }

    #[test]
    fn a_backend_that_is_no_address_is_refused_naming_it() {
        let mut bad = sample();
        bad.routes[0].backends = vec!["somewhere".into()];
        assert_eq!(
            routes_of(&bad).unwrap_err(),
            "route Shop.Example.com: backend \"somewhere\" is not an address"
        );
    }

    #[tokio::test]
    async fn routes_are_served_kept_privately_and_served_again_after_a_restart() {
        use std::os::unix::fs::PermissionsExt as _;
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        // A backend that answers every request with its own words.
        let backend = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let backend_addr = backend.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = backend.accept().await else {
                    return;
                };
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    let _ = stream.read(&mut buf).await;
                    let _ = stream
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 7\r\nconnection: close\r\n\r\nserved!")
                        .await;
                });
            }
        });
        let dir = tempfile::tempdir().unwrap();
        let listen = IngressListen {
            http: "127.0.0.1:0".parse().unwrap(),
            https: "127.0.0.1:0".parse().unwrap(),
        };
        let mut ingress = sample();
        ingress.routes[0].backends = vec![backend_addr.to_string()];
        ingress.tcp.clear();
        let ask = |http: SocketAddr| async move {
            let mut stream = tokio::net::TcpStream::connect(http).await.unwrap();
            stream
                .write_all(b"GET / HTTP/1.1\r\nhost: shop.example.com\r\nconnection: close\r\n\r\n")
                .await
                .unwrap();
            let mut answer = String::new();
            stream.read_to_string(&mut answer).await.unwrap();
            answer
        };
        let node = Ingress::new(listen, dir.path());
        node.apply(Some(&ingress)).await.unwrap();
        let (http, _) = node.addresses().await.expect("the proxy runs");
        assert!(ask(http).await.ends_with("served!"));
        let mode = std::fs::metadata(dir.path().join("ingress.pb"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "the kept routes hold keys");

        // A restarted agent serves the kept routes before the zone says anything.
        node.apply(None).await.unwrap_or(());
        assert!(node.addresses().await.is_none(), "no ingress, no proxy");
        assert!(!dir.path().join("ingress.pb").exists());
        node.apply(Some(&ingress)).await.unwrap();
        drop(node);
        let again = Ingress::new(listen, dir.path());
        again.resume().await;
        let (http, _) = again.addresses().await.expect("the kept routes are served");
        assert!(ask(http).await.ends_with("served!"));
    }
}
