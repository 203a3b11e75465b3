//! Pools: the `orc pools` table and `orc pool create|resize|delete|reconfigure`, with the
//! wait of `pool create --wait` that polls the pool and shows a progress bar.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::bail;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use orc_common::RefusalKind;
use orc_zone_api_types::views::{
    CreatePool, EndpointView, EventView, NodeView, OrgView, PoolView, ProjectView, QuoteRequest,
    ReconfigurePool, ResizePool,
};
use serde::Serialize;

use super::params::{SensitiveParam, parse_param, parse_sensitive, read_sensitive};
use super::shape::ShapeArgs;
use super::{client, object_path, print_json, project_path, project_url};
use crate::ConnArgs;
use crate::client::{Client, segment};
use crate::table::Table;

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
    let mut text = p.class.to_string();
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
            p.os.to_string(),
            status_text(p),
        ]);
    }
    t.render()
}

/// A pool's status: being deleted, or why its nodes are parked.
fn status_text(p: &PoolView) -> String {
    if p.deleting {
        return "deleting".to_string();
    }
    match &p.parked {
        Some(parked) => format!(
            "parked: {}",
            parked
                .words
                .as_deref()
                .or(parked.refusal.as_deref())
                .unwrap_or("no reason given")
        ),
        None => String::new(),
    }
}

/// The text of `orc pool show`: the pool's fields, then its nodes.
fn pool_text(p: &PoolView, nodes: &[NodeView]) -> String {
    let counts = &p.nodes;
    let mut pairs = vec![
        ("pool", p.path.clone()),
        ("id", p.id.clone()),
        ("provider", p.provider.clone()),
        ("size", p.size.to_string()),
        ("shape", shape_text(p)),
        ("class", class_text(p)),
        ("os", p.os.to_string()),
        ("public", if p.public { "yes" } else { "no" }.to_string()),
    ];
    if let Some(a) = &p.address {
        pairs.push(("address", format!("{} at {}", a.ipv4, a.site)));
    }
    if !p.endpoints.is_empty() {
        let list: Vec<String> = p
            .endpoints
            .iter()
            .map(|e| format!("{} {}/{}", e.name, e.port, e.protocol))
            .collect();
        pairs.push(("endpoints", list.join(", ")));
    }
    if let Some(app) = &p.app {
        pairs.push(("app", app.package.clone()));
        for (name, value) in &app.params {
            pairs.push(("param", format!("{name}={value}")));
        }
        for name in &app.sensitive_params {
            pairs.push(("sensitive", format!("{name} (set; never shown)")));
        }
    }
    for key in &p.ssh_keys {
        pairs.push((
            "ssh key",
            format!("{} {} {}", key.kind, key.fingerprint, key.comment)
                .trim_end()
                .to_string(),
        ));
    }
    pairs.push((
        "nodes",
        format!(
            "{} running, {} starting, {} parked, {} destroying, {} lost",
            counts.running, counts.starting, counts.parked, counts.destroying, counts.lost
        ),
    ));
    let status = status_text(p);
    if !status.is_empty() {
        pairs.push(("status", status));
    }
    pairs.push(("generation", p.generation.to_string()));
    pairs.push((
        "created",
        orc_common::time::format_time(orc_common::Timestamp(p.created_at)),
    ));
    let mut out = crate::table::fields(&pairs);
    if !nodes.is_empty() {
        out.push('\n');
        out.push_str(&super::nodes::nodes_table(nodes));
    }
    out
}

/// What `orc pool show --json` prints: the pool and its nodes.
#[derive(Serialize)]
struct PoolWithNodes<'a> {
    pool: &'a PoolView,
    nodes: &'a [NodeView],
}

/// `orc pool show ORG/PROJECT/POOL`.
pub async fn show(conn: &ConnArgs, pool: &str) -> anyhow::Result<()> {
    let client = client(conn)?;
    let (org, project, name) = object_path(pool, "POOL")?;
    let url = format!("{}/pools/{}", project_url(&org, &project), segment(&name));
    let view: PoolView = client.get(&url).await?;
    let nodes: Vec<NodeView> = client.get(&format!("{url}/nodes")).await?;
    if conn.json {
        return print_json(&PoolWithNodes {
            pool: &view,
            nodes: &nodes,
        });
    }
    out!("{}", pool_text(&view, &nodes));
    Ok(())
}

