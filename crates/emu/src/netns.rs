//! Materialised mode: emulated servers as Linux network namespaces (root only).
//!
//! A [`Fabric`] is one emulated world on this host:
//!
//! - an **internet** namespace (`orc<slot>-inet`) routing between the public addresses: a
//!   bridge `pub0` holding the router address of the fabric's public slice (a /20 of
//!   198.18.0.0/15), with IPv4 forwarding on and no default route, so nothing in the fabric
//!   can reach any address outside it;
//! - an **echo host** (`orc<slot>-echo`) on that bridge, answering every HTTP request with
//!   the source address it sees (a host on the internet, for tests);
//! - one **uplink**: a veth from the host (`orc<slot>h`, in 198.19.255.0/24) to the internet
//!   namespace, and one host route to the fabric's public slice through it, so servers reach
//!   the zone's listeners on [`Fabric::host_address`] and the zone can answer them;
//! - a namespace per **server** (`orc<slot>-<key>`): `eth0` on `pub0` with its public address
//!   and a default route through the router; one interface per private network it is attached
//!   to (`ens10`, `ens11`, …), on that network's own bridge in the internet namespace (a bridge
//!   only its servers are on, with no address, so networks do not meet); and a private mount
//!   namespace, held by one `sleep` process, where `/etc/orc`, `/var/lib/orc`, `/run`,
//!   `/var/log` and `/usr/local/bin` are the server's own (tmpfs), `/usr/local/bin/orc` may be the host's
//!   `orc` (read-only), and the machine's DMI `product_uuid` is the server's own.
//!
//! Scripts (user data) run inside a server's namespaces with their output appended to the
//! server's console log. Stopping a server kills everything in it but its mount holder;
//! removing it kills that too and deletes the namespace, which takes its interfaces with it.
//! Dropping the fabric removes every server, network and namespace it made, the uplink and the
//! route. Several fabrics can run at once (tests in parallel): each takes a free slot, which
//! decides its names and addresses.

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How many fabrics can run on one host at once.
pub const SLOTS: u8 = 31;

/// The reserved range every fabric's addresses come from (RFC 2544's benchmarking range,
/// never routed on the internet).
pub const PUBLIC_RANGE: &str = "198.18.0.0/15";

/// The paths a server keeps to itself (each an empty tmpfs when the server is made), and
/// `/root` ([`PRIVATE_HOME`]) too.
pub const PRIVATE_DIRS: [&str; 6] = [
    "/etc/orc",
    "/etc/systemd/system",
    "/var/lib/orc",
    "/run",
    "/var/log",
    "/usr/local/bin",
];

/// Root's home, private to each server as well; mounted after the host files bound in,
/// which may live below it.
pub const PRIVATE_HOME: &str = "/root";

/// The disks a server's `/sys/block` lists: two NVMe drives, like a dedicated server's.
pub const DISKS: [&str; 2] = ["nvme0n1", "nvme1n1"];

/// Why the fabric could not do something. Each names the command or the object.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error(
        "materialised mode needs root (network namespaces, veths and bridges); run as root or drop --netns"
    )]
    NotRoot,
    #[error("{}", missing_words(.0))]
    Missing(Vec<Tool>),
    #[error(
        "every fabric slot is taken ({SLOTS} fabrics run on this host, or left namespaces behind: `ip netns list`)"
    )]
    NoSlot,
    #[error("`{command}` failed: {stderr}")]
    Command { command: String, stderr: String },
    #[error("server {0} is not in the fabric")]
    UnknownServer(String),
    #[error("network {0} is not in the fabric")]
    UnknownNetwork(String),
    #[error("server {0} is already in the fabric")]
    ServerExists(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> NetnsError {
    let what = what.into();
    move |source| NetnsError::Io { what, source }
}

/// Runs `program args`, failing with its stderr.
fn run(program: &str, args: &[&str]) -> Result<String, NetnsError> {
    let command = format!("{program} {}", args.join(" "));
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(io(format!("cannot run {program}")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(NetnsError::Command {
            command,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

fn ip(args: &[&str]) -> Result<String, NetnsError> {
    run("ip", args)
}

/// The addresses of the fabric in slot `slot`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    slot: u8,
}

impl Plan {
    /// The plan of `slot` (`0..SLOTS`).
    pub fn new(slot: u8) -> Option<Plan> {
        (slot < SLOTS).then_some(Plan { slot })
    }

    fn base(self) -> u32 {
        u32::from(Ipv4Addr::new(198, 18, 0, 0)) + u32::from(self.slot) * 4096
    }

    /// The public slice, `198.18.0.0/20` for slot 0.
    pub fn public_net(self) -> (Ipv4Addr, u8) {
        (Ipv4Addr::from(self.base()), 20)
    }

    /// The router on the public bridge: every server's default gateway.
    pub fn router(self) -> Ipv4Addr {
        Ipv4Addr::from(self.base() + 1)
    }

    /// The echo host.
    pub fn echo(self) -> Ipv4Addr {
        Ipv4Addr::from(self.base() + 2)
    }

    /// The `n`-th public address servers may get (from `.16` of the slice); `None` past its
    /// end.
    pub fn public(self, n: u32) -> Option<Ipv4Addr> {
        (n < 4096 - 17).then(|| Ipv4Addr::from(self.base() + 16 + n))
    }

    /// The host's end of the uplink: where the zone listens for the fabric's servers.
    pub fn host(self) -> Ipv4Addr {
        Ipv4Addr::new(198, 19, 255, 4 * self.slot + 2)
    }

    /// The internet namespace's end of the uplink.
    pub fn uplink(self) -> Ipv4Addr {
        Ipv4Addr::new(198, 19, 255, 4 * self.slot + 1)
    }

    /// What every namespace of this slot's fabric is named after (`orc3`: `orc3-inet`, …).
    pub fn prefix(self) -> String {
        format!("orc{}", self.slot)
    }
}

/// One materialised server.
struct ServerNs {
    ns: String,
    holder: Child,
    /// Interfaces it has, by network key (`eth0` for the public one).
    interfaces: BTreeMap<String, String>,
    dir: PathBuf,
    scripts: u32,
}

#[derive(Default)]
struct State {
    servers: BTreeMap<String, ServerNs>,
    /// Bridge name by network key.
    networks: BTreeMap<String, String>,
    /// A network's router: its namespace and the routes it holds, by network key.
    routers: BTreeMap<String, (String, Vec<(String, Ipv4Addr)>)>,
    next_port: u32,
    /// Processes the fabric started on its hosts (the ACME server and its DNS).
    children: Vec<Child>,
}

/// One emulated world of namespaces. See the module docs.
pub struct Fabric {
    plan: Plan,
    inet: String,
    echo_ns: String,
    dir: tempfile::TempDir,
    agent_binary: Option<PathBuf>,
    state: Mutex<State>,
    stop_echo: Arc<AtomicBool>,
    echo: Option<std::thread::JoinHandle<()>>,
    /// The slot's lock, held while the fabric lives (dropped after everything is removed).
    _slot_lock: std::fs::File,
}

/// Where fabrics lock their slots: a slot is taken while a live process holds the lock of
/// its file; a killed process holds none, so what it left behind can be taken back.
pub const LOCK_DIR: &str = "/run/orc-fabric";

/// The lock of `slot`, or `None` while a live fabric holds it.
fn lock_slot(slot: u8) -> Result<Option<std::fs::File>, NetnsError> {
    std::fs::create_dir_all(LOCK_DIR).map_err(io(format!("cannot make {LOCK_DIR}")))?;
    let path = Path::new(LOCK_DIR).join(format!("slot-{slot}.lock"));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io(format!("cannot open {}", path.display())))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(io(format!("cannot lock {}", path.display()))(e))
        }
    }
}

/// Removes what the fabric of `plan` left when its process was killed: every `orcN-…`
/// namespace of the slot (their processes first) and the uplink's host end. The caller
/// holds the slot's lock. Returns the namespaces removed.
fn clear_slot(plan: Plan) -> Vec<String> {
    let prefix = format!("{}-", plan.prefix());
    let names: Vec<String> = ip(&["netns", "list"])
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&prefix))
        .map(str::to_string)
        .collect();
    for ns in &names {
        kill_all(ns, None);
        let _ = ip(&["netns", "del", ns]);
    }
    let host_if = format!("{}h", plan.prefix());
    if ip(&["link", "show", &host_if]).is_ok() {
        let _ = ip(&["link", "del", &host_if]);
    }
    if !names.is_empty() {
        tracing::warn!(
            slot = plan.slot,
            namespaces = names.len(),
            "removed what a killed fabric left behind"
        );
    }
    names
}

