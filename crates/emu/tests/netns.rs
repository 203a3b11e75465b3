//! Materialised mode for real (root; CI runs as root, and these fail, not skip, without it):
//! servers as namespaces on the emulated internet and a private network, scripts running
//! inside them with private paths, the echo host seeing their public address, the zone's
//! address on the host reachable through the one uplink, and nothing left behind.

use std::io::{Read as _, Write as _};
use std::net::SocketAddr;

use orc_emu::netns::{Fabric, bind_in};

/// The host's network namespaces, by name. Whole names: other tests' fabrics run at the same
/// time and their servers' names share the same keys after a different slot prefix.
fn namespaces() -> Vec<String> {
    let out = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

fn links() -> String {
    let out = std::process::Command::new("ip")
        .args(["-o", "link"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `curl` inside `server`, returning its stdout (or the failure).
fn curl(fabric: &Fabric, server: &str, url: &str) -> Result<String, String> {
    let out = fabric
        .exec(server, &["curl", "-sS", "--max-time", "5", url])
        .unwrap();
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn servers_are_namespaces_on_the_emulated_internet_and_vanish_without_a_trace() {
    assert!(
        orc_emu::netns::is_root(),
        "materialised mode tests need root (CI runs them as root)"
    );
    let fabric = Fabric::create(None).expect("a fabric");
    let plan = fabric.plan();
    let (a_ip, b_ip) = (plan.public(0).unwrap(), plan.public(1).unwrap());
    fabric
        .add_server("a", Some(a_ip), "4c4c4544-0000-000a")
        .unwrap();
    fabric
        .add_server("b", Some(b_ip), "4c4c4544-0000-000b")
        .unwrap();
    fabric.add_network("net1").unwrap();
    assert_eq!(
        fabric
            .attach("a", "net1", "10.0.0.2".parse().unwrap(), 24)
            .unwrap(),
        "ens10"
    );
    fabric
        .attach("b", "net1", "10.0.0.3".parse().unwrap(), 24)
        .unwrap();
    let a_ns = fabric.namespace("a").unwrap();
    let b_ns = fabric.namespace("b").unwrap();
    assert!(namespaces().contains(&a_ns), "{:?}", namespaces());

    // The echo host sees the server's public address.
    let echo = format!("http://{}/", fabric.echo_address());
    assert_eq!(curl(&fabric, "a", &echo).unwrap(), format!("{a_ip}\n"));
    assert_eq!(curl(&fabric, "b", &echo).unwrap(), format!("{b_ip}\n"));

    // The private network joins a and b, and only them.
    let listener = bind_in(&b_ns, SocketAddr::from(([10, 0, 0, 3], 8080))).unwrap();
    let served = std::thread::spawn(move || {
        let (mut stream, peer) = listener.accept().unwrap();
        let mut buf = [0u8; 512];
        let _ = stream.read(&mut buf).unwrap();
        let body = format!("{}\n", peer.ip());
        write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
    });
    assert_eq!(
        curl(&fabric, "a", "http://10.0.0.3:8080/").unwrap(),
        "10.0.0.2\n"
    );
    served.join().unwrap();

    // The zone's side: a listener on the host's uplink address answers servers.
    let zone = std::net::TcpListener::bind((fabric.host_address(), 0)).unwrap();
    let port = zone.local_addr().unwrap().port();
    let answered = std::thread::spawn(move || {
        let (mut stream, peer) = zone.accept().unwrap();
        let mut buf = [0u8; 512];
        let _ = stream.read(&mut buf).unwrap();
        stream
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nzone\n")
            .unwrap();
        peer.ip()
    });
    let url = format!("http://{}:{port}/", fabric.host_address());
    assert_eq!(curl(&fabric, "a", &url).unwrap(), "zone\n");
    assert_eq!(
        answered.join().unwrap(),
        std::net::IpAddr::V4(a_ip),
        "no NAT on the way"
    );

    // Nothing routes out of the fabric: the internet has no default route.
    let route = std::process::Command::new("ip")
        .args([
            "-n",
            &format!("orc{}-inet", slot_of(&fabric)),
            "route",
            "get",
            "192.0.2.1",
        ])
        .output()
        .unwrap();
    assert!(!route.status.success(), "the emulated internet routes out");

    // A script runs inside, with private paths and its own product_uuid.
    let script = "set -e\nmkdir -p /etc/orc\necho secret > /etc/orc/join-token\n\
                  cat /etc/orc/join-token\nip -4 -o addr show dev eth0\nsleep 600 &\necho started\n";
    let mut child = fabric.run_script("a", script).unwrap();
    assert!(child.wait().unwrap().success());
    let console = fabric.console("a").unwrap();
    assert!(console.contains("secret\n"), "{console}");
    assert!(console.contains(&format!("inet {a_ip}/20")), "{console}");
    assert!(
        !std::path::Path::new("/etc/orc/join-token").exists(),
        "the server's /etc/orc is its own"
    );
    let seen_by_b = fabric.exec("b", &["cat", "/etc/orc/join-token"]).unwrap();
    assert!(
        !seen_by_b.status.success(),
        "another server does not see it"
    );
    if std::path::Path::new("/sys/class/dmi/id/product_uuid").exists() {
        let uuid = fabric
            .exec("a", &["cat", "/sys/class/dmi/id/product_uuid"])
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&uuid.stdout),
            "4c4c4544-0000-000a\n"
        );
    }

    // Power off stops the script's background process; removal takes the namespace.
    assert!(fabric.stop("a").unwrap() >= 1, "the sleep was running");
    let left = std::process::Command::new("ip")
        .args(["netns", "pids", &a_ns])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&left.stdout)
            .split_whitespace()
            .count(),
        1,
        "only the mount holder is left"
    );
    fabric.remove_server("a").unwrap();
    assert!(!namespaces().contains(&a_ns));
    assert!(curl(&fabric, "b", &format!("http://{a_ip}/")).is_err());

    // Dropping the fabric removes everything it made, on the host too.
    let names = fabric.namespaces();
    let host_if = format!("orc{}h", slot_of(&fabric));
    assert!(links().contains(&host_if));
    drop(fabric);
    let after = namespaces();
    for name in names {
        assert!(!after.contains(&name), "{name} left behind: {after:?}");
    }
    assert!(!links().contains(&host_if), "the uplink is gone");
    let routes = std::process::Command::new("ip")
        .args(["route"])
        .output()
        .unwrap();
    let (net, _) = plan.public_net();
    assert!(
        !String::from_utf8_lossy(&routes.stdout).contains(&net.to_string()),
        "the host route is gone"
    );
}

fn slot_of(fabric: &Fabric) -> u8 {
    let host = fabric.host_address().octets()[3];
    (host - 2) / 4
}

#[test]
fn fabrics_side_by_side_take_their_own_slots() {
    assert!(
        orc_emu::netns::is_root(),
        "materialised mode tests need root"
    );
    let one = Fabric::create(None).unwrap();
    let two = Fabric::create(None).unwrap();
    assert_ne!(one.plan(), two.plan());
    assert_ne!(one.host_address(), two.host_address());
    one.add_server("x", one.plan().public(0), "u1").unwrap();
    two.add_server("x", two.plan().public(0), "u2").unwrap();
    assert_ne!(one.namespace("x"), two.namespace("x"));
    assert!(
        one.add_server("x", None, "u1").is_err(),
        "a key is one server"
    );
}

/// Waits up to 20 s for `check`.
async fn until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !check() {
        assert!(
            std::time::Instant::now() < deadline,
            "gave up waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hetzner_server_boots_its_user_data_in_a_namespace_and_goes_with_its_delete() {
    assert!(
        orc_emu::netns::is_root(),
        "materialised mode tests need root"
    );
    let fabric = std::sync::Arc::new(Fabric::create(None).unwrap());
    let mut config = orc_emu::EmuConfig::for_tests();
    config.vultr = None;
    config.robot = None;
    config.fabric = Some(fabric.clone());
    let emu = config.start().await.unwrap();
    let base = emu.hetzner_url().unwrap();
    let http = reqwest::Client::new();
    let call = |method: reqwest::Method, path: &str, body: Option<serde_json::Value>| {
        let mut request = http
            .request(method, format!("{base}{path}"))
            .bearer_auth("demo-token");
        if let Some(body) = body {
            request = request.json(&body);
        }
        async move {
            let reply = request.send().await.unwrap();
            reply.json::<serde_json::Value>().await.unwrap()
        }
    };
    let user_data = "#cloud-config\nwrite_files:\n  - path: /etc/orc/hello\n    content: from user data\nruncmd:\n  - cat /etc/orc/hello\n  - sleep 600 &\n";
    let created = call(
        reqwest::Method::POST,
        "/servers",
        Some(
            serde_json::json!({"name": "m1", "server_type": "cx23", "image": "ubuntu-24.04",
            "location": "fsn1", "user_data": user_data}),
        ),
    )
    .await;
    let id = created["server"]["id"].as_u64().unwrap();
    let ip = created["server"]["public_net"]["ipv4"]["ip"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(ip.starts_with("198.1"), "a reserved public address: {ip}");
    let key = format!("h{id}");
    // Any request settles the world; the materialiser follows.
    call(reqwest::Method::GET, &format!("/servers/{id}"), None).await;
    until("the user data ran", || {
        fabric
            .console(&key)
            .is_ok_and(|c| c.contains("from user data") && c.contains("cloud-init: finished"))
    })
    .await;
    let echo = format!("http://{}/", fabric.echo_address());
    assert_eq!(curl(&fabric, &key, &echo).unwrap(), format!("{ip}\n"));

    // Power off stops the background process; power on starts nothing of the first boot.
    call(
        reqwest::Method::POST,
        &format!("/servers/{id}/actions/poweroff"),
        None,
    )
    .await;
    call(reqwest::Method::GET, &format!("/servers/{id}"), None).await;
    until("the server is off", || {
        fabric.console(&key).is_ok_and(|c| c.contains("power: off"))
    })
    .await;
    assert!(
        fabric
            .console(&key)
            .unwrap()
            .contains("power: off (1 process(es) stopped)")
    );

    // Delete: the namespace goes.
    let ns = fabric.namespace(&key).unwrap();
    call(reqwest::Method::DELETE, &format!("/servers/{id}"), None).await;
    call(reqwest::Method::GET, "/servers", None).await;
    until("the namespace is gone", || !namespaces().contains(&ns)).await;
    drop(emu);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vultr_instance_boots_its_user_data_on_its_vpc_and_goes_with_its_delete() {
    use base64::Engine as _;
    assert!(
        orc_emu::netns::is_root(),
        "materialised mode tests need root"
    );
    let fabric = std::sync::Arc::new(Fabric::create(None).unwrap());
    let mut config = orc_emu::EmuConfig::for_tests();
    config.hetzner = None;
    config.robot = None;
    config.fabric = Some(fabric.clone());
    let emu = config.start().await.unwrap();
    let base = emu.vultr_url().unwrap();
    let http = reqwest::Client::new();
    let call = |method: reqwest::Method, path: &str, body: Option<serde_json::Value>| {
        let mut request = http
            .request(method, format!("{base}{path}"))
            .bearer_auth("demo-token");
        if let Some(body) = body {
            request = request.json(&body);
        }
        async move {
            let reply = request.send().await.unwrap();
            reply.json::<serde_json::Value>().await.unwrap_or_default()
        }
    };
    let vpc = call(
        reqwest::Method::POST,
        "/vpcs",
        Some(serde_json::json!({"region": "ewr", "description": "net", "v4_subnet": "10.8.0.0", "v4_subnet_mask": 24})),
    )
    .await;
    let vpc_id = vpc["vpc"]["id"].as_str().unwrap().to_string();
    let user_data = base64::engine::general_purpose::STANDARD
        .encode("#!/bin/sh\necho \"booted on $(ip -4 -o addr show dev eth0 | cut -d' ' -f7)\"\n");
    let mut instances = Vec::new();
    for _ in 0..2 {
        let created = call(
            reqwest::Method::POST,
            "/instances",
            Some(
                serde_json::json!({"region": "ewr", "plan": "vc2-1c-1gb", "os_id": 2284,
                "user_data": user_data, "attach_vpc": [vpc_id]}),
            ),
        )
        .await;
        instances.push(created["instance"]["id"].as_str().unwrap().to_string());
    }
    let listed = call(reqwest::Method::GET, "/instances", None).await;
    let all = listed["instances"].as_array().unwrap().clone();
    let key_of = |id: &str| format!("v{}", &id[..13].replace('-', ""));
    for instance in &all {
        let id = instance["id"].as_str().unwrap();
        let ip = instance["main_ip"].as_str().unwrap();
        assert!(ip.starts_with("198.1"), "a reserved public address: {ip}");
        let key = key_of(id);
        until("the instance booted", || {
            fabric
                .console(&key)
                .is_ok_and(|c| c.contains(&format!("booted on {ip}/20")))
        })
        .await;
    }
    // The two instances meet on their VPC.
    let vpc_ips: Vec<String> = all
        .iter()
        .map(|i| {
            let key = key_of(i["id"].as_str().unwrap());
            let out = fabric
                .exec(&key, &["ip", "-4", "-o", "addr", "show", "dev", "ens10"])
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            text.split_whitespace()
                .nth(3)
                .unwrap()
                .split('/')
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    assert!(
        vpc_ips.iter().all(|ip| ip.starts_with("10.8.0.")),
        "{vpc_ips:?}"
    );
    let b_ns = fabric.namespace(&key_of(&instances[1])).unwrap();
    let listener = bind_in(
        &b_ns,
        SocketAddr::from((vpc_ips[1].parse::<std::net::Ipv4Addr>().unwrap(), 8080)),
    )
    .unwrap();
    let served = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut buf = [0u8; 512];
        let _ = stream.read(&mut buf).unwrap();
        stream
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nvpc")
            .unwrap();
    });
    assert_eq!(
        curl(
            &fabric,
            &key_of(&instances[0]),
            &format!("http://{}:8080/", vpc_ips[1])
        )
        .unwrap(),
        "vpc"
    );
    served.join().unwrap();
    let names: Vec<String> = instances
        .iter()
        .map(|id| fabric.namespace(&key_of(id)).unwrap())
        .collect();
    for id in &instances {
        call(reqwest::Method::DELETE, &format!("/instances/{id}"), None).await;
    }
    call(reqwest::Method::GET, "/instances", None).await;
    until("the namespaces are gone", || {
        let now = namespaces();
        names.iter().all(|name| !now.contains(name))
    })
    .await;
    drop(emu);
}

/// A network that routes like a cloud's: a server without a public address sends its
/// traffic to the network's gateway address, whose router hands it to the server the route
/// table names, which masquerades it out to the internet.
#[test]
fn a_routed_network_carries_a_private_server_out_through_its_gateway_server() {
    assert!(
        orc_emu::netns::is_root(),
        "materialised mode tests need root"
    );
    let fabric = Fabric::create(None).unwrap();
    let public = fabric.plan().public(0).unwrap();
    fabric.add_server("gw", Some(public), "u-gw").unwrap();
    fabric.add_server("node", None, "u-node").unwrap();
    fabric.add_network("net").unwrap();
    fabric
        .attach("gw", "net", "10.64.0.254".parse().unwrap(), 24)
        .unwrap();
    fabric
        .attach("node", "net", "10.64.0.2".parse().unwrap(), 24)
        .unwrap();
    fabric
        .route_network(
            "net",
            "10.64.0.1".parse().unwrap(),
            24,
            &[("0.0.0.0/0".to_string(), "10.64.0.254".parse().unwrap())],
        )
        .unwrap();
    let setup = "sysctl -qw net.ipv4.ip_forward=1\niptables -t nat -A POSTROUTING -s 10.64.0.0/24 ! -d 10.64.0.0/24 -j MASQUERADE\n";
    assert!(
        fabric
            .run_script("gw", setup)
            .unwrap()
            .wait()
            .unwrap()
            .success(),
        "{}",
        fabric.console("gw").unwrap()
    );
    let routed = fabric
        .exec(
            "node",
            &["ip", "route", "add", "default", "via", "10.64.0.1"],
        )
        .unwrap();
    assert!(routed.status.success());
    let echo = format!("http://{}/", fabric.echo_address());
    assert_eq!(
        curl(&fabric, "node", &echo).unwrap(),
        format!("{public}\n"),
        "the node goes out masqueraded as its gateway"
    );
    let names = fabric.namespaces();
    assert!(names.iter().any(|n| n.contains("-rn")), "{names:?}");
    drop(fabric);
    let after = namespaces();
    for name in names {
        assert!(!after.contains(&name), "{name} left behind");
    }
}

/// `ssh` from the host to `root@ip` with `key`, running `command`.
fn ssh(key: &std::path::Path, ip: &str, command: &str) -> std::process::Output {
    std::process::Command::new("ssh")
        .args(["-i", &key.display().to_string()])
        .args([
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "ConnectTimeout=5",
            "-o",
            "LogLevel=ERROR",
        ])
        .arg(format!("root@{ip}"))
        .arg(command)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_robot_server_boots_its_rescue_system_with_sshd_installs_and_boots_what_it_installed() {
    assert!(
        orc_emu::netns::is_root(),
        "materialised mode tests need root"
    );
    orc_emu::netns::check_prerequisites().expect("sshd and ssh-keygen are installed");
    let fabric = std::sync::Arc::new(Fabric::create(None).unwrap());
    let mut config = orc_emu::EmuConfig::for_tests();
    config.hetzner = None;
    config.vultr = None;
    config.fabric = Some(fabric.clone());
    let emu = config.start().await.unwrap();
    let base = emu.robot_url().unwrap();
    let http = reqwest::Client::new();
    let call = |method: reqwest::Method, path: &str, form: &[(&str, &str)]| {
        let mut request = http
            .request(method, format!("{base}{path}"))
            .basic_auth("demo", Some("demo-token"));
        if !form.is_empty() {
            request = request.form(form);
        }
        async move {
            let reply = request.send().await.unwrap();
            reply.json::<serde_json::Value>().await.unwrap()
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("rescue");
    let made = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "rescue", "-f"])
        .arg(&key)
        .status()
        .unwrap();
    assert!(made.success());
    let public = std::fs::read_to_string(dir.path().join("rescue.pub")).unwrap();
    let stored = call(
        reqwest::Method::POST,
        "/key",
        &[("name", "rescue"), ("data", public.trim())],
    )
    .await;
    let fingerprint = stored["key"]["fingerprint"].as_str().unwrap().to_string();

    // The server sits at an address of the fabric, powered on in what is installed.
    let server = call(reqwest::Method::GET, "/server/2001002", &[]).await;
    let ip = server["server"]["server_ip"].as_str().unwrap().to_string();
    assert!(ip.starts_with("198.1"), "a reserved public address: {ip}");
    let name = "r0s2001002";
    until("the server is materialised", || {
        fabric.namespace(name).is_some()
    })
    .await;
    assert!(
        !ssh(&key, &ip, "true").status.success(),
        "no sshd before the rescue"
    );

    // Rescue with our key, a reset: sshd answers, on the server's own disks and DMI UUID.
    call(
        reqwest::Method::POST,
        "/boot/2001002/rescue",
        &[("os", "linux"), ("authorized_key[]", &fingerprint)],
    )
    .await;
    call(reqwest::Method::POST, "/reset/2001002", &[("type", "hw")]).await;
    until("sshd listens in the rescue system", || {
        fabric
            .console(name)
            .is_ok_and(|c| c.contains("rescue: sshd on port 22"))
    })
    .await;
    let mut answered = None;
    for _ in 0..50 {
        let out = ssh(
            &key,
            &ip,
            "cat /sys/class/dmi/id/product_uuid; ls /sys/block",
        );
        if out.status.success() {
            answered = Some(String::from_utf8_lossy(&out.stdout).into_owned());
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let answered = answered.expect("the rescue system answers over SSH");
    let uuid = orc_emu::materialise::product_uuid(name);
    assert_eq!(answered, format!("{uuid}\nnvme0n1\nnvme1n1\n"));

    // installimage checks its config, runs the post-install script; the reset into the
    // installed system runs the first-boot unit it left.
    let post = "#!/bin/sh\nset -e\nmkdir -p /var/lib/orc /etc/systemd/system/multi-user.target.wants\n\
                echo 'echo first boot ran > /var/log/first-boot.out' > /var/lib/orc/first-boot.sh\n\
                : > /etc/systemd/system/orc-first-boot.service\n\
                ln -s ../orc-first-boot.service /etc/systemd/system/multi-user.target.wants/orc-first-boot.service\n";
    let install = format!(
        "set -e\nprintf 'DRIVE1 /dev/nvme0n1\\nIMAGE /root/.oldroot/nfs/images/Ubuntu-2404-noble-amd64-base.tar.gz\\n' > /root/install.conf\n\
         cat > /root/post.sh <<'EOF'\n{post}EOF\n\
         /root/.oldroot/nfs/install/installimage -a -c /root/install.conf -x /root/post.sh\n"
    );
    let bad = ssh(
        &key,
        &ip,
        "/root/.oldroot/nfs/install/installimage -a -c /nonexistent",
    );
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no config file"));
    let out = ssh(&key, &ip, &install);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("installimage: done"));
    call(reqwest::Method::DELETE, "/boot/2001002/rescue", &[]).await;
    call(reqwest::Method::POST, "/reset/2001002", &[("type", "hw")]).await;
    until("the first boot ran", || {
        fabric
            .exec(name, &["cat", "/var/log/first-boot.out"])
            .is_ok_and(|o| o.stdout == b"first boot ran\n")
    })
    .await;
    let console = fabric.console(name).unwrap();
    assert!(
        console.contains("boot: the installed system")
            && console.contains("init: starting orc-first-boot.service"),
        "{console}"
    );
    assert!(
        !ssh(&key, &ip, "true").status.success(),
        "the rescue sshd is gone"
    );
    // All of it happened in the server's own paths, none on the host.
    assert!(!std::path::Path::new("/etc/systemd/system/orc-first-boot.service").exists());
    assert!(!std::path::Path::new("/root/.oldroot").exists());
    assert!(!std::path::Path::new("/var/lib/orc/first-boot.sh").exists());

    let ns = fabric.namespace(name).unwrap();
    // The last holder of the fabric (the materialiser's task, once the emulator is gone)
    // removes every namespace.
    drop(emu);
    drop(fabric);
    until("the namespaces are gone", || !namespaces().contains(&ns)).await;
}

/// Set in the child of the test below: it makes a fabric with a server and waits to be
/// killed.
const KILLED_CHILD: &str = "ORC_TEST_FABRIC_KILLED_CHILD";

#[test]
fn what_a_killed_fabric_left_is_taken_back() {
    assert!(
        orc_emu::netns::is_root(),
        "materialised mode tests need root"
    );
    if let Some(report) = std::env::var_os(KILLED_CHILD) {
        let fabric = Fabric::create(None).unwrap();
        let ip = fabric.plan().public(0).unwrap();
        fabric
            .add_server("left", Some(ip), "4c4c4544-0000-0001")
            .unwrap();
        let name = fabric.namespace("left").unwrap();
        std::fs::write(std::path::Path::new(&report).with_extension("new"), &name).unwrap();
        std::fs::rename(std::path::Path::new(&report).with_extension("new"), &report).unwrap();
        std::thread::sleep(std::time::Duration::from_secs(600));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("fabric");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "what_a_killed_fabric_left_is_taken_back",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(KILLED_CHILD, &report)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let server = loop {
        if let Ok(name) = std::fs::read_to_string(&report) {
            break name;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the child ended ({status}) before its fabric was up");
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "the child's fabric is not up after 60 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    // SIGKILL: no Drop runs, the namespaces stay.
    child.kill().unwrap();
    child.wait().unwrap();
    let prefix = server.split('-').next().unwrap().to_string();
    assert!(namespaces().contains(&server), "{:?}", namespaces());
    assert!(
        links().contains(&format!("{prefix}h")),
        "the uplink's host end stays"
    );

    let removed = orc_emu::netns::reclaim_abandoned().unwrap();
    assert!(removed.contains(&server), "{removed:?}");
    assert!(removed.contains(&format!("{prefix}-inet")), "{removed:?}");
    let left: Vec<String> = namespaces()
        .into_iter()
        .filter(|l| l.starts_with(&format!("{prefix}-")))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert!(!links().contains(&format!("{prefix}h")), "{}", links());
    // A live fabric's slot is never taken back.
    let live = Fabric::create(None).unwrap();
    let ns = live.namespaces()[0].clone();
    let again = orc_emu::netns::reclaim_abandoned().unwrap();
    assert!(!again.contains(&ns), "{again:?}");
    assert!(namespaces().contains(&ns));
}
