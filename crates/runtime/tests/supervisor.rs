//! The supervisor for real, as a node's agent runs it: inside a network namespace that
//! stands for the node (the test's thread enters it, so the bridge, the replicas' networks
//! and the probes are the node's), with a containerd of its own.
//!
//! Privileged, like `containers.rs`: root, containerd, runc, busybox-static.

mod common;

use std::net::Ipv4Addr;
use std::process::Command;
use std::time::Duration;

use common::{Lab, run};
use orc_runtime::daemon::{self, DaemonDir};
use orc_runtime::supervisor::{
    Assignment, Config, ImageSource, Phase, Probe, ReplicaPlan, ReplicaStatus, RestartPolicy,
    SecretValue, Supervisor,
};
use orc_testkit::oci::{busybox_files, busybox_httpd, write_layout};

/// Runs `body` on a thread of its own inside network namespace `ns`, with a runtime of its
/// own: everything it opens or starts is in that namespace.
fn in_namespace<T: Send + 'static>(ns: &str, body: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("the node's namespace");
        rustix::thread::move_into_link_name_space(
            std::os::fd::AsFd::as_fd(&file),
            Some(rustix::thread::LinkNameSpaceType::Network),
        )
        .expect("entering the node's namespace");
        body()
    })
    .join()
    .expect("the node's thread")
}

fn plan(id: &str, workload: &str, layout: &std::path::Path, digest: &str) -> ReplicaPlan {
    ReplicaPlan {
        id: id.into(),
        app: "shop".into(),
        workload: workload.into(),
        revision: 1,
        digest: digest.into(),
        source: ImageSource::Layout {
            dir: layout.to_path_buf(),
        },
        command: None,
        args: None,
        env: vec![],
        secret_env: vec![],
        secret_files: vec![],
        volumes: vec![],
        restart: RestartPolicy::Always,
        cpu_millis: 100,
        memory_bytes: 32 << 20,
        address: None,
        probe: Probe::None,
        dns: None,
    }
}

fn status<'a>(all: &'a [ReplicaStatus], id: &str) -> &'a ReplicaStatus {
    all.iter()
        .find(|s| s.id == id)
        .unwrap_or_else(|| panic!("no status for {id} in {all:?}"))
}

