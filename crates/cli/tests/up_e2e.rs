//! `orc up` as a newcomer runs it, end to end: the `orc` binary starts the emulators, the
//! zone, the partner (two slots) and the three one-cloud providers; the `orc` CLI then places
//! partner nodes (a site opens with its gateway), nodes on Hetzner, Robot and Vultr directly,
//! and takes everything away again (the site closes, its gateway pool goes to zero, every
//! instance is deleted in the emulators). Ctrl-C (SIGINT) stops it all with a clean exit.
//!
//! With `--netns` (root; CI runs it as root) the emulated servers are namespaces that boot
//! their user data: partner nodes in two classes, their site gateways, a Hetzner Cloud and a
//! Vultr node, a Robot server installed over SSH from its rescue system and two static hosts
//! joined over SSH all join the zone and read `ready`, `orc exec` runs on them, a zone
//! restart (SIGHUP) keeps every node and the agents reconnect by themselves, a released
//! static host takes a node again, and nothing is left behind.

mod support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::up::{MINUTE, Up};

/// A workstation's WireGuard interface in namespace `ns`: wireguard-go with the config of a
/// wg-quick file. Dropped, it is taken down and its process ends.
struct Workstation {
    ns: String,
    child: Child,
}

const WS_INTERFACE: &str = "orc-ws";

impl Workstation {
    fn start(ns: &str, file: &Path) -> Workstation {
        let text = std::fs::read_to_string(file).expect("the wg-quick file");
        let address = text
            .lines()
            .find_map(|l| l.strip_prefix("Address = "))
            .expect("an address in the file")
            .to_string();
        let stripped = Command::new("wg-quick")
            .arg("strip")
            .arg(file)
            .output()
            .expect("wg-quick (wireguard-tools) runs");
        assert!(
            stripped.status.success(),
            "{}",
            String::from_utf8_lossy(&stripped.stderr)
        );
        let wg_file = file.with_extension("wg");
        std::fs::write(&wg_file, &stripped.stdout).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", ns, "wireguard-go", "-f", WS_INTERFACE])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("wireguard-go starts");
        let ws = Workstation {
            ns: ns.to_string(),
            child,
        };
        let start = Instant::now();
        while !ws.ip(&["link", "show", WS_INTERFACE]) {
            assert!(start.elapsed() < MINUTE, "wireguard-go made no interface");
            std::thread::sleep(Duration::from_millis(100));
        }
        let set = Command::new("ip")
            .args(["netns", "exec", ns, "wg", "setconf", WS_INTERFACE])
            .arg(&wg_file)
            .status()
            .expect("wg runs");
        assert!(set.success(), "wg setconf");
        assert!(ws.ip(&["addr", "add", &address, "dev", WS_INTERFACE]));
        assert!(ws.ip(&["link", "set", WS_INTERFACE, "mtu", "1340", "up"]));
        ws
    }