/// `orc pools [ORG/PROJECT]`.
pub async fn list(conn: &ConnArgs, project: Option<&str>) -> anyhow::Result<()> {
    let client = client(conn)?;
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
        outln!("No pools.");
        return Ok(());
    }
    out!("{}", pools_table(&all));
    Ok(())
}

/// Arguments of `orc pool create`.
#[derive(Debug, Args)]
pub struct CreatePoolArgs {
    /// ORG/PROJECT/POOL
    pub pool: String,
    #[command(flatten)]
    pub shape: ShapeArgs,
    /// Number of nodes.
    #[arg(long)]
    pub size: u32,
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
    /// An OpenSSH public key file (an `authorized_keys` file or a `.pub`) whose keys every
    /// node installs for its OS's default user (repeat for more).
    #[arg(long = "ssh-key", value_name = "FILE")]
    pub ssh_keys: Vec<std::path::PathBuf>,
    /// An endpoint the nodes serve, NAME=PROTOCOL:PORT with protocol http or tcp
    /// (`web=http:8080`; repeat for more). A `--public` pool's address forwards these ports
    /// to its healthy nodes.
    #[arg(long = "endpoint", value_parser = parse_endpoint, value_name = "NAME=PROTOCOL:PORT")]
    pub endpoints: Vec<EndpointView>,
    /// Wait until every node runs (a progress bar on a terminal, a line per change
    /// otherwise); stops early when the remaining nodes are parked for a reason that does
    /// not clear by itself.
    #[arg(long)]
    pub wait: bool,
    /// Give up waiting after this many seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
}

/// One `--endpoint NAME=PROTOCOL:PORT`; the zone checks the name and protocol and says
/// which is wrong.
fn parse_endpoint(text: &str) -> Result<EndpointView, String> {
    let bad = || format!("{text:?} is not NAME=PROTOCOL:PORT (web=http:8080)");
    let (name, rest) = text.split_once('=').ok_or_else(bad)?;
    let (protocol, port) = rest.split_once(':').ok_or_else(bad)?;
    let port: u16 =
        port.parse().ok().filter(|p| *p > 0).ok_or_else(|| {
            format!("{text:?}: the port {port:?} is not a number from 1 to 65535")
        })?;
    if name.is_empty() || protocol.is_empty() {
        return Err(bad());
    }
    Ok(EndpointView {
        name: name.to_string(),
        protocol: protocol.to_string(),
        port,
    })
}

/// The public keys in `path`: every line that is not blank or a `#` comment, each checked,
/// naming the file and line when one is not a public key.
fn read_ssh_keys(path: &std::path::Path) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read the SSH key file {}: {e}", path.display()))?;
    let mut keys = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with("-----BEGIN") {
            bail!(
                "{} holds a private key; give its public one (the .pub file)",
                path.display()
            );
        }
        let key = orc_zone_model::SshPublicKey::parse(line).map_err(|e| {
            anyhow::anyhow!(
                "{} line {}: not an OpenSSH public key: it {e}",
                path.display(),
                n + 1
            )
        })?;
        keys.push(key.line());
    }
    if keys.is_empty() {
        bail!("{} holds no SSH public key", path.display());
    }
    Ok(keys)
}

