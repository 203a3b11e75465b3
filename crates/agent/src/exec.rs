//! Commands the zone runs on the node (`orc exec`): started without a shell, stdin closed,
//! output sent as it comes in chunks, killed at the timeout or when the zone cancels.
//! The same messages carry a command run inside a replica's container (`orc app exec`,
//! its output sent once it ends) and a replica's output read from its log files
//! (`orc app logs`, the end of each stream, then what it writes while followed).

use std::process::Stdio;
use std::time::Duration;

use orc_proto::agent_pb::{self, agent_message};
use tokio::io::{AsyncRead, AsyncReadExt as _};
use tokio::sync::{mpsc, oneshot};

/// The largest chunk of output one message carries.
pub const CHUNK_BYTES: usize = 32 << 10;

fn message(body: agent_message::Body) -> agent_pb::AgentMessage {
    agent_pb::AgentMessage { body: Some(body) }
}

fn exit(exec_id: u64, code: Option<i32>, error: impl Into<String>) -> agent_pb::AgentMessage {
    message(agent_message::Body::ExecExit(agent_pb::ExecExit {
        exec_id,
        code,
        error: error.into(),
    }))
}

async fn pump(
    exec_id: u64,
    stream: agent_pb::OutputStream,
    mut from: impl AsyncRead + Unpin,
    to: mpsc::Sender<agent_pb::AgentMessage>,
) {
    let mut buf = vec![0u8; CHUNK_BYTES];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let output = agent_pb::ExecOutput {
                    exec_id,
                    stream: stream as i32,
                    data: buf[..n].to_vec(),
                };
                if to
                    .send(message(agent_message::Body::ExecOutput(output)))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
    }
}

async fn send_output(
    to: &mpsc::Sender<agent_pb::AgentMessage>,
    exec_id: u64,
    stream: agent_pb::OutputStream,
    data: &[u8],
) -> bool {
    for chunk in data.chunks(CHUNK_BYTES) {
        let output = agent_pb::ExecOutput {
            exec_id,
            stream: stream as i32,
            data: chunk.to_vec(),
        };
        if to
            .send(message(agent_message::Body::ExecOutput(output)))
            .await
            .is_err()
        {
            return false;
        }
    }
    true
}

/// Runs `start.argv` inside replica `start.replica` of `supervisor`.
pub async fn run_in_replica(
    supervisor: Option<std::sync::Arc<orc_runtime::supervisor::Supervisor>>,
    start: agent_pb::ExecStart,
    to: mpsc::Sender<agent_pb::AgentMessage>,
    cancel: oneshot::Receiver<()>,
) {
    let exec_id = start.exec_id;
    let Some(supervisor) = supervisor else {
        let _ = to
            .send(exit(exec_id, None, "this node runs no replicas"))
            .await;
        return;
    };
    let timeout = Duration::from_secs(u64::from(start.timeout_seconds.max(1)));
    let ran = tokio::select! {
        ran = supervisor.exec_in(&start.replica, &start.argv, timeout) => ran,
        _ = cancel => Err("cancelled".to_string()),
    };
    let message = match ran {
        Ok((status, stdout, stderr)) => {
            if !send_output(&to, exec_id, agent_pb::OutputStream::Stdout, &stdout).await
                || !send_output(&to, exec_id, agent_pb::OutputStream::Stderr, &stderr).await
            {
                return;
            }
            exit(exec_id, i32::try_from(status).ok(), "")
        }
        Err(error) => exit(exec_id, None, error),
    };
    let _ = to.send(message).await;
}

/// How often a followed log is looked at again.
const FOLLOW_EVERY: Duration = Duration::from_millis(250);

/// Sends the end of replica `start.replica`'s stdout and stderr (`tail_bytes` of each, or
/// all that is kept), then, when following, what it writes until cancelled or the timeout.
/// A file that shrank was rotated: it is read again from its start.
pub async fn read_logs(
    supervisor: Option<std::sync::Arc<orc_runtime::supervisor::Supervisor>>,
    start: agent_pb::ExecStart,
    to: mpsc::Sender<agent_pb::AgentMessage>,
    mut cancel: oneshot::Receiver<()>,
) {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let exec_id = start.exec_id;
    let Some(supervisor) = supervisor else {
        let _ = to
            .send(exit(exec_id, None, "this node runs no replicas"))
            .await;
        return;
    };
    let logs = start.logs.unwrap_or_default();
    let (stdout, stderr) = supervisor.log_paths(&start.replica);
    if !stdout.exists() {
        let _ = to
            .send(exit(
                exec_id,
                None,
                format!("replica {} has no output on this node", start.replica),
            ))
            .await;
        return;
    }
    let mut files = [
        (stdout, agent_pb::OutputStream::Stdout, 0u64),
        (stderr, agent_pb::OutputStream::Stderr, 0u64),
    ];
    for (path, _, offset) in &mut files {
        let len = std::fs::metadata(&*path).map(|m| m.len()).unwrap_or(0);
        *offset = match logs.tail_bytes {
            0 => 0,
            tail => len.saturating_sub(tail),
        };
    }
    let deadline =
        tokio::time::Instant::now() + Duration::from_secs(u64::from(start.timeout_seconds.max(1)));
    loop {
        for (path, stream, offset) in &mut files {
            let Ok(mut file) = std::fs::File::open(&*path) else {
                continue;
            };
            let len = file.metadata().map(|m| m.len()).unwrap_or(0);
            if len < *offset {
                *offset = 0;
            }
            if len == *offset {
                continue;
            }
            let mut data = Vec::new();
            if file.seek(SeekFrom::Start(*offset)).is_err()
                || file.take(len - *offset).read_to_end(&mut data).is_err()
            {
                continue;
            }
            *offset += data.len() as u64;
            if !send_output(&to, exec_id, *stream, &data).await {
                return;
            }
        }
        if !logs.follow {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep(FOLLOW_EVERY) => {}
            _ = tokio::time::sleep_until(deadline) => break,
            _ = &mut cancel => break,
        }
    }
    let _ = to.send(exit(exec_id, Some(0), "")).await;
}

