//! A headless Chromium for the web tests: [`Browser`] starts Debian's `chromedriver` on a
//! free loopback port and one Chromium session through it, and drives it as a person would
//! (open, fill, click, submit, read), keeping screenshots and HTML of the views a test names
//! under `target/browser/<test>/`.
//!
//! Invariants:
//! - Chromium trusts exactly the CAs a test gives it, the way it trusts a CA on Linux: a
//!   private NSS database in a temporary `HOME`. Certificate errors are never ignored, so a
//!   server signed by another CA fails to load ([`LoadError::Certificate`]).
//! - Chromium reaches loopback only: `localhost` and names under `.localhost` resolve to
//!   127.0.0.1 by Chromium's own rule, `127.0.0.1` and `::1` are used as given, and every
//!   other name or address is made unresolvable, so neither a page nor the browser's
//!   background services leave the machine.
//! - Chromium runs in a network namespace that nothing else changes: a [`Browser`] starts
//!   only inside [`isolated`], which gives the whole test (its servers, its zone and the
//!   browser) a namespace of its own with nothing but loopback. Chromium aborts every load
//!   in flight with `ERR_NETWORK_CHANGED` when an address or a link of its namespace comes
//!   or goes, which the namespace tests running beside it would otherwise do at any time.
//! - Everything started here lives in one process group and one temporary directory, both
//!   removed when the [`Browser`] is dropped, also when the test panics.
//! - Fail, never skip: a machine without Chromium, chromedriver or `certutil` fails the test,
//!   naming the Debian package to install.
//!
//! The helpers panic with what they were doing (a test's assertion), except
//! [`Browser::try_open`], whose failure a test may expect.
//!
//! ```no_run
//! # async fn signs_in(zone_ca_pem: &str) {
//! use orc_testkit::browser::{Browser, SameSite};
//!
//! // Inside `orc_testkit::browser::isolated(async { … })`, which a `#[test]` calls.
//! let browser = Browser::builder("signs_in").trust_ca(zone_ca_pem).start().await;
//! browser.open("https://orc.localhost:7443/sign-in").await;
//! browser.fill_labelled("User", "olivia").await;
//! browser.press("Sign in").await;
//! browser.wait_for_text("Signed in as olivia").await;
//! let session = browser.cookie("orc_session").await.expect("a session cookie");
//! assert!(session.http_only && session.secure);
//! assert_eq!(session.same_site, Some(SameSite::Lax));
//! browser.snapshot("signed-in").await; // target/browser/signs_in/signed-in.{png,html}
//! # }
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::future::Future;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fantoccini::error::{CmdError, ErrorStatus};
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde::Deserialize;
use serde_json::{Value, json};
use tempfile::TempDir;

pub use url::Url;

/// The window every session gets, so screenshots are comparable between runs and machines.
pub const WINDOW: (u32, u32) = (1280, 800);

/// How long [`Browser::wait_for_text`] and the other waits here wait at most.
pub const WAIT: Duration = Duration::from_secs(30);

/// How long a page may take to load before the navigation fails.
const PAGE_LOAD: Duration = Duration::from_secs(15);

/// How long chromedriver may take to start listening.
const DRIVER_START: Duration = Duration::from_secs(10);

/// Debian's Chromium: the browser binary itself, not the `/usr/bin/chromium` launcher,
/// whose `/etc/chromium.d` adds flags and Google API keys that differ between machines.
const CHROMIUM: &str = "/usr/lib/chromium/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const CERTUTIL: &str = "/usr/bin/certutil";

/// Where [`Browser::audit`] finds axe-core, under the target directory, and the version
/// `.ci/run` installs there (`npm install --prefix target/axe axe-core@…`): pinned, so a new
/// release's rules change no test's outcome by themselves.
const AXE: &str = "axe/node_modules/axe-core/axe.min.js";
const AXE_VERSION: &str = "4.14.1";

/// The network namespace [`isolated`] made for this process's test, by inode.
static ISOLATED: AtomicU64 = AtomicU64::new(0);

/// Runs `test` in a network namespace of its own and returns what it returns: the calling
/// thread leaves the host's namespace for a new one with only loopback up, then builds the
/// Tokio runtime (two workers) that runs `test`. Every thread and process the test starts
/// from there (servers, a zone, chromedriver, Chromium) shares the namespace, so they reach
/// each other on loopback as before, while nothing they do or see touches the host's
/// network. The namespace ends with the last of them.
///
/// A [`Browser`] starts only inside it. Needs root, as the browser tests do in CI; without
/// it, or without `ip`, the test fails saying so.
///
/// ```no_run
/// #[test]
/// fn signs_in() {
///     orc_testkit::browser::isolated(async {
///         // start servers, then `Browser::builder("signs_in")…`
///     });
/// }
/// ```
pub fn isolated<F: Future>(test: F) -> F::Output {
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).unwrap_or_else(|e| {
        panic!(
            "cannot make a network namespace for the browser test ({e}): the browser tests \
             run as root"
        )
    });
    // A process started from this thread is born in its namespace.
    let status = Command::new("ip")
        .args(["link", "set", "lo", "up"])
        .stdin(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("cannot run `ip` ({e}): apt-get install iproute2"));
    assert!(
        status.success(),
        "`ip link set lo up` in the test's network namespace failed: {status}"
    );
    ISOLATED.store(network_namespace(), Ordering::SeqCst);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a Tokio runtime for the browser test")
        .block_on(test)
}

