//! One slot: a supervised child process of an app binary, restarted when it exits.
//!
//! A slot's task owns its process. It writes the slot's runtime dir (mode 0700) with one
//! file per file-delivered param (mode 0600) before every start, reads the process's output
//! into the slot's log, restarts it after an exit following the [`RestartPolicy`], and on a
//! command replaces it (new generation) or stops it for good. Stopping sends SIGTERM to the
//! process group, then SIGKILL after the grace period, and removes the runtime dir so no
//! secret file outlives the process.
//!
//! The environment of an app holds only what the zone puts there (see `docs/zone/apps.md`):
//! a few variables of the zone's own environment ([`INHERITED_ENV`]), the app's configured
//! environment and the `ORC_*` variables; nothing else of the zone's environment leaks in.
//!
//! Where a slot runs as a user of its own ([`run_as`](super::run_as)), its runtime dir is
//! under the runtime root instead of the data dir, owned by that user, and is the process's
//! working dir; `ORC_RUNTIME_DIR`, every `*_FILE` variable and `HOME` point there. A binary
//! that user cannot reach runs as the zone's user, with a warning in the slot's log.

use std::collections::BTreeMap;
use std::fs::DirBuilder;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt as _, AsyncRead, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::config::AppBinary;
use super::logs::{Level, LogSource, SlotLog};
use super::params::ParamFile;
use super::policy::RestartPolicy;
use super::run_as::{self, Identity, SlotUser};
use orc_zone_model::{NodeId, PoolId};

/// The `RUST_LOG` an app gets when neither the zone's environment nor the app's config sets
/// one: everything of orc's own crates down to `debug`, and `info` of their dependencies.
pub const DEFAULT_APP_LOG_FILTER: &str = "info,orc=debug";

/// Variables of the zone's environment that every app gets too.
pub const INHERITED_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LANG",
    "LC_ALL",
    "TZ",
    "TMPDIR",
    "RUST_LOG",
    "RUST_BACKTRACE",
];

/// Everything needed to start one process of a slot.
#[derive(Debug, Clone)]
pub(crate) struct Launch {
    pub binary: AppBinary,
    /// The pool's identity when its slots run as one (`None`: the zone's user), leased from
    /// before its binary was installed for it; a slot takes the one of its first launch.
    pub identity: Option<Arc<Identity>>,
    /// Inline variables (`ORC_SLOT`, `ORC_PARAM_<NAME>`, …); never a secret.
    pub env: BTreeMap<String, String>,
    /// Files written into the runtime dir; their paths go into their variables.
    pub files: Vec<ParamFile>,
    pub runtime_dir: PathBuf,
    /// The pool generation this launch carries.
    pub generation: u64,
    /// Values to redact from the process's output.
    pub secrets: Vec<String>,
}

/// A slot's process could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The runtime dir or a param file could not be written.
    #[error("cannot prepare the runtime dir {path}")]
    RuntimeDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The executable could not be run.
    #[error("cannot run {path}")]
    Exec {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What the supervisor shows of a slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotStatus {
    pub node_id: NodeId,
    pub pool_id: PoolId,
    pub slot: u32,
    /// The pool generation of the current (or next) process.
    pub generation: u64,
    /// The current process, while one runs.
    pub pid: Option<u32>,
    /// When the current process started; `None` while none runs.
    pub up_since: Option<Instant>,
    /// Starts after an unexpected exit, since the slot was deployed.
    pub restarts: u32,
    /// Exits in a row without a stable run (drives the backoff).
    pub exits_in_a_row: u32,
    /// The wait before the next start, while backing off.
    pub backoff: Option<Duration>,
    /// How the last process ended (`exit status: 3`).
    pub last_exit: Option<String>,
}

pub(crate) enum SlotCommand {
    Replace(Box<Launch>),
    Stop(oneshot::Sender<()>),
}

/// What a slot's task needs besides its launch.
#[derive(Debug, Clone)]
pub(crate) struct SlotContext {
    pub node_id: NodeId,
    pub log: Arc<SlotLog>,
    pub status: Arc<Mutex<SlotStatus>>,
    pub policy: RestartPolicy,
    pub stop_grace: Duration,
    /// Where the slot's runtime dir goes when it does not run as the zone's user.
    pub runtime_root: PathBuf,
}

impl SlotContext {
    fn note(&self, level: Level, words: &str) {
        self.log.push(
            &self.node_id,
            LogSource::Supervisor,
            Some(level),
            words,
            &[],
        );
    }

    fn update(&self, change: impl FnOnce(&mut SlotStatus)) {
        if let Ok(mut status) = self.status.lock() {
            change(&mut status);
        }
    }
}

/// The handle of a running slot task.
#[derive(Debug)]
pub(crate) struct SlotHandle {
    pub pool_id: PoolId,
    pub status: Arc<Mutex<SlotStatus>>,
    commands: mpsc::UnboundedSender<SlotCommand>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for SlotCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SlotCommand::Replace(launch) => write!(f, "Replace(generation {})", launch.generation),
            SlotCommand::Stop(_) => f.write_str("Stop"),
        }
    }
}