/// Runs `start` to its end, sending its output and exit to `to`. `cancel` kills it.
pub async fn run(
    start: agent_pb::ExecStart,
    to: mpsc::Sender<agent_pb::AgentMessage>,
    cancel: oneshot::Receiver<()>,
) {
    let exec_id = start.exec_id;
    let Some((program, args)) = start.argv.split_first() else {
        let _ = to.send(exit(exec_id, None, "the command is empty")).await;
        return;
    };
    let mut child = match tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            let _ = to
                .send(exit(
                    exec_id,
                    None,
                    format!("cannot start {program:?}: {e}"),
                ))
                .await;
            return;
        }
    };
    let stdout = child.stdout.take().map(|out| {
        tokio::spawn(pump(
            exec_id,
            agent_pb::OutputStream::Stdout,
            out,
            to.clone(),
        ))
    });
    let stderr = child.stderr.take().map(|err| {
        tokio::spawn(pump(
            exec_id,
            agent_pb::OutputStream::Stderr,
            err,
            to.clone(),
        ))
    });
    let timeout = Duration::from_secs(u64::from(start.timeout_seconds.max(1)));
    let (status, why) = tokio::select! {
        status = child.wait() => (status, None),
        _ = tokio::time::sleep(timeout) => {
            let _ = child.kill().await;
            (child.wait().await, Some(format!("killed after its timeout of {} s", timeout.as_secs())))
        }
        _ = cancel => {
            let _ = child.kill().await;
            (child.wait().await, Some("cancelled".to_string()))
        }
    };
    // All output goes before the exit.
    for pump in [stdout, stderr].into_iter().flatten() {
        let _ = pump.await;
    }
    let message = match (status, why) {
        (Ok(status), why) => {
            let error = why.or_else(|| {
                use std::os::unix::process::ExitStatusExt as _;
                status.signal().map(|s| format!("killed by signal {s}"))
            });
            exit(exec_id, status.code(), error.unwrap_or_default())
        }
        (Err(e), _) => exit(exec_id, None, format!("lost the command: {e}")),
    };
    let _ = to.send(message).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn collect(
        argv: &[&str],
        timeout_seconds: u32,
    ) -> (Vec<u8>, Vec<u8>, agent_pb::ExecExit) {
        let (tx, mut rx) = mpsc::channel(16);
        let (_cancel, cancelled) = oneshot::channel();
        let start = agent_pb::ExecStart {
            exec_id: 9,
            argv: argv.iter().map(|s| s.to_string()).collect(),
            timeout_seconds,
            ..Default::default()
        };
        tokio::spawn(run(start, tx, cancelled));
        let (mut out, mut err) = (Vec::new(), Vec::new());
        while let Some(m) = rx.recv().await {
            match m.body {
                Some(agent_message::Body::ExecOutput(o)) => {
                    assert_eq!(o.exec_id, 9);
                    if o.stream() == agent_pb::OutputStream::Stderr {
                        err.extend(o.data);
                    } else {
                        out.extend(o.data);
                    }
                }
                Some(agent_message::Body::ExecExit(x)) => return (out, err, x),
                other => panic!("unexpected {other:?}"),
            }
        }
        panic!("no exit");
    }

    #[tokio::test]
    async fn output_and_exit_code_arrive_in_order() {
        let (out, err, exit) = collect(&["sh", "-c", "echo out; echo err >&2; exit 3"], 10).await;
        assert_eq!(out, b"out\n");
        assert_eq!(err, b"err\n");
        assert_eq!((exit.code, exit.error.as_str()), (Some(3), ""));
    }

    #[tokio::test]
    async fn a_missing_program_and_a_timeout_are_explained() {
        let (_, _, exit) = collect(&["/nonexistent/program"], 10).await;
        assert_eq!(exit.code, None);
        assert!(
            exit.error
                .starts_with("cannot start \"/nonexistent/program\""),
            "{}",
            exit.error
        );
        let (_, _, exit) = collect(&["sleep", "30"], 1).await;
        assert_eq!(exit.code, None);
        assert_eq!(exit.error, "killed after its timeout of 1 s");
    }
}