/// The inode of the calling thread's network namespace.
fn network_namespace() -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/thread-self/ns/net")
        .expect("the thread's network namespace")
        .ino()
}

/// How to start a [`Browser`]; from [`Browser::builder`].
#[derive(Debug, Clone)]
pub struct BrowserBuilder {
    test: String,
    trusted: Vec<String>,
    javascript: bool,
}

impl BrowserBuilder {
    /// Trusts the CA certificate in `ca_pem` for server certificates (NSS trust `C,,`).
    pub fn trust_ca(mut self, ca_pem: &str) -> Self {
        self.trusted.push(ca_pem.to_string());
        self
    }

    /// Turns the pages' JavaScript off (on by default). WebDriver's own scripts, which the
    /// helpers here use to read the page, still run.
    pub fn javascript(mut self, enabled: bool) -> Self {
        self.javascript = enabled;
        self
    }

    /// Starts chromedriver and a Chromium session; panics naming what is missing or what
    /// failed.
    pub async fn start(self) -> Browser {
        Browser::start_with(self).await
    }
}

/// A headless Chromium session and the chromedriver it runs under. Dropping it ends both.
pub struct Browser {
    client: Client,
    test: String,
    javascript: bool,
    artifacts: PathBuf,
    driver: Driver,
}

impl fmt::Debug for Browser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Browser")
            .field("test", &self.test)
            .field("driver", &self.driver.addr)
            .field("dir", &self.driver.dir.path())
            .finish_non_exhaustive()
    }
}

/// Why a page did not load.
#[derive(Debug)]
pub enum LoadError {
    /// The server's certificate was refused (not signed by a trusted CA, expired, for
    /// another name).
    Certificate { url: String, reason: String },
    /// Anything else: a refused connection, a name that does not resolve, a timeout.
    Other { url: String, reason: String },
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Certificate { url, reason } => {
                write!(f, "{url}: certificate refused: {reason}")
            }
            LoadError::Other { url, reason } => write!(f, "{url} did not load: {reason}"),
        }
    }
}

impl std::error::Error for LoadError {}

/// A cookie as the browser keeps it, with its flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cookie {
    pub name: String,
    pub value: String,
    /// The domain it is sent to, as chromedriver reports it: without a leading dot, so a
    /// `Domain=orc.localhost` cookie and a host-only cookie of `orc.localhost` read alike.
    pub domain: Option<String>,
    pub path: Option<String>,
    pub secure: bool,
    pub http_only: bool,
    pub same_site: Option<SameSite>,
}

/// A cookie's `SameSite` attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SameSite {
    Strict,
    Lax,
    None,
}

/// The files [`Browser::snapshot`] wrote.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The screenshot of the window.
    pub png: PathBuf,
    /// The page's HTML as the browser holds it (after any script ran).
    pub html: PathBuf,
}

/// How much an accessibility violation matters, as axe-core grades it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Impact {
    Minor,
    Moderate,
    Serious,
    Critical,
}

/// One rule a page breaks, with the elements that break it.
#[derive(Debug, Clone, Deserialize)]
pub struct Violation {
    /// axe-core's rule id, e.g. `label` or `color-contrast`.
    pub id: String,
    pub impact: Option<Impact>,
    /// What the rule asks for.
    pub help: String,
    /// CSS selectors of the offending elements.
    pub nodes: Vec<String>,
}

/// What [`Browser::audit`] found: the violations, most serious first.
#[derive(Debug, Clone)]
pub struct Audit {
    pub violations: Vec<Violation>,
}

impl Audit {
    /// The violations of `impact` or worse.
    pub fn at_least(&self, impact: Impact) -> Vec<&Violation> {
        self.violations
            .iter()
            .filter(|v| v.impact.is_none_or(|i| i >= impact))
            .collect()
    }

    /// The violations' rule ids by impact (`None`: axe gave none).
    pub fn by_impact(&self) -> BTreeMap<Option<Impact>, Vec<&str>> {
        let mut map: BTreeMap<Option<Impact>, Vec<&str>> = BTreeMap::new();
        for v in &self.violations {
            map.entry(v.impact).or_default().push(&v.id);
        }
        map
    }
}

