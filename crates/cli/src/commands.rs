//! The verbs that talk to a zone's API. Each prints a table for people or, with `--json`,
//! the API's JSON unchanged (pretty-printed) for scripts.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use orc_zone::api::LogLineView;
use orc_zone::api::views::{
    EventView, NodeView, OrgView, PoolView, ProjectView, ProviderView, QuoteView, SiteView,
    UsageView,
};
use serde_json::json;

use crate::ConnArgs;
use crate::client::{Client, segment};
use crate::table::{Table, fields};

/// The default API URL when nothing else names one.
const DEFAULT_URL: &str = "http://127.0.0.1:7070";

fn data_dir() -> PathBuf {
    orc_zone::zone::default_data_dir()
}

fn read_trimmed(path: &std::path::Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
}

/// The client for `conn`: URL from `--url`/`ORC_URL`, else `<data dir>/zone-url`, else the
/// default; token from `--token`/`ORC_TOKEN`, else `<data dir>/admin-token`.
pub fn client(conn: &ConnArgs) -> Client {
    let dir = data_dir();
    let url = conn
        .url
        .clone()
        .or_else(|| read_trimmed(&dir.join(orc_zone::zone::ZONE_URL_FILE)))
        .unwrap_or_else(|| DEFAULT_URL.to_string());
    let token = conn
        .token
        .clone()
        .or_else(|| read_trimmed(&dir.join(orc_zone::zone::ADMIN_TOKEN_FILE)));
    Client::new(&url, token)
}

/// `ORG/PROJECT`.
fn project_path(text: &str) -> anyhow::Result<(String, String)> {
    match text.split('/').collect::<Vec<_>>().as_slice() {
        [org, project] if !org.is_empty() && !project.is_empty() => {
            Ok((org.to_string(), project.to_string()))
        }
        _ => bail!("{text:?} is not ORG/PROJECT"),
    }
}

/// `ORG/PROJECT/NAME`, or `ORG/NAME` for the org's project of the same name (`sys/partner`
/// is pool `partner` of project `sys/sys`).
pub fn object_path(text: &str, what: &str) -> anyhow::Result<(String, String, String)> {
    match text.split('/').collect::<Vec<_>>().as_slice() {
        [org, project, name] if [org, project, name].iter().all(|s| !s.is_empty()) => {
            Ok((org.to_string(), project.to_string(), name.to_string()))
        }
        [org, name] if !org.is_empty() && !name.is_empty() => {
            Ok((org.to_string(), org.to_string(), name.to_string()))
        }
        _ => bail!("{text:?} is not ORG/PROJECT/{what} (or ORG/{what})"),
    }
}

fn project_url(org: &str, project: &str) -> String {
    format!("/api/orgs/{}/projects/{}", segment(org), segment(project))
}

fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

fn shape_text(p: &PoolView) -> String {
    let mut text = format!("{} vCPU · {} GiB", p.shape.cpu, p.shape.mem);
    if let Some(arch) = &p.shape.arch
        && arch != "x86_64"
    {
        text.push_str(&format!(" · {arch}"));
    }
    for d in &p.shape.disks {
        text.push_str(&format!(" · +{d} GiB"));
    }
    text
}

/// The class, with a direct placement after it: `fsn1 · plan=cx23`.
fn class_text(p: &PoolView) -> String {
    let mut text = p.class.clone();
    for (key, value) in &p.placement {
        text.push_str(&format!(" · {key}={value}"));
    }
    text
}

fn pools_table(pools: &[PoolView]) -> String {
    let mut t = Table::new(&[
        "POOL", "PROVIDER", "SIZE", "RUNNING", "STARTING", "PARKED", "SHAPE", "CLASS", "OS",
        "STATUS",
    ]);
    for p in pools {
        t.row(vec![
            p.path.clone(),
            p.provider.clone(),
            p.size.to_string(),
            p.nodes.running.to_string(),
            p.nodes.starting.to_string(),
            p.nodes.parked.to_string(),
            shape_text(p),
            class_text(p),
            p.os.clone(),
            if p.deleting { "deleting" } else { "" }.to_string(),
        ]);
    }
    t.render()
}

/// `orc pools [ORG/PROJECT]`.
pub async fn pools(conn: &ConnArgs, project: Option<&str>) -> anyhow::Result<()> {
    let client = client(conn);
    let mut all: Vec<PoolView> = Vec::new();
    match project {
        Some(p) => {
            let (org, project) = project_path(p)?;
            all = client
                .get(&format!("{}/pools", project_url(&org, &project)))
                .await?;
        }
        None => {
            let orgs: Vec<OrgView> = client.get("/api/orgs").await?;
            for org in orgs {
                let projects: Vec<ProjectView> = client
                    .get(&format!("/api/orgs/{}/projects", segment(&org.name)))
                    .await?;
                for project in projects {
                    let pools: Vec<PoolView> = client
                        .get(&format!("{}/pools", project_url(&org.name, &project.name)))
                        .await?;
                    all.extend(pools);
                }
            }
        }
    }
    if conn.json {
        return print_json(&all);
    }
    if all.is_empty() {
        println!("No pools.");
        return Ok(());
    }
    print!("{}", pools_table(&all));
    Ok(())
}

