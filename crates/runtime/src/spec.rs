//! The OCI runtime spec of a replica: what runc is told to run, with which limits, in which
//! namespaces, seeing which files.
//!
//! The defaults follow what container engines give a container that asks for nothing: its
//! own pid, ipc, uts and mount namespaces, the usual `/proc`, `/dev` and `/sys` mounts with
//! the kernel's sensitive paths masked, the default capability set, no new privileges.
//! The network namespace is the replica's own, made by the agent.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::image::RunDefaults;

/// The capabilities a container holds by default.
pub const DEFAULT_CAPABILITIES: &[&str] = &[
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
];

/// CPU time is shared in periods of 100 ms.
const CPU_PERIOD: u64 = 100_000;

/// A file or directory of the node mounted into the replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    /// On the node.
    pub source: PathBuf,
    /// In the container.
    pub destination: String,
    /// Read-only.
    pub read_only: bool,
}

/// What a replica's spec is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    /// The process's arguments (see [`resolve_args`]).
    pub args: Vec<String>,
    /// `NAME=value`.
    pub env: Vec<String>,
    /// The working directory.
    pub cwd: String,
    /// uid and gid.
    pub user: (u32, u32),
    /// The host name the container sees.
    pub hostname: String,
    /// The network namespace to join; `None` for a new, empty one.
    pub netns: Option<PathBuf>,
    /// CPU limit in millicores.
    pub cpu_millis: u64,
    /// Memory limit in bytes.
    pub memory_bytes: u64,
    /// The cgroup, e.g. `/orc/<replica>`.
    pub cgroup: String,
    /// Binds (volumes, secrets, resolv.conf, hosts).
    pub binds: Vec<Bind>,
}

/// The process's arguments: the app's `command` replaces the image's entrypoint and then
/// its default arguments too; the app's `args` replace the image's default arguments.
pub fn resolve_args(
    command: Option<&[String]>,
    args: Option<&[String]>,
    image: &RunDefaults,
) -> Vec<String> {
    let mut out: Vec<String> = command.map_or_else(|| image.entrypoint.clone(), <[String]>::to_vec);
    match (command, args) {
        (_, Some(args)) => out.extend(args.iter().cloned()),
        (None, None) => out.extend(image.cmd.iter().cloned()),
        (Some(_), None) => {}
    }
    out
}

/// The environment: the image's, then the app's (which wins), with a `PATH` when neither
/// sets one.
pub fn merge_env(image: &[String], app: &[(String, String)]) -> Vec<String> {
    let mut env: Vec<(String, String)> = image
        .iter()
        .filter_map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect();
    for (key, value) in app {
        match env.iter_mut().find(|(k, _)| k == key) {
            Some(entry) => entry.1 = value.clone(),
            None => env.push((key.clone(), value.clone())),
        }
    }
    if !env.iter().any(|(k, _)| k == "PATH") {
        env.insert(
            0,
            (
                "PATH".into(),
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
            ),
        );
    }
    env.into_iter().map(|(k, v)| format!("{k}={v}")).collect()
}

/// The uid and gid of the image's `User` (`uid[:gid]`, or a name looked up in the image's
/// `/etc/passwd`, searched from the top layer down); root when it names no one.
pub fn resolve_user(user: &str, layers: &[PathBuf]) -> Result<(u32, u32), String> {
    if user.is_empty() || user == "root" {
        return Ok((0, 0));
    }
    let (name, group) = match user.split_once(':') {
        Some((n, g)) => (n, Some(g)),
        None => (user, None),
    };
    let numeric_group = group.and_then(|g| g.parse::<u32>().ok());
    if let Ok(uid) = name.parse::<u32>() {
        return Ok((uid, numeric_group.unwrap_or(uid)));
    }
    for layer in layers.iter().rev() {
        let Ok(passwd) = std::fs::read_to_string(layer.join("etc/passwd")) else {
            continue;
        };
        for line in passwd.lines() {
            let fields: Vec<&str> = line.split(':').collect();
            if fields.len() >= 4 && fields[0] == name {
                let uid = fields[2]
                    .parse()
                    .map_err(|_| format!("user {name} has no number"))?;
                let gid = fields[3]
                    .parse()
                    .map_err(|_| format!("user {name} has no group"))?;
                return Ok((uid, numeric_group.unwrap_or(gid)));
            }
        }
        break;
    }
    Err(format!(
        "the image's user {user:?} is not in its /etc/passwd"
    ))
}