/// Takes back every slot no live fabric holds and removes what killed fabrics left in them
/// ([`Fabric::create`] does this for the slot it takes). Returns the namespaces removed.
pub fn reclaim_abandoned() -> Result<Vec<String>, NetnsError> {
    let mut removed = Vec::new();
    for slot in 0..SLOTS {
        if let Some(_lock) = lock_slot(slot)? {
            removed.extend(clear_slot(Plan { slot }));
        }
    }
    Ok(removed)
}

impl std::fmt::Debug for Fabric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fabric")
            .field("plan", &self.plan)
            .field("inet", &self.inet)
            .finish_non_exhaustive()
    }
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// A program materialised mode runs, and the Debian package that has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tool {
    pub name: &'static str,
    pub package: &'static str,
    /// What runs it.
    pub for_what: &'static str,
}

/// Every program materialised mode runs, on the host or inside a server's namespace.
pub const TOOLS: [Tool; 8] = [
    Tool {
        name: "ip",
        package: "iproute2",
        for_what: "namespaces, veths and bridges",
    },
    Tool {
        name: "nsenter",
        package: "util-linux",
        for_what: "commands inside a server",
    },
    Tool {
        name: "unshare",
        package: "util-linux",
        for_what: "a server's own mounts",
    },
    Tool {
        name: "ssh-keygen",
        package: "openssh-client",
        for_what: "SSH keys",
    },
    Tool {
        name: "sshd",
        package: "openssh-server",
        for_what: "rescue systems and static hosts",
    },
    Tool {
        name: "curl",
        package: "curl",
        for_what: "node bootstraps fetching the agent",
    },
    Tool {
        name: "iptables",
        package: "iptables",
        for_what: "gateways masquerading their site",
    },
    Tool {
        name: "nft",
        package: "nftables",
        for_what: "gateway agents' NAT and forwarding",
    },
];

/// The tools of [`TOOLS`] that `present` does not find.
pub fn missing_tools(present: impl Fn(&str) -> bool) -> Vec<Tool> {
    TOOLS
        .into_iter()
        .filter(|tool| !present(tool.name))
        .collect()
}

/// One message naming every missing tool, and the one command that installs them all.
fn missing_words(missing: &[Tool]) -> String {
    let tools: Vec<String> = missing
        .iter()
        .map(|t| {
            format!(
                "`{}` ({}, Debian package {})",
                t.name, t.for_what, t.package
            )
        })
        .collect();
    let mut packages: Vec<&str> = Vec::new();
    for tool in missing {
        if !packages.contains(&tool.package) {
            packages.push(tool.package);
        }
    }
    format!(
        "materialised mode needs {} tool(s) this machine lacks: {}; install them with \
         `apt-get install {}`",
        missing.len(),
        tools.join(", "),
        packages.join(" ")
    )
}

/// Whether `tool` is a file in a directory of `PATH`, or of the system's `sbin` and `bin`
/// directories (root's tools are there even when `PATH` leaves them out).
fn on_path(tool: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .any(|dir| dir.join(tool).is_file())
}

/// Fails unless what materialised mode needs is here: root and every tool it runs, all
/// missing ones named at once.
pub fn check_prerequisites() -> Result<(), NetnsError> {
    if !is_root() {
        return Err(NetnsError::NotRoot);
    }
    let missing = missing_tools(|tool| {
        if tool == "sshd" {
            Path::new(SSHD).is_file()
        } else {
            on_path(tool)
        }
    });
    if missing.is_empty() {
        Ok(())
    } else {
        Err(NetnsError::Missing(missing))
    }
}

/// The SSH server a dedicated server's rescue system runs.
pub const SSHD: &str = "/usr/sbin/sshd";

/// Binds a TCP listener at `addr` inside the network namespace `ns` (a name under
/// `/run/netns`). The socket stays in that namespace; the calling thread does not move.
pub fn bind_in(ns: &str, addr: SocketAddr) -> Result<TcpListener, NetnsError> {
    let path = format!("/run/netns/{ns}");
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let file = std::fs::File::open(&path).map_err(io(format!("cannot open {path}")))?;
                rustix::thread::move_into_link_name_space(
                    std::os::fd::AsFd::as_fd(&file),
                    Some(rustix::thread::LinkNameSpaceType::Network),
                )
                .map_err(|e| NetnsError::Io {
                    what: format!("cannot enter namespace {ns}"),
                    source: e.into(),
                })?;
                TcpListener::bind(addr).map_err(io(format!("cannot listen on {addr} in {ns}")))
            })
            .join()
            .unwrap_or_else(|_| {
                Err(NetnsError::Io {
                    what: format!("binding in {ns}"),
                    source: std::io::Error::other("the thread panicked"),
                })
            })
    })
}

