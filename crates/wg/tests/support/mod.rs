//! A two-namespace underlay for the privileged WireGuard tests and the benchmark.
//!
//! Two network namespaces (`orcwg-<pid>-<n>-a` and `-b`) joined by a veth pair with
//! 198.18.200.1/24 and 198.18.200.2/24 (a benchmarking range): every packet the tests send
//! stays inside them. [`Topology`]'s `Drop` kills what runs in them and deletes them, also
//! when a test fails. [`NsRuntime`] is a tokio runtime whose threads live in one of the
//! namespaces, so a `Device` created on it gets its TUN device and socket there.

#![allow(dead_code)]

use std::fs::File;
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use ipnet::Ipv4Net;
use nix::sched::{CloneFlags, setns};
use orc_wg::{Batching, Device, DeviceConfig, PeerConfig, generate_private_key};

pub const UNDERLAY_A: Ipv4Addr = Ipv4Addr::new(198, 18, 200, 1);
pub const UNDERLAY_B: Ipv4Addr = Ipv4Addr::new(198, 18, 200, 2);
pub const MESH_A: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 1);
pub const MESH_B: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 2);
pub const PORT: u16 = 51820;
pub const WG_NAME: &str = "orcwg0";

/// Fails the test (never skips it) when it cannot run: the privileged tests are part of
/// the suite and a machine that cannot run them must say so.
pub fn require_privileges() {
    let root = nix::unistd::geteuid().is_root();
    assert!(
        root,
        "these tests create network namespaces and TUN devices: run them as root"
    );
    assert!(
        Path::new("/dev/net/tun").exists(),
        "/dev/net/tun is missing: these tests need the TUN driver"
    );
    let ip = Command::new("ip").arg("-V").output();
    assert!(
        ip.is_ok_and(|o| o.status.success()),
        "`ip` (iproute2) is missing: apt-get install iproute2"
    );
}

/// Runs a command; returns its output (never panics on failure).
pub fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("cannot run {program}: {error}"))
}

/// Runs a command that must succeed.
pub fn must(program: &str, args: &[&str]) {
    let out = run(program, args);
    assert!(
        out.status.success(),
        "{program} {}: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// Two namespaces joined by a veth pair; removed on drop.
#[derive(Debug)]
pub struct Topology {
    pub a: String,
    pub b: String,
}

impl Topology {
    pub fn new() -> Topology {
        require_privileges();
        let prefix = format!(
            "orcwg-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let topology = Topology {
            a: format!("{prefix}-a"),
            b: format!("{prefix}-b"),
        };
        for ns in [&topology.a, &topology.b] {
            must("ip", &["netns", "add", ns]);
            must("ip", &["-n", ns, "link", "set", "lo", "up"]);
        }
        must(
            "ip",
            &[
                "link",
                "add",
                "veth0",
                "netns",
                &topology.a,
                "type",
                "veth",
                "peer",
                "name",
                "veth0",
                "netns",
                &topology.b,
            ],
        );
        for (ns, address) in [(&topology.a, UNDERLAY_A), (&topology.b, UNDERLAY_B)] {
            must(
                "ip",
                &[
                    "-n",
                    ns,
                    "addr",
                    "add",
                    &format!("{address}/24"),
                    "dev",
                    "veth0",
                ],
            );
            must("ip", &["-n", ns, "link", "set", "veth0", "up"]);
        }
        topology
    }

    /// Runs a command inside namespace `ns`.
    pub fn exec(&self, ns: &str, args: &[&str]) -> Output {
        let mut full = vec!["netns", "exec", ns];
        full.extend_from_slice(args);
        run("ip", &full)
    }

    /// Whether `count` pings from `ns` to `to` all get an answer (2 s each at most).
    pub fn ping(&self, ns: &str, to: Ipv4Addr, count: u32) -> bool {
        let count = count.to_string();
        let to = to.to_string();
        self.exec(
            ns,
            &["ping", "-c", &count, "-i", "0.2", "-W", "2", "-q", &to],
        )
        .status
        .success()
    }

    /// Pings once a second until one answer comes back (the first ping also waits for the
    /// handshake); false after `tries` tries.
    pub fn ping_until_answered(&self, ns: &str, to: Ipv4Addr, tries: u32) -> bool {
        let to = to.to_string();
        (0..tries).any(|_| {
            self.exec(ns, &["ping", "-c", "1", "-W", "1", "-q", &to])
                .status
                .success()
        })
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let pids = run("ip", &["netns", "pids", ns]);
            for pid in String::from_utf8_lossy(&pids.stdout).split_whitespace() {
                let _ = run("kill", &["-9", pid]);
            }
            let _ = run("ip", &["netns", "del", ns]);
        }
    }
}

/// A tokio runtime whose worker threads are in namespace `ns`.
#[derive(Debug)]
pub struct NsRuntime {
    pub ns: String,
    runtime: tokio::runtime::Runtime,
}

impl NsRuntime {
    pub fn new(ns: &str, workers: usize) -> NsRuntime {
        let name = ns.to_owned();
        let runtime = thread::spawn(move || {
            enter_netns(&name);
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .enable_all()
                .build()
                .expect("tokio runtime")
        })
        .join()
        .expect("runtime thread");
        let runtime = NsRuntime {
            ns: ns.to_owned(),
            runtime,
        };
        let inside = runtime.run(async { current_netns() });
        assert_eq!(
            inside,
            netns_inode(ns),
            "the runtime's threads are not in {ns}"
        );
        runtime
    }

    /// Runs `future` on one of the runtime's worker threads (in the namespace) and waits
    /// for its output.
    pub fn run<T: Send + 'static>(&self, future: impl Future<Output = T> + Send + 'static) -> T {
        let task = self.runtime.spawn(future);
        self.runtime.block_on(task).expect("task panicked")
    }
}

