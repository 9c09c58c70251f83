//! [`Server`]: the state behind the namespace, and how a request becomes a
//! tracked process (the accept loop is in `accept.rs`).

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use tokio_util::sync::CancellationToken;
use toolsrv_vfs::{Auth, NoAuth};

use toolsrv_base::Sibling;
use toolsrv_metadata::{Catalog, Host};

use crate::auth::{SecretAuth, SecretAuthPolicy};
use crate::bypass::Broker;
use crate::config::Config;
use crate::exec::{Executor, Refused, RunPlan, Served};
use crate::procs::{ProcSpec, ProcTable};
use crate::registry::Registry;
use toolsrv_protocol::{ProcState, ToolResult};
use toolsrv_sandbox::PolicyStore;

/// The server's own files, which no sandbox rule may reach (docs/policy-format.md, "Protected paths").
/// Hidden: the socket (a tool that connects to it approves its own bypass;
/// one that replaces it collects the next client's secret), `<socket>.secret`,
/// `<socket>.mcp-token` (the MCP bridge's HTTP bearer token, docs/mcp.md),
/// `<socket>.runs` (the watchdog's record of PID-namespace runs), the log
/// file and the `--secret-file`. Read-only: the policy file and its profiles directory
/// (a tool that writes them widens its next sandbox), the tools directory as
/// configured and as served (a tool that writes there changes what the next
/// call runs), the built-in tools cache, and the server's own executable.
/// Hidden too, and read again at every rescan: what the live servers and
/// bridges of the per-user registry hide (`registry`).
fn server_files(
    config: &Config,
    tools_dir: &std::path::Path,
    registry: Option<std::path::PathBuf>,
) -> toolsrv_sandbox::ServerFiles {
    let profiles = config
        .sandbox
        .parent()
        .unwrap_or_else(|| std::path::Path::new(""))
        .join("sandbox");
    let hidden = [
        config.listen.clone(),
        Sibling::Secret.of(&config.listen),
        Sibling::McpToken.of(&config.listen),
        crate::leaders::record_path(&config.listen),
        crate::watch::state_dir(&config.listen),
    ]
    .into_iter()
    .chain(config.secret_file.clone())
    .chain(config.log.clone())
    .chain(config.audit.clone())
    .collect();
    // grants.yaml (docs/policy-format.md) joins this list where the server keeps one.
    let shown = vec![config.tools_dir.clone(), tools_dir.to_path_buf()];
    let read_only = [
        config.sandbox.clone(),
        profiles,
        config.tools_dir.clone(),
        tools_dir.to_path_buf(),
    ]
    .into_iter()
    .chain(config.builtin_cache.clone())
    .chain(std::env::current_exe().ok())
    .collect();
    toolsrv_sandbox::ServerFiles {
        hidden,
        read_only,
        shown,
        registry,
    }
}

/// The daemon's state: configuration, authentication, the tool catalog and
/// registry, the executor, the process table and the bypass broker.
pub struct Server {
    /// The validated configuration.
    pub(crate) config: Config,
    /// The secret and token (`None` under `--no-auth`).
    pub(crate) auth: Option<Arc<SecretAuth>>,
    /// Start time, shown as mtime in stat entries.
    pub(crate) started: u32,
    /// Connection numbers for logs.
    pub(crate) next_conn: AtomicU64,
    /// The owner name shown in stat entries.
    pub(crate) user: Arc<str>,
    /// Tool discovery over the tools directory (or the built-in set).
    pub(crate) catalog: Catalog,
    /// Loaded tools per agent.
    pub(crate) registry: Registry,
    /// The executor: policy, validation, spawning.
    pub(crate) executor: Executor,
    /// Every process of this run.
    pub(crate) procs: ProcTable,
    /// Pending bypass requests.
    pub(crate) broker: Broker,
    /// The audit log, if `--audit` names one.
    pub(crate) audit: crate::audit::Audit,
    /// Open connections and when the server was last busy (idle monitor).
    pub(crate) activity: crate::activity::Activity,
    /// What the server confines its tools with (the `doctor` file).
    pub(crate) facts: toolsrv_sandbox::Facts,
    /// Its registry entry and temporary directory, taken away at shutdown.
    pub(crate) presence: crate::presence::Presence,
    /// Where the built-in tools were written when the tools directory does not
    /// exist; removed when the server ends.
    _builtin_dir: Option<tempfile::TempDir>,
}

