//! The console's pages as pure functions of their view models ([`super::model`]): equal
//! models give equal HTML, so the pages have golden files. `maud` escapes every value.
//!
//! Every form posts to the page's own path or a sibling of it, and every link is a path on
//! the zone's own host. A page shows a form only to a role that may use it; the API refuses
//! the rest anyway. Where a node went (cloud, place, plan) is shown only to members of org
//! `sys`: the API leaves it out for everyone else, and the views never look for it there.

use std::str::FromStr;

use maud::{Markup, html};
use orc_common::html::Shell;
use rust_decimal::{Decimal, RoundingStrategy};

use super::model::{
    Current, FieldErrors, Frame, MembersPage, MeshPage, NodePage, ParamField, PoolPage, PoolsPage,
    ProjectsPage, ProviderCard, ProvidersPage, ReconfigurePage, Section, TokensPage, UsagePage,
    WizardPage,
};
use super::seg;
use orc_zone_api_types::views::{
    EventView, MoneyView, NodeView, PoolView, ProviderView, QuoteView,
};

/// The console's style sheet: the shared rules, then the zone's colours, the header's
/// project switcher, the sections, cards, form fields and notices.
pub const STYLE: &str = orc_common::style_sheet!(
    "body{color:#1b1f24;background:#f6f7f9}\
header{background:#1b2a41;color:#fff;padding:.6rem 1.5rem;display:flex;flex-wrap:wrap;gap:.8rem;\
align-items:center;justify-content:space-between}\
header a{color:#fff}header form{margin:0;display:flex;gap:.4rem;align-items:center}\
header label{color:#fff;font-weight:400;margin:0}\
nav.sections ul{list-style:none;display:flex;flex-wrap:wrap;gap:.3rem 1.2rem;padding:0;margin:.4rem 0}\
nav.sections a[aria-current=page]{font-weight:700;text-decoration:none;color:#1b1f24}\
main{max-width:72rem;margin:1rem auto;padding:0 1.5rem}\
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:1.6rem}\
.card{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:.8rem 1.1rem;margin:1rem 0}\
fieldset{border:1px solid #d0d7de;border-radius:4px;margin:.8rem 0}\
fieldset label{font-weight:400;display:inline}\
input[type=text],input[type=number],input[type=password],select,textarea{box-sizing:border-box;\
padding:.4rem;border:1px solid #6e7781;border-radius:4px}\
textarea{min-height:7rem}\
button{margin-top:.8rem;padding:.4rem 1rem;border:0;border-radius:4px;background:#0a58ca;\
color:#fff}\
button.danger{background:#b3261e}header button{margin:0;background:#3d4f6b}\
.field-error{color:#a40e26;font-weight:600;margin:.2rem 0}\
.notice{background:#dafbe1;border:1px solid #1a7f37;padding:.5rem .8rem;border-radius:4px}\
.problem{background:#ffebe9;border:1px solid #cf222e;color:#82071e;padding:.5rem .8rem;\
border-radius:4px}\
.secret{font-family:ui-monospace,monospace;background:#fff8c5;padding:.4rem;word-break:break-all}\
table{width:100%;background:#fff;margin:.5rem 0 1rem}\
th,td{border-bottom:1px solid #d0d7de}\
.muted{color:#57606a}"
);

/// Where the pages' one script is served (`live.rs` answers it).
pub const LIVE_SCRIPT_PATH: &str = "/console/live.js";

/// A whole page in the pages' shared frame ([`Shell`]): the header with the project
/// switcher and sign-out, the project's sections, then `content`. It loads the one script,
/// `/console/live.js`, which keeps a pool's nodes current while the page is open.
pub fn page(frame: &Frame, title: &str, content: Markup) -> String {
    Shell {
        title,
        title_suffix: "orc console",
        style: STYLE,
        scripts: &[LIVE_SCRIPT_PATH],
        header: Some(html! {
            a href="/orgs" { strong { "orc" } " console" }
            form method="get" action="/orgs/switch" {
                label for="switch-project" { "Project" }
                select #switch-project name="to" {
                    @for p in &frame.projects {
                        option value=(p)
                            selected[frame.current.as_ref().is_some_and(|c| &c.path() == p)]
                            { (p) }
                    }
                }
                button type="submit" { "Open" }
            }
            form method="post" action="/sign-out" {
                span { "Signed in as " (frame.user) }
                button type="submit" { "Sign out" }
            }
        }),
        main: html! {
            (sections(frame))
            (content)
        },
        footer: None,
    }
    .render()
}

fn sections(frame: &Frame) -> Markup {
    let current = |s: Section| (frame.section == s).then_some("page");
    html! {
        nav.sections aria-label="Sections" {
            ul {
                li { a href="/orgs" aria-current=[current(Section::Projects)] { "Projects" } }
                @if let Some(c) = &frame.current {
                    li { a href={ (c.url()) "/pools" } aria-current=[current(Section::Pools)] { "Pools" } }
                    li { a href={ (c.url()) "/request" } aria-current=[current(Section::Request)] { "Request a pool" } }
                    li { a href={ (c.url()) "/providers" } aria-current=[current(Section::Providers)] { "Resource Providers" } }
                    li { a href={ (c.url()) "/usage" } aria-current=[current(Section::Usage)] { "Usage" } }
                    li { a href={ (c.url()) "/mesh" } aria-current=[current(Section::Mesh)] { "Mesh" } }
                    @if c.org_wide {
                        li { a href={ "/orgs/" (seg(&c.org)) "/members" } aria-current=[current(Section::Members)] { "Members of " (c.org) } }
                    }
                }
                li { a href="/tokens" aria-current=[current(Section::Tokens)] { "API tokens" } }
            }
        }
    }
}

/// The line under a page's heading: which project, and what the role there allows.
fn project_line(current: &Current) -> Markup {
    html! {
        p.muted {
            "Project " strong { (current.path()) } " · you are " (current.role)
            @if !current.writes() { " (you see everything here and change nothing)" }
        }
    }
}

fn field_error(errors: &FieldErrors, field: &str) -> Markup {
    html! {
        @if let Some(e) = errors.get(field) {
            p.field-error id={ (field_id(field)) "-error" } { (e) }
        }
    }
}

