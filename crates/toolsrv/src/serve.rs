//! `toolsrv serve`: resolve the configuration, set up logging and the socket,
//! serve until SIGINT/SIGTERM, clean up.

use crate::logwriter::{say, LogWriter};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use toolsrv_sandbox::contain::{Containment, Mechanism};
use toolsrv_sandbox::doctor::{Facts, Source};
use toolsrv_sandbox::identity::Identity;

use anyhow::{anyhow, bail, Context, Result};
use tokio_util::sync::CancellationToken;
use toolsrv_sandbox::policy::PolicyStore;
use toolsrv_server::{socket, ServeConfig, Server};

use crate::cli::ServeArgs;
use crate::paths::{config_dir, default_tools_dir, expand_tilde};

/// Wipe every `TOOLSRV_*` variable (the client's secret, a token) from this
/// process's environment, including the original bytes that
/// `/proc/<pid>/environ` shows, so no tool can read them there even if a policy
/// grants `/proc`. Call while single-threaded.
fn scrub_environment() {
    extern "C" {
        static mut environ: *const *mut libc::c_char;
    }
    let names: Vec<String> = std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .filter(|k| k.starts_with("TOOLSRV_"))
        .collect();
    if names.is_empty() {
        return;
    }
    // Safety: single-threaded (before the runtime and the watchdog exist); we
    // only overwrite bytes inside the NUL-terminated strings the environment
    // array points to, never past their terminators.
    unsafe {
        let mut p = environ;
        while !p.is_null() && !(*p).is_null() {
            let entry = *p;
            let len = libc::strlen(entry);
            let bytes = std::slice::from_raw_parts_mut(entry.cast::<u8>(), len);
            if bytes.starts_with(b"TOOLSRV_") {
                if let Some(eq) = bytes.iter().position(|&b| b == b'=') {
                    bytes[eq + 1..].fill(b'x');
                }
            }
            p = p.add(1);
        }
    }
    for n in names {
        // Safety: single-threaded, see above.
        unsafe { std::env::remove_var(n) };
    }
}

