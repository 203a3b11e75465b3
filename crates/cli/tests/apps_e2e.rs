//! Apps on `orc up --netns` as a tenant runs them (root; CI runs it as root): partner nodes at
//! two sites on two clouds (Hetzner and Vultr behind neutral site names), images pushed with
//! `skopeo`, an app file whose web service has three replicas with a health path, a worker
//! that calls it by its service name across the sites and reads a secret file, and a service
//! bound to a local volume. Then, with the worker counting every request: a rolling update
//! to a new image, an update whose health check fails and rolls back by itself, the agent of
//! a node killed and started again, the whole `orc up` stopped for a minute, and a node
//! destroyed in its cloud. No request fails, no container is restarted that should not be,
//! the secret is nowhere but in the worker, and nothing is left behind.

mod support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use orc_testkit::oci::{Entry, busybox_files, busybox_httpd, write_layout};
use serde_json::Value;
use support::load::Load;
use support::up::{MINUTE, Up};

const PROJECT: &str = "sys/sys";
const SECRET: &str = "s3cr3t-value-7d1f";

/// The app file: `web` at `tag` (3 replicas, ready on `/healthz`), `db` bound to a local
/// volume on the node labelled `disk=local`, and the `caller` worker at site `site` that
/// asks `web` (once it is ready) for its page five times a second, printing
/// `<unix time> got <page>` or `<unix time> FAIL <why>`.
fn app_file(tag: &str, deadline: &str, site: &str) -> String {
    format!(
        r#"amends "modulepath:/orc/App.pkl"

name = "shop"

services {{
  ["web"] {{
    image = "sys/web:{tag}"
    replicas = 3
    http {{
      port = 8080
      healthPath = "/healthz"
      domains {{ "shop.example.com" }}
      public = true
    }}
  }}
  ["db"] {{
    image = "sys/web:1"
    http {{
      port = 8080
      private = true
    }}
    constraints {{
      ["disk"] = "local"
    }}
    volumes {{
      ["data"] {{
        path = "/data"
      }}
    }}
  }}
}}

workers {{
  ["caller"] {{
    image = "sys/web:1"
    command {{
      "/bin/sh"
      "-c"
      "while true; do if p=$(wget -q -O- http://web:8080/ 2>&1); then echo $(date +%s) got $p; else echo $(date +%s) FAIL $p $(nslookup web 2>&1); fi; sleep 0.2; done"
    }}
    dependsOn {{
      "web"
    }}
    secretFiles {{
      "api-key"
    }}
    constraints {{
      ["orc.site"] = "{site}"
    }}
  }}
}}

deploy {{
  maxSurge = 1
  maxUnavailable = 0
  deadline = "{deadline}"
  autoRollback = true
}}
"#
    )
}

/// A second app: `echo` gives back what it reads on public TCP port 7000 of the ingress
/// nodes; `site` serves `tools.example.com` from the two nodes labelled `edge=yes` (a
/// partner node and a one-cloud node); `whoami`, on the node labelled `disk=local`, answers
/// on the node's port 8081 with the address its client came from.
const TOOLS_APP: &str = r#"amends "modulepath:/orc/App.pkl"

name = "tools"

services {
  ["echo"] {
    image = "sys/web:1"
    command {
      "/bin/busybox"
      "nc"
      "-ll"
      "-p"
      "7000"
      "-e"
      "/bin/busybox"
      "cat"
    }
    tcp {
      port = 7000
      publicPort = 7000
    }
  }
  ["site"] {
    image = "sys/web:1"
    replicas = 2
    http {
      port = 8080
      domains { "tools.example.com" }
    }
    constraints {
      ["edge"] = "yes"
    }
  }
  ["whoami"] {
    image = "sys/web:1"
    tcp {
      port = 8080
      nodePort = 8081
    }
    constraints {
      ["disk"] = "local"
    }
  }
}

deploy {
  maxSurge = 0
  maxUnavailable = 1
}
"#;

/// Writes an OCI layout of busybox's httpd serving `page` (with `/healthz` unless
/// `healthy` is false) and pushes it with skopeo as `sys/web:TAG`.
fn push(up: &Up, dir: &Path, tag: &str, page: &str, healthy: bool) {
    let mut files = busybox_files(page);
    // A CGI script that says where its request came from.
    files.push(Entry::Dir("www/cgi-bin".into()));
    files.push(Entry::File(
        "www/cgi-bin/whoami".into(),
        b"#!/bin/sh\necho Content-Type: text/plain\necho\necho \"$REMOTE_ADDR\"\n".to_vec(),
        0o755,
    ));
    if !healthy {
        files.retain(|e| !matches!(e, Entry::File(path, ..) if path == "www/healthz"));
    }
    let layout = dir.join(format!("layout-{tag}"));
    write_layout(&layout, tag, &[files], &busybox_httpd(8080));
    let certs = dir.join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    std::fs::write(certs.join("ca.crt"), up.ca_pem()).unwrap();
    let zone = up.summary_word("zone      ");
    let host = zone.trim_start_matches("https://");
    let out = Command::new("skopeo")
        .args(["copy", "--dest-cert-dir"])
        .arg(&certs)
        .arg("--dest-creds")
        .arg(format!("tenant:{}", up.admin_token().trim()))
        .arg(format!("oci:{}:{tag}", layout.display()))
        .arg(format!("docker://{host}/sys/web:{tag}"))
        .output()
        .expect("skopeo (Debian package skopeo) runs");
    assert!(
        out.status.success(),
        "skopeo push of {tag}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn status(up: &Up) -> Value {
    up.json(&["app", "status", "shop", "--project", PROJECT])
}

fn replicas<'a>(status: &'a Value, workload: &str) -> Vec<&'a Value> {
    status["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["workload"] == workload)
        .collect()
}

