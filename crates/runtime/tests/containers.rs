//! Containers for real: a containerd of the test's own, an image built from Debian's static
//! busybox as an OCI layout, pulled (every blob checked) and unpacked, run by runc through
//! containerd's API on an overlay root, in a network namespace of its own.
//!
//! Privileged: these need root, containerd, runc and busybox-static (CI runs as root and
//! installs them), and fail, not skip, without them. Everything made here (namespaces,
//! mounts, cgroups, the daemon and its shims) is removed at the end, also when a test
//! fails.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

mod common;

use common::{Lab, run};
use orc_runtime::containerd::{Containerd, TaskStatus};
use orc_runtime::daemon::{self, DaemonDir};
use orc_runtime::image::{ImageStore, Source};
use orc_runtime::spec::{self, Replica};
use orc_testkit::oci::{busybox_files, busybox_httpd, write_layout};

struct Started {
    client: Containerd,
    image: orc_runtime::image::Image,
    store: ImageStore,
    layout: orc_testkit::oci::Layout,
}

async fn start(lab: &Lab, page: &str) -> Started {
    let client = daemon::ensure(
        &DaemonDir::new(lab.dir.join("containerd")),
        "containerd",
        &lab.namespace,
    )
    .await
    .expect("containerd starts and answers");
    let layout = write_layout(
        &lab.dir.join("layout"),
        "1",
        &[busybox_files(page)],
        &busybox_httpd(8080),
    );
    let store = ImageStore::new(lab.dir.join("images"));
    let image = store
        .pull(&Source::Layout(layout.dir.clone()), &layout.manifest_digest)
        .await
        .expect("the image pulls");
    Started {
        client,
        image,
        store,
        layout,
    }
}

