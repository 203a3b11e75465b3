//! Fixed view models of every console page of `orc-web`, for the golden files and the benchmark (any
//! number of pools and nodes), and the words no tenant's page may hold.
//!
//! The samples carry where nodes went (cloud, place, plan) as the API gives it to members
//! of org `sys`, so a check over a tenant's frame proves the views leave it out whatever
//! they are handed.

use std::collections::BTreeMap;

use orc_web::console::model::{
    Current, Frame, MembersPage, MeshPage, PoolPage, PoolsPage, ProjectsPage, ProviderCard,
    ProvidersPage, ReconfigurePage, Section, TokensPage, UsagePage, WizardInput, WizardPage,
};
use orc_web::console::{forms, usage_model, views};
use orc_zone_api_types::views::{
    AgentView, AppView, CatalogView, ClassView, EventView, MembershipView, MoneyView, NodeCounts,
    NodeView, OfferingView, OrgView, OsView, ParkedView, PlacedView, PoolView, PricingView,
    ProjectView, ProviderView, QuoteView, ReplicaView, ShapeView, TokenView, UsageLineView,
    UsageView,
};
use orc_zone_model::{AgentState, NodeState};

/// 2026-12-06 10:00:00 UTC, the samples' "now".
pub const NOW_MS: i64 = 1_796_551_200_000;

/// Cloud names, plan ids, cities and cloud locations of the clouds the partner places on
/// (from the emulators' seed catalogs): none may appear on a tenant's page. Location codes
/// of three letters are matched as whole words.
pub const CLOUD_WORDS: &[&str] = &[
    "hetzner",
    "vultr",
    "hcloud",
    "fsn1",
    "nbg1",
    "hel1",
    "falkenstein",
    "nuremberg",
    "helsinki",
    "ashburn",
    "hillsboro",
    "singapore",
    "amsterdam",
    "atlanta",
    "bangalore",
    "mumbai",
    "paris",
    "dallas",
    "new jersey",
    "frankfurt",
    "honolulu",
    "seoul",
    "osaka",
    "johannesburg",
    "los angeles",
    "london",
    "madrid",
    "manchester",
    "melbourne",
    "mexico city",
    "miami",
    "tokyo",
    "chicago",
    "são paulo",
    "santiago",
    "seattle",
    "silicon valley",
    "stockholm",
    "sydney",
    "tel aviv",
    "warsaw",
    "toronto",
    "cx22",
    "cx23",
    "cx32",
    "cx33",
    "cx42",
    "cx43",
    "cx52",
    "cx53",
    "cpx11",
    "cpx12",
    "cpx21",
    "cpx22",
    "cpx31",
    "cpx32",
    "cpx41",
    "cpx42",
    "cpx51",
    "cpx52",
    "cpx62",
    "cax11",
    "cax21",
    "cax31",
    "cax41",
    "ccx13",
    "ccx23",
    "ccx33",
    "ccx43",
    "ccx53",
    "ccx63",
    "vc2-",
    "vhf-",
    "vhp-",
    "voc-",
    "ams",
    "atl",
    "blr",
    "bom",
    "cdg",
    "dfw",
    "ewr",
    "fra",
    "hnl",
    "icn",
    "itm",
    "jnb",
    "lax",
    "lhr",
    "mad",
    "mel",
    "mex",
    "nrt",
    "ord",
    "sao",
    "scl",
    "sea",
    "sgp",
    "sjc",
    "sto",
    "syd",
    "tlv",
    "waw",
    "yto",
    "ash",
    "hil",
    "sin",
];

/// The [`CLOUD_WORDS`] in `html` (its style sheet and script tags aside), lower case.
pub fn cloud_words_in(html: &str) -> Vec<String> {
    let text = strip_style(&html.to_lowercase());
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut found = Vec::new();
    for word in CLOUD_WORDS {
        let mut from = 0;
        while let Some(i) = text[from..].find(word) {
            let at = from + i;
            let end = at + word.len();
            let before = text[..at].chars().next_back().is_none_or(|c| !is_word(c));
            let after = word.ends_with('-')
                || text[end..]
                    .chars()
                    .next()
                    .is_none_or(|c| !is_word(c) && c != '-');
            if before && after {
                found.push((*word).to_string());
                break;
            }
            from = end;
        }
    }
    found
}