/// An element id for a field name (`shape.cpu` → `f-shape-cpu`).
fn field_id(field: &str) -> String {
    let cleaned: String = field
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("f-{cleaned}")
}

fn described(errors: &FieldErrors, field: &str) -> Option<String> {
    errors
        .contains_key(field)
        .then(|| format!("{}-error", field_id(field)))
}

/// Errors no field of the form names.
fn other_errors(errors: &FieldErrors, fields: &[&str]) -> Markup {
    html! {
        @for (field, e) in errors {
            @if !fields.contains(&field.as_str()) {
                p.problem role="alert" { (e) }
            }
        }
    }
}

/// A price as people read it: per month, at two decimals (`8.11 USD/month`).
pub fn price(money: &MoneyView) -> String {
    let Ok(value) = Decimal::from_str(money.amount.trim()) else {
        return format!("{} {}/{}", money.amount, money.currency, money.period);
    };
    let monthly = match money.period.as_str() {
        "hour" => value * orc_zone_model::pricing::HOURS_PER_MONTH,
        _ => value,
    };
    format!("{} {}/month", two_decimals(monthly), money.currency)
}

fn two_decimals(value: Decimal) -> String {
    let rounded = value.round_dp_with_strategy(2, RoundingStrategy::MidpointAwayFromZero);
    format!("{rounded:.2}")
}

/// Text that is a decimal, at two decimals; any other text as it came.
pub fn decimal_text(text: &str) -> String {
    Decimal::from_str(text.trim()).map_or_else(|_| text.to_string(), two_decimals)
}

fn node_price(n: &NodeView) -> String {
    n.price
        .as_ref()
        .map_or_else(|| "unpriced".to_string(), price)
}

/// A time in milliseconds since the epoch, as UTC text.
pub fn time(millis: i64) -> String {
    chrono::DateTime::from_timestamp_millis(millis)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| millis.to_string())
}

/// The console page of node `id` of `pool` (whose path is `org/project/name`).
fn node_url(pool: &PoolView, id: &str) -> String {
    let mut parts = pool.path.splitn(3, '/');
    let (org, project, name) = (
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
    );
    format!(
        "/orgs/{}/projects/{}/pools/{}/nodes/{}",
        seg(org),
        seg(project),
        seg(name),
        seg(id)
    )
}

/// The plans the chosen class lists, with their shapes, when the provider names plans.
fn chosen_plans(provider: &ProviderView, class: &str) -> Vec<(String, String)> {
    let Some(catalog) = &provider.catalog else {
        return Vec::new();
    };
    catalog
        .classes
        .iter()
        .filter(|c| c.id == class)
        .flat_map(|c| c.offerings.iter())
        .filter_map(|o| {
            o.plan.as_ref().map(|plan| {
                (
                    plan.clone(),
                    format!("{} vCPU · {} GiB · {}", o.cpu, o.mem, o.arch),
                )
            })
        })
        .collect()
}

fn pool_url(current: &Current, pool: &str) -> String {
    format!("{}/pools/{}", current.url(), seg(pool))
}

fn shape_text(pool: &PoolView) -> String {
    let mut text = format!("{} vCPU · {} GiB", pool.shape.cpu, pool.shape.mem);
    if let Some(arch) = &pool.shape.arch {
        text.push_str(&format!(" · {arch}"));
    }
    for disk in &pool.shape.disks {
        text.push_str(&format!(" · disk {disk} GiB"));
    }
    text
}

/// A refusal in the console's frame.
pub fn problem(frame: &Frame, title: &str, message: &str) -> String {
    let content = html! {
        h1 { (title) }
        p.problem role="alert" { (message) }
        p { a href="/orgs" { "Your projects" } }
    };
    page(frame, title, content)
}

/// `/orgs`: the orgs and projects the person may open.
pub fn projects(frame: &Frame, view: &ProjectsPage) -> String {
    let content = html! {
        h1 { "Your projects" }
        @if view.orgs.is_empty() {
            p { "You have no role in any project yet; an owner of an org grants one." }
        }
        @for (org, projects) in &view.orgs {
            section.card aria-labelledby={ "org-" (org.name) } {
                h2 id={ "org-" (org.name) } { "Org " (org.name) }
                p { a href={ "/orgs/" (seg(&org.name)) "/members" } { "Members of " (org.name) } }
                @if projects.is_empty() {
                    p { "No project you may open." }
                } @else {
                    ul {
                        @for p in projects {
                            li { a href={ "/orgs/" (seg(&org.name)) "/projects/" (seg(&p.name)) "/pools" } { (org.name) "/" (p.name) } }
                        }
                    }
                }
            }
        }
    };
    page(frame, "Your projects", content)
}

/// `…/pools`: the project's pools.
pub fn pools(frame: &Frame, current: &Current, view: &PoolsPage) -> String {
    let content = html! {
        h1 { "Pools" }
        (project_line(current))
        @if current.writes() {
            p {
                a href={ (current.url()) "/request" } { "Request a pool" } " · "
                a href={ (current.url()) "/apps" } { "Run an app" }
            }
        }
        @if view.pools.is_empty() {
            p { "No pools in this project yet." }
        } @else {
            table {
                caption.visually-hidden { "Pools of " (current.path()) }
                thead { tr {
                    th scope="col" { "Pool" } th scope="col" { "Provider" } th scope="col" { "Size" }
                    th scope="col" { "Shape" } th scope="col" { "Class" } th scope="col" { "OS" }
                    th scope="col" { "Nodes" }
                } }
                tbody {
                    @for p in &view.pools {
                        tr {
                            td { a href=(pool_url(current, &p.name)) { (p.name) } @if p.deleting { " (deleting)" } }
                            td { (p.provider) }
                            td { (p.size) }
                            td { (shape_text(p)) }
                            td { (p.class) }
                            td { (p.os) }
                            td { (counts_text(p)) }
                        }
                    }
                }
            }
        }
    };
    page(frame, "Pools", content)
}

fn counts_text(p: &PoolView) -> String {
    let n = &p.nodes;
    let mut parts = vec![format!("{} running", n.running)];
    for (count, word) in [
        (n.starting, "starting"),
        (n.parked, "parked"),
        (n.destroying, "ending"),
        (n.lost, "lost"),
    ] {
        if count > 0 {
            parts.push(format!("{count} {word}"));
        }
    }
    parts.join(", ")
}

