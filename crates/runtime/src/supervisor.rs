//! The node's replicas, kept as the last assignment says, with or without the zone.
//!
//! An [`Assignment`] (the zone's desired replicas for this node, with a generation) is kept
//! on disk as soon as it arrives; an agent that starts reads it back and goes on from it, so
//! replicas keep running, and restart by their policy, while the zone is away. Each pass of
//! [`Supervisor::reconcile`]:
//! - stops and removes the containers no replica of the assignment names, or whose plan
//!   changed (a container carries its plan's digest as a label);
//! - pulls, networks, creates and starts the replicas that have no container;
//! - restarts a replica whose task ended when its policy says so (`always`; `on-failure` on
//!   a non-zero exit), after a back-off that doubles from 1 s to 5 min and starts again
//!   once a run lasted 10 minutes;
//! - probes each running replica (an HTTP GET of its health path, or a TCP connection to its
//!   port) and records whether it is ready.
//!
//! A container found running with the plan it was made for is adopted as it is: an agent
//! restart or upgrade restarts nothing.

use std::collections::{BTreeMap, HashMap};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use crate::containerd::{Containerd, TaskStatus};
use crate::image::{ImageStore, Source};
use crate::network::{self, Subnet};
use crate::registry::RegistryAuth;
use crate::spec::{self, Bind, Replica};

/// The label a container carries with its plan's digest.
const PLAN_LABEL: &str = "orc.plan";
/// The label a container carries with its replica's id.
const REPLICA_LABEL: &str = "orc.replica";

/// When a stopped replica starts again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RestartPolicy {
    /// Whenever it ends.
    Always,
    /// When it ends with a non-zero status.
    OnFailure,
    /// Never.
    Never,
}

/// How a replica shows it is ready.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Probe {
    /// Ready while it runs.
    None,
    /// Ready while a TCP connection to the port succeeds.
    Tcp {
        /// The port.
        port: u16,
    },
    /// Ready while a GET of the path answers 2xx or 3xx.
    Http {
        /// The port.
        port: u16,
        /// The path.
        path: String,
    },
}

/// Where a replica's image comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ImageSource {
    /// A registry: `base` (`https://host:port`) and `repository` (`org/name`).
    Registry {
        /// The registry's URL.
        base: String,
        /// The repository.
        repository: String,
        /// Another registry's user name and password; `None`: the zone's registry, with
        /// the pull grant the assignment carries.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        login: Option<(String, SecretValue)>,
    },
    /// An OCI layout on the node (tests).
    Layout {
        /// Its directory.
        dir: PathBuf,
    },
}

/// A value only the replica may read: kept out of `Debug` and logs.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretValue(pub String);

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<secret>")
    }
}

/// One replica the zone assigns to this node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaPlan {
    /// Unique on the node: lower-case letters, digits and `-`.
    pub id: String,
    /// The app.
    pub app: String,
    /// The service or worker.
    pub workload: String,
    /// The app revision this replica belongs to.
    pub revision: u64,
    /// The image's manifest digest.
    pub digest: String,
    /// Where the image comes from.
    pub source: ImageSource,
    /// Replaces the image's entry point.
    pub command: Option<Vec<String>>,
    /// Replaces the image's arguments.
    pub args: Option<Vec<String>>,
    /// Environment, after the image's.
    pub env: Vec<(String, String)>,
    /// Environment whose values are secrets.
    pub secret_env: Vec<(String, SecretValue)>,
    /// Files under `/run/secrets`: name and value.
    pub secret_files: Vec<(String, SecretValue)>,
    /// Local volumes: name and mount path.
    pub volumes: Vec<(String, String)>,
    /// When it starts again.
    pub restart: RestartPolicy,
    /// CPU limit, millicores.
    pub cpu_millis: u64,
    /// Memory limit, bytes.
    pub memory_bytes: u64,
    /// Its address in the node's workload subnet; `None` for no network.
    pub address: Option<Ipv4Addr>,
    /// How it shows it is ready.
    pub probe: Probe,
    /// Where it resolves names; `None` keeps the image's `/etc/resolv.conf`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns: Option<Dns>,
}

