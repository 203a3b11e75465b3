//! The six views, the closed page and the refusal page, rendered from a [`PageState`].
//!
//! Each view is a pure function of the state (and, for the two forms, of what was sent):
//! equal inputs give equal bytes. Lists come from `BTreeMap`s or sorted vectors; clouds are
//! shown in [`Cloud::ALL`] order. maud escapes every value, so text read from a cloud or typed
//! into a form cannot become markup. The config's keys are never read here: a cloud shows only
//! whether its key is set.

use std::collections::{BTreeMap, BTreeSet};

use maud::{Markup, PreEscaped, html};
use orc_common::{Architecture, Purpose, Shape};

use super::forms::{PreviewForm, ValidateForm};
use super::layout::{amount, bare_page, list_or, needs_serving, page, when, when_ago};
use super::model::{AddressKind, CloudSeen, PageState, out_of_step};
use crate::catalog::LastAnswer;
use crate::ids::{Cloud, NodeId, OsId, PoolPath, Timestamp};
use crate::quote::{CandidatePrice, Decision, QuoteOutcome, QuoteRequest, Verdict, quote};
use crate::state::CountStatus;
use crate::validate::{ValidateReport, validate_drafts};

/// The few lines of script behind the Overview's live updates: each `status` event is a flat
/// JSON object of element id → text, set as text (never as markup). Without JavaScript a
/// reload shows the same.
pub const LIVE_SCRIPT: &str = r#"(function(){if(!window.EventSource)return;var s=new EventSource("events");s.addEventListener("status",function(e){var d=JSON.parse(e.data);for(var k in d){var n=document.getElementById(k);if(n)n.textContent=d[k];}});})();"#;

/// The texts the Overview keeps live, by element id: the role, and per cloud the last catalog
/// read and its answer, the site guard and the last inventory pass. The `events` stream sends
/// this map whenever it changes.
pub fn live_status(state: &PageState) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    out.insert("live-role".to_string(), state.role.words().to_string());
    out.insert(
        "live-pass".to_string(),
        state.seen.last_pass.map_or_else(
            || "none on this replica".to_string(),
            |at| when_ago(at, state.now),
        ),
    );
    for cloud in Cloud::ALL {
        let (read, answer) = catalog_read(state, cloud);
        out.insert(format!("live-read-{cloud}"), read);
        out.insert(format!("live-answer-{cloud}"), answer);
        out.insert(format!("live-guard-{cloud}"), guard_words(state, cloud));
    }
    out
}

fn keyed(state: &PageState, cloud: Cloud) -> bool {
    state.config.cloud(cloud).is_some_and(|c| c.is_keyed())
}

/// When `cloud`'s catalog was last read, and its last answer.
fn catalog_read(state: &PageState, cloud: Cloud) -> (String, String) {
    if !keyed(state, cloud) {
        return ("no key set".to_string(), "-".to_string());
    }
    match state.catalogs.get(cloud) {
        Some(snapshot) => {
            let answer = match &snapshot.last_answer {
                LastAnswer::Ok { at } => format!("ok at {}", when(*at)),
                LastAnswer::Failed { at, summary } => {
                    format!(
                        "failed at {}: {summary}; the earlier catalog stays in use",
                        when(*at)
                    )
                }
            };
            (when_ago(snapshot.read_at, state.now), answer)
        }
        None => match state.unread_catalogs.get(&cloud) {
            Some(error) => ("never read".to_string(), format!("failed: {error}")),
            None if state.role.reads_clouds() => ("not read yet".to_string(), "-".to_string()),
            None => (
                "not read on this replica (it reads no cloud account)".to_string(),
                "-".to_string(),
            ),
        },
    }
}

fn guard_words(state: &PageState, cloud: Cloud) -> String {
    if !keyed(state, cloud) {
        "-".to_string()
    } else if state.guard_incomplete.contains(&cloud) {
        "site guard incomplete: the cloud's addresses could not be listed".to_string()
    } else if state.seen.clouds.contains_key(&cloud) {
        "complete".to_string()
    } else {
        "not listed on this replica".to_string()
    }
}