impl fmt::Display for Audit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.violations.is_empty() {
            return write!(f, "no accessibility violations");
        }
        for v in &self.violations {
            let impact = v.impact.map_or("unknown".to_string(), |i| format!("{i:?}"));
            writeln!(f, "{impact}: {} ({}): {}", v.id, v.help, v.nodes.join(", "))?;
        }
        Ok(())
    }
}

impl Browser {
    /// How to start a browser for the test `test` (its screenshots go to
    /// `target/browser/<test>/`): letters, digits, `_`, `-` and `.` only.
    pub fn builder(test: &str) -> BrowserBuilder {
        BrowserBuilder {
            test: test.to_string(),
            trusted: Vec::new(),
            javascript: true,
        }
    }

    async fn start_with(options: BrowserBuilder) -> Browser {
        check_file_name("test name", &options.test);
        let isolated = ISOLATED.load(Ordering::SeqCst);
        assert!(
            isolated != 0 && isolated == network_namespace(),
            "a Browser starts only inside orc_testkit::browser::isolated: elsewhere, \
             Chromium shares the host's network and aborts its loads when another test adds \
             or removes an address"
        );
        require(CHROMIUM, "chromium", "chromium");
        require(CHROMEDRIVER, "chromedriver", "chromium-driver");
        if !options.trusted.is_empty() {
            require(CERTUTIL, "certutil", "libnss3-tools");
        }
        let artifacts = target_dir().join("browser").join(&options.test);
        // Only this run's views: a view a test no longer takes must not linger.
        if artifacts.exists() {
            std::fs::remove_dir_all(&artifacts)
                .unwrap_or_else(|e| panic!("cannot empty {}: {e}", artifacts.display()));
        }
        std::fs::create_dir_all(&artifacts)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", artifacts.display()));

        let dir = tempfile::Builder::new()
            .prefix("orc-browser-")
            .tempdir()
            .expect("a temporary directory for the browser");
        let home = dir.path().join("home");
        for sub in ["home", "tmp", "profile"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("browser directories");
        }
        for (n, pem) in options.trusted.iter().enumerate() {
            trust(&home, &format!("orc-test-ca-{n}"), pem);
        }
        let mut driver = Driver::spawn(dir).await;
        let capabilities = capabilities(&driver.dir, options.javascript);
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities)
            .connect(&format!("http://{}", driver.addr))
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "chromedriver did not start a Chromium session: {e}\n{}",
                    driver.log()
                )
            });
        driver.session = client
            .session_id()
            .await
            .expect("the session's id")
            .map(|id| id.to_string());
        fit_window(&client).await;
        Browser {
            client,
            test: options.test,
            javascript: options.javascript,
            artifacts,
            driver,
        }
    }

    /// Opens `url` and waits for it to load; panics when it does not.
    pub async fn open(&self, url: &str) {
        if let Err(e) = self.try_open(url).await {
            panic!("{e}");
        }
    }

    /// Opens `url` and waits for it to load, or says why it did not.
    pub async fn try_open(&self, url: &str) -> Result<(), LoadError> {
        let failure = match self.client.goto(url).await {
            // A failed load may also show Chromium's own error page (for a certificate, an
            // interstitial at the page's URL), which WebDriver counts as loaded.
            Ok(()) => match self.error_code().await {
                Some(code) => (code, false),
                None => return Ok(()),
            },
            Err(e) => {
                let text = message(&e);
                (
                    net_error(&text).unwrap_or(text),
                    e.is_insecure_certificate(),
                )
            }
        };
        let (reason, insecure) = failure;
        let url = url.to_string();
        Err(
            if insecure || reason.starts_with("ERR_CERT") || reason.starts_with("ERR_SSL") {
                LoadError::Certificate { url, reason }
            } else {
                LoadError::Other { url, reason }
            },
        )
    }

    /// Types `value` into the input or text area found by the CSS `selector`, replacing
    /// what it held.
    pub async fn fill(&self, selector: &str, value: &str) {
        let field = self.find(Locator::Css(selector), selector).await;
        field
            .clear()
            .await
            .unwrap_or_else(|e| panic!("clearing {selector}: {}", message(&e)));
        field
            .send_keys(value)
            .await
            .unwrap_or_else(|e| panic!("typing into {selector}: {}", message(&e)));
    }

    /// [`Browser::fill`] for the field whose `<label>` reads `label` (whitespace
    /// collapsed): the label's `for` target, or the field inside the label.
    pub async fn fill_labelled(&self, label: &str, value: &str) {
        let field = self.labelled(label).await;
        field
            .clear()
            .await
            .unwrap_or_else(|e| panic!("clearing the field labelled {label:?}: {}", message(&e)));
        field.send_keys(value).await.unwrap_or_else(|e| {
            panic!("typing into the field labelled {label:?}: {}", message(&e))
        });
    }

    /// Chooses the option reading `option` in the `<select>` found by the CSS `selector`.
    pub async fn select(&self, selector: &str, option: &str) {
        let field = self.find(Locator::Css(selector), selector).await;
        field
            .select_by_label(option)
            .await
            .unwrap_or_else(|e| panic!("choosing {option:?} in {selector}: {}", message(&e)));
    }

    /// Clicks the element found by the CSS `selector`, and waits for a navigation it
    /// starts.
    pub async fn click(&self, selector: &str) {
        self.find(Locator::Css(selector), selector)
            .await
            .click()
            .await
            .unwrap_or_else(|e| panic!("clicking {selector}: {}", message(&e)));
    }

    /// Clicks the button (`<button>` or `<input type=submit|button>`) reading `text`.
    pub async fn press(&self, text: &str) {
        let lit = xpath_literal(text);
        let xpath = format!(
            "//button[normalize-space(.)={lit}] | \
             //input[(@type='submit' or @type='button') and @value={lit}]"
        );
        self.find(Locator::XPath(&xpath), &format!("the button {text:?}"))
            .await
            .click()
            .await
            .unwrap_or_else(|e| panic!("pressing the button {text:?}: {}", message(&e)));
    }

    /// Follows the link reading `text`.
    pub async fn follow(&self, text: &str) {
        self.find(Locator::LinkText(text), &format!("the link {text:?}"))
            .await
            .click()
            .await
            .unwrap_or_else(|e| panic!("following the link {text:?}: {}", message(&e)));
    }

    /// Submits the form found by the CSS `selector` by clicking its submit button, as a
    /// person does (no script involved).
    pub async fn submit(&self, selector: &str) {
        let form = self.find(Locator::Css(selector), selector).await;
        let button = form
            .find(Locator::Css(
                "button[type=submit], button:not([type]), input[type=submit]",
            ))
            .await
            .unwrap_or_else(|e| panic!("{selector} has no submit button: {}", message(&e)));
        button
            .click()
            .await
            .unwrap_or_else(|e| panic!("submitting {selector}: {}", message(&e)));
    }

    /// The page's text as rendered (the body's `innerText`).
    pub async fn text(&self) -> String {
        self.text_of("body").await
    }

    /// The rendered text of the element found by the CSS `selector`.
    pub async fn text_of(&self, selector: &str) -> String {
        self.find(Locator::Css(selector), selector)
            .await
            .text()
            .await
            .unwrap_or_else(|e| panic!("reading the text of {selector}: {}", message(&e)))
    }

    /// Whether an element matches the CSS `selector` now.
    pub async fn has(&self, selector: &str) -> bool {
        match self.client.find_all(Locator::Css(selector)).await {
            Ok(found) => !found.is_empty(),
            Err(e) => panic!("looking for {selector}: {}", message(&e)),
        }
    }

    /// The page's title.
    pub async fn title(&self) -> String {
        self.client
            .title()
            .await
            .unwrap_or_else(|e| panic!("reading the title: {}", message(&e)))
    }

    /// The page's URL, after any redirect.
    pub async fn url(&self) -> Url {
        self.client
            .current_url()
            .await
            .unwrap_or_else(|e| panic!("reading the URL: {}", message(&e)))
    }

    /// The HTTP status of the response the page came from (Navigation Timing), or `None`
    /// when the browser does not know it (an error page).
    pub async fn status(&self) -> Option<u16> {
        let status = self
            .script(
                "const n = performance.getEntriesByType('navigation')[0];\
                 return n ? n.responseStatus : null;",
            )
            .await;
        status
            .as_u64()
            .filter(|s| *s != 0)
            .and_then(|s| u16::try_from(s).ok())
    }

    /// The page's HTML as the browser holds it now.
    pub async fn html(&self) -> String {
        self.client
            .source()
            .await
            .unwrap_or_else(|e| panic!("reading the page's HTML: {}", message(&e)))
    }

    /// The cookies the browser would send to the current page, `HttpOnly` ones included.
    pub async fn cookies(&self) -> Vec<Cookie> {
        let cookies = self
            .client
            .get_all_cookies()
            .await
            .unwrap_or_else(|e| panic!("reading the cookies: {}", message(&e)));
        let mut cookies: Vec<Cookie> = cookies
            .into_iter()
            .map(|c| Cookie {
                name: c.name().to_string(),
                value: c.value().to_string(),
                domain: c.domain().map(str::to_string),
                path: c.path().map(str::to_string),
                secure: c.secure().unwrap_or(false),
                http_only: c.http_only().unwrap_or(false),
                same_site: c.same_site().map(|s| match s.to_string().as_str() {
                    "Strict" => SameSite::Strict,
                    "Lax" => SameSite::Lax,
                    _ => SameSite::None,
                }),
            })
            .collect();
        cookies.sort_by(|a, b| (&a.name, &a.domain).cmp(&(&b.name, &b.domain)));
        cookies
    }

    /// The cookie `name` the browser would send to the current page.
    pub async fn cookie(&self, name: &str) -> Option<Cookie> {
        self.cookies().await.into_iter().find(|c| c.name == name)
    }

    /// Saves the window's screenshot as `target/browser/<test>/<view>.png` and the page's
    /// HTML as `<view>.html` next to it.
    pub async fn snapshot(&self, view: &str) -> Snapshot {
        check_file_name("view name", view);
        let png = self
            .client
            .screenshot()
            .await
            .unwrap_or_else(|e| panic!("taking the screenshot {view}: {}", message(&e)));
        let html = self.html().await;
        let snapshot = Snapshot {
            png: self.artifacts.join(format!("{view}.png")),
            html: self.artifacts.join(format!("{view}.html")),
        };
        write(&snapshot.png, &png);
        write(&snapshot.html, html.as_bytes());
        snapshot
    }

    /// Waits until the page's text contains `text`, at most [`WAIT`]; when the time is up,
    /// panics with the address and the beginning of the text the page shows instead.
    pub async fn wait_for_text(&self, text: &str) {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if self.body_text().await.is_some_and(|t| t.contains(text)) {
                return;
            }
            if tokio::time::Instant::now() >= deadline {
                let url = self
                    .client
                    .current_url()
                    .await
                    .map(|u| u.to_string())
                    .unwrap_or_else(|e| format!("(no address: {e})"));
                let shown = self.body_text().await.unwrap_or_default();
                let shown: String = shown.chars().take(600).collect();
                panic!(
                    "gave up after {WAIT:?} waiting for the page to show {text:?}; {url} shows: \
                     {shown:?}"
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The text of the page's body, if there is a page with a body.
    async fn body_text(&self) -> Option<String> {
        let body = self.client.find(Locator::Css("body")).await.ok()?;
        body.text().await.ok()
    }

    /// Waits until the page's URL is on `host`, at most [`WAIT`].
    pub async fn wait_for_host(&self, host: &str) {
        let what = format!("the browser to be on {host}");
        crate::eventually(&what, WAIT, || async {
            self.client
                .current_url()
                .await
                .is_ok_and(|u| u.host_str() == Some(host))
        })
        .await;
    }

    /// Runs axe-core's accessibility rules on the page and returns what it breaks, most
    /// serious first. Panics when axe-core is not installed, naming the command that
    /// installs it. axe-core runs in the page: the session needs JavaScript on.
    pub async fn audit(&self) -> Audit {
        assert!(
            self.javascript,
            "the audit runs axe-core in the page: use a browser with JavaScript on"
        );
        let path = target_dir().join(AXE);
        let source = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "axe-core is missing ({}: {e}): run \
                 `npm install --prefix {} axe-core@{AXE_VERSION}`",
                path.display(),
                target_dir().join("axe").display()
            )
        });
        self.script(&source).await;
        let found = self
            .client
            .execute_async(
                "const done = arguments[arguments.length - 1];\
                 axe.run(document, { resultTypes: ['violations'] })\
                   .then(r => done({ violations: r.violations.map(v => ({\
                       id: v.id, impact: v.impact, help: v.help,\
                       nodes: v.nodes.map(n => n.target.join(' ')) })) }))\
                   .catch(e => done({ error: String(e) }));",
                Vec::new(),
            )
            .await
            .unwrap_or_else(|e| panic!("running axe-core: {}", message(&e)));
        if let Some(error) = found.get("error") {
            panic!("axe-core failed: {error}");
        }
        let mut violations: Vec<Violation> = serde_json::from_value(found["violations"].clone())
            .unwrap_or_else(|e| panic!("axe-core's answer: {e}: {found}"));
        violations.sort_by(|a, b| b.impact.cmp(&a.impact).then_with(|| a.id.cmp(&b.id)));
        Audit { violations }
    }

    /// The process group of chromedriver and Chromium (for tests of the teardown).
    pub fn process_group(&self) -> u32 {
        self.driver.process.id()
    }

    /// The temporary directory holding Chromium's profile, `HOME` and `TMPDIR` (for tests
    /// of the teardown).
    pub fn scratch_dir(&self) -> &Path {
        self.driver.dir.path()
    }

    /// The WebDriver client, for what the helpers here do not cover.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Ends the session, letting Chromium exit on its own, then chromedriver.
    pub async fn close(self) {
        let Browser {
            client, mut driver, ..
        } = self;
        if client.close().await.is_ok() {
            driver.session = None;
        }
    }

    async fn find(&self, locator: Locator<'_>, what: &str) -> fantoccini::elements::Element {
        self.client
            .find(locator)
            .await
            .unwrap_or_else(|e| panic!("finding {what}: {}", message(&e)))
    }

    async fn labelled(&self, label: &str) -> fantoccini::elements::Element {
        let lit = xpath_literal(label);
        let field = "*[self::input or self::textarea or self::select]";
        let xpath = format!(
            "//{field}[@id = //label[normalize-space(.)={lit}]/@for] | \
             //label[normalize-space(.)={lit}]//{field}"
        );
        self.find(
            Locator::XPath(&xpath),
            &format!("the field labelled {label:?}"),
        )
        .await
    }

    /// The `ERR_…` code Chromium's error page shows, when the page is one.
    async fn error_code(&self) -> Option<String> {
        let code = self
            .script(
                "const e = document.querySelector('.error-code');\
                 const t = e ? e.textContent.trim() : '';\
                 return /^(net::)?ERR_[A-Z0-9_]+$/i.test(t) ? t : null;",
            )
            .await;
        code.as_str().and_then(net_error)
    }

    async fn script(&self, script: &str) -> Value {
        self.client
            .execute(script, Vec::new())
            .await
            .unwrap_or_else(|e| panic!("running a script on the page: {}", message(&e)))
    }
}