/// A replica's resolver: the node's name server and its search domains.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dns {
    /// The node's name server (its mesh address).
    pub nameserver: Ipv4Addr,
    /// Search domains, its app's first (`shop.web.acme.internal`), so a service's short
    /// name resolves.
    pub search: Vec<String>,
}

impl Dns {
    /// The `resolv.conf` of a replica.
    pub fn resolv_conf(&self) -> String {
        let mut text = format!("nameserver {}\n", self.nameserver);
        if !self.search.is_empty() {
            text.push_str(&format!("search {}\n", self.search.join(" ")));
        }
        text.push_str("options ndots:1 timeout:2 attempts:2\n");
        text
    }
}

impl ReplicaPlan {
    /// The digest of the plan: a container made for another plan is replaced. The revision
    /// is left out: a replica the zone relabels to a newer revision that runs it unchanged
    /// keeps its container.
    pub fn digest(&self) -> String {
        let unlabelled = ReplicaPlan {
            revision: 0,
            ..self.clone()
        };
        let bytes = serde_json::to_vec(&unlabelled).unwrap_or_default();
        let hash = sha2::Sha256::digest(&bytes);
        hash.iter().take(16).map(|b| format!("{b:02x}")).collect()
    }
}

/// What the zone wants this node to run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assignment {
    /// Increases with every change.
    pub generation: u64,
    /// The node's workload subnet.
    pub subnet: Option<ipnet::Ipv4Net>,
    /// Every replica.
    pub replicas: Vec<ReplicaPlan>,
    /// The project's service names and their ready replicas' addresses, as the zone last
    /// said: the node answers them while the zone is away.
    #[serde(default)]
    pub services: BTreeMap<String, Vec<Ipv4Addr>>,
}

/// Where a replica is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Its image or container is being prepared.
    Starting,
    /// Its process runs.
    Running,
    /// It ended and waits to start again.
    BackingOff,
    /// It ended and its policy does not start it again.
    Exited,
    /// It cannot start (the message says why); retried at the next pass.
    Failed,
}

/// A replica as the node sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaStatus {
    /// The replica.
    pub id: String,
    /// Where it is.
    pub phase: Phase,
    /// Whether its probe passes.
    pub ready: bool,
    /// How often it was started again.
    pub restarts: u32,
    /// Its last exit status.
    pub exit_status: Option<u32>,
    /// Why it failed, in words.
    pub message: Option<String>,
    /// The revision of the plan it runs.
    pub revision: u64,
}

#[derive(Debug)]
struct Tracked {
    status: ReplicaStatus,
    started: Instant,
    backoff: Duration,
    retry_at: Option<Instant>,
    /// Probes that failed in a row.
    probe_failures: u32,
}

/// A ready replica is taken as unready once this many probes in a row fail: one slow
/// answer on a busy node does not take it out of its service's names.
pub const UNREADY_AFTER: u32 = 3;

/// How the supervisor is set up.
#[derive(Debug, Clone)]
pub struct Config {
    /// Its directory: the assignment, replicas' files, volumes.
    pub root: PathBuf,
    /// Where secret files are written: a tmpfs (`/run/...`).
    pub secrets_root: PathBuf,
    /// The HTTP client for the zone's registry (trusting the zone's CA).
    pub registry_client: reqwest::Client,
    /// The HTTP client for other registries (trusting the usual public roots).
    pub other_registries_client: reqwest::Client,
    /// The credential for registries.
    pub registry_token: Option<String>,
    /// How long a stopping replica has before SIGKILL.
    pub stop_grace: Duration,
    /// How large a replica's log grows before it is rotated.
    pub log_limit: u64,
    /// The cgroup replicas' cgroups go under, e.g. `/orc`.
    pub cgroup_parent: String,
    /// The prefix of replicas' network namespace names ([`network::DEFAULT_PREFIX`]).
    pub netns_prefix: String,
}

