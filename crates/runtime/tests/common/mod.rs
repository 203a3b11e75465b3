//! What the privileged runtime tests share: a lab that removes everything it made.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use orc_runtime::containerd::Containerd;

/// What a test made, undone on drop.
pub struct Lab {
    pub dir: PathBuf,
    pub namespace: String,
    pub netns: Vec<String>,
}

impl Lab {
    pub fn new(name: &str) -> Self {
        assert!(
            rustix::process::geteuid().is_root(),
            "the container tests need root (CI runs them as root)"
        );
        for tool in ["containerd", "containerd-shim-runc-v2", "runc", "ip"] {
            let found = std::env::var_os("PATH").is_some_and(|paths| {
                std::env::split_paths(&paths).any(|dir| dir.join(tool).is_file())
            });
            assert!(
                found,
                "{tool} is missing: apt-get install containerd runc iproute2"
            );
        }
        let namespace = format!("orc-test-{name}-{}", std::process::id());
        // Short: containerd's socket path must fit a unix socket address.
        let dir = PathBuf::from(format!("/tmp/orc-rt-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("the lab's dir");
        Self {
            dir,
            namespace,
            netns: Vec::new(),
        }
    }

    pub fn netns(&mut self, name: &str) -> String {
        let ns = format!("orc{}{name}", std::process::id() % 100_000);
        run("ip", &["netns", "add", &ns]);
        self.netns.push(ns.clone());
        ns
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // Through containerd first: every task stopped, every container deleted, so the
        // shims end and reap their processes.
        let socket = self.dir.join("containerd/containerd.sock");
        let namespace = self.namespace.clone();
        if socket.exists() {
            let _ = std::thread::spawn(move || {
                let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                else {
                    return;
                };
                runtime.block_on(async {
                    let Ok(client) = Containerd::connect(&socket, &namespace).await else {
                        return;
                    };
                    for (id, _) in client.containers().await.unwrap_or_default() {
                        let _ = client.stop(&id, Duration::from_millis(200)).await;
                        let _ = client.delete_task(&id).await;
                        let _ = client.delete_container(&id).await;
                    }
                });
            })
            .join();
        }
        if let Ok(pid) = std::fs::read_to_string(self.dir.join("containerd/containerd.pid")) {
            let _ = Command::new("kill").args(["-KILL", pid.trim()]).status();
        }
        // Anything left in the test's cgroups or held by its shims.
        kill_matching(&format!("-namespace\0{}\0", self.namespace));
        std::thread::sleep(Duration::from_millis(200));
        orc_runtime::supervisor::unmount_under(&self.dir);
        let replicas = replica_prefix();
        let made_by_supervisors = std::fs::read_dir("/var/run/netns")
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|name| name.starts_with(&replicas))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        for ns in self.netns.iter().chain(&made_by_supervisors) {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
        if let Ok(controllers) = std::fs::read_dir("/sys/fs/cgroup") {
            let roots = controllers
                .flatten()
                .map(|c| c.path().join(&self.namespace))
                .chain(std::iter::once(
                    Path::new("/sys/fs/cgroup").join(&self.namespace),
                ));
            for root in roots {
                if let Ok(children) = std::fs::read_dir(&root) {
                    for child in children.flatten().filter(|c| c.path().is_dir()) {
                        let _ = std::fs::remove_dir(child.path());
                    }
                }
                let _ = std::fs::remove_dir(&root);
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Kills every process whose command line (arguments separated by NUL) contains `needle`.
fn kill_matching(needle: &str) {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in procs.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(needle)
            && let Some(pid) = rustix::process::Pid::from_raw(pid)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}

/// The prefix of the replica namespaces this test process's supervisors make.
pub fn replica_prefix() -> String {
    format!("orct{}-", std::process::id())
}

pub fn run(program: &str, args: &[&str]) -> String {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} cannot run: {e}"));
    assert!(
        output.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}
