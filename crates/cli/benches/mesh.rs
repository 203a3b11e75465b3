//! Mesh propagation: how fast a change of a project's mesh reaches every member's agent.
//!
//! A zone (TLS, SQLite in a temp dir, production timings) runs in this process with a fake
//! provider whose sites need gateways: S sites (default 8), each with its stable address and
//! private prefix, a pool of project `sys/sys` at each (N nodes in all) and the site's
//! gateway. Each node and gateway joins with its own join token and certificate and attaches
//! over its own TLS stream as a protocol-level agent: it reports a WireGuard key and its
//! address in its site's prefix, and acknowledges every config it receives at once (what a
//! real agent does once it applied it; a real agent's own apply time is the `orc-wg` device
//! update, measured apart, and a probe over real WireGuard is
//! `scripts/bench-mesh-propagation.sh`). Printed:
//! - **formation**: from the first attach until every node holds all N-1 others as peers
//!   and every gateway the S-1 other sites;
//! - **change → delivered / acknowledged**: a workstation connects through the API (and
//!   later disconnects), which gives every node a new peer (or takes it away): per node, the
//!   time from the API call to the node receiving the config that has it, p50, p99 and max;
//!   and the time until the store records every node's acknowledgement;
//! - **zone work per change**: one mesh pass (read the store, plan every member, compare) for
//!   N members, timed on its own; and the zone's CPU time per change (the simulated agents
//!   run in a child process; this process is the zone, its fake provider and the bench's
//!   polling).
//! - **unaffected**: the gateways receive nothing from the workstation changes (their
//!   configs do not name workstations), and a change in another project sends none of
//!   these agents anything.
//!
//! `cargo bench -p orc-cli --bench mesh` (N = 200, S = 8, 5 changes each way;
//! `ORC_BENCH_MESH_NODES=N`, `ORC_BENCH_MESH_SITES=S`, `ORC_BENCH_MESH_CHANGES=K` to
//! change; `ORC_BENCH_MESH_PARTS=1` also times each store read of a pass).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use orc_proto::agent_pb::{self, agent_hub_client::AgentHubClient, agent_message, zone_message};
use orc_testkit::zone::TestZone;
use orc_zone::model::{NodeId, Timestamp};
use support::{percentile, usage};

mod support;

/// The project the pool is in (the zone's own).
const PROJECT: &str = "/api/orgs/sys/projects/sys";

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The last config each simulated agent received: (generation, mesh peers, when).
type Board = Arc<Mutex<Vec<Option<(u64, usize, Instant)>>>>;

/// Set in the child process that runs the simulated agents.
const SWARM: &str = "ORC_BENCH_MESH_SWARM";

fn main() {
    if std::env::var_os(SWARM).is_some() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(swarm());
        return;
    }
    let env_number = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let count = env_number("ORC_BENCH_MESH_NODES", 200).max(2);
    let sites = env_number("ORC_BENCH_MESH_SITES", 8).clamp(1, 100);
    let changes = env_number("ORC_BENCH_MESH_CHANGES", 5).max(1);
    let late = env_number("ORC_BENCH_MESH_ADDED", 5);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run(count, sites, changes, late));
}