/// The replicas of one node.
#[derive(Debug)]
pub struct Supervisor {
    config: Config,
    client: Containerd,
    images: ImageStore,
    assignment: Mutex<Assignment>,
    tracked: Mutex<HashMap<String, Tracked>>,
    /// The registry credential, replaced with every assignment that brings one.
    registry_token: Mutex<Option<String>>,
    /// Containers told to stop (SIGTERM) and when: each pass removes the ones whose task
    /// ended or whose grace is over, so a slow stop holds up no other replica.
    stopping: Mutex<HashMap<String, Instant>>,
}

const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(300);
const STABLE_RUN: Duration = Duration::from_secs(600);

impl Supervisor {
    /// The supervisor of the containers of `client`'s namespace, going on from the
    /// assignment kept under `config.root` if there is one.
    pub fn new(config: Config, client: Containerd) -> Self {
        let assignment = std::fs::read(config.root.join("assignment.json"))
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        let images = ImageStore::new(config.root.join("images"));
        let registry_token = Mutex::new(config.registry_token.clone());
        Self {
            config,
            client,
            images,
            assignment: Mutex::new(assignment),
            tracked: Mutex::new(HashMap::new()),
            stopping: Mutex::new(HashMap::new()),
            registry_token,
        }
    }

    /// Pulls from now on with `token`.
    pub fn set_registry_token(&self, token: Option<String>) {
        if let Ok(mut held) = self.registry_token.lock() {
            *held = token;
        }
    }

    /// The assignment being kept.
    pub fn assignment(&self) -> Assignment {
        self.assignment
            .lock()
            .map(|a| a.clone())
            .unwrap_or_default()
    }

    /// Takes a new assignment: kept on disk first, then reconciled at the next pass. An
    /// older generation than the one held is ignored.
    pub fn assign(&self, assignment: Assignment) -> std::io::Result<bool> {
        let mut held = self
            .assignment
            .lock()
            .map_err(|_| std::io::Error::other("the assignment lock is poisoned"))?;
        if assignment.generation < held.generation {
            return Ok(false);
        }
        std::fs::create_dir_all(&self.config.root)?;
        let path = self.config.root.join("assignment.json");
        let temp = path.with_extension("json.tmp");
        {
            use std::io::Write as _;
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&temp)?;
            file.write_all(&serde_json::to_vec(&assignment).unwrap_or_default())?;
            file.sync_all()?;
        }
        std::fs::set_permissions(&temp, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
        std::fs::rename(&temp, &path)?;
        *held = assignment;
        Ok(true)
    }

    /// Every replica's status, by id.
    pub fn statuses(&self) -> Vec<ReplicaStatus> {
        let tracked = match self.tracked.lock() {
            Ok(t) => t,
            Err(_) => return Vec::new(),
        };
        let mut all: Vec<ReplicaStatus> = tracked.values().map(|t| t.status.clone()).collect();
        all.sort_by(|a, b| a.id.cmp(&b.id));
        all
    }

