//! What a replica costs on a node, measured for real (root, containerd, runc and
//! busybox-static, as the privileged tests): pulling and unpacking an image per MB, and
//! starting a container (create, start, first output) at the median of 20.
//!
//! `cargo bench -p orc-runtime --bench runtime` prints one line per figure; the numbers in
//! docs/apps.md come from it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use orc_runtime::containerd::Containerd;
use orc_runtime::daemon::{self, DaemonDir};
use orc_runtime::image::{ImageStore, Source};
use orc_runtime::spec::{self, Replica};
use orc_testkit::oci::{Entry, busybox_files, busybox_httpd, write_layout};

fn main() {
    assert!(
        rustix::process::geteuid().is_root(),
        "the runtime benchmark runs containers: run it as root"
    );
    let dir = PathBuf::from(format!("/tmp/orc-bench-{}", std::process::id()));
    let namespace = format!("orc-bench-{}", std::process::id());
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the bench's dir");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runtime.block_on(measure(&dir, &namespace))
    }));
    runtime.block_on(clean(&dir, &namespace));
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

async fn measure(dir: &std::path::Path, namespace: &str) {
    // 32 MiB of incompressible files on top of busybox: the pull is dominated by checking
    // and unpacking bytes, as a real image's is.
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut noise = |len: usize| -> Vec<u8> {
        (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect()
    };
    let mut files = busybox_files("bench\n");
    files.push(Entry::Dir("data".into()));
    for i in 0..32 {
        files.push(Entry::File(format!("data/{i}.bin"), noise(1 << 20), 0o644));
    }
    let layout = write_layout(&dir.join("layout"), "1", &[files], &busybox_httpd(8080));
    let megabytes = layout.bytes as f64 / f64::from(1 << 20);

    let mut per_mb = Vec::new();
    for round in 0..3 {
        let store = ImageStore::new(dir.join(format!("images-{round}")));
        let started = Instant::now();
        store
            .pull(&Source::Layout(layout.dir.clone()), &layout.manifest_digest)
            .await
            .expect("the image pulls");
        per_mb.push(started.elapsed().as_secs_f64() * 1000.0 / megabytes);
    }
    per_mb.sort_by(f64::total_cmp);
    println!(
        "image pull, checked and unpacked: {:.1} ms per MB (median of 3, {megabytes:.1} MB image)",
        per_mb[1]
    );

    let client = daemon::ensure(
        &DaemonDir::new(dir.join("containerd")),
        "containerd",
        namespace,
    )
    .await
    .expect("containerd answers");
    let store = ImageStore::new(dir.join("images-0"));
    let image = store
        .pull(&Source::Layout(layout.dir.clone()), &layout.manifest_digest)
        .await
        .expect("the image is there");
    let mut starts = Vec::new();
    for i in 0..20 {
        let id = format!("start-{i}");
        let replica_dir = dir.join("replicas").join(&id);
        let (upper, work) = (replica_dir.join("upper"), replica_dir.join("work"));
        std::fs::create_dir_all(&upper).expect("upper");
        std::fs::create_dir_all(&work).expect("work");
        let stdout = replica_dir.join("stdout.log");
        std::fs::write(&stdout, b"").expect("stdout");
        let replica = Replica {
            args: vec!["/bin/echo".into(), "up".into()],
            env: spec::merge_env(&image.run.env, &[]),
            cwd: "/".into(),
            user: (0, 0),
            hostname: id.clone(),
            netns: None,
            cpu_millis: 500,
            memory_bytes: 64 << 20,
            cgroup: format!("/{namespace}/{id}"),
            binds: vec![],
        };
        let started = Instant::now();
        client
            .create_container(&id, &spec::runtime_spec(&replica), HashMap::new())
            .await
            .expect("a container");
        client
            .start_task(
                &id,
                vec![spec::rootfs_mount(&image.layers, &upper, &work)],
                &stdout,
                &stdout,
            )
            .await
            .expect("a task");
        client.wait(&id).await.expect("it exits");
        starts.push(started.elapsed());
        assert_eq!(
            std::fs::read_to_string(&stdout).expect("its output"),
            "up\n"
        );
        client.delete_task(&id).await.expect("the task goes");
        client
            .delete_container(&id)
            .await
            .expect("the container goes");
    }
    starts.sort();
    println!(
        "container start to exit (create, start, run echo, wait): p50 {:.0} ms, p90 {:.0} ms (20 runs)",
        ms(starts[10]),
        ms(starts[18])
    );
    // The same with containerd's own CLI, on the same daemon and root filesystem.
    let socket = dir.join("containerd/containerd.sock");
    let mut ctr = Vec::new();
    for i in 0..20 {
        let id = format!("ctr-{i}");
        let started = Instant::now();
        let output = std::process::Command::new("ctr")
            .arg("--address")
            .arg(&socket)
            .args(["-n", namespace, "run", "--rm", "--rootfs"])
            .arg(&image.layers[0])
            .args([id.as_str(), "/bin/echo", "up"])
            .output()
            .expect("ctr runs");
        ctr.push(started.elapsed());
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            "up\n",
            "ctr: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    ctr.sort();
    println!(
        "the same with `ctr run --rm --rootfs`: p50 {:.0} ms, p90 {:.0} ms (20 runs)",
        ms(ctr[10]),
        ms(ctr[18])
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn clean(dir: &std::path::Path, namespace: &str) {
    let socket = dir.join("containerd/containerd.sock");
    if let Ok(client) = Containerd::connect(&socket, namespace).await {
        for (id, _) in client.containers().await.unwrap_or_default() {
            let _ = client.stop(&id, Duration::from_millis(200)).await;
            let _ = client.delete_task(&id).await;
            let _ = client.delete_container(&id).await;
        }
    }
    daemon::stop(
        &DaemonDir::new(dir.join("containerd")),
        Duration::from_secs(2),
    )
    .await;
    orc_runtime::supervisor::unmount_under(dir);
    if let Ok(controllers) = std::fs::read_dir("/sys/fs/cgroup") {
        for controller in controllers.flatten() {
            let root = controller.path().join(namespace);
            if let Ok(children) = std::fs::read_dir(&root) {
                for child in children.flatten() {
                    let _ = std::fs::remove_dir(child.path());
                }
            }
            let _ = std::fs::remove_dir(&root);
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}