async fn run(count: usize, site_count: usize, changes: usize, late: usize) {
    // A project prefix that holds every node and every workstation address, which stays in
    // quarantine once disconnected (a /24 holds 253).
    let addresses = count + late + 2 * changes;
    let prefix_len = (16..=24)
        .rev()
        .find(|len| (1usize << (32 - len)) - 3 >= addresses)
        .expect("at most 65,000 nodes");
    let mesh = orc_zone::mesh::MeshOptions {
        range: orc_mesh::MeshRange::parse("10.88.0.0/16", prefix_len).expect("a range"),
        // Node subnets would not fit prefixes this long; the mesh is what is measured.
        workloads: None,
        ..Default::default()
    };
    let z = TestZone::start_with(|config| config.mesh = mesh.clone()).await;
    let zone = &z.zone;
    let support::Sites {
        sites,
        pools,
        nodes,
        gateways,
    } = support::running_sites(zone, count + late, site_count).await;
    // The board holds the nodes that attach at once first, then those that attach one by one
    // later (the "node added" changes), then the gateways.
    let agents: Vec<&orc_zone::model::Node> = nodes.iter().chain(&gateways).collect();
    let node_range = 0..count;
    let gateway_range = count + late..count + late + site_count;

    // Every node and gateway joins and attaches, with its address in its site's prefix.
    let board: Board = Arc::new(Mutex::new(vec![None; agents.len()]));
    let fingerprint = zone.ca().unwrap().fingerprint();
    let new = orc_zone::store::NewJoinToken {
        ca_fingerprint: &fingerprint,
        created_by: "bench",
        ttl: orc_zone_model::JoinTtl::default(),
        product_uuid: None,
    };
    // The agents run in a child process, so this process's CPU time is the zone's.
    let ca_file = tempfile::NamedTempFile::new().expect("a CA file");
    std::fs::write(ca_file.path(), zone.ca_pem().unwrap()).unwrap();
    let mut plan = format!("{}\n{}\n", zone.grpc_url(), ca_file.path().display());
    let mut hosts_at: std::collections::BTreeMap<&str, u32> = Default::default();
    for (index, node) in agents.iter().enumerate() {
        let (_, secret) = zone
            .store()
            .create_join_token(&node.id, &new, Timestamp::now())
            .await
            .unwrap();
        let site = node.status.site.as_deref().expect("a node at a site");
        let (_, _, prefix) = sites
            .iter()
            .find(|(s, _, _)| s == site)
            .expect("a known site");
        // The gateway is the site's first host, its nodes the hosts after it.
        let host = if gateway_range.contains(&index) {
            1
        } else {
            let next = hosts_at.entry(site).or_insert(1);
            *next += 1;
            *next
        };
        let address = std::net::Ipv4Addr::from(u32::from(prefix.network()) + host);
        let when = if (count..count + late).contains(&index) {
            "later"
        } else {
            "now"
        };
        plan.push_str(&format!(
            "{} {} {address}/{} {when}\n",
            node.id,
            secret.expose(),
            prefix.prefix_len()
        ));
    }
    plan.push_str("end\n");
    let first_attach = Instant::now();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .env(SWARM, "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the agents' process starts");
    // Kept open: a line `attach INDEX` attaches a node that waits.
    let mut commands = child.stdin.take().unwrap();
    {
        use std::io::Write as _;
        commands.write_all(plan.as_bytes()).unwrap();
    }
    let stdout = child.stdout.take().unwrap();
    let reader = {
        let board = board.clone();
        std::thread::spawn(move || {
            use std::io::BufRead as _;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let numbers: Vec<u64> = line.split(' ').filter_map(|n| n.parse().ok()).collect();
                if let [index, generation, peers] = numbers[..] {
                    board.lock().unwrap()[index as usize] =
                        Some((generation, peers as usize, Instant::now()));
                }
            }
        })
    };
    let formed = wait_peers(
        &board,
        node_range.clone(),
        first_attach,
        count - 1,
        Duration::from_secs(300),
    )
    .await;
    let backbone = wait_peers(
        &board,
        gateway_range.clone(),
        first_attach,
        site_count - 1,
        Duration::from_secs(300),
    )
    .await;
    println!(
        "mesh/formation  n={count} sites={site_count}: every node holds all {} others as peers {:.2} s after the first attach, every gateway the {} other sites {:.2} s after it",
        count - 1,
        formed.last().map_or(0.0, |d| d.as_secs_f64()),
        site_count - 1,
        backbone.last().map_or(0.0, |d| d.as_secs_f64())
    );

    // The nodes reach each other at their site addresses (the backbone joins the sites).
    let planned = zone.agents().mesh_of(&nodes[0].id);
    let peers = &planned.interfaces[0].peers;
    assert!(
        peers.iter().all(|p| p
            .endpoint
            .is_some_and(|e| sites.iter().any(|(_, _, prefix)| prefix.contains(e.ip())))),
        "every peer of a node at a site is reached at its site address"
    );

    // One mesh pass on its own: what the zone does per change, for N members.
    let options = mesh;
    let rounds = 20;
    let started = Instant::now();
    for _ in 0..rounds {
        let pass = orc_zone::mesh::mesh_pass(zone.store(), &options, Timestamp::now())
            .await
            .expect("a pass");
        assert_eq!(
            pass.plan.len(),
            agents.len() - late,
            "every joined agent is planned"
        );
    }
    let pass_time = started.elapsed() / rounds;
    // The pass's parts: each store read, and the plan with every member's digest.
    if std::env::var_os("ORC_BENCH_MESH_PARTS").is_some() {
        let store = zone.store();
        macro_rules! part {
            ($name:literal, $e:expr) => {{
                let t = Instant::now();
                for _ in 0..rounds {
                    let _ = $e.await.unwrap();
                }
                println!("mesh/read {} {:.2} ms", $name, ms(t.elapsed() / rounds));
            }};
        }
        part!("mesh_nodes", store.mesh_nodes());
        part!("mesh_members", store.mesh_members());
        part!("mesh_projects", store.mesh_projects());
        part!("mesh_sites", store.mesh_sites());
        part!("list_providers", store.list_providers());
        part!("mesh_pool_addresses", store.mesh_pool_addresses());
        let rows_read = store.node_agents_of_pool(&pools[0]).await.unwrap();
        let rows = |facts: bool| -> Vec<orc_zone::store::AgentUpdate> {
            rows_read
                .iter()
                .map(|agent| orc_zone::store::AgentUpdate {
                    agent: agent.clone(),
                    facts,
                })
                .collect()
        };
        part!(
            "update_node_agents, one pool (no facts)",
            store.update_node_agents(&rows(false))
        );
        part!(
            "update_node_agents, one pool (facts)",
            store.update_node_agents(&rows(true))
        );
        part!("node_agents_of_pool", store.node_agents_of_pool(&pools[0]));
        let world = orc_zone::mesh::world(store, &options).await.unwrap();
        let t = Instant::now();
        for _ in 0..rounds {
            let plan = orc_mesh::plan(&world);
            let _: Vec<String> = plan.values().map(|c| c.digest()).collect();
        }
        println!("mesh/plan_and_digests {:.2} ms", ms(t.elapsed() / rounds));
    }

    // Changes through the API: a workstation connects, then disconnects. First timed one
    // after the other, watching the agents and the store closely.
    let url = format!("{PROJECT}/mesh/workstations");
    let admin = zone.admin_token().expose().to_string();
    let change = |round: usize, connect: bool| {
        let (z, url, admin) = (&z, &url, &admin);
        async move {
            let answer = if connect {
                let key = orc_mesh::PublicKey(orc_wg::public_key(
                    &orc_wg::generate_private_key().unwrap(),
                ));
                z.post(
                    url,
                    admin,
                    serde_json::json!({ "name": format!("bench-{round}"), "public_key": key.to_string() }),
                )
                .await
            } else {
                z.delete(&format!("{url}/bench-{round}"), admin).await
            };
            assert!(answer.status.is_success(), "{}", answer.body);
        }
    };
    let generations = |board: &Board| -> Vec<u64> {
        board
            .lock()
            .unwrap()
            .iter()
            .map(|s| s.map_or(0, |s| s.0))
            .collect()
    };
    let gateways_before = generations(&board)[gateway_range.clone()].to_vec();
    let mut delivered = Vec::new();
    let settle = Duration::from_millis(800);
    let mut acked = Vec::new();
    for round in 0..changes {
        for (connect, want) in [(true, count), (false, count - 1)] {
            let t0 = Instant::now();
            change(round, connect).await;
            let times = wait_peers(
                &board,
                node_range.clone(),
                t0,
                want,
                Duration::from_secs(60),
            )
            .await;
            delivered.extend(times);
            wait_acked(
                zone,
                &agents,
                &generations(&board),
                Duration::from_millis(5),
            )
            .await;
            acked.push(t0.elapsed());
        }
    }

    // Then the zone's CPU: this process idles for a while, then makes the same changes with
    // time between them to settle, watching only the agents' reports (which cost this
    // process nothing); the idle rate (periodic passes, keep-alives) is taken off. The store
    // is checked for every acknowledgement once the measurement is over.
    let idle_for = Duration::from_secs(4);
    let (idle_cpu, idle_started) = (usage("self").0, Instant::now());
    tokio::time::sleep(idle_for).await;
    let idle_rate = (usage("self").0 - idle_cpu) / idle_started.elapsed().as_secs_f64();
    let threads_before = support::thread_usage();
    let (cpu_start, busy_started) = (usage("self").0, Instant::now());
    for round in changes..2 * changes {
        for (connect, want) in [(true, count), (false, count - 1)] {
            change(round, connect).await;
            tokio::time::sleep(settle).await;
            wait_peers(
                &board,
                node_range.clone(),
                Instant::now(),
                want,
                Duration::from_secs(60),
            )
            .await;
        }
    }
    let busy_cpu = usage("self").0 - cpu_start;
    wait_acked(zone, &agents, &generations(&board), settle).await;
    let gateways_told = generations(&board)[gateway_range.clone()]
        .iter()
        .zip(&gateways_before)
        .filter(|(now, before)| now != before)
        .count();
    // Where it went: the store's threads (SQLite) and the runtime's (the rest).
    let by_thread: Vec<String> = support::thread_usage()
        .into_iter()
        .map(|(name, cpu)| {
            let before = threads_before.get(&name).copied().unwrap_or(0.0);
            format!(
                "{name} {:.1} ms",
                (cpu - before) * 1e3 / (changes * 2) as f64
            )
        })
        .collect();
    let cpu_per_change = (busy_cpu - idle_rate * busy_started.elapsed().as_secs_f64()).max(0.0)
        / (changes * 2) as f64;

    // Nodes added: one that waited joins and attaches; every node gets it as a peer, its
    // site's gateway a forward to it, the other gateways nothing. Timed from the join to the
    // last node receiving it; the zone's CPU over all of them, with time between to settle.
    let mut added = Vec::new();
    let mut gateways_told_per_node = Vec::new();
    let (cpu_start, added_started) = (usage("self").0, Instant::now());
    for j in 0..late {
        let before = generations(&board);
        let t0 = Instant::now();
        {
            use std::io::Write as _;
            writeln!(commands, "attach {}", count + j).unwrap();
            commands.flush().unwrap();
        }
        let members = count + j + 1;
        added
            .extend(wait_peers(&board, 0..members, t0, members - 1, Duration::from_secs(60)).await);
        tokio::time::sleep(settle).await;
        let now = generations(&board);
        gateways_told_per_node.push(
            gateway_range
                .clone()
                .filter(|&i| now[i] != before[i])
                .count(),
        );
    }
    let added_cpu =
        (usage("self").0 - cpu_start - idle_rate * added_started.elapsed().as_secs_f64()).max(0.0)
            / late.max(1) as f64;
    wait_acked(zone, &agents, &generations(&board), settle).await;
    added.sort();

    // A change in another project: none of these agents may receive anything.
    let other = zone
        .store()
        .create_project(
            &orc_zone::model::sys_org_id(),
            &"other".parse().unwrap(),
            Timestamp::now(),
        )
        .await
        .expect("a second project");
    let before: Vec<u64> = board
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.map_or(0, |s| s.0))
        .collect();
    let key = orc_mesh::PublicKey(orc_wg::public_key(&orc_wg::generate_private_key().unwrap()));
    let answer = z
        .post(
            &format!("/api/orgs/sys/projects/{}/mesh/workstations", other.name),
            &admin,
            serde_json::json!({ "name": "elsewhere", "public_key": key.to_string() }),
        )
        .await;
    assert!(answer.status.is_success(), "{}", answer.body);
    // Two full mesh intervals: every pass that could have sent something has run.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let touched = board
        .lock()
        .unwrap()
        .iter()
        .zip(&before)
        .filter(|(s, before)| s.map_or(0, |s| s.0) != **before)
        .count();
    delivered.sort();
    acked.sort();
    println!(
        "mesh/change_to_delivered  n={count} changes={}: p50={:.1} ms  p99={:.1} ms  max={:.1} ms",
        changes * 2,
        ms(percentile(&delivered, 0.5)),
        ms(percentile(&delivered, 0.99)),
        ms(*delivered.last().unwrap())
    );
    println!(
        "mesh/change_to_all_acknowledged  n={count}: p50={:.1} ms  max={:.1} ms",
        ms(percentile(&acked, 0.5)),
        ms(*acked.last().unwrap())
    );
    println!(
        "mesh/unaffected  n={count}: the workstation changes sent {gateways_told} of the {site_count} gateways a config; a workstation of another project sent {touched} of all agents a config"
    );
    assert_eq!(
        touched, 0,
        "agents of an unaffected project received configs"
    );
    assert_eq!(
        gateways_told, 0,
        "gateways received configs for workstation changes"
    );
    if late > 0 {
        println!(
            "mesh/node_added  n={count}+{late}: join → every node holds it p50={:.1} ms  p99={:.1} ms  max={:.1} ms; gateways told per node added: {gateways_told_per_node:?} of {site_count}; zone CPU per node added {:.1} ms (its join and attach included)",
            ms(percentile(&added, 0.5)),
            ms(percentile(&added, 0.99)),
            ms(*added.last().unwrap()),
            added_cpu * 1e3
        );
        assert!(
            gateways_told_per_node.iter().all(|&told| told == 1),
            "only the new node's gateway changes: {gateways_told_per_node:?}"
        );
    }
    println!(
        "mesh/zone_work  n={count}: one mesh pass {:.1} ms; zone CPU per change {:.1} ms (idle {:.1} ms/s taken off)",
        ms(pass_time),
        cpu_per_change * 1e3,
        idle_rate * 1e3
    );
    println!(
        "mesh/zone_cpu_by_thread  n={count}: per change, idle included: {}",
        by_thread.join(", ")
    );
    let _ = child.kill();
    let _ = child.wait();
    let _ = reader.join();
    z.zone.shutdown().await;
}

