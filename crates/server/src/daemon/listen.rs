//! Inside the runtime, before serving: the signal handlers, the policy, the
//! socket, the `toolsrv serving` line, the policy's demands on this host,
//! and the server's state.

use std::sync::Arc;
use std::time::Duration;

use toolsrv_sandbox::Identity;
use toolsrv_sandbox::PolicyStore;
use toolsrv_sandbox::ViewMechanism as View;
use toolsrv_sandbox::{ContainMechanism as Mechanism, Containment};

use super::signals::Signals;
use super::{DaemonError, LOG_TARGET};
use crate::config::Config;
use crate::server::Server;
use crate::socket::{self, Bound};
use crate::watchdog::Watchdog;

/// Install the handlers (first: a signal that arrives once the socket exists
/// must already take the clean shutdown path), open the policy, bind the
/// socket (or take the one systemd passed), say how the server runs, refuse
/// a host the policy does not accept, and make the server's state.
pub(super) async fn open(
    config: Config,
    watchdog: Option<Arc<Watchdog>>,
    containment: Arc<Containment>,
    identity: Identity,
    watch: crate::watch::Watch,
    activated: bool,
) -> Result<(Arc<Server>, Bound, Signals), DaemonError> {
    let signals = Signals::install()?;
    let policy = PolicyStore::open(&config.sandbox).map_err(DaemonError::Policy)?;
    let bound = if activated {
        socket::inherited(&config.listen)
    } else {
        socket::bind(&config.listen)
    }
    .map_err(DaemonError::Socket)?;
    tracing::info!(target: LOG_TARGET,
        socket = %config.listen.display(),
        socket_activated = activated,
        cwd = %config.cwd.display(),
        tools = %config.tools_dir.display(),
        policy = %config.sandbox.display(),
        auth = if config.no_auth { "off" } else if config.pinned_secret.is_some() { "pinned secret (--secret-file)" } else { "secret" },
        max_connections = config.max_connections,
        yolo = config.yolo,
        landlock_abi = toolsrv_sandbox::landlock_abi(),
        "toolsrv serving"
    );
    log_containment(&containment);
    log_identity(&identity);
    log_attribution(&watch);
    let best_effort = policy.current().general.best_effort;
    if !config.yolo {
        match &config.filesystem {
            View::MountNamespace => {
                tracing::info!(target: LOG_TARGET, how = %config.filesystem.describe(), "filesystem protection")
            }
            View::LandlockOnly(_) => {
                tracing::warn!(target: LOG_TARGET, how = %config.filesystem.describe(), "filesystem protection")
            }
        }
        match &config.network {
            toolsrv_sandbox::NetworkMechanism::Namespace => {
                tracing::info!(target: LOG_TARGET, how = %config.network.describe(), "network by domain")
            }
            toolsrv_sandbox::NetworkMechanism::Fallback(_) => {
                tracing::warn!(target: LOG_TARGET, how = %config.network.describe(), "network by domain")
            }
        }
        if !config.filesystem.is_view() && !best_effort {
            containment.shutdown(Duration::from_secs(1));
            return Err(DaemonError::NoView(config.filesystem.describe()));
        }
    }
    if !containment.mechanism().contains() && !best_effort {
        containment.shutdown(Duration::from_secs(1));
        return Err(DaemonError::NoContainment);
    }
    if config.yolo {
        tracing::warn!(target: LOG_TARGET, "--yolo: tools run WITHOUT the Landlock sandbox; validation still applies");
    }
    if config.no_auth {
        tracing::warn!(target: LOG_TARGET,
            "authentication is off (--no-auth): any local client of this uid can run tools"
        );
    }
    let server =
        Server::new(config, policy, watchdog, containment, watch).map_err(DaemonError::Server)?;
    Ok((server, bound, signals))
}

/// Says at startup what contains a run here and how each limit is enforced;
/// loudly when nothing does.
fn log_containment(c: &Containment) {
    for note in c.notes() {
        tracing::info!(target: LOG_TARGET, note = %note, "containment");
    }
    match c.mechanism() {
        Mechanism::None => tracing::warn!(target: LOG_TARGET,
            "no mechanism contains a run here: a tool that calls setsid or daemonizes outlives its run; {}",
            c.summary()
        ),
        m => tracing::info!(target: LOG_TARGET, mechanism = ?m, how = %c.summary(), "containment"),
    }
}

/// Says at startup which identity tools run under and why.
fn log_identity(id: &Identity) {
    tracing::info!(target: LOG_TARGET, mode = %id.mode(), uid = id.uid(), gid = id.gid(), how = %id.summary(), "identity");
}

/// Says at startup how a tool's creations are told from anyone else's.
fn log_attribution(watch: &crate::watch::Watch) {
    let m = watch.mechanism();
    let reader = watch.tools_ns().and_then(|ns| ns.reader_pid());
    if m.name == "tools-pid-namespace" {
        tracing::info!(target: LOG_TARGET, mechanism = m.name, reader, how = %m.detail, "creation attribution");
    } else {
        tracing::warn!(target: LOG_TARGET, mechanism = m.name, how = %m.detail, "creation attribution");
    }
}