/// Arguments of `orc pool create`.
#[derive(Debug, Args)]
pub struct CreatePoolArgs {
    /// ORG/PROJECT/NAME
    pub pool: String,
    /// Provider name (visible to the project).
    #[arg(long)]
    pub provider: String,
    /// Region class (eu-central); for a provider of one cloud, the cloud location (fsn1).
    #[arg(long, visible_alias = "location")]
    pub class: String,
    /// Exact plan of a provider of one cloud (cx23); sets placement plan=PLAN.
    #[arg(long)]
    pub plan: Option<String>,
    /// Provider-specific placement KEY=VALUE (repeat for more).
    #[arg(long = "placement", value_parser = parse_param)]
    pub placement: Vec<(String, String)>,
    /// vCPUs per node.
    #[arg(long)]
    pub cpu: u32,
    /// Memory per node, GiB.
    #[arg(long)]
    pub mem: u32,
    /// Architecture: x86_64 or arm64.
    #[arg(long)]
    pub arch: Option<String>,
    /// Extra disk, GiB (repeat for more).
    #[arg(long = "disk")]
    pub disks: Vec<u32>,
    /// OS id (debian-12).
    #[arg(long)]
    pub os: String,
    /// Number of nodes.
    #[arg(long)]
    pub size: u32,
    /// Give the pool a public address.
    #[arg(long)]
    pub public: bool,
    /// App package the nodes run (org/name:tag).
    #[arg(long)]
    pub app: Option<String>,
    /// App param NAME=VALUE (repeat for more). Shown to the project's viewers.
    #[arg(long = "param", value_parser = parse_param)]
    pub params: Vec<(String, String)>,
    /// Sensitive app param (an API key): NAME=@FILE reads the value from FILE, NAME=- from
    /// standard input, NAME=VALUE takes it as given (then it shows in the process list and
    /// shell history). Never shown again, never in the app's environment (repeat for more).
    #[arg(long = "sensitive", value_parser = parse_sensitive, value_name = "NAME=@FILE")]
    pub sensitive: Vec<SensitiveParam>,
    /// Wait until every node runs, with a progress bar.
    #[arg(long)]
    pub wait: bool,
    /// Give up waiting after this many seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
}

/// The placement object of `--placement K=V` and `--plan P`; `--plan` wins over a
/// `--placement plan=…`.
fn placement(pairs: Vec<(String, String)>, plan: Option<String>) -> BTreeMap<String, String> {
    let mut placement: BTreeMap<String, String> = pairs.into_iter().collect();
    if let Some(plan) = plan {
        placement.insert("plan".to_string(), plan);
    }
    placement
}

fn parse_param(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("{text:?} is not NAME=VALUE"))
}

/// Where a sensitive param's value comes from.
#[derive(Clone, PartialEq, Eq)]
pub enum SensitiveSource {
    Inline(String),
    File(PathBuf),
    Stdin,
}

/// One `--sensitive NAME=…`. Its `Debug` never shows an inline value.
#[derive(Clone, PartialEq, Eq)]
pub struct SensitiveParam {
    pub name: String,
    pub source: SensitiveSource,
}

impl std::fmt::Debug for SensitiveParam {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let source = match &self.source {
            SensitiveSource::Inline(_) => "<inline>".to_string(),
            SensitiveSource::File(path) => format!("@{}", path.display()),
            SensitiveSource::Stdin => "-".to_string(),
        };
        write!(f, "{}={source}", self.name)
    }
}

/// Parses `NAME=@FILE`, `NAME=-` or `NAME=VALUE`; the error never repeats the value.
pub fn parse_sensitive(text: &str) -> Result<SensitiveParam, String> {
    let Some((name, value)) = text.split_once('=') else {
        return Err("a sensitive param is NAME=@FILE, NAME=- or NAME=VALUE".to_string());
    };
    if name.is_empty() {
        return Err("a sensitive param needs a NAME before the =".to_string());
    }
    let source = if value == "-" {
        SensitiveSource::Stdin
    } else if let Some(path) = value.strip_prefix('@') {
        if path.is_empty() {
            return Err(format!("sensitive param {name}: give a file after the @"));
        }
        SensitiveSource::File(path.into())
    } else {
        SensitiveSource::Inline(value.to_string())
    };
    Ok(SensitiveParam {
        name: name.to_string(),
        source,
    })
}

