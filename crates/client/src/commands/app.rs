//! `orc app`: a project's applications, from their `orch.pkl` files.
//!
//! `init`, `check` and `schema` work without a zone: they write, evaluate and print app files
//! on this machine. Evaluation is pure Rust (`orc_app_model::pkl`); what reaches a zone is
//! the checked app as JSON, which the zone checks again.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use orc_app_model::init::Starter;
use orc_app_model::schema::{Check, typed_module};
use orc_app_model::{AppSpec, ImageRef, WorkloadKind, pkl};

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
            force: false,
        };
        let error = init(&args).expect_err("a bad name is refused").to_string();
        assert!(error.starts_with("--name \"Shop\" must be"), "{error}");
        let error = init(&InitArgs {
            name: "shop".into(),
            image: Some("Acme/Shop".into()),
            ..args
        })
        .expect_err("a bad image is refused")
        .to_string();
        assert!(
            error.starts_with("--image: \"Acme/Shop\" is not an image reference"),
            "{error}"
        );
    }
}
