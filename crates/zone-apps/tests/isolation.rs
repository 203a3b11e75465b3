//! App slots run as a user of their own when the zone runs as root: what such a process can
//! and cannot reach, and what `/proc` shows of it. A shell script stands in for the app.
//!
//! CI runs these as root, which is the case they are about; run by another user they check
//! that slots run as the zone's user instead (an unprivileged zone cannot switch users). Each
//! test makes its own store, data dir (mode 0700, as the zone demands) and runtime root in a
//! temp dir of mode 0755, so the slot's user can run the script in it.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use orc_common::{Architecture, Shape};
use orc_testkit::eventually_some;
use orc_testkit::proto::deploy;
use orc_zone_apps::{AppBinary, Apps, AppsConfig, DYNAMIC_IDS, Level, LogLine, LogSource, RunAs};
use orc_zone_model::{AppSpec, NewPool, Node, Pool, PoolSpec, SensitiveParams, Timestamp};
use orc_zone_store::Store;

/// Reports what the slot could read, then waits for SIGTERM.
const PROBE: &str = r#"
if cat "$DATA_DIR/zone.db" > /dev/null 2>&1; then echo "data file: read"; else echo "data file: denied"; fi
if ls "$DATA_DIR" > /dev/null 2>&1; then echo "data listing: read"; else echo "data listing: denied"; fi
echo "own key: $(cat "$ORC_PARAM_API_KEY_FILE")"
if cat "$ORC_ZONE_TOKEN_FILE" > /dev/null 2>&1; then echo "own token: read"; else echo "own token: denied"; fi
echo "probed"
trap 'exit 0' TERM
while true; do sleep 0.1; done
"#;

const SECRET: &str = "isolation-sekrit-4711";

/// How long a test waits for a slot to get where it expects.
const WAIT: Duration = Duration::from_secs(10);

fn zone_is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn zone_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

struct Fixture {
    dir: tempfile::TempDir,
    data: PathBuf,
    runtime_root: PathBuf,
    store: Store,
    apps: Apps,
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A zone with app `probe` (the script, reachable by anyone), app `hidden` (a script in a
/// dir of mode 0700, which only the zone's user can reach) and app `missing` (no file).
async fn fixture(run_as: RunAs) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    set_mode(dir.path(), 0o755);
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    set_mode(&bin, 0o755);
    let probe = bin.join("probe.sh");
    std::fs::write(&probe, PROBE).unwrap();
    set_mode(&probe, 0o644);
    let private = dir.path().join("private");
    std::fs::create_dir(&private).unwrap();
    set_mode(&private, 0o700);
    let hidden = private.join("app");
    std::fs::write(&hidden, format!("#!/bin/sh\n{PROBE}")).unwrap();
    set_mode(&hidden, 0o755);

    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    set_mode(&data, 0o700);
    let runtime_root = dir.path().join("run");
    let store = Store::open_sqlite_file(&data.join("zone.db"))
        .await
        .unwrap();
    store
        .set_sealing_key(orc_zone_store::SealingKey::generate())
        .await
        .unwrap();
    let env = BTreeMap::from([("DATA_DIR".to_string(), data.to_string_lossy().into_owned())]);
    let app = |path: &Path, args: Vec<String>| AppBinary {
        path: path.to_path_buf(),
        args,
        env: env.clone(),
        sensitive_params: Default::default(),
    };
    let mut config = AppsConfig {
        run_as,
        runtime_root: runtime_root.clone(),
        ..AppsConfig::default()
    };
    config.options.poll_interval = Duration::from_millis(50);
    config.options.stop_grace = Duration::from_secs(5);
    config.apps.insert(
        "probe".to_string(),
        app(
            Path::new("/bin/sh"),
            vec![probe.to_string_lossy().into_owned()],
        ),
    );
    config
        .apps
        .insert("hidden".to_string(), app(&hidden, vec![]));
    config
        .apps
        .insert("missing".to_string(), app(&bin.join("missing"), vec![]));
    let endpoint = orc_zone_apps::ZoneEndpoint {
        url: "http://127.0.0.1:7999".into(),
        ca_pem: None,
    };
    let apps = Apps::start(store.clone(), &data, endpoint, config)
        .await
        .unwrap();
    Fixture {
        dir,
        data,
        runtime_root,
        store,
        apps,
    }
}

/// What `/proc` shows of a slot's process.
#[derive(Debug)]
struct Proc {
    pid: u32,
    /// Real, effective, saved and filesystem uid.
    uids: Vec<u32>,
    gids: Vec<u32>,
    groups: Vec<u32>,
    environ: Vec<u8>,
    cmdline: Vec<u8>,
    cwd: PathBuf,
}

impl Proc {
    fn read(pid: u32) -> Proc {
        let base = PathBuf::from(format!("/proc/{pid}"));
        let status = std::fs::read_to_string(base.join("status")).unwrap();
        let ids = |key: &str| -> Vec<u32> {
            let line = status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .unwrap_or_else(|| panic!("no {key} line in /proc/{pid}/status"));
            line.split_whitespace()
                .map(|v| v.parse().unwrap())
                .collect()
        };
        Proc {
            pid,
            uids: ids("Uid:"),
            gids: ids("Gid:"),
            groups: ids("Groups:"),
            environ: std::fs::read(base.join("environ")).unwrap(),
            cmdline: std::fs::read(base.join("cmdline")).unwrap(),
            cwd: std::fs::read_link(base.join("cwd")).unwrap(),
        }
    }