/// Answers each HTTP request on `listener` with the peer's address, until `stop`.
fn serve_echo(listener: TcpListener, stop: Arc<AtomicBool>) {
    let _ = listener.set_nonblocking(true);
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((mut stream, peer)) => {
                let _ = stream.set_nonblocking(false);
                let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 16 << 10 {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let body = format!("{}\n", peer.ip());
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

impl Fabric {
    /// Builds the internet, the echo host and the uplink in the first free slot.
    /// `agent_binary` is bind-mounted read-only at `/usr/local/bin/orc` in every server.
    pub fn create(agent_binary: Option<PathBuf>) -> Result<Fabric, NetnsError> {
        check_prerequisites()?;
        let dir = tempfile::Builder::new()
            .prefix("orc-fabric-")
            .tempdir()
            .map_err(io("cannot make the fabric's directory"))?;
        for slot in 0..SLOTS {
            let plan = Plan { slot };
            // Held by a live fabric: try the next slot.
            let Some(lock) = lock_slot(slot)? else {
                continue;
            };
            clear_slot(plan);
            let inet = format!("{}-inet", plan.prefix());
            // Made by something else that does not lock: try the next slot.
            if ip(&["netns", "add", &inet]).is_err() {
                continue;
            }
            let mut fabric = Fabric {
                plan,
                inet,
                echo_ns: format!("{}-echo", plan.prefix()),
                dir,
                agent_binary,
                state: Mutex::new(State::default()),
                stop_echo: Arc::new(AtomicBool::new(false)),
                echo: None,
                _slot_lock: lock,
            };
            // On error the fabric is dropped, which removes what was made.
            fabric.build()?;
            return Ok(fabric);
        }
        Err(NetnsError::NoSlot)
    }

    fn build(&mut self) -> Result<(), NetnsError> {
        let plan = self.plan;
        let inet = self.inet.clone();
        let host_if = format!("{}h", plan.prefix());
        let (net, len) = plan.public_net();
        ip(&["-n", &inet, "link", "set", "lo", "up"])?;
        ip(&["-n", &inet, "link", "add", "pub0", "type", "bridge"])?;
        ip(&[
            "-n",
            &inet,
            "addr",
            "add",
            &format!("{}/{len}", plan.router()),
            "dev",
            "pub0",
        ])?;
        ip(&["-n", &inet, "link", "set", "pub0", "up"])?;
        ip(&[
            "netns",
            "exec",
            &inet,
            "sysctl",
            "-qw",
            "net.ipv4.ip_forward=1",
        ])?;
        // The uplink: the host end, its one route, the internet end.
        ip(&[
            "link", "add", &host_if, "type", "veth", "peer", "name", "up0", "netns", &inet,
        ])?;
        ip(&[
            "addr",
            "add",
            &format!("{}/30", plan.host()),
            "dev",
            &host_if,
        ])?;
        ip(&["link", "set", &host_if, "up"])?;
        ip(&[
            "-n",
            &inet,
            "addr",
            "add",
            &format!("{}/30", plan.uplink()),
            "dev",
            "up0",
        ])?;
        ip(&["-n", &inet, "link", "set", "up0", "up"])?;
        ip(&[
            "route",
            "add",
            &format!("{net}/{len}"),
            "via",
            &plan.uplink().to_string(),
            "dev",
            &host_if,
        ])?;
        // The echo host.
        let echo = self.echo_ns.clone();
        ip(&["netns", "add", &echo])?;
        ip(&["-n", &echo, "link", "set", "lo", "up"])?;
        let port = self.port();
        ip(&[
            "link", "add", "eth0", "netns", &echo, "type", "veth", "peer", "name", &port, "netns",
            &inet,
        ])?;
        ip(&["-n", &inet, "link", "set", &port, "master", "pub0", "up"])?;
        ip(&[
            "-n",
            &echo,
            "addr",
            "add",
            &format!("{}/{len}", plan.echo()),
            "dev",
            "eth0",
        ])?;
        ip(&["-n", &echo, "link", "set", "eth0", "up"])?;
        ip(&[
            "-n",
            &echo,
            "route",
            "add",
            "default",
            "via",
            &plan.router().to_string(),
        ])?;
        let listener = bind_in(&echo, SocketAddr::from((plan.echo(), 80)))?;
        let stop = self.stop_echo.clone();
        self.echo = Some(std::thread::spawn(move || serve_echo(listener, stop)));
        tracing::info!(slot = plan.slot, host = %plan.host(), public = %format!("{net}/{len}"), "materialised fabric up");
        Ok(())
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A fresh bridge-port name in the internet namespace.
    fn port(&self) -> String {
        let mut state = self.state();
        state.next_port += 1;
        format!("p{}", state.next_port)
    }

    /// The fabric's addresses.
    pub fn plan(&self) -> Plan {
        self.plan
    }

    /// Where the zone listens for the fabric's servers (the host's end of the uplink).
    pub fn host_address(&self) -> Ipv4Addr {
        self.plan.host()
    }

    /// The echo host's address.
    pub fn echo_address(&self) -> Ipv4Addr {
        self.plan.echo()
    }

    /// The network namespace of server `key`.
    pub fn namespace(&self, key: &str) -> Option<String> {
        self.state().servers.get(key).map(|s| s.ns.clone())
    }

    /// The names of every namespace the fabric holds now.
    pub fn namespaces(&self) -> Vec<String> {
        let mut names = vec![self.inet.clone(), self.echo_ns.clone()];
        let state = self.state();
        names.extend(state.servers.values().map(|s| s.ns.clone()));
        names.extend(state.routers.values().map(|(ns, _)| ns.clone()));
        names
    }

    /// Adds server `key` with `public` on `eth0` (none: no public interface) and the DMI
    /// `product_uuid` its agent reads.
    pub fn add_server(
        &self,
        key: &str,
        public: Option<Ipv4Addr>,
        product_uuid: &str,
    ) -> Result<(), NetnsError> {
        if self.state().servers.contains_key(key) {
            return Err(NetnsError::ServerExists(key.to_string()));
        }
        let ns = format!("{}-{key}", self.plan.prefix());
        ip(&["netns", "add", &ns])?;
        let made = self.populate(key, &ns, public, product_uuid);
        match made {
            Ok(server) => {
                self.state().servers.insert(key.to_string(), server);
                Ok(())
            }
            Err(e) => {
                let _ = ip(&["netns", "del", &ns]);
                Err(e)
            }
        }
    }

    fn populate(
        &self,
        key: &str,
        ns: &str,
        public: Option<Ipv4Addr>,
        product_uuid: &str,
    ) -> Result<ServerNs, NetnsError> {
        let (_, len) = self.plan.public_net();
        ip(&["-n", ns, "link", "set", "lo", "up"])?;
        let mut interfaces = BTreeMap::new();
        if let Some(address) = public {
            let port = self.port();
            ip(&[
                "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", &port, "netns",
                &self.inet,
            ])?;
            ip(&[
                "-n", &self.inet, "link", "set", &port, "master", "pub0", "up",
            ])?;
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{address}/{len}"),
                "dev",
                "eth0",
            ])?;
            ip(&["-n", ns, "link", "set", "eth0", "up"])?;
            ip(&[
                "-n",
                ns,
                "route",
                "add",
                "default",
                "via",
                &self.plan.router().to_string(),
            ])?;
            interfaces.insert(String::new(), "eth0".to_string());
        }
        let dir = self.dir.path().join(key);
        std::fs::create_dir_all(&dir).map_err(io(format!("cannot make {}", dir.display())))?;
        let uuid_file = dir.join("product_uuid");
        std::fs::write(&uuid_file, format!("{product_uuid}\n"))
            .map_err(io("cannot write the product_uuid"))?;
        for disk in DISKS {
            let path = dir.join("block").join(disk);
            std::fs::create_dir_all(&path)
                .map_err(io(format!("cannot make {}", path.display())))?;
        }
        let holder = self.spawn_holder(ns, &dir)?;
        Ok(ServerNs {
            ns: ns.to_string(),
            holder,
            interfaces,
            dir,
            scripts: 0,
        })
    }

    /// The process that holds the server's mount namespace: private tmpfs on the server's
    /// own paths, the agent binary, the product_uuid and the disk list (`dir/block`) bound
    /// in, then `sleep`.
    fn spawn_holder(&self, ns: &str, dir: &Path) -> Result<Child, NetnsError> {
        let mut setup = String::from("set -e\n");
        for dir in PRIVATE_DIRS {
            // The mount point must exist on the host; an empty directory is all it leaves.
            setup.push_str(&format!(
                "mkdir -p {dir}\nmount -t tmpfs -o mode=0755 tmpfs {dir}\n"
            ));
        }
        if let Some(binary) = &self.agent_binary {
            let binary = binary.display().to_string();
            if shell_safe(&binary) {
                setup.push_str(&format!(
                    ": > /usr/local/bin/orc\nmount --bind -o ro {binary} /usr/local/bin/orc\n"
                ));
            }
        }
        let uuid = dir.join("product_uuid").display().to_string();
        let block = dir.join("block").display().to_string();
        const DMI: &str = "/sys/class/dmi/id/product_uuid";
        if shell_safe(&uuid) && shell_safe(&block) {
            // A host without DMI (some VMs) gets a /sys/class of links to its own classes
            // plus the dmi one.
            setup.push_str(&format!(
                "if [ -e {DMI} ]; then mount --bind {uuid} {DMI}\nelse\n  \
                 mkdir -p /run/.orc-sys-class\n  mount --bind /sys/class /run/.orc-sys-class\n  \
                 mount -t tmpfs -o mode=0755 tmpfs /sys/class\n  \
                 for c in /run/.orc-sys-class/*; do ln -s \"$c\" \"/sys/class/${{c##*/}}\"; done\n  \
                 mkdir -p /sys/class/dmi/id\n  cp {uuid} {DMI}\n  chmod 0444 {DMI}\nfi\n\
                 mount --bind {block} /sys/block\n"
            ));
        }
        setup.push_str(&format!(
            "mount -t tmpfs -o mode=0700 tmpfs {PRIVATE_HOME}\n"
        ));
        // `ip netns exec` mounted a sysfs of the namespace over /sys, which hides the cgroup
        // file systems; a server has them, and its containers need them.
        setup.push_str(&cgroup_mounts(
            &std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default(),
            &cgroup_links(),
        ));
        setup.push_str("echo ready\nexec sleep infinity\n");
        let mut child = Command::new("ip")
            .args([
                "netns",
                "exec",
                ns,
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "--",
                "sh",
                "-c",
                &setup,
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(io("cannot start a server's mount holder"))?;
        // Wait for its `ready`: the mounts are in place.
        let mut out = child.stdout.take().expect("piped");
        let mut seen = Vec::new();
        let mut buf = [0u8; 64];
        while !seen.ends_with(b"ready\n") {
            match out.read(&mut buf) {
                Ok(0) | Err(_) => {
                    let _ = child.kill();
                    let mut stderr = String::new();
                    if let Some(mut err) = child.stderr.take() {
                        let _ = err.read_to_string(&mut stderr);
                    }
                    let _ = child.wait();
                    return Err(NetnsError::Command {
                        command: format!("the mount holder of {ns}"),
                        stderr: stderr.trim().to_string(),
                    });
                }
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
        Ok(child)
    }

    /// Adds private network `key`: a bridge of its own in the internet namespace.
    pub fn add_network(&self, key: &str) -> Result<(), NetnsError> {
        let bridge = {
            let mut state = self.state();
            if state.networks.contains_key(key) {
                return Ok(());
            }
            state.next_port += 1;
            let bridge = format!("n{}", state.next_port);
            state.networks.insert(key.to_string(), bridge.clone());
            bridge
        };
        ip(&["-n", &self.inet, "link", "add", &bridge, "type", "bridge"])?;
        ip(&["-n", &self.inet, "link", "set", &bridge, "up"])?;
        Ok(())
    }

    /// Gives network `key` a router at `router/prefix` (a namespace of its own on the
    /// network's bridge, forwarding) holding `routes` (destination CIDR, next hop on the
    /// network), as a cloud's network does with its route table: a node's default route to
    /// the network's gateway address reaches whichever server the table names.
    pub fn route_network(
        &self,
        key: &str,
        router: Ipv4Addr,
        prefix: u8,
        routes: &[(String, Ipv4Addr)],
    ) -> Result<(), NetnsError> {
        let bridge = self
            .state()
            .networks
            .get(key)
            .cloned()
            .ok_or_else(|| NetnsError::UnknownNetwork(key.to_string()))?;
        let existing = self.state().routers.get(key).cloned();
        let (ns, held) = match existing {
            Some(found) => found,
            None => {
                let ns = format!("{}-r{bridge}", self.plan.prefix());
                ip(&["netns", "add", &ns])?;
                let port = self.port();
                let made = (|| {
                    ip(&["-n", &ns, "link", "set", "lo", "up"])?;
                    ip(&[
                        "link", "add", "eth0", "netns", &ns, "type", "veth", "peer", "name", &port,
                        "netns", &self.inet,
                    ])?;
                    ip(&[
                        "-n", &self.inet, "link", "set", &port, "master", &bridge, "up",
                    ])?;
                    ip(&[
                        "-n",
                        &ns,
                        "addr",
                        "add",
                        &format!("{router}/{prefix}"),
                        "dev",
                        "eth0",
                    ])?;
                    ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
                    ip(&[
                        "netns",
                        "exec",
                        &ns,
                        "sysctl",
                        "-qw",
                        "net.ipv4.ip_forward=1",
                    ])?;
                    // It forwards back out of the interface it received on: no redirects.
                    ip(&[
                        "netns",
                        "exec",
                        &ns,
                        "sysctl",
                        "-qw",
                        "net.ipv4.conf.all.send_redirects=0",
                    ])?;
                    ip(&[
                        "netns",
                        "exec",
                        &ns,
                        "sysctl",
                        "-qw",
                        "net.ipv4.conf.eth0.send_redirects=0",
                    ])
                })();
                if let Err(e) = made {
                    let _ = ip(&["netns", "del", &ns]);
                    return Err(e);
                }
                (ns, Vec::new())
            }
        };
        for (destination, via) in &held {
            if !routes.contains(&(destination.clone(), *via)) {
                let _ = ip(&[
                    "-n",
                    &ns,
                    "route",
                    "del",
                    destination,
                    "via",
                    &via.to_string(),
                ]);
            }
        }
        for (destination, via) in routes {
            ip(&[
                "-n",
                &ns,
                "route",
                "replace",
                destination,
                "via",
                &via.to_string(),
            ])?;
        }
        self.state()
            .routers
            .insert(key.to_string(), (ns, routes.to_vec()));
        Ok(())
    }

    /// Removes private network `key` (its bridge, and with it every server's port on it).
    pub fn remove_network(&self, key: &str) -> Result<(), NetnsError> {
        if let Some((ns, _)) = self.state().routers.remove(key) {
            kill_all(&ns, None);
            let _ = ip(&["netns", "del", &ns]);
        }
        let Some(bridge) = self.state().networks.remove(key) else {
            return Err(NetnsError::UnknownNetwork(key.to_string()));
        };
        // A server's interface on the network goes with its veth peer.
        let ports =
            ip(&["-n", &self.inet, "-o", "link", "show", "master", &bridge]).unwrap_or_default();
        for line in ports.lines() {
            if let Some(name) = line.split(": ").nth(1).and_then(|n| n.split('@').next()) {
                let _ = ip(&["-n", &self.inet, "link", "del", name]);
            }
        }
        ip(&["-n", &self.inet, "link", "del", &bridge])?;
        for server in self.state().servers.values_mut() {
            server.interfaces.remove(key);
        }
        Ok(())
    }

    /// Attaches server `server` to network `network` with `address/prefix` on a new
    /// interface (`ens10`, `ens11`, … in order); returns the interface's name.
    pub fn attach(
        &self,
        server: &str,
        network: &str,
        address: Ipv4Addr,
        prefix: u8,
    ) -> Result<String, NetnsError> {
        let (ns, interface, bridge) = {
            let state = self.state();
            let s = state
                .servers
                .get(server)
                .ok_or_else(|| NetnsError::UnknownServer(server.to_string()))?;
            let bridge = state
                .networks
                .get(network)
                .ok_or_else(|| NetnsError::UnknownNetwork(network.to_string()))?
                .clone();
            if let Some(existing) = s.interfaces.get(network) {
                return Ok(existing.clone());
            }
            let private = s.interfaces.keys().filter(|k| !k.is_empty()).count();
            (s.ns.clone(), format!("ens{}", 10 + private), bridge)
        };
        let port = self.port();
        ip(&[
            "link", "add", &interface, "netns", &ns, "type", "veth", "peer", "name", &port,
            "netns", &self.inet,
        ])?;
        ip(&[
            "-n", &self.inet, "link", "set", &port, "master", &bridge, "up",
        ])?;
        ip(&[
            "-n",
            &ns,
            "addr",
            "add",
            &format!("{address}/{prefix}"),
            "dev",
            &interface,
        ])?;
        ip(&["-n", &ns, "link", "set", &interface, "up"])?;
        if let Some(s) = self.state().servers.get_mut(server) {
            s.interfaces.insert(network.to_string(), interface.clone());
        }
        Ok(interface)
    }

    /// Runs `script` (a `sh` script) inside server `server`'s namespaces, its output appended
    /// to the server's console log. The script's file is readable by root only.
    pub fn run_script(&self, server: &str, script: &str) -> Result<Child, NetnsError> {
        let (holder, path, console) = {
            let mut state = self.state();
            let s = state
                .servers
                .get_mut(server)
                .ok_or_else(|| NetnsError::UnknownServer(server.to_string()))?;
            s.scripts += 1;
            (
                s.holder.id(),
                s.dir.join(format!("script-{}.sh", s.scripts)),
                s.dir.join("console.log"),
            )
        };
        write_private(&path, script)?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&console)
            .map_err(io(format!("cannot open {}", console.display())))?;
        let err = log
            .try_clone()
            .map_err(io("cannot share the console log"))?;
        let target = holder.to_string();
        Command::new("nsenter")
            .args(["--target", &target, "--mount", "--net", "--", "sh"])
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(io("cannot start a script in a server"))
    }

    /// `read` of server `server`, or why there is none.
    fn with_server<T>(
        &self,
        server: &str,
        read: impl FnOnce(&ServerNs) -> T,
    ) -> Result<T, NetnsError> {
        self.state()
            .servers
            .get(server)
            .map(read)
            .ok_or_else(|| NetnsError::UnknownServer(server.to_string()))
    }

    /// Runs `argv` inside server `server` and waits for it (for tests and the console).
    pub fn exec(&self, server: &str, argv: &[&str]) -> Result<std::process::Output, NetnsError> {
        let holder = self.with_server(server, |s| s.holder.id())?;
        Command::new("nsenter")
            .args(["--target", &holder.to_string(), "--mount", "--net", "--"])
            .args(argv)
            .stdin(Stdio::null())
            .output()
            .map_err(io("cannot run a command in a server"))
    }

    /// The server's console log so far.
    pub fn console(&self, server: &str) -> Result<String, NetnsError> {
        let path = self.with_server(server, |s| s.dir.join("console.log"))?;
        Ok(std::fs::read_to_string(path).unwrap_or_default())
    }

    /// Appends `line` to the server's console log (what the emulated firmware says).
    pub fn console_line(&self, server: &str, line: &str) -> Result<(), NetnsError> {
        let path = self.with_server(server, |s| s.dir.join("console.log"))?;
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io(format!("cannot open {}", path.display())))?;
        writeln!(log, "{line}").map_err(io("cannot write the console log"))
    }

    /// Stops every process in server `server` but its mount holder (power off).
    pub fn stop(&self, server: &str) -> Result<usize, NetnsError> {
        let (ns, holder) = self.with_server(server, |s| (s.ns.clone(), s.holder.id()))?;
        Ok(kill_all(&ns, Some(holder)))
    }

    /// Removes server `server`: its processes, its mount holder and its namespace.
    pub fn remove_server(&self, server: &str) -> Result<(), NetnsError> {
        let Some(mut s) = self.state().servers.remove(server) else {
            return Err(NetnsError::UnknownServer(server.to_string()));
        };
        kill_all(&s.ns, None);
        let _ = s.holder.kill();
        let _ = s.holder.wait();
        ip(&["netns", "del", &s.ns]).map(drop)
    }
}

/// Kills every process in namespace `ns` but `spare`, with everything they started, even
/// in namespaces of their own (a server's containers): SIGTERM, then SIGKILL after 2 s.
/// Then removes the cgroups those processes were in that are now empty (a server's
/// containers' cgroups and the ones above them) but never one this process is in.
/// Returns how many processes there were.
fn kill_all(ns: &str, spare: Option<u32>) -> usize {
    let in_ns = |ns: &str| -> Vec<i32> {
        ip(&["netns", "pids", ns])
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
            .filter(|p| Some(*p as u32) != spare)
            .collect()
    };
    let first = with_descendants(&in_ns(ns));
    let cgroups: std::collections::BTreeSet<String> =
        first.iter().flat_map(|pid| cgroups_of(*pid)).collect();
    let signal = |pid: i32, sig: rustix::process::Signal| {
        if let Some(pid) = rustix::process::Pid::from_raw(pid) {
            let _ = rustix::process::kill_process(pid, sig);
        }
    };
    let alive = |pids: &[i32]| -> Vec<i32> {
        pids.iter()
            .copied()
            .filter(|p| Path::new(&format!("/proc/{p}")).exists())
            .collect()
    };
    for pid in &first {
        signal(*pid, rustix::process::Signal::TERM);
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline && !alive(&first).is_empty() {
        std::thread::sleep(Duration::from_millis(50));
    }
    // What is left, and anything started meanwhile.
    let mut rest = alive(&first);
    rest.extend(with_descendants(&in_ns(ns)));
    for pid in with_descendants(&rest) {
        signal(pid, rustix::process::Signal::KILL);
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline && !alive(&rest).is_empty() {
        std::thread::sleep(Duration::from_millis(50));
    }
    remove_cgroups(&cgroups);
    first.len()
}

/// `roots` and every process below them (by parent), each once.
fn with_descendants(roots: &[i32]) -> Vec<i32> {
    let mut children: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        // `pid (comm) state ppid …`: the name may hold spaces and parentheses.
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if let Some(ppid) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<i32>().ok())
        {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut queue: Vec<i32> = roots.to_vec();
    let mut all = Vec::new();
    while let Some(pid) = queue.pop() {
        if seen.insert(pid) {
            all.push(pid);
            queue.extend(children.get(&pid).into_iter().flatten());
        }
    }
    all
}

/// The cgroup paths process `pid` is in, one per hierarchy (`/orc/n-1/abc`).
fn cgroups_of(pid: i32) -> Vec<String> {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.splitn(3, ':').nth(2))
        .map(str::to_string)
        .collect()
}

/// Removes `paths` (cgroup paths, as `/proc/PID/cgroup` names them) in every cgroup
/// hierarchy mounted under `/sys/fs/cgroup`, with the parents they leave empty; never the
/// root, nor a cgroup this process or one above it is in. A cgroup still in use stays
/// (the kernel refuses to remove it).
fn remove_cgroups(paths: &std::collections::BTreeSet<String>) {
    let own: Vec<String> = cgroups_of(std::process::id() as i32);
    let kept = |path: &str| {
        path == "/"
            || own.iter().any(|mine| {
                mine == path
                    || mine
                        .strip_prefix(path)
                        .is_some_and(|rest| rest.starts_with('/'))
            })
    };
    let mounts: Vec<PathBuf> = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(CgroupMount::parse)
        .filter(|m| m.fstype != "tmpfs")
        .map(|m| PathBuf::from(m.point))
        .collect();
    for path in paths {
        for mount in &mounts {
            let mut at = path.as_str();
            while !kept(at) {
                if std::fs::remove_dir(mount.join(at.trim_start_matches('/'))).is_err() {
                    break;
                }
                at = match at.rsplit_once('/') {
                    Some(("", _)) | None => "/",
                    Some((parent, _)) => parent,
                };
            }
        }
    }
}

/// A file system mounted at or below `/sys/fs/cgroup`, from a line of `mountinfo`.
#[derive(Debug, PartialEq, Eq)]
struct CgroupMount<'a> {
    point: &'a str,
    fstype: &'a str,
    source: &'a str,
    options: &'a str,
}

impl<'a> CgroupMount<'a> {
    /// `id parent major:minor root point options [optional…] - fstype source super-options`.
    fn parse(line: &'a str) -> Option<CgroupMount<'a>> {
        let (head, tail) = line.split_once(" - ")?;
        let point = head.split_whitespace().nth(4)?;
        let mut tail = tail.split_whitespace();
        let (fstype, source, options) = (tail.next()?, tail.next()?, tail.next()?);
        let under = point == "/sys/fs/cgroup" || point.starts_with("/sys/fs/cgroup/");
        let kind = matches!(fstype, "cgroup" | "cgroup2")
            || (fstype == "tmpfs" && point == "/sys/fs/cgroup");
        (under && kind).then_some(CgroupMount {
            point,
            fstype,
            source,
            options,
        })
    }
}

/// The symbolic links in `/sys/fs/cgroup` (`cpu -> cpu,cpuacct` on some hosts).
fn cgroup_links() -> Vec<(String, String)> {
    std::fs::read_dir("/sys/fs/cgroup")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let target = std::fs::read_link(entry.path()).ok()?;
            Some((
                entry.file_name().to_str()?.to_string(),
                target.to_str()?.to_string(),
            ))
        })
        .collect()
}

/// Shell lines that mount the cgroup file systems of `mountinfo` (the host's) again at
/// their places, with the links among them: the v1 hierarchies on their tmpfs, or the one
/// v2 hierarchy.
fn cgroup_mounts(mountinfo: &str, links: &[(String, String)]) -> String {
    let mut lines = String::new();
    for mount in mountinfo.lines().filter_map(CgroupMount::parse) {
        if ![mount.point, mount.source, mount.options]
            .iter()
            .all(|part| {
                shell_safe(part)
                    || part
                        .split(',')
                        .all(|p| shell_safe(p.replace('=', "_").as_str()))
            })
        {
            continue;
        }
        lines.push_str(&format!(
            "mkdir -p {point}\nmount -t {fstype} -o {options} {source} {point}\n",
            point = mount.point,
            fstype = mount.fstype,
            options = mount.options,
            source = mount.source,
        ));
    }
    if !lines.is_empty() {
        for (name, target) in links {
            if shell_safe(name) && target.split(',').all(shell_safe) {
                lines.push_str(&format!("ln -sfn {target} /sys/fs/cgroup/{name}\n"));
            }
        }
    }
    lines
}

/// Text that sits in a shell line as it is: a path without quotes, spaces or expansions.
fn shell_safe(text: &str) -> bool {
    !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '-' | '_' | '+'))
}

fn write_private(path: &Path, text: &str) -> Result<(), NetnsError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(io(format!("cannot write {}", path.display())))?;
    file.write_all(text.as_bytes())
        .map_err(io(format!("cannot write {}", path.display())))
}

