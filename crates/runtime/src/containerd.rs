//! containerd over its gRPC API, on its unix socket: containers, tasks, the daemon's version.
//!
//! Every call carries the containerd namespace the runtime works in (the
//! `containerd-namespace` header), so orc's containers never mix with anyone else's on a
//! shared daemon. The root filesystem of a task is the runtime's own overlay mount, passed
//! with the task; containerd's snapshotter and content store are not used. The container's
//! spec is an OCI runtime spec as JSON.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tonic::Request;
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, Endpoint};

/// The generated messages and clients, in modules that follow containerd's proto packages.
#[allow(
    missing_docs,
    clippy::all,
    unused_qualifications,
    missing_debug_implementations
)]
pub mod api {
    /// `containerd.*`
    pub mod containerd {
        /// `containerd.types`
        pub mod types {
            tonic::include_proto!("containerd.types");
        }
        /// `containerd.v1.types`
        pub mod v1 {
            /// `containerd.v1.types`
            pub mod types {
                tonic::include_proto!("containerd.v1.types");
            }
        }
        /// `containerd.services.*`
        pub mod services {
            /// `containerd.services.containers`
            pub mod containers {
                /// `containerd.services.containers.v1`
                pub mod v1 {
                    tonic::include_proto!("containerd.services.containers.v1");
                }
            }
            /// `containerd.services.tasks`
            pub mod tasks {
                /// `containerd.services.tasks.v1`
                pub mod v1 {
                    tonic::include_proto!("containerd.services.tasks.v1");
                }
            }
            /// `containerd.services.version`
            pub mod version {
                /// `containerd.services.version.v1`
                pub mod v1 {
                    tonic::include_proto!("containerd.services.version.v1");
                }
            }
        }
    }
    pub use containerd::services::containers::v1 as containers;
    pub use containerd::services::tasks::v1 as tasks;
    pub use containerd::services::version::v1 as version;
    pub use containerd::types;
    pub use containerd::v1::types as task;
}

use api::containers::containers_client::ContainersClient;
use api::tasks::tasks_client::TasksClient;
use api::version::version_client::VersionClient;

/// The runtime the containers use: runc through containerd's v2 shim.
pub const RUNC_RUNTIME: &str = "io.containerd.runc.v2";

/// The type containerd reads a container's spec as.
const SPEC_TYPE: &str = "types.containerd.io/opencontainers/runtime-spec/1/Spec";

/// The type containerd reads an exec's process as.
const PROCESS_TYPE: &str = "types.containerd.io/opencontainers/runtime-spec/1/Process";

/// A containerd call that failed.
#[derive(Debug, thiserror::Error)]
pub enum ContainerdError {
    /// The socket could not be reached.
    #[error("cannot reach containerd at {socket}: {reason}")]
    Connect {
        /// The socket.
        socket: PathBuf,
        /// Why.
        reason: String,
    },
    /// The daemon answered with an error.
    #[error("containerd refused to {what}: {status}")]
    Call {
        /// What was asked.
        what: &'static str,
        /// containerd's answer.
        status: Box<tonic::Status>,
    },
}

impl ContainerdError {
    /// Whether the daemon said the object does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, ContainerdError::Call { status, .. } if status.code() == tonic::Code::NotFound)
    }

    /// Whether the daemon said the object exists already.
    pub fn is_already_exists(&self) -> bool {
        matches!(self, ContainerdError::Call { status, .. } if status.code() == tonic::Code::AlreadyExists)
    }
}

type Result<T> = std::result::Result<T, ContainerdError>;

fn call(what: &'static str) -> impl FnOnce(tonic::Status) -> ContainerdError {
    move |status| ContainerdError::Call {
        what,
        status: Box::new(status),
    }
}

/// A task's state as containerd reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    /// Created, not started.
    Created,
    /// Running.
    Running,
    /// Exited with this status.
    Stopped(u32),
    /// Paused or unknown.
    Other,
}

/// A connection to containerd, in one namespace. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Containerd {
    channel: Channel,
    namespace: MetadataValue<tonic::metadata::Ascii>,
    socket: PathBuf,
}

