//! `orc app`: a project's applications, from their `orch.pkl` files.
//!
//! `plan`, `deploy`, `list`, `status`, `history`, `diff`, `rollback` and `remove` talk to the
//! zone; each takes `--project` (the token's project when left out) and `--json`.
//! `init`, `check` and `schema` work without a zone: they write, evaluate and print app files
//! on this machine. Evaluation is pure Rust (`orc_app_model::pkl`); what reaches a zone is
//! the checked app as JSON, which the zone checks again.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use base64::Engine as _;
use orc_app_model::init::Starter;
use orc_app_model::revision::{ResolvedApp, ResolvedImage};
use orc_app_model::schema::{Check, typed_module};
use orc_app_model::{AppSpec, ImageRef, WorkloadKind, pkl};
use orc_zone_api_types::views::{
    AppExecRequest, AppLogLine, AppPlanView, AppRevisionView, AppStatusView, ChangeView, DeployApp,
    ImageView, ProjectAppView, RollbackApp,
};

use crate::ConnArgs;
use crate::table::Table;

/// The file `orc app` commands read when none is named.
pub const DEFAULT_FILE: &str = "orch.pkl";

/// What `orc app init` was asked for.
#[derive(Debug, Clone)]
pub struct InitArgs {
    /// Where to write.
    pub file: PathBuf,
    /// The app's (and its one service's) name.
    pub name: String,
    /// The image; `None` writes a placeholder to edit.
    pub image: Option<String>,
    /// Replicas.
    pub replicas: u32,
    /// The HTTP port.
    pub port: u16,
    /// The readiness path; `None` for a TCP check.
    pub health: Option<String>,
    /// Public names served over HTTPS.
    pub domains: Vec<String>,
    /// The project's plain-HTTP catch-all.
    pub public: bool,
    /// Replace an existing file.
    pub force: bool,
}

/// `orc app init`: writes a starter `orch.pkl` that `orc app check` passes.
pub fn init(args: &InitArgs) -> anyhow::Result<()> {
    if let Err(why) = Check::Label.test(&args.name) {
        bail!("--name {:?} {why}", args.name);
    }
    if let Some(image) = &args.image {
        ImageRef::parse(image).map_err(|e| anyhow::anyhow!("--image: {e}"))?;
    }
    if args.port == 0 {
        bail!("--port must be from 1 to 65535");
    }
    if args.replicas > 100 {
        bail!("--replicas must be from 0 to 100, not {}", args.replicas);
    }
    if let Some(path) = &args.health
        && let Err(why) = Check::HttpPath.test(path)
    {
        bail!("--health {path:?} {why}");
    }
    for domain in &args.domains {
        if let Err(why) = Check::Domain.test(domain) {
            bail!("--domain {domain:?} {why}");
        }
    }
    if args.file.exists() && !args.force {
        bail!(
            "{} already exists; pass --force to replace it",
            args.file.display()
        );
    }
    let placeholder = args.image.is_none();
    let starter = Starter {
        name: args.name.clone(),
        image: args
            .image
            .clone()
            .unwrap_or_else(|| format!("my-org/{}:1", args.name)),
        replicas: args.replicas,
        port: args.port,
        health: args.health.clone(),
        domains: args.domains.clone(),
        public: args.public,
    };
    std::fs::write(&args.file, starter.render())
        .with_context(|| format!("cannot write {}", args.file.display()))?;
    // What init writes must check; if it did not, that is orc's bug, said plainly.
    pkl::load(&args.file).map_err(|e| {
        anyhow::anyhow!("the starter file does not check (this is a bug in orc):\n{e}")
    })?;
    let readiness = match &starter.health {
        Some(path) => format!("ready when GET {path} answers"),
        None => "ready when its port accepts a connection".to_string(),
    };
    println!(
        "Wrote {}: app {}, {} replica{} of {} on port {}, {readiness}.",
        args.file.display(),
        starter.name,
        starter.replicas,
        if starter.replicas == 1 { "" } else { "s" },
        starter.image,
        starter.port,
    );
    if !starter.domains.is_empty() || starter.public {
        let mut reached = Vec::new();
        if !starter.domains.is_empty() {
            reached.push(starter.domains.join(", "));
        }
        if starter.public {
            reached.push("port 80 of any other name".to_string());
        }
        println!(
            "Reached from outside at {} on the project's ingress nodes (orc app status says where).",
            reached.join(" and ")
        );
    }
    if placeholder {
        println!(
            "The image is a placeholder: edit it, or run again with --image ORG/NAME:TAG --force."
        );
    }
    println!("Next: orc app check {}", args.file.display());
    Ok(())
}

