//! What the server learns of creations and where it puts what must not stay
//! ([`Watch`], `Server::watch`): the tools PID namespace every confined run
//! is born in, the fanotify [`Watcher`] read inside it, and the
//! [`Quarantine`] in the server's state (`<socket>.state/quarantine`).
//! The policy (what to watch, what to move) is built on these; see
//! docs/watch.md.
//!
//! A process the server starts that is not a confined tool (`git`, a
//! helper) from a thread that may have joined the namespace (any runtime
//! worker that spawned a confined tool) must be started inside
//! `toolsrv_watch::outside_tools_namespace`, or it is born in the
//! namespace and its changes are taken for a tool's.
//!
//! The tools PID namespace is made where its reader's events are exactly
//! attributed: a privileged server (root) whose runs are not PID namespaces
//! of their own (the kernel refuses `CLONE_NEWPID` to a thread whose children
//! go to another namespace), unless `TOOLSRV_TOOLS_PIDNS=off`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use toolsrv_sandbox::ContainMechanism as Containment;
use toolsrv_watch::{Mechanism, Quarantine, ToolsPidNs, Watcher};

/// The server's watch: what a policy acting on creations needs.
pub(crate) struct Watch {
    tools_ns: Option<ToolsPidNs>,
    watcher: Option<Arc<Watcher>>,
    quarantine: Option<Quarantine>,
    mechanism: Mechanism,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("mechanism", &self.mechanism.name)
            .field("tools_ns", &self.tools_ns)
            .finish()
    }
}

/// `<socket>.state`: the server's own state beside its socket (one of the
/// files hidden from every tool).
pub(crate) fn state_dir(listen: &Path) -> PathBuf {
    toolsrv_base::Sibling::State.of(listen)
}

impl Watch {
    /// Nothing: no namespace, no watcher, no quarantine (in-process tests).
    #[cfg(test)]
    pub(crate) fn none() -> Watch {
        Watch {
            tools_ns: None,
            watcher: None,
            quarantine: None,
            mechanism: toolsrv_watch::describe(false, false, true),
        }
    }

    /// Sets it up at startup (after the watchdog is forked): the namespace
    /// where it attributes exactly, the group, the quarantine in `state`.
    /// Failures are logged and leave that part out.
    pub(crate) fn start(containment: Containment, force: Option<&str>, state: &Path) -> Watch {
        let off = force.is_some_and(|v| v.eq_ignore_ascii_case("off"));
        let per_run = matches!(containment, Containment::PidNamespace { .. });
        let mut mechanism = toolsrv_watch::probe(per_run, off);
        let tools_ns = (mechanism.name == "tools-pid-namespace")
            .then(|| {
                ToolsPidNs::start()
                    .map_err(|e| {
                        tracing::error!(error = %e, "cannot make the tools PID namespace");
                        mechanism = Mechanism {
                            name: "unknown",
                            detail: format!("the tools PID namespace cannot be made ({e}): creations are seen, but whether a tool made one is not known"),
                        };
                    })
                    .ok()
            })
            .flatten();
        let watcher = (mechanism.name != "none")
            .then(|| {
                Watcher::new(tools_ns.as_ref())
                    .map(Arc::new)
                    .map_err(|e| tracing::warn!(error = %e, "cannot make the fanotify group"))
                    .ok()
            })
            .flatten();
        let quarantine = Quarantine::new(state)
            .map_err(|e| {
                tracing::warn!(state = %state.display(), error = %e, "cannot make the quarantine directory")
            })
            .ok();
        Watch {
            tools_ns,
            watcher,
            quarantine,
            mechanism,
        }
    }

    /// The namespace confined runs are born in (`None`: they stay in the
    /// server's own).
    pub(crate) fn tools_ns(&self) -> Option<&ToolsPidNs> {
        self.tools_ns.as_ref()
    }

    /// The fanotify group (marks and events).
    #[allow(dead_code)] // The policy of issue 34 is its user.
    pub(crate) fn watcher(&self) -> Option<&Arc<Watcher>> {
        self.watcher.as_ref()
    }

    /// Where what a tool must not leave behind goes.
    #[allow(dead_code)] // The policy of issue 34 is its user.
    pub(crate) fn quarantine(&self) -> Option<&Quarantine> {
        self.quarantine.as_ref()
    }

    /// How creations are attributed here.
    pub(crate) fn mechanism(&self) -> &Mechanism {
        &self.mechanism
    }

    /// At shutdown: the namespace's init is killed, and with it whatever of
    /// a run is left in it.
    pub(crate) fn stop(&self, limit: Duration) {
        if let Some(ns) = &self.tools_ns {
            if !ns.stop(limit) {
                tracing::warn!("the tools PID namespace's init was still alive at shutdown");
            }
        }
    }

    /// Whether `pid` (the server's view) is the namespace's init.
    pub(crate) fn is_reader(&self, pid: i32) -> bool {
        self.tools_ns
            .as_ref()
            .is_some_and(|ns| ns.reader_pid() == Some(pid))
    }
}