impl Containerd {
    /// Connects to the daemon at `socket`, working in containerd namespace `namespace`.
    pub async fn connect(socket: &Path, namespace: &str) -> Result<Self> {
        let fail = |reason: String| ContainerdError::Connect {
            socket: socket.to_path_buf(),
            reason,
        };
        let namespace: MetadataValue<tonic::metadata::Ascii> = namespace
            .parse()
            .map_err(|_| fail(format!("{namespace:?} is not a namespace name")))?;
        let path = socket.to_path_buf();
        // The URI is not used: every connection goes to the socket.
        let channel = Endpoint::try_from("http://containerd.invalid")
            .map_err(|e| fail(e.to_string()))?
            .connect_timeout(Duration::from_secs(5))
            .connect_with_connector(tower::service_fn(move |_| {
                let path = path.clone();
                async move {
                    let stream = tokio::net::UnixStream::connect(path).await?;
                    Ok::<_, std::io::Error>(TokioIo::new(stream))
                }
            }))
            .await
            .map_err(|e| fail(format!("{e}: {}", source_chain(&e))))?;
        Ok(Self {
            channel,
            namespace,
            socket: socket.to_path_buf(),
        })
    }

    /// The socket this connects to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    fn request<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        request
            .metadata_mut()
            .insert("containerd-namespace", self.namespace.clone());
        request
    }

    /// The daemon's version.
    pub async fn version(&self) -> Result<String> {
        let reply = VersionClient::new(self.channel.clone())
            .version(self.request(()))
            .await
            .map_err(call("tell its version"))?;
        Ok(reply.into_inner().version)
    }

    /// Creates container `id` running `spec` (an OCI runtime spec) with `labels`.
    pub async fn create_container(
        &self,
        id: &str,
        spec: &serde_json::Value,
        labels: std::collections::HashMap<String, String>,
    ) -> Result<()> {
        let container = api::containers::Container {
            id: id.to_string(),
            labels,
            image: String::new(),
            runtime: Some(api::containers::container::Runtime {
                name: RUNC_RUNTIME.to_string(),
                options: None,
            }),
            spec: Some(prost_types::Any {
                type_url: SPEC_TYPE.to_string(),
                value: serde_json::to_vec(spec).unwrap_or_default(),
            }),
            ..Default::default()
        };
        ContainersClient::new(self.channel.clone())
            .create(self.request(api::containers::CreateContainerRequest {
                container: Some(container),
            }))
            .await
            .map_err(call("create a container"))?;
        Ok(())
    }

    /// Every container of the namespace, with its labels.
    pub async fn containers(
        &self,
    ) -> Result<Vec<(String, std::collections::HashMap<String, String>)>> {
        let reply = ContainersClient::new(self.channel.clone())
            .list(self.request(api::containers::ListContainersRequest { filters: vec![] }))
            .await
            .map_err(call("list containers"))?;
        Ok(reply
            .into_inner()
            .containers
            .into_iter()
            .map(|c| (c.id, c.labels))
            .collect())
    }

    /// Deletes container `id` (its task must be gone).
    pub async fn delete_container(&self, id: &str) -> Result<()> {
        ContainersClient::new(self.channel.clone())
            .delete(self.request(api::containers::DeleteContainerRequest { id: id.to_string() }))
            .await
            .map_err(call("delete a container"))?;
        Ok(())
    }

    /// Creates the task of container `id` on `rootfs`, its stdout and stderr appended to
    /// the files named (which must exist), and starts it; returns its pid.
    pub async fn start_task(
        &self,
        id: &str,
        rootfs: Vec<api::types::Mount>,
        stdout: &Path,
        stderr: &Path,
    ) -> Result<u32> {
        let mut tasks = TasksClient::new(self.channel.clone());
        tasks
            .create(self.request(api::tasks::CreateTaskRequest {
                container_id: id.to_string(),
                rootfs,
                stdin: String::new(),
                stdout: stdout.display().to_string(),
                stderr: stderr.display().to_string(),
                terminal: false,
                options: None,
                runtime_path: String::new(),
            }))
            .await
            .map_err(call("create a task"))?;
        let started = tasks
            .start(self.request(api::tasks::StartRequest {
                container_id: id.to_string(),
                exec_id: String::new(),
            }))
            .await
            .map_err(call("start a task"))?;
        Ok(started.into_inner().pid)
    }

    /// The state of container `id`'s task; `None` when it has none.
    pub async fn task(&self, id: &str) -> Result<Option<(u32, TaskStatus)>> {
        let reply = TasksClient::new(self.channel.clone())
            .get(self.request(api::tasks::GetRequest {
                container_id: id.to_string(),
                exec_id: String::new(),
            }))
            .await;
        let process = match reply {
            Ok(reply) => reply.into_inner().process,
            Err(status) if status.code() == tonic::Code::NotFound => return Ok(None),
            Err(status) => return Err(call("read a task")(status)),
        };
        Ok(process.map(|p| {
            let status = match api::task::Status::try_from(p.status) {
                Ok(api::task::Status::Created) => TaskStatus::Created,
                Ok(api::task::Status::Running) => TaskStatus::Running,
                Ok(api::task::Status::Stopped) => TaskStatus::Stopped(p.exit_status),
                _ => TaskStatus::Other,
            };
            (p.pid, status)
        }))
    }

    /// Sends `signal` to every process of container `id`'s task.
    pub async fn kill(&self, id: &str, signal: u32) -> Result<()> {
        TasksClient::new(self.channel.clone())
            .kill(self.request(api::tasks::KillRequest {
                container_id: id.to_string(),
                exec_id: String::new(),
                signal,
                all: true,
            }))
            .await
            .map_err(call("signal a task"))?;
        Ok(())
    }

    /// Waits for container `id`'s task to exit; returns its exit status.
    pub async fn wait(&self, id: &str) -> Result<u32> {
        let reply = TasksClient::new(self.channel.clone())
            .wait(self.request(api::tasks::WaitRequest {
                container_id: id.to_string(),
                exec_id: String::new(),
            }))
            .await
            .map_err(call("wait for a task"))?;
        Ok(reply.into_inner().exit_status)
    }

    /// Stops container `id`'s task: SIGTERM, then SIGKILL when it has not ended within
    /// `grace` (a process that runs as pid 1 ignores SIGTERM unless it handles it); returns
    /// its exit status.
    pub async fn stop(&self, id: &str, grace: Duration) -> Result<u32> {
        const SIGTERM: u32 = 15;
        const SIGKILL: u32 = 9;
        if let Some((_, TaskStatus::Stopped(status))) = self.task(id).await? {
            return Ok(status);
        }
        self.kill(id, SIGTERM).await?;
        if let Ok(status) = tokio::time::timeout(grace, self.wait(id)).await {
            return status;
        }
        self.kill(id, SIGKILL).await?;
        self.wait(id).await
    }

    /// Deletes container `id`'s stopped task; returns its exit status.
    pub async fn delete_task(&self, id: &str) -> Result<u32> {
        let reply = TasksClient::new(self.channel.clone())
            .delete(self.request(api::tasks::DeleteTaskRequest {
                container_id: id.to_string(),
            }))
            .await
            .map_err(call("delete a task"))?;
        Ok(reply.into_inner().exit_status)
    }

    /// Sends `signal` to exec `exec_id` of container `id`'s task.
    pub async fn kill_exec(&self, id: &str, exec_id: &str, signal: u32) -> Result<()> {
        TasksClient::new(self.channel.clone())
            .kill(self.request(api::tasks::KillRequest {
                container_id: id.to_string(),
                exec_id: exec_id.to_string(),
                signal,
                all: false,
            }))
            .await
            .map_err(call("signal a command"))?;
        Ok(())
    }

    /// Runs `process` (an OCI runtime spec's `process`) in container `id`'s task as exec
    /// `exec_id`, its output appended to the files named; returns its exit status.
    pub async fn exec(
        &self,
        id: &str,
        exec_id: &str,
        process: &serde_json::Value,
        stdout: &Path,
        stderr: &Path,
    ) -> Result<u32> {
        let mut tasks = TasksClient::new(self.channel.clone());
        tasks
            .exec(self.request(api::tasks::ExecProcessRequest {
                container_id: id.to_string(),
                stdin: String::new(),
                stdout: stdout.display().to_string(),
                stderr: stderr.display().to_string(),
                terminal: false,
                spec: Some(prost_types::Any {
                    type_url: PROCESS_TYPE.to_string(),
                    value: serde_json::to_vec(process).unwrap_or_default(),
                }),
                exec_id: exec_id.to_string(),
            }))
            .await
            .map_err(call("run a command in a container"))?;
        tasks
            .start(self.request(api::tasks::StartRequest {
                container_id: id.to_string(),
                exec_id: exec_id.to_string(),
            }))
            .await
            .map_err(call("start a command in a container"))?;
        // The shim keeps an exited process's status until it is deleted, so waiting after
        // the start misses nothing.
        let status = tasks
            .wait(self.request(api::tasks::WaitRequest {
                container_id: id.to_string(),
                exec_id: exec_id.to_string(),
            }))
            .await
            .map_err(call("wait for a command"))?
            .into_inner()
            .exit_status;
        let _ = tasks
            .delete_process(self.request(api::tasks::DeleteProcessRequest {
                container_id: id.to_string(),
                exec_id: exec_id.to_string(),
            }))
            .await;
        Ok(status)
    }
}

fn source_chain(error: &dyn std::error::Error) -> String {
    let mut parts = Vec::new();
    let mut source = error.source();
    while let Some(s) = source {
        parts.push(s.to_string());
        source = s.source();
    }
    parts.join(": ")
}
