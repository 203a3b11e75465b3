//! `orc up` as a child process, driven with the `orc` CLI as a person would.

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A minute, the longest most waits here take.
pub const MINUTE: Duration = Duration::from_secs(60);

/// `orc up` in its own data dir, on ports the system picks.
pub struct Up {
    child: Child,
    pub data: std::path::PathBuf,
    pub summary: String,
    /// The lines it prints after its summary.
    later: std::sync::mpsc::Receiver<String>,
}

impl Up {
    pub fn start(dir: &Path) -> Up {
        Up::start_with(dir, &[])
    }

    /// `orc up` with `extra` arguments.
    pub fn start_with(dir: &Path, extra: &[&str]) -> Up {
        let data = dir.join("data");
        let any = "127.0.0.1:0";
        let mut child = Command::new(env!("CARGO_BIN_EXE_orc"))
            .args(["up", "--data-dir"])
            .arg(&data)
            .args([
                "--http",
                any,
                "--grpc",
                any,
                "--edge",
                any,
                "--hetzner-emu",
                any,
            ])
            .args([
                "--vultr-emu",
                any,
                "--robot-emu",
                any,
                "--partner-wait",
                "120",
            ])
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("orc up starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut summary = String::new();
            let mut done = false;
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if done {
                    let _ = tx.send(line);
                    continue;
                }
                summary.push_str(&line);
                summary.push('\n');
                if line.starts_with("Ctrl-C stops everything") {
                    let _ = tx.send(summary.clone());
                    done = true;
                }
            }
        });
        let summary = rx
            .recv_timeout(Duration::from_secs(300))
            .expect("orc up prints its summary");
        Up {
            child,
            data,
            summary,
            later: rx,
        }
    }

    /// Sends `orc up` a signal.
    pub fn signal(&self, signal: rustix::process::Signal) {
        rustix::process::kill_process(rustix::process::Pid::from_child(&self.child), signal)
            .expect("a signal to orc up");
    }

    /// Waits for a line `orc up` prints that starts with `prefix`.
    pub fn wait_line(&self, prefix: &str, limit: Duration) -> String {
        let start = Instant::now();
        loop {
            let left = limit.saturating_sub(start.elapsed());
            match self.later.recv_timeout(left) {
                Ok(line) if line.starts_with(prefix) => return line,
                Ok(_) => {}
                Err(e) => panic!("orc up never printed {prefix:?}: {e}"),
            }
        }
    }

    pub fn orc(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_orc"))
            .args(args)
            .env("ORC_DATA_DIR", &self.data)
            .env_remove("ORC_URL")
            .env_remove("ORC_TOKEN")
            .output()
            .expect("orc runs")
    }

    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.orc(args);
        assert!(
            out.status.success(),
            "orc {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8")
    }

    /// `orc ARGS` with `input` on its stdin; its stdout, after it succeeded.
    pub fn ok_with_input(&self, args: &[&str], input: &str) -> String {
        use std::io::Write as _;
        let mut child = Command::new(env!("CARGO_BIN_EXE_orc"))
            .args(args)
            .env("ORC_DATA_DIR", &self.data)
            .env_remove("ORC_URL")
            .env_remove("ORC_TOKEN")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("orc runs");
        child
            .stdin
            .take()
            .expect("piped stdin")
            .write_all(input.as_bytes())
            .expect("orc reads its stdin");
        let out = child.wait_with_output().expect("orc runs");
        assert!(
            out.status.success(),
            "orc {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8")
    }

    /// The first word after `label` on the summary's line that starts with it.
    pub fn summary_word(&self, label: &str) -> String {
        self.summary
            .lines()
            .find_map(|l| l.strip_prefix(label))
            .and_then(|rest| rest.split_whitespace().next())
            .map(str::to_string)
            .unwrap_or_else(|| panic!("no {label:?} in the summary:\n{}", self.summary))
    }

    pub fn json(&self, args: &[&str]) -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        serde_json::from_str(&self.ok(&all)).expect("JSON")
    }

    /// Polls `args` (JSON) until `done` holds, for at most `limit`.
    pub fn wait_for(&self, args: &[&str], limit: Duration, done: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let value = self.json(args);
            if done(&value) {
                eprintln!("orc {args:?}: {:?}", start.elapsed());
                return value;
            }
            assert!(
                start.elapsed() < limit,
                "orc {args:?} never got there: {value:#}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    pub fn stop(mut self) {
        self.signal(rustix::process::Signal::INT);
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                assert!(status.success(), "orc up exited with {status}");
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "orc up did not stop on Ctrl-C"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Up {
    /// A test that failed still gets its world removed: Ctrl-C first (orc up takes its
    /// namespaces down), SIGKILL only when that takes more than a minute.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            // A test may have left it stopped (SIGSTOP).
            self.signal(rustix::process::Signal::CONT);
            self.signal(rustix::process::Signal::INT);
            let start = Instant::now();
            while matches!(self.child.try_wait(), Ok(None)) && start.elapsed() < MINUTE {
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Up {
    /// The access edge's URL from the summary (`https://orc.localhost:PORT`).
    pub fn edge_url(&self) -> String {
        self.summary
            .lines()
            .find_map(|l| l.strip_prefix("edge      "))
            .and_then(|rest| rest.split_whitespace().next())
            .map(|url| url.trim_end_matches('/').to_string())
            .unwrap_or_else(|| panic!("no edge in the summary:\n{}", self.summary))
    }

    /// The zone's CA certificate.
    pub fn ca_pem(&self) -> String {
        std::fs::read_to_string(self.data.join("ca.pem")).expect("the zone's ca.pem")
    }

    /// The admin token.
    pub fn admin_token(&self) -> String {
        std::fs::read_to_string(self.data.join("admin-token"))
            .expect("the admin token file")
            .trim()
            .to_string()
    }
}