impl SlotHandle {
    /// Starts the slot's first process now (so a deploy can report a failure to start) and
    /// the task that supervises it.
    pub fn start(
        pool_id: PoolId,
        launch: Launch,
        context: SlotContext,
    ) -> Result<SlotHandle, SpawnError> {
        let slot = context
            .status
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .slot;
        let user = SlotUser::for_slot(
            launch.identity.clone(),
            &context.runtime_root,
            &launch.runtime_dir,
            &pool_id,
            slot,
        );
        let child = spawn_process(&launch, &context, &user)?;
        let (commands, receiver) = mpsc::unbounded_channel();
        let status = context.status.clone();
        let task = tokio::spawn(supervise(child, launch, context, user, receiver));
        Ok(SlotHandle {
            pool_id,
            status,
            commands,
            task,
        })
    }

    /// A snapshot of the slot's status.
    pub fn snapshot(&self) -> Option<SlotStatus> {
        self.status.lock().ok().map(|s| s.clone())
    }

    /// Replaces the process with one of `launch`'s generation. The status shows the new
    /// generation (not yet up) at once, so the rollout does not ask twice.
    pub fn replace(&self, launch: Launch) {
        if let Ok(mut status) = self.status.lock() {
            status.generation = launch.generation;
            status.up_since = None;
        }
        let _ = self.commands.send(SlotCommand::Replace(Box::new(launch)));
    }

    /// Stops the process (SIGTERM, then SIGKILL after the grace period) and waits for it.
    pub async fn stop(self) {
        let (done, wait) = oneshot::channel();
        if self.commands.send(SlotCommand::Stop(done)).is_ok() {
            let _ = wait.await;
        }
        let _ = self.task.await;
    }
}

/// Where and as whom one process of a slot runs.
struct Placement {
    runtime_dir: PathBuf,
    current_dir: Option<PathBuf>,
    /// `None`: the zone's own user.
    identity: Option<Identity>,
}

/// The slot's own user and runtime dir, unless that user cannot reach the binary: then the
/// zone's user, so a platform installed under `/root` keeps working, said in the slot's log.
fn place(launch: &Launch, context: &SlotContext, user: &SlotUser) -> Placement {
    let zone_user = || Placement {
        runtime_dir: launch.runtime_dir.clone(),
        current_dir: launch.runtime_dir.parent().map(Path::to_path_buf),
        identity: None,
    };
    let SlotUser::Dropped {
        identity,
        runtime_dir,
    } = user
    else {
        return zone_user();
    };
    let binary = &launch.binary.path;
    match run_as::unreachable_part(binary, **identity) {
        None => Placement {
            runtime_dir: runtime_dir.clone(),
            current_dir: Some(runtime_dir.clone()),
            identity: Some(**identity),
        },
        Some(part) => {
            let words = format!(
                "{} is not reachable by an unprivileged user ({} denies uid {}); the slot runs \
                 as the zone's user",
                binary.display(),
                part.display(),
                identity.uid
            );
            tracing::warn!(
                node = %context.node_id,
                binary = %binary.display(),
                blocked_at = %part.display(),
                "{words}"
            );
            context.note(Level::Warn, &words);
            zone_user()
        }
    }
}

/// Writes the runtime dir fresh: 0700, one 0600 file per file-delivered param, all owned by
/// the placement's identity (chowned last, so the slot cannot touch them half-written).
fn write_runtime_dir(launch: &Launch, placement: &Placement) -> Result<(), SpawnError> {
    let dir = &placement.runtime_dir;
    let failed = |source| SpawnError::RuntimeDir {
        path: dir.clone(),
        source,
    };
    if let Some(parent) = dir.parent() {
        match placement.identity {
            None => DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(failed)?,
            Some(_) => run_as::prepare_root(parent).map_err(failed)?,
        }
    }
    DirBuilder::new().mode(0o700).create(dir).map_err(failed)?;
    for file in &launch.files {
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(dir.join(&file.file_name))
            .map_err(failed)?;
        out.write_all(file.text.0.as_bytes()).map_err(failed)?;
        if let Some(Identity { uid, gid }) = placement.identity {
            std::os::unix::fs::fchown(&out, Some(uid), Some(gid)).map_err(failed)?;
        }
    }
    if let Some(Identity { uid, gid }) = placement.identity {
        std::os::unix::fs::chown(dir, Some(uid), Some(gid)).map_err(failed)?;
    }
    Ok(())
}

