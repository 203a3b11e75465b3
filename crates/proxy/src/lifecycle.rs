//! The proxy's stages, which every listener, connection and tunnel watches.
//!
//! `Serving` → `Draining` (listeners stop accepting; HTTP connections finish their
//! requests in flight and close; TCP connections and upgraded tunnels carry on) →
//! `Closing` (whatever is left is dropped). A stage never goes back.

use tokio::sync::watch;

/// Where the proxy is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Stage {
    Serving,
    Draining,
    Closing,
}

/// Sets the stage.
#[derive(Debug)]
pub(crate) struct Lifecycle {
    stage: watch::Sender<Stage>,
}

impl Lifecycle {
    pub fn new() -> Lifecycle {
        Lifecycle {
            stage: watch::Sender::new(Stage::Serving),
        }
    }

    /// Moves on to `stage`, unless the proxy is there or further already.
    pub fn advance(&self, stage: Stage) {
        self.stage.send_if_modified(|current| {
            let later = *current < stage;
            if later {
                *current = stage;
            }
            later
        });
    }

    pub fn watch(&self) -> StageWatch {
        StageWatch(self.stage.subscribe())
    }
}

/// Waits for a stage.
#[derive(Debug, Clone)]
pub(crate) struct StageWatch(watch::Receiver<Stage>);

impl StageWatch {
    /// Returns once the proxy drains (or closes).
    pub async fn draining(&mut self) {
        // An error means the proxy is gone altogether: as good as closing.
        let _ = self.0.wait_for(|stage| *stage >= Stage::Draining).await;
    }

    /// Returns once the proxy closes.
    pub async fn closing(&mut self) {
        let _ = self.0.wait_for(|stage| *stage >= Stage::Closing).await;
    }
}
