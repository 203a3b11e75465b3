//! The zone's web console in headless Chromium against `orc up`: the operator makes the
//! partner Global and prices it at cost (a markup of 0) on the Resource Providers page of
//! `sys/sys`; a tenant signs in, walks the request wizard for a partner pool in eu-central,
//! watches its nodes come up on the pool's page (live, by server-sent events), resizes it
//! and reads usage; bad input is shown next to its field and creates nothing; a viewer sees
//! but cannot change; the operator's pool form refuses a JSON param that does not parse.
//!
//! Every page is kept as a screenshot and its HTML under `target/browser/<test>/` (CI keeps
//! them), passes an axe-core audit with no serious or critical violation, and, for a tenant,
//! names no cloud, plan, city or cloud location. Fails, never skips, where Chromium is
//! missing.

mod support;

use std::time::{Duration, Instant};

use orc_testkit::browser::{Browser, Impact, isolated};
use orc_testkit::console_sample::cloud_words_in;
use support::up::Up;

/// Checks the page against axe-core's rules: nothing serious or critical.
async fn accessible(browser: &Browser, view: &str) {
    let audit = browser.audit().await;
    let bad = audit.at_least(Impact::Serious);
    assert!(bad.is_empty(), "{view}: {audit}");
}

/// A page a tenant sees: kept, audited, and free of cloud words and `secrets`.
async fn tenant_page(browser: &Browser, view: &str, secrets: &[&str]) {
    browser.snapshot(view).await;
    accessible(browser, view).await;
    let html = browser.html().await;
    let found = cloud_words_in(&html);
    assert!(found.is_empty(), "{view} names {found:?}");
    for secret in secrets {
        assert!(!html.contains(secret), "{view} shows a secret");
    }
}

/// The title of the option with `value` in the page's HTML.
fn option_title(html: &str, value: &str) -> String {
    let start = html
        .find(&format!("<option value=\"{value}\">"))
        .unwrap_or_else(|| panic!("no option {value}"))
        + value.len()
        + 17;
    html[start..start + html[start..].find('<').unwrap()].to_string()
}