fn strip_style(html: &str) -> String {
    match (html.find("<style>"), html.find("</style>")) {
        (Some(a), Some(b)) if b > a => format!("{}{}", &html[..a], &html[b + 8..]),
        _ => html.to_string(),
    }
}

/// A frame for `user` on `org/project` with `role`; `zone_member` for members of `sys`.
pub fn frame(user: &str, zone_member: bool, section: Section, current: &Current) -> Frame {
    Frame {
        user: user.to_string(),
        zone_member,
        projects: vec!["acme/data".into(), "acme/web".into(), "sys/sys".into()],
        current: Some(current.clone()),
        section,
    }
}

/// `acme/web` as `role`.
pub fn current(role: &str) -> Current {
    Current {
        org: "acme".into(),
        project: "web".into(),
        role: role.into(),
        org_wide: role == "owner",
    }
}

fn money(amount: &str) -> MoneyView {
    MoneyView {
        amount: amount.into(),
        currency: "USD".into(),
        period: "hour".into(),
    }
}

/// Pool `name` of `acme/web` with `size` nodes on the partner.
pub fn pool(name: &str, size: u32) -> PoolView {
    PoolView {
        id: format!("pl-{name}"),
        path: format!("acme/web/{name}"),
        name: name.into(),
        provider: "partner".into(),
        provider_id: "pv-2".into(),
        size,
        shape: ShapeView {
            cpu: 2,
            mem: 4,
            arch: None,
            disks: vec![100],
        },
        class: "eu-central".parse().unwrap(),
        os: "ubuntu-24.04".parse().unwrap(),
        public: true,
        endpoints: Vec::new(),
        app: None,
        placement: BTreeMap::new(),
        ssh_keys: Vec::new(),
        address: Some(orc_zone_api_types::views::PoolAddressView {
            ipv4: "198.18.0.7".into(),
            site: "eu-central-a".into(),
        }),
        generation: 1,
        deleting: false,
        nodes: NodeCounts {
            running: size.saturating_sub(1),
            starting: u32::from(size > 0),
            parked: 0,
            destroying: 0,
            lost: 0,
        },
        parked: None,
        created_at: NOW_MS - 3_600_000,
        updated_at: NOW_MS - 60_000,
    }
}

/// `count` nodes of a pool, the last one still deploying, every one with where it went.
pub fn nodes(count: u32) -> Vec<NodeView> {
    (0..count)
        .map(|slot| {
            let deploying = slot + 1 == count;
            NodeView {
                id: format!("n-{}", 100 + slot),
                slot,
                state: if deploying {
                    NodeState::Deploying
                } else {
                    NodeState::Running
                },
                words: Some("2 vCPU · 4 GiB · eu-central".into()),
                refusal: None,
                site: Some("eu-central-a".into()),
                addresses: vec![format!("10.1.0.{}", 10 + slot % 200)],
                private_address: Some(format!("10.1.0.{}", 10 + slot % 200)),
                gateway: Some("10.1.0.2".into()),
                price: Some(money("0.0121")),
                markup: Some("0".into()),
                attempts: 1,
                placed: Some(PlacedView {
                    cloud: "hetzner".into(),
                    location: "fsn1".into(),
                    plan: "cx23".into(),
                    instance: format!("hetzner:{}", 4000 + slot),
                }),
                created_at: NOW_MS - 3_600_000,
                updated_at: NOW_MS - 60_000,
                ended_at: None,
                agent: (!deploying).then(|| AgentView {
                    state: AgentState::Ready,
                    connected: true,
                    version: "0.1.0".into(),
                    last_contact: NOW_MS - 5_000,
                    joined_at: NOW_MS - 3_500_000,
                    hostname: format!("n-{}", 100 + slot),
                    desired_generation: 3,
                    applied_generation: 3,
                    apply_error: None,
                    cert_not_after: NOW_MS + 86_400_000,
                }),
                ingress: slot == 0,
            }
        })
        .collect()
}

/// The projects page.
pub fn projects_page() -> ProjectsPage {
    let org = |name: &str| OrgView {
        id: format!("o-{name}"),
        name: name.into(),
        created_at: NOW_MS,
    };
    let project = |org: &str, name: &str| ProjectView {
        id: format!("p-{name}"),
        org: org.into(),
        name: name.into(),
        created_at: NOW_MS,
    };
    ProjectsPage {
        orgs: vec![
            (
                org("acme"),
                vec![project("acme", "data"), project("acme", "web")],
            ),
            (org("sys"), vec![project("sys", "sys")]),
        ],
    }
}