/// chromedriver, started in its own process group with a temporary directory for itself,
/// Chromium's profile, `HOME` and `TMPDIR`.
struct Driver {
    process: Child,
    addr: SocketAddr,
    /// The session to end when dropped, while it is open.
    session: Option<String>,
    dir: TempDir,
}

impl Driver {
    async fn spawn(dir: TempDir) -> Driver {
        let log = dir.path().join("chromedriver.log");
        let stderr = File::create(dir.path().join("stderr.log")).expect("a file for stderr");
        let home = dir.path().join("home");
        // The port comes from the kernel here, free at this moment in this namespace: with
        // `--port=0`, chromedriver picks one itself and now and then one already taken
        // (`bind() failed: Address already in use`).
        let port = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|listener| listener.local_addr())
            .map(|addr| addr.port())
            .expect("a free loopback port for chromedriver");
        let mut command = Command::new(CHROMEDRIVER);
        command
            .arg(format!("--port={port}"))
            .arg(format!("--log-path={}", log.display()))
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .env("TMPDIR", dir.path().join("tmp"))
            .env("TZ", "UTC")
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr);
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut process = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {CHROMEDRIVER}: {e}"));
        let stdout = process.stdout.take().expect("chromedriver's stdout");
        let (port_tx, port_rx) = tokio::sync::oneshot::channel();
        // chromedriver prints the port it chose; the thread then reads to the end so it never
        // blocks on a full pipe.
        std::thread::spawn(move || {
            let mut port_tx = Some(port_tx);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(port) = line
                    .strip_prefix("ChromeDriver was started successfully on port ")
                    .and_then(|rest| rest.trim_end_matches('.').parse::<u16>().ok())
                    && let Some(tx) = port_tx.take()
                {
                    let _ = tx.send(port);
                }
            }
        });
        let mut driver = Driver {
            process,
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            session: None,
            dir,
        };
        match tokio::time::timeout(DRIVER_START, port_rx).await {
            Ok(Ok(port)) => driver.addr.set_port(port),
            _ => panic!(
                "chromedriver did not start listening within {DRIVER_START:?}\n{}",
                driver.log()
            ),
        }
        driver
    }

    /// The ends of chromedriver's log and of what it and Chromium printed, for a failure's
    /// message.
    fn log(&self) -> String {
        let tail = |name: &str| {
            let text = std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(20)..].join("\n")
        };
        format!(
            "chromedriver's log ends:\n{}\nchromedriver and Chromium printed:\n{}",
            tail("chromedriver.log"),
            tail("stderr.log")
        )
    }

    /// Asks chromedriver to end the session, which quits Chromium and waits for it. Blocking
    /// and bounded: it runs in `drop`, where nothing can be awaited.
    fn end_session(&self, session: &str) {
        let Ok(mut stream) = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1)) else {
            return;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
        let request = format!(
            "DELETE /session/{session} HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\n\
             Connection: close\r\n\r\n",
            self.addr
        );
        if stream.write_all(request.as_bytes()).is_err() {
            return;
        }
        // chromedriver answers once Chromium is gone, and keeps the connection open: the
        // answer's head is all there is to wait for.
        let mut answer = Vec::new();
        let mut chunk = [0u8; 512];
        while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&chunk[..n]),
            }
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            self.end_session(&session);
        }
        // Whatever is left of chromedriver and Chromium, at once: they share the group whose
        // id is chromedriver's pid. Then the temporary directory goes, once nothing of the
        // group can write to it any more.
        let group = self.process.id();
        if let Some(pid) = rustix::process::Pid::from_raw(group as i32) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        let _ = self.process.wait();
        let deadline = Instant::now() + Duration::from_secs(2);
        while group_runs(group) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Whether a process of the group `group` still runs (see [`Browser::process_group`]).
