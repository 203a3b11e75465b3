//! The browser harness against HTTPS servers of its own, shaped like the zone's access edge:
//! a sign-in page on `orc.localhost` sets a session cookie for the whole zone domain and
//! sends the browser to an app host under it (`sys--partner.sys.orc.localhost`), which shows
//! who is signed in. Certificates come from a test `ZoneCa` that the browser trusts through
//! its NSS database; a server of another CA must not load.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Form, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use orc_testkit::browser::{
    Browser, Impact, LoadError, SameSite, WINDOW, group_runs, isolated, png_size,
};
use orc_tls::{ALPN_HTTP, RenewingCert, ServeOptions, ZoneCa};
use serde::Deserialize;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

const SIGN_IN_HOST: &str = "orc.localhost";
const APP_HOST: &str = "sys--partner.sys.orc.localhost";
const COOKIE: &str = "orc_session";

/// An HTTPS server on 127.0.0.1 for `orc.localhost` and `*.sys.orc.localhost`, its
/// certificate signed by the CA it was given; stopped when dropped.
struct Site {
    port: u16,
    _stop: oneshot::Sender<()>,
}

impl Site {
    async fn start(ca: &ZoneCa) -> Site {
        let names = ["*.sys.orc.localhost".to_string(), SIGN_IN_HOST.to_string()];
        let identity = ca
            .issue_server(&names, Duration::from_secs(3600))
            .expect("server certificate");
        let cert = RenewingCert::new(identity).expect("certificate and key fit");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("local address").port();
        let routes = axum::Router::new()
            .route("/", get(home))
            .route("/sign-in", get(sign_in_form).post(sign_in))
            .route("/unlabelled", get(unlabelled))
            .with_state(Arc::new(port));
        let (stop, stopped) = oneshot::channel::<()>();
        let options = ServeOptions {
            what: "test site",
            tls: Some(orc_tls::server_config(cert, ALPN_HTTP)),
            ..ServeOptions::default()
        };
        tokio::spawn(orc_tls::serve(listener, routes, options, async {
            let _ = stopped.await;
        }));
        Site { port, _stop: stop }
    }

    fn url(&self, host: &str, path: &str) -> String {
        format!("https://{host}:{}{path}", self.port)
    }
}

/// A page as the zone's pages are: a language, a title, a landmark, a heading; a script
/// that only says it ran, so a test sees whether scripts were on.
fn page(title: &str, body: &str) -> Html<String> {
    Html(format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>{title}</title></head><body><main><h1>{title}</h1>{body}\
         <p id=\"scripts\">Scripts are off.</p>\
         <script>document.getElementById('scripts').textContent = 'Scripts are on.';</script>\
         </main></body></html>\n"
    ))
}

fn host(uri: &Uri, headers: &HeaderMap) -> String {
    let host = uri.host().map(str::to_string).or_else(|| {
        headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .map(|h| h.rsplit_once(':').map_or(h, |(name, _)| name).to_string())
    });
    host.unwrap_or_default()
}

async fn home(State(port): State<Arc<u16>>, uri: Uri, headers: HeaderMap) -> Response {
    if host(&uri, &headers) != APP_HOST {
        return (StatusCode::NOT_FOUND, "no app here").into_response();
    }
    let user = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| {
            c.trim()
                .strip_prefix(&format!("{COOKIE}="))
                .map(str::to_string)
        });
    match user {
        Some(user) => page("Partner", &format!("<p>Signed in as {user}</p>")).into_response(),
        None => {
            let sign_in = format!("https://{SIGN_IN_HOST}:{port}/sign-in");
            page(
                "Partner",
                &format!("<p>Not signed in</p><a href=\"{sign_in}\">Sign in</a>"),
            )
            .into_response()
        }
    }
}

async fn sign_in_form() -> Html<String> {
    page(
        "Sign in",
        "<form id=\"sign-in\" method=\"post\" action=\"/sign-in\">\
         <label for=\"user\">User</label> <input id=\"user\" name=\"user\" autocomplete=\"username\">\
         <button type=\"submit\">Sign in</button></form>",
    )
}

#[derive(Deserialize)]
struct SignIn {
    user: String,
}

async fn sign_in(State(port): State<Arc<u16>>, Form(form): Form<SignIn>) -> Response {
    let cookie = format!(
        "{COOKIE}={}; Domain=orc.localhost; Path=/; Secure; HttpOnly; SameSite=Lax",
        form.user
    );
    let to = format!("https://{APP_HOST}:{port}/");
    (
        StatusCode::SEE_OTHER,
        [(header::SET_COOKIE, cookie), (header::LOCATION, to)],
    )
        .into_response()
}

/// A page with a seeded accessibility violation: an input with no label.
async fn unlabelled() -> Html<String> {
    page("Search", "<form><input name=\"q\"></form>")
}