async fn until(
    supervisor: &Supervisor,
    what: &str,
    done: impl Fn(&[ReplicaStatus]) -> bool,
) -> Vec<ReplicaStatus> {
    let mut last = Vec::new();
    for _ in 0..120 {
        last = supervisor.reconcile().await;
        if done(&last) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("{what} did not happen; the replicas: {last:#?}");
}

fn wget(ns: &str, url: &str) -> Option<String> {
    let output = Command::new("nsenter")
        .arg(format!("--net=/var/run/netns/{ns}"))
        .args(["busybox", "wget", "-q", "-O", "-", url])
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

#[test]
fn replicas_run_restart_by_policy_and_survive_an_agent_restart() {
    let mut lab = Lab::new("sup");
    let node = lab.netns("n");
    let layout = write_layout(
        &lab.dir.join("layout"),
        "1",
        &[busybox_files("shop\n")],
        &busybox_httpd(8080),
    );
    let subnet: ipnet::Ipv4Net = "10.209.7.0/24".parse().expect("a subnet");
    let web = |i: u8| ReplicaPlan {
        address: Some(Ipv4Addr::new(10, 209, 7, 10 + i)),
        probe: Probe::Http {
            port: 8080,
            path: "/healthz".into(),
        },
        secret_files: vec![("api-key".into(), SecretValue("s3cret".into()))],
        ..plan(
            &format!("shop-web-{i}"),
            "web",
            &layout.dir,
            &layout.manifest_digest,
        )
    };
    let job = ReplicaPlan {
        command: Some(vec![
            "/bin/sh".into(),
            "-c".into(),
            "echo done; cat /run/secrets/api-key; echo; cat /etc/resolv.conf".into(),
        ]),
        restart: RestartPolicy::Never,
        dns: Some(orc_runtime::supervisor::Dns {
            nameserver: Ipv4Addr::new(10, 88, 0, 2),
            search: vec!["shop.web.acme.internal".into(), "web.acme.internal".into()],
        }),
        secret_files: vec![("api-key".into(), SecretValue("s3cret".into()))],
        ..plan("shop-job-0", "job", &layout.dir, &layout.manifest_digest)
    };
    let crash = ReplicaPlan {
        command: Some(vec!["/bin/sh".into(), "-c".into(), "exit 7".into()]),
        restart: RestartPolicy::OnFailure,
        ..plan(
            "shop-crash-0",
            "crash",
            &layout.dir,
            &layout.manifest_digest,
        )
    };
    let assignment = Assignment {
        generation: 1,
        subnet: Some(subnet),
        replicas: vec![web(0), web(1), job.clone(), crash],
        services: Default::default(),
    };
    let dir = lab.dir.clone();
    let namespace = lab.namespace.clone();
    let config = move || Config {
        root: dir.join("agent"),
        secrets_root: dir.join("secrets"),
        registry_client: reqwest::Client::new(),
        other_registries_client: reqwest::Client::new(),
        registry_token: None,
        stop_grace: Duration::from_millis(300),
        log_limit: 1 << 20,
        cgroup_parent: format!("/{namespace}"),
        netns_prefix: common::replica_prefix(),
    };
    let daemon_dir = DaemonDir::new(lab.dir.join("containerd"));
    let node_ns = node.clone();
    let (config_a, daemon_a, ns_a) = (config.clone(), daemon_dir.clone(), lab.namespace.clone());
    let (pid_before, restarts_before) = in_namespace(&node, move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
            .block_on(async move {
                let client = daemon::ensure(&daemon_a, "containerd", &ns_a)
                    .await
                    .expect("containerd answers");
                let supervisor = Supervisor::new(config_a(), client.clone());
                assert!(
                    supervisor
                        .assign(assignment)
                        .expect("the assignment is kept")
                );
                let all = until(
                    &supervisor,
                    "both web replicas ready, the job done",
                    |all| {
                        ["shop-web-0", "shop-web-1"]
                            .iter()
                            .all(|id| all.iter().any(|s| s.id == *id && s.ready))
                            && all
                                .iter()
                                .any(|s| s.id == "shop-job-0" && s.phase == Phase::Exited)
                    },
                )
                .await;
                assert_eq!(status(&all, "shop-job-0").exit_status, Some(0));
                let job_out = std::fs::read_to_string(
                    supervisor.replica_dir("shop-job-0").join("stdout.log"),
                )
                .expect("the job's log");
                assert_eq!(
                    job_out,
                    "done\ns3cret\nnameserver 10.88.0.2\nsearch shop.web.acme.internal web.acme.internal\noptions ndots:1 timeout:2 attempts:2\n",
                    "the secret as a file, and the node's name server with the app's domain first"
                );

                // The replicas answer on their addresses, from the node.
                for i in 0..2 {
                    let page = wget(&node_ns, &format!("http://10.209.7.{}:8080/", 10 + i));
                    assert_eq!(page.as_deref(), Some("shop\n"));
                }
                // A failing replica with on-failure starts again, backing off.
                until(&supervisor, "the crashing replica restarted twice", |all| {
                    all.iter()
                        .any(|s| s.id == "shop-crash-0" && s.restarts >= 2)
                })
                .await;

                // A replica killed behind the supervisor's back is started again.
                client.kill("shop-web-0", 9).await.expect("SIGKILL");
                let all = until(&supervisor, "web-0 back and ready", |all| {
                    let s = status(all, "shop-web-0");
                    s.restarts == 1 && s.ready
                })
                .await;
                assert_eq!(status(&all, "shop-web-1").restarts, 0);

                // A ready replica whose health path stops answering stays ready through two
                // failed probes and is taken out at the third; answering again, it is back.
                let run = |argv: &[&str]| {
                    let argv: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
                    let supervisor = &supervisor;
                    async move {
                        let (code, _, err) = supervisor
                            .exec_in("shop-web-0", &argv, Duration::from_secs(10))
                            .await
                            .expect("a command in web-0");
                        assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
                    }
                };
                run(&["/bin/busybox", "rm", "/www/healthz"]).await;
                for pass in 1..orc_runtime::supervisor::UNREADY_AFTER {
                    let all = supervisor.reconcile().await;
                    assert!(status(&all, "shop-web-0").ready, "after {pass} failed probe(s)");
                }
                let all = supervisor.reconcile().await;
                assert!(!status(&all, "shop-web-0").ready);
                run(&["/bin/sh", "-c", "echo ok > /www/healthz"]).await;
                let all = supervisor.reconcile().await;
                assert!(status(&all, "shop-web-0").ready);
                let pid = client
                    .task("shop-web-1")
                    .await
                    .expect("a task")
                    .expect("web-1 runs")
                    .0;
                (pid, status(&all, "shop-web-1").restarts)
            })
    });

    // The agent restarts: a new supervisor on the same directory adopts what runs.
    let (config_b, daemon_b, ns_b) = (config.clone(), daemon_dir.clone(), lab.namespace.clone());
    let secrets_dir = lab.dir.join("secrets");
    in_namespace(&node, move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
            .block_on(async move {
                let client = daemon::ensure(&daemon_b, "containerd", &ns_b)
                    .await
                    .expect("containerd still answers");
                let supervisor = Supervisor::new(config_b(), client.clone());
                assert_eq!(
                    supervisor.assignment().generation,
                    1,
                    "the assignment was kept on disk"
                );
                let all = supervisor.reconcile().await;
                let pid = client
                    .task("shop-web-1")
                    .await
                    .expect("a task")
                    .expect("web-1 still runs")
                    .0;
                assert_eq!(pid, pid_before, "an agent restart restarts nothing");
                assert_eq!(status(&all, "shop-web-1").restarts, restarts_before);

                // A new generation without web-1 and the job removes them, their
                // networks and secrets.
                let kept = supervisor
                    .assignment()
                    .replicas
                    .into_iter()
                    .filter(|r| r.id == "shop-web-0")
                    .collect();
                supervisor
                    .assign(Assignment {
                        generation: 2,
                        subnet: Some(subnet),
                        replicas: kept,
                        services: Default::default(),
                    })
                    .expect("generation 2");
                // web-1 is told to stop and reported no more at once; it is removed by a
                // later pass, once it ended (busybox httpd, PID 1 of its container, ignores
                // SIGTERM, so after its grace).
                let all = supervisor.reconcile().await;
                assert_eq!(all.len(), 1);
                let containers = || async {
                    client
                        .containers()
                        .await
                        .expect("a list")
                        .into_iter()
                        .map(|(id, _)| id)
                        .collect::<Vec<String>>()
                };
                let start = std::time::Instant::now();
                while containers().await != ["shop-web-0"] {
                    assert!(
                        start.elapsed() < Duration::from_secs(20),
                        "web-1 was not removed: {:?}",
                        containers().await
                    );
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    supervisor.reconcile().await;
                }
                assert!(
                    !orc_runtime::network::namespace_path(&common::replica_prefix(), "shop-web-1")
                        .exists()
                );
                assert!(!secrets_dir.join("shop-job-0").exists());
                // An older generation is ignored.
                assert!(!supervisor.assign(Assignment::default()).expect("ignored"));
                // The last replica removed, the cgroup runc made above replicas goes too.
                supervisor
                    .assign(Assignment {
                        generation: 3,
                        subnet: Some(subnet),
                        replicas: Vec::new(),
                        services: Default::default(),
                    })
                    .expect("generation 3");
                assert!(supervisor.reconcile().await.is_empty());
                let start = std::time::Instant::now();
                while !containers().await.is_empty() {
                    assert!(start.elapsed() < Duration::from_secs(20), "web-0 stays");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    supervisor.reconcile().await;
                }
                let left: Vec<std::path::PathBuf> = std::fs::read_dir("/sys/fs/cgroup")
                    .expect("the cgroup file systems")
                    .flatten()
                    .map(|hierarchy| hierarchy.path().join(&ns_b))
                    .chain([std::path::Path::new("/sys/fs/cgroup").join(&ns_b)])
                    .filter(|path| path.exists())
                    .collect();
                assert!(left.is_empty(), "cgroups left behind: {left:?}");
            });
    });
    // The bridge is the node's, not the host's.
    let host_links = run("ip", &["-o", "link", "show"]);
    assert!(!host_links.contains("orc-br0"), "the host got a bridge");
}