/// Chromium's helpers, orphaned when chromedriver dies, linger as zombies until the system
/// reaps them: those do not count.
pub fn group_runs(group: u32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        // `pid (comm) state ppid pgrp …`; comm may hold spaces and parentheses.
        let Some((_, rest)) = stat.rsplit_once(") ") else {
            return false;
        };
        let mut fields = rest.split(' ');
        let state = fields.next();
        let pgrp = fields.nth(1);
        pgrp == Some(group.to_string().as_str()) && !matches!(state, Some("Z" | "X"))
    })
}

/// Resizes the window so that the page's viewport, and so every screenshot, is [`WINDOW`]:
/// `--window-size` sets the outer size, of which the headless browser's frame takes a part.
async fn fit_window(client: &Client) {
    let (width, height) = WINDOW;
    let measure = || async {
        let inner = client
            .execute("return [window.innerWidth, window.innerHeight]", Vec::new())
            .await
            .unwrap_or_else(|e| panic!("measuring the viewport: {}", message(&e)));
        let size = |i: usize| inner[i].as_u64().and_then(|v| u32::try_from(v).ok());
        (size(0), size(1))
    };
    let (Some(inner_width), Some(inner_height)) = measure().await else {
        panic!("the viewport's size is not a pair of numbers");
    };
    if (inner_width, inner_height) == WINDOW {
        return;
    }
    let (outer_width, outer_height) = client
        .get_window_size()
        .await
        .unwrap_or_else(|e| panic!("reading the window's size: {}", message(&e)));
    let frame = |outer: u64, inner: u32| u32::try_from(outer).unwrap_or(0).saturating_sub(inner);
    client
        .set_window_size(
            width + frame(outer_width, inner_width),
            height + frame(outer_height, inner_height),
        )
        .await
        .unwrap_or_else(|e| panic!("resizing the window: {}", message(&e)));
    let viewport = measure().await;
    assert_eq!(
        viewport,
        (Some(width), Some(height)),
        "the viewport does not take the size of WINDOW"
    );
}