/// Reads every sensitive param's value: a file's or standard input's text without its
/// final line break. At most one may come from standard input.
pub fn read_sensitive(params: Vec<SensitiveParam>) -> anyhow::Result<BTreeMap<String, String>> {
    let from_stdin = params
        .iter()
        .filter(|p| p.source == SensitiveSource::Stdin)
        .count();
    if from_stdin > 1 {
        bail!("only one sensitive param can be read from standard input (NAME=-)");
    }
    let mut values = BTreeMap::new();
    for param in params {
        let value = match param.source {
            SensitiveSource::Inline(value) => value,
            SensitiveSource::File(path) => std::fs::read_to_string(&path).with_context(|| {
                format!(
                    "cannot read sensitive param {} from {}",
                    param.name,
                    path.display()
                )
            })?,
            SensitiveSource::Stdin => {
                let mut text = String::new();
                std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).with_context(
                    || {
                        format!(
                            "cannot read sensitive param {} from standard input",
                            param.name
                        )
                    },
                )?;
                text
            }
        };
        let value = value.strip_suffix('\n').unwrap_or(&value);
        let value = value.strip_suffix('\r').unwrap_or(value).to_string();
        if value.is_empty() {
            bail!("sensitive param {} is empty", param.name);
        }
        if values.insert(param.name.clone(), value).is_some() {
            bail!("sensitive param {} is given twice", param.name);
        }
    }
    Ok(values)
}

/// `orc pool create`.
pub async fn pool_create(conn: &ConnArgs, args: CreatePoolArgs) -> anyhow::Result<()> {
    let client = client(conn);
    let (org, project, name) = object_path(&args.pool, "NAME")?;
    let params: BTreeMap<String, String> = args.params.into_iter().collect();
    let sensitive = read_sensitive(args.sensitive)?;
    let body = json!({
        "name": name,
        "provider": args.provider,
        "size": args.size,
        "shape": {"cpu": args.cpu, "mem": args.mem, "arch": args.arch, "disks": args.disks},
        "class": args.class,
        "os": args.os,
        "public": args.public,
        "app": args.app,
        "params": params,
        "sensitive_params": sensitive,
        "placement": placement(args.placement, args.plan),
    });
    let pool: PoolView = client
        .post(&format!("{}/pools", project_url(&org, &project)), &body)
        .await?;
    if !args.wait {
        if conn.json {
            return print_json(&pool);
        }
        println!("Created pool {} with {} node(s).", pool.path, pool.size);
        return Ok(());
    }
    let pool = wait_for_nodes(
        &client,
        &org,
        &project,
        &name,
        pool.size,
        args.timeout,
        conn.json,
    )
    .await?;
    if conn.json {
        return print_json(&pool);
    }
    println!(
        "Pool {} is up: {} of {} node(s) running.",
        pool.path, pool.nodes.running, pool.size
    );
    Ok(())
}