/// Waits until the last config of every agent in `range` of the board has `want` peers;
/// each agent's time from `t0` to receiving it.
async fn wait_peers(
    board: &Board,
    range: std::ops::Range<usize>,
    t0: Instant,
    want: usize,
    limit: Duration,
) -> Vec<Duration> {
    let deadline = Instant::now() + limit;
    loop {
        let times: Option<Vec<Duration>> = board.lock().unwrap()[range.clone()]
            .iter()
            .map(|s| match s {
                Some((_, peers, at)) if *peers == want => Some(at.saturating_duration_since(t0)),
                _ => None,
            })
            .collect();
        if let Some(mut times) = times {
            times.sort();
            return times;
        }
        assert!(
            Instant::now() < deadline,
            "not every agent got a config with {want} peers"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Waits until the store records the acknowledgement of `generations` by each of `nodes`
/// (generation 0: not attached yet), looking every `poll`.
async fn wait_acked(
    zone: &orc_zone::zone::Zone,
    nodes: &[&orc_zone::model::Node],
    generations: &[u64],
    poll: Duration,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let pools: std::collections::BTreeSet<&orc_zone::model::PoolId> =
        nodes.iter().map(|n| &n.pool_id).collect();
    loop {
        let mut agents = Vec::new();
        for pool in &pools {
            agents.extend(zone.store().node_agents_of_pool(pool).await.unwrap());
        }
        let applied: std::collections::BTreeMap<&NodeId, u64> = agents
            .iter()
            .map(|a| (&a.node_id, a.applied_generation))
            .collect();
        if nodes
            .iter()
            .zip(generations)
            .all(|(node, want)| *want == 0 || applied.get(&node.id).is_some_and(|a| a >= want))
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the store did not record every acknowledgement"
        );
        tokio::time::sleep(poll).await;
    }
}

/// The child process: reads the zone's URL, its CA file, one `node secret address when` line
/// per agent (`now`, or `later`: when an `attach INDEX` line says so) and `end` from stdin,
/// runs the agents, and prints `index generation peers` for every config one receives.
async fn swarm() {
    // Lines from the bench: the plan, then `attach INDEX` commands.
    let (lines_tx, mut lines) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        use std::io::BufRead as _;
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { return };
            if lines_tx.send(line).is_err() {
                return;
            }
        }
    });
    let url = lines.recv().await.expect("the URL");
    let pem = std::fs::read_to_string(lines.recv().await.expect("the CA file")).unwrap();
    let ca = orc_tls::PinnedCa::from_pem(&pem, "the bench zone").unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, u64, usize)>();
    let mut waiting = std::collections::BTreeMap::new();
    let mut index = 0;
    while let Some(line) = lines.recv().await {
        if line == "end" {
            break;
        }
        let [node, secret, address, when] = line.split(' ').collect::<Vec<_>>()[..] else {
            panic!("a line of node, secret, address and when: {line}");
        };
        let agent = simulated_agent(
            url.clone(),
            ca.clone(),
            node.parse().unwrap(),
            secret.to_string(),
            address.to_string(),
            index,
            tx.clone(),
        );
        if when == "now" {
            tokio::spawn(agent);
        } else {
            waiting.insert(index, agent);
        }
        index += 1;
    }
    tokio::spawn(async move {
        while let Some(line) = lines.recv().await {
            let index: usize = line
                .strip_prefix("attach ")
                .and_then(|i| i.parse().ok())
                .expect("attach INDEX");
            tokio::spawn(waiting.remove(&index).expect("a waiting node"));
        }
    });
    drop(tx);
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    while let Some((index, generation, peers)) = rx.recv().await {
        if writeln!(out, "{index} {generation} {peers}")
            .and_then(|()| out.flush())
            .is_err()
        {
            return;
        }
    }
}