    /// The uid, after checking that all four agree.
    fn uid(&self) -> u32 {
        assert!(
            self.uids.len() == 4 && self.uids.iter().all(|u| *u == self.uids[0]),
            "process {} has mixed uids {:?}",
            self.pid,
            self.uids
        );
        self.uids[0]
    }

    fn env(&self, name: &str) -> String {
        self.environ
            .split(|b| *b == 0)
            .filter_map(|entry| std::str::from_utf8(entry).ok())
            .find_map(|entry| entry.strip_prefix(name)?.strip_prefix('='))
            .unwrap_or_else(|| panic!("process {} has no {name}", self.pid))
            .to_string()
    }
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

impl Fixture {
    async fn pool(&self, name: &str, package: &str) -> (Pool, Node) {
        self.pool_of(name, package, None).await
    }

    /// A one-slot pool of `sys/<package>:default`, of the registry's package `digest` when
    /// one is given.
    async fn pool_of(
        &self,
        name: &str,
        package: &str,
        digest: Option<orc_zone_model::registry::Digest>,
    ) -> (Pool, Node) {
        let new = NewPool {
            project_id: orc_zone_model::sys_project_id(),
            name: name.parse().unwrap(),
            size: 1,
            spec: PoolSpec {
                provider_id: self.apps.provider().id.clone(),
                shape: Shape {
                    vcpus: 1,
                    memory_gib: 1,
                    arch: Architecture::X86_64,
                    disks_gib: vec![],
                },
                region_class: "local".parse().unwrap(),
                os: "none".parse().unwrap(),
                public: false,
                endpoints: vec![],
                app: Some(AppSpec {
                    package: format!("sys/{package}:default"),
                    digest,
                    params: BTreeMap::new(),
                    sensitive: SensitiveParams(BTreeMap::from([(
                        "api_key".to_string(),
                        SECRET.to_string(),
                    )])),
                }),
                placement: Default::default(),
                ssh_keys: Vec::new(),
            },
        };
        let mut change = self
            .store
            .create_pool(&new, Timestamp::now())
            .await
            .unwrap();
        (change.pool, change.created.remove(0))
    }

    /// Deploys a one-slot pool of `package` and waits until its script has probed.
    async fn running(&self, name: &str, package: &str) -> (Pool, Node, Proc) {
        let (pool, node) = self.pool(name, package).await;
        let result = self
            .apps
            .deploy_slot(&orc_proto::Deploy {
                os: orc_proto::OsId::new("none").unwrap(),
                ..deploy(node.id.as_str(), orc_proto::QuoteToken::new("t").unwrap())
            })
            .await;
        assert!(
            matches!(result, orc_proto::DeployResult::Deployed(_)),
            "deploy refused: {result:?}"
        );
        eventually_some("the probe's report", WAIT, || async {
            self.lines(&pool)
                .iter()
                .any(|l| l.text == "probed")
                .then_some(())
        })
        .await;
        let pid = self
            .apps
            .slots()
            .await
            .into_iter()
            .find(|s| s.node_id == node.id)
            .and_then(|s| s.pid)
            .expect("the slot has a process");
        (pool, node, Proc::read(pid))
    }