/// The session's capabilities: headless Chromium with a fixed window, its profile in `dir`,
/// certificate errors reported, names outside `.localhost` unresolvable.
fn capabilities(dir: &TempDir, javascript: bool) -> serde_json::Map<String, Value> {
    let (width, height) = WINDOW;
    let args = vec![
        "--headless".to_string(),
        // CI runs as root, where Chromium's sandbox cannot start; the pages are the tests' own.
        "--no-sandbox".to_string(),
        format!("--user-data-dir={}", dir.path().join("profile").display()),
        format!("--window-size={width},{height}"),
        "--force-device-scale-factor=1".to_string(),
        "--hide-scrollbars".to_string(),
        "--lang=en-US".to_string(),
        "--disable-dev-shm-usage".to_string(),
        "--password-store=basic".to_string(),
        "--no-first-run".to_string(),
        "--no-default-browser-check".to_string(),
        "--no-proxy-server".to_string(),
        // No traffic of the browser's own: updates, sync, metrics, safe browsing, pings.
        "--disable-background-networking".to_string(),
        "--disable-component-update".to_string(),
        "--disable-sync".to_string(),
        "--disable-extensions".to_string(),
        "--disable-default-apps".to_string(),
        "--disable-domain-reliability".to_string(),
        "--disable-client-side-phishing-detection".to_string(),
        "--disable-breakpad".to_string(),
        "--no-pings".to_string(),
        // `localhost`, `*.localhost` (loopback by Chromium's own rule) and the loopback
        // addresses as usual; any other name or address does not resolve.
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE *.localhost, \
         EXCLUDE 127.0.0.1, EXCLUDE ::1"
            .to_string(),
    ];
    let mut prefs = serde_json::Map::new();
    if !javascript {
        prefs.insert(
            "profile.managed_default_content_settings.javascript".to_string(),
            json!(2),
        );
    }
    let capabilities = json!({
        "browserName": "chrome",
        "acceptInsecureCerts": false,
        "pageLoadStrategy": "normal",
        "timeouts": {
            "pageLoad": PAGE_LOAD.as_millis() as u64,
            "script": WAIT.as_millis() as u64,
            "implicit": 0,
        },
        "goog:chromeOptions": {
            "binary": CHROMIUM,
            "args": args,
            "prefs": prefs,
        },
    });
    match capabilities {
        Value::Object(map) => map,
        _ => unreachable!("a JSON object literal"),
    }
}