/// Run the daemon; configuration errors found at startup exit 1.
pub fn main(args: ServeArgs, secret_file: Option<PathBuf>) -> ExitCode {
    let force_containment = std::env::var(toolsrv_sandbox::contain::FORCE_ENV).ok();
    let force_userns = std::env::var(toolsrv_sandbox::identity::FORCE_ENV).ok();
    let force_view = std::env::var(toolsrv_sandbox::view::FORCE_ENV).ok();
    let activated = take_socket_activation();
    scrub_environment();
    let mut config = match resolve(args, secret_file) {
        Ok(c) => c,
        Err(e) => {
            say!("toolsrv: {e:#}");
            return ExitCode::from(1);
        }
    };
    if let Err(e) = init_logging(&config) {
        say!("toolsrv: {e:#}");
        return ExitCode::from(1);
    }
    fit_descriptor_limit(&mut config);
    map_large_allocations();
    // Still single-threaded: a server that is not root enters its own user
    // namespace here, so that its tools keep its uid and gid and the
    // namespaces below need no user namespace per run.
    let identity = match Identity::establish(force_userns.as_deref()) {
        Ok(id) => id,
        Err(e) => {
            if config.log.is_some() {
                tracing::error!("{e}");
            }
            say!("toolsrv: {e}");
            return ExitCode::from(1);
        }
    };
    // Before any thread exists: make this server's groups (and remove those of
    // dead servers), fork the watchdog that tears them down if the server dies,
    // and become the subreaper of everything our tools start.
    let containment = Arc::new(Containment::start(force_containment.as_deref()));
    config.filesystem = filesystem_mechanism(force_view.as_deref(), &containment);
    config.facts = Some(server_facts(&config, &identity, &containment));
    // In a PID namespace per run, the watchdog records each run's first
    // process beside the socket, and kills what a dead server left there;
    // not while a server answers on the socket (its runs are alive, and
    // binding will fail). A socket passed by systemd is ours alone.
    let first_processes = matches!(containment.mechanism(), Mechanism::PidNamespace { .. });
    let record = (first_processes && (activated || !socket_answers(&config.listen)))
        .then(|| toolsrv_server::leaders::record_path(&config.listen));
    let watchdog = match toolsrv_server::watchdog::Watchdog::start(
        containment.instance_dirs(),
        first_processes,
        record.as_deref(),
    ) {
        Ok(w) => {
            if w.survivors_killed() > 0 {
                tracing::warn!(
                    killed = w.survivors_killed(),
                    "killed the runs a dead server on this socket left"
                );
            }
            Some(Arc::new(w))
        }
        Err(e) => {
            tracing::error!(error = %e, "cannot start the watchdog process; tools may outlive a killed server");
            None
        }
    };
    if let Err(e) = toolsrv_server::reaper::become_subreaper() {
        tracing::error!(error = %e, "cannot become a child subreaper");
    }
    let workers = worker_threads();
    tracing::debug!(workers, "runtime worker threads");
    let mut builder = if workers == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(workers);
        b
    };
    let rt = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            say!("toolsrv: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let logs_to_file = config.log.is_some();
    match rt.block_on(run(config, watchdog, containment, identity, activated)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Said once: on stderr, and in the log file when there is one.
            if logs_to_file {
                tracing::error!("{e:#}");
            }
            say!("toolsrv: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// Whether a server listens on the socket `path` now.
fn socket_answers(path: &std::path::Path) -> bool {
    std::os::unix::net::UnixStream::connect(path).is_ok()
}

/// How many runtime worker threads to run: `TOKIO_WORKER_THREADS` when set
/// to a positive number, else half the CPUs (at least one). One worker means
/// tokio's `current_thread` runtime, on the main thread: the same single
/// thread of work without the multi-thread scheduler's bookkeeping (about 5 %
/// less server CPU per call, docs/benchmarks.md). Tools are spawned from that
/// thread, which lives as long as the server (their parent-death signal is
/// tied to it).
///
/// The server's share of a call is small beside the tool's, and the tools
/// need the CPUs too: on 2 CPUs one worker made about 20 % less server CPU
/// per call than two (fewer cross-thread wake-ups) and more calls per second
/// (docs/benchmarks.md).
fn worker_threads() -> usize {
    if let Some(n) = std::env::var("TOKIO_WORKER_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
    {
        return n;
    }
    std::thread::available_parallelism()
        .map(|n| (n.get() / 2).max(1))
        .unwrap_or(1)
}

/// Have the allocator map blocks of 2 MiB and more on their own, so that the
/// memory of a dismissed process's output (two such blocks) goes back to the
/// system when it is freed. glibc's default threshold rises with every such
/// block freed, after which they come from the heap, whose freed pages it
/// keeps: the server's memory then stays at its high-water mark instead of
/// following the retention budget (CONTRACT §12). Call while single-threaded.
fn map_large_allocations() {
    #[cfg(target_env = "gnu")]
    // Safety: mallopt only changes a tuning parameter of the allocator.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 2 << 20);
    }
}

/// Raise the descriptor limit so that `--max-connections` fits (CONTRACT §12);
/// where the hard limit does not allow it, serve fewer connections and say so.
fn fit_descriptor_limit(config: &mut ServeConfig) {
    use toolsrv_server::fdlimit::{raise_nofile, HEADROOM};
    // The tools' own connections have a budget beside --max-connections.
    let tools = toolsrv_server::DESCENDANT_CONNECTIONS as u64;
    let want = config.max_connections as u64 + tools + HEADROOM;
    match raise_nofile(want) {
        Ok(soft) if soft < want => {
            let fit = usize::try_from(soft.saturating_sub(HEADROOM + tools))
                .unwrap_or(usize::MAX)
                .max(1);
            tracing::warn!(
                descriptor_limit = soft,
                max_connections = config.max_connections,
                serving = fit,
                "the descriptor limit cannot be raised enough for --max-connections; serving fewer connections"
            );
            config.max_connections = fit;
        }
        Ok(soft) => tracing::debug!(descriptor_limit = soft, "descriptor limit"),
        Err(e) => tracing::warn!(error = %e, "cannot raise the descriptor limit"),
    }
}

/// Turn flags into a validated [`ServeConfig`].
fn resolve(a: ServeArgs, secret_file: Option<PathBuf>) -> Result<ServeConfig> {
    let cwd = match a.cwd {
        Some(p) => expand_tilde(&p),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let cwd = std::fs::canonicalize(&cwd).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => anyhow!("--cwd {}: no such directory", cwd.display()),
        _ => anyhow!("--cwd {}: {e}", cwd.display()),
    })?;
    if !cwd.is_dir() {
        bail!("--cwd {}: not a directory", cwd.display());
    }
    let listen = expand_tilde(&a.listen);
    if listen.as_os_str().is_empty() {
        bail!("--listen: empty socket path");
    }
    let ollie = a.ollie.map(|p| expand_tilde(&p)).or_else(|| {
        std::env::var_os("NAMESPACE")
            .filter(|v| !v.is_empty())
            .map(|ns| PathBuf::from(ns).join("ollie"))
    });
    let mut c = ServeConfig::new(listen, cwd);
    c.yolo = a.yolo;
    c.no_auth = a.no_auth;
    c.idle_timeout = a.idle_timeout;
    c.idle_grace = a.idle_grace;
    // A path the user typed must exist; only the default locations fall back
    // to the built-in tools and policy.
    c.tools_dir = match a.tools.map(|p| expand_tilde(&p)) {
        Some(p) if !p.is_dir() => {
            bail!(
                "--tools {}: {}",
                p.display(),
                if p.exists() {
                    "not a directory"
                } else {
                    "no such directory (leave --tools out to serve the built-in tools)"
                }
            )
        }
        Some(p) => p,
        None => default_tools_dir(),
    };
    c.sandbox = match a.sandbox.map(|p| expand_tilde(&p)) {
        Some(p) if !p.is_file() => {
            bail!(
                "--sandbox {}: {}",
                p.display(),
                if p.exists() {
                    "not a file"
                } else {
                    "no such file (leave --sandbox out to use the built-in policy; `toolsrv init` writes it out)"
                }
            )
        }
        Some(p) => p,
        None => config_dir().join("sandbox.yaml"),
    };
    c.ollie = ollie;
    // Absolute: it is one of the server's protected files.
    c.log = a
        .log
        .map(|p| expand_tilde(&p))
        .map(|p| std::path::absolute(&p).unwrap_or(p));
    c.default_timeout = a.default_timeout;
    c.gc_age = a.gc_age;
    c.bypass_timeout = a.bypass_timeout;
    c.max_output = a.max_output;
    c.landlock_abi_limit = a.landlock_abi_limit;
    c.builtin_cache = crate::paths::cache_dir();
    c.max_connections = a.max_connections as usize;
    c.auth_timeout = a.auth_timeout;
    c.retention = toolsrv_server::procs::Retention {
        max_output_bytes: a.max_finished_output,
        max_finished: a.max_finished,
        max_background_per_agent: a.max_background as usize,
    };
    if let Some(f) = secret_file {
        if a.no_auth {
            bail!("--secret-file and --no-auth cannot be used together");
        }
        let f = expand_tilde(&f);
        // Safety: getuid has no preconditions and cannot fail.
        let uid = unsafe { libc::getuid() };
        c.pinned_secret = Some(toolsrv_server::secret_file::load(&f, uid)?);
        c.secret_file = Some(std::path::absolute(&f).unwrap_or(f));
    }
    Ok(c)
}

fn init_logging(c: &ServeConfig) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match &c.log {
        Some(path) => {
            // Created 0600: the log names sockets, paths and commands of
            // every run; an existing file keeps the mode its owner gave it.
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(path)
                .with_context(|| format!("--log {}: cannot open", path.display()))?;
            builder
                .with_ansi(false)
                .with_writer(LogWriter::File(Arc::new(file)))
                .init();
        }
        None => {
            use std::io::IsTerminal;
            // Colours only for a person reading a terminal, never in a pipe or a file.
            builder
                .with_ansi(std::io::stderr().is_terminal())
                .with_writer(LogWriter::Stderr)
                .init()
        }
    }
    Ok(())
}

async fn run(
    config: ServeConfig,
    watchdog: Option<Arc<toolsrv_server::watchdog::Watchdog>>,
    containment: Arc<Containment>,
    identity: Identity,
    activated: bool,
) -> Result<()> {
    // Handlers first: a signal that arrives once the socket exists must already
    // take the clean shutdown path.
    let signals = Signals::install()?;
    let policy = PolicyStore::open(&config.sandbox)?;
    let bound = if activated {
        socket::inherited(&config.listen)?
    } else {
        socket::bind(&config.listen)?
    };
    tracing::info!(
        socket = %config.listen.display(),
        socket_activated = activated,
        cwd = %config.cwd.display(),
        tools = %config.tools_dir.display(),
        policy = %config.sandbox.display(),
        auth = if config.no_auth { "off" } else if config.pinned_secret.is_some() { "pinned secret (--secret-file)" } else { "secret" },
        max_connections = config.max_connections,
        yolo = config.yolo,
        landlock_abi = toolsrv_sandbox::confine::landlock_abi(),
        "toolsrv serving"
    );
    log_containment(&containment);
    log_identity(&identity);
    if !config.yolo {
        match &config.filesystem {
            toolsrv_sandbox::view::Mechanism::MountNamespace => {
                tracing::info!(how = %config.filesystem.describe(), "filesystem protection")
            }
            toolsrv_sandbox::view::Mechanism::LandlockOnly(_) => {
                tracing::warn!(how = %config.filesystem.describe(), "filesystem protection")
            }
        }
        if !config.filesystem.is_view() && !policy.current().general.best_effort {
            containment.shutdown(std::time::Duration::from_secs(1));
            bail!(
                "no filesystem view can be made on this host ({}) and the policy says best_effort: false",
                config.filesystem.describe()
            );
        }
    }
    if !containment.mechanism().contains() && !policy.current().general.best_effort {
        containment.shutdown(std::time::Duration::from_secs(1));
        bail!(
            "no mechanism can contain a run on this host (no writable cgroup, no PID namespace) and the policy says best_effort: false"
        );
    }
    if config.yolo {
        tracing::warn!("--yolo: tools run WITHOUT the Landlock sandbox; validation still applies");
    }
    if config.no_auth {
        tracing::warn!(
            "authentication is off (--no-auth): any local client of this uid can run tools"
        );
    }
    let server =
        Server::new(config, policy, watchdog, containment).context("cannot start the server")?;
    let shutdown = CancellationToken::new();
    tokio::spawn(signals.watch(shutdown.clone()));
    toolsrv_server::run(server, bound, shutdown).await;
    tracing::info!("toolsrv stopped");
    Ok(())
}

/// Whether a service manager passed the listening socket (systemd socket
/// activation: `LISTEN_PID` is this process and `LISTEN_FDS` at least 1; the
/// socket is descriptor 3). The variables are removed, as the protocol asks,
/// so tools never see them. Called while the process is single-threaded.
fn take_socket_activation() -> bool {
    let pid_ok = std::env::var("LISTEN_PID")
        .ok()
        .and_then(|p| p.trim().parse::<u32>().ok())
        == Some(std::process::id());
    let fds = std::env::var("LISTEN_FDS")
        .ok()
        .and_then(|n| n.trim().parse::<u32>().ok())
        .unwrap_or(0);
    for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] {
        // Safety: single-threaded (before the runtime and the watchdog exist).
        unsafe { std::env::remove_var(name) };
    }
    pid_ok && fds >= 1
}