/// `orc pool create`.
pub async fn create(conn: &ConnArgs, args: CreatePoolArgs) -> anyhow::Result<()> {
    let client = client(conn)?;
    let (org, project, name) = object_path(&args.pool, "POOL")?;
    let params: BTreeMap<String, String> = args.params.into_iter().collect();
    let sensitive = read_sensitive(args.sensitive)?;
    let mut ssh_keys = Vec::new();
    for path in &args.ssh_keys {
        ssh_keys.extend(read_ssh_keys(path)?);
    }
    let QuoteRequest {
        provider,
        shape,
        class,
        os,
        public,
        placement,
    } = args.shape.into_quote_request();
    let request = CreatePool {
        name: name.clone(),
        provider,
        size: args.size,
        shape,
        class,
        os,
        public,
        endpoints: args.endpoints,
        app: args.app,
        params,
        sensitive_params: sensitive,
        placement,
        ssh_keys,
    };
    let pool: PoolView = client
        .post(&format!("{}/pools", project_url(&org, &project)), &request)
        .await?;
    if !args.wait {
        if conn.json {
            return print_json(&pool);
        }
        outln!("Created pool {} with {} node(s).", pool.path, pool.size);
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
    outln!(
        "Pool {} is up: {} of {} node(s) running.",
        pool.path,
        pool.nodes.running,
        pool.size
    );
    Ok(())
}

/// Whether a node parked with a refusal of `kind` waits for the provider's operator or a
/// new catalog, so that waiting longer changes nothing.
fn refusal_is_stuck(kind: RefusalKind) -> bool {
    match kind {
        RefusalKind::OperatorFix | RefusalKind::Unplaceable => true,
        RefusalKind::NoCapacity
        | RefusalKind::Counting
        | RefusalKind::Transient
        | RefusalKind::Failed => false,
    }
}

/// Polls the pool until `size` nodes run. On a terminal it shows a progress bar; otherwise
/// (a log, a pipe, CI) it writes one line to stderr each time the counts or the reason
/// change; with `--json` it shows nothing. It stops early, with the provider's words, once
/// every node that does not run is parked for a reason that does not clear by itself.
async fn wait_for_nodes(
    client: &Client,
    org: &str,
    project: &str,
    name: &str,
    size: u32,
    timeout: u64,
    quiet: bool,
) -> anyhow::Result<PoolView> {
    use std::io::IsTerminal as _;
    let url = format!("{}/pools/{}", project_url(org, project), segment(name));
    let live = !quiet && std::io::stderr().is_terminal();
    let bar = if live {
        ProgressBar::new(u64::from(size))
    } else {
        ProgressBar::hidden()
    };
    if let Ok(style) = ProgressStyle::with_template("{bar:30} {pos}/{len} running  {msg}") {
        bar.set_style(style);
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
    let events_url = format!("{}/events", project_url(org, project));
    let mut last_event: Option<String> = None;
    let mut progress: Option<String> = None;
    let mut last_line = String::new();
    let mut reason: Option<String> = None;
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
        let mut stuck = 0;
        if pool.nodes.parked > 0 {
            let nodes: Vec<NodeView> = client.get(&format!("{url}/nodes")).await?;
            let parked: Vec<&NodeView> = nodes
                .iter()
                .filter(|n| n.state == orc_zone_model::NodeState::Parked)
                .collect();
            let is_stuck = |n: &&&NodeView| n.refusal_kind().is_some_and(refusal_is_stuck);
            stuck = parked.iter().filter(is_stuck).count();
            reason = parked
                .iter()
                .filter(is_stuck)
                .chain(parked.iter())
                .find_map(|n| n.words.clone());
            if let Some(words) = &reason {
                msg.push_str(&format!(": {words}"));
            }
        }
        bar.set_message(msg.clone());
        if !quiet && !live {
            let line = format!("{}/{size} running, {msg}", pool.nodes.running);
            if line != last_line {
                eprintln!("Pool {}: {line}", pool.path);
                last_line = line;
            }
        }
        if pool.nodes.running >= size {
            bar.finish_and_clear();
            return Ok(pool);
        }
        let waiting = size.saturating_sub(pool.nodes.running);
        if stuck > 0 && u32::try_from(stuck).unwrap_or(u32::MAX) >= waiting {
            bar.abandon();
            bail!(
                "pool {} cannot finish: {} of {size} node(s) running, {stuck} parked until the \
                 provider's configuration or catalog changes: {}; see `orc events {org}/{project} \
                 --pool {name}`",
                pool.path,
                pool.nodes.running,
                reason.as_deref().unwrap_or("no reason given")
            );
        }
        if tokio::time::Instant::now() >= deadline {
            bar.abandon();
            let why = reason
                .as_deref()
                .map(|w| format!("; the last reason: {w}"))
                .unwrap_or_default();
            bail!(
                "gave up after {timeout} s: {} of {size} node(s) running{why}; see `orc events \
                 {org}/{project} --pool {name}`",
                pool.nodes.running
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// `orc pool resize`.
pub async fn resize(conn: &ConnArgs, pool: &str, size: u32) -> anyhow::Result<()> {
    let client = client(conn)?;
    let (org, project, name) = object_path(pool, "POOL")?;
    let view: PoolView = client
        .post(
            &format!(
                "{}/pools/{}/resize",
                project_url(&org, &project),
                segment(&name)
            ),
            &ResizePool { size },
        )
        .await?;
    if conn.json {
        return print_json(&view);
    }
    outln!("Pool {} now has size {}.", view.path, view.size);
    Ok(())
}

/// `orc pool delete`.
pub async fn delete(conn: &ConnArgs, pool: &str, wait: Option<Duration>) -> anyhow::Result<()> {
    let client = client(conn)?;
    let (org, project, name) = object_path(pool, "POOL")?;
    let url = format!("{}/pools/{}", project_url(&org, &project), segment(&name));
    let view: PoolView = client.delete(&url).await?;
    if conn.json && wait.is_none() {
        return print_json(&view);
    }
    let Some(timeout) = wait else {
        outln!(
            "Pool {} is being deleted; its nodes are destroyed first.",
            view.path
        );
        return Ok(());
    };
    // One line per change on stderr, so a log or a pipe shows the progress too; the
    // outcome goes to stdout.
    let started = std::time::Instant::now();
    let mut last_left = None;
    loop {
        let current: Result<PoolView, _> = client.get(&url).await;
        match current {
            Err(crate::client::CallError::Api { status, .. }) if status.as_u16() == 404 => {
                outln!("Pool {} is deleted: its nodes are gone.", view.path);
                return Ok(());
            }
            Err(e) => return Err(e.into()),
            Ok(now) => {
                let n = &now.nodes;
                let left = n.running + n.starting + n.parked + n.destroying + n.lost;
                if last_left != Some(left) {
                    eprintln!("Pool {}: {left} node(s) still to destroy.", view.path);
                    last_left = Some(left);
                }
            }
        }
        if started.elapsed() >= timeout {
            anyhow::bail!(
                "gave up waiting after {} s: pool {} still has {} node(s) being destroyed; \
                 see `orc events {org}/{project} --pool {name}`",
                timeout.as_secs(),
                view.path,
                last_left.unwrap_or(0)
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
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
pub async fn reconfigure(conn: &ConnArgs, args: ReconfigureArgs) -> anyhow::Result<()> {
    let client = client(conn)?;
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
    let sensitive_params = if args.sensitive.is_empty() {
        None
    } else {
        Some(read_sensitive(args.sensitive)?)
    };
    let request = ReconfigurePool {
        params,
        sensitive_params,
        sensitive_params_update: None,
        generation: Some(current.generation),
    };
    let view: PoolView = client.post(&format!("{url}/reconfigure"), &request).await?;
    if conn.json {
        return print_json(&view);
    }
    match view
        .app
        .as_ref()
        .and_then(|a| a.digest.as_ref().map(|d| (&a.package, d)))
    {
        Some((package, digest)) => outln!(
            "Pool {} is at generation {}, running {package} ({digest}); its slots are replaced \
             one at a time.",
            view.path,
            view.generation
        ),
        None => outln!(
            "Pool {} is at generation {}; its slots are replaced one at a time.",
            view.path,
            view.generation
        ),
    }
    Ok(())
}

#[cfg(test)]
mod golden {
    use super::*;
    use orc_zone_api_types::views::{NodeCounts, ParkedView, ShapeView};

    use crate::commands::check_golden;

    /// A pool of two on `core`, one node running and one parked.
    fn pool() -> PoolView {
        PoolView {
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
            class: "local".parse().unwrap(),
            os: "host".parse().unwrap(),
            public: false,
            endpoints: Vec::new(),
            app: None,
            placement: Default::default(),
            ssh_keys: Vec::new(),
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
            parked: Some(ParkedView {
                refusal: Some("unplaceable".into()),
                words: Some("no site of Europe Central offers 3 vCPU · 7 GiB".into()),
            }),
            created_at: 0,
            updated_at: 0,
        }
    }

    #[test]
    fn pools_table_with_states() {
        let pool = pool();
        let mut old = pool.clone();
        old.parked = None;
        old.path = "acme/web/old".into();
        old.provider = "partner".into();
        old.size = 0;
        old.deleting = true;
        old.nodes = NodeCounts::default();
        check_golden("pools-states", &pools_table(&[pool.clone(), old]));
    }

    #[test]
    fn pool_show_golden() {
        let mut params = BTreeMap::new();
        params.insert("replicas".to_string(), "2".to_string());
        let pool = PoolView {
            id: "pl-00000000000a".into(),
            path: "acme/web/api".into(),
            name: "api".into(),
            provider: "partner".into(),
            shape: ShapeView {
                cpu: 2,
                mem: 4,
                arch: Some("x86_64".into()),
                disks: vec![20],
            },
            class: "eu-central".parse().unwrap(),
            os: "debian-12".parse().unwrap(),
            public: true,
            endpoints: vec![EndpointView {
                name: "http".into(),
                protocol: "tcp".into(),
                port: 8080,
            }],
            app: Some(orc_zone_api_types::views::AppView {
                package: "acme/api:1.4".into(),
                digest: None,
                params,
                sensitive_params: vec!["API_KEY".into()],
            }),
            ssh_keys: vec![orc_zone_api_types::views::SshKeyView {
                kind: "ssh-ed25519".into(),
                fingerprint: "SHA256:+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU".into(),
                comment: "ann@laptop".into(),
            }],
            address: Some(orc_zone_api_types::views::PoolAddressView {
                ipv4: "198.18.0.40".into(),
                site: "eu-central-a".into(),
            }),
            generation: 2,
            parked: Some(ParkedView {
                refusal: Some("no_capacity".into()),
                words: Some("no capacity in Europe Central right now".into()),
            }),
            created_at: 1_767_225_600_000,
            ..pool()
        };
        let node = NodeView {
            site: Some("eu-central-a".into()),
            addresses: vec!["10.0.1.5".into()],
            private_address: Some("10.0.1.5".into()),
            gateway: Some("10.0.1.2".into()),
            ..crate::commands::nodes::golden::node(0, "n-00000000000k", "running")
        };
        let out = pool_text(&pool, &[node]);
        assert!(
            !out.contains("API_KEY="),
            "a sensitive value's place is never shown"
        );
        check_golden("pool-show", &out);
    }
}

#[cfg(test)]
mod endpoints {
    use super::parse_endpoint;

    #[test]
    fn an_endpoint_is_name_protocol_and_port() {
        let e = parse_endpoint("web=http:8080").unwrap();
        assert_eq!(
            (e.name.as_str(), e.protocol.as_str(), e.port),
            ("web", "http", 8080)
        );
        let e = parse_endpoint("db=tcp:5432").unwrap();
        assert_eq!(
            (e.name.as_str(), e.protocol.as_str(), e.port),
            ("db", "tcp", 5432)
        );
    }

    #[test]
    fn a_bad_endpoint_says_what_is_wrong() {
        assert_eq!(
            parse_endpoint("web").unwrap_err(),
            "\"web\" is not NAME=PROTOCOL:PORT (web=http:8080)"
        );
        assert_eq!(
            parse_endpoint("web=http").unwrap_err(),
            "\"web=http\" is not NAME=PROTOCOL:PORT (web=http:8080)"
        );
        assert_eq!(
            parse_endpoint("web=http:0").unwrap_err(),
            "\"web=http:0\": the port \"0\" is not a number from 1 to 65535"
        );
        assert_eq!(
            parse_endpoint("=http:80").unwrap_err(),
            "\"=http:80\" is not NAME=PROTOCOL:PORT (web=http:8080)"
        );
    }
}