#[test]
fn signs_in_on_one_host_and_the_cookie_reaches_another() {
    isolated(async {
        let ca = ZoneCa::generate().unwrap();
        let site = Site::start(&ca).await;
        let browser = Browser::builder("signs_in_on_one_host_and_the_cookie_reaches_another")
            .trust_ca(ca.cert_pem())
            .start()
            .await;

        browser.open(&site.url(SIGN_IN_HOST, "/sign-in")).await;
        assert_eq!(browser.title().await, "Sign in");
        assert_eq!(browser.status().await, Some(200));
        browser.wait_for_text("Scripts are on.").await;
        browser.snapshot("sign-in").await;
        browser.fill_labelled("User", "olivia").await;
        browser.press("Sign in").await;

        browser.wait_for_host(APP_HOST).await;
        browser.wait_for_text("Signed in as olivia").await;
        assert_eq!(browser.url().await.path(), "/");
        assert_eq!(browser.status().await, Some(200));

        let cookie = browser.cookie(COOKIE).await.expect("the session cookie");
        assert_eq!(cookie.value, "olivia");
        assert_eq!(cookie.domain.as_deref(), Some("orc.localhost"));
        assert_eq!(cookie.path.as_deref(), Some("/"));
        assert!(cookie.secure, "{cookie:?}");
        assert!(cookie.http_only, "{cookie:?}");
        assert_eq!(cookie.same_site, Some(SameSite::Lax));
        let seen_by_scripts = browser
            .client()
            .execute("return document.cookie", Vec::new())
            .await
            .unwrap();
        assert_eq!(
            seen_by_scripts, "",
            "an HttpOnly cookie is not the page's to read"
        );

        let shot = browser.snapshot("signed-in").await;
        let png = std::fs::read(&shot.png).unwrap();
        assert_eq!(png_size(&png), Some(WINDOW), "{}", shot.png.display());
        assert!(png.ends_with(b"IEND\xaeB`\x82"), "a whole PNG");
        let html = std::fs::read_to_string(&shot.html).unwrap();
        assert!(html.contains("Signed in as olivia"), "{html}");
        assert!(
            shot.png.ends_with(
                "browser/signs_in_on_one_host_and_the_cookie_reaches_another/signed-in.png"
            ),
            "{}",
            shot.png.display()
        );
        browser.close().await;
    });
}

#[test]
fn refuses_a_server_whose_certificate_another_ca_signed() {
    isolated(async {
        let trusted = ZoneCa::generate().unwrap();
        let other = ZoneCa::generate().unwrap();
        let (good, bad) = tokio::join!(Site::start(&trusted), Site::start(&other));
        let browser = Browser::builder("refuses_a_server_whose_certificate_another_ca_signed")
            .trust_ca(trusted.cert_pem())
            .start()
            .await;

        match browser.try_open(&bad.url(SIGN_IN_HOST, "/sign-in")).await {
            Err(LoadError::Certificate { reason, .. }) => {
                assert_eq!(reason, "ERR_CERT_AUTHORITY_INVALID");
            }
            other => panic!("the page of an unknown CA loaded or failed otherwise: {other:?}"),
        }
        // The same browser loads the trusted CA's server: what failed was the certificate.
        browser.open(&good.url(SIGN_IN_HOST, "/sign-in")).await;
        assert_eq!(browser.title().await, "Sign in");
        // And a port nobody listens on is not a certificate error.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        match browser
            .try_open(&format!("https://{APP_HOST}:{port}/"))
            .await
        {
            Err(LoadError::Other { reason, .. }) => assert_eq!(reason, "ERR_CONNECTION_REFUSED"),
            other => panic!("a closed port: {other:?}"),
        }
        // Only 127.0.0.1, ::1 and `localhost` names are reached: any other address or name
        // does not resolve, whoever asks for it.
        match browser
            .try_open(&format!("https://127.0.0.2:{}/", good.port))
            .await
        {
            Err(LoadError::Other { reason, .. }) => assert_eq!(reason, "ERR_NAME_NOT_RESOLVED"),
            other => panic!("127.0.0.2: {other:?}"),
        }
    });
}

#[test]
fn signs_in_with_javascript_off() {
    isolated(async {
        let ca = ZoneCa::generate().unwrap();
        let site = Site::start(&ca).await;
        let browser = Browser::builder("signs_in_with_javascript_off")
            .trust_ca(ca.cert_pem())
            .javascript(false)
            .start()
            .await;

        browser.open(&site.url(APP_HOST, "/")).await;
        assert_eq!(browser.text_of("main p").await, "Not signed in");
        browser.follow("Sign in").await;
        assert_eq!(browser.title().await, "Sign in");
        assert_eq!(browser.text_of("#scripts").await, "Scripts are off.");
        browser.fill("#user", "mia").await;
        browser.submit("#sign-in").await;

        browser.wait_for_text("Signed in as mia").await;
        assert_eq!(browser.url().await.host_str(), Some(APP_HOST));
        assert_eq!(browser.status().await, Some(200));
        assert_eq!(browser.text_of("#scripts").await, "Scripts are off.");
        browser.snapshot("signed-in").await;

        browser.open(&site.url(SIGN_IN_HOST, "/")).await;
        assert_eq!(browser.status().await, Some(404));
    });
}