/// Adds `pem` to the NSS database in `home`, trusted to sign server certificates, creating
/// the database (empty password) first.
fn trust(home: &Path, nickname: &str, pem: &str) {
    let db = home.join(".pki/nssdb");
    let db_arg = format!("sql:{}", db.display());
    if !db.join("cert9.db").exists() {
        std::fs::create_dir_all(&db).expect("the NSS database's directory");
        certutil(&["-N", "-d", &db_arg, "--empty-password"]);
    }
    let file = home.join(format!("{nickname}.pem"));
    write(&file, pem.as_bytes());
    certutil(&[
        "-A",
        "-d",
        &db_arg,
        "-n",
        nickname,
        "-t",
        "C,,",
        "-a",
        "-i",
        &file.to_string_lossy(),
    ]);
}

fn certutil(args: &[&str]) {
    let out = Command::new(CERTUTIL)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {CERTUTIL}: {e}"));
    assert!(
        out.status.success(),
        "certutil {} failed: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Fails the test when `path` is missing, naming the Debian package that installs it.
fn require(path: &str, what: &str, package: &str) {
    assert!(
        Path::new(path).exists(),
        "{what} ({path}) is missing: the browser tests need it; apt-get install {package}"
    );
}

/// The target directory of the build that made this test binary: the directory above
/// `<profile>/deps/` where cargo put it, else `CARGO_TARGET_DIR`. (Cargo marks a target
/// directory with `CACHEDIR.TAG` only when it creates it, so the tag is no guide.)
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe
        .parent()
        .filter(|d| d.file_name() == Some("deps".as_ref()));
    if let Some(dir) = deps.and_then(Path::parent).and_then(Path::parent) {
        return dir.to_path_buf();
    }
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => panic!(
            "cannot tell the target directory of {}: set CARGO_TARGET_DIR",
            exe.display()
        ),
    }
}