/// Removes the slot's runtime dirs: the one in the data dir and its own, if it has one (a
/// slot may have used either, when its binary changed reachability).
fn remove_runtime_dirs(launch: &Launch, user: &SlotUser) {
    remove_runtime_dir(&launch.runtime_dir);
    if let SlotUser::Dropped { runtime_dir, .. } = user {
        remove_runtime_dir(runtime_dir);
    }
}

fn remove_runtime_dir(dir: &Path) {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            tracing::warn!(dir = %dir.display(), %error, "cannot remove an app runtime dir");
        }
    }
}

fn spawn_process(
    launch: &Launch,
    context: &SlotContext,
    user: &SlotUser,
) -> Result<Child, SpawnError> {
    let placement = place(launch, context, user);
    remove_runtime_dirs(launch, user);
    // A process that does not start leaves no secret file behind: a failed first start
    // has no slot task to clean up after it.
    let cleaned = |error| {
        remove_runtime_dirs(launch, user);
        error
    };
    write_runtime_dir(launch, &placement).map_err(cleaned)?;
    let mut command = Command::new(&launch.binary.path);
    command.args(&launch.binary.args).env_clear();
    for name in INHERITED_ENV {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    // The slot's log keeps every level and filters when read (`orc logs --level debug`),
    // so an app logs orc's debug lines unless the zone or the app says otherwise.
    if std::env::var_os("RUST_LOG").is_none() {
        command.env("RUST_LOG", DEFAULT_APP_LOG_FILTER);
    }
    command.envs(&launch.binary.env).envs(&launch.env);
    command.env("ORC_RUNTIME_DIR", &placement.runtime_dir);
    for file in &launch.files {
        command.env(&file.env, placement.runtime_dir.join(&file.file_name));
    }
    if let Some(dir) = &placement.current_dir {
        command.current_dir(dir);
    }
    if let Some(Identity { uid, gid }) = placement.identity {
        // The zone's HOME and USER are root's: the slot's user has no home but its runtime
        // dir, and no name.
        command
            .uid(uid)
            .gid(gid)
            .env("HOME", &placement.runtime_dir)
            .env_remove("USER");
    }
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    let mut child = command
        .spawn()
        .map_err(|source| SpawnError::Exec {
            path: launch.binary.path.clone(),
            source,
        })
        .map_err(cleaned)?;
    let pid = child.id();
    if let Some(out) = child.stdout.take() {
        tokio::spawn(read_output(
            out,
            context.clone(),
            LogSource::Stdout,
            launch.secrets.clone(),
        ));
    }
    if let Some(err) = child.stderr.take() {
        tokio::spawn(read_output(
            err,
            context.clone(),
            LogSource::Stderr,
            launch.secrets.clone(),
        ));
    }
    context.update(|s| {
        s.pid = pid;
        s.up_since = Some(Instant::now());
        s.generation = launch.generation;
        s.backoff = None;
    });
    context.note(
        Level::Info,
        &format!(
            "started process {} (generation {})",
            pid.map_or_else(|| "?".to_string(), |p| p.to_string()),
            launch.generation
        ),
    );
    Ok(child)
}

async fn read_output(
    stream: impl AsyncRead + Unpin,
    context: SlotContext,
    source: LogSource,
    secrets: Vec<String>,
) {
    let mut reader = BufReader::new(stream);
    let mut buffer = Vec::new();
    loop {
        buffer.clear();
        match reader.read_until(b'\n', &mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let text = String::from_utf8_lossy(&buffer);
                context
                    .log
                    .push(&context.node_id, source, None, &text, &secrets);
            }
        }
    }
}

fn signal_group(pid: u32, signal: rustix::process::Signal) {
    if let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process_group(pid, signal);
    }
}