/// The pools page with `count` pools of `size` nodes each.
pub fn pools_page(count: u32, size: u32) -> PoolsPage {
    let mut pools: Vec<PoolView> = (0..count)
        .map(|i| pool(&format!("web{i:02}"), size))
        .collect();
    if let Some(p) = pools.get_mut(1) {
        p.nodes.parked = 1;
        p.parked = Some(ParkedView {
            refusal: Some("no_capacity".into()),
            words: Some("no capacity in Europe Central right now".into()),
        });
    }
    PoolsPage { pools }
}

/// A pool's page with `size` nodes and its events.
pub fn pool_page(size: u32) -> PoolPage {
    let events = (0..5)
        .map(|i| EventView {
            id: format!("e-{}", 10 - i),
            at: NOW_MS - i64::from(i) * 60_000,
            kind: if i == 4 {
                "pool.created"
            } else {
                "node.running"
            }
            .into(),
            words: if i == 4 {
                "created with 3 node(s) on provider partner".into()
            } else {
                "running at eu-central-a".into()
            },
            provider_id: Some("pv-2".into()),
            pool_id: Some("pl-web".into()),
            pool: Some("acme/web/web".into()),
            node_id: (i != 4).then(|| format!("n-{}", 100 + i)),
            repeats: 1,
            last_at: None,
        })
        .collect();
    PoolPage {
        pool: pool("web", size),
        nodes: nodes(size),
        events,
        endpoints: None,
        resize_to: size.to_string(),
        errors: BTreeMap::new(),
        notice: None,
        logs: None,
        log_level: "info".into(),
    }
}

fn catalog() -> CatalogView {
    CatalogView {
        classes: vec![
            ClassView {
                id: "eu-central".into(),
                title: "Europe Central".into(),
                can_place: true,
                offerings: vec![
                    OfferingView {
                        cpu: 2,
                        mem: 4,
                        arch: "x86_64".into(),
                        plan: None,
                    },
                    OfferingView {
                        cpu: 4,
                        mem: 8,
                        arch: "x86_64".into(),
                        plan: None,
                    },
                ],
            },
            ClassView {
                id: "asia-south".into(),
                title: "Asia South".into(),
                can_place: false,
                offerings: Vec::new(),
            },
        ],
        os: vec![
            OsView {
                id: "debian-12".into(),
                title: "Debian 12".into(),
            },
            OsView {
                id: "ubuntu-24.04".into(),
                title: "Ubuntu 24.04 LTS".into(),
            },
        ],
        public_ipv4_offered: 10,
    }
}

/// The partner as `acme/web` sees it (registered in `sys/sys`, Global).
pub fn partner(markup: Option<&str>) -> ProviderView {
    ProviderView {
        id: "pv-2".into(),
        name: "partner".into(),
        project: "sys/sys".into(),
        resource_uri: "urn:orc:partner:p1".into(),
        scope: "zone".into(),
        // Priced; its markup shows only where given (its own project's view).
        pricing: PricingView {
            priced: true,
            markup: markup.map(str::to_string),
        },
        builtin: false,
        replicas: vec![
            ReplicaView {
                host: String::new(),
                pid: 0,
                slot: 0,
                role: "serving".into(),
                connected_since: NOW_MS,
            },
            ReplicaView {
                host: String::new(),
                pid: 0,
                slot: 1,
                role: "standby".into(),
                connected_since: NOW_MS,
            },
        ],
        catalog: Some(catalog()),
        created_at: NOW_MS,
        updated_at: NOW_MS,
    }
}

/// The wizard with everything filled in and the partner's offer.
pub fn wizard_offer() -> WizardPage {
    WizardPage {
        providers: vec![partner(None)],
        input: WizardInput {
            provider: "partner".into(),
            class: "eu-central".into(),
            cpu: "2".into(),
            mem: "4".into(),
            disks: String::new(),
            os: "ubuntu-24.04".into(),
            size: "3".into(),
            public: "on".into(),
            name: "web".into(),
            plan: String::new(),
            quote: "1".into(),
        },
        errors: BTreeMap::new(),
        quote: Some(QuoteView {
            provider: "partner".into(),
            outcome: "offer".into(),
            words: "2 vCPU · 4 GiB · eu-central".into(),
            site: Some("eu-central-a".into()),
            price: Some(money("0.0121")),
            markup: None,
            refusal: None,
        }),
        quote_problem: None,
    }
}