/// Overview: the replica, its role, per cloud the last catalog read and answer, the site
/// guard.
pub fn overview(state: &PageState) -> String {
    let live = live_status(state);
    let text = |id: &str| live.get(id).cloned().unwrap_or_default();
    let body = html! {
        h2 { "This replica" }
        table {
            tbody {
                tr { th scope="row" { "Host" } td { (state.replica.host) } }
                tr { th scope="row" { "Process id" } td { (state.replica.pid) } }
                tr { th scope="row" { "Slot" } td { (state.replica.slot) } }
                tr { th scope="row" { "Role" } td id="live-role" { (text("live-role")) } }
                tr { th scope="row" { "Version" } td { (state.replica.version) } }
                tr { th scope="row" { "Resource" } td { code { (state.replica.resource_uri) } } }
                tr { th scope="row" { "Last inventory pass" } td id="live-pass" { (text("live-pass")) } }
            }
        }
        @if !state.guard_incomplete.is_empty() {
            p.warn role="status" {
                "Site guard incomplete: the addresses of "
                (list_or(state.guard_incomplete.iter(), "-"))
                " could not be listed on the last pass, so a site live there may be missed."
            }
        }
        h2 { "Clouds" }
        table {
            thead {
                tr {
                    th scope="col" { "Cloud" }
                    th scope="col" { "Key" }
                    th scope="col" { "Catalog last read" }
                    th scope="col" { "Last answer" }
                    th scope="col" { "Site guard" }
                }
            }
            tbody {
                @for cloud in Cloud::ALL {
                    tr {
                        th scope="row" { (cloud) }
                        td { @if keyed(state, cloud) { "set" } @else { "not set" } }
                        td id={ "live-read-" (cloud) } { (text(&format!("live-read-{cloud}"))) }
                        td id={ "live-answer-" (cloud) } { (text(&format!("live-answer-{cloud}"))) }
                        td id={ "live-guard-" (cloud) } { (text(&format!("live-guard-{cloud}"))) }
                    }
                }
            }
        }
        p { "This view updates itself while open; without JavaScript, reload it." }
        script { (PreEscaped(LIVE_SCRIPT)) }
    };
    page(state, "Overview", body)
}