/// Open files a replica may hold: 65,536, or the node's own hard limit when lower (a
/// container cannot be given more than the runtime holds).
fn nofile() -> u64 {
    let ours = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .maximum
        .unwrap_or(u64::MAX);
    ours.min(65_536)
}

/// The spec.
pub fn runtime_spec(replica: &Replica) -> Value {
    let caps: Vec<&str> = DEFAULT_CAPABILITIES.to_vec();
    let mut mounts = vec![
        json!({"destination": "/proc", "type": "proc", "source": "proc", "options": ["nosuid", "noexec", "nodev"]}),
        json!({"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]}),
        json!({"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]}),
        json!({"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]}),
        json!({"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": ["nosuid", "noexec", "nodev"]}),
        json!({"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]}),
        json!({"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup", "options": ["nosuid", "noexec", "nodev", "relatime", "ro"]}),
    ];
    for bind in &replica.binds {
        let mode = if bind.read_only { "ro" } else { "rw" };
        mounts.push(json!({
            "destination": bind.destination,
            "type": "bind",
            "source": bind.source,
            "options": ["rbind", "nosuid", "nodev", mode],
        }));
    }
    let mut namespaces = vec![
        json!({"type": "pid"}),
        json!({"type": "ipc"}),
        json!({"type": "uts"}),
        json!({"type": "mount"}),
    ];
    namespaces.push(match &replica.netns {
        Some(path) => json!({"type": "network", "path": path}),
        None => json!({"type": "network"}),
    });
    let quota = replica.cpu_millis.saturating_mul(CPU_PERIOD) / 1000;
    let shares = (replica.cpu_millis.saturating_mul(1024) / 1000).max(2);
    json!({
        "ociVersion": "1.0.2",
        "process": {
            "terminal": false,
            "user": {"uid": replica.user.0, "gid": replica.user.1},
            "args": replica.args,
            "env": replica.env,
            "cwd": if replica.cwd.is_empty() { "/" } else { replica.cwd.as_str() },
            "capabilities": {"bounding": caps, "effective": caps, "permitted": caps},
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": nofile(), "soft": nofile()}],
            "noNewPrivileges": true,
        },
        "root": {"path": "rootfs", "readonly": false},
        "hostname": replica.hostname,
        "mounts": mounts,
        "linux": {
            "resources": {
                "devices": [{"allow": false, "access": "rwm"}],
                "memory": {"limit": replica.memory_bytes},
                "cpu": {"quota": quota, "period": CPU_PERIOD, "shares": shares},
                "pids": {"limit": 4096},
            },
            "cgroupsPath": replica.cgroup,
            "namespaces": namespaces,
            "maskedPaths": [
                "/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
                "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
                "/sys/firmware", "/sys/devices/virtual/powercap",
            ],
            "readonlyPaths": [
                "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
            ],
        },
    })
}

/// The process of an exec in a running replica: `args` with the replica's environment,
/// user and working directory.
pub fn exec_process(replica: &Replica, args: &[String]) -> Value {
    let caps: Vec<&str> = DEFAULT_CAPABILITIES.to_vec();
    json!({
        "terminal": false,
        "user": {"uid": replica.user.0, "gid": replica.user.1},
        "args": args,
        "env": replica.env,
        "cwd": if replica.cwd.is_empty() { "/" } else { replica.cwd.as_str() },
        "capabilities": {"bounding": caps, "effective": caps, "permitted": caps},
        "noNewPrivileges": true,
    })
}

/// The overlay mount of a replica's root: the image's layers (top first), read-only, under
/// the replica's own writable `upper` and overlayfs's `work` directory.
pub fn rootfs_mount(
    layers: &[PathBuf],
    upper: &Path,
    work: &Path,
) -> crate::containerd::api::types::Mount {
    let lower: Vec<String> = layers
        .iter()
        .rev()
        .map(|p| p.display().to_string())
        .collect();
    crate::containerd::api::types::Mount {
        r#type: "overlay".into(),
        source: "overlay".into(),
        target: String::new(),
        options: vec![
            format!("lowerdir={}", lower.join(":")),
            format!("upperdir={}", upper.display()),
            format!("workdir={}", work.display()),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(entrypoint: &[&str], cmd: &[&str]) -> RunDefaults {
        RunDefaults {
            entrypoint: entrypoint.iter().map(|s| s.to_string()).collect(),
            cmd: cmd.iter().map(|s| s.to_string()).collect(),
            ..RunDefaults::default()
        }
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn command_and_args_replace_the_images_as_engines_do() {
        let img = image(&["/entry"], &["--default"]);
        assert_eq!(resolve_args(None, None, &img), ["/entry", "--default"]);
        assert_eq!(
            resolve_args(None, Some(&strings(&["--mine"])), &img),
            ["/entry", "--mine"]
        );
        assert_eq!(
            resolve_args(Some(&strings(&["/bin/sh"])), None, &img),
            ["/bin/sh"]
        );
        assert_eq!(
            resolve_args(
                Some(&strings(&["/bin/sh"])),
                Some(&strings(&["-c", "x"])),
                &img
            ),
            ["/bin/sh", "-c", "x"]
        );
    }

    #[test]
    fn the_apps_environment_wins_and_path_is_always_set() {
        let env = merge_env(
            &strings(&["A=image", "B=image"]),
            &[("B".into(), "app".into()), ("C".into(), "app".into())],
        );
        assert_eq!(
            env[0],
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        );
        assert_eq!(&env[1..], ["A=image", "B=app", "C=app"]);
        let env = merge_env(&strings(&["PATH=/bin"]), &[]);
        assert_eq!(env, ["PATH=/bin"]);
    }

    #[test]
    fn limits_become_cgroup_values() {
        let spec = runtime_spec(&Replica {
            args: strings(&["/bin/true"]),
            env: vec![],
            cwd: String::new(),
            user: (0, 0),
            hostname: "web-0".into(),
            netns: Some("/run/netns/x".into()),
            cpu_millis: 250,
            memory_bytes: 128 << 20,
            cgroup: "/orc/x".into(),
            binds: vec![],
        });
        assert_eq!(spec["linux"]["resources"]["cpu"]["quota"], 25_000);
        assert_eq!(spec["linux"]["resources"]["cpu"]["shares"], 256);
        assert_eq!(spec["linux"]["resources"]["memory"]["limit"], 128u64 << 20);
        assert_eq!(spec["linux"]["namespaces"][4]["path"], "/run/netns/x");
        assert_eq!(spec["process"]["cwd"], "/");
    }

    #[test]
    fn users_resolve_by_number_or_from_the_images_passwd() {
        let dir = tempfile::tempdir().expect("a temp dir");
        std::fs::create_dir_all(dir.path().join("etc")).expect("etc");
        std::fs::write(
            dir.path().join("etc/passwd"),
            "app:x:1000:1001::/:/bin/sh\n",
        )
        .expect("passwd");
        let layers = vec![dir.path().to_path_buf()];
        assert_eq!(resolve_user("", &layers), Ok((0, 0)));
        assert_eq!(resolve_user("42", &layers), Ok((42, 42)));
        assert_eq!(resolve_user("42:7", &layers), Ok((42, 7)));
        assert_eq!(resolve_user("app", &layers), Ok((1000, 1001)));
        assert!(resolve_user("ghost", &layers).is_err());
    }
}