/// The pool's price line, as its nodes are billed (`2 vCPU · 4 GiB · eu-central`).
pub fn price_line(pool: &PoolView) -> String {
    let shape = orc_common::Shape {
        vcpus: pool.shape.cpu,
        memory_gib: pool.shape.mem,
        arch: Default::default(),
        disks_gib: Vec::new(),
    };
    crate::pricing::price_line(&shape, pool.class.as_str())
}

fn agent_text(n: &NodeView) -> String {
    match &n.agent {
        Some(agent) if agent.connected => format!("{} (attached)", agent.state),
        Some(agent) => format!("{} (away)", agent.state),
        None => "no agent yet".to_string(),
    }
}

/// The nodes table and counts of a pool: the part of its page that updates live.
pub fn pool_progress(frame: &Frame, pool: &PoolView, nodes: &[NodeView]) -> Markup {
    let placed = frame.zone_member && nodes.iter().any(|n| n.placed.is_some());
    html! {
        p { "Size " strong { (pool.size) } " · nodes: " (counts_text(pool)) }
        @if let Some(parked) = &pool.parked {
            p.problem { "Waiting: " (parked.words.clone().unwrap_or_else(|| "the provider cannot place a node right now".into())) }
        }
        @if nodes.is_empty() {
            p { "No nodes." }
        } @else {
            table {
                caption.visually-hidden { "Nodes of " (pool.path) }
                thead { tr {
                    th scope="col" { "Slot" } th scope="col" { "Node" } th scope="col" { "State" }
                    th scope="col" { "Site" } th scope="col" { "Price line" } th scope="col" { "Price" }
                    th scope="col" { "Agent" } th scope="col" { "Progress" }
                    @if placed { th scope="col" { "Placed" } }
                } }
                tbody {
                    @for n in nodes {
                        tr {
                            td { (n.slot) }
                            td { a href={ (node_url(pool, &n.id)) } { code { (n.id) } } }
                            td {
                                (n.shown_state())
                                @if n.ingress { " · " abbr title="accepts public ingress: its proxy serves the project's domains and public ports" { "ingress" } }
                            }
                            td { (n.site.clone().unwrap_or_else(|| "-".into())) }
                            td { (price_line(pool)) }
                            td { (node_price(n)) }
                            td { (agent_text(n)) }
                            td { (n.words.clone().unwrap_or_default()) }
                            @if placed {
                                td { @if let Some(p) = &n.placed { (p.cloud) " " (p.location) " " (p.plan) } }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn events_table(events: &[EventView]) -> Markup {
    html! {
        @if events.is_empty() {
            p { "No events yet." }
        } @else {
            table {
                caption.visually-hidden { "Events" }
                thead { tr { th scope="col" { "When" } th scope="col" { "What" } th scope="col" { "Node" } th scope="col" { "Words" } } }
                tbody {
                    @for e in events {
                        tr {
                            td { (time(e.at)) @if e.repeats > 1 { " (" (e.repeats) "×)" } }
                            td { (e.kind) }
                            td { (e.node_id.clone().unwrap_or_default()) }
                            td { (e.words) }
                        }
                    }
                }
            }
        }
    }
}

/// `…/pools/<pool>`: one pool.
pub fn pool(frame: &Frame, current: &Current, view: &PoolPage) -> String {
    let p = &view.pool;
    let url = pool_url(current, &p.name);
    let content = html! {
        h1 { "Pool " (p.path) }
        (project_line(current))
        @if let Some(notice) = &view.notice { p.notice role="status" { (notice) } }
        dl.card {
            dt { "Provider" } dd { (p.provider) }
            dt { "Shape" } dd { (shape_text(p)) }
            dt { "Region class" } dd { (p.class) }
            dt { "OS" } dd { (p.os) }
            dt { "Public" } dd {
                @if p.public {
                    "yes"
                    @if let Some(a) = &p.address { " · address " code { (a.ipv4) } " at " (a.site) }
                } @else { "no" }
            }
            @if let Some(app) = &p.app {
                dt { "App" } dd { code { (app.package) } }
            }
            dt { "Generation" } dd { (p.generation) }
        }
        @if p.deleting {
            p.notice role="status" { "This pool is being deleted: its nodes are ending." }
        }
        h2 { "Nodes" }
        div #progress data-live={ (url) "/live" } aria-live="polite" {
            (pool_progress(frame, p, &view.nodes))
        }
        @if let Some(endpoints) = &view.endpoints {
            @if !endpoints.endpoints.is_empty() {
                h2 { "Endpoints" }
                ul {
                    @for e in &endpoints.endpoints {
                        li {
                            (e.name) " (" (e.protocol) " " (e.port) ")"
                            @if let Some(u) = &e.url { " · " a href=(u) { (u) } }
                        }
                    }
                }
            }
        }
        @if current.writes() && !p.deleting {
            h2 { "Change it" }
            form.card method="post" action={ (url) "/resize" } {
                label for="f-size" { "New size (nodes)" }
                input #f-size type="number" name="size" min="0" value=(view.resize_to)
                    aria-describedby=[described(&view.errors, "size")] required;
                (field_error(&view.errors, "size"))
                button type="submit" { "Resize" }
            }
            (other_errors(&view.errors, &["size"]))
            p {
                @if p.app.is_some() {
                    a href={ (url) "/reconfigure" } { "Reconfigure the app's params" } " · "
                }
                a href={ (url) "/delete" } { "Delete this pool" }
            }
        }
        h2 { "Events" }
        (events_table(&view.events))
        @if let Some(logs) = &view.logs {
            h2 { "Logs" }
            form method="get" action=(url) {
                label for="f-level" { "Least severe level shown" }
                select #f-level name="level" {
                    @for level in ["error", "warn", "info", "debug", "trace"] {
                        option value=(level) selected[view.log_level == level] { (level) }
                    }
                }
                button type="submit" { "Show" }
            }
            @if logs.is_empty() {
                p { "No kept lines at this level." }
            } @else {
                table {
                    caption.visually-hidden { "Log lines" }
                    thead { tr { th scope="col" { "When" } th scope="col" { "Slot" } th scope="col" { "Level" } th scope="col" { "Message" } } }
                    tbody {
                        @for line in logs {
                            tr { td { (time(line.at)) } td { (line.slot) } td { (line.level) } td { code { (line.message) } } }
                        }
                    }
                }
            }
        }
    };
    page(frame, &format!("Pool {}", p.path), content)
}

/// `…/pools/<pool>/delete`: the confirmation, naming the pool.
pub fn delete_confirm(frame: &Frame, current: &Current, pool: &PoolView) -> String {
    let url = pool_url(current, &pool.name);
    let content = html! {
        h1 { "Delete pool " (pool.path) "?" }
        (project_line(current))
        p { "Deleting pool " strong { (pool.path) } " ends its " (pool.size) " node(s); what runs on them is gone. This cannot be undone." }
        form.card method="post" action={ (url) "/delete" } {
            button.danger type="submit" { "Delete pool " (pool.path) }
        }
        p { a href=(url) { "Keep it" } }
    };
    page(frame, &format!("Delete pool {}", pool.path), content)
}

fn param_input(field: &ParamField, errors: &FieldErrors) -> Markup {
    let key = format!("params.{}", field.name);
    let id = field_id(&key);
    let help_id = format!("{id}-help");
    let error_id = described(errors, &key);
    let describedby = match &error_id {
        Some(e) => format!("{help_id} {e}"),
        None => help_id.clone(),
    };
    html! {
        div {
            label for=(id) {
                (field.name)
                @if field.required { " (required)" }
                @if field.json { " (JSON)" }
            }
            p.muted id=(help_id) {
                (field.help)
                @if let Some(default) = &field.default {
                    @if !field.help.is_empty() { " " }
                    "Default: " (default) "."
                }
                @if field.sensitive {
                    @if !field.help.is_empty() || field.default.is_some() { " " }
                    @if field.set { "Set; its value is never shown. Type a new one to replace it, or leave it empty to keep it." }
                    @else { "Not set. Write-only: once set, its value is never shown." }
                } @else if field.help.is_empty() && field.default.is_none() {
                    "Leave it empty for the app's default."
                }
            }
            @if field.sensitive {
                input id=(id) type="password" name=(key) autocomplete="off" value=""
                    aria-describedby=(describedby);
            } @else if field.json {
                textarea id=(id) name=(key) aria-describedby=(describedby) { (field.value) }
            } @else {
                input id=(id) type="text" name=(key) value=(field.value)
                    aria-describedby=(describedby);
            }
            (field_error(errors, &key))
        }
    }
}

/// `…/apps`: run an app in a pool on `core`, with its params as its manifest declares them.
pub fn app_pool(frame: &Frame, current: &Current, view: &super::model::AppPoolPage) -> String {
    let errors = &view.errors;
    let names: Vec<String> = view
        .params
        .iter()
        .map(|f| format!("params.{}", f.name))
        .collect();
    let mut named: Vec<&str> = names.iter().map(String::as_str).collect();
    named.extend(["app", "name", "size"]);
    let content = html! {
        h1 { "Run an app" }
        (project_line(current))
        @if !current.writes() {
            p.problem { "Running apps needs the member or owner role in " (current.path()) "." }
        } @else {
            (other_errors(errors, &named))
            form.card method="get" action={ (current.url()) "/apps" } {
                label for="f-app" { "App (package org/name:tag)" }
                select #f-app name="package" aria-describedby=[described(errors, "app")] {
                    option value="" selected[view.package.is_empty()] { "Choose one" }
                    @for p in &view.packages {
                        option value=(p) selected[&view.package == p] { (p) }
                    }
                }
                (field_error(errors, "app"))
                button type="submit" { "Show its params" }
            }
            @if !view.package.is_empty() {
                form.card method="post" action={ (current.url()) "/apps" } {
                    h2 { "Pool for " (view.package) }
                    @if !view.description.is_empty() { p { (view.description) } }
                    input type="hidden" name="package" value=(view.package);
                    label for="f-name" { "Pool name" }
                    input #f-name type="text" name="name" value=(view.name)
                        aria-describedby=[described(errors, "name")];
                    (field_error(errors, "name"))
                    label for="f-size" { "Slots" }
                    input #f-size type="text" inputmode="numeric" name="size" value=(view.size)
                        aria-describedby=[described(errors, "size")];
                    (field_error(errors, "size"))
                    h2 { "Params" }
                    @if view.params.is_empty() { p { "The app declares no params." } }
                    @for field in &view.params { (param_input(field, errors)) }
                    button type="submit" { "Run the app" }
                }
            }
        }
    };
    page(frame, "Run an app", content)
}

/// `…/pools/<pool>/reconfigure`: the pool form of an app pool.
pub fn reconfigure(frame: &Frame, current: &Current, view: &ReconfigurePage) -> String {
    let p = &view.pool;
    let url = pool_url(current, &p.name);
    let names: Vec<String> = view
        .params
        .iter()
        .map(|f| format!("params.{}", f.name))
        .collect();
    let mut named: Vec<&str> = names.iter().map(String::as_str).collect();
    named.extend(["new_name", "new_value"]);
    let content = html! {
        h1 { "Reconfigure pool " (p.path) }
        (project_line(current))
        @if let Some(app) = &p.app { p { "App " code { (app.package) } ". Its slots are replaced one at a time with the new params." } }
        (other_errors(&view.errors, &named))
        form.card method="post" action={ (url) "/reconfigure" } {
            input type="hidden" name="generation" value=(p.generation);
            @for field in &view.params { (param_input(field, &view.errors)) }
            h2 { "Add a param" }
            label for="f-new-name" { "Name" }
            input #f-new-name type="text" name="new_name" value=""
                aria-describedby=[described(&view.errors, "new_name")];
            (field_error(&view.errors, "new_name"))
            label for="f-new-value" { "Value" }
            textarea #f-new-value name="new_value"
                aria-describedby=[described(&view.errors, "new_value")] {}
            (field_error(&view.errors, "new_value"))
            fieldset {
                legend { "Kind" }
                input #f-new-plain type="radio" name="new_kind" value="plain" checked;
                label for="f-new-plain" { "plain" } " "
                input #f-new-sensitive type="radio" name="new_kind" value="sensitive";
                label for="f-new-sensitive" { "sensitive (write-only)" }
            }
            button type="submit" { "Apply the params" }
        }
        p { a href=(url) { "Back to the pool" } }
    };
    page(frame, &format!("Reconfigure pool {}", p.path), content)
}

fn quote_block(quote: &QuoteView) -> Markup {
    html! {
        @if quote.outcome == "offer" {
            div.card role="status" {
                h2 { "Quote" }
                p { "Price line: " strong { (quote.words) } }
                p { "Price per node: " strong { (quote.price.as_ref().map_or_else(|| "unpriced".to_string(), price)) } }
                @if let Some(site) = &quote.site { p { "Site: " (site) } }
            }
        } @else {
            div.problem role="status" {
                h2 { "No offer" }
                p { (quote.words) }
            }
        }
    }
}

/// `…/request`: the request wizard, one form that grows as it is filled in; it works with
/// JavaScript off (each step is a submit).
pub fn wizard(frame: &Frame, current: &Current, view: &WizardPage) -> String {
    let input = &view.input;
    let errors = &view.errors;
    let chosen = view.chosen();
    let fields = [
        "provider",
        "class",
        "shape.cpu",
        "shape.mem",
        "shape.disks",
        "os",
        "size",
        "name",
        "public",
        "placement.plan",
    ];
    let content = html! {
        h1 { "Request a pool" }
        (project_line(current))
        @if !current.writes() {
            p.problem { "Requesting pools needs the member or owner role in " (current.path()) "." }
        } @else {
            (other_errors(errors, &fields))
            form.card method="get" action={ (current.url()) "/request" } {
                fieldset {
                    legend { "1. Provider" }
                    @if view.providers.is_empty() {
                        p { "No provider is visible to this project." }
                    }
                    @for p in &view.providers {
                        div {
                            input type="radio" name="provider" id={ "provider-" (p.name) } value=(p.name)
                                checked[input.provider == p.name];
                            label for={ "provider-" (p.name) } {
                                (p.name)
                                @if p.scope == "zone" { " (Global)" }
                                @if p.catalog.is_none() { " · no catalog reported yet" }
                            }
                        }
                    }
                    (field_error(errors, "provider"))
                }
                @if let Some(provider) = chosen {
                    @if let Some(catalog) = &provider.catalog {
                        fieldset {
                            legend { "2. Region class" }
                            @for c in &catalog.classes {
                                div {
                                    input type="radio" name="class" id={ "class-" (c.id) } value=(c.id)
                                        checked[input.class == c.id];
                                    label for={ "class-" (c.id) } {
                                        (c.title)
                                        @if c.can_place { " · available" } @else { " · nothing to offer right now" }
                                    }
                                    @if !c.offerings.is_empty() {
                                        p.muted {
                                            "Shapes: "
                                            (c.offerings.iter().map(|o| format!("{}×{} GiB", o.cpu, o.mem)).collect::<Vec<_>>().join(", "))
                                        }
                                    }
                                }
                            }
                            (field_error(errors, "class"))
                        }
                    } @else {
                        p { "Provider " (provider.name) " has not reported what it offers yet: give its region class and OS by their ids." }
                        fieldset {
                            legend { "2. Region class" }
                            label for="f-class" { "Region class id" }
                            input #f-class type="text" name="class" value=(input.class)
                                aria-describedby=[described(errors, "class")];
                            (field_error(errors, "class"))
                        }
                    }
                    fieldset {
                        legend { "3. Shape" }
                        label for="f-shape-cpu" { "vCPUs" }
                        input #f-shape-cpu type="text" inputmode="numeric" name="cpu" value=(input.cpu)
                            aria-describedby=[described(errors, "shape.cpu")];
                        (field_error(errors, "shape.cpu"))
                        label for="f-shape-mem" { "Memory (GiB)" }
                        input #f-shape-mem type="text" inputmode="numeric" name="mem" value=(input.mem)
                            aria-describedby=[described(errors, "shape.mem")];
                        (field_error(errors, "shape.mem"))
                        label for="f-shape-disks" { "Extra disks (GiB each, comma separated; empty for none)" }
                        input #f-shape-disks type="text" name="disks" value=(input.disks)
                            aria-describedby=[described(errors, "shape.disks")];
                        (field_error(errors, "shape.disks"))
                        @let plans = chosen_plans(provider, &input.class);
                        @if !plans.is_empty() {
                            label for="f-plan" { "Plan (the provider's own name for a shape)" }
                            select #f-plan name="plan" aria-describedby=[described(errors, "placement.plan")] {
                                option value="" selected[input.plan.is_empty()] { "Any that fits" }
                                @for (plan, words) in &plans {
                                    option value=(plan) selected[&input.plan == plan] { (plan) " · " (words) }
                                }
                            }
                            (field_error(errors, "placement.plan"))
                        }
                    }
                    fieldset {
                        legend { "4. Operating system" }
                        label for="f-os" { "OS" }
                        @if let Some(catalog) = &provider.catalog {
                            select #f-os name="os" aria-describedby=[described(errors, "os")] {
                                option value="" selected[input.os.is_empty()] { "Choose one" }
                                @for os in &catalog.os {
                                    option value=(os.id) selected[input.os == os.id] { (os.title) }
                                }
                                @if !input.os.is_empty() && !catalog.os.iter().any(|o| o.id == input.os) {
                                    option value=(input.os) selected { (input.os) " (not offered)" }
                                }
                            }
                        } @else {
                            input #f-os type="text" name="os" value=(input.os)
                                aria-describedby=[described(errors, "os")];
                        }
                        (field_error(errors, "os"))
                    }
                    fieldset {
                        legend { "5. Size and access" }
                        label for="f-size" { "Nodes" }
                        input #f-size type="text" inputmode="numeric" name="size" value=(input.size)
                            aria-describedby=[described(errors, "size")];
                        (field_error(errors, "size"))
                        div {
                            input #f-public type="checkbox" name="public" value="on" checked[input.is_public()];
                            label for="f-public" { "Public: one public IPv4 for the pool, served by all its nodes" }
                        }
                        label for="f-name" { "Pool name" }
                        input #f-name type="text" name="name" value=(input.name)
                            aria-describedby=[described(errors, "name")];
                        (field_error(errors, "name"))
                    }
                    button type="submit" name="quote" value="1" { "Get a quote" }
                } @else {
                    button type="submit" { "Next" }
                }
            }
            @if let Some(quote) = &view.quote { (quote_block(quote)) }
            @if let Some(problem) = &view.quote_problem { p.problem role="status" { (problem) } }
            @if view.quote.as_ref().is_some_and(|q| q.outcome == "offer") {
                form.card method="post" action={ (current.url()) "/request" } {
                    @for (name, value) in [("provider", &input.provider), ("class", &input.class),
                        ("cpu", &input.cpu), ("mem", &input.mem), ("disks", &input.disks),
                        ("os", &input.os), ("size", &input.size), ("name", &input.name),
                        ("public", &input.public), ("plan", &input.plan)] {
                        input type="hidden" name=(name) value=(value);
                    }
                    p { "Request pool " strong { (current.path()) "/" (input.name) } " with " (input.size) " node(s) at this price line." }
                    button type="submit" { "Request the pool" }
                }
            }
        }
    };
    page(frame, "Request a pool", content)
}

fn provider_card(current: &Current, card: &ProviderCard, operator: bool) -> Markup {
    let p = &card.provider;
    let base = format!("{}/providers/{}", current.url(), seg(&p.name));
    let id = format!("provider-{}", p.name);
    html! {
        section.card aria-labelledby=(id) {
            h2 id=(id) { (p.name) }
            dl {
                dt { "Scope" } dd { @if p.scope == "zone" { "Global (every project of the zone)" } @else { "Project " (p.project) } }
                dt { "Replicas" } dd { (p.replicas_words()) }
                dt { "Resource URI" } dd { code { (p.resource_uri) } }
                dt { "Pricing" } dd {
                    @match (&p.pricing.markup, p.pricing.priced) {
                        (Some(m), _) => { "markup " (m) " (prices include it)" }
                        (None, true) => "priced by its operator (prices include its markup)",
                        (None, false) => "unpriced: its nodes carry no price",
                    }
                }
            }
            @if !card.sites.is_empty() {
                table {
                    caption { "Sites of " (p.name) }
                    thead { tr {
                        th scope="col" { "Site" } th scope="col" { "Stable IPv4" }
                        th scope="col" { "Nodes" } th scope="col" { "Gateway" } th scope="col" { "Open" }
                    } }
                    tbody {
                        @for site in &card.sites {
                            tr {
                                td { (site.site) }
                                td { (site.public_ipv4.clone().unwrap_or_else(|| "-".into())) }
                                td { (site.tenant_nodes) }
                                td { (site.gateway.clone().unwrap_or_else(|| "none".into())) }
                                td { @if site.reported { "yes" } @else { "not reported" } }
                            }
                        }
                    }
                }
            }
            @if card.home && current.owns() {
                form method="post" action={ (base) "/scope" } {
                    fieldset {
                        legend { "Visibility" }
                        input type="radio" name="scope" value="project" id={ (id) "-scope-project" } checked[p.scope == "project"];
                        label for={ (id) "-scope-project" } { "This project" } " "
                        input type="radio" name="scope" value="zone" id={ (id) "-scope-zone" } checked[p.scope == "zone"]
                            disabled[!operator && p.scope != "zone"];
                        label for={ (id) "-scope-zone" } { "Global" }
                        @if !operator { p.muted { "Only the zone's operators make a provider Global." } }
                    }
                    (field_error(&card.errors, "scope"))
                    button type="submit" { "Change the scope" }
                }
                form method="post" action={ (base) "/pricing" } {
                    label for={ (id) "-markup" } { "Markup (a fraction: 0 sells at cost, 0.15 adds 15 %; empty for no strategy)" }
                    input type="text" id={ (id) "-markup" } name="markup" value=(p.pricing.markup.clone().unwrap_or_default())
                        aria-describedby={ (id) "-markup-note" };
                    p.muted id={ (id) "-markup-note" } { "A strategy applies to nodes admitted after the change; nodes already running keep the price they were admitted at." }
                    (field_error(&card.errors, "markup"))
                    button type="submit" { "Set the pricing strategy" }
                }
            }
        }
    }
}

/// `…/providers`: the Resource Providers page.
pub fn providers(frame: &Frame, current: &Current, view: &ProvidersPage) -> String {
    let content = html! {
        h1 { "Resource Providers" }
        (project_line(current))
        @if let Some(notice) = &view.notice { p.notice role="status" { (notice) } }
        @if view.cards.is_empty() { p { "No provider is visible to this project." } }
        @for card in &view.cards { (provider_card(current, card, view.operator)) }
    };
    page(frame, "Resource Providers", content)
}

/// `…/usage`: node-hours and price lines of a month.
pub fn usage(frame: &Frame, current: &Current, view: &UsagePage) -> String {
    let u = &view.usage;
    let base = format!("{}/usage", current.url());
    let content = html! {
        h1 { "Usage of " (current.path()) " in " (u.month) }
        (project_line(current))
        p {
            a href={ (base) "?month=" (view.previous) } { "Previous month (" (view.previous) ")" } " · "
            a href={ (base) "?month=" (view.next) } { "Next month (" (view.next) ")" }
        }
        p { "Node-hours this month: " strong { (view.node_hours) } }
        h2 { "Priced" }
        @if u.lines.is_empty() {
            p { "No priced usage this month." }
        } @else {
            table {
                caption.visually-hidden { "Priced usage" }
                thead { tr {
                    th scope="col" { "Pool" } th scope="col" { "Price line" } th scope="col" { "Node" }
                    th scope="col" { "Hours" } th scope="col" { "Rate" } th scope="col" { "Amount" }
                } }
                tbody {
                    @for line in &u.lines {
                        tr {
                            td { (line.pool.clone().unwrap_or_else(|| "(deleted)".into())) }
                            td { (line.description) }
                            td { (line.node_id.clone().unwrap_or_default()) }
                            td { (decimal_text(&line.hours)) @if line.accruing { " so far" } }
                            td { (price(&line.rate)) }
                            td { (decimal_text(&line.amount)) " " (line.rate.currency) }
                        }
                    }
                }
            }
            @for (currency, total) in &u.totals {
                p { "Total: " strong { (decimal_text(total)) " " (currency) } }
            }
        }
        h2 { "Unpriced" }
        @if view.unpriced.is_empty() {
            p { "No unpriced node ran this month." }
        } @else {
            p { "These nodes ran on a provider with no pricing strategy: they have no price at all, which is not a price of zero." }
            table {
                caption.visually-hidden { "Unpriced nodes" }
                thead { tr { th scope="col" { "Pool" } th scope="col" { "Price line" } th scope="col" { "Node" } th scope="col" { "Hours" } th scope="col" { "Price" } } }
                tbody {
                    @for n in &view.unpriced {
                        tr {
                            td { (n.pool) } td { (n.line) } td { (n.node) }
                            td { (n.hours) @if n.running { " so far" } }
                            td { "unpriced" }
                        }
                    }
                }
            }
        }
    };
    page(frame, &format!("Usage {}", u.month), content)
}

/// `/orgs/<org>/members`: who holds which role.
pub fn members(frame: &Frame, view: &MembersPage) -> String {
    let base = format!("/orgs/{}/members", seg(&view.org));
    let content = html! {
        h1 { "Members of " (view.org) }
        @if let Some(notice) = &view.notice { p.notice role="status" { (notice) } }
        p.muted { "Owners manage members and providers; members also change pools; viewers see and change nothing." }
        (other_errors(&view.errors, &["user", "role", "project"]))
        table {
            caption.visually-hidden { "Memberships" }
            thead { tr { th scope="col" { "User" } th scope="col" { "Where" } th scope="col" { "Role" }
                @if view.manages { th scope="col" { "Remove" } } } }
            tbody {
                @for m in &view.memberships {
                    tr {
                        td { (m.user) }
                        td { @match &m.project { Some(p) => { "project " (p) }, None => { "the whole org" } } }
                        td { (m.role) }
                        @if view.manages {
                            td {
                                form method="post" action={ (base) "/" (seg(&m.id)) "/remove" } {
                                    button.danger type="submit" { "Remove " (m.user) " as " (m.role) }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if view.manages {
            form.card method="post" action=(base) {
                h2 { "Grant a role" }
                label for="f-user" { "User name" }
                input #f-user type="text" name="user" aria-describedby=[described(&view.errors, "user")];
                (field_error(&view.errors, "user"))
                label for="f-role" { "Role" }
                select #f-role name="role" {
                    option value="viewer" { "viewer" }
                    option value="member" { "member" }
                    option value="owner" { "owner" }
                }
                (field_error(&view.errors, "role"))
                label for="f-project" { "Where" }
                select #f-project name="project" {
                    option value="" { "the whole org" }
                    @for p in &view.projects { option value=(p) { "project " (p) } }
                }
                (field_error(&view.errors, "project"))
                button type="submit" { "Grant" }
            }
        }
    };
    page(frame, &format!("Members of {}", view.org), content)
}

/// `/tokens`: the person's API tokens; a new token's value once.
pub fn tokens(frame: &Frame, view: &TokensPage) -> String {
    let content = html! {
        h1 { "API tokens of " (view.user) }
        @if let Some(notice) = &view.notice { p.notice role="status" { (notice) } }
        @if let Some((token, value)) = &view.created {
            div.card role="status" {
                h2 { "Token " (token.label) " made" }
                p { "Copy it now: this is the only time it is shown." }
                p.secret { (value) }
            }
        }
        (other_errors(&view.errors, &["label"]))
        @if view.tokens.is_empty() {
            p { "No tokens." }
        } @else {
            table {
                caption.visually-hidden { "Tokens" }
                thead { tr { th scope="col" { "Label" } th scope="col" { "Id" } th scope="col" { "Made" }
                    th scope="col" { "State" } th scope="col" { "Revoke" } } }
                tbody {
                    @for t in &view.tokens {
                        tr {
                            td { (t.label) }
                            td { code { (t.id) } }
                            td { (time(t.created_at)) }
                            td { @if let Some(at) = t.revoked_at { "revoked " (time(at)) } @else { "active" } }
                            td {
                                @if t.revoked_at.is_none() {
                                    form method="post" action={ "/tokens/" (seg(&t.id)) "/revoke" } {
                                        button.danger type="submit" { "Revoke " (t.label) }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        form.card method="post" action="/tokens" {
            h2 { "Make a token" }
            label for="f-label" { "Label (where it will be used: laptop, ci)" }
            input #f-label type="text" name="label" aria-describedby=[described(&view.errors, "label")];
            (field_error(&view.errors, "label"))
            button type="submit" { "Make the token" }
        }
    };
    page(frame, "API tokens", content)
}

/// One node: its state, its join tokens, and forms to mint one and to run a command.
pub fn node(frame: &Frame, current: &Current, view: &NodePage) -> String {
    let n = &view.node;
    let errors = &view.errors;
    let base = format!("{}/nodes/{}", pool_url(current, &view.pool), seg(&n.id));
    let content = html! {
        h1 { "Node " code { (n.id) } }
        p { "Slot " (n.slot) " of pool " a href=(pool_url(current, &view.pool)) { (current.path()) "/" (view.pool) } }
        dl.card {
            dt { "State" } dd { (n.shown_state()) }
            dt { "Site" } dd { (n.site.clone().unwrap_or_else(|| "-".into())) }
            dt { "Private address" } dd { (n.private_address.clone().unwrap_or_else(|| "-".into())) }
            dt { "Price" } dd { (node_price(n)) }
            dt { "Agent" } dd { (agent_text(n)) }
            @if let Some(words) = &n.words { dt { "Progress" } dd { (words) } }
            @if frame.zone_member {
                @if let Some(p) = &n.placed { dt { "Placed" } dd { (p.cloud) " " (p.location) " " (p.plan) } }
            }
        }
        (other_errors(errors, &["command", "timeout", "ttl", "product_uuid"]))
        @if let Some(created) = &view.created {
            section.card role="status" aria-labelledby="created-token" {
                h2 #created-token { "Join token " code { (created.token.id) } }
                p { "Shown this once: copy it now. It admits this node's agent until it is used or expires." }
                pre { code { (created.secret) } }
                p { "On the node: " code { "orc agent --zone " (created.endpoint) " --node " (n.id) " --join-token-file FILE" } }
            }
        }
        @if let Some(exec) = &view.exec {
            section.card role="status" aria-labelledby="exec-result" {
                h2 #exec-result { "Ran " code { (exec.argv.join(" ")) } }
                p {
                    @match (exec.code, &exec.error) {
                        (Some(code), _) => { "Exit code " (code) "." }
                        (None, Some(error)) => { "It did not run to its end: " (error) }
                        (None, None) => { "It ended without an exit code." }
                    }
                    @if exec.truncated { " Output past 64 KiB is left out." }
                }
                @if !exec.stdout.is_empty() { h3 { "Standard output" } pre { (exec.stdout) } }
                @if !exec.stderr.is_empty() { h3 { "Standard error" } pre { (exec.stderr) } }
            }
        }
        @if current.writes() {
            form.card method="post" action={ (base) "/exec" } {
                h2 { "Run a command" }
                p.muted { "The program and its arguments, separated by spaces; no shell reads them. It runs on the node's agent." }
                label for="f-command" { "Command" }
                input #f-command type="text" name="command" value=(view.command)
                    aria-describedby=[described(errors, "command")];
                (field_error(errors, "command"))
                label for="f-timeout" { "Timeout (seconds)" }
                input #f-timeout type="text" inputmode="numeric" name="timeout" value=(view.timeout)
                    aria-describedby=[described(errors, "timeout")];
                (field_error(errors, "timeout"))
                button type="submit" { "Run" }
            }
            form.card method="post" action={ (base) "/join-token" } {
                h2 { "Mint a join token" }
                p.muted { "For an agent that has to join again (its machine was reinstalled, say). A new token revokes the node's live ones." }
                label for="f-ttl" { "Lasts (seconds)" }
                input #f-ttl type="text" inputmode="numeric" name="ttl" value=(view.ttl)
                    aria-describedby=[described(errors, "ttl")];
                (field_error(errors, "ttl"))
                button type="submit" { "Mint" }
            }
        } @else {
            p { "Running commands and minting join tokens needs the member or owner role in " (current.path()) "." }
        }
        @if !view.tokens.is_empty() {
            table {
                caption { "Join tokens" }
                thead { tr { th scope="col" { "Token" } th scope="col" { "State" } th scope="col" { "Minted by" } } }
                tbody {
                    @for t in &view.tokens {
                        tr { td { code { (t.id) } } td { (t.state) } td { (t.created_by) } }
                    }
                }
            }
        }
    };
    page(frame, &format!("Node {}", n.id), content)
}

/// The wg-quick file of a workstation just connected, with a line for the private key only
/// the workstation holds.
pub fn wg_quick_text(connected: &orc_zone_api_types::views::ConnectedWorkstation) -> String {
    let mut text = format!(
        "[Interface]\nPrivateKey = <the private key whose public half you gave>\nAddress = {}\nMTU = 1340\n",
        connected.interface_address
    );
    for peer in &connected.peers {
        text.push_str(&format!(
            "\n[Peer]\n# {}\nPublicKey = {}\n",
            peer.name, peer.public_key
        ));
        if let Some(endpoint) = &peer.endpoint {
            text.push_str(&format!("Endpoint = {endpoint}\n"));
        }
        text.push_str(&format!("AllowedIPs = {}\n", peer.allowed_ips.join(", ")));
        if let Some(keepalive) = peer.keepalive_seconds {
            text.push_str(&format!("PersistentKeepalive = {keepalive}\n"));
        }
    }
    text
}

/// A project's mesh and the form that connects a workstation.
pub fn mesh(frame: &Frame, current: &Current, view: &MeshPage) -> String {
    let m = &view.mesh;
    let errors = &view.errors;
    let url = format!("{}/mesh", current.url());
    let content = html! {
        h1 { "Mesh of " (current.path()) }
        p {
            @match &m.prefix {
                Some(prefix) => { "Addresses in " code { (prefix) } ". A peer counts as up after a handshake within " (m.handshake_window_seconds) " s." }
                None => { "The project has no mesh member yet." }
            }
        }
        @if !m.members.is_empty() {
            table {
                caption.visually-hidden { "Members of the mesh of " (current.path()) }
                thead { tr {
                    th scope="col" { "Name" } th scope="col" { "Kind" } th scope="col" { "Address" }
                    th scope="col" { "Pool" } th scope="col" { "State" } th scope="col" { "Peers up" }
                    @if current.writes() { th scope="col" { span.visually-hidden { "Actions" } } }
                } }
                tbody {
                    @for member in &m.members {
                        tr {
                            td { (member.name) }
                            td { (member.kind) }
                            td { code { (member.address) } }
                            td { (member.pool.clone().unwrap_or_default()) }
                            td {
                                (member.state)
                                @if let Some(e) = &member.apply_error { " · " (e) }
                            }
                            td { (member.peers_up.map_or_else(|| "-".to_string(), |up| format!("{up} of {}", member.peers))) }
                            @if current.writes() {
                                td {
                                    @if member.kind == "workstation" {
                                        form method="post" action={ (url) "/workstations/" (seg(&member.name)) "/remove" } {
                                            button type="submit" { "Disconnect " (member.name) }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        (other_errors(errors, &["name", "public_key"]))
        @if let Some(connected) = &view.connected {
            section.card role="status" aria-labelledby="connected" {
                h2 #connected { "Workstation " (connected.workstation.name) " is on the mesh at " code { (connected.workstation.address) } }
                p { "Save this as a wg-quick file, put your private key in it, and bring it up (" code { "sudo wg-quick up ./file.conf" } ")." }
                pre { (wg_quick_text(connected)) }
            }
        }
        @if current.writes() {
            form.card method="post" action=(url) {
                h2 { "Connect a workstation" }
                p.muted { "Make a key pair where the workstation is (" code { "wg genkey | tee key | wg pubkey" } ") and give its public half here: the private one never leaves that machine." }
                label for="f-name" { "Workstation name" }
                input #f-name type="text" name="name" value=(view.name)
                    aria-describedby=[described(errors, "name")];
                (field_error(errors, "name"))
                label for="f-public-key" { "WireGuard public key (base64)" }
                input #f-public-key type="text" name="public_key" value=(view.public_key)
                    aria-describedby=[described(errors, "public_key")];
                (field_error(errors, "public_key"))
                button type="submit" { "Connect" }
            }
        } @else {
            p { "Connecting workstations needs the member or owner role in " (current.path()) "." }
        }
    };
    page(frame, &format!("Mesh of {}", current.path()), content)
}