impl Drop for Fabric {
    fn drop(&mut self) {
        let servers: Vec<String> = self.state().servers.keys().cloned().collect();
        for server in servers {
            if let Err(e) = self.remove_server(&server) {
                tracing::warn!(server, error = %e, "a materialised server was not removed");
            }
        }
        let routers: Vec<String> = self
            .state()
            .routers
            .values()
            .map(|(ns, _)| ns.clone())
            .collect();
        for ns in routers {
            let _ = ip(&["netns", "del", &ns]);
        }
        for mut child in std::mem::take(&mut self.state().children) {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.stop_echo.store(true, Ordering::Relaxed);
        if let Some(echo) = self.echo.take() {
            let _ = echo.join();
        }
        for ns in [self.echo_ns.clone(), self.inet.clone()] {
            kill_all(&ns, None);
            // Deleting the internet namespace takes the uplink, its host end and the route.
            let _ = ip(&["netns", "del", &ns]);
        }
        let host_if = format!("{}h", self.plan.prefix());
        let _ = ip(&["link", "del", &host_if]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_missing_tool_is_named_at_once_with_the_command_that_installs_them() {
        assert!(missing_tools(|_| true).is_empty());
        let missing = missing_tools(|tool| !["iptables", "nft", "sshd"].contains(&tool));
        let words = NetnsError::Missing(missing).to_string();
        for tool in [
            "`iptables`",
            "`nft`",
            "`sshd`",
            "nftables",
            "openssh-server",
        ] {
            assert!(words.contains(tool), "{words}");
        }
        assert!(words.contains("needs 3 tool(s)"), "{words}");
        assert!(
            words.ends_with("`apt-get install openssh-server iptables nftables`"),
            "{words}"
        );
        let all = NetnsError::Missing(missing_tools(|_| false)).to_string();
        assert!(
            all.contains("apt-get install iproute2 util-linux openssh-client"),
            "util-linux is named once: {all}"
        );
    }

    #[test]
    fn slots_give_disjoint_reserved_addresses() {
        let reserved = |a: Ipv4Addr| a.octets()[0] == 198 && (a.octets()[1] & 0xfe) == 18;
        let mut seen = std::collections::BTreeSet::new();
        for slot in 0..SLOTS {
            let plan = Plan::new(slot).unwrap();
            let (net, len) = plan.public_net();
            assert_eq!(len, 20);
            for a in [
                net,
                plan.router(),
                plan.echo(),
                plan.public(0).unwrap(),
                plan.public(4078).unwrap(),
                plan.host(),
                plan.uplink(),
            ] {
                assert!(reserved(a), "{a} of slot {slot}");
                assert!(seen.insert(a), "{a} twice");
            }
            assert_eq!(plan.public(4079), None);
            // The uplinks sit above every public slice.
            assert!(
                u32::from(plan.public(4078).unwrap()) < u32::from(Ipv4Addr::new(198, 19, 255, 0))
            );
        }
        assert_eq!(Plan::new(SLOTS), None);
        assert_eq!(
            Plan::new(0).unwrap().public(0),
            Some(Ipv4Addr::new(198, 18, 0, 16))
        );
        assert_eq!(Plan::new(1).unwrap().host(), Ipv4Addr::new(198, 19, 255, 6));
    }

    #[test]
    fn a_server_gets_the_hosts_cgroup_file_systems_again() {
        let v1 = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
                  32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
                  40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n\
                  41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n\
                  50 23 0:40 / /tmp rw - tmpfs tmpfs rw\n";
        assert_eq!(
            cgroup_mounts(v1, &[("cpuacct".into(), "cpu,cpuacct".into())]),
            "mkdir -p /sys/fs/cgroup\nmount -t tmpfs -o rw,mode=755 tmpfs /sys/fs/cgroup\n\
             mkdir -p /sys/fs/cgroup/cpu\nmount -t cgroup -o rw,cpu cgroup /sys/fs/cgroup/cpu\n\
             mkdir -p /sys/fs/cgroup/systemd\nmount -t cgroup -o rw,name=systemd cgroup /sys/fs/cgroup/systemd\n\
             mkdir -p /sys/fs/cgroup/unified\nmount -t cgroup2 -o rw cgroup2 /sys/fs/cgroup/unified\n\
             ln -sfn cpu,cpuacct /sys/fs/cgroup/cpuacct\n"
        );
        let v2 = "30 23 0:27 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
        assert_eq!(
            cgroup_mounts(v2, &[]),
            "mkdir -p /sys/fs/cgroup\nmount -t cgroup2 -o rw,nsdelegate cgroup2 /sys/fs/cgroup\n"
        );
        // Nothing odd reaches the shell.
        assert_eq!(
            cgroup_mounts(
                "1 2 0:1 / /sys/fs/cgroup/x$(id) rw - cgroup cgroup rw,cpu\n",
                &[]
            ),
            ""
        );
    }

    #[test]
    fn a_process_tree_is_found_from_its_roots() {
        // This test's own process has no children it did not start; a child it starts is
        // found below it.
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let me = std::process::id() as i32;
        let tree = with_descendants(&[me]);
        assert_eq!(tree[0], me);
        assert!(tree.contains(&(child.id() as i32)), "{tree:?}");
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn only_plain_paths_go_into_the_holder_script() {
        assert!(shell_safe("/work/target/debug/orc"));
        assert!(!shell_safe("/tmp/a b"));
        assert!(!shell_safe("/tmp/$(reboot)"));
        assert!(!shell_safe(""));
    }
}

/// The emulated internet's certificate authority: Debian's `pebble` (an ACME server for
/// tests) and `pebble-challtestsrv` as the internet's DNS, both on the echo host.
#[derive(Debug, Clone)]
pub struct AcmeServer {
    /// The ACME directory (`https://<echo>:14000/dir`).
    pub directory: String,
    /// The CA of the directory's own HTTPS (not of the certificates it issues: those chain
    /// to a root pebble makes at each start, at `<management>/roots/0`).
    pub ca_pem: String,
    /// Pebble's management interface (`https://<echo>:15000`).
    pub management: String,
    /// The DNS server's management interface (`http://<echo>:8055`): `POST /add-a` with
    /// `{"host": "shop.example.com.", "addresses": ["198.18.0.9"]}` points a name.
    pub dns_management: String,
    /// The DNS server (`<echo>:53`).
    pub dns: SocketAddr,
}

/// Whether this host has what [`Fabric::start_acme`] runs.
pub fn acme_available() -> bool {
    on_path("pebble") && on_path("pebble-challtestsrv")
}

/// The CA and the certificate of the ACME server's HTTPS listener for `ip`.
fn acme_listener_certificate(ip: Ipv4Addr) -> Result<(String, String, String), NetnsError> {
    let fail = |e: rcgen::Error| NetnsError::Command {
        command: "generating the ACME server's certificate".into(),
        stderr: e.to_string(),
    };
    let ca_key = rcgen::KeyPair::generate().map_err(fail)?;
    let mut ca_params = rcgen::CertificateParams::default();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "orc emulated internet CA");
    ca_params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
    ];
    let ca_cert = ca_params.self_signed(&ca_key).map_err(fail)?;
    let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
    let key = rcgen::KeyPair::generate().map_err(fail)?;
    let mut params = rcgen::CertificateParams::default();
    params.subject_alt_names = vec![rcgen::SanType::IpAddress(std::net::IpAddr::V4(ip))];
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, ip.to_string());
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, &issuer).map_err(fail)?;
    Ok((ca_cert.pem(), cert.pem(), key.serialize_pem()))
}

