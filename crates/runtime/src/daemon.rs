//! The containerd the agent uses: the host's, at a socket the operator names, or one of the
//! agent's own, with its own root, state, socket and config under a directory of the agent.
//!
//! The agent's own daemon runs in a session of its own, so it outlives the agent: an agent
//! that restarts (or is upgraded) finds the socket answering and uses it, and the
//! containers, each held by its shim, never notice. A socket that does not answer is
//! started again; containerd then takes up the shims that still run.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::containerd::{Containerd, ContainerdError};

/// Why containerd could not be started.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// Something on disk could not be prepared.
    #[error("cannot prepare containerd's directory {path}: {source}")]
    Prepare {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The binary did not start.
    #[error("cannot start {binary} (Debian's containerd package provides it): {source}")]
    Spawn {
        /// The binary.
        binary: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It started but its socket never answered.
    #[error("containerd did not answer on {socket} within {seconds} s; its log is {log}")]
    NoAnswer {
        /// The socket.
        socket: PathBuf,
        /// How long it was given.
        seconds: u64,
        /// Where it writes.
        log: PathBuf,
    },
    /// A call failed.
    #[error(transparent)]
    Containerd(#[from] ContainerdError),
}

/// Where the agent's own containerd keeps everything.
#[derive(Debug, Clone)]
pub struct DaemonDir {
    dir: PathBuf,
}

impl DaemonDir {
    /// The daemon under `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// Its socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.join("containerd.sock")
    }

    /// Its log.
    pub fn log(&self) -> PathBuf {
        self.dir.join("containerd.log")
    }

    /// Its pid file.
    pub fn pid_file(&self) -> PathBuf {
        self.dir.join("containerd.pid")
    }

    fn config(&self) -> String {
        let dir = self.dir.display();
        format!(
            "# Written by the orc agent: a containerd of its own.\n\
             version = 2\n\
             root = \"{dir}/root\"\n\
             state = \"{dir}/state\"\n\
             disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n\
             [grpc]\n  address = \"{dir}/containerd.sock\"\n\
             [ttrpc]\n  address = \"{dir}/containerd.sock.ttrpc\"\n\
             [debug]\n  address = \"\"\n\
             [metrics]\n  address = \"\"\n"
        )
    }
}

/// Connects to the agent's own containerd in `dir`, starting it first when its socket does
/// not answer. `binary` is the containerd executable (`containerd` on the `PATH`).
pub async fn ensure(
    dir: &DaemonDir,
    binary: &str,
    namespace: &str,
) -> Result<Containerd, DaemonError> {
    if dir.socket().exists()
        && let Ok(client) = Containerd::connect(&dir.socket(), namespace).await
        && client.version().await.is_ok()
    {
        return Ok(client);
    }
    let prepare = |path: &Path| {
        let path = path.to_path_buf();
        move |source| DaemonError::Prepare { path, source }
    };
    std::fs::create_dir_all(&dir.dir).map_err(prepare(&dir.dir))?;
    let config = dir.dir.join("config.toml");
    std::fs::write(&config, dir.config()).map_err(prepare(&config))?;
    let _ = std::fs::remove_file(dir.socket());
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.log())
        .map_err(prepare(&dir.log()))?;
    let log_err = log.try_clone().map_err(prepare(&dir.log()))?;
    let mut command = std::process::Command::new(binary);
    command
        .arg("--config")
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err);
    // Its own session: the daemon outlives the agent that started it.
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let child = command.spawn().map_err(|source| DaemonError::Spawn {
        binary: binary.to_string(),
        source,
    })?;
    let _ = std::fs::write(dir.pid_file(), child.id().to_string());
    // Reaped here if it ends while the agent runs; by init if the agent ends first.
    let mut child = child;
    std::thread::spawn(move || {
        let _ = child.wait();
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if dir.socket().exists()
            && let Ok(client) = Containerd::connect(&dir.socket(), namespace).await
            && client.version().await.is_ok()
        {
            tracing::info!(socket = %dir.socket().display(), "containerd answers");
            return Ok(client);
        }
        if tokio::time::Instant::now() > deadline {
            return Err(DaemonError::NoAnswer {
                socket: dir.socket(),
                seconds: 20,
                log: dir.log(),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Stops the agent's own containerd in `dir` (SIGTERM, then SIGKILL after `grace`), when its
/// pid file names a live process. Containers keep running under their shims.
pub async fn stop(dir: &DaemonDir, grace: Duration) {
    let Some(pid) = std::fs::read_to_string(dir.pid_file())
        .ok()
        .and_then(|t| t.trim().parse::<i32>().ok())
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    let deadline = tokio::time::Instant::now() + grace;
    while tokio::time::Instant::now() < deadline {
        if rustix::process::test_kill_process(pid).is_err() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    let _ = std::fs::remove_file(dir.pid_file());
}
