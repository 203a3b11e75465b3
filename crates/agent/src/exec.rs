//! Commands the zone runs on the node (`orc exec`): started without a shell, stdin closed,
//! output sent as it comes in chunks, killed at the timeout or when the zone cancels.

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