#[test]
fn audit_finds_a_missing_label_and_passes_a_clean_page() {
    isolated(async {
        let ca = ZoneCa::generate().unwrap();
        let site = Site::start(&ca).await;
        let browser = Browser::builder("audit_finds_a_missing_label_and_passes_a_clean_page")
            .trust_ca(ca.cert_pem())
            .start()
            .await;

        browser.open(&site.url(SIGN_IN_HOST, "/sign-in")).await;
        let clean = browser.audit().await;
        assert!(clean.violations.is_empty(), "{clean}");

        browser.open(&site.url(SIGN_IN_HOST, "/unlabelled")).await;
        let seeded = browser.audit().await;
        let serious = seeded.at_least(Impact::Serious);
        assert!(
            serious.iter().any(|v| v.id == "label"
                && v.impact == Some(Impact::Critical)
                && v.nodes == ["input"]),
            "{seeded}"
        );
    });
}

#[test]
fn a_panicking_test_leaves_no_browser_behind() {
    isolated(async {
        let (seen_tx, seen_rx) = std::sync::mpsc::channel();
        let test = tokio::spawn(async move {
            let browser = Browser::builder("a_panicking_test_leaves_no_browser_behind")
                .start()
                .await;
            seen_tx
                .send((browser.process_group(), browser.scratch_dir().to_path_buf()))
                .unwrap();
            panic!("a failing assertion");
        });
        assert!(test.await.unwrap_err().is_panic());
        let (group, dir) = seen_rx.recv().unwrap();
        assert!(
            !group_runs(group),
            "chromedriver's group {group} still runs"
        );
        assert!(!dir.exists(), "{} is left", dir.display());
    });
}

#[tokio::test]
#[should_panic(expected = "a Browser starts only inside orc_testkit::browser::isolated")]
async fn a_browser_outside_its_own_network_namespace_does_not_start() {
    Browser::builder("a_browser_outside_its_own_network_namespace_does_not_start")
        .start()
        .await;
}

/// `ip args…` run in the network namespace `namespace` (an open `/proc/…/ns/net`), from a
/// thread that enters it for the purpose; `None` when it could not be entered or run.
fn try_ip_in(namespace: &std::fs::File, args: &[&str]) -> Option<std::process::ExitStatus> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                nix::sched::setns(namespace, nix::sched::CloneFlags::CLONE_NEWNET).ok()?;
                std::process::Command::new("ip")
                    .args(args)
                    .stderr(std::process::Stdio::null())
                    .status()
                    .ok()
            })
            .join()
            .ok()
            .flatten()
    })
}

/// Runs `ip args…` in `namespace`; panics when it fails.
fn ip_in(namespace: &std::fs::File, args: &[&str]) {
    let status = try_ip_in(namespace, args);
    assert!(
        status.is_some_and(|s| s.success()),
        "ip {args:?} in the host's namespace: {status:?}"
    );
}

/// Removes the veth pair from the host's namespace when dropped, also when the test fails.
struct HostLink<'a> {
    host: &'a std::fs::File,
    name: String,
}

impl Drop for HostLink<'_> {
    fn drop(&mut self) {
        let _ = try_ip_in(self.host, &["link", "del", &self.name]);
    }
}

#[test]
fn a_load_survives_the_hosts_network_changing_under_it() {
    // What the namespace tests beside the browser tests do at any time: an address comes
    // and goes in the host's namespace while a page is loading.
    let host = std::fs::File::open("/proc/thread-self/ns/net").expect("the host's namespace");
    isolated(async {
        let ca = ZoneCa::generate().unwrap();
        let site = Site::start(&ca).await;
        // The page's server takes its time to answer the TLS handshake: the load is still
        // connecting when the host's network changes.
        let slow = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let slow_port = slow.local_addr().unwrap().port();
        let site_port = site.port;
        tokio::spawn(async move {
            while let Ok((mut client, _)) = slow.accept().await {
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(1500)).await;
                    let mut server = tokio::net::TcpStream::connect(("127.0.0.1", site_port))
                        .await
                        .unwrap();
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                });
            }
        });
        let browser = Browser::builder("a_load_survives_the_hosts_network_changing_under_it")
            .trust_ca(ca.cert_pem())
            .start()
            .await;

        let link = HostLink {
            host: &host,
            name: format!("orcbt{}", std::process::id() % 1_000_000),
        };
        let change = async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            tokio::task::block_in_place(|| {
                let peer = format!("{}p", link.name);
                ip_in(
                    link.host,
                    &[
                        "link", "add", &link.name, "type", "veth", "peer", "name", &peer,
                    ],
                );
                ip_in(
                    link.host,
                    &["addr", "add", "192.0.2.77/32", "dev", &link.name],
                );
                ip_in(link.host, &["link", "set", &link.name, "up"]);
                ip_in(link.host, &["link", "del", &link.name]);
            });
        };
        let url = format!("https://{SIGN_IN_HOST}:{slow_port}/sign-in");
        let (loaded, ()) = tokio::join!(browser.try_open(&url), change);
        loaded.expect("the page loads whatever the host's network does");
        assert_eq!(browser.title().await, "Sign in");
    });
}