/// `orc app check [FILE]`: evaluates and checks an app file; with `--json`, prints the
/// checked app as the zone receives it.
pub fn check(file: Option<&Path>, json: bool) -> anyhow::Result<()> {
    let file = file.unwrap_or(Path::new(DEFAULT_FILE));
    let spec = load(file)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&spec)?);
    } else {
        println!("{}", summary(file, &spec));
    }
    Ok(())
}

/// Evaluates and checks `file`, with an error that lists every problem on its line.
pub fn load(file: &Path) -> anyhow::Result<AppSpec> {
    if !file.exists() {
        bail!(
            "{} does not exist; write a starter with `orc app init`, or name the app file",
            file.display()
        );
    }
    pkl::load(file).map_err(|error| {
        let count = error.problems.len();
        anyhow::anyhow!(
            "{error}\n{} does not check: {count} problem{}",
            file.display(),
            if count == 1 { "" } else { "s" }
        )
    })
}

/// One line: what the app holds.
pub fn summary(file: &Path, spec: &AppSpec) -> String {
    let part = |kind: WorkloadKind, singular: &str| {
        let items: Vec<String> = spec
            .workloads()
            .filter(|(k, _, _)| *k == kind)
            .map(|(_, name, w)| format!("{name} ×{}", w.replicas))
            .collect();
        match items.len() {
            0 => None,
            1 => Some(format!("1 {singular} ({})", items[0])),
            n => Some(format!("{n} {singular}s ({})", items.join(", "))),
        }
    };
    let parts: Vec<String> = [
        part(WorkloadKind::Service, "service"),
        part(WorkloadKind::Worker, "worker"),
    ]
    .into_iter()
    .flatten()
    .collect();
    format!(
        "{}: app {} checks: {}.",
        file.display(),
        spec.name,
        parts.join(", ")
    )
}

/// `orc app schema`: prints the typed module app files amend.
pub fn schema() {
    print!("{}", typed_module());
}

fn apps_url(org: &str, project: &str) -> String {
    format!("{}/apps", super::project_url(org, project))
}

fn app_url(org: &str, project: &str, app: &str) -> String {
    format!("{}/{}", apps_url(org, project), crate::client::segment(app))
}

fn changes_text(changes: &[ChangeView]) -> String {
    if changes.is_empty() {
        return "  (no change)\n".to_string();
    }
    let mut out = String::new();
    for change in changes {
        let line = match (&change.from, &change.to) {
            (None, Some(to)) => format!("  + {}: {to}", change.field),
            (Some(from), None) => format!("  - {}: {from}", change.field),
            (Some(from), Some(to)) => format!("  ~ {}: {from} -> {to}", change.field),
            (None, None) => format!("    {}", change.field),
        };
        out.push_str(&orc_common::text::printable(&line));
        out.push('\n');
    }
    out
}

fn images_text(images: &[ImageView]) -> String {
    let mut table = Table::new(&["WORKLOAD", "IMAGE", "DIGEST"]);
    for image in images {
        table.row(vec![
            image.workload.clone(),
            image.reference.clone(),
            image.digest.clone(),
        ]);
    }
    table.render()
}

/// `orc app plan FILE`: what a deploy would change, without deploying.
pub async fn plan(
    conn: &ConnArgs,
    file: Option<&Path>,
    project: Option<&str>,
) -> anyhow::Result<()> {
    let file = file.unwrap_or(Path::new(DEFAULT_FILE));
    let spec = load(file)?;
    let client = super::client(conn)?;
    let (org, project) = super::project_of(&client, project).await?;
    let body = DeployApp {
        app: serde_json::to_value(&spec)?,
    };
    let view: AppPlanView = client
        .post(&format!("{}/plan", apps_url(&org, &project)), &body)
        .await?;
    if conn.json {
        return super::print_json(&view);
    }
    let against = view
        .current_revision
        .map_or("nothing deployed yet".to_string(), |r| {
            format!("revision {r}")
        });
    if view.noop {
        outln!(
            "App {} in {org}/{project}: no change against {against}.",
            view.app
        );
        return Ok(());
    }
    outln!("App {} in {org}/{project}, against {against}:", view.app);
    out!("{}", changes_text(&view.changes));
    outln!();
    out!("{}", images_text(&view.images));
    if !view.blocked.is_empty() {
        outln!();
        outln!("It would be BLOCKED now:");
        for blocked in &view.blocked {
            outln!("  {}: {}", blocked.workload, blocked.reason);
        }
    }
    Ok(())
}