/// Moves the calling thread into namespace `ns`.
pub fn enter_netns(ns: &str) {
    let file = File::open(format!("/run/netns/{ns}")).expect("namespace file");
    setns(&file, CloneFlags::CLONE_NEWNET).expect("setns");
}

fn netns_inode(ns: &str) -> u64 {
    std::fs::metadata(format!("/run/netns/{ns}"))
        .expect("namespace file")
        .ino()
}

fn current_netns() -> u64 {
    std::fs::metadata("/proc/thread-self/ns/net")
        .expect("/proc/thread-self/ns/net")
        .ino()
}

/// A device config for side `a` or `b` of the topology.
pub fn device_config(mesh: Ipv4Addr, batching: Batching) -> DeviceConfig {
    DeviceConfig {
        name: WG_NAME.to_owned(),
        private_key: generate_private_key().expect("key"),
        listen_port: PORT,
        address: Some(Ipv4Net::new(mesh, 24).unwrap()),
        mtu: 1420,
        batching,
    }
}

/// A peer entry for `device`, reached at `endpoint`, allowed `allowed`.
pub fn peer_of(device: &Device, endpoint: Option<Ipv4Addr>, allowed: &[&str]) -> PeerConfig {
    PeerConfig {
        public_key: device.public_key(),
        endpoint: endpoint.map(|ip| SocketAddrV4::new(ip, PORT)),
        allowed_ips: allowed.iter().map(|a| a.parse().unwrap()).collect(),
        keepalive: None,
    }
}

/// Two devices on a topology, each on its own runtime in its namespace.
#[derive(Debug)]
pub struct Pair {
    // Fields drop in order: devices and runtimes before the namespaces.
    pub a: Option<Device>,
    pub b: Option<Device>,
    pub rt_a: NsRuntime,
    pub rt_b: NsRuntime,
    pub topology: Topology,
}

impl Pair {
    /// Both devices up, each with the other as its only peer (allowed: the other's /32);
    /// `b_knows_a` says whether B has A's endpoint.
    pub fn new(batching: Batching, b_knows_a: bool) -> Pair {
        let topology = Topology::new();
        let rt_a = NsRuntime::new(&topology.a, 2);
        let rt_b = NsRuntime::new(&topology.b, 2);
        let a = rt_a
            .run(Device::create(device_config(MESH_A, batching)))
            .expect("device A");
        let b = rt_b
            .run(Device::create(device_config(MESH_B, batching)))
            .expect("device B");
        a.set_peers(&[peer_of(&b, Some(UNDERLAY_B), &["10.99.0.2/32"])])
            .expect("A's peers");
        b.set_peers(&[peer_of(
            &a,
            b_knows_a.then_some(UNDERLAY_A),
            &["10.99.0.1/32"],
        )])
        .expect("B's peers");
        Pair {
            a: Some(a),
            b: Some(b),
            rt_a,
            rt_b,
            topology,
        }
    }

    pub fn a(&self) -> &Device {
        self.a.as_ref().expect("device A")
    }

    pub fn b(&self) -> &Device {
        self.b.as_ref().expect("device B")
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        if let Some(a) = self.a.take() {
            self.rt_a.run(a.shutdown());
        }
        if let Some(b) = self.b.take() {
            self.rt_b.run(b.shutdown());
        }
    }
}

/// Deterministic test data: xorshift64 bytes.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// FNV-1a, 64 bits.
pub fn checksum(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Sends `data` over one TCP connection from namespace `from_ns` to a listener on
/// `to:port` in namespace `to_ns`; returns what arrived.
pub fn tcp_transfer(from_ns: &str, to_ns: &str, to: Ipv4Addr, port: u16, data: Vec<u8>) -> Vec<u8> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let to_ns = to_ns.to_owned();
    let receiver = thread::spawn(move || {
        enter_netns(&to_ns);
        let listener = TcpListener::bind(SocketAddrV4::new(to, port)).expect("listen");
        ready_tx.send(()).expect("ready");
        let (mut stream, _) = listener.accept().expect("accept");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        let mut received = Vec::new();
        std::io::Read::read_to_end(&mut stream, &mut received).expect("receive");
        received
    });
    ready_rx.recv().expect("listener ready");
    let from_ns = from_ns.to_owned();
    let sender = thread::spawn(move || {
        enter_netns(&from_ns);
        let mut stream = TcpStream::connect_timeout(
            &SocketAddrV4::new(to, port).into(),
            Duration::from_secs(10),
        )
        .expect("connect");
        stream
            .set_write_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        std::io::Write::write_all(&mut stream, &data).expect("send");
    });
    sender.join().expect("sender");
    receiver.join().expect("receiver")
}

