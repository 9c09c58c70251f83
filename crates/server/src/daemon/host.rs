//! The single-threaded start-up steps that fit the daemon to its host: the
//! descriptor limit, the filesystem view, the `doctor` facts, the watchdog.

use std::path::Path;
use std::sync::Arc;

use toolsrv_sandbox::Identity;
use toolsrv_sandbox::ViewMechanism as View;
use toolsrv_sandbox::{ContainMechanism as Mechanism, Containment};
use toolsrv_sandbox::{Facts, Source};

use super::LOG_TARGET;
use crate::config::Config;
use crate::fdlimit::{raise_nofile, HEADROOM};
use crate::watchdog::Watchdog;

/// Raise the descriptor limit so that `--max-connections` fits (docs/containment.md);
/// where the hard limit does not allow it, serve fewer connections and say so.
pub(super) fn fit_descriptor_limit(config: &mut Config) {
    // The tools' own connections have a budget beside --max-connections.
    let tools = crate::accept::DESCENDANT_CONNECTIONS as u64;
    let want = config.max_connections as u64 + tools + HEADROOM;
    match raise_nofile(want) {
        Ok(soft) if soft < want => {
            let fit = usize::try_from(soft.saturating_sub(HEADROOM + tools))
                .unwrap_or(usize::MAX)
                .max(1);
            tracing::warn!(target: LOG_TARGET,
                descriptor_limit = soft,
                max_connections = config.max_connections,
                serving = fit,
                "the descriptor limit cannot be raised enough for --max-connections; serving fewer connections"
            );
            config.max_connections = fit;
        }
        Ok(soft) => {
            tracing::debug!(target: LOG_TARGET, descriptor_limit = soft, "descriptor limit")
        }
        Err(e) => {
            tracing::warn!(target: LOG_TARGET, error = %e, "cannot raise the descriptor limit")
        }
    }
}

/// How the filesystem is protected here ([`View::choose`], the rules
/// `toolsrv doctor` applies too).
pub(super) fn filesystem_mechanism(force: Option<&str>, containment: &Containment) -> View {
    View::choose(force, containment.mechanism())
}

/// A root server's confined tools run in their own user namespace only
/// where they enter a view, whose id-mapped binds let them write their rules'
/// files: then the namespace is put in force (the views bind through its id
/// maps, the runs join it); else they run as root, as the log says.
pub(super) fn settle_tools_identity(id: &mut Identity, view: &View) {
    let Some(tools) = id.tools().cloned() else {
        return;
    };
    if view.is_view() {
        toolsrv_sandbox::tools::put_in_force(tools);
    } else {
        id.without_tools_namespace(toolsrv_sandbox::NO_VIEW.to_string());
    }
}

/// What this server confines its tools with (its `doctor` file): the
/// filesystem view is probed with a throwaway thread (`unshare(CLONE_NEWNS)`).
pub(super) fn server_facts(config: &Config, id: &Identity, containment: &Containment) -> Facts {
    let kernel = toolsrv_sandbox::landlock_abi();
    Facts {
        source: Source::Server,
        landlock_abi: config.landlock_abi_limit.map_or(kernel, |l| kernel.min(l)),
        seccomp: toolsrv_sandbox::seccomp_available(),
        containment: containment.enforcement(),
        identity: id.mode(),
        ids: (id.uid(), id.gid()),
        identity_reason: id.reason().map(str::to_string),
        tool_ids: id
            .tools()
            .map(|t| toolsrv_sandbox::ToolIds::of(t, &config.cwd)),
        filesystem_view: match &config.filesystem {
            View::MountNamespace => Ok(()),
            View::LandlockOnly(why) => Err(why.clone()),
        },
        network: match &config.network {
            toolsrv_sandbox::NetworkMechanism::Namespace => Ok(()),
            toolsrv_sandbox::NetworkMechanism::Fallback(why) => Err(why.clone()),
        },
        unconfined: config.yolo,
        // Set once the watch is made (after the watchdog).
        attribution: toolsrv_watch::Mechanism {
            name: "none",
            detail: "not set up yet".to_string(),
        }
        .into(),
    }
}

/// Fork the watchdog (while single-threaded). In a PID namespace per run, it
/// records each run's first process beside the socket, and kills what a dead
/// server left there; not while a server answers on the socket (its runs are
/// alive, and binding will fail). A socket passed by systemd is ours alone.
/// Where it cannot start, the server runs without one and says so.
pub(super) fn start_watchdog(
    config: &Config,
    containment: &Containment,
    activated: bool,
) -> Option<Arc<Watchdog>> {
    let first_processes = matches!(containment.mechanism(), Mechanism::PidNamespace { .. });
    let record = (first_processes && (activated || !socket_answers(&config.listen)))
        .then(|| crate::leaders::record_path(&config.listen));
    match Watchdog::start(
        containment.instance_dirs(),
        first_processes,
        record.as_deref(),
    ) {
        Ok(w) => {
            if w.survivors_killed() > 0 {
                tracing::warn!(target: LOG_TARGET,
                    killed = w.survivors_killed(),
                    "killed the runs a dead server on this socket left"
                );
            }
            Some(Arc::new(w))
        }
        Err(e) => {
            tracing::error!(target: LOG_TARGET, error = %e, "cannot start the watchdog process; tools may outlive a killed server");
            None
        }
    }
}

/// Whether a server listens on the socket `path` now.
fn socket_answers(path: &Path) -> bool {
    std::os::unix::net::UnixStream::connect(path).is_ok()
}