/// Where the built-in tools are served from: the shared, content-addressed
/// copy under `config.builtin_cache` (nothing left behind per run), else (or
/// when that cannot be used) a temporary directory removed with the server.
fn builtin_tools(
    config: &Config,
) -> std::io::Result<(std::path::PathBuf, Option<tempfile::TempDir>)> {
    if let Some(base) = &config.builtin_cache {
        match toolsrv_metadata::install_builtin(base) {
            Ok(dir) => return Ok((dir, None)),
            Err(e) => tracing::warn!(
                base = %base.display(),
                error = %e,
                "cannot install the built-in tools there; using a temporary copy"
            ),
        }
    }
    let d = tempfile::Builder::new()
        .prefix("toolsrv-builtin-")
        .tempdir()?;
    toolsrv_metadata::write_builtin(d.path())?;
    Ok((d.path().to_path_buf(), Some(d)))
}

impl Server {
    /// A server for `config`. Fails only if the built-in tools cannot be
    /// written out (when the tools directory does not exist).
    pub fn new(
        config: Config,
        policy: PolicyStore,
        watchdog: Option<Arc<crate::watchdog::Watchdog>>,
        containment: Arc<toolsrv_sandbox::Containment>,
        watch: crate::watch::Watch,
    ) -> std::io::Result<Arc<Server>> {
        let (tools_dir, builtin_dir) = if config.tools_dir.is_dir() {
            (config.tools_dir.clone(), None)
        } else {
            let (dir, temp) = builtin_tools(&config)?;
            tracing::info!(
                tools = %config.tools_dir.display(),
                builtin = %dir.display(),
                "tools directory does not exist; serving the built-in tool set"
            );
            (dir, temp)
        };
        let audit =
            crate::audit::Audit::open(config.audit.as_deref()).map_err(std::io::Error::other)?;
        let auth = (!config.no_auth).then(|| match &config.pinned_secret {
            Some(s) => SecretAuth::pinned(s.bytes()),
            None => SecretAuth::new(),
        });
        let started = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as u32)
            .unwrap_or(0);
        let user = std::env::var("USER").unwrap_or_else(|_| "toolsrv".into());
        let facts = config.facts.clone().unwrap_or_else(|| {
            let mut f = toolsrv_sandbox::Facts::host(&toolsrv_sandbox::Forces::default());
            f.source = toolsrv_sandbox::Source::Server;
            f.containment = containment.enforcement();
            f.unconfined = config.yolo;
            f
        });
        let mut executor = Executor::new(
            policy,
            &config.cwd,
            config.landlock_abi_limit,
            watchdog,
            containment,
            Arc::new(watch),
        )?;
        let presence = if config.presence {
            let tmp = executor
                .host
                .own_env
                .get("TMPDIR")
                .map(std::path::PathBuf::from)
                .filter(|p| p.is_absolute())
                .unwrap_or_else(|| std::path::PathBuf::from("/tmp"));
            let own = server_files(&config, &tools_dir, None);
            let p = crate::presence::Presence::start(&config.listen, &own.hidden, &tmp);
            // `{TOOLSRV_TMPDIR}` is this server's own directory (none: empty).
            let dir = p.tmpdir.as_ref().map(|d| d.display().to_string());
            executor.host.own_env.insert(
                toolsrv_sandbox::SERVER_TMPDIR_VAR.to_string(),
                dir.unwrap_or_default(),
            );
            p
        } else {
            crate::presence::Presence::default()
        };
        executor.policies.networks.set(config.network.clone());
        executor
            .policies
            .networks
            .set_reuse(executor.runner.containment.mechanism().contains());
        if let Some(dir) = executor
            .host
            .own_env
            .get(toolsrv_sandbox::SERVER_TMPDIR_VAR)
            .filter(|d| !d.is_empty())
        {
            executor.policies.networks.tls.set_dir(dir.into());
        }
        if !config.yolo {
            // Under --yolo nothing is confined, so nothing is carved (or logged).
            executor.protect(
                &server_files(&config, &tools_dir, presence.registry.clone()),
                &config.cwd,
                &config.filesystem,
            );
        }
        let registry = Registry::new();
        if let Some(path) = executor.policies.store.path() {
            registry.files.watch(path);
        }
        Ok(Arc::new(Server {
            auth,
            started,
            next_conn: AtomicU64::new(1),
            user: user.into(),
            catalog: Catalog::new(tools_dir, Host::current()),
            registry,
            executor,
            activity: crate::activity::Activity::default(),
            procs: ProcTable::new(config.max_output, config.retention),
            broker: Broker::default(),
            audit,
            _builtin_dir: builtin_dir,
            facts,
            presence,
            config,
        }))
    }

    /// What the server learns of creations, and the quarantine: the tools
    /// PID namespace, the fanotify watcher, the quarantine directory
    /// (docs/watch.md).
    #[allow(dead_code)] // The policy of issue 34 is its user.
    pub(crate) fn watch(&self) -> &crate::watch::Watch {
        &self.executor.runner.watch
    }

    /// The token requests must carry (`None` under `--no-auth`). Before any client
    /// authenticated there is none, and nothing can be sent either.
    pub(crate) fn token_required(&self) -> Option<String> {
        self.auth.as_ref().map(|a| a.token().unwrap_or_default())
    }

    /// What a request is prepared against.
    fn served(&self) -> Served<'_> {
        Served {
            token: self.token_required(),
            registry: &self.registry,
            catalog: &self.catalog,
            yolo: self.config.yolo,
            default_timeout: self.config.default_timeout,
        }
    }

    /// Run a synchronous request (`proc/new`) to its end; `cancel` (the fid's
    /// clunk) kills it. Also returns the pid of the process it ran, if any.
    pub(crate) async fn call_tracked(
        self: &Arc<Self>,
        payload: &[u8],
        cancel: CancellationToken,
    ) -> (ToolResult, Option<u64>) {
        let plan = match self.executor.plan(&self.served(), payload).await {
            Ok(p) => Arc::new(p),
            Err(refused) => return (ToolResult::error(refused.to_string()), None),
        };
        let proc =
            match self
                .procs
                .create(spec_of(&plan, false), initial_state(&plan), Some(&cancel))
            {
                Ok(p) => p,
                Err(e) => return (ToolResult::error(e.to_string()), None),
            };
        self.run_request(&proc, &plan).await;
        (plan.result(&proc), Some(proc.pid))
    }

    /// Start a background request (`proc/new.bg`); returns its pid at once (also
    /// for a bypass request, which then waits for approval in the background).
    pub(crate) async fn start_background(self: &Arc<Self>, payload: &[u8]) -> Result<u64, Refused> {
        let plan = Arc::new(self.executor.plan(&self.served(), payload).await?);
        let proc = self
            .procs
            .create(spec_of(&plan, true), initial_state(&plan), None)?;
        let pid = proc.pid;
        let server = self.clone();
        tokio::spawn(async move {
            server.run_request(&proc, &plan).await;
            crate::completion::notify(server.config.ollie.clone(), proc.stat());
        });
        Ok(pid)
    }

    /// Run a created process: through the bypass broker first when it asks for
    /// bypass, then the executor.
    async fn run_request(&self, proc: &Arc<crate::procs::Proc>, plan: &Arc<RunPlan>) {
        if plan.request.bypass
            && !crate::bypass::await_approval(&self.broker, proc, plan, self.config.bypass_timeout)
                .await
        {
            return;
        }
        self.audit.run_start(proc, plan);
        self.executor.run(proc, plan).await;
        self.audit.run_end(proc);
    }

    /// Whether the peer `pid` is a run of this server or of any other live
    /// server of this user (`crate::runs`); unsure counts as a run.
    pub(crate) fn is_run(&self, pid: Option<i32>) -> bool {
        pid.is_none_or(|p| crate::runs::is_run(p, self.presence.registry.as_deref()) != Some(false))
    }

    /// Refuse observers that are tools (runs of this server or of any other
    /// toolsrv server of this user): a tool must not approve a bypass
    /// request, its own or another's, even under `--no-auth`.
    pub(crate) fn check_observer(
        &self,
        conn: &toolsrv_vfs::ConnInfo,
    ) -> Result<(), toolsrv_vfs::Error> {
        let now = self.is_run(conn.peer_pid);
        if conn.peer_is_descendant || now {
            return Err(toolsrv_vfs::Error::permission_denied());
        }
        Ok(())
    }

    /// The authentication hook of every connection.
    pub(crate) fn auth_policy(&self) -> Arc<dyn Auth> {
        match &self.auth {
            Some(a) => Arc::new(SecretAuthPolicy(a.clone())),
            None => Arc::new(NoAuth),
        }
    }
}

/// A bypass request waits for approval; everything else runs at once.
fn initial_state(plan: &RunPlan) -> ProcState {
    if plan.request.bypass {
        ProcState::AwaitingApproval
    } else {
        ProcState::Running
    }
}

/// The fixed facts of a process for a prepared request.
fn spec_of(plan: &RunPlan, background: bool) -> ProcSpec {
    ProcSpec {
        tool: plan.tool.name.clone(),
        agent: plan.request.agent.clone(),
        session: plan.request.session.clone(),
        background,
        command: plan.display.clone(),
        cwd: plan.cwd.clone(),
        sandboxed: plan.confined(),
    }
}