fn node_of(status: &Value, workload: &str) -> String {
    replicas(status, workload)[0]["node"]
        .as_str()
        .unwrap_or_else(|| panic!("{workload} has no node: {status:#}"))
        .to_string()
}

/// The first process of each of node `node`'s replicas (what a container's shim started),
/// found by the cgroups the agent puts replicas in (`/orc/<node id>/…`). What they start
/// (a request's `wget`, httpd's per-connection children) comes and goes; these stay for the
/// replica's life.
fn replica_processes(node: &str) -> BTreeSet<u32> {
    processes_under(&format!(":/orc/{node}/"))
}

/// The processes of the replicas of `workload` of the shop on `node` (the tops of their
/// process trees).
fn workload_processes(node: &str, workload: &str) -> BTreeSet<u32> {
    processes_under(&format!(":/orc/{node}/shop-{workload}-"))
}

/// The processes whose cgroup path holds `marker` and whose parent's does not.
fn processes_under(marker: &str) -> BTreeSet<u32> {
    let inside: BTreeSet<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|c| c.contains(marker))
        })
        .collect();
    let parent = |pid: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    inside
        .iter()
        .copied()
        .filter(|pid| parent(*pid).is_some_and(|p| !inside.contains(&p)))
        .collect()
}

/// The caller's output: `(unix time, what it got)` per request.
fn calls(up: &Up) -> Vec<(u64, String)> {
    let out = up.ok(&[
        "app",
        "logs",
        "shop",
        "caller",
        "--tail",
        "0",
        "--project",
        PROJECT,
    ]);
    out.lines()
        .filter_map(|line| {
            let mut words = line
                .split_whitespace()
                .skip_while(|w| w.parse::<u64>().is_err());
            let at = words.next()?.parse().ok()?;
            let rest: Vec<&str> = words.collect();
            Some((at, rest.join(" ")))
        })
        .collect()
}