    fn lines(&self, pool: &Pool) -> Vec<LogLine> {
        self.apps.logs(&pool.id, None, Level::Trace)
    }

    fn said(&self, pool: &Pool, text: &str) -> bool {
        self.lines(pool).iter().any(|l| l.text == text)
    }
}

#[tokio::test]
async fn slots_of_a_root_zone_run_as_a_uid_of_their_pool() {
    let f = fixture(RunAs::Auto).await;
    let (_, _, first) = f.running("first", "probe").await;
    let (_, _, second) = f.running("second", "probe").await;
    let (a, b) = (first.uid(), second.uid());
    if zone_is_root() {
        for proc in [&first, &second] {
            let uid = proc.uid();
            assert_ne!(uid, 0);
            assert!(DYNAMIC_IDS.contains(&uid), "uid {uid} outside the range");
            assert_eq!(proc.gids, vec![uid; 4], "the gid is the uid's");
            assert!(
                proc.groups.is_empty(),
                "supplementary groups kept: {:?}",
                proc.groups
            );
        }
        assert_ne!(a, b, "two pools share uid {a}");
    } else {
        assert_eq!((a, b), (zone_uid(), zone_uid()));
    }
    f.apps.shutdown().await;
}

#[tokio::test]
async fn a_slot_reads_its_own_files_but_not_the_data_dir() {
    let f = fixture(RunAs::Auto).await;
    assert_eq!(std::fs::metadata(&f.data).unwrap().mode() & 0o777, 0o700);
    let (pool, node, proc) = f.running("probe", "probe").await;
    assert!(f.said(&pool, "own key: <redacted>"), "{:?}", f.lines(&pool));
    assert!(f.said(&pool, "own token: read"), "{:?}", f.lines(&pool));
    let runtime_dir = PathBuf::from(proc.env("ORC_RUNTIME_DIR"));
    let key_file = PathBuf::from(proc.env("ORC_PARAM_API_KEY_FILE"));
    assert_eq!(key_file.parent(), Some(runtime_dir.as_path()));
    assert_eq!(std::fs::read_to_string(&key_file).unwrap(), SECRET);

    if zone_is_root() {
        let uid = proc.uid();
        assert!(f.said(&pool, "data file: denied"), "{:?}", f.lines(&pool));
        assert!(
            f.said(&pool, "data listing: denied"),
            "{:?}",
            f.lines(&pool)
        );
        assert!(runtime_dir.starts_with(&f.runtime_root));
        assert_eq!(proc.cwd, runtime_dir, "the working dir is the runtime dir");
        assert_eq!(proc.env("HOME"), runtime_dir.to_string_lossy());
        let root = std::fs::metadata(&f.runtime_root).unwrap();
        assert_eq!((root.mode() & 0o7777, root.uid()), (0o711, 0));
        let dir = std::fs::metadata(&runtime_dir).unwrap();
        assert_eq!(
            (dir.mode() & 0o7777, dir.uid(), dir.gid()),
            (0o700, uid, uid)
        );
        for file in std::fs::read_dir(&runtime_dir).unwrap() {
            let meta = file.unwrap().metadata().unwrap();
            assert_eq!((meta.mode() & 0o7777, meta.uid()), (0o600, uid));
        }
        assert!(
            !f.data
                .join("apps")
                .join(pool.id.as_str())
                .join("slot-0/run")
                .exists(),
            "secret files were written into the data dir"
        );
    } else {
        assert!(f.said(&pool, "data file: read"));
        assert!(runtime_dir.starts_with(&f.data));
    }

    f.apps.destroy_slot(&node.id).await;
    assert!(
        !Path::new(&format!("/proc/{}", proc.pid)).exists(),
        "the process outlived its destroy"
    );
    assert!(!runtime_dir.exists(), "the runtime dir outlived its slot");
    f.apps.shutdown().await;
}

#[tokio::test]
async fn no_secret_shows_in_the_command_line_or_environment() {
    let f = fixture(RunAs::Auto).await;
    let (_, _, proc) = f.running("secrets", "probe").await;
    let token = std::fs::read_to_string(proc.env("ORC_ZONE_TOKEN_FILE")).unwrap();
    let token = token.trim();
    assert!(
        token.len() >= 16,
        "an implausible zone token: {} bytes",
        token.len()
    );
    for (what, bytes) in [("cmdline", &proc.cmdline), ("environ", &proc.environ)] {
        assert!(!bytes.is_empty(), "/proc/{}/{what} is empty", proc.pid);
        assert!(!contains(bytes, SECRET), "the sensitive param is in {what}");
        assert!(!contains(bytes, token), "the zone token is in {what}");
        assert!(
            !contains(bytes, "orc-isolation"),
            "the isolation entry is in {what}"
        );
    }
    f.apps.shutdown().await;
}

#[tokio::test]
async fn a_binary_the_slot_user_cannot_reach_runs_as_the_zone_user_with_a_warning() {
    let f = fixture(RunAs::Auto).await;
    let hidden = f.dir.path().join("private/app");
    let (pool, _, proc) = f.running("hidden", "hidden").await;
    assert_eq!(proc.uid(), zone_uid());
    let warnings: Vec<LogLine> = f
        .apps
        .logs(&pool.id, None, Level::Warn)
        .into_iter()
        .filter(|l| l.source == LogSource::Supervisor)
        .collect();
    let warned = warnings.iter().any(|l| {
        l.text.contains(&*hidden.to_string_lossy())
            && l.text.contains("not reachable by an unprivileged user")
            && l.text.contains("runs as the zone's user")
    });
    assert_eq!(warned, zone_is_root(), "{warnings:?}");
    let runtime_dir = PathBuf::from(proc.env("ORC_RUNTIME_DIR"));
    assert!(
        runtime_dir.starts_with(&f.data),
        "a zone-user slot keeps its files in the data dir"
    );
    f.apps.shutdown().await;
    assert!(!runtime_dir.exists(), "the runtime dir outlived its slot");
}

#[tokio::test]
async fn run_as_zone_user_keeps_slots_as_the_zone_user() {
    let f = fixture(RunAs::ZoneUser).await;
    let (pool, _, proc) = f.running("plain", "probe").await;
    assert_eq!(proc.uid(), zone_uid());
    assert!(f.said(&pool, "data file: read"), "{:?}", f.lines(&pool));
    let runtime_dir = PathBuf::from(proc.env("ORC_RUNTIME_DIR"));
    assert_eq!(
        runtime_dir,
        f.data
            .join("apps")
            .join(pool.id.as_str())
            .join("slot-0/run")
    );
    assert_eq!(proc.cwd, runtime_dir.parent().unwrap());
    assert!(
        !f.runtime_root.exists(),
        "no runtime root without a slot user"
    );
    f.apps.shutdown().await;
}

#[tokio::test]
async fn a_process_that_does_not_start_leaves_no_runtime_files() {
    let f = fixture(RunAs::Auto).await;
    let (pool, node) = f.pool("missing", "missing").await;
    let result = f
        .apps
        .deploy_slot(&orc_proto::Deploy {
            os: orc_proto::OsId::new("none").unwrap(),
            ..deploy(node.id.as_str(), orc_proto::QuoteToken::new("t").unwrap())
        })
        .await;
    match result {
        orc_proto::DeployResult::Refused(refusal) => {
            assert!(refusal.words.contains("cannot run"), "{}", refusal.words);
        }
        other => panic!("a missing binary deployed: {other:?}"),
    }
    let slot_dir = f.data.join("apps").join(pool.id.as_str()).join("slot-0");
    assert!(
        !slot_dir.join("run").exists(),
        "runtime files in the data dir"
    );
    let left: Vec<_> = std::fs::read_dir(&f.runtime_root)
        .map(|entries| entries.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "runtime dirs left behind: {left:?}");
    if zone_is_root() {
        assert!(
            f.runtime_root.is_dir(),
            "the slot did not run as a user of its own"
        );
    }
    f.apps.shutdown().await;
}

/// Publishes `script` as `sys/<name>:default`; returns the package's digest.
async fn publish(f: &Fixture, name: &str, script: &str) -> orc_zone_model::registry::Digest {
    use orc_zone_model::registry::{
        AppManifest, AppPackage, BinaryRef, Digest, PackageDocument, Platform,
    };
    let binary = script.as_bytes();
    let blob = Digest::of(binary);
    f.apps.blobs().put(&blob, binary, 1 << 20).await.unwrap();
    let document = PackageDocument {
        manifest: AppManifest::bare(name, "1"),
        binaries: [(
            Platform::host().unwrap(),
            BinaryRef {
                digest: blob,
                size: binary.len() as u64,
            },
        )]
        .into(),
    };
    let package = AppPackage {
        org_id: orc_zone_model::sys_org_id(),
        name: name.parse().unwrap(),
        digest: document.digest(),
        document,
        created_at: Timestamp::now(),
    };
    f.store.put_app_package(&package).await.unwrap();
    package.digest
}

/// Whether `uid`:`gid` (no other group) can read `path`.
fn reads_as(path: &Path, uid: u32, gid: u32) -> bool {
    use std::os::unix::process::CommandExt as _;
    std::process::Command::new("/bin/cat")
        .arg(path)
        .uid(uid)
        .gid(gid)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap()
        .success()
}

/// Attack: a local user, or another pool's slot, reads an app's binary through the copy the
/// zone installed for its slots. Each pool's copy is readable by that pool's user alone.
#[tokio::test]
async fn a_pools_registry_binary_is_readable_by_that_pools_user_alone() {
    let f = fixture(RunAs::Auto).await;
    let script =
        "#!/bin/sh\necho \"binary: $0\"\ntrap 'exit 0' TERM\nwhile true; do sleep 0.1; done\n";
    let digest = publish(&f, "reg", script).await;
    let mut slots = Vec::new();
    for name in ["first", "second"] {
        let (pool, node) = f.pool_of(name, "reg", Some(digest.clone())).await;
        let result = f
            .apps
            .deploy_slot(&orc_proto::Deploy {
                os: orc_proto::OsId::new("none").unwrap(),
                ..deploy(node.id.as_str(), orc_proto::QuoteToken::new("t").unwrap())
            })
            .await;
        assert!(
            matches!(result, orc_proto::DeployResult::Deployed(_)),
            "deploy refused: {result:?}"
        );
        let binary = eventually_some("the slot names its binary", WAIT, || async {
            f.lines(&pool)
                .iter()
                .find_map(|l| l.text.strip_prefix("binary: ").map(PathBuf::from))
        })
        .await;
        let pid = f
            .apps
            .slots()
            .await
            .into_iter()
            .find(|s| s.node_id == node.id)
            .and_then(|s| s.pid)
            .expect("the slot has a process");
        slots.push((binary, Proc::read(pid)));
    }
    let [(first_binary, first), (second_binary, second)] = &slots[..] else {
        unreachable!()
    };
    if !zone_is_root() {
        // An unprivileged zone runs its slots as itself, from the registry's own file.
        for binary in [first_binary, second_binary] {
            assert!(binary.starts_with(&f.data), "{}", binary.display());
        }
        assert!(!f.runtime_root.join("bin").exists());
        f.apps.shutdown().await;
        return;
    }
    let (a, b) = (first.uid(), second.uid());
    assert_ne!(a, b);
    assert_ne!(first_binary, second_binary, "two pools share one copy");
    for (binary, owner, other) in [(first_binary, a, b), (second_binary, b, a)] {
        assert!(binary.starts_with(f.runtime_root.join("bin")));
        assert_eq!(
            binary.file_name().unwrap().to_string_lossy(),
            digest_hex_of(script)
        );
        let file = std::fs::metadata(binary).unwrap();
        assert_eq!(
            (file.mode() & 0o7777, file.uid(), file.gid()),
            (0o550, 0, owner)
        );
        let dir = std::fs::metadata(binary.parent().unwrap()).unwrap();
        assert_eq!(
            (dir.mode() & 0o7777, dir.uid(), dir.gid()),
            (0o750, 0, owner)
        );
        assert!(
            reads_as(binary, owner, owner),
            "its own pool cannot read it"
        );
        assert!(!reads_as(binary, other, other), "another pool reads it");
        assert!(!reads_as(binary, 65534, 65534), "nobody reads it");
    }
    // No copy is left where every local user could read it.
    let shared = f.runtime_root.join("bin").join(digest_hex_of(script));
    assert!(!shared.exists(), "{} exists", shared.display());
    f.apps.shutdown().await;
}

fn digest_hex_of(script: &str) -> String {
    orc_zone_model::registry::Digest::of(script.as_bytes())
        .hex()
        .to_string()
}