    fn ip(&self, args: &[&str]) -> bool {
        Command::new("ip")
            .args(["-n", &self.ns])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    fn pings(&self, address: &str) -> bool {
        Command::new("ip")
            .args([
                "netns", "exec", &self.ns, "ping", "-c", "1", "-W", "2", address,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for Workstation {
    fn drop(&mut self) {
        self.ip(&["link", "del", WS_INTERFACE]);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The partner's gateway pool at `site`: `sys/sys/gw-<the partner's provider id>-<site>`.
fn partner_gateway_pool(up: &Up, site: &str) -> String {
    let partner = up.json(&["provider", "show", "partner"]);
    let id = partner["id"].as_str().expect("the partner's provider id");
    format!("sys/sys/gw-{id}-{site}")
}

fn states(nodes: &Value) -> Vec<&str> {
    nodes
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| n["state"].as_str().expect("state"))
        .collect()
}

#[test]
fn a_newcomer_places_nodes_everywhere_and_watches_a_site_open_and_close() {
    let dir = tempfile::tempdir().unwrap();
    let up = Up::start(dir.path());
    assert!(
        up.summary.contains("2/2 slots running") && up.summary.contains("provider registered"),
        "{}",
        up.summary
    );
    assert!(
        up.summary.contains("one-cloud hetzner, vultr, robot"),
        "{}",
        up.summary
    );
    let providers = up.wait_for(&["providers"], MINUTE, |list| {
        ["partner", "hetzner", "vultr", "robot"].iter().all(|name| {
            list.as_array().unwrap().iter().any(|p| {
                p["name"] == *name && p["replicas"].as_array().is_some_and(|r| !r.is_empty())
            })
        })
    });
    assert_eq!(providers.as_array().unwrap().len(), 5, "{providers:#}");

    // Partner nodes: the first one at a site opens it, and the site gets its gateway.
    let created = up.ok(&[
        "pool",
        "create",
        "sys/sys/web",
        "--provider",
        "partner",
        "--class",
        "eu-central",
        "--cpu",
        "2",
        "--mem",
        "4",
        "--os",
        "ubuntu-24.04",
        "--size",
        "2",
        "--wait",
    ]);
    assert!(created.contains("2 of 2 node(s) running"), "{created}");
    let web = up.json(&["nodes", "sys/sys/web"]);
    let site = web[0]["site"].as_str().expect("a site").to_string();
    assert!(site.starts_with("eu-central-"), "{web:#}");
    let sites = up.wait_for(&["sites"], 2 * MINUTE, |sites| {
        sites[0]["gateway"] == "running" && sites[0]["reported"] == true
    });
    assert_eq!(sites[0]["site"], site.as_str());
    assert_eq!(sites[0]["tenant_nodes"], 2);
    assert!(sites[0]["public_ipv4"].is_string(), "{sites:#}");
    let gateway_pool = partner_gateway_pool(&up, &site);
    let gateway = up.json(&["nodes", &gateway_pool]);
    assert_eq!(
        gateway[0]["addresses"][0], sites[0]["public_ipv4"],
        "the gateway holds the site's stable address"
    );

    // One-cloud providers, placed directly.
    for (pool, provider, location, plan, cpu, mem, os) in [
        (
            "api",
            "hetzner",
            "fsn1",
            Some("cx23"),
            "2",
            "4",
            "ubuntu-24.04",
        ),
        ("vm", "vultr", "fra", None, "2", "4", "ubuntu-24.04"),
        (
            "metal",
            "robot",
            "hel1",
            Some("EX44"),
            "20",
            "64",
            "Ubuntu-2404-noble-amd64-base.tar.gz",
        ),
    ] {
        let path = format!("sys/sys/{pool}");
        let mut args = vec![
            "pool",
            "create",
            &path,
            "--provider",
            provider,
            "--location",
            location,
            "--cpu",
            cpu,
            "--mem",
            mem,
            "--os",
            os,
            "--size",
            "1",
            "--wait",
        ];
        if let Some(plan) = plan {
            args.extend(["--plan", plan]);
        }
        let created = up.ok(&args);
        assert!(
            created.contains("1 of 1 node(s) running"),
            "{provider}: {created}"
        );
        let nodes = up.json(&["nodes", &path]);
        assert_eq!(nodes[0]["site"], location, "{provider}: {nodes:#}");
        assert!(
            !nodes[0]["addresses"].as_array().unwrap().is_empty(),
            "{provider}: {nodes:#}"
        );
    }

    // Everything away again: nodes end, the site closes and its gateway pool goes to zero.
    for pool in ["web", "api", "vm", "metal"] {
        up.ok(&["pool", "resize", &format!("sys/sys/{pool}"), "0"]);
    }
    for pool in ["web", "api", "vm", "metal"] {
        up.wait_for(
            &["nodes", &format!("sys/sys/{pool}"), "--all"],
            2 * MINUTE,
            |nodes| states(nodes).iter().all(|s| *s == "ended"),
        );
    }
    up.wait_for(&["sites"], 2 * MINUTE, |sites| {
        sites.as_array().is_some_and(Vec::is_empty)
    });
    // The gateway ends; once it has, its pool may be gone as well.
    let start = Instant::now();
    loop {
        let out = up.orc(&["--json", "nodes", &gateway_pool, "--all"]);
        if !out.status.success() {
            let words = String::from_utf8_lossy(&out.stderr);
            assert!(words.contains("not found"), "{words}");
            break;
        }
        let nodes: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        if states(&nodes).iter().all(|s| *s == "ended") {
            assert_eq!(states(&nodes), ["ended"]);
            break;
        }
        assert!(
            start.elapsed() < 2 * MINUTE,
            "the gateway never ended: {nodes:#}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    up.stop();
}

/// The namespaces whose names start with `prefix` (other tests make their own meanwhile).
fn namespaces(prefix: &str) -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(prefix))
        .map(str::to_string)
        .collect()
}

/// The fabric's server namespaces (Hetzner `-h…`, Vultr `-v…`).
fn server_namespaces(prefix: &str) -> Vec<String> {
    namespaces(prefix)
        .into_iter()
        .filter(|n| n.contains("-h") || n.contains("-v"))
        .collect()
}

fn ready(nodes: &Value) -> bool {
    nodes.as_array().is_some_and(|list| {
        !list.is_empty()
            && list
                .iter()
                .all(|n| n["agent"]["state"] == "ready" && n["agent"]["connected"] == true)
    })
}

/// The one-cloud pools of the `--netns` run: path, provider, location, plan, CPUs, GiB, OS.
type OneCloud = (
    &'static str,
    &'static str,
    &'static str,
    Option<&'static str>,
    &'static str,
    &'static str,
    &'static str,
);
const ONE_CLOUD: [OneCloud; 3] = [
    (
        "sys/sys/api",
        "hetzner",
        "fsn1",
        Some("cx23"),
        "2",
        "4",
        "ubuntu-24.04",
    ),
    ("sys/sys/vm", "vultr", "fra", None, "2", "4", "ubuntu-24.04"),
    (
        "sys/sys/metal",
        "robot",
        "hel1",
        Some("EX44"),
        "20",
        "64",
        "Ubuntu-2404-noble-amd64-base.tar.gz",
    ),
];

#[test]
fn with_netns_every_node_boots_joins_and_runs_commands() {
    assert!(
        rustix::process::geteuid().is_root(),
        "orc up --netns needs root (CI runs this test as root)"
    );
    let dir = tempfile::tempdir().unwrap();
    let up = Up::start_with(dir.path(), &["--netns"]);
    let fabric = up
        .summary
        .split("netns     servers are namespaces ")
        .nth(1)
        .and_then(|rest| rest.split_once("-* on 198."))
        .map(|(prefix, _)| format!("{prefix}-"))
        .unwrap_or_else(|| panic!("no fabric in the summary: {}", up.summary));
    let before = server_namespaces(&fabric);
    let pool = |name: &str, class: &str| {
        let created = up.ok(&[
            "pool",
            "create",
            name,
            "--provider",
            "partner",
            "--class",
            class,
            "--cpu",
            "2",
            "--mem",
            "4",
            "--os",
            "ubuntu-24.04",
            "--size",
            "1",
            "--wait",
        ]);
        assert!(created.contains("1 of 1 node(s) running"), "{created}");
    };
    pool("sys/sys/web", "eu-central");
    pool("sys/sys/east", "us-east");
    // One-cloud nodes: a Hetzner Cloud server and a Vultr instance boot their user data; a
    // Robot server is installed over SSH from its rescue system.
    for (name, provider, location, plan, cpu, mem, os) in ONE_CLOUD {
        let mut args = vec![
            "pool",
            "create",
            name,
            "--provider",
            provider,
            "--location",
            location,
            "--cpu",
            cpu,
            "--mem",
            mem,
            "--os",
            os,
            "--size",
            "1",
            "--wait",
        ];
        if let Some(plan) = plan {
            args.extend(["--plan", plan]);
        }
        let created = up.ok(&args);
        assert!(
            created.contains("1 of 1 node(s) running"),
            "{provider}: {created}"
        );
    }
    for name in ["sys/sys/web", "sys/sys/east"]
        .into_iter()
        .chain(ONE_CLOUD.iter().map(|one| one.0))
    {
        up.wait_for(&["nodes", name], 5 * MINUTE, ready);
    }
    // The sites' gateways run agents too.
    let sites = up.json(&["sites"]);
    let names: Vec<String> = sites
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["site"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names.len(), 2, "{sites:#}");
    for site in &names {
        up.wait_for(
            &["nodes", &partner_gateway_pool(&up, site)],
            3 * MINUTE,
            ready,
        );
    }
    // A command on a partner node sees its private address; one on the Hetzner node its
    // public one, from the reserved range.
    for (pool, field) in [
        ("sys/sys/web", "private_address"),
        ("sys/sys/east", "private_address"),
    ] {
        let node = up.json(&["nodes", pool]);
        let id = node[0]["id"].as_str().unwrap();
        let address = node[0][field].as_str().unwrap();
        let out = up.ok(&[
            "exec",
            id,
            "--project",
            "sys/sys",
            "--",
            "ip",
            "-4",
            "-o",
            "addr",
        ]);
        assert!(out.contains(&format!("inet {address}/")), "{pool}: {out}");
    }
    for (name, ..) in ONE_CLOUD {
        let node = up.json(&["nodes", name]);
        let id = node[0]["id"].as_str().unwrap();
        let address = node[0]["addresses"][0].as_str().unwrap();
        assert!(address.starts_with("198.1"), "{name}: {node:#}");
        let out = up.ok(&[
            "exec",
            id,
            "--project",
            "sys/sys",
            "--",
            "ip",
            "-4",
            "-o",
            "addr",
        ]);
        assert!(out.contains(&format!("inet {address}/")), "{name}: {out}");
    }
    // The mesh: every node of the project gets its mesh address, and nodes at the two
    // partner sites (behind their gateways, over the backbone) and a one-cloud node reach
    // each other on it.
    let mesh_of = |pool: &str| -> (String, String) {
        let node = up.json(&["nodes", pool]);
        let id = node[0]["id"].as_str().unwrap().to_string();
        let start = Instant::now();
        loop {
            let out = up.orc(&[
                "exec",
                &id,
                "--project",
                "sys/sys",
                "--",
                "ip",
                "-4",
                "-o",
                "addr",
                "show",
                "orc-mesh",
            ]);
            let text = String::from_utf8_lossy(&out.stdout);
            if let Some(address) = text
                .split_whitespace()
                .skip_while(|w| *w != "inet")
                .nth(1)
                .and_then(|cidr| cidr.split('/').next())
            {
                return (id, address.to_string());
            }
            assert!(
                start.elapsed() < MINUTE,
                "{pool} has no mesh interface: {text} {}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    let web = mesh_of("sys/sys/web");
    let east = mesh_of("sys/sys/east");
    let api = mesh_of("sys/sys/api");
    assert!(web.1.starts_with("10.88."), "{web:?}");
    for (from, to) in [(&web, &east), (&east, &web), (&web, &api), (&api, &east)] {
        let start = Instant::now();
        loop {
            let out = up.orc(&[
                "exec",
                &from.0,
                "--project",
                "sys/sys",
                "--",
                "ping",
                "-c",
                "2",
                "-W",
                "2",
                &to.1,
            ]);
            if out.status.success() {
                break;
            }
            assert!(
                start.elapsed() < MINUTE,
                "{} cannot reach {} on the mesh: {}{}",
                from.0,
                to.0,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    // Node names: each agent answers its project's names on its mesh address.
    let name = format!("{}.sys.sys.internal", east.0);
    let start = Instant::now();
    loop {
        let out = up.orc(&[
            "exec",
            &web.0,
            "--project",
            "sys/sys",
            "--",
            "dig",
            "+short",
            "+time=2",
            "+tries=1",
            &format!("@{}", web.1),
            &name,
        ]);
        let answered = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if answered == east.1 {
            break;
        }
        assert!(
            start.elapsed() < MINUTE,
            "{name} does not resolve to {} on {}: {answered:?} {}",
            east.1,
            web.0,
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let refused = up.orc(&[
        "exec",
        &web.0,
        "--project",
        "sys/sys",
        "--",
        "dig",
        "+time=2",
        "+tries=1",
        &format!("@{}", web.1),
        "example.com",
    ]);
    assert!(
        String::from_utf8_lossy(&refused.stdout).contains("status: REFUSED"),
        "it resolves no other name: {}",
        String::from_utf8_lossy(&refused.stdout)
    );

    // A TCP transfer across the sites over the mesh arrives whole.
    let on = |node: &(String, String), script: &str| -> String {
        up.ok(&[
            "exec",
            &node.0,
            "--project",
            "sys/sys",
            "--",
            "sh",
            "-c",
            script,
        ])
    };
    on(
        &east,
        &format!(
            "head -c 4000000 /dev/urandom > /run/blob && cd /run && \
             (nohup python3 -m http.server 8080 --bind {} >/dev/null 2>&1 &) && sleep 1",
            east.1
        ),
    );
    let sent = on(&east, "sha256sum < /run/blob");
    let received = on(
        &web,
        &format!(
            "curl -sSf --max-time 30 http://{}:8080/blob | sha256sum",
            east.1
        ),
    );
    assert_eq!(received, sent, "the 4 MB blob crossed the mesh intact");

    // Egress: a node without a public address reaches the internet as its gateway's
    // stable address.
    let echo = up
        .summary
        .split("the echo host is ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the echo host in the summary")
        .to_string();
    let web_site = up.json(&["nodes", "sys/sys/web"])[0]["site"]
        .as_str()
        .unwrap()
        .to_string();
    let stable = up
        .json(&["sites"])
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["site"] == web_site.as_str())
        .and_then(|s| s["public_ipv4"].as_str())
        .expect("the site's stable address")
        .to_string();
    let seen = on(&web, &format!("curl -sf --max-time 10 http://{echo}/"));
    assert_eq!(
        seen.trim(),
        stable,
        "the echo host sees the gateway's stable address"
    );

    // A workstation on the internet (the echo host's namespace) joins the mesh with the
    // file `orc mesh connect` wrote, and reaches the nodes at both partner sites and the
    // one-cloud node; the status sees it; disconnected, the nodes no longer answer it.
    let echo_ns = format!("{fabric}echo");
    let ws_file = dir.path().join("ws.conf");
    up.ok(&[
        "mesh",
        "connect",
        "sys/sys",
        "--name",
        "echo",
        "--output",
        ws_file.to_str().unwrap(),
    ]);
    let ws = Workstation::start(&echo_ns, &ws_file);
    for node in [&web, &east, &api] {
        let start = Instant::now();
        while !ws.pings(&node.1) {
            assert!(
                start.elapsed() < MINUTE,
                "the workstation cannot reach {} ({}) on the mesh",
                node.0,
                node.1
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    let status =
        up.wait_for(&["mesh", "status", "sys/sys"], MINUTE, |m| {
            m["members"].as_array().unwrap().iter().any(|w| {
                w["kind"] == "workstation" && w["name"] == "echo" && w["state"] == "connected"
            })
        });
    let web_status = status["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == web.0.as_str())
        .expect("the web node in the mesh status");
    assert_eq!(web_status["state"], "in step", "{status:#}");
    assert!(web_status["peers_up"].as_u64().unwrap() >= 1, "{status:#}");
    up.ok(&["mesh", "disconnect", "sys/sys", "--name", "echo"]);
    let start = Instant::now();
    while ws.pings(&web.1) {
        assert!(
            start.elapsed() < MINUTE,
            "the web node still answers a disconnected workstation"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    drop(ws);

    // A public pool: its address at the site is served by its nodes, and not by one whose
    // service stopped.
    let created = up.ok(&[
        "pool",
        "create",
        "sys/sys/www",
        "--provider",
        "partner",
        "--class",
        "eu-central",
        "--cpu",
        "2",
        "--mem",
        "4",
        "--os",
        "ubuntu-24.04",
        "--public",
        "--endpoint",
        "web=http:8080",
        "--size",
        "2",
        "--wait",
    ]);
    assert!(created.contains("2 of 2 node(s) running"), "{created}");
    let www = up.wait_for(&["nodes", "sys/sys/www"], 5 * MINUTE, ready);
    let www: Vec<String> = www
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap().to_string())
        .collect();
    for id in &www {
        up.ok(&[
            "exec",
            id,
            "--project",
            "sys/sys",
            "--",
            "sh",
            "-c",
            &format!(
                "mkdir -p /run/www && echo {id} > /run/www/index.html && cd /run/www || exit 1; \
                 nohup python3 -m http.server 8080 >/dev/null 2>&1 & echo $! > /run/www.pid; \
                 sleep 1"
            ),
        ]);
    }
    let shown = up.wait_for(&["pool", "show", "sys/sys/www"], 3 * MINUTE, |p| {
        p["pool"]["address"]["ipv4"].is_string()
    });
    let address = shown["pool"]["address"]["ipv4"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(address.starts_with("198.1"), "{shown:#}");
    let from_internet = || -> Option<String> {
        let out = Command::new("ip")
            .args(["netns", "exec", &echo_ns, "curl", "-sf", "--max-time", "3"])
            .arg(format!("http://{address}:8080/"))
            .output()
            .expect("curl in the echo host's namespace");
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let start = Instant::now();
    let mut answered = std::collections::BTreeSet::new();
    while answered.len() < 2 {
        if let Some(id) = from_internet() {
            assert!(www.contains(&id), "{id} is no node of the pool");
            answered.insert(id);
        }
        assert!(
            start.elapsed() < 2 * MINUTE,
            "the pool address {address} is not served by both nodes: {answered:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    up.ok(&[
        "exec",
        &www[0],
        "--project",
        "sys/sys",
        "--",
        "sh",
        "-c",
        // The servers share the host's process table: stop this one by its pid.
        "kill $(cat /run/www.pid)",
    ]);
    let start = Instant::now();
    let mut in_a_row = 0;
    while in_a_row < 10 {
        match from_internet() {
            Some(id) if id == www[1] => in_a_row += 1,
            _ => in_a_row = 0,
        }
        assert!(
            start.elapsed() < MINUTE,
            "the stopped node {} still gets the pool's requests",
            www[0]
        );
    }

    // Another project's node cannot reach this project's mesh, nor be reached from it.
    up.ok(&["project", "create", "sys/other"]);
    up.ok(&["provider", "change-scope", "sys/sys/partner", "zone"]);
    let created = up.ok(&[
        "pool",
        "create",
        "sys/other/lone",
        "--provider",
        "partner",
        "--class",
        "eu-central",
        "--cpu",
        "2",
        "--mem",
        "4",
        "--os",
        "ubuntu-24.04",
        "--size",
        "1",
        "--wait",
    ]);
    assert!(created.contains("1 of 1 node(s) running"), "{created}");
    let lone = up.wait_for(&["nodes", "sys/other/lone"], 5 * MINUTE, ready)[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let lone_mesh = {
        let start = Instant::now();
        loop {
            let out = up.orc(&[
                "exec",
                &lone,
                "--project",
                "sys/other",
                "--",
                "ip",
                "-4",
                "-o",
                "addr",
                "show",
                "orc-mesh",
            ]);
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            if let Some(cidr) = text.split_whitespace().skip_while(|w| *w != "inet").nth(1) {
                break cidr.split('/').next().unwrap().to_string();
            }
            assert!(
                start.elapsed() < MINUTE,
                "sys/other/lone has no mesh: {text}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    assert_ne!(
        lone_mesh.rsplit_once('.').map(|(net, _)| net),
        web.1.rsplit_once('.').map(|(net, _)| net),
        "two projects share no mesh prefix"
    );
    for (from, project, to) in [
        (&lone, "sys/other", &web.1),
        (&lone, "sys/other", &east.1),
        (&web.0, "sys/sys", &lone_mesh),
    ] {
        let out = up.orc(&[
            "exec",
            from,
            "--project",
            project,
            "--",
            "ping",
            "-c",
            "2",
            "-W",
            "1",
            to,
        ]);
        assert!(
            !out.status.success(),
            "{from} reached {to} across projects: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    // It still reaches its own gateway's internet.
    let seen = up.ok(&[
        "exec",
        &lone,
        "--project",
        "sys/other",
        "--",
        "curl",
        "-sf",
        "--max-time",
        "10",
        &format!("http://{echo}/"),
    ]);
    assert_eq!(
        seen.trim(),
        stable,
        "{lone} reaches the internet as its gateway"
    );

    // A gateway terminated in its cloud comes back by itself with the site's stable address
    // and pool address, and traffic through the site resumes.
    let gateway_pool = partner_gateway_pool(&up, &web_site);
    let old_gateway = up.json(&["nodes", &gateway_pool])[0].clone();
    assert_eq!(old_gateway["placed"]["cloud"], "hetzner", "{old_gateway:#}");
    let hetzner = up
        .summary
        .split("hetzner   ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the Hetzner emulator in the summary")
        .to_string();
    let hcloud = |args: &[&str]| -> String {
        let out = Command::new("hcloud")
            .args(args)
            .env("HCLOUD_ENDPOINT", format!("{hetzner}/v1"))
            .env("HCLOUD_TOKEN", "orc-up-emulator-token")
            .env("HCLOUD_CONFIG", "/nonexistent")
            .output()
            .expect("hcloud runs (Debian package hcloud-cli)");
        assert!(
            out.status.success(),
            "hcloud {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let servers: Value = serde_json::from_str(&hcloud(&["server", "list", "-o", "json"])).unwrap();
    let server = servers
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["public_net"]["ipv4"]["ip"] == stable.as_str())
        .unwrap_or_else(|| panic!("no Hetzner server holds {stable}: {servers:#}"));
    hcloud(&["server", "delete", &server["id"].to_string()]);
    let old_id = old_gateway["id"].as_str().unwrap().to_string();
    let back = up.wait_for(&["nodes", &gateway_pool], 5 * MINUTE, |nodes| {
        ready(nodes) && nodes[0]["id"] != old_id.as_str()
    });
    eprintln!("gateway {old_id} replaced by {}", back[0]["id"]);
    let sites_now = up.json(&["sites"]);
    let site_now = sites_now
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["site"] == web_site.as_str())
        .unwrap();
    assert_eq!(site_now["public_ipv4"], stable.as_str(), "{sites_now:#}");
    let start = Instant::now();
    loop {
        let crossed = up
            .orc(&[
                "exec",
                &web.0,
                "--project",
                "sys/sys",
                "--",
                "ping",
                "-c",
                "1",
                "-W",
                "2",
                &east.1,
            ])
            .status
            .success();
        let egress = up.orc(&[
            "exec",
            &web.0,
            "--project",
            "sys/sys",
            "--",
            "curl",
            "-sf",
            "--max-time",
            "3",
            &format!("http://{echo}/"),
        ]);
        let served = from_internet();
        if crossed
            && String::from_utf8_lossy(&egress.stdout).trim() == stable
            && served.as_deref() == Some(www[1].as_str())
        {
            break;
        }
        assert!(
            start.elapsed() < 2 * MINUTE,
            "traffic through the new gateway: mesh {crossed}, egress {:?}, pool address {served:?}",
            String::from_utf8_lossy(&egress.stdout)
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    // The Robot server runs what installimage installed, not its rescue system.
    let metal = up.json(&["nodes", "sys/sys/metal"]);
    let out = up.ok(&[
        "exec",
        metal[0]["id"].as_str().unwrap(),
        "--project",
        "sys/sys",
        "--",
        "sh",
        "-c",
        "test -s /etc/orc/join-token || echo token-gone; \
         ss -Hltn 'sport = :22' | grep -q . || echo no-rescue",
    ]);
    assert!(
        out.contains("token-gone"),
        "the join token is used up: {out}"
    );
    assert!(out.contains("no-rescue"), "{out}");
    // A zone restart keeps every node; the agents dial the restarted zone by themselves.
    let all: Vec<String> = ["sys/sys/web", "sys/sys/east"]
        .into_iter()
        .chain(ONE_CLOUD.iter().map(|one| one.0))
        .map(str::to_string)
        .chain(names.iter().map(|site| partner_gateway_pool(&up, site)))
        .collect();
    let ids = |up: &Up| -> Vec<String> {
        all.iter()
            .flat_map(|pool| {
                up.json(&["nodes", pool])
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|n| n["id"].as_str().unwrap().to_string())
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let before_restart = ids(&up);
    up.signal(rustix::process::Signal::HUP);
    let restarted = up.wait_line("zone restarted", 3 * MINUTE);
    eprintln!("{restarted}");
    for pool in &all {
        up.wait_for(&["nodes", pool], 5 * MINUTE, ready);
    }
    assert_eq!(ids(&up), before_restart, "the same nodes, none replaced");
    let out = up.ok(&[
        "exec",
        metal[0]["id"].as_str().unwrap(),
        "--project",
        "sys/sys",
        "--",
        "true",
    ]);
    assert!(out.is_empty(), "{out}");

    // Static hosts: both are claimed and joined over SSH; a released host takes a node again.
    let rack = |name: &str| {
        let created = up.ok(&[
            "pool",
            "create",
            name,
            "--provider",
            "static",
            "--location",
            "lab",
            "--cpu",
            "2",
            "--mem",
            "4",
            "--os",
            "installed",
            "--size",
            "2",
            "--wait",
        ]);
        assert!(created.contains("2 of 2 node(s) running"), "{created}");
        let nodes = up.wait_for(&["nodes", name], 5 * MINUTE, ready);
        for node in nodes.as_array().unwrap() {
            let address = node["addresses"][0].as_str().unwrap();
            let out = up.ok(&[
                "exec",
                node["id"].as_str().unwrap(),
                "--project",
                "sys/sys",
                "--",
                "ip",
                "-4",
                "-o",
                "addr",
            ]);
            assert!(out.contains(&format!("inet {address}/")), "{name}: {out}");
        }
        up.ok(&["pool", "delete", name, "--wait"]);
    };
    rack("sys/sys/rack");
    rack("sys/sys/rack2");

    let during = server_namespaces(&fabric);
    assert!(
        during.len() >= before.len() + 6,
        "four cloud servers (two partner nodes, Hetzner, Vultr) and two gateways: {during:?}"
    );

    // Pools deleted: their servers' namespaces go, and the Robot server is released.
    // A site that closes leaves the other gateways' backbone: the last pool at the east
    // site goes, and the route to its prefix leaves the west gateway.
    let east_site = up.json(&["nodes", "sys/sys/east"])[0]["site"]
        .as_str()
        .unwrap()
        .to_string();
    let east_prefix = up
        .json(&["sites"])
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["site"] == east_site.as_str())
        .and_then(|s| s["private_prefix"].as_str())
        .expect("the east site's prefix")
        .to_string();
    let west_gateway = up.json(&["nodes", &gateway_pool])[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let backbone = || {
        up.ok(&[
            "exec",
            &west_gateway,
            "--project",
            "sys/sys",
            "--",
            "ip",
            "-4",
            "route",
            "show",
            "dev",
            "orc-backbone",
        ])
    };
    assert!(backbone().contains(&east_prefix), "{}", backbone());
    up.ok(&["pool", "delete", "sys/sys/east", "--wait"]);
    let start = Instant::now();
    while backbone().contains(&east_prefix) {
        assert!(
            start.elapsed() < 3 * MINUTE,
            "the closed site {east_site} is still on the backbone: {}",
            backbone()
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    for name in ["sys/sys/web", "sys/sys/www", "sys/other/lone"]
        .into_iter()
        .chain(ONE_CLOUD.iter().map(|one| one.0))
    {
        up.ok(&["pool", "delete", name, "--wait"]);
    }

    let start = Instant::now();
    while server_namespaces(&fabric).len() > before.len() {
        assert!(
            start.elapsed() < 3 * MINUTE,
            "namespaces left: {:?}",
            server_namespaces(&fabric)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    up.stop();
    let after = namespaces(&fabric);
    assert!(after.is_empty(), "orc up left namespaces behind: {after:?}");
}
