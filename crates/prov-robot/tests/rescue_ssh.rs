//! The bootstrap for real over SSH: an OpenSSH server started in a network namespace this
//! test creates plays the rescue system (veth pair, private addresses), with stand-ins for
//! installimage and a scratch root instead of `/`. The Robot side is the emulator.
//!
//! Checks: the token file's mode and content, and that the token appears in no argv (every
//! process's command line is sampled from /proc while the bootstrap runs, and the
//! stand-ins record theirs), no command or script sent over SSH, no sshd log line and no
//! log line of this process.
//!
//! Needs root (network namespaces, sshd); CI runs it as root. Without root, or when any
//! part cannot be set up, it fails with the reason; it never skips.

mod support;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use orc_common::Secret;
use orc_prov_robot::ssh::{SshError, SshExecutor, SshOutput, SshTarget};
use orc_prov_robot::{BootstrapParams, RobotMachines, RusshExecutor, SshOptions};
use orc_provider_sdk::machine::{MachineKey, MachineProvider, MachineSpec};
use support::*;

fn sh(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program} {args:?} cannot start: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{program} {args:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The namespace, the veth pair and sshd; all removed on drop, whatever happened.
struct RescueHost {
    netns: String,
    host_veth: String,
    sshd: Option<Child>,
    address: String,
}

impl RescueHost {
    fn start(dir: &Path) -> Result<RescueHost, String> {
        if sh("id", &["-u"])?.trim() != "0" {
            return Err(
                "this test needs root (network namespaces and sshd); CI runs it as root".into(),
            );
        }
        let pid = std::process::id();
        let netns = format!("orc-robot-ssh-{pid}");
        let host_veth = format!("orb{}h", pid % 10_000_000);
        let peer_veth = format!("orb{}r", pid % 10_000_000);
        let net = format!("10.{}.{}", (pid >> 14) & 0xff, (pid >> 6) & 0xff);
        let base = (pid & 0x3f) * 4;
        let host_ip = format!("{net}.{}", base + 1);
        let address = format!("{net}.{}", base + 2);
        let mut host = RescueHost {
            netns: netns.clone(),
            host_veth: host_veth.clone(),
            sshd: None,
            address: address.clone(),
        };
        sh("ip", &["netns", "add", &netns])?;
        sh(
            "ip",
            &[
                "link", "add", &host_veth, "type", "veth", "peer", "name", &peer_veth,
            ],
        )?;
        sh("ip", &["link", "set", &peer_veth, "netns", &netns])?;
        sh(
            "ip",
            &["addr", "add", &format!("{host_ip}/30"), "dev", &host_veth],
        )?;
        sh("ip", &["link", "set", &host_veth, "up"])?;
        let in_ns = |args: &[&str]| {
            let mut all = vec!["netns", "exec", netns.as_str()];
            all.extend_from_slice(args);
            sh("ip", &all)
        };
        in_ns(&[
            "ip",
            "addr",
            "add",
            &format!("{address}/30"),
            "dev",
            &peer_veth,
        ])?;
        in_ns(&["ip", "link", "set", &peer_veth, "up"])?;
        in_ns(&["ip", "link", "set", "lo", "up"])?;

        std::fs::create_dir_all("/run/sshd").map_err(|e| format!("/run/sshd: {e}"))?;
        let host_key = dir.join("ssh_host_ed25519_key");
        sh(
            "ssh-keygen",
            &[
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-f",
                &host_key.display().to_string(),
            ],
        )?;
        let config = dir.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port 22\nListenAddress {address}\nHostKey {}\nAuthorizedKeysFile {}\n\
                 PermitRootLogin prohibit-password\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nPubkeyAuthentication yes\nUsePAM no\n\
                 StrictModes no\nPidFile {}\nLogLevel DEBUG3\n",
                host_key.display(),
                dir.join("authorized_keys").display(),
                dir.join("sshd.pid").display(),
            ),
        )
        .map_err(|e| e.to_string())?;
        let sshd = Command::new("ip")
            .args(["netns", "exec", &netns, "/usr/sbin/sshd", "-D", "-f"])
            .arg(&config)
            .arg("-E")
            .arg(dir.join("sshd.log"))
            .stdin(Stdio::null())
            .spawn()
            .map_err(|e| format!("sshd cannot start: {e}"))?;
        host.sshd = Some(sshd);
        let target: SocketAddr = format!("{address}:22")
            .parse()
            .map_err(|e| format!("{e}"))?;
        let started = Instant::now();
        loop {
            if TcpStream::connect_timeout(&target, Duration::from_millis(200)).is_ok() {
                break;
            }
            if let Some(Ok(Some(status))) = host.sshd.as_mut().map(Child::try_wait) {
                let log = std::fs::read_to_string(dir.join("sshd.log")).unwrap_or_default();
                return Err(format!("sshd exited with {status}: {log}"));
            }
            if started.elapsed() > Duration::from_secs(20) {
                return Err(format!("sshd does not answer on {target}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(host)
    }
}

impl Drop for RescueHost {
    fn drop(&mut self) {
        if let Some(mut sshd) = self.sshd.take() {
            let _ = sshd.kill();
            let _ = sshd.wait();
        }
        let _ = sh("ip", &["link", "del", &self.host_veth]);
        let _ = sh("ip", &["netns", "del", &self.netns]);
    }
}

/// Reads every process's command line until stopped; keeps those holding the needle.
struct ArgvSampler {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<(usize, Vec<String>)>>,
}

impl ArgvSampler {
    fn start(needle: &'static str) -> ArgvSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut rounds = 0;
            let mut hits = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                rounds += 1;
                let Ok(entries) = std::fs::read_dir("/proc") else {
                    continue;
                };
                for entry in entries.flatten() {
                    let path = entry.path().join("cmdline");
                    if let Ok(bytes) = std::fs::read(&path)
                        && contains(&bytes, needle.as_bytes())
                    {
                        hits.push(String::from_utf8_lossy(&bytes).replace('\0', " "));
                    }
                }
            }
            (rounds, hits)
        });
        ArgvSampler {
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> (usize, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .map(|t| t.join().expect("sampler thread"))
            .unwrap_or_default()
    }
}

impl Drop for ArgvSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The first-boot script the zone would hand this node (a stand-in; it is never run here).
const FIRST_BOOT: &str = "#!/bin/sh\necho first boot of node-ssh\n";

/// Commands sent over SSH, each with its stdin.
type Sent = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// The real executor, recording every command and stdin it sends.
#[derive(Clone, Default)]
struct Recording {
    inner: RusshExecutor,
    sent: Sent,
}

impl SshExecutor for Recording {
    async fn run(
        &self,
        target: &SshTarget,
        command: &str,
        stdin: &[u8],
    ) -> Result<SshOutput, SshError> {
        self.sent
            .lock()
            .unwrap()
            .push((command.to_string(), stdin.to_vec()));
        self.inner.run(target, command, stdin).await
    }
}

/// Collects this process's log lines.
#[derive(Clone, Default)]
struct LogBuffer(Arc<Mutex<Vec<u8>>>);

impl Write for LogBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bootstrap_over_real_ssh_keeps_the_token_out_of_argv_scripts_and_logs() {
    let logs = LogBuffer::default();
    let writer = logs.clone();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .init();

    let dir = tempfile::tempdir().expect("scratch dir");
    let root: PathBuf = dir.path().to_path_buf();
    let host =
        RescueHost::start(&root).unwrap_or_else(|e| panic!("cannot set up the rescue host: {e}"));
    let client_key = root.join("client_ed25519");
    sh(
        "ssh-keygen",
        &[
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-f",
            &client_key.display().to_string(),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    std::fs::copy(
        root.join("client_ed25519.pub"),
        root.join("authorized_keys"),
    )
    .unwrap();
    let private_key = std::fs::read_to_string(&client_key).unwrap();
    let secrets = root.join("secrets");
    std::fs::create_dir_all(&secrets).unwrap();
    let rescue = RescueBox::new(&root.join("box"), Disks::Nvme);

    let emu = robot_emulator().await;
    let options = SshOptions {
        port: 22,
        host_override: Some(host.address.clone()),
        rescue_wait: Duration::from_secs(20),
        poll_interval: Duration::from_millis(200),
        connect_timeout: Duration::from_secs(10),
        command_timeout: Duration::from_secs(120),
        layout: rescue.layout.clone(),
    };
    let machines = RobotMachines::new(account(&secrets, &private_key), robot_url(&emu), options);
    let key = MachineKey::new("node-ssh").unwrap();
    let machine = machines
        .create(&MachineSpec {
            idempotency_key: key.clone(),
            name: "node-ssh".into(),
            location: "hel1".into(),
            plan: "EX44".into(),
            image: String::new(),
            ssh_keys: Vec::new(),
            user_data: None,
        })
        .await
        .expect("claim the EX44");
    assert_eq!(machine.instance_ref, EX44.to_string());

    let ssh = Recording::default();
    let sampler = ArgvSampler::start(TOKEN);
    let uuid = machines
        .identify(&key, &ssh)
        .await
        .expect("identify over SSH");
    assert_eq!(uuid, "4c4c4544-0042-4810-8058-b4c04f4e3332");
    let params = BootstrapParams {
        join_token: Secret::new(TOKEN),
        first_boot: FIRST_BOOT.into(),
        hostname: "node-ssh".into(),
        ssh_keys: Vec::new(),
    };
    let report = machines
        .bootstrap(&key, &params, &ssh)
        .await
        .expect("bootstrap over SSH");
    let (rounds, argv_hits) = sampler.finish();
    assert!(report.reused_rescue, "the rescue system already answered");

    // The token is where it belongs, and only there.
    let token_file = rescue.target.join("etc/orc/join-token");
    assert_eq!(
        std::fs::read_to_string(&token_file).unwrap(),
        format!("{TOKEN}\n")
    );
    assert_eq!(rescue.mode("etc/orc/join-token"), 0o600);
    assert_eq!(
        std::fs::read_to_string(rescue.target.join("var/lib/orc/first-boot.sh")).unwrap(),
        FIRST_BOOT
    );
    assert_eq!(rescue.mode("var/lib/orc/first-boot.sh"), 0o700);
    let unit = std::fs::read_to_string(
        rescue
            .target
            .join("etc/systemd/system/orc-first-boot.service"),
    )
    .unwrap();
    assert!(
        unit.lines()
            .any(|l| l == "ExecStart=/bin/sh /var/lib/orc/first-boot.sh"),
        "{unit}"
    );
    assert_eq!(
        std::fs::read_link(
            rescue
                .target
                .join("etc/systemd/system/multi-user.target.wants/orc-first-boot.service")
        )
        .unwrap()
        .to_str(),
        Some("../orc-first-boot.service"),
        "the first-boot unit is enabled"
    );
    assert!(
        !rescue.target.join("post-install").exists(),
        "the post-install script shreds itself"
    );
    assert_eq!(
        RescueBox::files_containing(&root, TOKEN),
        [token_file],
        "sshd.log, scripts, records"
    );
    let conf = std::fs::read_to_string(rescue.record.join("install.conf")).unwrap();
    assert!(
        conf.contains("DRIVE1 /dev/nvme0n1\nDRIVE2 /dev/nvme1n1\nSWRAID 1\nSWRAIDLEVEL 1\n"),
        "{conf}"
    );

    // Not in any argv.
    assert!(rounds > 0, "the argv sampler ran");
    assert!(
        argv_hits.is_empty(),
        "the token was in a command line: {argv_hits:?}"
    );
    let argv = rescue.argv_log();
    assert!(argv.contains("installimage"), "{argv}");
    assert!(!argv.contains(TOKEN), "{argv}");

    // Not in any command or script sent over SSH; it went once, as stdin.
    let sent = ssh.sent.lock().unwrap().clone();
    assert!(
        sent.iter().all(|(command, _)| !command.contains(TOKEN)),
        "{sent:?}"
    );
    let carriers: Vec<_> = sent
        .iter()
        .filter(|(_, stdin)| contains(stdin, TOKEN.as_bytes()))
        .collect();
    assert_eq!(carriers.len(), 1);
    assert_eq!(
        carriers[0].1,
        TOKEN.as_bytes(),
        "the token travels alone, never inside a script"
    );
    assert!(
        sent.iter()
            .any(|(command, stdin)| command == "sh -s" && contains(stdin, FIRST_BOOT.as_bytes())),
        "the install script carries the first-boot script"
    );

    // Not in any log line: sshd's (DEBUG3) and ours (TRACE, russh included).
    let sshd_log = std::fs::read_to_string(root.join("sshd.log")).unwrap_or_default();
    assert!(
        sshd_log.contains("Accepted publickey"),
        "sshd logged the sessions: {sshd_log}"
    );
    assert!(!sshd_log.contains(TOKEN));
    let ours = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    assert!(
        ours.contains("bootstrap: join token stored"),
        "our log was captured: {ours}"
    );
    assert!(!ours.contains(TOKEN));

    // Robot: no reset into rescue (it answered), one into the installed system.
    let resets: Vec<_> = request_log(&emu)
        .await
        .into_iter()
        .filter(|(m, p, _)| m == "POST" && p == "/reset/2001002")
        .collect();
    assert_eq!(resets.len(), 1, "{resets:?}");
    assert!(!direct(&emu).rescue(EX44).await.unwrap().unwrap().active);

    // The executor pins host keys when told, and bounds a command's run time.
    let fingerprint = sh(
        "ssh-keygen",
        &[
            "-l",
            "-E",
            "sha256",
            "-f",
            &root.join("ssh_host_ed25519_key.pub").display().to_string(),
        ],
    )
    .unwrap();
    let pin = fingerprint
        .split_whitespace()
        .nth(1)
        .expect("ssh-keygen prints the fingerprint second")
        .to_string();
    let target = |pins: Vec<String>, limit: Duration| SshTarget {
        host: host.address.clone(),
        port: 22,
        user: "root".into(),
        private_key: Secret::new(private_key.clone()),
        host_key_sha256: pins,
        connect_timeout: Duration::from_secs(10),
        command_timeout: limit,
    };
    let pinned = RusshExecutor
        .run(
            &target(vec![pin], Duration::from_secs(30)),
            "echo pinned",
            &[],
        )
        .await
        .expect("the pinned host key matches");
    assert_eq!(pinned.stdout_text(), "pinned");
    let wrong = RusshExecutor
        .run(
            &target(vec!["SHA256:not-this-host".into()], Duration::from_secs(30)),
            "echo unpinned",
            &[],
        )
        .await
        .unwrap_err();
    assert!(wrong.is_unreachable(), "{wrong}");
    let slow = RusshExecutor
        .run(&target(Vec::new(), Duration::from_secs(1)), "sleep 3", &[])
        .await
        .unwrap_err();
    assert!(matches!(slow, SshError::Timeout { .. }), "{slow}");
    drop(host);
}
