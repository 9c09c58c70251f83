//! Steps 1–4 of `exec.ExecuteTool`: from a payload to everything needed to spawn,
//! or a refusal whose text becomes the error result.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use toolsrv_metadata::{Catalog, MetaError, OutputMode, Tool, ToolKind};
use toolsrv_protocol::{convert_args, parse_payload, Payload, PayloadError};
use toolsrv_sandbox::{ConfineError, Confinement};
use toolsrv_sandbox::{PathContext, PolicyError};
use toolsrv_sandbox::{WorkDir, WorkDirError};
use toolsrv_validate::{RateLimited, Refusal, ValidateError};

use super::cache::Same;
use super::env::{compose, EnvParts};
use super::Executor;
use crate::registry::{Lookup, Registry};

/// What of the server a request is prepared against.
pub(crate) struct Served<'a> {
    /// The token requests must carry (`None` under `--no-auth`).
    pub(crate) token: Option<String>,
    /// Loaded tools per agent.
    pub(crate) registry: &'a Registry,
    /// Tool discovery, to reload a tool whose file changed.
    pub(crate) catalog: &'a Catalog,
    /// `--yolo`: nothing is confined.
    pub(crate) yolo: bool,
    /// The timeout of a request and tool that name none.
    pub(crate) default_timeout: Duration,
}