/// The wizard after a form with a size of 0 and an unknown OS.
pub fn wizard_refused() -> WizardPage {
    let mut page = wizard_offer();
    page.input.size = "0".into();
    page.input.os = "templeos".into();
    page.quote = None;
    page.errors = match forms::create_pool(&page.input, Some(&catalog())) {
        Err(errors) => errors,
        Ok(_) => BTreeMap::new(),
    };
    page
}

/// The Resource Providers page as `sys/sys` sees it (home of the partner).
pub fn providers_page() -> ProvidersPage {
    ProvidersPage {
        cards: vec![ProviderCard {
            provider: partner(Some("0")),
            sites: vec![orc_zone_api_types::views::SiteView {
                site: "eu-central-a".into(),
                public_ipv4: Some("198.18.0.5".into()),
                private_prefix: Some("10.1.0.0/24".into()),
                reported: true,
                status: "open".into(),
                tenant_nodes: 3,
                gateway: Some("running".into()),
            }],
            home: true,
            errors: BTreeMap::new(),
        }],
        notice: Some(
            "Provider partner now prices with a markup of 0, for nodes admitted from now on."
                .into(),
        ),
        operator: true,
    }
}

/// The usage page: priced lines and one unpriced node.
pub fn usage_page(lines: u32) -> UsagePage {
    let usage = UsageView {
        month: "2026-12".into(),
        lines: (0..lines)
            .map(|i| UsageLineView {
                id: format!("ul-{i}"),
                month: "2026-12".into(),
                pool_id: Some("pl-web".into()),
                pool: Some("web".into()),
                node_id: Some(format!("n-{}", 100 + i)),
                description: "2 vCPU · 4 GiB · eu-central".into(),
                hours: "10.5".into(),
                rate: money("0.0121"),
                amount: "0.12705".into(),
                accruing: i == 0,
            })
            .collect(),
        totals: [(
            "USD".to_string(),
            (rust_decimal::Decimal::new(12_705, 5) * rust_decimal::Decimal::from(lines))
                .to_string(),
        )]
        .into_iter()
        .filter(|_| lines > 0)
        .collect(),
    };
    let month = orc_zone_model::pricing::month_of(orc_zone_model::Timestamp(NOW_MS));
    let unpriced = vec![orc_web::console::model::UnpricedNode {
        pool: "batch".into(),
        node: "n-300".into(),
        line: "4 vCPU · 8 GiB · eu-central".into(),
        hours: "3.00".into(),
        running: true,
    }];
    usage_model(usage, unpriced, &month)
}

/// Members of `acme`, as an owner sees them.
pub fn members_page() -> MembersPage {
    let m = |id: &str, user: &str, project: Option<&str>, role: &str| MembershipView {
        id: id.into(),
        user: user.into(),
        org: "acme".into(),
        project: project.map(str::to_string),
        role: role.into(),
        created_at: NOW_MS,
    };
    MembersPage {
        org: "acme".into(),
        memberships: vec![
            m("m-1", "olivia", None, "owner"),
            m("m-2", "bruno", Some("acme/web"), "member"),
            m("m-3", "vic", Some("acme/web"), "viewer"),
        ],
        projects: vec!["data".into(), "web".into()],
        manages: true,
        errors: BTreeMap::new(),
        notice: None,
    }
}

/// A person's tokens, one just made (its value shown this once).
pub fn tokens_page() -> TokensPage {
    let t = |id: &str, label: &str, revoked: Option<i64>| TokenView {
        id: id.into(),
        user: "bruno".into(),
        label: label.into(),
        created_at: NOW_MS - 86_400_000,
        expires_at: None,
        revoked_at: revoked,
        project: None,
    };
    TokensPage {
        user: "bruno".into(),
        tokens: vec![t("t-4", "laptop", None), t("t-5", "ci", Some(NOW_MS))],
        created: Some((
            t("t-6", "build", None),
            "orc_SAMPLEVALUEONLYFORGOLDENS".into(),
        )),
        errors: BTreeMap::new(),
        notice: None,
    }
}