/// Joins `node`, attaches with a WireGuard key and its `address` (CIDR), and acknowledges
/// every config at once.
async fn simulated_agent(
    url: String,
    ca: orc_tls::PinnedCa,
    node: NodeId,
    secret: String,
    address: String,
    index: usize,
    seen: tokio::sync::mpsc::UnboundedSender<(usize, u64, usize)>,
) {
    let identity = orc_tls::NodeIdentity::generate().unwrap();
    let channel = orc_agent::connect::channel(
        &url,
        ca.client_config(orc_tls::ALPN_H2),
        Duration::from_secs(10),
    )
    .await
    .expect("a channel");
    let joined = AgentHubClient::new(channel)
        .join(agent_pb::JoinRequest {
            token: secret,
            node_id: node.to_string(),
            public_key: identity.public_key().to_vec(),
            facts: None,
            version: "bench".into(),
        })
        .await
        .expect("the node joins")
        .into_inner();
    let config = ca
        .client_config_with_identity(
            orc_tls::ALPN_H2,
            &joined.certificate_chain_pem,
            identity.private_key_der(),
        )
        .unwrap();
    let channel = orc_agent::connect::channel(&url, config, Duration::from_secs(10))
        .await
        .expect("a node channel");
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let key = orc_mesh::PublicKey(orc_wg::public_key(&orc_wg::generate_private_key().unwrap()));
    let hello = agent_pb::Hello {
        protocol_version: orc_proto::AGENT_PROTOCOL_VERSION,
        version: "bench".into(),
        facts: Some(agent_pb::Facts {
            hostname: node.to_string(),
            addresses: vec![agent_pb::Address {
                interface: "eth0".into(),
                cidr: address,
            }],
            wireguard_public_key: key.to_string(),
            wireguard: "userspace".into(),
            ..Default::default()
        }),
        applied_generation: 0,
        applies_mesh_changes: true,
    };
    let send = |body| agent_pb::AgentMessage { body: Some(body) };
    tx.send(send(agent_message::Body::Hello(hello)))
        .await
        .unwrap();
    let mut inbound = AgentHubClient::new(channel)
        .attach(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .expect("attached")
        .into_inner();
    let mut keepalive = tokio::time::interval(Duration::from_secs(15));
    let mut held: Option<(u64, orc_mesh::MeshConfig)> = None;
    loop {
        tokio::select! {
            _ = keepalive.tick() => {
                let _ = tx.send(send(agent_message::Body::KeepAlive(agent_pb::KeepAlive {}))).await;
            }
            message = inbound.message() => {
                let Ok(Some(message)) = message else { return };
                if let Some(zone_message::Body::Config(config)) = message.body {
                    // A whole mesh first, then changes to the one before.
                    let mesh = match (&config.mesh_changes, &config.mesh, held.take()) {
                        (Some(changes), _, Some((base, old))) if changes.base_generation == base => {
                            orc_mesh::MeshChanges::try_from(changes).unwrap().apply(&old).unwrap()
                        }
                        (None, Some(whole), _) => orc_mesh::MeshConfig::try_from(whole).unwrap(),
                        (None, None, _) => orc_mesh::MeshConfig::default(),
                        _ => panic!("changes that do not follow the config before"),
                    };
                    let peers = mesh.interfaces.first().map_or(0, |i| i.peers.len());
                    held = Some((config.generation, mesh));
                    let _ = seen.send((index, config.generation, peers));
                    let applied = agent_pb::Applied { generation: config.generation, error: String::new() };
                    let _ = tx.send(send(agent_message::Body::Applied(applied))).await;
                }
            }
        }
    }
}
