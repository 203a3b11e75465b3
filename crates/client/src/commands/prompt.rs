//! Asking for a secret on the terminal without showing it.

use std::io::{BufRead as _, IsTerminal as _, Write as _};

use anyhow::{Context, bail};
use rustix::termios::{LocalModes, OptionalActions, tcgetattr, tcsetattr};

/// Asks `prompt` on stderr and reads one line from the terminal with echo off; refuses
/// when stdin is not a terminal (scripts use `--password-stdin`).
pub fn hidden(prompt: &str) -> anyhow::Result<String> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        bail!("stdin is not a terminal: give the password with --password-stdin");
    }
    let before = tcgetattr(&stdin).context("cannot read the terminal's settings")?;
    let mut quiet = before.clone();
    quiet.local_modes.remove(LocalModes::ECHO);
    quiet.local_modes.insert(LocalModes::ECHONL);
    eprint!("{prompt}");
    let _ = std::io::stderr().flush();
    tcsetattr(&stdin, OptionalActions::Flush, &quiet).context("cannot turn the echo off")?;
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    let restored = tcsetattr(&stdin, OptionalActions::Flush, &before);
    read.context("cannot read the password")?;
    restored.context("cannot turn the echo back on")?;
    Ok(line.trim_end_matches(['\r', '\n']).to_string())
}