/// `orc app deploy FILE`: a new revision (or nothing, for the same resolved app).
pub async fn deploy(
    conn: &ConnArgs,
    file: Option<&Path>,
    project: Option<&str>,
    wait: Option<std::time::Duration>,
) -> anyhow::Result<()> {
    let file = file.unwrap_or(Path::new(DEFAULT_FILE));
    let spec = load(file)?;
    let client = super::client(conn)?;
    let (org, project) = super::project_of(&client, project).await?;
    let body = DeployApp {
        app: serde_json::to_value(&spec)?,
    };
    let view: AppRevisionView = client.post(&apps_url(&org, &project), &body).await?;
    if conn.json {
        return super::print_json(&view);
    }
    outln!(
        "App {} in {org}/{project}: revision {} is {}.",
        spec.name,
        view.number,
        view.state
    );
    if let Some(reason) = &view.reason {
        outln!("  {reason}");
    }
    if view.state == "BLOCKED" {
        anyhow::bail!(
            "app {} is blocked: nothing of revision {} is applied until it fits; the zone \
             deploys it by itself once it does (or deploy another revision)",
            spec.name,
            view.number
        );
    }
    if let Some(timeout) = wait {
        wait_healthy(
            conn,
            &client,
            &org,
            &project,
            spec.name.as_str(),
            view.number,
            timeout,
        )
        .await?;
    }
    Ok(())
}

