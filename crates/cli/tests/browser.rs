//! A person with only a browser, against `orc up`: signs in at the access edge with the
//! admin token, opens the partner's admin page through it, walks its six views, runs a quote
//! preview and a validation on the serving replica, finds the standby's banner on the other
//! slot, reads the page with JavaScript off, is refused as a viewer, and signs out.
//!
//! Every view is kept as a screenshot and its HTML under `target/browser/<test>/` (CI keeps
//! them) and passes an axe-core audit with no serious or critical violation. No page holds
//! the emulated clouds' key or the admin token. Runs in real headless Chromium, which trusts
//! the zone's CA through a private NSS database; it fails, never skips, where Chromium is
//! missing.

mod support;

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use orc_testkit::browser::{Browser, Impact, SameSite, isolated};
use support::up::Up;

/// The emulated clouds' credential `orc up` gives the partner (a sensitive param).
const EMULATOR_TOKEN: &str = "orc-up-emulator-token";

/// The page's six views: the link that opens each, and the heading it shows.
const VIEWS: [(&str, &str, &str); 6] = [
    ("Overview", "overview", "Overview"),
    ("Config", "config", "Config"),
    ("Children", "children", "Children"),
    ("Quote preview", "quote", "Quote preview"),
    ("Pool addresses", "addresses", "Pool addresses"),
    ("Validate", "validate", "Validate"),
];

fn port_of(url: &str) -> u16 {
    url.rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .unwrap_or_else(|| panic!("no port in {url}"))
}

/// Checks the page against axe-core's rules: nothing serious or critical.
async fn accessible(browser: &Browser, view: &str) {
    let audit = browser.audit().await;
    let bad = audit.at_least(Impact::Serious);
    assert!(bad.is_empty(), "{view}: {audit}");
}

/// Nothing secret on the page.
async fn no_secret(browser: &Browser, view: &str, secrets: &[&str]) {
    let html = browser.html().await;
    for secret in secrets {
        assert!(!html.contains(secret), "{view} shows a secret");
    }
}