/// Polls the pool until `size` nodes run, showing a progress bar (hidden when stderr is not
/// a terminal or with `--json`).
async fn wait_for_nodes(
    client: &Client,
    org: &str,
    project: &str,
    name: &str,
    size: u32,
    timeout: u64,
    quiet: bool,
) -> anyhow::Result<PoolView> {
    let url = format!("{}/pools/{}", project_url(org, project), segment(name));
    let bar = if quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(u64::from(size))
    };
    if let Ok(style) = ProgressStyle::with_template("{bar:30} {pos}/{len} running  {msg}") {
        bar.set_style(style);
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
    let events_url = format!("{}/events", project_url(org, project));
    let mut last_event: Option<String> = None;
    let mut progress: Option<String> = None;
    loop {
        let pool: PoolView = client.get(&url).await?;
        bar.set_position(u64::from(pool.nodes.running));
        let mut msg = format!(
            "{} starting, {} parked",
            pool.nodes.starting, pool.nodes.parked
        );
        if pool.nodes.starting > 0 {
            // The newest progress note of the pool's deploys ("creating the machine").
            let mut query = format!("{events_url}?pool={}&limit=1000", segment(name));
            if let Some(after) = &last_event {
                query.push_str(&format!("&after={}", segment(after)));
            }
            let events: Vec<EventView> = client.get(&query).await?;
            for event in &events {
                if event.kind == "node.progress" {
                    progress = Some(event.words.clone());
                }
            }
            if let Some(newest) = events.last() {
                last_event = Some(newest.id.clone());
            }
            if let Some(words) = &progress {
                msg.push_str(&format!(" · {words}"));
            }
        }
        if pool.nodes.parked > 0 {
            let nodes: Vec<NodeView> = client.get(&format!("{url}/nodes")).await?;
            if let Some(words) = nodes
                .iter()
                .find(|n| n.state == "parked")
                .and_then(|n| n.words.clone())
            {
                msg.push_str(&format!(": {words}"));
            }
        }
        bar.set_message(msg);
        if pool.nodes.running >= size {
            bar.finish_and_clear();
            return Ok(pool);
        }
        if tokio::time::Instant::now() >= deadline {
            bar.abandon();
            bail!(
                "gave up after {timeout} s: {} of {size} node(s) running",
                pool.nodes.running
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// `orc pool resize`.
pub async fn pool_resize(conn: &ConnArgs, pool: &str, size: u32) -> anyhow::Result<()> {
    let client = client(conn);
    let (org, project, name) = object_path(pool, "POOL")?;
    let view: PoolView = client
        .post(
            &format!(
                "{}/pools/{}/resize",
                project_url(&org, &project),
                segment(&name)
            ),
            &json!({ "size": size }),
        )
        .await?;
    if conn.json {
        return print_json(&view);
    }
    println!("Pool {} now has size {}.", view.path, view.size);
    Ok(())
}

/// `orc pool delete`.
pub async fn pool_delete(conn: &ConnArgs, pool: &str) -> anyhow::Result<()> {
    let client = client(conn);
    let (org, project, name) = object_path(pool, "POOL")?;
    let view: PoolView = client
        .delete(&format!(
            "{}/pools/{}",
            project_url(&org, &project),
            segment(&name)
        ))
        .await?;
    if conn.json {
        return print_json(&view);
    }
    println!(
        "Pool {} is being deleted; its nodes are destroyed first.",
        view.path
    );
    Ok(())
}

/// Arguments of `orc pool reconfigure`.
#[derive(Debug, Args)]
pub struct ReconfigureArgs {
    /// ORG/PROJECT/POOL
    pub pool: String,
    /// Set param NAME=VALUE (repeat for more); other params keep their values.
    #[arg(long = "param", value_parser = parse_param)]
    pub params: Vec<(String, String)>,
    /// Remove param NAME (repeat for more).
    #[arg(long = "unset")]
    pub unset: Vec<String>,
    /// Replace ALL sensitive params with these (their values cannot be read back, so they
    /// are given in full or not at all): NAME=@FILE, NAME=- (standard input) or NAME=VALUE.
    #[arg(long = "sensitive", value_parser = parse_sensitive, value_name = "NAME=@FILE")]
    pub sensitive: Vec<SensitiveParam>,
}

/// `orc pool reconfigure`: merges the changes into the pool's current params and sends them
/// with the generation they were read at, so a concurrent change is refused, not lost.
pub async fn pool_reconfigure(conn: &ConnArgs, args: ReconfigureArgs) -> anyhow::Result<()> {
    let client = client(conn);
    let (org, project, name) = object_path(&args.pool, "POOL")?;
    let url = format!("{}/pools/{}", project_url(&org, &project), segment(&name));
    let current: PoolView = client.get(&url).await?;
    let Some(app) = &current.app else {
        bail!("pool {} runs no app, so it has no params", current.path);
    };
    let mut params = app.params.clone();
    for key in &args.unset {
        params.remove(key);
    }
    params.extend(args.params.iter().cloned());
    let mut body = json!({ "params": params, "generation": current.generation });
    if !args.sensitive.is_empty() {
        body["sensitive_params"] = json!(read_sensitive(args.sensitive)?);
    }
    let view: PoolView = client.post(&format!("{url}/reconfigure"), &body).await?;
    if conn.json {
        return print_json(&view);
    }
    println!(
        "Pool {} is at generation {}; its slots are replaced one at a time.",
        view.path, view.generation
    );
    Ok(())
}

fn price_text(n: &NodeView) -> String {
    match &n.price {
        Some(p) => format!("{} {}/{}", p.amount, p.currency, p.period),
        None => "unpriced".to_string(),
    }
}

fn nodes_table(nodes: &[NodeView]) -> String {
    let mut t = Table::new(&[
        "SLOT",
        "NODE",
        "STATE",
        "SITE",
        "PRICE",
        "ADDRESSES",
        "WORDS",
    ]);
    for n in nodes {
        t.row(vec![
            n.slot.to_string(),
            n.id.clone(),
            n.state.clone(),
            n.site.clone().unwrap_or_else(|| "-".to_string()),
            price_text(n),
            if n.addresses.is_empty() {
                "-".to_string()
            } else {
                n.addresses.join(",")
            },
            n.words.clone().unwrap_or_default(),
        ]);
    }
    t.render()
}

/// `orc nodes ORG/PROJECT/POOL`.
pub async fn nodes(conn: &ConnArgs, pool: &str, all: bool) -> anyhow::Result<()> {
    let client = client(conn);
    let (org, project, name) = object_path(pool, "POOL")?;
    let nodes: Vec<NodeView> = client
        .get(&format!(
            "{}/pools/{}/nodes{}",
            project_url(&org, &project),
            segment(&name),
            if all { "?include_ended=true" } else { "" }
        ))
        .await?;
    if conn.json {
        return print_json(&nodes);
    }
    if nodes.is_empty() {
        println!("No nodes.");
        return Ok(());
    }
    print!("{}", nodes_table(&nodes));
    Ok(())
}

fn providers_table(providers: &[ProviderView]) -> String {
    let mut t = Table::new(&[
        "PROVIDER", "PROJECT", "SCOPE", "MARKUP", "SERVING", "STANDBY", "RESOURCE",
    ]);
    for p in providers {
        let serving = p.replicas.iter().filter(|r| r.role == "serving").count();
        let standby = p.replicas.len() - serving;
        t.row(vec![
            p.name.clone(),
            p.project.clone(),
            p.scope.clone(),
            p.pricing
                .markup
                .clone()
                .unwrap_or_else(|| "none".to_string()),
            serving.to_string(),
            standby.to_string(),
            p.resource_uri.clone(),
        ]);
    }
    t.render()
}

/// `orc providers [ORG/PROJECT]` (default `sys/sys`).
pub async fn providers(conn: &ConnArgs, project: Option<&str>) -> anyhow::Result<()> {
    let client = client(conn);
    let (org, project) = project_path(project.unwrap_or("sys/sys"))?;
    let list: Vec<ProviderView> = client
        .get(&format!("{}/providers", project_url(&org, &project)))
        .await?;
    if conn.json {
        return print_json(&list);
    }
    if list.is_empty() {
        println!("No providers visible to {org}/{project}.");
        return Ok(());
    }
    print!("{}", providers_table(&list));
    Ok(())
}

fn sites_table(sites: &[SiteView]) -> String {
    let mut t = Table::new(&["SITE", "IPV4", "PRIVATE", "NODES", "GATEWAY", "STATUS"]);
    for s in sites {
        t.row(vec![
            s.site.clone(),
            s.public_ipv4.clone().unwrap_or_else(|| "-".to_string()),
            s.private_prefix.clone().unwrap_or_else(|| "-".to_string()),
            s.tenant_nodes.to_string(),
            s.gateway.clone().unwrap_or_else(|| "-".to_string()),
            if s.reported {
                "open"
            } else {
                "not reported yet"
            }
            .to_string(),
        ]);
    }
    t.render()
}

/// `orc sites [ORG/PROJECT/PROVIDER]`.
pub async fn sites(conn: &ConnArgs, provider: Option<&str>) -> anyhow::Result<()> {
    let client = client(conn);
    let (org, project, name) = object_path(provider.unwrap_or("sys/sys/partner"), "PROVIDER")?;
    let list: Vec<SiteView> = client
        .get(&format!(
            "{}/providers/{}/sites",
            project_url(&org, &project),
            segment(&name)
        ))
        .await?;
    if conn.json {
        return print_json(&list);
    }
    if list.is_empty() {
        println!("Provider {org}/{project}/{name} has no open site.");
        return Ok(());
    }
    print!("{}", sites_table(&list));
    Ok(())
}

/// `orc provider change-scope ORG/PROJECT/PROVIDER zone|project`.
pub async fn change_scope(conn: &ConnArgs, provider: &str, scope: &str) -> anyhow::Result<()> {
    let client = client(conn);
    let (org, project, name) = object_path(provider, "PROVIDER")?;
    let view: ProviderView = client
        .post(
            &format!(
                "{}/providers/{}/change-scope",
                project_url(&org, &project),
                segment(&name)
            ),
            &json!({ "scope": scope }),
        )
        .await?;
    if conn.json {
        return print_json(&view);
    }
    let whom = match view.scope.as_str() {
        "zone" => "every project of the zone".to_string(),
        _ => format!("project {} only", view.project),
    };
    println!(
        "Provider {} now has scope {}: visible to {whom}.",
        view.name, view.scope
    );
    Ok(())
}

/// `orc provider pricing ORG/PROJECT/PROVIDER --markup M | --none`.
pub async fn pricing(
    conn: &ConnArgs,
    provider: &str,
    markup: Option<String>,
) -> anyhow::Result<()> {
    let client = client(conn);
    let (org, project, name) = object_path(provider, "PROVIDER")?;
    let view: ProviderView = client
        .put(
            &format!(
                "{}/providers/{}/pricing",
                project_url(&org, &project),
                segment(&name)
            ),
            &json!({ "markup": markup }),
        )
        .await?;
    if conn.json {
        return print_json(&view);
    }
    match &view.pricing.markup {
        Some(m) => println!(
            "Provider {} now prices new nodes with markup {m}.",
            view.name
        ),
        None => println!(
            "Provider {} has no pricing strategy: new nodes are unpriced.",
            view.name
        ),
    }
    Ok(())
}

/// Arguments of `orc quote`.
#[derive(Debug, Args)]
pub struct QuoteArgs {
    /// ORG/PROJECT asking.
    pub project: String,
    /// Provider name.
    #[arg(long)]
    pub provider: String,
    /// Region class; for a provider of one cloud, the cloud location.
    #[arg(long, visible_alias = "location")]
    pub class: String,
    /// Exact plan of a provider of one cloud; sets placement plan=PLAN.
    #[arg(long)]
    pub plan: Option<String>,
    /// Provider-specific placement KEY=VALUE (repeat for more).
    #[arg(long = "placement", value_parser = parse_param)]
    pub placement: Vec<(String, String)>,
    /// vCPUs.
    #[arg(long)]
    pub cpu: u32,
    /// Memory, GiB.
    #[arg(long)]
    pub mem: u32,
    /// Architecture: x86_64 or arm64.
    #[arg(long)]
    pub arch: Option<String>,
    /// Extra disk, GiB (repeat for more).
    #[arg(long = "disk")]
    pub disks: Vec<u32>,
    /// OS id.
    #[arg(long)]
    pub os: String,
    /// Quote for a public pool.
    #[arg(long)]
    pub public: bool,
}

/// `orc quote`.
pub async fn quote(conn: &ConnArgs, args: QuoteArgs) -> anyhow::Result<()> {
    let client = client(conn);
    let (org, project) = project_path(&args.project)?;
    let body = json!({
        "provider": args.provider,
        "shape": {"cpu": args.cpu, "mem": args.mem, "arch": args.arch, "disks": args.disks},
        "class": args.class,
        "os": args.os,
        "public": args.public,
        "placement": placement(args.placement, args.plan),
    });
    let view: QuoteView = client
        .post(&format!("{}/quote", project_url(&org, &project)), &body)
        .await?;
    if conn.json {
        return print_json(&view);
    }
    print!("{}", quote_text(&view));
    Ok(())
}

fn quote_text(view: &QuoteView) -> String {
    let mut pairs = vec![
        ("provider", view.provider.clone()),
        ("outcome", view.outcome.clone()),
    ];
    match view.outcome.as_str() {
        "offer" => {
            pairs.push(("site", view.site.clone().unwrap_or_default()));
            pairs.push(("line", view.words.clone()));
            pairs.push((
                "price",
                match &view.price {
                    Some(p) => format!("{} {}/{}", p.amount, p.currency, p.period),
                    None => "unpriced".to_string(),
                },
            ));
            pairs.push((
                "markup",
                view.markup.clone().unwrap_or_else(|| "none".into()),
            ));
        }
        _ => {
            pairs.push(("reason", view.words.clone()));
            pairs.push(("kind", view.refusal.clone().unwrap_or_default()));
        }
    }
    fields(&pairs)
}

fn events_table(events: &[EventView]) -> String {
    let mut t = Table::new(&["TIME", "KIND", "NODE", "WORDS"]);
    for e in events {
        t.row(vec![
            orc_zone::apps::logs::format_time(orc_zone::model::Timestamp(e.at)),
            e.kind.clone(),
            e.node_id.clone().unwrap_or_else(|| "-".to_string()),
            e.words.clone(),
        ]);
    }
    t.render()
}

/// `orc events ORG/PROJECT [--pool P] [--limit N]`.
pub async fn events(
    conn: &ConnArgs,
    project: &str,
    pool: Option<&str>,
    limit: u32,
) -> anyhow::Result<()> {
    let client = client(conn);
    let (org, project) = project_path(project)?;
    let mut url = format!("{}/events?limit={limit}", project_url(&org, &project));
    if let Some(pool) = pool {
        url.push_str(&format!("&pool={}", segment(pool)));
    }
    let list: Vec<EventView> = client.get(&url).await?;
    if conn.json {
        return print_json(&list);
    }
    if list.is_empty() {
        println!("No events.");
        return Ok(());
    }
    print!("{}", events_table(&list));
    Ok(())
}

fn usage_text(usage: &UsageView) -> String {
    let mut t = Table::new(&["DESCRIPTION", "NODE", "HOURS", "RATE", "AMOUNT"]);
    for line in &usage.lines {
        t.row(vec![
            line.description.clone(),
            line.node_id.clone().unwrap_or_else(|| "-".to_string()),
            line.hours.clone(),
            format!(
                "{} {}/{}",
                line.rate.amount, line.rate.currency, line.rate.period
            ),
            format!("{} {}", line.amount, line.rate.currency),
        ]);
    }
    let mut out = format!("Usage of {}\n", usage.month);
    out.push_str(&t.render());
    for (currency, total) in &usage.totals {
        out.push_str(&format!("total: {total} {currency}\n"));
    }
    out
}

/// `orc usage ORG/PROJECT [--month YYYY-MM]`.
pub async fn usage(conn: &ConnArgs, project: &str, month: Option<&str>) -> anyhow::Result<()> {
    let client = client(conn);
    let (org, project) = project_path(project)?;
    let mut url = format!("{}/usage", project_url(&org, &project));
    if let Some(month) = month {
        url.push_str(&format!("?month={}", segment(month)));
    }
    let view: UsageView = client.get(&url).await?;
    if conn.json {
        return print_json(&view);
    }
    print!("{}", usage_text(&view));
    Ok(())
}

/// `orc logs POOL [--slot N] [--level L]`.
pub async fn logs(
    conn: &ConnArgs,
    pool: &str,
    slot: Option<u32>,
    level: &str,
) -> anyhow::Result<()> {
    let client = client(conn);
    let (org, project, name) = object_path(pool, "POOL")?;
    let mut url = format!(
        "{}/pools/{}/logs?level={}",
        project_url(&org, &project),
        segment(&name),
        segment(level)
    );
    if let Some(slot) = slot {
        url.push_str(&format!("&slot={slot}"));
    }
    let lines: Vec<LogLineView> = client
        .get(&url)
        .await
        .with_context(|| format!("reading the logs of {org}/{project}/{name}"))?;
    if conn.json {
        return print_json(&lines);
    }
    for line in &lines {
        println!("{}", log_line_text(line));
    }
    Ok(())
}

/// One log line for people: UTC time, slot, level, message.
fn log_line_text(line: &LogLineView) -> String {
    format!(
        "{} slot {} {:<5} {}",
        orc_zone::apps::logs::format_time(orc_zone::model::Timestamp(line.at)),
        line.slot,
        line.level.to_uppercase(),
        line.message
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_parse_and_name_what_is_wrong() {
        assert_eq!(
            object_path("acme/web/db", "POOL").unwrap(),
            ("acme".into(), "web".into(), "db".into())
        );
        assert_eq!(
            object_path("sys/partner", "POOL").unwrap(),
            ("sys".into(), "sys".into(), "partner".into())
        );
        let e = object_path("a//b", "POOL").unwrap_err().to_string();
        assert_eq!(e, "\"a//b\" is not ORG/PROJECT/POOL (or ORG/POOL)");
        assert!(project_path("acme").is_err());
    }
}

/// Golden files of the human tables, rendered from fixed views (the integration tests in
/// `tests/cli.rs` render the rest from a live zone). `ORC_BLESS=1` regenerates them.
#[cfg(test)]
mod golden {
    use super::*;
    use orc_zone::api::views::{MoneyView, NodeCounts, PricingView, ReplicaView, ShapeView};

    fn check(name: &str, actual: &str) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden")
            .join(name);
        if std::env::var_os("ORC_BLESS").is_some_and(|v| v == "1") {
            std::fs::write(&path, actual).unwrap();
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            expected == actual,
            "{} differs (ORC_BLESS=1 regenerates it)\n--- expected\n{expected}\n--- actual\n{actual}",
            path.display()
        );
    }

    fn node(slot: u32, id: &str, state: &str) -> NodeView {
        NodeView {
            id: id.to_string(),
            slot,
            state: state.to_string(),
            words: None,
            refusal: None,
            site: None,
            addresses: Vec::new(),
            price: None,
            markup: None,
            attempts: 0,
            created_at: 0,
            updated_at: 0,
            ended_at: None,
        }
    }

    #[test]
    fn nodes_table_golden() {
        let mut running = node(0, "n-00000000000k", "running");
        running.site = Some("eu-central-a".into());
        running.addresses = vec!["192.0.2.1".into(), "2001:db8::1".into()];
        running.price = Some(MoneyView {
            amount: "0.0079".into(),
            currency: "USD".into(),
            period: "hour".into(),
        });
        running.markup = Some("0.15".into());
        let mut unpriced = node(1, "n-00000000000m", "running");
        unpriced.site = Some("eu-central-b".into());
        unpriced.addresses = vec!["192.0.2.2".into()];
        let mut parked = node(2, "n-00000000000n", "parked");
        parked.words = Some("no capacity in Europe Central right now".into());
        parked.refusal = Some("no_capacity".into());
        let pending = node(3, "n-00000000000p", "pending");
        check(
            "nodes.txt",
            &nodes_table(&[running, unpriced, parked, pending]),
        );
    }

    #[test]
    fn providers_table_golden() {
        let provider =
            |name: &str, project: &str, scope: &str, markup: Option<&str>| ProviderView {
                id: "pv-000000000005".into(),
                name: name.into(),
                project: project.into(),
                resource_uri: format!("urn:orc:{name}:zone-1"),
                scope: scope.into(),
                pricing: PricingView {
                    markup: markup.map(str::to_string),
                },
                replicas: Vec::new(),
                catalog: None,
                created_at: 0,
                updated_at: 0,
            };
        let mut partner = provider("partner", "sys/sys", "zone", Some("0.15"));
        partner.replicas = vec![
            ReplicaView {
                host: "zone-1".into(),
                pid: 41,
                slot: 0,
                role: "serving".into(),
                connected_since: 0,
            },
            ReplicaView {
                host: "zone-1".into(),
                pid: 42,
                slot: 1,
                role: "standby".into(),
                connected_since: 0,
            },
        ];
        check(
            "providers-replicas.txt",
            &providers_table(&[
                provider("core", "sys/sys", "zone", None),
                partner,
                provider("lab", "acme/web", "project", Some("0")),
            ]),
        );
    }

    #[test]
    fn pools_table_with_states() {
        let pool = PoolView {
            id: "pl-000000000009".into(),
            path: "sys/sys/partner".into(),
            name: "partner".into(),
            provider: "core".into(),
            provider_id: "pv-000000000004".into(),
            size: 2,
            shape: ShapeView {
                cpu: 1,
                mem: 1,
                arch: Some("x86_64".into()),
                disks: Vec::new(),
            },
            class: "local".into(),
            os: "host".into(),
            public: false,
            endpoints: Vec::new(),
            app: None,
            placement: Default::default(),
            address: None,
            generation: 3,
            deleting: false,
            nodes: NodeCounts {
                running: 1,
                starting: 0,
                parked: 1,
                destroying: 0,
                lost: 0,
            },
            created_at: 0,
            updated_at: 0,
        };
        let mut old = pool.clone();
        old.path = "acme/web/old".into();
        old.provider = "partner".into();
        old.size = 0;
        old.deleting = true;
        old.nodes = NodeCounts::default();
        check("pools-states.txt", &pools_table(&[pool, old]));
    }

    #[test]
    fn events_and_usage() {
        let event = EventView {
            id: "e-00000000000q".into(),
            at: 1_795_975_200_000,
            kind: "node.parked".into(),
            words: "no capacity in Europe Central right now".into(),
            provider_id: None,
            pool_id: Some("pl-000000000009".into()),
            node_id: Some("n-00000000000n".into()),
        };
        let usage = UsageView {
            month: "2026-11".into(),
            lines: vec![orc_zone::api::views::UsageLineView {
                id: "ul-00000000000r".into(),
                month: "2026-11".into(),
                pool_id: Some("pl-000000000009".into()),
                node_id: Some("n-00000000000k".into()),
                description: "2 vCPU · 4 GiB · eu-central".into(),
                hours: "12".into(),
                rate: MoneyView {
                    amount: "0.0079".into(),
                    currency: "USD".into(),
                    period: "hour".into(),
                },
                amount: "0.0948".into(),
            }],
            totals: [("USD".to_string(), "0.0948".to_string())].into(),
        };
        check(
            "events-usage.txt",
            &format!("{}\n{}", events_table(&[event]), usage_text(&usage)),
        );
    }

    #[test]
    fn log_lines() {
        let line = |at: i64, slot: u32, level: &str, message: &str| LogLineView {
            at,
            slot,
            level: level.into(),
            message: message.into(),
        };
        let text: String = [
            line(1_795_975_200_123, 0, "info", "replica 0 serves"),
            line(1_795_975_201_000, 1, "debug", "replica 1 waits"),
            line(1_795_975_202_500, 0, "warn", "catalog read slow"),
        ]
        .iter()
        .map(|l| log_line_text(l) + "\n")
        .collect();
        check("logs.txt", &text);
    }

    #[test]
    fn quote_offer_and_refusal() {
        let offer = QuoteView {
            provider: "partner".into(),
            outcome: "offer".into(),
            words: "2 vCPU · 4 GiB · eu-central".into(),
            site: Some("eu-central-a".into()),
            price: Some(MoneyView {
                amount: "0.0115".into(),
                currency: "USD".into(),
                period: "hour".into(),
            }),
            markup: Some("0.15".into()),
            refusal: None,
        };
        let refused = QuoteView {
            provider: "partner".into(),
            outcome: "refused".into(),
            words: "no capacity in Asia South right now".into(),
            site: None,
            price: None,
            markup: None,
            refusal: Some("no_capacity".into()),
        };
        check(
            "quote.txt",
            &format!("{}\n{}", quote_text(&offer), quote_text(&refused)),
        );
    }
}