    /// Runs `argv` inside replica `id`'s running container, with the replica's environment
    /// (secrets included) as root, no shell, stdin closed; returns its exit status and
    /// output. Killed after `timeout`.
    pub async fn exec_in(
        &self,
        id: &str,
        argv: &[String],
        timeout: Duration,
    ) -> Result<(u32, Vec<u8>, Vec<u8>), String> {
        let assignment = self.assignment();
        let plan = assignment
            .replicas
            .iter()
            .find(|r| r.id == id)
            .ok_or_else(|| format!("this node runs no replica {id}"))?;
        if self.tracked_field(id, |t| t.status.phase) != Some(Phase::Running) {
            return Err(format!("replica {id} is not running"));
        }
        let mut env =
            vec!["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_string()];
        env.extend(plan.env.iter().map(|(k, v)| format!("{k}={v}")));
        env.extend(plan.secret_env.iter().map(|(k, v)| format!("{k}={}", v.0)));
        let process = serde_json::json!({
            "args": argv,
            "cwd": "/",
            "env": env,
            "user": { "uid": 0, "gid": 0 },
            "terminal": false,
        });
        let exec_id = format!(
            "exec-{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default()
        );
        let dir = self.replica_dir(id);
        let (out, err) = (
            dir.join(format!("{exec_id}.out")),
            dir.join(format!("{exec_id}.err")),
        );
        for path in [&out, &err] {
            std::fs::write(path, b"").map_err(|e| format!("{}: {e}", path.display()))?;
        }
        let ran = tokio::time::timeout(
            timeout,
            self.client.exec(id, &exec_id, &process, &out, &err),
        )
        .await;
        let result = match ran {
            Ok(Ok(status)) => Ok((
                status,
                std::fs::read(&out).unwrap_or_default(),
                std::fs::read(&err).unwrap_or_default(),
            )),
            Ok(Err(error)) => Err(error.to_string()),
            Err(_) => {
                let _ = self.client.kill_exec(id, &exec_id, 9).await;
                Err(format!(
                    "killed after its timeout of {} s",
                    timeout.as_secs()
                ))
            }
        };
        let _ = std::fs::remove_file(&out);
        let _ = std::fs::remove_file(&err);
        result
    }

    /// The directory of replica `id`: its logs and writable layer.
    pub fn replica_dir(&self, id: &str) -> PathBuf {
        self.config.root.join("replicas").join(id)
    }

    fn volume_dir(&self, plan: &ReplicaPlan, name: &str) -> PathBuf {
        self.config
            .root
            .join("volumes")
            .join(&plan.app)
            .join(&plan.workload)
            .join(name)
    }

    fn set(&self, id: &str, change: impl FnOnce(&mut Tracked)) {
        if let Ok(mut tracked) = self.tracked.lock() {
            let entry = tracked.entry(id.to_string()).or_insert_with(|| Tracked {
                status: ReplicaStatus {
                    id: id.to_string(),
                    phase: Phase::Starting,
                    ready: false,
                    restarts: 0,
                    exit_status: None,
                    message: None,
                    revision: 0,
                },
                started: Instant::now(),
                backoff: FIRST_BACKOFF,
                retry_at: None,
                probe_failures: 0,
            });
            change(entry);
        }
    }

    fn tracked_field<T>(&self, id: &str, read: impl FnOnce(&Tracked) -> T) -> Option<T> {
        self.tracked.lock().ok()?.get(id).map(read)
    }

    /// One pass: the node's containers brought to the assignment, probes run.
    pub async fn reconcile(&self) -> Vec<ReplicaStatus> {
        let assignment = self.assignment();
        let desired: BTreeMap<&str, &ReplicaPlan> = assignment
            .replicas
            .iter()
            .map(|r| (r.id.as_str(), r))
            .collect();
        let existing = match self.client.containers().await {
            Ok(list) => list,
            Err(error) => {
                tracing::warn!(%error, "cannot list the node's containers");
                return self.statuses();
            }
        };
        let mut present: BTreeMap<String, String> = BTreeMap::new();
        // A container gone by other means is no longer stopping.
        if let Ok(mut stopping) = self.stopping.lock() {
            stopping.retain(|id, _| existing.iter().any(|(e, _)| e == id));
        }
        for (id, labels) in existing {
            let plan_digest = labels.get(PLAN_LABEL).cloned().unwrap_or_default();
            match desired.get(id.as_str()) {
                Some(plan) if plan.digest() == plan_digest => {
                    present.insert(id, plan_digest);
                }
                _ => self.retire(&id).await,
            }
        }
        if let Some(net) = assignment.subnet
            && !desired.is_empty()
            && let Err(error) = network::ensure_bridge(&Subnet { net }).await
        {
            tracing::warn!(%error, "cannot set up the replicas' bridge");
        }
        let stopping: Vec<String> = self
            .stopping
            .lock()
            .map(|s| s.keys().cloned().collect())
            .unwrap_or_default();
        for plan in desired.values() {
            if present.contains_key(&plan.id) {
                self.keep(plan).await;
            } else if !stopping.contains(&plan.id) {
                // (One whose old container is still stopping starts once it is gone.)
                self.create(plan, assignment.subnet).await;
            }
        }
        if let Ok(mut tracked) = self.tracked.lock() {
            tracked.retain(|id, _| desired.contains_key(id.as_str()));
        }
        for plan in desired.values() {
            self.probe(plan).await;
            self.rotate_logs(&plan.id);
            self.set(&plan.id, |t| t.status.revision = plan.revision);
        }
        self.statuses()
    }

    /// A container the assignment no longer wants: SIGTERM the first time, then removed
    /// once its task ended or its grace is over (SIGKILL), each step in a pass of its own.
    async fn retire(&self, id: &str) {
        const SIGTERM: u32 = 15;
        let since = match self.stopping.lock() {
            Ok(mut stopping) => stopping.get(id).copied().or_else(|| {
                stopping.insert(id.to_string(), Instant::now());
                None
            }),
            Err(_) => None,
        };
        let ended = !matches!(
            self.client.task(id).await,
            Ok(Some((_, TaskStatus::Running | TaskStatus::Created)))
        );
        match since {
            None if !ended => {
                tracing::info!(replica = id, "replica stopping");
                if let Ok(mut tracked) = self.tracked.lock() {
                    tracked.remove(id);
                }
                let _ = self.client.kill(id, SIGTERM).await;
            }
            Some(at) if !ended && at.elapsed() < self.config.stop_grace => {}
            _ => {
                self.remove(id).await;
                if let Ok(mut stopping) = self.stopping.lock() {
                    stopping.remove(id);
                }
            }
        }
    }

    async fn remove(&self, id: &str) {
        tracing::info!(replica = id, "replica removed");
        // What was known of the container goes with it: a replica made again in its place
        // starts unready, with no restarts.
        if let Ok(mut tracked) = self.tracked.lock() {
            tracked.remove(id);
        }
        // (Its grace was given by `retire`.)
        let _ = self.client.stop(id, Duration::ZERO).await;
        let _ = self.client.delete_task(id).await;
        if let Err(error) = self.client.delete_container(id).await
            && !error.is_not_found()
        {
            tracing::warn!(replica = id, %error, "cannot delete a container");
        }
        network::detach(&self.config.netns_prefix, id).await;
        let dir = self.replica_dir(id);
        unmount_under(&dir);
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(self.config.secrets_root.join(id));
        // The last replica gone, the cgroups runc made above replicas' own go too.
        if self.tracked.lock().is_ok_and(|t| t.is_empty()) {
            remove_empty_cgroups(&self.config.cgroup_parent);
        }
    }

    /// A replica whose container exists: started again when its task ended and its policy
    /// says so.
    async fn keep(&self, plan: &ReplicaPlan) {
        let task = match self.client.task(&plan.id).await {
            Ok(task) => task,
            Err(error) => {
                self.set(&plan.id, |t| t.status.message = Some(error.to_string()));
                return;
            }
        };
        match task {
            Some((_, TaskStatus::Running)) => self.set(&plan.id, |t| {
                if t.status.phase != Phase::Running {
                    t.status.phase = Phase::Running;
                }
                t.status.message = None;
            }),
            Some((_, TaskStatus::Stopped(code))) => {
                let again = match plan.restart {
                    RestartPolicy::Always => true,
                    RestartPolicy::OnFailure => code != 0,
                    RestartPolicy::Never => false,
                };
                if !again {
                    self.set(&plan.id, |t| {
                        t.status.phase = Phase::Exited;
                        t.status.ready = false;
                        t.status.exit_status = Some(code);
                    });
                    return;
                }
                let now = Instant::now();
                let due = self.tracked_field(&plan.id, |t| t.retry_at).flatten();
                match due {
                    None => self.set(&plan.id, |t| {
                        if t.started.elapsed() >= STABLE_RUN {
                            t.backoff = FIRST_BACKOFF;
                        }
                        t.retry_at = Some(now + t.backoff);
                        t.status.phase = Phase::BackingOff;
                        t.status.ready = false;
                        t.status.exit_status = Some(code);
                    }),
                    Some(at) if at > now => {}
                    Some(_) => {
                        let _ = self.client.delete_task(&plan.id).await;
                        match self.start(plan).await {
                            Ok(()) => self.set(&plan.id, |t| {
                                t.status.restarts += 1;
                                t.status.phase = Phase::Running;
                                t.status.message = None;
                                t.retry_at = None;
                                t.started = Instant::now();
                                t.backoff = (t.backoff * 2).min(MAX_BACKOFF);
                            }),
                            Err(message) => self.set(&plan.id, |t| {
                                t.status.phase = Phase::Failed;
                                t.status.message = Some(message);
                                t.retry_at = Some(Instant::now() + t.backoff);
                            }),
                        }
                    }
                }
            }
            // A container without a task (the node restarted): start it.
            None | Some((_, TaskStatus::Created | TaskStatus::Other)) => {
                let _ = self.client.delete_task(&plan.id).await;
                if let Err(message) = self.start(plan).await {
                    self.set(&plan.id, |t| {
                        t.status.phase = Phase::Failed;
                        t.status.message = Some(message);
                    });
                } else {
                    self.set(&plan.id, |t| t.status.phase = Phase::Running);
                }
            }
        }
    }

    async fn create(&self, plan: &ReplicaPlan, subnet: Option<ipnet::Ipv4Net>) {
        self.set(&plan.id, |t| t.status.phase = Phase::Starting);
        match self.prepare(plan, subnet).await {
            Ok(()) => self.set(&plan.id, |t| {
                t.status.phase = Phase::Running;
                t.status.message = None;
                t.started = Instant::now();
            }),
            Err(message) => {
                tracing::warn!(replica = %plan.id, %message, "replica cannot start");
                self.set(&plan.id, |t| {
                    t.status.phase = Phase::Failed;
                    t.status.message = Some(message);
                });
            }
        }
    }

    fn rootfs_dirs(&self, id: &str) -> (PathBuf, PathBuf) {
        let dir = self.replica_dir(id);
        (dir.join("upper"), dir.join("work"))
    }

    /// The files replica `id` writes its output to: stdout, stderr (each rotated to
    /// `*.log.1` past the log limit).
    pub fn log_paths(&self, id: &str) -> (PathBuf, PathBuf) {
        let dir = self.replica_dir(id);
        (dir.join("stdout.log"), dir.join("stderr.log"))
    }

    async fn prepare(
        &self,
        plan: &ReplicaPlan,
        subnet: Option<ipnet::Ipv4Net>,
    ) -> Result<(), String> {
        let source = match &plan.source {
            ImageSource::Layout { dir } => Source::Layout(dir.clone()),
            ImageSource::Registry {
                base,
                repository,
                login,
            } => Source::Registry {
                client: match login {
                    Some(_) => self.config.other_registries_client.clone(),
                    None => self.config.registry_client.clone(),
                },
                base: base.clone(),
                repository: repository.clone(),
                auth: match login {
                    Some((username, password)) => RegistryAuth::Basic {
                        username: username.clone(),
                        password: password.0.clone(),
                    },
                    None => self
                        .registry_token
                        .lock()
                        .ok()
                        .and_then(|t| t.clone())
                        .map_or(RegistryAuth::Anonymous, RegistryAuth::Bearer),
                },
            },
        };
        let image = self
            .images
            .pull(&source, &plan.digest)
            .await
            .map_err(|e| e.to_string())?;
        let netns = match (plan.address, subnet) {
            (Some(address), Some(net)) => Some(
                network::attach(
                    &self.config.netns_prefix,
                    &plan.id,
                    &Subnet { net },
                    address,
                )
                .await
                .map_err(|e| e.to_string())?,
            ),
            _ => None,
        };
        let dir = self.replica_dir(&plan.id);
        let (upper, work) = self.rootfs_dirs(&plan.id);
        for path in [&upper, &work] {
            std::fs::create_dir_all(path).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        let (stdout, stderr) = self.log_paths(&plan.id);
        for path in [&stdout, &stderr] {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
        let mut binds = Vec::new();
        if let Some(dns) = &plan.dns {
            let path = dir.join("resolv.conf");
            std::fs::write(&path, dns.resolv_conf())
                .map_err(|e| format!("{}: {e}", path.display()))?;
            binds.push(Bind {
                source: path,
                destination: "/etc/resolv.conf".into(),
                read_only: true,
            });
        }
        if !plan.secret_files.is_empty() {
            let secrets = self.config.secrets_root.join(&plan.id);
            write_secrets(&secrets, &plan.secret_files)?;
            binds.push(Bind {
                source: secrets,
                destination: "/run/secrets".into(),
                read_only: true,
            });
        }
        for (name, path) in &plan.volumes {
            let volume = self.volume_dir(plan, name);
            std::fs::create_dir_all(&volume).map_err(|e| format!("{}: {e}", volume.display()))?;
            binds.push(Bind {
                source: volume,
                destination: path.clone(),
                read_only: false,
            });
        }
        let mut env = plan.env.clone();
        env.extend(
            plan.secret_env
                .iter()
                .map(|(k, v)| (k.clone(), v.0.clone())),
        );
        let user = spec::resolve_user(&image.run.user, &image.layers)?;
        let replica = Replica {
            args: spec::resolve_args(plan.command.as_deref(), plan.args.as_deref(), &image.run),
            env: spec::merge_env(&image.run.env, &env),
            cwd: image.run.working_dir.clone(),
            user,
            hostname: plan.workload.clone(),
            netns,
            cpu_millis: plan.cpu_millis,
            memory_bytes: plan.memory_bytes,
            cgroup: format!(
                "{}/{}",
                self.config.cgroup_parent.trim_end_matches('/'),
                plan.id
            ),
            binds,
        };
        if replica.args.is_empty() {
            return Err("the image names no command and the app gives none".into());
        }
        let labels = HashMap::from([
            (PLAN_LABEL.to_string(), plan.digest()),
            (REPLICA_LABEL.to_string(), plan.id.clone()),
        ]);
        std::fs::write(
            dir.join("layers.json"),
            serde_json::to_vec(&image.layers).unwrap_or_default(),
        )
        .map_err(|e| e.to_string())?;
        self.client
            .create_container(&plan.id, &spec::runtime_spec(&replica), labels)
            .await
            .map_err(|e| e.to_string())?;
        self.start(plan).await
    }

    async fn start(&self, plan: &ReplicaPlan) -> Result<(), String> {
        let dir = self.replica_dir(&plan.id);
        let layers: Vec<PathBuf> = std::fs::read(dir.join("layers.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or_else(|| format!("{} holds no layer list", dir.display()))?;
        let (upper, work) = self.rootfs_dirs(&plan.id);
        let (stdout, stderr) = self.log_paths(&plan.id);
        self.client
            .start_task(
                &plan.id,
                vec![spec::rootfs_mount(&layers, &upper, &work)],
                &stdout,
                &stderr,
            )
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    async fn probe(&self, plan: &ReplicaPlan) {
        let running = self.tracked_field(&plan.id, |t| t.status.phase == Phase::Running);
        if running != Some(true) {
            return;
        }
        let ready = match (&plan.probe, plan.address) {
            (Probe::None, _) => true,
            (_, None) => true,
            (Probe::Tcp { port }, Some(address)) => {
                let target = SocketAddr::from((address, *port));
                matches!(
                    tokio::time::timeout(
                        Duration::from_secs(1),
                        tokio::net::TcpStream::connect(target)
                    )
                    .await,
                    Ok(Ok(_))
                )
            }
            (Probe::Http { port, path }, Some(address)) => http_ok(address, *port, path).await,
        };
        self.set(&plan.id, |t| {
            if ready {
                t.probe_failures = 0;
                t.status.ready = true;
            } else {
                t.probe_failures += 1;
                if t.probe_failures >= UNREADY_AFTER {
                    t.status.ready = false;
                }
            }
        });
    }

    fn rotate_logs(&self, id: &str) {
        let (stdout, stderr) = self.log_paths(id);
        for path in [stdout, stderr] {
            let big = std::fs::metadata(&path).is_ok_and(|m| m.len() > self.config.log_limit);
            if big {
                // Copy, then truncate: the shim holds the file open in append mode.
                let kept = path.with_extension("log.1");
                if std::fs::copy(&path, &kept).is_ok() {
                    let _ = std::fs::OpenOptions::new()
                        .write(true)
                        .truncate(true)
                        .open(&path);
                }
            }
        }
    }
}

/// Removes cgroup `path` (`/orc/<node id>`) and then each parent below the root while
/// it is empty, in every cgroup hierarchy this process sees mounted. One still in use
/// stays: the kernel refuses to remove a cgroup with processes or children.
fn remove_empty_cgroups(path: &str) {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mounts = mountinfo.lines().filter_map(|line| {
        let (head, tail) = line.split_once(" - ")?;
        let fstype = tail.split_whitespace().next()?;
        matches!(fstype, "cgroup" | "cgroup2")
            .then(|| head.split_whitespace().nth(4))
            .flatten()
    });
    for mount in mounts {
        let mut at = path.trim_matches('/');
        while !at.is_empty() {
            if std::fs::remove_dir(Path::new(mount).join(at)).is_err() {
                break;
            }
            at = at.rsplit_once('/').map_or("", |(parent, _)| parent);
        }
    }
}

/// An HTTP/1.1 GET over a plain TCP connection: ready on a 2xx or 3xx status line.
async fn http_ok(address: Ipv4Addr, port: u16, path: &str) -> bool {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let attempt = async {
        let mut stream = tokio::net::TcpStream::connect((address, port)).await.ok()?;
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {address}:{port}\r\nUser-Agent: orc-agent\r\nConnection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut head = [0u8; 32];
        let n = stream.read(&mut head).await.ok()?;
        let line = String::from_utf8_lossy(&head[..n]).into_owned();
        let code: u16 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some((200..400).contains(&code))
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(1), attempt).await,
        Ok(Some(true))
    )
}

fn write_secrets(dir: &Path, files: &[(String, SecretValue)]) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
    let _ = std::fs::remove_dir_all(dir);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    for (name, value) in files {
        if name.contains('/') || name.starts_with('.') {
            return Err(format!("secret name {name:?} is not a file name"));
        }
        let path = dir.join(name);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o400)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        std::io::Write::write_all(&mut file, value.0.as_bytes())
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// Unmounts whatever is mounted below `dir` (a replica's leftover mounts), deepest first.
pub fn unmount_under(dir: &Path) {
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mounts") else {
        return;
    };
    let prefix = dir.display().to_string();
    let mut ours: Vec<&str> = mounts
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter(|m| m.starts_with(&prefix))
        .collect();
    ours.sort_by_key(|m| std::cmp::Reverse(m.len()));
    for mount in ours {
        let _ = rustix::mount::unmount(mount, rustix::mount::UnmountFlags::DETACH);
    }
}