/// Waits (reading the page as it is, no reload) until its text holds `text`.
/// Waits, reading the page as it is (no reload), until its HTML holds `text`. The page may
/// still be loading when this starts, so it reads the source, which is there throughout.
async fn wait_live(browser: &Browser, text: &str, limit: Duration) {
    let started = Instant::now();
    loop {
        let html = browser.html().await;
        if html.contains(text) {
            return;
        }
        assert!(
            started.elapsed() < limit,
            "the page never showed {text:?}: {html}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn sign_in(browser: &Browser, edge: &str, token: &str) {
    browser.open(&format!("{edge}/orgs")).await;
    browser.wait_for_text("Sign in").await;
    browser.fill("#token", token).await;
    browser.press("Sign in with the token").await;
    browser.wait_for_text("Your projects").await;
}

#[test]
fn operator_and_tenant_do_everything_in_the_console() {
    isolated(async {
        let dir = tempfile::tempdir().unwrap();
        let up = tokio::task::block_in_place(|| Up::start(dir.path()));
        let edge = up.edge_url();
        let admin = up.admin_token();
        let (bruno, vera) = tokio::task::block_in_place(|| {
            up.ok(&["org", "create", "acme"]);
            up.ok(&["project", "create", "acme/web"]);
            for (user, role) in [("bruno", "member"), ("vera", "viewer")] {
                up.ok(&["user", "create", user]);
                up.ok(&["member", "add", "acme/web", user, role]);
            }
            let token = |user: &str| {
                up.json(&["token", "create", user, "--label", "browser"])["value"]
                    .as_str()
                    .unwrap()
                    .to_string()
            };
            (token("bruno"), token("vera"))
        });
        let secrets = [admin.as_str(), bruno.as_str(), vera.as_str()];
        let web = format!("{edge}/orgs/acme/projects/web");

        // The operator: the partner's card on sys/sys, narrowed to its project, then Global,
        // then priced at cost.
        let operator = Browser::builder("console_operator")
            .trust_ca(&up.ca_pem())
            .start()
            .await;
        sign_in(&operator, &edge, &admin).await;
        operator.snapshot("operator-projects").await;
        accessible(&operator, "operator-projects").await;
        operator
            .open(&format!("{edge}/orgs/sys/projects/sys/providers"))
            .await;
        operator.wait_for_text("Resource Providers").await;
        operator.click("#provider-partner-scope-project").await;
        operator
            .submit("form[action$='/providers/partner/scope']")
            .await;
        operator
            .wait_for_text("is now visible to this project")
            .await;
        operator.click("#provider-partner-scope-zone").await;
        operator
            .submit("form[action$='/providers/partner/scope']")
            .await;
        operator.wait_for_text("is now visible to Global").await;
        assert!(
            operator
                .text()
                .await
                .contains("Global (every project of the zone)")
        );
        operator.fill("#provider-partner-markup", "0").await;
        operator
            .submit("form[action$='/providers/partner/pricing']")
            .await;
        operator.wait_for_text("markup of 0").await;
        let providers = operator.text().await;
        assert!(providers.contains("markup 0"), "{providers}");
        assert!(
            providers.contains("nodes admitted after the change"),
            "{providers}"
        );
        assert!(providers.contains("serving"), "{providers}");
        operator.snapshot("operator-providers").await;
        accessible(&operator, "operator-providers").await;
        let partner = tokio::task::block_in_place(|| {
            up.json(&["provider", "show", "partner", "--project", "sys/sys"])
        });
        assert_eq!(partner["scope"], "zone", "{partner}");
        assert_eq!(partner["pricing"]["markup"], "0", "{partner}");

        // The tenant: the request wizard, step by step.
        let tenant = Browser::builder("console_tenant")
            .trust_ca(&up.ca_pem())
            .start()
            .await;
        sign_in(&tenant, &edge, &bruno).await;
        tenant_page(&tenant, "projects", &secrets).await;
        tenant.follow("acme/web").await;
        tenant.wait_for_text("No pools in this project yet.").await;
        tenant_page(&tenant, "pools-empty", &secrets).await;
        tenant.follow("Request a pool").await;
        tenant.wait_for_text("1. Provider").await;
        tenant_page(&tenant, "request-provider", &secrets).await;
        tenant.click("#provider-partner").await;
        tenant.press("Next").await;
        tenant.wait_for_text("2. Region class").await;
        let wizard = tenant.text().await;
        // Classes by title, with what the serving replica last said of them.
        assert!(wizard.contains("Europe Central ·"), "{wizard}");
        tenant_page(&tenant, "request-class", &secrets).await;
        tenant.click("#class-eu-central").await;
        tenant.fill("#f-shape-cpu", "2").await;
        tenant.fill("#f-shape-mem", "4").await;
        let ubuntu = option_title(&tenant.html().await, "ubuntu-24.04");
        tenant.select("#f-os", &ubuntu).await;
        tenant.fill("#f-name", "web").await;

        // Bad sizes: shown next to the field, and no pool.
        for size in ["0", "10000"] {
            tenant.fill("#f-size", size).await;
            tenant.press("Get a quote").await;
            tenant
                .wait_for_text("A pool here takes 1 to 1000 nodes")
                .await;
            assert_eq!(
                tenant.text_of("#f-size-error").await,
                format!("A pool here takes 1 to 1000 nodes, not {size}.")
            );
        }
        tenant_page(&tenant, "request-bad-size", &secrets).await;
        // An OS the provider does not offer (a hand-made URL).
        tenant
            .open(&format!(
                "{web}/request?provider=partner&class=eu-central&cpu=2&mem=4&os=templeos&size=1&name=web&quote=1"
            ))
            .await;
        tenant.wait_for_text("offers no operating system").await;
        assert!(tenant.has("#f-os-error").await);
        tenant_page(&tenant, "request-bad-os", &secrets).await;
        let pools = tokio::task::block_in_place(|| up.json(&["pools", "acme/web"]));
        assert_eq!(pools, serde_json::json!([]), "bad input created nothing");

        // A good form: the quote in the provider's words, then the request.
        tenant.fill("#f-size", "2").await;
        tenant.select("#f-os", &ubuntu).await;
        tenant.press("Get a quote").await;
        tenant.wait_for_text("Price line").await;
        let quote = tenant.text().await;
        assert!(quote.contains("2 vCPU · 4 GiB · eu-central"), "{quote}");
        assert!(
            quote.contains("USD/month"),
            "priced at a markup of 0: {quote}"
        );
        tenant_page(&tenant, "request-quote", &secrets).await;
        tenant.press("Request the pool").await;
        tenant.wait_for_text("Pool acme/web/web").await;
        tenant_page(&tenant, "pool-deploying", &secrets).await;
        // The page updates itself while the nodes deploy.
        wait_live(
            &tenant,
            "Size <strong>2</strong> · nodes: 2 running",
            Duration::from_secs(240),
        )
        .await;
        let pool = tenant.text().await;
        assert!(pool.contains("eu-central-a"), "{pool}");
        assert!(pool.contains("2 vCPU · 4 GiB · eu-central"), "{pool}");
        assert!(pool.contains("USD/month"), "{pool}");
        tenant_page(&tenant, "pool-running", &secrets).await;

        // Resize: out of range refused next to the field; then to 1.
        tenant.fill("#f-size", "10000").await;
        tenant.press("Resize").await;
        tenant.wait_for_text("not 10000").await;
        assert!(tenant.has("#f-size-error").await);
        tenant_page(&tenant, "pool-resize-refused", &secrets).await;
        tenant.fill("#f-size", "1").await;
        tenant.press("Resize").await;
        tenant.wait_for_text("Pool acme/web/web").await;
        wait_live(
            &tenant,
            "Size <strong>1</strong> · nodes: 1 running",
            Duration::from_secs(120),
        )
        .await;
        tenant_page(&tenant, "pool-resized", &secrets).await;
        let nodes = tokio::task::block_in_place(|| up.json(&["pools", "acme/web"]));
        assert_eq!(nodes[0]["size"], 1, "{nodes}");

        // The node's own page: a join token shown once; a command needs the node's agent.
        let listed = tokio::task::block_in_place(|| up.json(&["nodes", "acme/web/web"]));
        let node = listed[0]["id"].as_str().expect("a node id").to_string();
        tenant.follow(&node).await;
        tenant.wait_for_text("Mint a join token").await;
        tenant.fill("#f-ttl", "600").await;
        tenant.press("Mint").await;
        tenant.wait_for_text("Shown this once").await;
        let minted = tenant.text().await;
        assert!(minted.contains("orc agent --zone"), "{minted}");
        tenant_page(&tenant, "node-join-token", &secrets).await;
        tenant.fill("#f-command", "uname -a").await;
        tenant.press("Run").await;
        tenant.wait_for_text("agent is not connected").await;
        assert!(tenant.has("#f-command-error").await);
        tenant_page(&tenant, "node-command-refused", &secrets).await;

        // The mesh: a workstation connected from its public key gets its wg-quick file.
        tenant.follow("Mesh").await;
        tenant.wait_for_text("Connect a workstation").await;
        tenant.fill("#f-name", "laptop").await;
        tenant
            .fill(
                "#f-public-key",
                "B3B3B3B3B3B3B3B3B3B3B3B3B3B3B3B3B3B3B3B3B3A=",
            )
            .await;
        tenant.press("Connect").await;
        tenant.wait_for_text("[Interface]").await;
        let mesh = tenant.text().await;
        assert!(mesh.contains("Workstation laptop is on the mesh"), "{mesh}");
        tenant_page(&tenant, "mesh", &secrets).await;

        // Usage: the pool's nodes by their price line, priced (markup 0), never as zero.
        tenant.follow("Usage").await;
        tenant.wait_for_text("Node-hours this month").await;
        let usage = tenant.text().await;
        assert!(!usage.contains("0.00 USD/month"), "{usage}");
        tenant_page(&tenant, "usage", &secrets).await;
        tenant.follow("Resource Providers").await;
        tenant.wait_for_text("partner").await;
        let card = tenant.text().await;
        assert!(
            card.contains("Global") && !card.contains("Set the pricing strategy"),
            "{card}"
        );
        tenant_page(&tenant, "providers", &secrets).await;
        // Bruno's roles are in one project: the org's members page is not his to read.
        assert!(!card.contains("Members of acme"), "{card}");
        tenant.follow("API tokens").await;
        tenant.wait_for_text("API tokens of bruno").await;
        tenant.fill("#f-label", "laptop").await;
        tenant.press("Make the token").await;
        tenant.wait_for_text("only time it is shown").await;
        let shown = tenant.text_of(".secret").await;
        tenant.snapshot("token-shown-once").await;
        accessible(&tenant, "token-shown-once").await;
        tenant.follow("API tokens").await;
        tenant.wait_for_text("laptop").await;
        assert!(
            !tenant.html().await.contains(shown.trim()),
            "a token's value, shown again"
        );
        tenant.press("Revoke laptop").await;
        tenant.wait_for_text("is revoked").await;
        tenant_page(&tenant, "tokens", &secrets).await;

        // The viewer sees the pool, and no form to change it; a posted one is refused.
        let viewer = Browser::builder("console_viewer")
            .trust_ca(&up.ca_pem())
            .start()
            .await;
        sign_in(&viewer, &edge, &vera).await;
        viewer.open(&format!("{web}/pools/web")).await;
        viewer.wait_for_text("Pool acme/web/web").await;
        assert!(viewer.text().await.contains("you are viewer"));
        assert!(!viewer.has("#f-size").await, "no resize form for a viewer");
        assert!(!viewer.text().await.contains("Delete this pool"));
        tenant_page(&viewer, "viewer-pool", &secrets).await;
        viewer.open(&format!("{web}/request")).await;
        viewer.wait_for_text("needs the member or owner role").await;
        tenant_page(&viewer, "viewer-request", &secrets).await;
        viewer.open(&format!("{web}/pools/web/delete")).await;
        viewer.wait_for_text("Delete pool acme/web/web?").await;
        viewer.press("Delete pool acme/web/web").await;
        viewer.wait_for_text("Not allowed").await;
        assert_eq!(viewer.status().await, Some(403));
        tenant_page(&viewer, "viewer-refused", &secrets).await;
        let pool = tokio::task::block_in_place(|| up.json(&["pool", "show", "acme/web/web"]));
        assert_eq!(pool["pool"]["deleting"], false, "{pool}");

        // The operator sees where the node went, and the partner's pool form refuses a JSON
        // param that does not parse, next to its field.
        operator
            .open(&format!("{edge}/orgs/acme/projects/web/pools/web"))
            .await;
        operator.wait_for_text("Placed").await;
        operator.snapshot("operator-pool").await;
        accessible(&operator, "operator-pool").await;
        // The site the pool opened, with its stable address and its gateway (`orc sites`).
        operator
            .open(&format!("{edge}/orgs/sys/projects/sys/providers"))
            .await;
        operator.wait_for_text("Sites of partner").await;
        assert!(operator.text().await.contains("eu-central-a"));
        operator.snapshot("operator-sites").await;
        accessible(&operator, "operator-sites").await;
        // The partner's own pool: its slots and their kept logs (`orc logs`).
        operator
            .open(&format!(
                "{edge}/orgs/sys/projects/sys/pools/partner?level=debug"
            ))
            .await;
        operator.wait_for_text("Least severe level shown").await;
        assert!(operator.html().await.contains("Log lines"));
        operator.snapshot("operator-partner-pool").await;
        accessible(&operator, "operator-partner-pool").await;
        operator
            .open(&format!(
                "{edge}/orgs/sys/projects/sys/pools/partner/reconfigure"
            ))
            .await;
        operator
            .wait_for_text("Reconfigure pool sys/sys/partner")
            .await;
        operator.snapshot("operator-pool-form").await;
        accessible(&operator, "operator-pool-form").await;
        let form = operator.text().await;
        assert!(form.contains("partner_id (required)"), "{form}");
        assert!(form.contains("regions (JSON)"), "{form}");
        assert!(
            form.contains("Write-only") || form.contains("never shown"),
            "{form}"
        );
        let before = tokio::task::block_in_place(|| up.json(&["pool", "show", "sys/sys/partner"]));
        operator
            .fill("#f-params-os-map", "{\"ubuntu-24.04\": ")
            .await;
        operator.press("Apply the params").await;
        operator.wait_for_text("does not parse").await;
        assert!(
            operator
                .text_of("#f-params-os-map-error")
                .await
                .contains("os_map is a JSON param and this does not parse")
        );
        operator.snapshot("operator-pool-form-refused").await;
        accessible(&operator, "operator-pool-form-refused").await;
        let after = tokio::task::block_in_place(|| up.json(&["pool", "show", "sys/sys/partner"]));
        assert_eq!(
            before["pool"]["generation"], after["pool"]["generation"],
            "nothing changed"
        );

        // Running an app: its params as its manifest declares them; a JSON param that does not
        // parse is refused next to its field, and no pool is made.
        operator
            .open(&format!("{edge}/orgs/sys/projects/sys/apps"))
            .await;
        operator.wait_for_text("Run an app").await;
        let html = operator.html().await;
        let at = html
            .find("value=\"sys/orc-prov-partner:")
            .expect("the partner's package in the registry")
            + 7;
        let package = &html[at..at + html[at..].find('"').unwrap()];
        operator
            .open(&format!(
                "{edge}/orgs/sys/projects/sys/apps?package={package}"
            ))
            .await;
        operator.wait_for_text("Places each node").await;
        operator.fill("#f-name", "partner2").await;
        operator.fill("#f-params-partner-id", "p2").await;
        operator
            .fill("#f-params-regions", "{\"eu-central\": [")
            .await;
        operator.press("Run the app").await;
        operator.wait_for_text("does not parse").await;
        assert!(operator.has("#f-params-regions-error").await);
        operator.snapshot("operator-run-app-refused").await;
        accessible(&operator, "operator-run-app-refused").await;
        let pools = tokio::task::block_in_place(|| up.json(&["pools", "sys/sys"]));
        assert!(
            !pools.to_string().contains("partner2"),
            "no pool was made: {pools}"
        );

        // The org's members, as the operator manages them.
        operator.open(&format!("{edge}/orgs/acme/members")).await;
        operator.wait_for_text("Members of acme").await;
        let members = operator.text().await;
        assert!(
            members.contains("bruno") && members.contains("vera"),
            "{members}"
        );
        operator.fill("#f-user", "vera").await;
        operator.select("#f-role", "viewer").await;
        operator.select("#f-project", "the whole org").await;
        operator.press("Grant").await;
        operator.wait_for_text("vera is now viewer of acme").await;
        operator.snapshot("operator-members").await;
        accessible(&operator, "operator-members").await;

        // Deleting asks first, naming the pool.
        tenant.open(&format!("{web}/pools/web")).await;
        tenant.follow("Delete this pool").await;
        tenant.wait_for_text("Delete pool acme/web/web?").await;
        tenant_page(&tenant, "delete-confirm", &secrets).await;
        tenant.press("Delete pool acme/web/web").await;
        tenant.wait_for_text("This pool is being deleted").await;
        tenant_page(&tenant, "pool-deleting", &secrets).await;
        tenant.press("Sign out").await;
        tenant.wait_for_text("Sign in").await;

        // With JavaScript off the pages are whole.
        let plain = Browser::builder("console_without_javascript")
            .trust_ca(&up.ca_pem())
            .javascript(false)
            .start()
            .await;
        sign_in(&plain, &edge, &vera).await;
        plain.open(&format!("{web}/usage")).await;
        plain.wait_for_text("Node-hours this month").await;
        plain.snapshot("usage-no-js").await;
        plain.close().await;

        viewer.close().await;
        tenant.close().await;
        operator.close().await;
        tokio::task::block_in_place(|| up.stop());
    });
}