/// Streams for about `duration` over one TCP connection from `from_ns` to `to:port` in
/// `to_ns`; returns the receiver's Mbit/s.
pub fn tcp_throughput(
    from_ns: &str,
    to_ns: &str,
    to: Ipv4Addr,
    port: u16,
    duration: Duration,
) -> f64 {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let to_ns = to_ns.to_owned();
    let receiver = thread::spawn(move || {
        enter_netns(&to_ns);
        let listener = TcpListener::bind(SocketAddrV4::new(to, port)).expect("listen");
        ready_tx.send(()).expect("ready");
        let (mut stream, _) = listener.accept().expect("accept");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut buffer = vec![0u8; 256 << 10];
        let mut total = 0u64;
        let mut started = None;
        loop {
            match std::io::Read::read(&mut stream, &mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    started.get_or_insert_with(Instant::now);
                    total += n as u64;
                }
            }
        }
        let elapsed = started.map_or(0.0, |s: Instant| s.elapsed().as_secs_f64());
        if elapsed == 0.0 {
            0.0
        } else {
            total as f64 * 8.0 / elapsed / 1e6
        }
    });
    ready_rx.recv().expect("listener ready");
    let from_ns = from_ns.to_owned();
    let sender = thread::spawn(move || {
        enter_netns(&from_ns);
        let mut stream = TcpStream::connect_timeout(
            &SocketAddrV4::new(to, port).into(),
            Duration::from_secs(10),
        )
        .expect("connect");
        stream
            .set_write_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let chunk = vec![0x5au8; 128 << 10];
        let end = Instant::now() + duration;
        while Instant::now() < end {
            if std::io::Write::write_all(&mut stream, &chunk).is_err() {
                break;
            }
        }
    });
    sender.join().expect("sender");
    receiver.join().expect("receiver")
}

/// Whether `program` is on the PATH.
pub fn installed(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A `wireguard-go` interface in a namespace, configured with `wg` and `ip`; its process
/// dies with the topology, and its control socket (in the host's /var/run/wireguard) is
/// removed on drop.
#[derive(Debug)]
pub struct WireguardGo {
    pub name: String,
}

impl WireguardGo {
    /// Starts `name` in `ns` with `private_key` on UDP port [`PORT`], address `mesh`/24, and
    /// one peer.
    pub fn start(
        ns: &str,
        name: &str,
        private_key: &[u8; 32],
        mesh: Ipv4Addr,
        peer: &PeerConfig,
    ) -> WireguardGo {
        use base64::Engine as _;
        use base64::engine::general_purpose::STANDARD;
        use std::io::Write as _;
        use std::process::Stdio;

        assert!(
            installed("wireguard-go") && installed("wg"),
            "wireguard-go and wg are missing: apt-get install wireguard-go wireguard-tools"
        );
        let device = WireguardGo {
            name: name.to_owned(),
        };
        must("ip", &["netns", "exec", ns, "wireguard-go", name]);
        let mut wg = Command::new("ip")
            .args(["netns", "exec", ns, "wg", "set", name, "listen-port"])
            .arg(PORT.to_string())
            .args(["private-key", "/dev/stdin"])
            .stdin(Stdio::piped())
            .spawn()
            .expect("wg set");
        wg.stdin
            .take()
            .expect("stdin")
            .write_all(STANDARD.encode(private_key).as_bytes())
            .expect("key to wg");
        assert!(wg.wait().expect("wg").success(), "wg set private-key");
        let key = STANDARD.encode(peer.public_key);
        let allowed: Vec<String> = peer.allowed_ips.iter().map(|p| p.to_string()).collect();
        let allowed = allowed.join(",");
        let mut args = vec!["netns", "exec", ns, "wg", "set", name, "peer", &key];
        let endpoint = peer.endpoint.map(|e| e.to_string());
        if let Some(endpoint) = &endpoint {
            args.extend(["endpoint", endpoint]);
        }
        args.extend(["allowed-ips", &allowed]);
        must("ip", &args);
        must(
            "ip",
            &["-n", ns, "addr", "add", &format!("{mesh}/24"), "dev", name],
        );
        must("ip", &["-n", ns, "link", "set", name, "mtu", "1420", "up"]);
        device
    }
}

impl Drop for WireguardGo {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(format!("/var/run/wireguard/{}.sock", self.name));
    }
}
