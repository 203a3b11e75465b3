//! The web console over https on the zone's own edge, as a browser without JavaScript uses
//! it: who may open which page, what each role may change (the API's rules, also for forms
//! a page does not show), bad input shown next to its field with nothing created, posts
//! from other sites refused, and a token's value shown once.

use reqwest::StatusCode;
use reqwest::header::{self, HeaderMap};
use serde_json::json;

use crate::api_support::{TestZone, tenancy};

const DOMAIN: &str = "orc.localhost";

struct Browser {
    client: reqwest::Client,
    base: String,
    cookie: Option<String>,
}

impl Browser {
    fn new(z: &TestZone) -> Browser {
        let addr = z.zone.edge_addr().expect("the test zone runs an edge");
        let client = reqwest::Client::builder()
            .tls_built_in_root_certs(false)
            .add_root_certificate(
                reqwest::Certificate::from_pem(z.zone.ca_pem().unwrap().as_bytes()).unwrap(),
            )
            .redirect(reqwest::redirect::Policy::none())
            .resolve(DOMAIN, addr)
            .build()
            .unwrap();
        Browser {
            client,
            base: format!("https://{DOMAIN}:{}", addr.port()),
            cookie: None,
        }
    }

    async fn sign_in(z: &TestZone, token: &str) -> Browser {
        let mut b = Browser::new(z);
        let answer = b
            .client
            .post(format!("{}/sign-in", b.base))
            .header(header::ORIGIN, &b.base)
            .form(&[("token", token)])
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::SEE_OTHER);
        let cookie = answer.headers()[header::SET_COOKIE].to_str().unwrap();
        b.cookie = Some(cookie.split(';').next().unwrap().to_string());
        b
    }

    async fn get(&self, path: &str) -> (StatusCode, HeaderMap, String) {
        let mut request = self
            .client
            .get(format!("{}{path}", self.base))
            .header(header::ACCEPT, "text/html");
        if let Some(c) = &self.cookie {
            request = request.header(header::COOKIE, c);
        }
        let answer = request.send().await.unwrap();
        let status = answer.status();
        let headers = answer.headers().clone();
        (status, headers, answer.text().await.unwrap())
    }

    async fn post_from(
        &self,
        origin: &str,
        path: &str,
        form: &[(&str, &str)],
    ) -> (StatusCode, HeaderMap, String) {
        let mut request = self
            .client
            .post(format!("{}{path}", self.base))
            .header(header::ORIGIN, origin)
            .form(form);
        if let Some(c) = &self.cookie {
            request = request.header(header::COOKIE, c);
        }
        let answer = request.send().await.unwrap();
        let status = answer.status();
        let headers = answer.headers().clone();
        (status, headers, answer.text().await.unwrap())
    }

    async fn post(&self, path: &str, form: &[(&str, &str)]) -> (StatusCode, HeaderMap, String) {
        self.post_from(&self.base.clone(), path, form).await
    }

    /// A request with the cookie and `headers`, and no `Origin`.
    async fn send_without_origin(
        &self,
        method: reqwest::Method,
        path: &str,
        headers: &[(&str, &str)],
        form: &[(&str, &str)],
    ) -> (StatusCode, String) {
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.base))
            .form(form);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(c) = &self.cookie {
            request = request.header(header::COOKIE, c);
        }
        let answer = request.send().await.unwrap();
        let status = answer.status();
        (status, answer.text().await.unwrap())
    }
}

fn location(headers: &HeaderMap) -> &str {
    headers[header::LOCATION].to_str().unwrap()
}

const WEB: &str = "/orgs/acme/projects/web";

fn pool_form<'a>(name: &'a str, size: &'a str, os: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("provider", "fake"),
        ("class", "eu-central"),
        ("cpu", "2"),
        ("mem", "4"),
        ("disks", ""),
        ("os", os),
        ("size", size),
        ("name", name),
    ]
}

