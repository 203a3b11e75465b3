//! Golden files for what operators and tenants read: the quote explanation table and the
//! tenant words, for a set of scenarios on the real seed catalogs.
//!
//! A mismatch fails with both texts. To accept a deliberate change, run with
//! `INSTA_UPDATE=always` and review the diff of `tests/golden/`.

use std::time::Duration;

use orc_common::{Architecture, Shape};
use orc_partner::catalog::Catalogs;
use orc_partner::ids::{ClassId, Cloud, LocationId, NodeId, OsId, PoolPath, SiteName, Timestamp};
use orc_partner::params::{MapSource, load_config};
use orc_partner::quote::{Purpose, QuoteRequest, quote};
use orc_partner::{Config, QuoteState, explain, seed};

const T0: Timestamp = Timestamp::from_unix_secs(1_800_000_000);

fn seed_text(file: &str) -> String {
    let path = format!("{}/../emu/seed/{file}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

fn catalogs() -> Catalogs {
    let mut c = Catalogs::new();
    c.replace(
        seed::vultr(&seed_text("vultr-catalog.json"), T0)
            .unwrap()
            .snapshot,
    );
    c.replace(
        seed::hetzner(&seed_text("hetzner-cloud-catalog.json"), T0)
            .unwrap()
            .snapshot,
    );
    c
}

fn config(extra: &[(&str, &str)]) -> Config {
    let mut s = MapSource::new()
        .param("partner_id", "zone-1")
        .param("hetzner_api_token", "h")
        .param("hetzner_owner_tag", "orc-partner-hetzner")
        .param("vultr_api_key", "v")
        .param("vultr_owner_tag", "orc-partner-vultr");
    for (k, v) in extra {
        s = s.param(k, v);
    }
    load_config(&s).unwrap()
}

fn request(class: &str, vcpus: u32, gib: u32, os: &str) -> QuoteRequest {
    QuoteRequest {
        node: NodeId::new("n-000042").unwrap(),
        pool: PoolPath::new("p-000007").unwrap(),
        purpose: Purpose::Tenant,
        class: ClassId::new(class).unwrap(),
        shape: Shape {
            vcpus,
            memory_gib: gib,
            arch: Architecture::X86_64,
            disks_gib: vec![],
        },
        os: OsId::new(os).unwrap(),
        pinned_site: None,
        public: false,
        at: T0,
    }
}

fn check(name: &str, text: &str) {
    orc_testkit::golden::check(env!("CARGO_MANIFEST_DIR"), name, text);
}

fn render(req: &QuoteRequest, config: &Config, catalogs: &Catalogs, state: &QuoteState) -> String {
    let outcome = quote(req, config, catalogs, state);
    let mut text = explain::render_table(&outcome);
    for words in outcome.tenant_strings() {
        text.push_str(&format!("tenant words: {words}\n"));
    }
    text
}

#[test]
fn golden_quote_explanations() {
    let rated = config(&[("hetzner_exchange_rate", "1.08")]);
    let cats = catalogs();
    let empty = QuoteState::new();

    check(
        "us-east-2c4g",
        &render(
            &request("us-east", 2, 4, "ubuntu-24.04"),
            &rated,
            &cats,
            &empty,
        ),
    );
    check(
        "eu-central-windows",
        &render(
            &request("eu-central", 2, 4, "windows-2022"),
            &rated,
            &cats,
            &empty,
        ),
    );
    check(
        "eu-central-unpriced-eur",
        &render(
            &request("eu-central", 2, 4, "ubuntu-24.04"),
            &config(&[]),
            &cats,
            &empty,
        ),
    );

    let mut gw = request("eu-central", 0, 0, "gateway");
    gw.purpose = Purpose::Gateway;
    gw.pinned_site = Some(SiteName::new("eu-central-c").unwrap());
    check("eu-central-gateway", &render(&gw, &rated, &cats, &empty));

    let mut sold_out = cats.clone();
    sold_out.update(Cloud::Hetzner, |s| {
        for plan in s.plans.iter_mut() {
            plan.sold_in.remove(&LocationId::new("nbg1").unwrap());
        }
    });
    let mut pinned = QuoteState::new();
    pinned.pin(
        PoolPath::new("p-000007").unwrap(),
        SiteName::new("eu-central-b").unwrap(),
    );
    let mut public = request("eu-central", 2, 4, "ubuntu-24.04");
    public.public = true;
    check(
        "eu-central-pinned-no-capacity",
        &render(&public, &rated, &sold_out, &pinned),
    );

    let capped = config(&[
        ("hetzner_exchange_rate", "1.08"),
        ("hetzner_max_nodes", "10"),
    ]);
    let mut counting = QuoteState::new();
    counting.start_counting(Cloud::Hetzner, T0);
    let mut soon = request("eu-central", 2, 4, "ubuntu-24.04");
    soon.at = T0.plus(Duration::from_secs(3));
    check(
        "eu-central-counting",
        &render(&soon, &capped, &cats, &counting),
    );

    let mut cooling = QuoteState::new();
    cooling.cool_down(SiteName::new("eu-central-a").unwrap(), T0);
    check(
        "eu-central-cooldown",
        &render(
            &request("eu-central", 2, 4, "ubuntu-24.04"),
            &rated,
            &cats,
            &cooling,
        ),
    );
}