/// The pool form of the partner's app pool, one JSON param that does not parse.
pub fn reconfigure_page() -> ReconfigurePage {
    let mut p = pool("partner", 2);
    p.path = "sys/sys/partner".into();
    let mut params = BTreeMap::new();
    params.insert("partner_id".to_string(), "p1".to_string());
    params.insert(
        "regions".to_string(),
        "{\"eu-central\": {\"title\": \"Europe Central\"}}".to_string(),
    );
    p.app = Some(AppView {
        package: "sys/orc-prov-partner:0.1.0".into(),
        digest: None,
        params: params.clone(),
        sensitive_params: vec!["cloud_token".into()],
    });
    let shown = forms::manifest_fields(&manifest_params(), &params, &["cloud_token".to_string()]);
    let typed = vec![
        ("params.partner_id".to_string(), "p1".to_string()),
        (
            "params.regions".to_string(),
            "{\"eu-central\": ".to_string(),
        ),
        ("params.cloud_token".to_string(), "typed-secret".to_string()),
    ];
    let (params, errors) = match forms::reconfigure(&shown, &typed) {
        Err(failed) => failed,
        Ok(form) => (form.fields, BTreeMap::new()),
    };
    ReconfigurePage {
        pool: p,
        params,
        errors,
    }
}

/// Params as an app's manifest declares them.
pub fn manifest_params() -> Vec<orc_zone_model::registry::ManifestParam> {
    let param = |name: &str, help: &str, default: Option<&str>, sensitive, json, required| {
        orc_zone_model::registry::ManifestParam {
            name: name.into(),
            help: help.into(),
            default: default.map(str::to_string),
            required,
            sensitive,
            json,
        }
    };
    vec![
        param(
            "partner_id",
            "Names this partner on everything it creates.",
            None,
            false,
            false,
            true,
        ),
        param(
            "regions",
            "The region classes and their sites.",
            Some("the built-in map"),
            false,
            true,
            false,
        ),
        param(
            "cloud_token",
            "The account's API key.",
            None,
            true,
            false,
            false,
        ),
        param(
            "ptr_domain",
            "Where reverse DNS names go.",
            Some("none"),
            false,
            false,
            false,
        ),
    ]
}

/// The form that runs an app, with a size of 0 refused.
pub fn app_pool_page() -> orc_web::console::model::AppPoolPage {
    let mut errors = BTreeMap::new();
    errors.insert(
        "size".to_string(),
        "A pool here takes 1 to 1000 nodes, not 0.".to_string(),
    );
    orc_web::console::model::AppPoolPage {
        packages: vec!["acme/batch:1.2".into(), "sys/orc-prov-partner:0.1.0".into()],
        package: "sys/orc-prov-partner:0.1.0".into(),
        description: "Places nodes on the cheapest cloud.".into(),
        params: forms::manifest_fields(&manifest_params(), &BTreeMap::new(), &[]),
        name: "partner2".into(),
        size: "0".into(),
        errors,
    }
}

/// Every page, rendered as `role` in `acme/web` (a tenant) or, with `zone_member`, as a
/// member of `sys`: (name, HTML). Pools and nodes as the benchmark asks.
/// A project's mesh of two nodes and a workstation just connected.
pub fn mesh_page() -> MeshPage {
    use orc_zone_api_types::views::{
        ConnectedWorkstation, MeshMemberView, MeshPeerView, MeshView, WorkstationView,
    };
    let member = |id: &str, kind: &str, address: &str, state: &str| MeshMemberView {
        id: id.into(),
        kind: kind.into(),
        name: if kind == "node" {
            id.into()
        } else {
            "laptop".into()
        },
        address: address.into(),
        pool: (kind == "node").then(|| "web".to_string()),
        site: (kind == "node").then(|| "eu-central-a".to_string()),
        state: state.into(),
        desired_generation: (kind == "node").then_some(4),
        applied_generation: (kind == "node").then_some(4),
        apply_error: None,
        peers: 2,
        peers_up: Some(2),
        rx_bytes: None,
        tx_bytes: None,
        reported_at: None,
    };
    let key = "b3JjLXNhbXBsZS1wdWJsaWMta2V5LTMyLWJ5dGVzLi4=";
    MeshPage {
        mesh: MeshView {
            org: "acme".into(),
            project: "web".into(),
            prefix: Some("10.88.0.0/24".into()),
            handshake_window_seconds: 180,
            members: vec![
                member("n-100", "node", "10.88.0.2", "in step"),
                member("n-101", "node", "10.88.0.3", "in step"),
                member("w-7", "workstation", "10.88.0.9", "connected"),
            ],
        },
        connected: Some(ConnectedWorkstation {
            workstation: WorkstationView {
                id: "w-7".into(),
                name: "laptop".into(),
                address: "10.88.0.9".into(),
                public_key: key.into(),
                created_at: 1_767_225_600_000,
            },
            interface_address: "10.88.0.9/24".into(),
            peers: vec![MeshPeerView {
                name: "n-100".into(),
                public_key: key.into(),
                endpoint: Some("198.18.0.20:51820".into()),
                allowed_ips: vec!["10.88.0.2/32".into()],
                keepalive_seconds: Some(25),
            }],
        }),
        name: "laptop".into(),
        public_key: key.into(),
        errors: BTreeMap::new(),
    }
}