#[tokio::test]
async fn a_member_requests_resizes_and_deletes_a_pool_and_bad_input_creates_nothing() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;

    // Nobody signed in is sent to the sign-in page and back.
    let (status, headers, _) = Browser::new(&z).get(&format!("{WEB}/pools")).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(location(&headers).contains("/sign-in?next="), "{headers:?}");

    let mia = Browser::sign_in(&z, &t.mia).await;
    let (status, _, body) = mia.get("/orgs").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        body.contains("acme/web") && !body.contains("acme/data\""),
        "{body}"
    );
    let (status, _, body) = mia.get(&format!("{WEB}/request")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("provider-acme/web/fake"), "{body}");

    // Bad input: each shown next to its field, and no pool made.
    for (size, field) in [
        ("0", "f-size-error"),
        ("10000", "f-size-error"),
        ("x", "f-size-error"),
    ] {
        let (status, _, body) = mia
            .post(
                &format!("{WEB}/request"),
                &pool_form("web1", size, "debian-12"),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(body.contains(&format!("id=\"{field}\"")), "{size}: {body}");
        assert!(body.contains("aria-describedby=\"f-size-error\""), "{body}");
    }
    let mut bad_name = pool_form("Not A Name", "2", "debian-12");
    bad_name.push(("public", ""));
    let (status, _, body) = mia.post(&format!("{WEB}/request"), &bad_name).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("id=\"f-name-error\""), "{body}");
    let pools = z.get("/api/orgs/acme/projects/web/pools", &t.mia).await;
    assert_eq!(pools.body, json!([]), "nothing was created");

    // A good request makes the pool and goes to its page.
    let (status, headers, body) = mia
        .post(
            &format!("{WEB}/request"),
            &pool_form("web1", "2", "debian-12"),
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{body}");
    assert_eq!(location(&headers), format!("{WEB}/pools/web1"));
    let (status, _, body) = mia.get(&format!("{WEB}/pools/web1")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        body.contains("Pool acme/web/web1") && body.contains("Resize"),
        "{body}"
    );

    // Resize: a size out of range is refused next to its field; a good one is taken.
    let (status, _, body) = mia
        .post(&format!("{WEB}/pools/web1/resize"), &[("size", "10000")])
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("id=\"f-size-error\""), "{body}");
    let (status, _, _) = mia
        .post(&format!("{WEB}/pools/web1/resize"), &[("size", "3")])
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let pool = z
        .get("/api/orgs/acme/projects/web/pools/web1", &t.mia)
        .await;
    assert_eq!(pool.body["size"], 3);

    // A post from another site is refused, whoever's cookie it carries.
    let (status, _, _) = mia
        .post_from(
            "https://evil.example",
            &format!("{WEB}/pools/web1/resize"),
            &[("size", "0")],
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let pool = z
        .get("/api/orgs/acme/projects/web/pools/web1", &t.mia)
        .await;
    assert_eq!(pool.body["size"], 3);

    // Deleting asks first, naming the pool.
    let (status, _, body) = mia.get(&format!("{WEB}/pools/web1/delete")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("Delete pool acme/web/web1?"), "{body}");
    let (status, _, _) = mia.post(&format!("{WEB}/pools/web1/delete"), &[]).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let pool = z
        .get("/api/orgs/acme/projects/web/pools/web1", &t.mia)
        .await;
    assert!(
        pool.status == StatusCode::NOT_FOUND || pool.body["deleting"] == true,
        "{}",
        pool.body
    );
}