fn replica(
    lab: &Lab,
    id: &str,
    args: &[&str],
    netns: Option<PathBuf>,
) -> (
    Replica,
    Vec<orc_runtime::containerd::api::types::Mount>,
    PathBuf,
    PathBuf,
    Vec<PathBuf>,
) {
    let dir = lab.dir.join("replicas").join(id);
    let (upper, work) = (dir.join("upper"), dir.join("work"));
    std::fs::create_dir_all(&upper).expect("upper");
    std::fs::create_dir_all(&work).expect("work");
    let (stdout, stderr) = (dir.join("stdout.log"), dir.join("stderr.log"));
    std::fs::write(&stdout, b"").expect("stdout");
    std::fs::write(&stderr, b"").expect("stderr");
    let spec = Replica {
        args: args.iter().map(|s| s.to_string()).collect(),
        env: spec::merge_env(
            &["PATH=/bin".to_string()],
            &[("GREETING".into(), "hello from orc".into())],
        ),
        cwd: "/".into(),
        user: (0, 0),
        hostname: id.into(),
        netns,
        cpu_millis: 250,
        memory_bytes: 64 << 20,
        cgroup: format!("/{}/{id}", lab.namespace),
        binds: vec![],
    };
    (spec, vec![], stdout, stderr, vec![upper, work])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_pulled_from_a_layout_runs_under_our_own_containerd() {
    let lab = Lab::new("run");
    let started = start(&lab, "page\n").await;
    assert!(started.image.fetched_bytes >= started.layout.bytes);
    let again = started
        .store
        .pull(
            &Source::Layout(started.layout.dir.clone()),
            &started.layout.manifest_digest,
        )
        .await
        .expect("a second pull");
    assert_eq!(
        again.fetched_bytes, 0,
        "a pulled image is not fetched again"
    );
    assert!(
        started
            .client
            .version()
            .await
            .expect("a version")
            .starts_with(|c: char| c.is_ascii_digit() || c == 'v')
    );

    let (spec, _, stdout, stderr, dirs) = replica(
        &lab,
        "hello",
        &[
            "/bin/sh",
            "-c",
            "echo $GREETING; id -u; cat /www/healthz; cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max; echo oops >&2; exit 3",
        ],
        None,
    );
    let rootfs = vec![spec::rootfs_mount(
        &started.image.layers,
        &dirs[0],
        &dirs[1],
    )];
    started
        .client
        .create_container(
            "hello",
            &spec::runtime_spec(&spec),
            HashMap::from([("orc.test".to_string(), "yes".to_string())]),
        )
        .await
        .expect("the container is created");
    started
        .client
        .start_task("hello", rootfs, &stdout, &stderr)
        .await
        .expect("the task starts");
    let status = tokio::time::timeout(Duration::from_secs(30), started.client.wait("hello"))
        .await
        .expect("the task ends")
        .expect("waiting works");
    assert_eq!(status, 3);
    let out = std::fs::read_to_string(&stdout).expect("stdout");
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["hello from orc", "0", "ok", &(64u64 << 20).to_string()],
        "{out}"
    );
    assert_eq!(std::fs::read_to_string(&stderr).expect("stderr"), "oops\n");
    assert!(matches!(
        started.client.task("hello").await.expect("a task"),
        Some((_, TaskStatus::Stopped(3)))
    ));
    started
        .client
        .delete_task("hello")
        .await
        .expect("the task is deleted");
    let listed = started.client.containers().await.expect("a list");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].1.get("orc.test").map(String::as_str), Some("yes"));
    started
        .client
        .delete_container("hello")
        .await
        .expect("the container is deleted");
    assert!(
        started
            .client
            .containers()
            .await
            .expect("a list")
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_in_its_network_namespace_serves_http_and_takes_an_exec() {
    let mut lab = Lab::new("net");
    let started = start(&lab, "served by a replica\n").await;
    let replica_ns = lab.netns("r");
    let client_ns = lab.netns("c");
    // 192.0.2.0/24 (TEST-NET-1) exists only between these two namespaces.
    run(
        "ip",
        &[
            "link",
            "add",
            "eth0",
            "netns",
            &replica_ns,
            "type",
            "veth",
            "peer",
            "name",
            "v0",
            "netns",
            &client_ns,
        ],
    );
    run(
        "ip",
        &[
            "-n",
            &replica_ns,
            "addr",
            "add",
            "192.0.2.10/24",
            "dev",
            "eth0",
        ],
    );
    run("ip", &["-n", &replica_ns, "link", "set", "eth0", "up"]);
    run("ip", &["-n", &replica_ns, "link", "set", "lo", "up"]);
    run(
        "ip",
        &["-n", &client_ns, "addr", "add", "192.0.2.1/24", "dev", "v0"],
    );
    run("ip", &["-n", &client_ns, "link", "set", "v0", "up"]);

    let netns = PathBuf::from("/var/run/netns").join(&replica_ns);
    let args = spec::resolve_args(None, None, &started.image.run);
    let arg_refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let (spec, _, stdout, stderr, dirs) = replica(&lab, "web", &arg_refs, Some(netns));
    let rootfs = vec![spec::rootfs_mount(
        &started.image.layers,
        &dirs[0],
        &dirs[1],
    )];
    started
        .client
        .create_container("web", &spec::runtime_spec(&spec), HashMap::new())
        .await
        .expect("the container is created");
    started
        .client
        .start_task("web", rootfs, &stdout, &stderr)
        .await
        .expect("the task starts");

    let mut page = String::new();
    let mut last_error = String::new();
    for _ in 0..50 {
        // busybox wget without -T: its timeout option crashes in Debian 12's static build.
        let output = Command::new("nsenter")
            .arg(format!("--net=/var/run/netns/{client_ns}"))
            .args([
                "busybox",
                "wget",
                "-q",
                "-O",
                "-",
                "http://192.0.2.10:8080/",
            ])
            .output()
            .expect("wget runs");
        if output.status.success() {
            page = String::from_utf8_lossy(&output.stdout).into_owned();
            last_error = String::from_utf8_lossy(&output.stderr).into_owned();
            break;
        }
        last_error = format!(
            "{:?} {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        page,
        "served by a replica\n",
        "wget: {last_error}; the replica: {:?}; it wrote: {} {}",
        started.client.task("web").await,
        std::fs::read_to_string(&stdout).unwrap_or_default(),
        std::fs::read_to_string(&stderr).unwrap_or_default()
    );

    let exec_out = lab.dir.join("exec.out");
    std::fs::write(&exec_out, b"").expect("exec out");
    let status = started
        .client
        .exec(
            "web",
            "probe-1",
            &spec::exec_process(
                &spec,
                &[
                    "/bin/sh".into(),
                    "-c".into(),
                    "cat /www/healthz; hostname".into(),
                ],
            ),
            &exec_out,
            &exec_out,
        )
        .await
        .expect("the exec runs");
    assert_eq!(status, 0);
    assert_eq!(
        std::fs::read_to_string(&exec_out).expect("exec output"),
        "ok\nweb\n"
    );

    // httpd runs as pid 1 and ignores SIGTERM: the stop ends it with SIGKILL.
    let status = started
        .client
        .stop("web", Duration::from_millis(500))
        .await
        .expect("the replica stops");
    assert_eq!(status, 128 + 9);
    started
        .client
        .delete_task("web")
        .await
        .expect("the task is deleted");
    started
        .client
        .delete_container("web")
        .await
        .expect("the container is deleted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blob_that_is_not_its_digest_is_refused() {
    let lab = Lab::new("digest");
    let layout = write_layout(
        &lab.dir.join("layout"),
        "1",
        &[busybox_files("x")],
        &busybox_httpd(8080),
    );
    let layer = &layout.layer_digests[0];
    let path = layout
        .dir
        .join("blobs/sha256")
        .join(&layer["sha256:".len()..]);
    let mut bytes = std::fs::read(&path).expect("the layer");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&path, bytes).expect("a changed layer");
    let store = ImageStore::new(lab.dir.join("images"));
    let error = store
        .pull(&Source::Layout(layout.dir.clone()), &layout.manifest_digest)
        .await
        .expect_err("a changed layer is refused");
    assert!(
        error.to_string().contains(&format!("layer {layer}"))
            && error.to_string().contains("refused"),
        "{error}"
    );
    assert!(
        store.get(&layout.manifest_digest).is_none(),
        "nothing half-pulled is kept"
    );
}