/// SIGTERM to the process group, SIGKILL after `grace`; returns once the process is reaped.
async fn stop_process(child: &mut Child, grace: Duration, context: &SlotContext) {
    let Some(pid) = child.id() else {
        let _ = child.wait().await;
        return;
    };
    signal_group(pid, rustix::process::Signal::TERM);
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(_) => context.note(Level::Info, &format!("process {pid} stopped")),
        Err(_) => {
            signal_group(pid, rustix::process::Signal::KILL);
            let _ = child.kill().await;
            context.note(
                Level::Warn,
                &format!("process {pid} did not stop within {grace:?}; killed"),
            );
        }
    }
}

enum Next {
    Start,
    Replace(Box<Launch>),
    Stop(Option<oneshot::Sender<()>>),
}

async fn wait_or_command(
    delay: Duration,
    commands: &mut mpsc::UnboundedReceiver<SlotCommand>,
) -> Next {
    tokio::select! {
        () = tokio::time::sleep(delay) => Next::Start,
        command = commands.recv() => match command {
            Some(SlotCommand::Replace(launch)) => Next::Replace(launch),
            Some(SlotCommand::Stop(done)) => Next::Stop(Some(done)),
            None => Next::Stop(None),
        },
    }
}

async fn supervise(
    first: Child,
    mut launch: Launch,
    context: SlotContext,
    user: SlotUser,
    mut commands: mpsc::UnboundedReceiver<SlotCommand>,
) {
    let mut next_child = Some(first);
    let mut exits: u32 = 0;
    loop {
        let next = match next_child.take() {
            Some(child) => run_one(child, &context, &mut commands, &mut exits).await,
            None => match spawn_process(&launch, &context, &user) {
                Ok(child) => {
                    next_child = Some(child);
                    continue;
                }
                Err(error) => {
                    exits = exits.saturating_add(1);
                    let delay = context.policy.delay(exits);
                    context.note(
                        Level::Error,
                        &format!(
                            "{error}: {}; trying again in {delay:?}",
                            source_words(&error)
                        ),
                    );
                    context.update(|s| {
                        s.pid = None;
                        s.up_since = None;
                        s.exits_in_a_row = exits;
                        s.backoff = Some(delay);
                    });
                    wait_or_command(delay, &mut commands).await
                }
            },
        };
        match next {
            Next::Start => {}
            Next::Replace(new_launch) => {
                context.note(
                    Level::Info,
                    &format!(
                        "replacing the process: generation {} → {}",
                        launch.generation, new_launch.generation
                    ),
                );
                launch = *new_launch;
                exits = 0;
            }
            Next::Stop(done) => {
                remove_runtime_dirs(&launch, &user);
                context.update(|s| {
                    s.pid = None;
                    s.up_since = None;
                    s.backoff = None;
                });
                if let Some(done) = done {
                    let _ = done.send(());
                }
                return;
            }
        }
    }
}

fn source_words(error: &SpawnError) -> String {
    match error {
        SpawnError::RuntimeDir { source, .. } | SpawnError::Exec { source, .. } => {
            source.to_string()
        }
    }
}

/// Runs one process until it exits (then waits out the backoff) or a command arrives.
async fn run_one(
    mut child: Child,
    context: &SlotContext,
    commands: &mut mpsc::UnboundedReceiver<SlotCommand>,
    exits: &mut u32,
) -> Next {
    let started = Instant::now();
    let pid = child.id().unwrap_or(0);
    tokio::select! {
        exit = child.wait() => {
            let ran_for = started.elapsed();
            *exits = context.policy.exits_in_a_row(*exits, ran_for);
            let delay = context.policy.delay(*exits);
            let how = match exit {
                Ok(status) => status.to_string(),
                Err(error) => format!("unknown exit ({error})"),
            };
            context.note(
                Level::Warn,
                &format!(
                    "process {pid} ended ({how}) after {:.1} s; starting again in {delay:?}",
                    ran_for.as_secs_f64()
                ),
            );
            let count = *exits;
            context.update(|s| {
                s.pid = None;
                s.up_since = None;
                s.restarts = s.restarts.saturating_add(1);
                s.exits_in_a_row = count;
                s.backoff = Some(delay);
                s.last_exit = Some(how);
            });
            tracing::warn!(node = %context.node_id, pid, "app process ended; restarting");
            wait_or_command(delay, commands).await
        }
        command = commands.recv() => {
            stop_process(&mut child, context.stop_grace, context).await;
            match command {
                Some(SlotCommand::Replace(new_launch)) => Next::Replace(new_launch),
                Some(SlotCommand::Stop(done)) => Next::Stop(Some(done)),
                None => Next::Stop(None),
            }
        }
    }
}
