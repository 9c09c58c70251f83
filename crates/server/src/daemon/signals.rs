//! SIGINT and SIGTERM: the first starts the shutdown, a second exits at once.

use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio_util::sync::CancellationToken;

use super::{DaemonError, LOG_TARGET};

/// The installed SIGINT and SIGTERM handlers.
pub(super) struct Signals {
    int: Signal,
    term: Signal,
}

impl Signals {
    /// Install both handlers (inside the runtime).
    pub(super) fn install() -> Result<Signals, DaemonError> {
        let handler = |kind, name| {
            signal(kind).map_err(|source| DaemonError::Signal {
                signal: name,
                source,
            })
        };
        Ok(Signals {
            int: handler(SignalKind::interrupt(), "SIGINT")?,
            term: handler(SignalKind::terminate(), "SIGTERM")?,
        })
    }

    /// The first signal starts the shutdown; a second one exits at once.
    pub(super) async fn watch(mut self, shutdown: CancellationToken) {
        tokio::select! { _ = self.int.recv() => {}, _ = self.term.recv() => {} }
        tracing::info!(target: LOG_TARGET, "signal received; shutting down");
        shutdown.cancel();
        tokio::select! { _ = self.int.recv() => {}, _ = self.term.recv() => {} }
        tracing::warn!(target: LOG_TARGET, "second signal: exiting now");
        std::process::exit(1);
    }
}