/// How the filesystem is protected here: the prepared view, unless
/// `TOOLSRV_VIEW=off` forces the fallback, the host cannot make a mount
/// namespace, or runs enter their own user namespace (an unprivileged
/// server without one of its own), whose children cannot join a namespace
/// the server owns.
fn filesystem_mechanism(
    force: Option<&str>,
    containment: &Containment,
) -> toolsrv_sandbox::view::Mechanism {
    use toolsrv_sandbox::view::Mechanism as View;
    let probed = View::probe(force);
    if probed.is_view() && containment.mechanism() == (Mechanism::PidNamespace { user: true }) {
        return View::LandlockOnly(
            "each run gets its own user namespace, from which the server's mount namespaces cannot be entered"
                .to_string(),
        );
    }
    probed
}

/// Says at startup what contains a run here and how each limit is enforced;
/// loudly when nothing does.
fn log_containment(c: &Containment) {
    for note in c.notes() {
        tracing::info!(note = %note, "containment");
    }
    match c.mechanism() {
        Mechanism::None => tracing::warn!(
            "no mechanism contains a run here: a tool that calls setsid or daemonizes outlives its run; {}",
            c.summary()
        ),
        m => tracing::info!(mechanism = ?m, how = %c.summary(), "containment"),
    }
}

/// What this server confines its tools with (its `doctor` file): the
/// filesystem view is probed with a throwaway thread (`unshare(CLONE_NEWNS)`).
fn server_facts(config: &ServeConfig, id: &Identity, containment: &Containment) -> Facts {
    let kernel = toolsrv_sandbox::confine::landlock_abi();
    Facts {
        source: Source::Server,
        landlock_abi: config.landlock_abi_limit.map_or(kernel, |l| kernel.min(l)),
        seccomp: toolsrv_sandbox::doctor::seccomp_available(),
        containment: containment.enforcement(),
        identity: id.mode(),
        ids: (id.uid(), id.gid()),
        identity_reason: id.reason().map(str::to_string),
        filesystem_view: match &config.filesystem {
            toolsrv_sandbox::view::Mechanism::MountNamespace => Ok(()),
            toolsrv_sandbox::view::Mechanism::LandlockOnly(why) => Err(why.clone()),
        },
        unconfined: config.yolo,
    }
}

/// Says at startup which identity tools run under and why.
fn log_identity(id: &Identity) {
    tracing::info!(mode = %id.mode(), uid = id.uid(), gid = id.gid(), how = %id.summary(), "identity");
}

/// SIGINT and SIGTERM.
struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            int: signal(SignalKind::interrupt()).context("cannot install the SIGINT handler")?,
            term: signal(SignalKind::terminate()).context("cannot install the SIGTERM handler")?,
        })
    }

    /// The first signal starts the shutdown; a second one exits at once.
    async fn watch(mut self, shutdown: CancellationToken) {
        tokio::select! { _ = self.int.recv() => {}, _ = self.term.recv() => {} }
        tracing::info!("signal received; shutting down");
        shutdown.cancel();
        tokio::select! { _ = self.int.recv() => {}, _ = self.term.recv() => {} }
        tracing::warn!("second signal: exiting now");
        std::process::exit(1);
    }
}