/// A request refused before anything ran; the text is the error result's.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refused {
    /// The payload does not parse, or its arguments do not fit the schema.
    #[error(transparent)]
    Payload(#[from] PayloadError),
    /// The payload's token is not the session's.
    #[error("invalid token")]
    InvalidToken,
    /// The agent was refused too often lately.
    #[error(transparent)]
    RateLimited(#[from] RateLimited),
    /// The tool is not loaded for the agent.
    #[error("tool {tool:?} is not loaded for agent {agent:?}")]
    NotLoaded {
        /// The tool name.
        tool: String,
        /// The agent ID.
        agent: String,
    },
    /// The loaded tool's file changed and no longer loads.
    #[error("tool {tool:?} changed since it was loaded and no longer loads: {error} (fix {} and run `toolsrv load {agent} {tool}`)", .file.display())]
    NoLongerLoads {
        /// The tool name.
        tool: String,
        /// The agent ID.
        agent: String,
        /// Its metadata file.
        file: PathBuf,
        /// Why it does not load.
        error: Box<MetaError>,
    },
    /// The tool's metadata cannot make a command of the arguments.
    #[error(transparent)]
    Metadata(#[from] MetaError),
    /// The working directory cannot be used.
    #[error(transparent)]
    WorkDir(#[from] WorkDirError),
    /// The sandbox profile is unknown or broken.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The policy's validation rules do not compile.
    #[error(transparent)]
    Validation(#[from] ValidateError),
    /// Validation refused the command.
    #[error(transparent)]
    Refusal(#[from] Refusal),
    /// The sandbox cannot be prepared.
    #[error("sandbox: {0}")]
    Sandbox(#[source] ConfineError),
    /// The filesystem view cannot be built.
    #[error("sandbox: {0}")]
    View(#[source] toolsrv_sandbox::ViewError),
    /// The request's working directory is a protected path or inside one.
    #[error("working directory {cwd:?} is protected ({path} is {what}): choose another cwd")]
    ProtectedCwd {
        /// The working directory.
        cwd: String,
        /// The protected path it is or lies in.
        path: String,
        /// `hidden` or `read-only`.
        what: &'static str,
    },
    /// The process table has no room for it.
    #[error(transparent)]
    Create(#[from] crate::procs::CreateError),
    /// A string of the request holds a NUL byte.
    #[error("{0} contains a NUL byte")]
    Nul(&'static str),
    /// An environment variable is longer than Linux passes in one string.
    #[error("{what} is {bytes} bytes; Linux passes at most {limit} bytes in one environment variable (its name, \"=\" and value)")]
    VariableTooLarge {
        /// `env.NAME` (the request's) or `the variable NAME`.
        what: String,
        /// Its value's length.
        bytes: usize,
        /// What fits for that name.
        limit: usize,
    },
    /// The argument vector and environment together are more than Linux
    /// passes to a program.
    #[error("the command line and environment of tool {tool:?} are {bytes} bytes together{largest}; Linux passes at most {limit} bytes to a program (a quarter of the stack limit): a tool receives large values in files when its metadata declares the parameters with \"file: true\" (docs/metadata.md, \"Large values\")")]
    TooLarge {
        /// The tool.
        tool: String,
        /// argv and the environment, as the kernel counts them.
        bytes: usize,
        /// ` (content is 1500000 of them)`, or nothing.
        largest: String,
        /// What the kernel accepts.
        limit: usize,
    },
}

/// The bytes `execve` counts for `argv` and `env`: each string with its NUL,
/// and a pointer per string.
fn exec_size(argv: &[String], env: &BTreeMap<String, String>) -> usize {
    let ptr = std::mem::size_of::<usize>();
    argv.iter().map(|a| a.len() + 1 + ptr).sum::<usize>()
        + env
            .iter()
            .map(|(k, v)| k.len() + v.len() + 2 + ptr)
            .sum::<usize>()
}

/// What Linux passes to a program at most (`sysconf(_SC_ARG_MAX)`: a
/// quarter of the stack limit, at least 128 KiB).
fn arg_max() -> usize {
    // Safety: sysconf has no memory arguments.
    let n = unsafe { libc::sysconf(libc::_SC_ARG_MAX) };
    usize::try_from(n).unwrap_or(128 * 1024).max(128 * 1024)
}

/// A request ready to run.
pub(crate) struct Prepared {
    /// The parsed payload.
    pub(crate) payload: Payload,
    /// The loaded tool.
    pub(crate) tool: Arc<Tool>,
    /// The program (absolute).
    pub(crate) program: PathBuf,
    /// argv, `argv[0]` first.
    pub(crate) argv: Vec<String>,
    /// The command line, for display and validation.
    pub(crate) display: String,
    /// The complete environment.
    pub(crate) env: BTreeMap<String, String>,
    /// The `file: true` arguments, passed as the tool's descriptors 3, 4, ….
    pub(crate) files: Vec<toolsrv_metadata::ArgFile>,
    /// The working directory's path when it was opened (for `PWD` and
    /// messages; the child `fchdir`s to [`Prepared::workdir`]).
    pub(crate) cwd: PathBuf,
    /// The working directory, opened once: the child's working directory and
    /// the sandbox's `{CWD}` rule are both this descriptor.
    pub(crate) workdir: Arc<WorkDir>,
    /// The timeout.
    pub(crate) timeout: Duration,
    /// The confinement (`None` under `--yolo`).
    pub(crate) confinement: Option<Arc<Confinement>>,
    /// The filesystem view the child enters (`None`: unconfined, or no view
    /// on this host); [`Prepared::workdir`] was opened inside it.
    pub(crate) view: Option<Arc<toolsrv_sandbox::View>>,
    /// The run's limits: the policy's, tightened by the tool's.
    pub(crate) limits: toolsrv_protocol::Limits,
}

impl Prepared {
    /// How the output is returned.
    pub(crate) fn output_mode(&self) -> OutputMode {
        self.tool.output
    }

    /// The C strings for the spawn.
    pub(crate) fn c_strings(
        &self,
    ) -> Result<(CString, Vec<CString>, Vec<CString>, CString), Refused> {
        let nul = Refused::Nul;
        let program = CString::new(self.program.as_os_str().as_encoded_bytes())
            .map_err(|_| nul("the program path"))?;
        let argv = self
            .argv
            .iter()
            .map(|a| CString::new(a.as_bytes()).map_err(|_| nul("an argument")))
            .collect::<Result<_, _>>()?;
        let envp = self
            .env
            .iter()
            .map(|(k, v)| {
                // Built by hand: `format!` per variable showed in the profile.
                let mut entry = Vec::with_capacity(k.len() + v.len() + 2);
                entry.extend_from_slice(k.as_bytes());
                entry.push(b'=');
                entry.extend_from_slice(v.as_bytes());
                CString::new(entry).map_err(|_| nul("an environment variable"))
            })
            .collect::<Result<_, _>>()?;
        let cwd = CString::new(self.cwd.as_os_str().as_encoded_bytes())
            .map_err(|_| nul("the working directory"))?;
        Ok((program, argv, envp, cwd))
    }

    /// The argument files, each a new anonymous file holding its value.
    pub(crate) fn arg_files(
        &self,
    ) -> Result<Vec<std::os::fd::OwnedFd>, crate::exec::run::RunError> {
        self.files
            .iter()
            .map(|f| {
                let name = CString::new(format!("toolsrv-arg-{}", f.name))
                    .map_err(|_| Refused::Nul("an argument name"))?;
                crate::sys::memfd_with(&name, f.value.as_bytes()).map_err(|source| {
                    crate::exec::run::RunError::ArgFile {
                        name: f.name.clone(),
                        source,
                    }
                })
            })
            .collect()
    }
}

/// The request's working directory, opened once. A sandboxed request's
/// directory is looked up beneath the descriptor of `--cwd` and never leaves
/// it (`openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`), so no symbolic
/// link, however raced, can make it `/`; an unsandboxed one (`--yolo`,
/// bypass) may be anywhere.
fn open_cwd(
    base: &Arc<WorkDir>,
    requested: Option<&str>,
    sandboxed: bool,
) -> Result<Arc<WorkDir>, Refused> {
    let Some(r) = requested else {
        return Ok(base.clone());
    };
    if sandboxed {
        return Ok(Arc::new(base.beneath(r)?));
    }
    Ok(Arc::new(WorkDir::open(&base.path().join(r))?))
}

/// Makes the tool's own files visible in `view` where no bind shows them,
/// when the policy grants them (`advanced.add_exec`): a tool whose program
/// lies outside every rule (`/opt/x/bin/tool`) still starts. Done on a
/// blocking thread (a few mounts), and only when something is missing.
async fn expose(
    view: &Arc<toolsrv_sandbox::View>,
    policy: &toolsrv_sandbox::Policy,
    exec: &[PathBuf],
) -> Result<(), Refused> {
    if !policy.advanced.add_exec {
        return Ok(());
    }
    let files = view.unshown(exec);
    if files.is_empty() {
        return Ok(());
    }
    let v = view.clone();
    match tokio::task::spawn_blocking(move || v.expose(&files)).await {
        Ok(Ok(n)) => {
            tracing::debug!(added = n, "filesystem view: a tool's own files shown in it");
            Ok(())
        }
        Ok(Err(e)) => Err(Refused::View(e)),
        Err(e) => Err(Refused::View(toolsrv_sandbox::ViewError::Step {
            step: "show a tool's files",
            path: PathBuf::new(),
            source: std::io::Error::other(e.to_string()),
        })),
    }
}

/// The files a tool runs (for `advanced.add_exec`/`ldd`).
fn exec_paths(tool: &Tool, program: &Path) -> Vec<PathBuf> {
    let mut v = vec![program.to_path_buf()];
    if let ToolKind::Interpreted { script, .. } = &tool.kind {
        v.push(script.clone());
    }
    v
}

impl Executor {
    /// Parse, authorize, resolve and validate a payload.
    pub(crate) async fn prepare(
        &self,
        served: &Served<'_>,
        bytes: &[u8],
    ) -> Result<Prepared, Refused> {
        let payload = parse_payload(bytes)?;
        if let Some(token) = &served.token {
            if !payload.token_matches(token) {
                return Err(Refused::InvalidToken);
            }
        }
        let agent = payload.agent.as_str();
        self.rate.check(agent, Instant::now())?;
        // Whether the tool's file or the policy file may have changed: one
        // read of the watch instead of a `stat` of each.
        let generation = served.registry.files.generation();
        let tool = self.current_tool(
            served.registry,
            served.catalog,
            agent,
            &payload.tool,
            generation,
        )?;
        let args = convert_args(&payload.args, &tool.input_schema)?;
        let inv = tool.invocation(&args)?;
        let sandboxed = !served.yolo && !payload.bypass;
        let policy = match payload.sandbox.as_deref() {
            None | Some("default") => self.current_policy(generation),
            Some(name) => self.policy.profile(name)?,
        };
        let view = match (&self.views, sandboxed) {
            (Some(views), true) => Some(views.get(&policy).await.map_err(Refused::View)?),
            _ => None,
        };
        // `{CWD}` in the policy is the request's directory: a sandboxed request
        // must not widen its own sandbox by naming `/` or another tree. In a
        // view it is opened inside the view, where the child will be.
        let base = view.as_ref().map_or(&self.base_cwd, |v| v.workspace());
        let workdir = open_cwd(base, payload.cwd.as_deref(), sandboxed)?;
        let cwd = workdir.path().to_path_buf();
        if sandboxed {
            self.check_cwd(&cwd, view.as_deref())?;
        }
        // The request's `env.NAME` values reach the tool like string arguments
        // (a script may `eval "$FOO"`), so they are checked like them (docs/protocol.md, "Requests and results").
        let strings: Vec<&str> = args
            .values()
            .filter_map(|v| v.as_str())
            .chain(payload.env.iter().map(|(_, v)| v.as_str()))
            .collect();
        if let Err(refusal) = self.validator(&policy)?.check(&inv.display, &strings) {
            self.rate.record_refusal(agent, Instant::now());
            tracing::warn!(agent, tool = %payload.tool, rule = %refusal.rule, "command refused by validation");
            return Err(refusal.into());
        }
        // Built only when a cache below misses (it copies toolsrv's environment).
        let ctx = || PathContext {
            cwd: cwd.clone(),
            workdir: Some(workdir.clone()),
            workspace: Some(base.clone()),
            env: self.own_env.clone(),
        };
        let tmpdir = self.tmpdir.get_or((), || ctx().private_tmpdir());
        let confinement = if !sandboxed {
            None
        } else {
            let exec = exec_paths(&tool, &inv.program);
            if let Some(v) = &view {
                expose(v, &policy, &exec).await?;
            }
            // A reloaded policy is a new Arc, so a new key; the working
            // directory is keyed by what was opened, never by its path.
            // The view is part of the key: its copy-on-write caches are
            // its own files, which the rules are made from.
            let in_view = view.as_ref().map_or(0, |v| Arc::as_ptr(v) as usize);
            let key = (
                Same(policy.clone()),
                workdir.id(),
                Same(tool.clone()),
                exec.clone(),
                in_view,
            );
            // A resolution made while paths could not be looked at (out of
            // descriptors) is used once, never kept: it may lack rules.
            let rules = self.rules.get_or_keep(
                key,
                || {
                    Arc::new(match &view {
                        Some(v) => {
                            let mut r = policy.resolve_whole(&ctx(), &exec);
                            r.view_roots = v.roots();
                            r
                        }
                        None => policy.resolve_carving(&ctx(), &exec, &self.carve_now()),
                    })
                },
                |r| !r.degraded,
            );
            Some(self.confinement(&rules)?)
        };
        let env = compose(EnvParts {
            passthrough: policy.env_passthrough(&self.own_env),
            agent,
            session: payload.session.as_deref(),
            cwd: &cwd,
            tmpdir: tmpdir.as_deref(),
            tool: &inv.env,
            request: &payload.env,
        });
        for (k, v) in &env {
            if k.len() + v.len() + 2 > toolsrv_metadata::MAX_ARG_STRLEN {
                let what = if payload.env.iter().any(|(n, _)| n == k) {
                    format!("env.{k}")
                } else {
                    format!("the variable {k}")
                };
                return Err(Refused::VariableTooLarge {
                    what,
                    bytes: v.len(),
                    limit: toolsrv_metadata::MAX_ARG_STRLEN - k.len() - 2,
                });
            }
        }
        let bytes = exec_size(&inv.argv, &env);
        // Linux passes 128 KiB at least: only a larger call asks for the
        // stack limit (a system call).
        if bytes > 128 * 1024 && bytes > arg_max() {
            let largest = args
                .iter()
                .filter(|(name, _)| !inv.files.iter().any(|f| f.name == **name))
                .map(|(name, v)| {
                    (
                        name,
                        v.as_str().map_or_else(|| v.to_string().len(), str::len),
                    )
                })
                .max_by_key(|(_, len)| *len)
                .map(|(name, len)| format!(" ({name} is {len} of them)"))
                .unwrap_or_default();
            return Err(Refused::TooLarge {
                tool: tool.name.clone(),
                bytes,
                largest,
                limit: arg_max(),
            });
        }
        let timeout = payload
            .timeout
            .or(tool.timeout)
            .unwrap_or(served.default_timeout);
        let limits = policy.limits.tightened_by(&tool.limits);
        Ok(Prepared {
            limits,
            program: inv.program,
            argv: inv.argv,
            display: inv.display,
            files: inv.files,
            env,
            cwd,
            workdir,
            timeout,
            confinement,
            view,
            tool,
            payload,
        })
    }

    /// Refuses a working directory that is a protected path or lies in one
    /// (docs/policy-format.md, "Protected paths"): the view's protected set, else the carved paths.
    fn check_cwd(&self, cwd: &Path, view: Option<&toolsrv_sandbox::View>) -> Result<(), Refused> {
        use toolsrv_sandbox::Kind;
        let found = match view {
            Some(v) => v.protected().covering(cwd).map(|e| {
                let what = match e.kind {
                    Kind::Hidden => "hidden",
                    Kind::ReadOnly => "read-only",
                };
                (e.path.clone(), what)
            }),
            None => self
                .carved
                .iter()
                .find(|p| cwd.starts_with(p))
                .map(|p| (p.clone(), "hidden")),
        };
        match found {
            Some((path, what)) => Err(Refused::ProtectedCwd {
                cwd: cwd.display().to_string(),
                path: path.display().to_string(),
                what,
            }),
            None => Ok(()),
        }
    }

    /// The loaded tool `name` of `agent`. A tool whose metadata file changed
    /// since it was loaded is loaded again first (the agent's revision moves,
    /// as for `load`); one that no longer loads is refused with the reason and
    /// the command that loads it again.
    fn current_tool(
        &self,
        registry: &Registry,
        catalog: &Catalog,
        agent: &str,
        name: &str,
        generation: u64,
    ) -> Result<Arc<Tool>, Refused> {
        let not_loaded = || Refused::NotLoaded {
            tool: name.to_string(),
            agent: agent.to_string(),
        };
        match registry.lookup_checked(agent, name, generation) {
            None => Err(not_loaded()),
            Some(Lookup::Current(tool)) => Ok(tool),
            Some(Lookup::Changed(old)) => match catalog.resolve(name) {
                Ok(new) => {
                    let rev = registry.load(agent, new);
                    tracing::info!(agent, tool = name, rev, source = %old.source.display(), "tool file changed since it was loaded; reloaded");
                    registry.lookup(agent, name).ok_or_else(not_loaded)
                }
                Err(error) => Err(Refused::NoLongerLoads {
                    tool: name.to_string(),
                    agent: agent.to_string(),
                    file: old.source.clone(),
                    error: Box::new(error),
                }),
            },
        }
    }
}