/// A node's page after a token was minted and a command ran.
pub fn node_page() -> orc_web::console::model::NodePage {
    use orc_zone_api_types::views::{CreatedJoinToken, JoinTokenView};
    let token = |id: &str, state: &str, by: &str| JoinTokenView {
        id: id.into(),
        node_id: "n-000000000031".into(),
        state: state.into(),
        created_by: by.into(),
        created_at: 1_767_225_600_000,
        expires_at: 1_767_229_200_000,
        used_at: None,
        revoked_at: None,
        ca_fingerprint: "sha256:ab12".into(),
        product_uuid: None,
    };
    let node = nodes(1).remove(0);
    orc_web::console::model::NodePage {
        pool: "web".into(),
        node,
        tokens: vec![
            token("jt-000000000040", "used", "zone"),
            token("jt-000000000052", "live", "bruno"),
        ],
        created: Some(CreatedJoinToken {
            token: token("jt-000000000052", "live", "bruno"),
            secret: "orc-join-SAMPLE-secret".into(),
            endpoint: "https://zone.example.net:7400".into(),
        }),
        command: "ip -4 addr".into(),
        timeout: "60".into(),
        ttl: "3600".into(),
        exec: Some(orc_web::console::model::ExecResult {
            argv: vec!["ip".into(), "-4".into(), "addr".into()],
            stdout: "1: lo    inet 127.0.0.1/8 scope host lo\n2: eth0    inet 10.128.1.3/24\n"
                .into(),
            stderr: String::new(),
            code: Some(0),
            error: None,
            truncated: false,
        }),
        errors: BTreeMap::new(),
    }
}

pub fn every_page(role: &str, zone_member: bool, pools: u32, nodes: u32) -> Vec<(String, String)> {
    let c = current(role);
    let f = |s: Section| frame("bruno", zone_member, s, &c);
    let pool = pool_page(nodes);
    let mut out = vec![
        (
            "projects",
            views::projects(&f(Section::Projects), &projects_page()),
        ),
        (
            "pools",
            views::pools(
                &f(Section::Pools),
                &c,
                &pools_page(pools, nodes / pools.max(1)),
            ),
        ),
        ("pool", views::pool(&f(Section::Pools), &c, &pool)),
        (
            "delete",
            views::delete_confirm(&f(Section::Pools), &c, &pool.pool),
        ),
        (
            "request-offer",
            views::wizard(&f(Section::Request), &c, &wizard_offer()),
        ),
        (
            "request-refused",
            views::wizard(&f(Section::Request), &c, &wizard_refused()),
        ),
        (
            "providers",
            views::providers(&f(Section::Providers), &c, &providers_page()),
        ),
        (
            "usage",
            views::usage(&f(Section::Usage), &c, &usage_page(nodes.min(50))),
        ),
        (
            "members",
            views::members(&f(Section::Members), &members_page()),
        ),
        ("tokens", views::tokens(&f(Section::Tokens), &tokens_page())),
        (
            "reconfigure",
            views::reconfigure(&f(Section::Pools), &c, &reconfigure_page()),
        ),
        (
            "apps",
            views::app_pool(&f(Section::Pools), &c, &app_pool_page()),
        ),
    ];
    out.push(("mesh", views::mesh(&f(Section::Mesh), &c, &mesh_page())));
    out.push(("node", views::node(&f(Section::Pools), &c, &node_page())));
    out.push((
        "problem",
        views::problem(
            &f(Section::Projects),
            "Not allowed",
            "this needs the member role in project acme/web; you are viewer",
        ),
    ));
    out.into_iter().map(|(n, h)| (n.to_string(), h)).collect()
}