fn check_file_name(what: &str, name: &str) {
    assert!(
        !name.is_empty()
            && !name.starts_with('.')
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')),
        "the {what} {name:?} must be letters, digits, `_`, `-` or `.` (it names a file)"
    );
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
}

/// A WebDriver error's own words, without fantoccini's wrapping.
fn message(error: &CmdError) -> String {
    match error {
        CmdError::Standard(w) if w.error == ErrorStatus::InsecureCertificate => {
            format!("insecure certificate: {}", w.message)
        }
        CmdError::Standard(w) => format!("{}: {}", w.error, w.message),
        other => other.to_string(),
    }
}

/// The network error code (`ERR_CONNECTION_REFUSED`) in a message or on an error page,
/// however it is prefixed (`net::`, `NET::`).
fn net_error(text: &str) -> Option<String> {
    text.split(|c: char| c.is_whitespace() || c == ':')
        .find(|w| {
            w.len() > 4
                && w.starts_with("ERR_")
                && w[4..]
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        })
        .map(str::to_string)
}

/// `text` as an XPath string literal (XPath 1 has no escapes: `concat` joins the pieces
/// around single quotes).
fn xpath_literal(text: &str) -> String {
    if !text.contains('\'') {
        format!("'{text}'")
    } else if !text.contains('"') {
        format!("\"{text}\"")
    } else {
        let pieces: Vec<String> = text.split('\'').map(|p| format!("'{p}'")).collect();
        format!("concat({})", pieces.join(", \"'\", "))
    }
}

/// The width and height in a PNG's header, or `None` when `bytes` is not a PNG.
pub fn png_size(bytes: &[u8]) -> Option<(u32, u32)> {
    const SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
    if bytes.len() < 24 || &bytes[..8] != SIGNATURE || &bytes[12..16] != b"IHDR" {
        return None;
    }
    let width = u32::from_be_bytes(bytes[16..20].try_into().ok()?);
    let height = u32::from_be_bytes(bytes[20..24].try_into().ok()?);
    Some((width, height))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xpath_literals_quote_any_text() {
        assert_eq!(xpath_literal("Name"), "'Name'");
        assert_eq!(xpath_literal("Org's name"), "\"Org's name\"");
        assert_eq!(xpath_literal("a'b\"c"), "concat('a', \"'\", 'b\"c')");
    }

    #[test]
    fn net_errors_are_found_however_prefixed() {
        let driver = "unknown error: net::ERR_CONNECTION_REFUSED\n  (Session info: chrome=148)";
        assert_eq!(net_error(driver).as_deref(), Some("ERR_CONNECTION_REFUSED"));
        assert_eq!(
            net_error("NET::ERR_CERT_AUTHORITY_INVALID").as_deref(),
            Some("ERR_CERT_AUTHORITY_INVALID")
        );
        assert_eq!(net_error("ERR_"), None);
        assert_eq!(net_error("timeout: page load"), None);
    }

    #[test]
    fn png_size_reads_the_header_and_refuses_other_bytes() {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        png.extend_from_slice(&1280u32.to_be_bytes());
        png.extend_from_slice(&800u32.to_be_bytes());
        assert_eq!(png_size(&png), Some((1280, 800)));
        assert_eq!(png_size(b"<html></html>"), None);
    }

    #[test]
    #[should_panic(
        expected = "is missing: the browser tests need it; apt-get install chromium-driver"
    )]
    fn a_missing_program_fails_naming_its_package() {
        require(
            "/nonexistent/chromedriver",
            "chromedriver",
            "chromium-driver",
        );
    }

    #[test]
    #[should_panic(expected = "must be letters, digits")]
    fn a_view_name_cannot_leave_its_directory() {
        check_file_name("view name", "../escape");
    }
}
