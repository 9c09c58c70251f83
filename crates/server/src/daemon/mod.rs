//! [`Daemon`]: the daemon's one entry point, in two steps.
//!
//! [`Daemon::prepare`] takes every start-up step that may fail before the
//! socket is bound, in an order that matters (see docs/lifecycle.md):
//! while the process is still single-threaded it reads and wipes what the
//! environment passed ([`environment`]), raises the descriptor limit, tunes
//! the allocator, enters the server's identity, sets up the containment,
//! probes the filesystem view, forks the watchdog and becomes the subreaper
//! ([`host`]); then it builds the runtime ([`runtime`]) and, inside it,
//! installs the signal handlers ([`signals`]), opens the policy and binds
//! the socket ([`listen`]). [`Daemon::serve`] runs until stopped and cleans
//! up.

mod environment;
mod host;
mod listen;
mod runtime;
mod signals;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use toolsrv_sandbox::Containment;
use toolsrv_sandbox::PolicyError;
use toolsrv_sandbox::{Identity, IdentityError};

use crate::config::Config;
use crate::server::Server;
use crate::socket::{Bound, SocketError};

/// The target of the daemon's own log lines (what the log shows and
/// `RUST_LOG` filters): the `serve` command's, as they are its lines.
const LOG_TARGET: &str = "toolsrv::serve";

/// Why the daemon could not start. Each says the value and the reason; the
/// binary prints it (with its sources) and exits 1.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The server's own user namespace was entered but cannot be set up.
    #[error("{0}")]
    Identity(IdentityError),
    /// The async runtime cannot be built.
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    /// A signal handler cannot be installed.
    #[error("cannot install the {signal} handler")]
    Signal {
        /// `SIGINT` or `SIGTERM`.
        signal: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The policy file cannot be read or is malformed.
    #[error(transparent)]
    Policy(PolicyError),
    /// The socket cannot be bound or taken over.
    #[error(transparent)]
    Socket(SocketError),
    /// No filesystem view here (the reason), and the policy asks for one.
    #[error(
        "no filesystem view can be made on this host ({0}) and the policy says best_effort: false"
    )]
    NoView(String),
    /// Nothing contains a run here, and the policy asks for it.
    #[error("no mechanism can contain a run on this host (no writable cgroup, no PID namespace) and the policy says best_effort: false")]
    NoContainment,
    /// The server's state cannot be made (the built-in tools cannot be written).
    #[error("cannot start the server")]
    Server(#[source] std::io::Error),
}

/// A daemon whose socket is bound: [`Daemon::serve`] serves it.
pub struct Daemon {
    runtime: tokio::runtime::Runtime,
    server: Arc<Server>,
    bound: Bound,
    signals: signals::Signals,
}

impl Daemon {
    /// Everything before serving: the steps that may fail, up to the bound
    /// socket and the `toolsrv serving` log line. Logging must be set up
    /// before (the steps log what they find).
    ///
    /// # Safety
    ///
    /// The process must be single-threaded (call it from `main`, before any
    /// thread or runtime exists): it edits the environment, may enter a new
    /// user namespace and forks the watchdog, whose child must not inherit a
    /// lock another thread holds.
    pub unsafe fn prepare(mut config: Config) -> Result<Daemon, DaemonError> {
        // Safety: single-threaded (this function's own precondition).
        let inherited = unsafe { environment::Inherited::take() };
        host::fit_descriptor_limit(&mut config);
        crate::sys::map_large_allocations();
        // A server that is not root enters its own user namespace here, so
        // that its tools keep its uid and gid and the namespaces below need
        // no user namespace per run.
        // A root server makes its tools' user namespace here (a helper child).
        let mut identity = Identity::establish(inherited.forces.userns.as_deref())
            .map_err(DaemonError::Identity)?;
        // Before any thread exists: make this server's groups (and remove
        // those of dead servers), fork the watchdog that tears them down if
        // the server dies, and become the subreaper of everything our tools
        // start.
        let containment = Arc::new(Containment::start(inherited.forces.containment.as_deref()));
        config.filesystem =
            host::filesystem_mechanism(inherited.forces.view.as_deref(), &containment);
        host::settle_tools_identity(&mut identity, &config.filesystem);
        // A thread that ends before this function goes on: still
        // single-threaded after it.
        config.network =
            toolsrv_sandbox::NetworkMechanism::choose(inherited.forces.network.as_deref());
        config.facts = Some(host::server_facts(&config, &identity, &containment));
        config.presence = true;
        let watchdog = host::start_watchdog(&config, &containment, inherited.activated);
        if let Err(e) = crate::reaper::become_subreaper() {
            tracing::error!(target: LOG_TARGET, error = %e, "cannot become a child subreaper");
        }
        // After the watchdog (which must not hold the reader's socket): the
        // tools PID namespace, its reader and the fanotify group, the
        // quarantine.
        let watch = crate::watch::Watch::start(
            containment.mechanism(),
            inherited.forces.tools_pidns.as_deref(),
            &crate::watch::state_dir(&config.listen),
        );
        if let Some(f) = &mut config.facts {
            f.attribution = watch.mechanism().clone().into();
        }
        let runtime = runtime::build()?;
        let (server, bound, signals) = runtime.block_on(listen::open(
            config,
            watchdog,
            containment,
            identity,
            watch,
            inherited.activated,
        ))?;
        Ok(Daemon {
            runtime,
            server,
            bound,
            signals,
        })
    }

    /// Serve until SIGINT, SIGTERM or the idle timeout; then close the
    /// socket, stop every process and log `toolsrv stopped`. A second signal
    /// exits at once (status 1).
    pub fn serve(self) {
        let Daemon {
            runtime,
            server,
            bound,
            signals,
        } = self;
        runtime.block_on(async move {
            let shutdown = CancellationToken::new();
            tokio::spawn(signals.watch(shutdown.clone()));
            crate::lifecycle::run(server, bound, shutdown).await;
            tracing::info!(target: LOG_TARGET, "toolsrv stopped");
        });
    }
}