/// Attack: a script (or a page whose browser hides where it posts from) replays a person's
/// session cookie in a form post without `Origin`. Every request that changes something must
/// come from the console's own origin; a sibling name under the domain (an app) is another.
#[tokio::test]
async fn a_change_without_the_consoles_origin_is_refused_whatever_cookie_it_carries() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let mia = Browser::sign_in(&z, &t.mia).await;
    for (method, headers) in [
        (reqwest::Method::POST, vec![]),
        (reqwest::Method::POST, vec![("sec-fetch-site", "same-site")]),
        (
            reqwest::Method::POST,
            vec![("sec-fetch-site", "cross-site")],
        ),
        (reqwest::Method::PUT, vec![]),
        (reqwest::Method::DELETE, vec![]),
        (reqwest::Method::PATCH, vec![]),
    ] {
        let (status, body) = mia
            .send_without_origin(
                method.clone(),
                "/tokens",
                &headers,
                &[("label", "replayed")],
            )
            .await;
        assert_eq!(
            status,
            StatusCode::FORBIDDEN,
            "{method} {headers:?}: {body}"
        );
        assert!(
            body.contains("taken only from the zone&#39;s own pages")
                || body.contains("taken only from the zone's own pages"),
            "{body}"
        );
    }
    let listed = z.get("/api/users/mia/tokens", &t.mia).await;
    assert!(
        !listed.body.to_string().contains("replayed"),
        "a refused post made a token: {}",
        listed.body
    );
    // A browser that says the post came from the same origin, without naming it, is taken.
    let (status, body) = mia
        .send_without_origin(
            reqwest::Method::POST,
            "/tokens",
            &[("sec-fetch-site", "same-origin")],
            &[("label", "same origin")],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Reading needs no origin.
    let (status, _, _) = mia.get("/tokens").await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn a_viewer_sees_but_cannot_change_and_a_stranger_sees_nothing() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let made = z
        .post(
            "/api/orgs/acme/projects/web/pools",
            &t.mia,
            crate::api_support::pool_body("site", 2),
        )
        .await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);

    let vic = Browser::sign_in(&z, &t.vic).await;
    let (status, _, body) = vic.get(&format!("{WEB}/pools/site")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("Pool acme/web/site"), "{body}");
    assert!(
        !body.contains("/resize") && !body.contains("/delete"),
        "{body}"
    );
    let (_, _, body) = vic.get(&format!("{WEB}/request")).await;
    assert!(body.contains("needs the member or owner role"), "{body}");
    assert!(!body.contains("Get a quote"), "{body}");

    // Forged posts are refused by the API's own checks and change nothing.
    let (status, _, body) = vic
        .post(&format!("{WEB}/pools/site/resize"), &[("size", "5")])
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, _, _) = vic.post(&format!("{WEB}/pools/site/delete"), &[]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _, _) = vic
        .post(
            &format!("{WEB}/request"),
            &pool_form("mine", "1", "debian-12"),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _, _) = vic
        .post(&format!("{WEB}/providers/fake/pricing"), &[("markup", "0")])
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let pool = z
        .get("/api/orgs/acme/projects/web/pools/site", &t.mia)
        .await;
    assert_eq!(
        (pool.body["size"].clone(), pool.body["deleting"].clone()),
        (json!(2), json!(false))
    );
    let pools = z.get("/api/orgs/acme/projects/web/pools", &t.mia).await;
    assert_eq!(pools.body.as_array().unwrap().len(), 1);

    // Stan holds no role in acme: the same "not found" as for a name that does not exist.
    let stan = Browser::sign_in(&z, &t.stan).await;
    let (status, _, body) = stan.get(&format!("{WEB}/pools")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(!body.contains("site"), "{body}");
    let (status, _, _) = stan.get("/orgs/acme/projects/nope/pools").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn an_owner_prices_a_provider_and_manages_members_and_tokens_show_once() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let olivia = Browser::sign_in(&z, &t.olivia).await;

    // A markup of 0 is a strategy (priced at cost), not the absence of one.
    let (status, _, body) = olivia
        .post(&format!("{WEB}/providers/fake/pricing"), &[("markup", "0")])
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("markup 0"), "{body}");
    assert!(body.contains("nodes admitted after the change"), "{body}");
    let p = z
        .get("/api/orgs/acme/projects/web/providers/fake", &t.olivia)
        .await;
    assert_eq!(p.body["pricing"]["markup"], "0");
    let (status, _, body) = olivia
        .post(
            &format!("{WEB}/providers/fake/pricing"),
            &[("markup", "-1")],
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("field-error"), "{body}");
    // Only operators make a provider Global.
    let (status, _, _) = olivia
        .post(&format!("{WEB}/providers/fake/scope"), &[("scope", "zone")])
        .await;
    assert!(status.is_client_error(), "{status}");
    let p = z
        .get("/api/orgs/acme/projects/web/providers/fake", &t.olivia)
        .await;
    assert_eq!(p.body["scope"], "project");
    let mia = Browser::sign_in(&z, &t.mia).await;
    let (status, _, _) = mia
        .post(
            &format!("{WEB}/providers/fake/pricing"),
            &[("markup", "0.5")],
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let admin = Browser::sign_in(&z, &z.admin).await;
    let (status, _, body) = admin
        .post(&format!("{WEB}/providers/fake/scope"), &[("scope", "zone")])
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let p = z
        .get("/api/orgs/acme/projects/web/providers/fake", &t.olivia)
        .await;
    assert_eq!(p.body["scope"], "zone");

    // Members: the owner grants to people of the org; a member cannot.
    let (status, _, body) = olivia
        .post(
            "/orgs/acme/members",
            &[("user", "vic"), ("role", "viewer"), ("project", "data")],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("vic is now viewer"), "{body}");
    let (status, _, body) = olivia
        .post(
            "/orgs/acme/members",
            &[("user", "nobody"), ("role", "viewer"), ("project", "")],
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, _, _) = mia
        .post(
            "/orgs/acme/members",
            &[("user", "stan"), ("role", "owner"), ("project", "")],
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // A token's value is shown in the answer that made it, and never again.
    let (status, _, body) = mia.post("/tokens", &[("label", "laptop")]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let start = body.find("class=\"secret\">").expect("the value, once") + 15;
    let value = &body[start..start + body[start..].find('<').unwrap()];
    assert!(value.len() > 20, "{value}");
    let (_, headers, listed) = mia.get("/tokens").await;
    assert!(!listed.contains(value));
    assert!(listed.contains("laptop"));
    assert_eq!(headers[header::CACHE_CONTROL], "no-store");
    let who = z.get("/api/whoami", value).await;
    assert_eq!(who.body["user"]["name"], "mia");
    let id = who.body["token_id"].as_str().unwrap().to_string();
    let (status, _, body) = mia.post(&format!("/tokens/{id}/revoke"), &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let who = z.get("/api/whoami", value).await;
    assert_eq!(who.status, StatusCode::UNAUTHORIZED);

    // Usage reads as a page for a viewer too.
    let vic = Browser::sign_in(&z, &t.vic).await;
    let (status, _, body) = vic.get(&format!("{WEB}/usage")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("Node-hours this month"), "{body}");
}

#[tokio::test]
async fn a_node_page_mints_a_join_token_once_and_names_why_a_command_cannot_run() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let made = z
        .post(
            "/api/orgs/acme/projects/web/pools",
            &t.mia,
            crate::api_support::pool_body("site", 1),
        )
        .await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
    let nodes = z
        .get("/api/orgs/acme/projects/web/pools/site/nodes", &t.mia)
        .await;
    let node = nodes.body[0]["id"].as_str().unwrap().to_string();
    let page = format!("{WEB}/pools/site/nodes/{node}");

    let mia = Browser::sign_in(&z, &t.mia).await;
    let (status, _, body) = mia.get(&format!("{WEB}/pools/site")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        body.contains(&format!("href=\"{page}\"")),
        "the pool links its node: {body}"
    );
    let (status, _, body) = mia.get(&page).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        body.contains("Run a command") && body.contains("Mint a join token"),
        "{body}"
    );

    // Bad input is named next to its field.
    let (status, _, body) = mia
        .post(&format!("{page}/join-token"), &[("ttl", "30")])
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("60 to 86400 seconds"), "{body}");
    let (status, _, body) = mia
        .post(
            &format!("{page}/exec"),
            &[("command", "  "), ("timeout", "60")],
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("Give a command"), "{body}");

    // A token's secret is on the page that minted it, and on no later one.
    let (status, _, body) = mia
        .post(&format!("{page}/join-token"), &[("ttl", "600")])
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let tokens = z
        .get(
            &format!("/api/orgs/acme/projects/web/nodes/{node}/join-tokens"),
            &t.mia,
        )
        .await;
    let live: Vec<&serde_json::Value> = tokens
        .body
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| {
            t["state"] == "live"
                && t["created_by"]
                    .as_str()
                    .is_some_and(|b| b.starts_with("user:"))
        })
        .collect();
    assert_eq!(live.len(), 1, "{}", tokens.body);
    let secret = body
        .split("<pre><code>")
        .nth(1)
        .and_then(|rest| rest.split("</code>").next())
        .expect("the secret on the page")
        .to_string();
    assert!(secret.len() > 20, "{secret}");
    let (_, _, again) = mia.get(&page).await;
    assert!(!again.contains(&secret), "the secret is shown once");

    // The node is not running: the command is refused with the API's reason, by the field.
    let (status, _, body) = mia
        .post(
            &format!("{page}/exec"),
            &[("command", "uname -a"), ("timeout", "10")],
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body.contains("commands run only on running nodes"),
        "{body}"
    );

    // A viewer sees the node and no form, and a forged post is the API's 403.
    let vic = Browser::sign_in(&z, &t.vic).await;
    let (status, _, body) = vic.get(&page).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        !body.contains("/exec\"") && !body.contains("/join-token\""),
        "{body}"
    );
    let (status, _, _) = vic
        .post(&format!("{page}/join-token"), &[("ttl", "600")])
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _, _) = vic
        .post(
            &format!("{page}/exec"),
            &[("command", "id"), ("timeout", "10")],
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn a_member_connects_a_workstation_to_the_mesh_and_gets_its_wg_quick_file() {
    use base64::Engine as _;
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let mia = Browser::sign_in(&z, &t.mia).await;
    let (status, _, body) = mia.get(&format!("{WEB}/mesh")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("Connect a workstation"), "{body}");

    let (status, _, body) = mia
        .post(
            &format!("{WEB}/mesh"),
            &[("name", "laptop"), ("public_key", "not a key")],
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("f-public-key-error"), "{body}");

    let key = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
    let (status, _, body) = mia
        .post(
            &format!("{WEB}/mesh"),
            &[("name", "laptop"), ("public_key", key.as_str())],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        body.contains("[Interface]") && body.contains("Address = "),
        "{body}"
    );
    assert!(body.contains("PrivateKey = &lt;the private key"), "{body}");
    let mesh = z.get("/api/orgs/acme/projects/web/mesh", &t.mia).await;
    assert!(
        mesh.body["members"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "laptop"),
        "{}",
        mesh.body
    );

    // A viewer sees it, with no form; a forged post is the API's 403.
    let vic = Browser::sign_in(&z, &t.vic).await;
    let (status, _, body) = vic.get(&format!("{WEB}/mesh")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        body.contains("laptop") && !body.contains("Connect a workstation"),
        "{body}"
    );
    let (status, _, _) = vic
        .post(&format!("{WEB}/mesh/workstations/laptop/remove"), &[])
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    let (status, headers, _) = mia
        .post(&format!("{WEB}/mesh/workstations/laptop/remove"), &[])
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(location(&headers), format!("{WEB}/mesh"));
    let mesh = z.get("/api/orgs/acme/projects/web/mesh", &t.mia).await;
    assert!(
        !mesh.body["members"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "laptop"),
        "{}",
        mesh.body
    );
}
