//! What `orc` starts on this machine, as opposed to what it asks a zone: `orc up` (the whole
//! platform on emulated clouds), `orc zone serve` (one zone controller), `orc agent` (the
//! node agent) and the providers `orc` embeds (`orc prov-hetzner serve …`).
//!
//! - [`up`]: the emulators, the zone, and the providers published to its registry and run
//!   as app pools;
//! - [`serve`]: one zone from its arguments; [`args`]: the arguments both share;
//! - [`agent`]: the node agent; [`embedded`]: the embedded providers.
//!
//! This is the only part of `orc` that links the controller, the agent, the emulators and
//! the providers. The commands that talk to a running zone are `orc-client`'s, and never
//! import from here.

pub mod agent;
pub mod args;
pub mod embedded;
pub mod serve;
pub mod up;

/// Completes at the first SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut interrupt), Ok(mut terminate)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        // Without signal handlers the process still ends by the default action.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
}

/// Logs to stderr at `$ORC_LOG` (default `info`), once per process; coloured only on a
/// terminal, so a log file or a journal gets plain text.
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("ORC_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}