/// `1 node`, `2 nodes`, `0 nodes`.
fn counted(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// What a use is measured against: `of 10`, or `(no cap)`.
fn of_cap(cap: Option<String>) -> String {
    cap.map_or_else(|| "(no cap)".to_string(), |cap| format!("of {cap}"))
}

fn opt<T: std::fmt::Display>(value: &Option<T>, none: &str) -> String {
    value
        .as_ref()
        .map_or_else(|| none.to_string(), ToString::to_string)
}

/// Config: the effective params, the classes and sites with their sale status, the OS map
/// resolved per cloud, and the gateway minimum priced per site.
pub fn config(state: &PageState) -> String {
    let view = state.config.view();
    let clouds = &view.clouds;
    let row = |name: &str, cell: &dyn Fn(Cloud) -> String| {
        html! {
            tr {
                th scope="row" { (name) }
                @for cloud in Cloud::ALL { td { (cell(cloud)) } }
            }
        }
    };
    let get = |cloud: Cloud| clouds.get(&cloud);
    let set_list = |items: Option<Vec<String>>, all: &str| match items {
        None => all.to_string(),
        Some(items) => list_or(items, "none"),
    };
    let body = html! {
        h2 { "Partner" }
        table {
            tbody {
                tr { th scope="row" { "partner_id" } td { (view.partner_id) } }
                tr { th scope="row" { "Resource" } td { code { (view.resource_uri) } } }
                tr { th scope="row" { "ptr_domain" } td { (opt(&view.ptr_domain, "not set (no reverse DNS)")) } }
                tr { th scope="row" { "access_keys_url" } td { (opt(&view.access_keys_url, "not set")) } }
                tr { th scope="row" { "ssh_keys" } td { (list_or(view.ssh_keys.iter(), "none")) } }
                tr { th scope="row" { "gateway" } td { "at least " (view.gateway.cpu) " vCPU · " (view.gateway.mem_gib) " GiB" } }
            }
        }
        h2 { "Clouds" }
        table {
            thead {
                tr {
                    th scope="col" { "Param" }
                    @for cloud in Cloud::ALL { th scope="col" { (cloud) } }
                }
            }
            tbody {
                (row("key", &|c| if get(c).is_some_and(|v| v.key_set) { "set".into() } else { "not set".into() }))
                (row("enabled", &|c| if get(c).is_some_and(|v| v.enabled) { "true".into() } else { "false (retired)".into() }))
                (row("owner_tag", &|c| get(c).map_or("-".into(), |v| opt(&v.owner_tag, "not set"))))
                (row("also_owned_tags", &|c| get(c).map_or("-".into(), |v| list_or(v.also_owned_tags.iter(), "none"))))
                (row("max_nodes", &|c| get(c).map_or("-".into(), |v| opt(&v.max_nodes, "no cap"))))
                (row("max_monthly_spend (USD)", &|c| get(c).map_or("-".into(), |v| v.max_monthly_spend_usd.map_or("no cap".into(), amount))))
                (row("exchange_rate (USD per unit)", &|c| get(c).map_or("-".into(), |v| v.exchange_rate.map_or("not set (1 for a USD account)".into(), amount))))
                (row("gateway_plan", &|c| get(c).map_or("-".into(), |v| opt(&v.gateway_plan, "not set (the gateway minimum)"))))
                (row("pool_ipv4_limit", &|c| get(c).map_or("-".into(), |v| v.pool_ipv4_limit.to_string())))
                (row("regions", &|c| get(c).map_or("-".into(), |v| set_list(v.regions.as_ref().map(|s| s.iter().map(ToString::to_string).collect()), "every mapped location"))))
                (row("plans", &|c| get(c).map_or("-".into(), |v| set_list(v.plans.as_ref().map(|s| s.iter().map(ToString::to_string).collect()), "every plan"))))
                (row("images", &|c| get(c).map_or("-".into(), |v| set_list(v.images.as_ref().map(|s| s.iter().cloned().collect()), "every mapped family"))))
                (row("API endpoint", &|c| get(c).map_or("-".into(), |v| v.endpoint.clone())))
            }
        }
        h2 { "Region classes" }
        @for (id, class) in state.config.regions.classes() {
            table {
                caption { (id) " — " (class.title) }
                thead {
                    tr {
                        th scope="col" { "#" }
                        th scope="col" { "Site" }
                        th scope="col" { "Location" }
                        th scope="col" { "Sold on the live catalog" }
                    }
                }
                tbody {
                    @for (i, site) in class.sites.iter().enumerate() {
                        tr {
                            td.num { (i + 1) }
                            th scope="row" { (site.name) }
                            td { (site.cloud) ":" (site.location) }
                            td {
                                @match state.catalogs.get(site.cloud) {
                                    Some(s) if s.sells_at(&site.location) => span.good { "sold" },
                                    Some(_) => span.bad { "not sold now: left out of quotes" },
                                    None => "catalog not read",
                                }
                            }
                        }
                    }
                }
            }
        }
        h2 { "OS map" }
        (os_table(state))
        h2 { "Gateway" }
        p {
            "Minimum " (state.config.gateway.cpu) " vCPU · " (state.config.gateway.mem_gib)
            " GiB (or a cloud's gateway_plan). What it gives at each site, by the quote engine:"
        }
        (gateway_table(state))
    };
    page(state, "Config", body)
}

fn os_table(state: &PageState) -> Markup {
    html! {
        table {
            thead {
                tr {
                    th scope="col" { "OS id" }
                    th scope="col" { "Title" }
                    @for cloud in Cloud::ALL { th scope="col" { "Image on " (cloud) } }
                    th scope="col" { "Resolves" }
                }
            }
            tbody {
                @for (id, entry) in state.config.os_map.entries() {
                    @let cells: Vec<(String, bool)> = Cloud::ALL.iter().map(|cloud| {
                        match (entry.selectors.get(cloud), state.catalogs.get(*cloud)) {
                            (None, _) => ("no selector".to_string(), false),
                            (Some(_), None) => ("catalog not read".to_string(), false),
                            (Some(selector), Some(snapshot)) => {
                                let found = [Architecture::X86_64, Architecture::Arm64]
                                    .iter()
                                    .find_map(|arch| selector.resolve(&snapshot.images, *arch).map(|i| (i, *arch)));
                                match found {
                                    Some((image, Architecture::X86_64)) => (format!("{} {}", image.id, image.title), true),
                                    Some((image, arch)) => (format!("{} {} ({arch} only)", image.id, image.title), true),
                                    None => ("no image matches".to_string(), false),
                                }
                            }
                        }
                    }).collect();
                    @let anywhere = cells.iter().any(|(_, ok)| *ok);
                    tr {
                        th scope="row" { (id) }
                        td { (entry.title) }
                        @for (cell, _) in &cells { td { (cell) } }
                        td {
                            @if anywhere { span.good { "yes" } } @else { span.bad { "nowhere: tenants cannot place it" } }
                        }
                    }
                }
            }
        }
    }
}

/// The gateway quote of every class, over the page's copy of the quote state.
fn gateway_table(state: &PageState) -> Markup {
    html! {
        table {
            thead {
                tr {
                    th scope="col" { "Site" }
                    th scope="col" { "Location" }
                    th scope="col" { "Plan" }
                    th scope="col" class="num" { "Account/month" }
                    th scope="col" class="num" { "USD/month" }
                    th scope="col" { "Note" }
                }
            }
            tbody {
                @for (id, _) in state.config.regions.classes() {
                    @let outcome = gateway_quote(state, id.as_str());
                    @for c in outcome.iter().flat_map(|o| &o.candidates) {
                        tr {
                            th scope="row" { (c.site) }
                            td { (c.cloud) ":" (c.location) }
                            td { (opt(&c.plan, "-")) }
                            td.num { (account_cell(&c.price)) }
                            td.num { (usd_cell(&c.price)) }
                            td {
                                @match c.exclusion() {
                                    Some(e) => { (e.category()) ": " (e.detail(c.cloud)) }
                                    None => "",
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn gateway_quote(state: &PageState, class: &str) -> Option<QuoteOutcome> {
    let request = QuoteRequest {
        node: NodeId::new("admin-gateway-preview").ok()?,
        pool: PoolPath::new("sys/gw-preview").ok()?,
        purpose: Purpose::Gateway,
        class: crate::ids::ClassId::new(class).ok()?,
        shape: Shape {
            vcpus: state.config.gateway.cpu,
            memory_gib: state.config.gateway.mem_gib,
            arch: Architecture::X86_64,
            disks_gib: Vec::new(),
        },
        os: OsId::new("gateway").ok()?,
        pinned_site: None,
        public: false,
        at: state.now,
    };
    Some(quote(&request, state.config, state.catalogs, state.quotes))
}

fn account_cell(price: &Option<CandidatePrice>) -> String {
    price.as_ref().map_or("-".to_string(), |p| {
        format!(
            "{} {}",
            amount(p.account_monthly.amount),
            p.account_monthly.currency
        )
    })
}

fn usd_cell(price: &Option<CandidatePrice>) -> String {
    match price {
        None => "-".to_string(),
        Some(p) => match &p.usd_monthly {
            Some(m) => amount(m.amount),
            None => format!(
                "unpriced (no exchange rate for {})",
                p.account_monthly.currency
            ),
        },
    }
}

/// Children: sites out of step with the region map, then what each cloud holds.
pub fn children(state: &PageState) -> String {
    if let Some(notice) = needs_serving(state.role, "The Children view") {
        return page(state, "Children", notice);
    }
    let steps = out_of_step(state.config, state.quotes.live_sites());
    let body = html! {
        h2 { "Sites out of step with the region map" }
        @if steps.is_empty() {
            p.good { "None: every live site is where the map puts it." }
        } @else {
            table {
                thead {
                    tr {
                        th scope="col" { "Site" }
                        th scope="col" { "Live at" }
                        th scope="col" { "The map puts it at" }
                        th scope="col" { "Fix" }
                    }
                }
                tbody {
                    @for step in &steps {
                        tr {
                            th scope="row" { (step.site) }
                            td { (step.live_cloud) ":" (step.live_location) }
                            td {
                                @match &step.mapped {
                                    Some((cloud, location)) => { (cloud) ":" (location) }
                                    None => "no site name maps to that location",
                                }
                            }
                            td { (step.fix()) }
                        }
                    }
                }
            }
        }
        @if !state.guard_incomplete.is_empty() {
            p.warn { "Site guard incomplete: a cloud's addresses could not be listed, so this list may miss a site." }
        }
        @for cloud in Cloud::ALL {
            (cloud_children(state, cloud))
        }
    };
    page(state, "Children", body)
}

fn count_words(status: Option<CountStatus>, capped: bool, now: Timestamp) -> String {
    match (status, capped) {
        (_, false) => "no cap, nothing to count".to_string(),
        (None, true) => "not counted yet".to_string(),
        (Some(CountStatus::Counted), true) => "counted".to_string(),
        (Some(CountStatus::Counting { since }), true) => {
            format!("being counted since {}", when_ago(since, now))
        }
        (Some(CountStatus::Failed { at }), true) => {
            format!(
                "count failed at {}; sits out quotes until a count succeeds",
                when(at)
            )
        }
    }
}

fn cloud_children(state: &PageState, cloud: Cloud) -> Markup {
    let Some(cc) = state.config.cloud(cloud) else {
        return html! {};
    };
    let seen = state.seen.clouds.get(&cloud);
    let failure = state.seen.failures.get(&cloud);
    let preview_node = NodeId::new("admin-usage").ok();
    let usage = preview_node
        .as_ref()
        .map(|n| state.quotes.usage_with_reservations(cloud, n, state.now))
        .unwrap_or_default();
    let cooling: Vec<(String, Timestamp)> = state
        .config
        .regions
        .sites()
        .filter(|(_, s)| s.cloud == cloud)
        .filter_map(|(_, s)| {
            Some((
                s.name.to_string(),
                state.quotes.cooling_until(&s.name, state.now)?,
            ))
        })
        .collect();
    let current_gen = state.gateway_generations.get(&cloud);
    html! {
        h2 { (cloud) }
        @if !cc.is_keyed() {
            p { "No key is set (" code { (cloud.key_param()) } "): the partner holds nothing here that it can see." }
        } @else {
            table {
                tbody {
                    tr {
                        th scope="row" { "Key" }
                        td {
                            @match (failure, seen) {
                                (Some(f), _) => span.bad { "failing: " (f.summary) " (at " (when(f.at)) ")" },
                                (None, Some(s)) => span.good { "working (listed " (when_ago(s.listed_at, state.now)) ")" },
                                (None, None) => "not listed yet",
                            }
                        }
                    }
                    tr { th scope="row" { "State" } td { @if cc.enabled { "enabled" } @else { "retired (" (cloud) "_enabled is false): no new node is placed here" } } }
                    tr {
                        th scope="row" { "Nodes held" }
                        td { @match seen {
                            Some(s) => { (counted(s.tenant_nodes(), "tenant node")) ", " (counted(s.gateways(), "site gateway")) }
                            None => "unknown",
                        } }
                    }
                    tr {
                        th scope="row" { "Caps used" }
                        td {
                            (counted(usage.tenant_nodes as usize, "node")) " "
                            (of_cap(cc.max_nodes.map(|n| n.to_string())))
                            "; monthly spend " (amount(usage.monthly_spend_usd)) " USD "
                            (of_cap(cc.max_monthly_spend.map(|m| format!("{} USD", amount(m)))))
                            ", reservations included; "
                            (count_words(state.quotes.count_status(cloud), cc.is_capped(), state.now))
                        }
                    }
                    tr {
                        th scope="row" { "Sites cooling down" }
                        td {
                            @if cooling.is_empty() { "none" }
                            @for (i, (site, until)) in cooling.iter().enumerate() {
                                @if i > 0 { "; " }
                                (site) " until " (when(*until))
                            }
                        }
                    }
                }
            }
            @if let Some(seen) = seen {
                (open_sites(seen, current_gen))
                (old_gateways(seen, current_gen))
                @if !cc.enabled && seen.tenant_nodes() == 0 {
                    (left_behind(state, cloud, seen))
                }
                (node_table(cloud, seen))
            }
        }
    }
}

fn open_sites(seen: &CloudSeen, current_gen: Option<&String>) -> Markup {
    let mut sites: BTreeSet<&str> = seen.instances.iter().map(|i| i.site.as_str()).collect();
    for a in &seen.addresses {
        if a.kind == AddressKind::Stable && !a.closed {
            sites.insert(a.site.as_str());
        }
    }
    html! {
        h3 { "Open sites" }
        @if sites.is_empty() {
            p { "None." }
        } @else {
            table {
                thead {
                    tr {
                        th scope="col" { "Site" }
                        th scope="col" { "Stable IPv4" }
                        th scope="col" { "Private prefix" }
                        th scope="col" class="num" { "Tenant nodes" }
                        th scope="col" { "Gateway" }
                    }
                }
                tbody {
                    @for site in &sites {
                        @let stable = seen.addresses.iter().find(|a| a.kind == AddressKind::Stable && a.site == *site);
                        @let prefix = seen.networks.iter().find(|n| n.site == *site);
                        @let tenants = seen.instances.iter().filter(|i| i.site == *site && i.purpose == Purpose::Tenant).count();
                        @let gateways: Vec<_> = seen.instances.iter().filter(|i| i.site == *site && i.purpose == Purpose::Gateway).collect();
                        tr {
                            th scope="row" { (site) }
                            td { @match stable { Some(a) => { (a.ipv4) @if a.closed { " (closed, kept)" } } None => "none" } }
                            td { @match prefix { Some(n) => (n.prefix), None => "no network" } }
                            td.num { (tenants) }
                            td {
                                @if gateways.is_empty() { "none running" }
                                @for (i, g) in gateways.iter().enumerate() {
                                    @if i > 0 { "; " }
                                    (g.node_id) " (" (g.instance_ref) ", " (g.state)
                                    @if g.gateway_generation.as_ref() != current_gen { ", older shape" }
                                    ")"
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn old_gateways(seen: &CloudSeen, current_gen: Option<&String>) -> Markup {
    let old: Vec<_> = seen
        .instances
        .iter()
        .filter(|i| i.purpose == Purpose::Gateway && i.gateway_generation.as_ref() != current_gen)
        .collect();
    html! {
        h3 { "Gateways on an older shape" }
        @if old.is_empty() {
            p { "None." }
        } @else {
            p { "These run on a gateway shape from before the last change of gateway or gateway_plan. Replace one when it suits you by terminating its node; the site keeps its addresses, and its traffic stops for a few minutes." }
            ul {
                @for g in &old {
                    li { (g.site) ": " (g.node_id) " (" (g.instance_ref) ", generation " (opt(&g.gateway_generation, "not recorded")) ")" }
                }
            }
        }
    }
}

fn left_behind(state: &PageState, cloud: Cloud, seen: &CloudSeen) -> Markup {
    let stable: Vec<_> = seen
        .addresses
        .iter()
        .filter(|a| a.kind == AddressKind::Stable)
        .collect();
    html! {
        h3 { "Left behind" }
        p {
            "The cloud is retired and holds no tenant node. The partner deletes none of these; delete them by hand in the cloud's console (each carries the owner tag), then remove "
            code { (cloud.key_param()) } " and " code { (cloud) "_owner_tag" } " if you want to."
        }
        ul {
            li {
                "Stable addresses still held: "
                (list_or(stable.iter().map(|a| format!("{} ({}, {})", a.ipv4, a.site, a.location)), "none"))
            }
            li {
                "Site networks: "
                (list_or(seen.networks.iter().map(|n| format!("{} {}", n.site, n.prefix)), "none"))
            }
            li {
                "The sealed SSH key "
                code { (state.sealed_keys.get(&cloud).map_or("-", String::as_str)) }
            }
        }
    }
}

fn node_table(cloud: Cloud, seen: &CloudSeen) -> Markup {
    html! {
        h3 { "Instances" }
        @if seen.instances.is_empty() {
            p { "None." }
        } @else {
            table {
                caption { "Every instance of the partner in " (cloud) ", by site" }
                thead {
                    tr {
                        th scope="col" { "Node" }
                        th scope="col" { "Site" }
                        th scope="col" { "Location" }
                        th scope="col" { "Role" }
                        th scope="col" { "State" }
                        th scope="col" { "Pool" }
                        th scope="col" { "Instance" }
                        th scope="col" class="num" { "USD/month" }
                    }
                }
                tbody {
                    @for i in &seen.instances {
                        tr {
                            th scope="row" { (i.node_id) }
                            td { (i.site) }
                            td { (i.location) }
                            td { @match i.purpose { Purpose::Tenant => "node", Purpose::Gateway => "gateway" } }
                            td { (i.state) }
                            td { (opt(&i.pool, "-")) }
                            td { (i.instance_ref) }
                            td.num { (i.usd_monthly.map_or("unpriced".to_string(), amount)) }
                        }
                    }
                }
            }
        }
    }
}

fn field_error(form_errors: &BTreeMap<&'static str, String>, name: &str) -> Markup {
    html! {
        @if let Some(problem) = form_errors.get(name) {
            p.error id={ (name) "-error" } { (name) " " (problem) }
        }
    }
}

/// Quote preview: the form, and for a good one the real quote over the page's copy of the
/// quote state (nothing is reserved) with every candidate.
pub fn quote_preview(
    state: &PageState,
    form: &PreviewForm,
    request: Option<&QuoteRequest>,
) -> String {
    let outcome = request.map(|r| quote(r, state.config, state.catalogs, state.quotes));
    let invalid = |name: &str| form.errors.contains_key(name).then_some("true");
    let described = |name: &str| {
        form.errors
            .contains_key(name)
            .then(|| format!("{name}-error"))
    };
    let sites: Vec<(String, String)> = state
        .config
        .regions
        .classes()
        .flat_map(|(id, c)| {
            c.sites
                .iter()
                .map(move |s| (s.name.to_string(), id.to_string()))
        })
        .collect();
    let body = html! {
        p { "The same quote code the zone's quotes run, over a copy of this replica's quote state and its catalogs; a preview reserves nothing." }
        form method="get" action="quote" {
            label for="class" { "Class" }
            select id="class" name="class" aria-invalid=[invalid("class")] aria-describedby=[described("class")] {
                @for (id, class) in state.config.regions.classes() {
                    option value=(id) selected[id.as_str() == form.class] { (id) " — " (class.title) }
                }
            }
            (field_error(&form.errors, "class"))
            label for="cpu" { "vCPUs" }
            input id="cpu" name="cpu" type="number" min="1" max="512" required value=(form.cpu) aria-invalid=[invalid("cpu")] aria-describedby=[described("cpu")];
            (field_error(&form.errors, "cpu"))
            label for="mem" { "Memory (GiB)" }
            input id="mem" name="mem" type="number" min="1" max="4096" required value=(form.mem) aria-invalid=[invalid("mem")] aria-describedby=[described("mem")];
            (field_error(&form.errors, "mem"))
            label for="arch" { "Architecture" }
            select id="arch" name="arch" aria-invalid=[invalid("arch")] aria-describedby=[described("arch")] {
                option value="x86_64" selected[form.arch == "x86_64"] { "x86_64" }
                option value="arm64" selected[form.arch == "arm64"] { "arm64" }
            }
            (field_error(&form.errors, "arch"))
            label for="os" { "OS" }
            select id="os" name="os" aria-invalid=[invalid("os")] aria-describedby=[described("os")] {
                @for (id, entry) in state.config.os_map.entries() {
                    option value=(id) selected[id.as_str() == form.os] { (id) " — " (entry.title) }
                }
            }
            (field_error(&form.errors, "os"))
            label for="site" { "Pinned site (optional)" }
            select id="site" name="site" aria-invalid=[invalid("site")] aria-describedby=[described("site")] {
                option value="" selected[form.site.is_empty()] { "any site of the class" }
                @for (site, class) in &sites {
                    option value=(site) selected[*site == form.site] { (site) " (" (class) ")" }
                }
            }
            (field_error(&form.errors, "site"))
            label for="disks" { "Extra disks in GiB, comma-separated (optional)" }
            input id="disks" name="disks" type="text" inputmode="numeric" value=(form.disks) aria-invalid=[invalid("disks")] aria-describedby=[described("disks")];
            (field_error(&form.errors, "disks"))
            button type="submit" { "Preview" }
        }
        @if form.submitted && !form.errors.is_empty() {
            p.error role="alert" { "Fix the fields marked above; nothing was quoted." }
        }
        @if let Some(outcome) = &outcome {
            (outcome_table(outcome))
        }
    };
    page(state, "Quote preview", body)
}

fn outcome_table(outcome: &QuoteOutcome) -> Markup {
    html! {
        h2 { "Candidates" }
        p {
            (outcome.shape) ", os " (outcome.os) ", class " (outcome.class)
            @if let Some(title) = &outcome.class_title { " (" (title) ")" }
            @if let Some(pin) = &outcome.pinned_site { ", pinned to " (pin) }
        }
        table {
            thead {
                tr {
                    th scope="col" class="num" { "#" }
                    th scope="col" { "Site" }
                    th scope="col" { "Cloud" }
                    th scope="col" { "Location" }
                    th scope="col" { "Plan" }
                    th scope="col" { "Image" }
                    th scope="col" class="num" { "Account/month" }
                    th scope="col" class="num" { "Rate" }
                    th scope="col" class="num" { "USD/month" }
                    th scope="col" { "Verdict" }
                }
            }
            tbody {
                @for c in &outcome.candidates {
                    tr {
                        td.num { (c.order + 1) }
                        th scope="row" { (c.site) }
                        td { (c.cloud) }
                        td { (c.location) }
                        td { (opt(&c.plan, "-")) }
                        td { @match &c.image { Some(i) => { (i.id) " " (i.title) } None => "-" } }
                        td.num { (account_cell(&c.price)) }
                        td.num { @match &c.price { Some(p) => (p.exchange_rate.map_or("none".to_string(), amount)), None => "-" } }
                        td.num { (usd_cell(&c.price)) }
                        td {
                            @match &c.verdict {
                                Verdict::Winner => strong.good { "winner" },
                                Verdict::Eligible => "eligible, ranked lower",
                                Verdict::Excluded { exclusion } => { "excluded (" (exclusion.category()) "): " (exclusion.detail(c.cloud)) }
                            }
                        }
                    }
                }
            }
        }
        @match &outcome.decision {
            Decision::Offer(offer) => p {
                strong { "Offer: " } "site " (offer.site) " (" (offer.cloud) ":" (offer.location) ", plan " (offer.plan)
                ", image " (offer.image.id) ") at "
                (offer.price.usd_monthly.as_ref().map_or("no USD price (unpriced)".to_string(), |m| format!("{} USD/month", amount(m.amount))))
                "; the tenant reads “" (offer.tenant_line) "”."
            },
            Decision::Refusal(refusal) => p {
                strong.bad { "Refused (" (refusal.kind.as_str()) "): " } "the tenant reads “" (refusal.words) "”."
            },
        }
    }
}

/// Pool addresses: every pool address held, per site, with what the cloud charges for it.
pub fn addresses(state: &PageState) -> String {
    if let Some(notice) = needs_serving(state.role, "The Pool addresses view") {
        return page(state, "Pool addresses", notice);
    }
    // site → (cloud, address) in site, then address order.
    let mut by_site: BTreeMap<&str, Vec<(Cloud, &super::model::SeenAddress)>> = BTreeMap::new();
    for (cloud, seen) in &state.seen.clouds {
        for a in seen
            .addresses
            .iter()
            .filter(|a| a.kind == AddressKind::Pool)
        {
            by_site
                .entry(a.site.as_str())
                .or_default()
                .push((*cloud, a));
        }
    }
    let body = html! {
        table {
            caption { "Pool addresses held, against each cloud's pool_ipv4_limit" }
            thead {
                tr {
                    th scope="col" { "Cloud" }
                    th scope="col" class="num" { "Held" }
                    th scope="col" class="num" { "Limit" }
                    th scope="col" class="num" { "Charged a month" }
                }
            }
            tbody {
                @for cloud in Cloud::ALL {
                    @let held: Vec<_> = by_site.values().flatten().filter(|(c, _)| *c == cloud).collect();
                    @let priced: Vec<_> = held.iter().filter_map(|(c, a)| address_price(state, *c, &a.location)).collect();
                    tr {
                        th scope="row" { (cloud) }
                        td.num { (held.len()) }
                        td.num { (state.config.cloud(cloud).map_or(0, |c| c.pool_ipv4_limit)) }
                        td.num {
                            @match priced.first() {
                                Some((_, currency, _)) => {
                                    (amount(priced.iter().map(|(a, _, _)| *a).sum())) " " (currency)
                                    @if priced.len() < held.len() { " (some unpriced)" }
                                }
                                None => "-",
                            }
                        }
                    }
                }
            }
        }
        @if by_site.is_empty() {
            p { "No pool address is held." }
        }
        @for (site, held) in &by_site {
            h2 { (site) }
            table {
                thead {
                    tr {
                        th scope="col" { "Address" }
                        th scope="col" { "Pool" }
                        th scope="col" { "Cloud" }
                        th scope="col" { "Location" }
                        th scope="col" { "Attached to" }
                        th scope="col" class="num" { "The cloud charges a month" }
                        th scope="col" class="num" { "USD/month" }
                    }
                }
                tbody {
                    @for (cloud, a) in held {
                        @let price = address_price(state, *cloud, &a.location);
                        tr {
                            th scope="row" { (a.ipv4) }
                            td { (opt(&a.pool, "unknown pool")) }
                            td { (cloud) }
                            td { (a.location) }
                            td { (opt(&a.attached_to, "nothing (no gateway yet)")) }
                            td.num { @match &price { Some((amt, currency, _)) => { (amount(*amt)) " " (currency) } None => "unknown" } }
                            td.num { @match &price { Some((_, _, Some(usd))) => (amount(*usd)), Some((_, _, None)) => "no exchange rate", None => "-" } }
                        }
                    }
                }
            }
        }
        p { "A public pool's address is quoted to its tenant as one line at rate 0; the charge above is the zone's own cost." }
    };
    page(state, "Pool addresses", body)
}

/// What `cloud` charges a month for a pool address at `location`: the amount, its currency
/// and the USD amount at the cloud's rate.
fn address_price(
    state: &PageState,
    cloud: Cloud,
    location: &str,
) -> Option<(
    rust_decimal::Decimal,
    orc_common::Currency,
    Option<rust_decimal::Decimal>,
)> {
    let snapshot = state.catalogs.get(cloud)?;
    let location = crate::ids::LocationId::new(location).ok()?;
    let price = snapshot.pool_address_price(&location)?;
    let rate = state.config.cloud(cloud)?.usd_rate(price.currency);
    Some((price.amount, price.currency, rate.map(|r| price.amount * r)))
}

/// Validate: the drafts, checked by the parsers the partner starts with, resolved against the
/// catalogs this replica has and the live sites it knows, written back normalised.
pub fn validate(state: &PageState, form: &ValidateForm) -> String {
    let report: Option<ValidateReport> = (!form.is_empty())
        .then(|| validate_drafts(&form.drafts(), state.catalogs, state.quotes.live_sites()));
    let area = |name: &'static str, label: &str, text: &str, hint: &str| {
        let invalid = form.errors.contains_key(name).then_some("true");
        html! {
            label for=(name) { (label) }
            p id={ (name) "-hint" } { (hint) }
            textarea id=(name) name=(name) spellcheck="false" aria-describedby={ (name) "-hint" } aria-invalid=[invalid] { (text) }
            (field_error(&form.errors, name))
        }
    };
    let body = html! {
        p {
            "Paste drafts to check them with the parsers the partner starts with. Each valid draft comes back normalised, ready to paste into the partner pool's form; nothing is applied here."
        }
        @if !state.role.reads_clouds() {
            p.warn { "This replica is standing by: it knows no live site, so a draft that removes or remaps one is not caught here. Check on the serving replica." }
        }
        form method="post" action="validate" {
            (area("regions", "regions", &form.regions, "The region map, JSON."))
            (area("os_map", "os_map", &form.os_map, "The OS map, JSON."))
            (area("gateway", "gateway", &form.gateway, "The gateway minimum, JSON such as {\"cpu\": 2, \"mem\": 4}."))
            label for="ptr_domain" { "ptr_domain" }
            input id="ptr_domain" name="ptr_domain" type="text" value=(form.ptr_domain) aria-invalid=[form.errors.contains_key("ptr_domain").then_some("true")];
            (field_error(&form.errors, "ptr_domain"))
            button type="submit" { "Check" }
        }
        @if let Some(report) = &report {
            h2 { "Result" }
            p role="status" {
                @if report.is_valid() { span.good { "Every draft is valid." } } @else { span.bad { "Some drafts are not valid; the partner would not start with them." } }
            }
            @for draft in &report.drafts {
                h3 { (draft.param) }
                @if draft.errors.is_empty() {
                    p.good { "valid" }
                } @else {
                    p.bad { "not valid:" }
                    ul { @for e in &draft.errors { li.error { (e) } } }
                }
                @if !draft.warnings.is_empty() {
                    p.warn { "Check before applying:" }
                    ul { @for w in &draft.warnings { li { (w) } } }
                }
                @if let Some(text) = &draft.normalised {
                    label for={ "normalised-" (draft.param) } { "Normalised " (draft.param) }
                    textarea id={ "normalised-" (draft.param) } readonly spellcheck="false" { (text) }
                }
            }
        }
    };
    page(state, "Validate", body)
}

/// The page while `access_keys_url` is not set: every request gets it.
pub fn closed() -> String {
    bare_page(
        "The admin page is closed",
        html! {
            p {
                "The partner checks every request against the zone's access keys, and the param "
                code { "access_keys_url" } " that names them is not set."
            }
            p {
                "To open the page, set " code { "access_keys_url" } " of the partner pool "
                code { "sys/partner" } " to "
                code { "https://<zone web url>/.well-known/orc-access/jwks.json" }
                " and reconfigure the pool."
            }
        },
    )
}

/// A refused request: what is wrong with it (never the assertion itself).
pub fn refused(reason: &str) -> String {
    bare_page(
        "Not let in",
        html! {
            p { (reason) }
            p {
                "Open this page through the zone's access edge as an owner or member of project "
                code { "sys" } " or of org " code { "sys" } "."
            }
        },
    )
}

/// A path that is none of the views.
pub fn not_found(state: &PageState) -> String {
    page(
        state,
        "Not found",
        html! {
            p { "There is no such view. The views are listed above." }
        },
    )
}