#[test]
fn a_person_signs_in_and_walks_the_partners_admin_page_through_the_edge() {
    isolated(async {
        let dir = tempfile::tempdir().unwrap();
        let up = tokio::task::block_in_place(|| Up::start(dir.path()));
        let edge = up.edge_url();
        let port = port_of(&edge);
        assert_eq!(edge, format!("https://orc.localhost:{port}"));
        let admin_token = up.admin_token();
        let secrets = [EMULATOR_TOKEN, admin_token.as_str()];
        let page = |slot: Option<u32>| match slot {
            Some(slot) => format!("https://sys--partner-{slot}.sys.orc.localhost:{port}/"),
            None => format!("https://sys--partner.sys.orc.localhost:{port}/"),
        };

        // A public pool on the partner: a site opens with its gateway, and the pool gets an
        // address there, so Children and Pool addresses show what the emulated clouds hold.
        tokio::task::block_in_place(|| {
            up.ok(&[
                "pool",
                "create",
                "sys/sys/www",
                "--provider",
                "partner",
                "--class",
                "eu-central",
                "--cpu",
                "2",
                "--mem",
                "4",
                "--os",
                "ubuntu-24.04",
                "--public",
                "--endpoint",
                "web=http:8080",
                "--size",
                "1",
                "--wait",
            ]);
            up.wait_for(&["sites"], Duration::from_secs(120), |sites| {
                sites[0]["gateway"] == "running" && sites[0]["reported"] == true
            });
        });

        let browser = Browser::builder("admin_page_through_the_edge")
            .trust_ca(&up.ca_pem())
            .start()
            .await;

        // Not signed in: the page sends the browser to the edge's sign-in.
        browser.open(&page(None)).await;
        browser.wait_for_host("orc.localhost").await;
        browser.wait_for_text("Sign in").await;
        browser.snapshot("sign-in").await;
        accessible(&browser, "sign-in").await;
        browser.fill("#token", &admin_token).await;
        browser.press("Sign in with the token").await;
        browser
            .wait_for_host("sys--partner.sys.orc.localhost")
            .await;
        browser.wait_for_text("Overview").await;
        let session = browser
            .cookie("__Secure-orc_session")
            .await
            .expect("the session cookie");
        assert!(session.secure && session.http_only, "{session:?}");
        assert_eq!(session.same_site, Some(SameSite::Lax));

        // One slot serves, the other stands by and says so.
        let started = Instant::now();
        let (serving, standby) = loop {
            let mut banners = Vec::new();
            for slot in [0, 1] {
                browser.open(&page(Some(slot))).await;
                browser.wait_for_text("Overview").await;
                banners.push(browser.text().await.contains("Standing by"));
            }
            match banners[..] {
                [false, true] => break (0, 1),
                [true, false] => break (1, 0),
                _ if started.elapsed() < Duration::from_secs(60) => {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                _ => panic!("no serving and standing-by pair of slots: {banners:?}"),
            }
        };
        browser.open(&page(Some(standby))).await;
        browser.wait_for_text("Standing by").await;
        browser.snapshot("standby").await;
        no_secret(&browser, "standby", &secrets).await;

        // Every view of the serving replica, by its navigation.
        browser.open(&page(Some(serving))).await;
        browser.wait_for_text("Overview").await;
        for (link, name, heading) in VIEWS {
            browser.follow(link).await;
            browser.wait_for_text(heading).await;
            let title = browser.title().await;
            assert!(title.contains(heading), "{name}: title {title:?}");
            assert!(
                !browser.text().await.contains("Standing by"),
                "{name} on the serving slot"
            );
            browser.snapshot(name).await;
            accessible(&browser, name).await;
            no_secret(&browser, name, &secrets).await;
        }
        // What the clouds hold, as the serving replica's inventory saw it.
        browser.follow("Children").await;
        let children = browser.text().await;
        assert!(
            children.contains("eu-central-a"),
            "an open site: {children}"
        );
        browser.follow("Pool addresses").await;
        let addresses = browser.text().await;
        assert!(
            addresses.contains("eu-central-a"),
            "the pool's address: {addresses}"
        );

        // A quote preview, answered by the real quote code over the emulated clouds' catalogs.
        browser.follow("Quote preview").await;
        browser
            .select("#class", "eu-central — Europe Central")
            .await;
        browser.fill("#cpu", "2").await;
        browser.fill("#mem", "4").await;
        browser.press("Preview").await;
        browser.wait_for_text("Candidates").await;
        let preview = browser.text().await;
        assert!(preview.contains("winner"), "{preview}");
        assert!(preview.contains("eu-central-a"), "{preview}");
        browser.snapshot("quote-result").await;
        accessible(&browser, "quote-result").await;

        // A draft region map checked by the partner's own parser and written back normalised.
        browser.follow("Validate").await;
        browser
            .fill(
                "#regions",
                r#"{"eu-central": {"title": "Europe Central", "sites": [{"eu-central-a": "hetzner:fsn1"}]}}"#,
            )
            .await;
        browser.press("Check").await;
        browser.wait_for_text("Normalised regions").await;
        browser.snapshot("validate-result").await;
        accessible(&browser, "validate-result").await;
        no_secret(&browser, "validate-result", &secrets).await;

        // The page works without JavaScript: a second browser with scripts off.
        let plain = Browser::builder("admin_page_without_javascript")
            .trust_ca(&up.ca_pem())
            .javascript(false)
            .start()
            .await;
        plain.open(&page(Some(serving))).await;
        plain.wait_for_host("orc.localhost").await;
        // The sign-in page, loaded: a field filled while it still loads would be lost.
        plain.wait_for_text("Sign in").await;
        plain.fill("#token", &admin_token).await;
        plain.press("Sign in with the token").await;
        plain.wait_for_text("Overview").await;
        plain.follow("Children").await;
        plain.wait_for_text("Children").await;
        plain.snapshot("children-no-js").await;
        plain.close().await;

        // A viewer of project sys/sys signs in with a password and is refused the page.
        up.ok(&["user", "create", "vic"]);
        up.ok(&["member", "add", "sys/sys", "vic", "viewer"]);
        let mut set = Command::new(env!("CARGO_BIN_EXE_orc"))
            .args(["user", "set-password", "vic", "--password-stdin"])
            .env("ORC_DATA_DIR", &up.data)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        writeln!(set.stdin.take().unwrap(), "viewer's long password").unwrap();
        assert!(set.wait().unwrap().success(), "orc user set-password");
        browser.open(&format!("{edge}/")).await;
        browser.wait_for_text("Your endpoints").await;
        browser.snapshot("endpoints").await;
        assert!(browser.text().await.contains("sys/sys/partner"));
        browser.press("Sign out").await;
        browser.wait_for_text("Sign in").await;
        assert!(browser.cookie("__Secure-orc_session").await.is_none());
        browser.open(&page(None)).await;
        browser.wait_for_host("orc.localhost").await;
        browser.wait_for_text("Sign in").await;
        browser.fill("#user", "vic").await;
        browser.fill("#password", "viewer's long password").await;
        browser.press("Sign in with the password").await;
        browser.wait_for_text("Not for viewers").await;
        assert_eq!(browser.status().await, Some(403));
        browser.snapshot("viewer-refused").await;
        accessible(&browser, "viewer-refused").await;

        browser.close().await;
        tokio::task::block_in_place(|| up.stop());
    });
}