impl Fabric {
    /// Starts the emulated internet's ACME server and DNS on the echo host, and waits until
    /// the directory answers. Names resolve only as [`AcmeServer::dns_management`] is told.
    pub fn start_acme(&self) -> Result<AcmeServer, NetnsError> {
        let echo = self.plan.echo();
        let dir = self.dir.path().join("acme");
        std::fs::create_dir_all(&dir).map_err(io("creating the ACME server's directory"))?;
        let (ca_pem, cert_pem, key_pem) = acme_listener_certificate(echo)?;
        let write = |name: &str, text: &str| -> Result<PathBuf, NetnsError> {
            let path = dir.join(name);
            std::fs::write(&path, text).map_err(io(format!("writing {}", path.display())))?;
            Ok(path)
        };
        let cert = write("cert.pem", &cert_pem)?;
        let key = write("key.pem", &key_pem)?;
        let config = serde_json::json!({
            "pebble": {
                "listenAddress": format!("{echo}:14000"),
                "managementListenAddress": format!("{echo}:15000"),
                "certificate": cert,
                "privateKey": key,
                "httpPort": 80,
                "tlsPort": 443,
                "ocspResponderURL": "",
                "externalAccountBindingRequired": false,
            }
        });
        let config = write("pebble.json", &config.to_string())?;
        let log = |name: &str| -> Result<Stdio, NetnsError> {
            let path = dir.join(name);
            let file =
                std::fs::File::create(&path).map_err(io(format!("creating {}", path.display())))?;
            Ok(Stdio::from(file))
        };
        let dns = SocketAddr::from((echo, 53));
        let spawn = |program: &str, args: &[&str], out: &str| -> Result<Child, NetnsError> {
            let mut command = Command::new("ip");
            command
                .args(["netns", "exec", &self.echo_ns, program])
                .args(args)
                .env("PEBBLE_VA_NOSLEEP", "1")
                .env("PEBBLE_WFE_NONCEREJECT", "0")
                .env("PEBBLE_AUTHZREUSE", "0")
                .stdin(Stdio::null())
                .stdout(log(out)?)
                .stderr(log(out)?);
            command
                .spawn()
                .map_err(io(format!("starting {program} on the echo host")))
        };
        let management = format!("{echo}:8055");
        let dns_server = spawn(
            "pebble-challtestsrv",
            &[
                "-dns01",
                &dns.to_string(),
                "-http01",
                "",
                "-https01",
                "",
                "-tlsalpn01",
                "",
                "-management",
                &management,
                "-defaultIPv4",
                "",
                "-defaultIPv6",
                "",
            ],
            "dns.log",
        )?;
        let pebble = spawn(
            "pebble",
            &[
                "-config",
                &config.display().to_string(),
                "-dnsserver",
                &dns.to_string(),
            ],
            "pebble.log",
        )?;
        self.state().children.extend([dns_server, pebble]);
        // Both listen within a second or so.
        let deadline = Instant::now() + Duration::from_secs(20);
        for addr in [
            SocketAddr::from((echo, 14000)),
            SocketAddr::from((echo, 8055)),
        ] {
            loop {
                if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                    break;
                }
                if Instant::now() > deadline {
                    let pebble_log =
                        std::fs::read_to_string(dir.join("pebble.log")).unwrap_or_default();
                    let dns_log = std::fs::read_to_string(dir.join("dns.log")).unwrap_or_default();
                    return Err(NetnsError::Command {
                        command: format!("waiting for the ACME server at {addr}"),
                        stderr: format!("{pebble_log}{dns_log}"),
                    });
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Ok(AcmeServer {
            directory: format!("https://{echo}:14000/dir"),
            ca_pem,
            management: format!("https://{echo}:15000"),
            dns_management: format!("http://{management}"),
            dns,
        })
    }
}