/// Waits (a minute at most) until the caller has printed `what`.
fn wait_for_call(up: &Up, what: &str) {
    let start = Instant::now();
    while !calls(up).iter().any(|(_, said)| said == what) {
        assert!(
            start.elapsed() < MINUTE,
            "the caller never printed {what:?}: {:?}",
            calls(up)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn failures(calls: &[(u64, String)]) -> Vec<&(u64, String)> {
    calls
        .iter()
        .filter(|(_, what)| what != "got v1" && what != "got v2")
        .collect()
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The prefix of the emulated servers' namespaces (the echo host is `<prefix>echo`).
fn fabric_of(up: &Up) -> String {
    up.summary
        .split("netns     servers are namespaces ")
        .nth(1)
        .and_then(|rest| rest.split_once("-* on 198."))
        .map(|(prefix, _)| format!("{prefix}-"))
        .unwrap_or_else(|| panic!("no fabric in the summary: {}", up.summary))
}

/// What the ingress proxy on `node` answers on the node's port 80 for `host`.
fn through_ingress(up: &Up, node: &str, host: &str) -> String {
    let header = format!("Host: {host}");
    let argv = [
        "exec",
        node,
        "--project",
        PROJECT,
        "--",
        "busybox",
        "wget",
        "-q",
        "-O-",
        "--header",
        &header,
        "http://127.0.0.1/",
    ];
    let out = up.orc(&argv);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Points `name` at `addresses` in the emulated internet's DNS, whose management interface
/// is at `dns`.
fn point_dns(dns: &str, name: &str, addresses: &[&str]) {
    let addresses = serde_json::json!({ "host": format!("{name}."), "addresses": addresses });
    let added = Command::new("curl")
        .args(["-sf", "--max-time", "5", "-X", "POST", "-d"])
        .arg(addresses.to_string())
        .arg(format!("{dns}/add-a"))
        .status()
        .expect("curl runs");
    assert!(added.success(), "the emulated DNS took {name}");
}

/// What `https://{name}{path}` answers the emulated internet's echo host (namespace
/// `echo_ns`) at `address`, checked against `root`; `None` when the request fails.
fn https_from(echo_ns: &str, root: &Path, name: &str, address: &str, path: &str) -> Option<String> {
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            echo_ns,
            "curl",
            "-sf",
            "--max-time",
            "3",
            "--cacert",
        ])
        .arg(root)
        .arg("--resolve")
        .arg(format!("{name}:443:{address}"))
        .arg(format!("https://{name}{path}"))
        .output()
        .expect("curl in the echo host's namespace");
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The text of `summary` between `before` and the next `after`.
fn summary_after(summary: &str, before: &str, after: &str) -> String {
    summary
        .split(before)
        .nth(1)
        .and_then(|rest| rest.split_once(after))
        .map(|(value, _)| value.to_string())
        .unwrap_or_else(|| panic!("no {before:?} in the summary: {summary}"))
}

/// Kills node `node`'s agent (SIGKILL) and starts it again inside its server, as its
/// bootstrap did.
fn restart_agent(up: &Up, node: &str) {
    let pid = up
        .ok(&[
            "exec",
            node,
            "--project",
            PROJECT,
            "--",
            "cat",
            "/run/orc-agent.pid",
        ])
        .trim()
        .to_string();
    let pid: u32 = pid.parse().unwrap_or_else(|_| panic!("agent pid {pid:?}"));
    let ns = Command::new("ip")
        .args(["netns", "identify", &pid.to_string()])
        .output()
        .unwrap();
    let ns = String::from_utf8_lossy(&ns.stdout).trim().to_string();
    assert!(!ns.is_empty(), "the agent {pid} is in no named namespace");
    let argv0 = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let argv0 = String::from_utf8_lossy(argv0.split(|b| *b == 0).next().unwrap()).to_string();
    // The server's mount holder: the `sleep` in its namespace.
    let pids = Command::new("ip")
        .args(["netns", "pids", &ns])
        .output()
        .unwrap();
    let holder = String::from_utf8_lossy(&pids.stdout)
        .split_whitespace()
        .find(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "sleep")
        })
        .expect("the server's mount holder")
        .to_string();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let start = Instant::now();
    while Path::new(&format!("/proc/{pid}")).exists() {
        assert!(start.elapsed() < MINUTE, "the agent {pid} did not die");
        std::thread::sleep(Duration::from_millis(100));
    }
    let script = format!(
        "set -a; . /etc/orc/agent.env; set +a; \
         nohup {argv0} agent >>/var/log/orc-agent.log 2>&1 </dev/null & echo $! > /run/orc-agent.pid"
    );
    let started = Command::new("nsenter")
        .args([
            "--target", &holder, "--mount", "--net", "--", "sh", "-c", &script,
        ])
        .status()
        .unwrap();
    assert!(started.success(), "the agent starts again in {ns}");
}

fn agent_ready(nodes: &Value, node: &str) -> bool {
    nodes.as_array().is_some_and(|list| {
        list.iter().any(|n| {
            n["id"] == node && n["agent"]["state"] == "ready" && n["agent"]["connected"] == true
        })
    })
}

#[test]
fn apps_roll_across_two_clouds_and_outlive_their_agent_the_zone_and_a_node() {
    assert!(
        rustix::process::geteuid().is_root(),
        "orc up --netns needs root (CI runs this test as root)"
    );
    let dir = tempfile::tempdir().unwrap();
    let up = Up::start_with(dir.path(), &["--netns"]);
    // The web's pool is public with the ingress ports: its address at its site forwards
    // them to its nodes, which have no public address of their own.
    let ingress_ports: &[&str] = &[
        "--public",
        "--endpoint",
        "http=tcp:80",
        "--endpoint",
        "https=tcp:443",
        "--endpoint",
        "echo=tcp:7000",
    ];
    for (pool, class, size, extra) in [
        ("sys/sys/web", "eu-central", "2", ingress_ports),
        ("sys/sys/east", "us-east", "1", &[][..]),
    ] {
        let mut argv = vec![
            "pool",
            "create",
            pool,
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
            size,
            "--wait",
        ];
        argv.extend_from_slice(extra);
        let created = up.ok(&argv);
        assert!(created.contains("node(s) running"), "{created}");
    }
    let ready = |nodes: &Value| {
        nodes
            .as_array()
            .is_some_and(|l| !l.is_empty() && l.iter().all(|n| n["agent"]["state"] == "ready"))
    };
    let web_nodes = up.wait_for(&["nodes", "sys/sys/web"], 5 * MINUTE, ready);
    let east_nodes = up.wait_for(&["nodes", "sys/sys/east"], 5 * MINUTE, ready);
    // Two sites on two clouds.
    let cloud = |nodes: &Value| nodes[0]["placed"]["cloud"].as_str().unwrap().to_string();
    assert_ne!(
        cloud(&web_nodes),
        cloud(&east_nodes),
        "{web_nodes:#} {east_nodes:#}"
    );
    assert_ne!(web_nodes[0]["site"], east_nodes[0]["site"]);
    let disk_node = web_nodes[0]["id"].as_str().unwrap().to_string();
    let east_node = east_nodes[0]["id"].as_str().unwrap().to_string();
    let east_site = east_nodes[0]["site"].as_str().unwrap().to_string();
    up.ok(&[
        "node",
        "label",
        &disk_node,
        "disk=local",
        "--project",
        PROJECT,
    ]);

    // Images, pushed with a client orc did not write; the secret, from stdin.
    push(&up, dir.path(), "1", "v1", true);
    push(&up, dir.path(), "2", "v2", true);
    push(&up, dir.path(), "3", "v3", false);
    up.ok_with_input(&["secret", "set", "api-key", "--project", PROJECT], SECRET);

    // The first deploy: every replica ready, the web spread over all three nodes.
    let file = dir.path().join("orch.pkl");
    std::fs::write(&file, app_file("1", "10m", &east_site)).unwrap();
    let checked = up.ok(&["app", "check", file.to_str().unwrap()]);
    assert!(checked.contains("checks"), "{checked}");
    let started = Instant::now();
    let deployed = up.ok(&[
        "app",
        "deploy",
        file.to_str().unwrap(),
        "--project",
        PROJECT,
        "--wait",
    ]);
    eprintln!(
        "deploy to HEALTHY on --netns nodes, images not on them yet: {:?}",
        started.elapsed()
    );
    assert!(deployed.contains("HEALTHY"), "{deployed}");
    let first = status(&up);
    assert_eq!(first["app"]["state"], "HEALTHY", "{first:#}");
    let web_on: BTreeSet<&str> = replicas(&first, "web")
        .iter()
        .filter_map(|r| r["node"].as_str())
        .collect();
    // One web replica on each of the tenant's three nodes; none on a site's gateway, which
    // is in this project too (the partner's own) but runs no app.
    let tenant_nodes: BTreeSet<&str> = [&web_nodes, &east_nodes]
        .iter()
        .flat_map(|n| n.as_array().unwrap().iter())
        .filter_map(|n| n["id"].as_str())
        .collect();
    assert_eq!(web_on, tenant_nodes, "one web replica per node: {first:#}");
    assert_eq!(node_of(&first, "db"), disk_node, "{first:#}");
    assert_eq!(node_of(&first, "caller"), east_node, "{first:#}");

    // Ingress: the first tenant node to join (never a site's gateway) accepts it; its
    // proxy serves the web's domain and the catch-all from the web's replicas at both
    // sites, and the status says what the app opens.
    let ingress: Vec<&str> = [&web_nodes, &east_nodes]
        .iter()
        .flat_map(|n| n.as_array().unwrap().iter())
        .filter(|n| n["ingress"] == true)
        .filter_map(|n| n["id"].as_str())
        .collect();
    assert_eq!(
        ingress.len(),
        1,
        "one ingress node: {web_nodes:#} {east_nodes:#}"
    );
    let ingress_node = ingress[0].to_string();
    let opened: Vec<String> = first["routes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{} {}",
                r["kind"].as_str().unwrap(),
                r["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(opened, ["https shop.example.com", "http *"], "{first:#}");
    let started = Instant::now();
    while through_ingress(&up, &ingress_node, "shop.example.com") != "v1" {
        assert!(
            started.elapsed() < MINUTE,
            "the ingress proxy on {ingress_node} never served shop.example.com"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(
        through_ingress(&up, &ingress_node, "anything.example.net"),
        "v1",
        "any other name goes to the catch-all"
    );
    // From the emulated internet: both web nodes accept ingress, and the web pool's public
    // address, which the status names as where to point DNS, reaches their proxies.
    for node in web_nodes.as_array().unwrap() {
        let id = node["id"].as_str().unwrap();
        let shown = up.ok(&["node", "ingress", "enable", id, "--project", PROJECT]);
        assert!(shown.contains("accepts public ingress"), "{shown}");
    }
    let pool = up.wait_for(&["pool", "show", "sys/sys/web"], 3 * MINUTE, |p| {
        p["pool"]["address"]["ipv4"].is_string()
    });
    let address = pool["pool"]["address"]["ipv4"]
        .as_str()
        .unwrap()
        .to_string();
    let dns = up.wait_for(
        &["app", "status", "shop", "--project", PROJECT],
        MINUTE,
        |s| s["ingress_addresses"].to_string().contains(&address),
    );
    eprintln!("point DNS at: {}", dns["ingress_addresses"]);
    let echo_ns = format!("{}echo", fabric_of(&up));
    let from_internet = |host: &str| -> Option<String> {
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &echo_ns,
                "curl",
                "-sf",
                "--max-time",
                "3",
                "-H",
            ])
            .arg(format!("Host: {host}"))
            .arg(format!("http://{address}/"))
            .output()
            .expect("curl in the echo host's namespace");
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let started = Instant::now();
    while from_internet("shop.example.com").as_deref() != Some("v1") {
        assert!(
            started.elapsed() < 2 * MINUTE,
            "the web pool's address {address} does not reach the ingress proxies"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    for _ in 0..10 {
        assert_eq!(
            from_internet("shop.example.com").as_deref(),
            Some("v1"),
            "every request through the pool's address is served"
        );
    }

    // HTTPS, with a certificate from the emulated internet's ACME server. No name points at
    // the pool yet, so the zone's first order fails, and the app says why.
    let certificate = |status: &Value| -> String {
        status["routes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["name"] == "shop.example.com")
            .and_then(|r| r["certificate"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    let failed = up.wait_for(
        &["app", "status", "shop", "--project", PROJECT],
        2 * MINUTE,
        |s| certificate(s).starts_with("failed: "),
    );
    let words = certificate(&failed);
    eprintln!("before DNS: {words}");
    assert!(words.contains("next try"), "{words}");
    let events = up.ok(&["events", PROJECT]);
    assert!(
        events.contains("app.certificate_failed"),
        "the failure is an event: {events}"
    );
    // Pointed at the pool's address, the domain gets its certificate on the next try.
    let dns = summary_after(&up.summary, "names resolve as told: POST ", "/add-a");
    point_dns(&dns, "shop.example.com", &[&address]);
    let issued = up.wait_for(
        &["app", "status", "shop", "--project", PROJECT],
        2 * MINUTE,
        |s| certificate(s).starts_with("valid until "),
    );
    eprintln!("after DNS: {}", certificate(&issued));
    let table = up.ok(&["app", "status", "shop", "--project", PROJECT]);
    assert!(table.contains("CERTIFICATE"), "{table}");
    // The root the certificate chains to, from the ACME server's management interface.
    let management = summary_after(&up.summary, "the issued certificates' root at ", "/roots/0");
    let root = dir.path().join("acme-root.pem");
    let fetched = Command::new("curl")
        .args(["-sf", "--max-time", "5", "--cacert"])
        .arg(up.data.join("emulated-acme-ca.pem"))
        .arg("-o")
        .arg(&root)
        .arg(format!("{management}/roots/0"))
        .status()
        .expect("curl runs");
    assert!(fetched.success(), "the ACME server gives its root");
    let https = |path: &str| https_from(&echo_ns, &root, "shop.example.com", &address, path);
    let started = Instant::now();
    while https("/").as_deref() != Some("v1") {
        assert!(
            started.elapsed() < MINUTE,
            "shop.example.com is not served over HTTPS with its certificate"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    for _ in 0..10 {
        assert_eq!(
            https("/").as_deref(),
            Some("v1"),
            "every HTTPS request is served"
        );
    }
    // Plain HTTP to the domain now moves to HTTPS; other names stay on the catch-all.
    let redirect = Command::new("ip")
        .args(["netns", "exec", &echo_ns, "curl", "-s", "--max-time", "3"])
        .args([
            "-o",
            "/dev/null",
            "-w",
            "%{http_code} %{redirect_url}",
            "-H",
        ])
        .arg("Host: shop.example.com")
        .arg(format!("http://{address}/"))
        .output()
        .expect("curl in the echo host's namespace");
    assert_eq!(
        String::from_utf8_lossy(&redirect.stdout),
        "308 https://shop.example.com/"
    );
    assert_eq!(from_internet("anything.example.net").as_deref(), Some("v1"));

    // The db is private: no route leads to it, and the zone's access edge reaches it on
    // its node (through the node's agent) for a signed-in person only.
    let edge_port = up.edge_url().rsplit(':').next().unwrap().to_string();
    let db_url = format!("https://sys--shop-db.sys.orc.localhost:{edge_port}/");
    let through_edge = |token: Option<&str>| -> (String, String) {
        let mut curl = Command::new("curl");
        curl.args(["-s", "--max-time", "10", "--cacert"])
            .arg(up.data.join("ca.pem"))
            .args(["-w", "\n%{http_code}"]);
        if let Some(token) = token {
            curl.arg("-H").arg(format!("Authorization: Bearer {token}"));
        }
        let out = curl.arg(&db_url).output().expect("curl runs");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", text.as_str()));
        (body.trim().to_string(), code.to_string())
    };
    let admin = up.admin_token();
    let started = Instant::now();
    loop {
        let (body, code) = through_edge(Some(&admin));
        if (body.as_str(), code.as_str()) == ("v1", "200") {
            break;
        }
        assert!(
            started.elapsed() < MINUTE,
            "the private db is not reached through the edge: {code} {body}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    for token in [None, Some("orc_not-a-token")] {
        let (body, code) = through_edge(token);
        assert_eq!(code, "401", "a stranger is refused: {body}");
        assert!(!body.contains("v1"), "{body}");
    }

    // A one-cloud node beside the partner's: a Hetzner Cloud server, with a public
    // address of its own, accepting ingress.
    let created = up.ok(&[
        "pool",
        "create",
        "sys/sys/solo",
        "--provider",
        "hetzner",
        "--location",
        "fsn1",
        "--plan",
        "cx23",
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
    let solo_nodes = up.wait_for(&["nodes", "sys/sys/solo"], 5 * MINUTE, ready);
    let solo = solo_nodes[0]["id"].as_str().unwrap().to_string();
    let solo_address = solo_nodes[0]["addresses"][0].as_str().unwrap().to_string();
    for node in [&solo, &disk_node] {
        up.ok(&["node", "label", node, "edge=yes", "--project", PROJECT]);
    }
    up.ok(&["node", "ingress", "enable", &solo, "--project", PROJECT]);
    // tools.example.com points at both: the partner pool's address and the server's own.
    point_dns(&dns, "tools.example.com", &[&address, &solo_address]);

    // A public TCP port through the pool's address, and a node port whose replica sees
    // its client's own address.
    let tools = dir.path().join("tools.pkl");
    std::fs::write(&tools, TOOLS_APP).unwrap();
    let deployed = up.ok(&[
        "app",
        "deploy",
        tools.to_str().unwrap(),
        "--project",
        PROJECT,
        "--wait",
    ]);
    assert!(deployed.contains("HEALTHY"), "{deployed}");
    let echoed = |text: &str| -> String {
        let mut nc = Command::new("ip")
            .args([
                "netns", "exec", &echo_ns, "busybox", "nc", "-w", "2", &address, "7000",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("busybox nc in the echo host's namespace");
        use std::io::Write as _;
        nc.stdin
            .take()
            .unwrap()
            .write_all(format!("{text}\n").as_bytes())
            .unwrap();
        let out = nc.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let started = Instant::now();
    while echoed("bytes over tcp") != "bytes over tcp" {
        assert!(
            started.elapsed() < MINUTE,
            "public TCP port 7000 does not reach the echo service"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // HTTPS for tools.example.com, with its own certificate, from replicas on a partner node
    // and on the one-cloud node, through either address.
    let tools_issued = up.wait_for(
        &["app", "status", "tools", "--project", PROJECT],
        2 * MINUTE,
        |s| {
            s["routes"].as_array().into_iter().flatten().any(|r| {
                r["name"] == "tools.example.com"
                    && r["certificate"]
                        .as_str()
                        .is_some_and(|c| c.starts_with("valid until "))
            })
        },
    );
    let sites: BTreeSet<&str> = replicas(&tools_issued, "site")
        .iter()
        .filter_map(|r| r["node"].as_str())
        .collect();
    assert_eq!(
        sites,
        BTreeSet::from([solo.as_str(), disk_node.as_str()]),
        "{tools_issued:#}"
    );
    for at in [&address, &solo_address] {
        let answered = || https_from(&echo_ns, &root, "tools.example.com", at, "/");
        let started = Instant::now();
        while answered().as_deref() != Some("v1") {
            assert!(
                started.elapsed() < MINUTE,
                "tools.example.com is not served over HTTPS at {at}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    let tools_status = up.json(&["app", "status", "tools", "--project", PROJECT]);
    let whoami = replicas(&tools_status, "whoami");
    assert_eq!(whoami.len(), 1, "{tools_status:#}");
    assert_eq!(whoami[0]["node"], disk_node.as_str(), "{tools_status:#}");
    assert_eq!(
        whoami[0]["node_ports"],
        serde_json::json!(["tcp/8081"]),
        "{tools_status:#}"
    );
    let private_address = |id: &str| -> String {
        web_nodes
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["id"] == id)
            .and_then(|n| n["private_address"].as_str())
            .unwrap_or_else(|| panic!("{id} has a private address: {web_nodes:#}"))
            .to_string()
    };
    let neighbour = web_nodes
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["id"].as_str())
        .find(|id| *id != disk_node)
        .expect("a second node at the web's site")
        .to_string();
    let url = format!("http://{}:8081/cgi-bin/whoami", private_address(&disk_node));
    let seen = up.ok(&[
        "exec",
        &neighbour,
        "--project",
        PROJECT,
        "--",
        "busybox",
        "wget",
        "-q",
        "-O-",
        &url,
    ]);
    // busybox's httpd listens on IPv6 and names an IPv4 client as `[::ffff:10.0.1.2]`.
    let seen = seen
        .trim()
        .trim_start_matches("[::ffff:")
        .trim_end_matches(']')
        .to_string();
    assert_eq!(
        seen,
        private_address(&neighbour),
        "the replica behind the node port sees its client's own address"
    );
    up.ok(&["app", "remove", "tools", "--project", PROJECT]);
    let started = Instant::now();
    while [&disk_node, &neighbour, &east_node, &solo]
        .iter()
        .any(|n| !processes_under(&format!(":/orc/{n}/tools-")).is_empty())
    {
        assert!(
            started.elapsed() < MINUTE,
            "the tools app's replicas still run after it was removed"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // The one-cloud node goes again, so the shop's later updates stay on the partner's.
    up.ok(&["pool", "resize", "sys/sys/solo", "0"]);
    up.wait_for(&["nodes", "sys/sys/solo", "--all"], 2 * MINUTE, |nodes| {
        nodes
            .as_array()
            .is_some_and(|l| l.iter().all(|n| n["state"] == "ended"))
    });

    // The worker reaches the web by its service name, at both sites, over the mesh.
    wait_for_call(&up, "got v1");
    let caller_node = node_of(&first, "caller");
    let far = replicas(&first, "web")
        .into_iter()
        .find(|r| r["node"] != east_node.as_str())
        .expect("a web replica at the other site");
    let page = up.ok(&[
        "app",
        "exec",
        "shop",
        "caller",
        "--project",
        PROJECT,
        "--",
        "wget",
        "-q",
        "-O-",
        &format!("http://{}:8080/", far["address"].as_str().unwrap()),
    ]);
    assert_eq!(
        page.trim(),
        "v1",
        "a replica at the other site answers its address"
    );

    // The secret: a file in the worker, nowhere else.
    let read = up.ok(&[
        "app",
        "exec",
        "shop",
        "caller",
        "--project",
        PROJECT,
        "--",
        "cat",
        "/run/secrets/api-key",
    ]);
    assert_eq!(read, SECRET);
    let env = up.ok(&[
        "app",
        "exec",
        "shop",
        "web",
        "--project",
        PROJECT,
        "--",
        "env",
    ]);
    assert!(!env.contains(SECRET), "{env}");
    for shown in [
        up.ok(&["--json", "app", "status", "shop", "--project", PROJECT]),
        up.ok(&["--json", "app", "history", "shop", "--project", PROJECT]),
        up.ok(&["--json", "events", PROJECT]),
        up.ok(&["app", "logs", "shop", "--project", PROJECT]),
    ] {
        assert!(!shown.contains(SECRET), "the secret shows: {shown}");
    }
    let held = |node: &str| {
        let found = up.orc(&[
            "exec",
            node,
            "--project",
            PROJECT,
            "--",
            "grep",
            "-rl",
            SECRET,
            "/run",
            "/var/lib/orc",
        ]);
        String::from_utf8_lossy(&found.stdout).trim().to_string()
    };
    assert!(
        !held(&caller_node).is_empty(),
        "the caller's node holds the secret for it"
    );
    for node in web_on.iter().filter(|n| **n != caller_node) {
        let found = held(node);
        assert!(
            found.is_empty(),
            "{node} runs no reader of the secret yet holds it: {found}"
        );
    }

    // A rolling update to v2: no request fails, neither the worker's over the mesh nor
    // 600 a second over HTTPS through the pool's address and the ingress proxies.
    let load = Load::start("shop.example.com", &address, &root, 600);
    std::fs::write(&file, app_file("2", "10m", &east_site)).unwrap();
    let caller_before = workload_processes(&caller_node, "caller");
    assert!(
        !caller_before.is_empty(),
        "the caller runs on {caller_node}"
    );
    let updated = up.ok(&[
        "app",
        "deploy",
        file.to_str().unwrap(),
        "--project",
        PROJECT,
        "--wait",
    ]);
    assert!(updated.contains("HEALTHY"), "{updated}");
    wait_for_call(&up, "got v2");
    let started = Instant::now();
    while through_ingress(&up, &ingress_node, "anything.example.net") != "v2" {
        assert!(
            started.elapsed() < MINUTE,
            "the ingress routes never moved to the new replicas"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(
        https("/").as_deref(),
        Some("v2"),
        "HTTPS moved to the new replicas too"
    );
    while load.elapsed() < Duration::from_secs(40) {
        std::thread::sleep(Duration::from_millis(200));
    }
    let report = load.finish();
    eprintln!(
        "HTTPS through ingress during the update: {} requests in {:.1} s ({:.0}/s), pages {:?}, failed {:?}",
        report.sent,
        report.elapsed.as_secs_f64(),
        report.rate(),
        report.pages,
        report.failures
    );
    assert!(
        report.sent >= 20_000 && report.rate() >= 500.0,
        "the load was too thin to say much: {report:?}"
    );
    assert_eq!(
        report.failed(),
        0,
        "requests through ingress failed during the update: {:?}",
        report.failures
    );
    assert!(
        report.pages.contains_key("v1") && report.pages.contains_key("v2"),
        "the load saw the update: {:?}",
        report.pages
    );
    let seen = calls(&up);
    assert!(
        failures(&seen).is_empty(),
        "requests failed during the update: {:?}",
        failures(&seen)
    );
    let caller_after = workload_processes(&caller_node, "caller");
    assert_eq!(
        caller_before, caller_after,
        "the caller, unchanged, kept running"
    );

    // An update whose health check fails rolls back by itself; the web keeps answering.
    std::fs::write(&file, app_file("3", "20s", &east_site)).unwrap();
    up.ok(&[
        "app",
        "deploy",
        file.to_str().unwrap(),
        "--project",
        PROJECT,
    ]);
    let rolled = up.wait_for(
        &["app", "history", "shop", "--project", PROJECT],
        3 * MINUTE,
        |h| {
            h.as_array().is_some_and(|l| {
                l.iter().any(|r| r["state"] == "FAILED")
                    && l.iter().any(|r| {
                        r["origin"]
                            .as_str()
                            .is_some_and(|o| o.starts_with("auto-rollback:"))
                            && r["state"] == "HEALTHY"
                    })
            })
        },
    );
    eprintln!("rolled back: {rolled:#}");
    let seen = calls(&up);
    assert!(
        failures(&seen).is_empty(),
        "requests failed around the rollback: {:?}",
        failures(&seen)
    );

    // The agent killed and started again: its containers run on, untouched. Until it has
    // its config from the zone again, the node has no mesh and no name server (both live
    // in the agent), so the worker on it may miss a request: counted and reported below.
    let before = replica_processes(&east_node);
    assert!(!before.is_empty(), "{east_node} runs replicas");
    let agent_killed_at = now();
    restart_agent(&up, &east_node);
    up.wait_for(&["nodes", "sys/sys/east"], 2 * MINUTE, |n| {
        agent_ready(n, &east_node)
    });
    std::thread::sleep(Duration::from_secs(5));
    let agent_back_at = now();
    assert_eq!(
        replica_processes(&east_node),
        before,
        "the restarted agent adopted its replicas"
    );
    let after = status(&up);
    assert!(
        replicas(&after, "web")
            .iter()
            .all(|r| r["restarts"] == 0 && r["ready"] == true),
        "{after:#}"
    );

    // The zone stopped for a minute: nothing changes on the nodes, the caller goes on.
    let all_nodes: Vec<String> = [&web_nodes, &east_nodes]
        .iter()
        .flat_map(|n| n.as_array().unwrap().iter())
        .map(|n| n["id"].as_str().unwrap().to_string())
        .collect();
    // Once what the rollback took away has stopped: one process per replica the app has.
    let expected = status(&up)["replicas"].as_array().unwrap().len();
    let start = Instant::now();
    let before: Vec<BTreeSet<u32>> = loop {
        let seen: Vec<BTreeSet<u32>> = all_nodes.iter().map(|n| replica_processes(n)).collect();
        if seen.iter().map(BTreeSet::len).sum::<usize>() == expected {
            break seen;
        }
        assert!(
            start.elapsed() < MINUTE,
            "{expected} replicas, yet these run: {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let stopped_at = now();
    up.signal(rustix::process::Signal::STOP);
    std::thread::sleep(MINUTE);
    up.signal(rustix::process::Signal::CONT);
    let resumed_at = now();
    let after: Vec<BTreeSet<u32>> = all_nodes.iter().map(|n| replica_processes(n)).collect();
    assert_eq!(
        before, after,
        "no replica was started or stopped while the zone was away"
    );
    let start = Instant::now();
    let seen = loop {
        match up.orc(&["app", "logs", "shop", "caller", "--project", PROJECT]) {
            out if out.status.success() => break calls(&up),
            _ => {
                assert!(start.elapsed() < 2 * MINUTE, "the zone did not come back");
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    };
    let during = seen
        .iter()
        .filter(|(at, _)| *at > stopped_at + 5 && *at + 5 < resumed_at)
        .count();
    assert!(
        during >= 100,
        "the caller went on while the zone was away: {during} calls"
    );
    // Nothing failed while the zone was away; as its agents all reconnect at once on this
    // machine's two cores, a lookup may time out (counted, not yet asserted). Calls are
    // stamped to the second: one in the second the zone resumed counts as reconnecting.
    let restarting = |at: u64| (agent_killed_at..=agent_back_at).contains(&at);
    let while_restarting: Vec<_> = failures(&seen)
        .into_iter()
        .filter(|(at, _)| restarting(*at))
        .collect();
    eprintln!(
        "requests that failed while the worker's node's agent restarted: {while_restarting:?}"
    );
    let away: Vec<_> = failures(&seen)
        .into_iter()
        .filter(|(at, _)| *at < resumed_at && !restarting(*at))
        .collect();
    let around: Vec<_> = away
        .iter()
        .flat_map(|(at, _)| seen.iter().filter(move |(t, _)| t.abs_diff(*at) <= 10))
        .collect();
    assert!(
        away.is_empty(),
        "requests failed while the zone was away (stopped at {stopped_at}, resumed at \
         {resumed_at}): {away:?}; the calls around them: {around:?}"
    );
    let reconnecting: Vec<_> = failures(&seen)
        .into_iter()
        .filter(|(at, _)| *at >= resumed_at)
        .collect();
    eprintln!("requests that failed as the agents reconnected: {reconnecting:?}");

    // A node destroyed in its cloud: its movable replica goes elsewhere, the volume-bound
    // one is blocked where its volume was.
    let instance = web_nodes
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == disk_node.as_str())
        .and_then(|n| n["placed"]["instance"].as_str())
        .and_then(|i| i.strip_prefix("hetzner:"))
        .unwrap_or_else(|| panic!("{disk_node} on Hetzner: {web_nodes:#}"))
        .to_string();
    let hetzner = up.summary_word("hetzner   ");
    // Under load through ingress: what fails while the zone finds the node gone is counted
    // and reported (the pool's address keeps forwarding to it until its gateway learns).
    let load = Load::start("shop.example.com", &address, &root, 600);
    let deleted = Command::new("curl")
        .args([
            "-sS",
            "-f",
            "-X",
            "DELETE",
            "-H",
            "Authorization: Bearer orc-up-emulator-token",
        ])
        .arg(format!("{hetzner}/v1/servers/{instance}"))
        .output()
        .expect("curl runs");
    assert!(
        deleted.status.success(),
        "{}",
        String::from_utf8_lossy(&deleted.stderr)
    );
    let blocked = up.wait_for(
        &["app", "status", "shop", "--project", PROJECT],
        5 * MINUTE,
        |s| {
            s["app"]["state"] == "BLOCKED"
                && replicas(s, "web")
                    .iter()
                    .filter(|r| r["ready"] == true)
                    .count()
                    == 3
                && replicas(s, "web")
                    .iter()
                    .all(|r| r["node"] != disk_node.as_str())
        },
    );
    assert!(
        blocked["app"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("volume")),
        "{blocked:#}"
    );
    assert_eq!(
        node_of(&blocked, "db"),
        disk_node,
        "the volume-bound one stays: {blocked:#}"
    );
    let report = load.finish();
    eprintln!(
        "HTTPS through ingress while {disk_node} was destroyed: {} requests in {:.1} s ({:.0}/s), {} failed: {:?}",
        report.sent,
        report.elapsed.as_secs_f64(),
        report.rate(),
        report.failed(),
        report.failures
    );
    assert!(report.sent > 1_000, "the load ran: {report:?}");
    for _ in 0..10 {
        assert_eq!(
            https("/").as_deref(),
            Some("v2"),
            "once the node is replaced, every request is served again"
        );
    }

    // Removed, the app leaves no container behind.
    up.ok(&["app", "remove", "shop", "--project", PROJECT]);
    let start = Instant::now();
    while all_nodes.iter().any(|n| !replica_processes(n).is_empty()) {
        assert!(
            start.elapsed() < MINUTE,
            "replicas still run after the app was removed"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    up.stop();
}