async fn wait_healthy(
    conn: &ConnArgs,
    client: &crate::client::Client,
    org: &str,
    project: &str,
    app: &str,
    revision: u64,
    timeout: std::time::Duration,
) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let mut said = None;
    loop {
        let status: AppStatusView = client.get(&app_url(org, project, app)).await?;
        let now = (
            status.app.revision,
            status.app.state.clone(),
            status.app.ready,
        );
        if said.as_ref() != Some(&now) && !conn.json {
            outln!(
                "  revision {}: {}, {}/{} replicas ready",
                status.app.revision,
                status.app.state,
                status.app.ready,
                status.app.replicas
            );
            said = Some(now);
        }
        if status.app.revision != revision {
            let revisions: Vec<AppRevisionView> = client
                .get(&format!("{}/revisions", app_url(org, project, app)))
                .await?;
            let ours = revisions.iter().find(|r| r.number == revision);
            let newest = revisions.iter().find(|r| r.number == status.app.revision);
            if let (Some(ours), Some(newest)) = (ours, newest)
                && ours.state == "FAILED"
                && newest.origin.starts_with("auto-rollback:")
            {
                anyhow::bail!(
                    "app {app} revision {revision} FAILED: {}; it rolls back by itself to \
                     revision {} as revision {} (`orc app status {app}`)",
                    ours.reason.as_deref().unwrap_or("see orc app history"),
                    newest.origin.trim_start_matches("auto-rollback:"),
                    newest.number
                );
            }
            anyhow::bail!(
                "app {app} moved on to revision {} while this one was rolling out",
                status.app.revision
            );
        }
        match status.app.state.as_str() {
            "HEALTHY" => {
                if !conn.json {
                    outln!(
                        "App {app} is HEALTHY: revision {revision}, {}/{} replicas ready, in {} s.",
                        status.app.ready,
                        status.app.replicas,
                        started.elapsed().as_secs()
                    );
                }
                return Ok(());
            }
            "BLOCKED" | "FAILED" => anyhow::bail!(
                "app {app} is {}: {}",
                status.app.state,
                status.app.reason.as_deref().unwrap_or("see orc app status")
            ),
            _ => {}
        }
        if started.elapsed() >= timeout {
            anyhow::bail!(
                "app {app} is still {} after {} s with {}/{} replicas ready; `orc app status {app}` shows where each is",
                status.app.state,
                timeout.as_secs(),
                status.app.ready,
                status.app.replicas
            );
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

/// `orc app list`: the project's apps.
pub async fn list(conn: &ConnArgs, project: Option<&str>) -> anyhow::Result<()> {
    let client = super::client(conn)?;
    let (org, project) = super::project_of(&client, project).await?;
    let apps: Vec<ProjectAppView> = client.get(&apps_url(&org, &project)).await?;
    if conn.json {
        return super::print_json(&apps);
    }
    if apps.is_empty() {
        outln!("{org}/{project} runs no app yet (orc app init, then orc app deploy).");
        return Ok(());
    }
    let mut table = Table::new(&["APP", "REVISION", "STATE", "READY", "UPDATED"]);
    for app in &apps {
        table.row(vec![
            app.name.clone(),
            app.revision.to_string(),
            app.state.clone(),
            format!("{}/{}", app.ready, app.replicas),
            orc_common::time::format_time(orc_common::Timestamp(app.updated_at)),
        ]);
    }
    out!("{}", table.render());
    Ok(())
}

/// `orc app status APP`: the app's state and each replica.
pub async fn status(conn: &ConnArgs, app: &str, project: Option<&str>) -> anyhow::Result<()> {
    let client = super::client(conn)?;
    let (org, project) = super::project_of(&client, project).await?;
    let view: AppStatusView = client.get(&app_url(&org, &project, app)).await?;
    if conn.json {
        return super::print_json(&view);
    }
    out!("{}", status_text(&org, &project, &view));
    Ok(())
}

pub(crate) fn status_text(org: &str, project: &str, view: &AppStatusView) -> String {
    let app = &view.app;
    let mut out = format!(
        "App {} in {org}/{project}: revision {}, {}, {}/{} replicas ready.\n",
        app.name, app.revision, app.state, app.ready, app.replicas
    );
    if let Some(reason) = &app.reason {
        out.push_str(&format!("  {}\n", orc_common::text::printable(reason)));
    }
    out.push('\n');
    out.push_str(&images_text(&view.images));
    if !view.routes.is_empty() {
        out.push('\n');
        let mut table = Table::new(&["ROUTE", "NAME", "SERVICE", "CERTIFICATE"]);
        for r in &view.routes {
            let certificate = match (&r.certificate, r.kind.as_str()) {
                (Some(words), _) => orc_common::text::printable(words).into_owned(),
                (None, "https") => "none (plain HTTP only)".to_string(),
                (None, _) => "-".to_string(),
            };
            table.row(vec![
                r.kind.clone(),
                r.name.clone(),
                r.service.clone(),
                certificate,
            ]);
        }
        out.push_str(&table.render());
        if view.ingress_addresses.is_empty() {
            out.push_str(
                "  No node of the project accepts ingress yet: orc node ingress enable NODE\n",
            );
        } else {
            out.push_str(&format!(
                "  Point DNS at: {}\n",
                view.ingress_addresses.join(", ")
            ));
        }
    }
    if !view.replicas.is_empty() {
        out.push('\n');
        let ports = view.replicas.iter().any(|r| !r.node_ports.is_empty());
        let mut head = vec![
            "WORKLOAD", "SLOT", "NODE", "ADDRESS", "STATE", "READY", "RESTARTS", "REVISION",
        ];
        if ports {
            head.push("NODE PORTS");
        }
        let mut table = Table::new(&head);
        for r in &view.replicas {
            let mut row = vec![
                r.workload.clone(),
                r.slot.to_string(),
                r.node.clone().unwrap_or_else(|| "-".into()),
                r.address.clone().unwrap_or_else(|| "-".into()),
                r.state.clone(),
                if r.ready { "yes" } else { "no" }.to_string(),
                r.restarts.to_string(),
                r.revision.to_string(),
            ];
            if ports {
                row.push(if r.node_ports.is_empty() {
                    "-".to_string()
                } else {
                    r.node_ports.join(" ")
                });
            }
            table.row(row);
        }
        out.push_str(&table.render());
        // What nodes say of replicas that fail or wait, one line each under the table.
        let said: Vec<String> = view
            .replicas
            .iter()
            .filter_map(|r| {
                let message = r.message.as_deref()?;
                Some(format!(
                    "  {} {}: {}\n",
                    r.workload,
                    r.slot,
                    orc_common::text::printable(message)
                ))
            })
            .collect();
        if !said.is_empty() {
            out.push('\n');
            out.push_str(&said.concat());
        }
    }
    out
}

/// `orc app history APP`: every revision, newest first.
pub async fn history(conn: &ConnArgs, app: &str, project: Option<&str>) -> anyhow::Result<()> {
    let client = super::client(conn)?;
    let (org, project) = super::project_of(&client, project).await?;
    let revisions: Vec<AppRevisionView> = client
        .get(&format!("{}/revisions", app_url(&org, &project, app)))
        .await?;
    if conn.json {
        return super::print_json(&revisions);
    }
    let mut table = Table::new(&["REVISION", "STATE", "ORIGIN", "BY", "CREATED", "DIGEST"]);
    for r in &revisions {
        table.row(vec![
            r.number.to_string(),
            r.state.clone(),
            r.origin.clone(),
            r.created_by.clone().unwrap_or_else(|| "-".into()),
            orc_common::time::format_time(orc_common::Timestamp(r.created_at)),
            r.digest.get(..19).unwrap_or(&r.digest).to_string(),
        ]);
    }
    out!("{}", table.render());
    Ok(())
}

/// `orc app diff APP REV1 REV2`: what changed from one revision to another.
pub async fn diff(
    conn: &ConnArgs,
    app: &str,
    from: u64,
    to: u64,
    project: Option<&str>,
) -> anyhow::Result<()> {
    let client = super::client(conn)?;
    let (org, project) = super::project_of(&client, project).await?;
    let revisions: Vec<AppRevisionView> = client
        .get(&format!("{}/revisions", app_url(&org, &project, app)))
        .await?;
    let find = |n: u64| {
        revisions
            .iter()
            .find(|r| r.number == n)
            .ok_or_else(|| anyhow::anyhow!("app {app} has no revision {n}"))
    };
    let (a, b) = (find(from)?, find(to)?);
    let resolved = |r: &AppRevisionView| -> anyhow::Result<ResolvedApp> {
        Ok(ResolvedApp {
            spec: serde_json::from_value(r.app.clone())?,
            images: r
                .images
                .iter()
                .map(|i| {
                    (
                        i.workload.clone(),
                        ResolvedImage {
                            reference: i.reference.clone(),
                            digest: i.digest.clone(),
                        },
                    )
                })
                .collect(),
        })
    };
    let changes: Vec<ChangeView> =
        orc_app_model::revision::diff(Some(&resolved(a)?), &resolved(b)?)
            .into_iter()
            .map(|c| ChangeView {
                field: c.field,
                from: c.from,
                to: c.to,
            })
            .collect();
    if conn.json {
        return super::print_json(&changes);
    }
    outln!("App {app}, revision {from} -> {to}:");
    out!("{}", changes_text(&changes));
    Ok(())
}

/// `orc app rollback APP REV`: a new revision with that revision's app and digests.
pub async fn rollback(
    conn: &ConnArgs,
    app: &str,
    revision: u64,
    project: Option<&str>,
    wait: Option<std::time::Duration>,
) -> anyhow::Result<()> {
    let client = super::client(conn)?;
    let (org, project) = super::project_of(&client, project).await?;
    let view: AppRevisionView = client
        .post(
            &format!("{}/rollback", app_url(&org, &project, app)),
            &RollbackApp { revision },
        )
        .await?;
    if conn.json {
        return super::print_json(&view);
    }
    outln!(
        "App {app} in {org}/{project}: revision {} (the app and images of revision {revision}) is {}.",
        view.number,
        view.state
    );
    if let Some(reason) = &view.reason {
        outln!("  {reason}");
    }
    if let Some(timeout) = wait {
        wait_healthy(conn, &client, &org, &project, app, view.number, timeout).await?;
    }
    Ok(())
}

/// `orc app remove APP`: stops its replicas; local volumes' data stays on their nodes.
pub async fn remove(conn: &ConnArgs, app: &str, project: Option<&str>) -> anyhow::Result<()> {
    let client = super::client(conn)?;
    let (org, project) = super::project_of(&client, project).await?;
    let _: serde_json::Value = client.delete(&app_url(&org, &project, app)).await?;
    outln!("App {app} removed from {org}/{project}; its replicas stop on their nodes.");
    Ok(())
}

/// `orc app exec APP WORKLOAD [--slot N] -- CMD…`: runs CMD inside a replica and exits with
/// its exit code.
pub async fn exec(
    conn: &ConnArgs,
    app: &str,
    workload: &str,
    slot: Option<u32>,
    project: Option<&str>,
    argv: Vec<String>,
    timeout: std::time::Duration,
) -> anyhow::Result<()> {
    if argv.is_empty() {
        bail!("name the command to run after `--`: orc app exec {app} {workload} -- ls /");
    }
    let client = super::client(conn)?;
    let (org, project) = super::project_of(&client, project).await?;
    let body = AppExecRequest {
        workload: workload.to_string(),
        slot,
        argv,
        timeout_seconds: Some(u32::try_from(timeout.as_secs()).unwrap_or(u32::MAX)),
    };
    let response = client
        .post_streaming(&format!("{}/exec", app_url(&org, &project, app)), &body)
        .await?;
    super::agent::print_exec(response, &format!("in {app}/{workload}")).await
}

/// `orc app logs APP [WORKLOAD] [--follow] [--tail BYTES]`: each replica's output, its lines
/// named by the replica (`web[0] | …`; stderr's `web[0] ! …`).
pub async fn logs(
    conn: &ConnArgs,
    app: &str,
    workload: Option<&str>,
    project: Option<&str>,
    follow: bool,
    tail: u64,
) -> anyhow::Result<()> {
    use std::io::Write as _;
    let client = super::client(conn)?;
    let (org, project) = super::project_of(&client, project).await?;
    let mut query = format!("tail={tail}&follow={follow}");
    if let Some(workload) = workload {
        query.push_str(&format!("&workload={}", crate::client::segment(workload)));
    }
    let mut response = client
        .get_streaming(&format!("{}/logs?{query}", app_url(&org, &project, app)))
        .await?;
    let mut pending: Vec<u8> = Vec::new();
    // What each replica's stream wrote after its last newline, kept for the next chunk.
    let mut partial: std::collections::BTreeMap<(String, String), Vec<u8>> = Default::default();
    let mut failed = Vec::new();
    let mut out = std::io::stdout();
    let lost = |e: reqwest::Error| anyhow::anyhow!("the connection to the zone broke: {e}");
    let mut write_lines = |replica: &str, stream: &str, text: &[u8]| -> std::io::Result<()> {
        let mark = if stream == "stderr" { '!' } else { '|' };
        for line in text.split(|b| *b == b'\n') {
            let line = String::from_utf8_lossy(line);
            writeln!(
                out,
                "{replica} {mark} {}",
                orc_common::text::printable(&line)
            )?;
        }
        out.flush()
    };
    while let Some(chunk) = response.chunk().await.map_err(lost)? {
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let line: AppLogLine = serde_json::from_slice(&line[..end])
                .context("the zone sent a line that is not a log event")?;
            let written = match line {
                AppLogLine::Output {
                    replica,
                    stream,
                    data,
                } => {
                    let data = base64::engine::general_purpose::STANDARD
                        .decode(data)
                        .context("the zone sent output that is not base64")?;
                    let held = partial
                        .entry((replica.clone(), stream.clone()))
                        .or_default();
                    held.extend_from_slice(&data);
                    match held.iter().rposition(|b| *b == b'\n') {
                        Some(last) => {
                            let whole: Vec<u8> = held.drain(..=last).collect();
                            write_lines(&replica, &stream, &whole[..whole.len() - 1])
                        }
                        None => Ok(()),
                    }
                }
                AppLogLine::End { replica, error } => {
                    let mut result = Ok(());
                    for stream in ["stdout", "stderr"] {
                        if let Some(rest) = partial.remove(&(replica.clone(), stream.to_string()))
                            && !rest.is_empty()
                        {
                            result = result.and(write_lines(&replica, stream, &rest));
                        }
                    }
                    if let Some(error) = error {
                        failed.push(format!("{replica}: {error}"));
                    }
                    result
                }
            };
            match written {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
                Err(e) => return Err(e).context("cannot write the replicas' output"),
            }
        }
    }
    if !failed.is_empty() {
        bail!("some output could not be read: {}", failed.join("; "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_counts_services_and_workers() {
        let dir = std::env::temp_dir().join(format!("orc-app-summary-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let file = dir.join("orch.pkl");
        let args = InitArgs {
            file: file.clone(),
            name: "shop".into(),
            image: Some("acme/shop:2".into()),
            replicas: 3,
            port: 8080,
            health: None,
            domains: Vec::new(),
            public: false,
            force: false,
        };
        init(&args).expect("init writes a file");
        let again = init(&args).expect_err("init refuses to replace a file");
        assert!(again.to_string().contains("--force"), "{again}");
        let spec = load(&file).expect("the starter checks");
        assert_eq!(
            summary(Path::new("orch.pkl"), &spec),
            "orch.pkl: app shop checks: 1 service (shop ×3)."
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn init_names_the_flag_that_is_wrong() {
        let args = InitArgs {
            file: PathBuf::from("/nonexistent/orch.pkl"),
            name: "Shop".into(),
            image: None,
            replicas: 1,
            port: 8080,
            health: None,
            domains: Vec::new(),
            public: false,
            force: false,
        };
        let error = init(&args).expect_err("a bad name is refused").to_string();
        assert!(error.starts_with("--name \"Shop\" must be"), "{error}");
        let error = init(&InitArgs {
            name: "shop".into(),
            image: Some("Acme/Shop".into()),
            file: args.file.clone(),
            health: None,
            domains: Vec::new(),
            ..args
        })
        .expect_err("a bad image is refused")
        .to_string();
        assert!(
            error.starts_with("--image: \"Acme/Shop\" is not an image reference"),
            "{error}"
        );
        let error = init(&InitArgs {
            name: "shop".into(),
            image: None,
            domains: vec!["shop.internal".into()],
            ..args
        })
        .expect_err("a domain that is no public name is refused")
        .to_string();
        assert!(
            error.starts_with("--domain \"shop.internal\" is not a public name"),
            "{error}"
        );
    }
}

#[cfg(test)]
mod status_golden {
    use super::*;
    use orc_zone_api_types::views::{AppReplicaView, AppRouteView, ImageView, ProjectAppView};

    fn replica(workload: &str, slot: u32, node: &str, ports: &[&str]) -> AppReplicaView {
        AppReplicaView {
            workload: workload.into(),
            slot,
            revision: 2,
            node: Some(node.into()),
            address: Some(format!("10.96.{slot}.2")),
            state: "running".into(),
            ready: true,
            restarts: 0,
            message: None,
            node_ports: ports.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn app_status_lists_routes_where_to_point_dns_and_node_ports() {
        let route = |kind: &str, name: &str, service: &str| AppRouteView {
            kind: kind.into(),
            name: name.into(),
            service: service.into(),
            certificate: None,
        };
        let mut view = AppStatusView {
            app: ProjectAppView {
                name: "shop".into(),
                revision: 2,
                state: "HEALTHY".into(),
                reason: None,
                ready: 3,
                replicas: 3,
                updated_at: 0,
            },
            images: vec![ImageView {
                workload: "web".into(),
                reference: "acme/shop:2".into(),
                digest: format!("sha256:{}", "ab".repeat(32)),
            }],
            replicas: vec![
                replica("game", 0, "n-00000000000k", &["tcp/25565", "udp/19132"]),
                replica("web", 0, "n-00000000000k", &[]),
                replica("web", 1, "n-00000000000m", &[]),
            ],
            routes: vec![
                AppRouteView {
                    certificate: Some("valid until 2027-03-07".into()),
                    ..route("https", "shop.example.com", "web")
                },
                AppRouteView {
                    certificate: Some(
                        "failed: the HTTP-01 challenge failed: no A record for shop.example.net \
                         (next try 2026-12-08 10:04 UTC)"
                            .into(),
                    ),
                    ..route("https", "shop.example.net", "web")
                },
                route("http", "*", "web"),
                route("tcp", "5432", "db"),
            ],
            ingress_addresses: vec![
                "198.51.100.7 (n-00000000000k)".into(),
                "198.18.0.9 (the pool address of n-00000000000m, n-00000000000n)".into(),
            ],
        };
        crate::commands::check_golden("app-status-ingress", &status_text("acme", "web", &view));
        view.ingress_addresses.clear();
        assert!(
            status_text("acme", "web", &view).contains(
                "No node of the project accepts ingress yet: orc node ingress enable NODE"
            ),
            "a route nobody serves says what to do"
        );
    }
}
