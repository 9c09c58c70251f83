//! The planner, steps 1–4 of `exec.ExecuteTool`: from a payload to a
//! [`RunPlan`], or a refusal whose text becomes the error result.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use toolsrv_metadata::{Catalog, MetaError, Tool, ToolKind};
use toolsrv_protocol::{convert_args, parse_payload, Payload, PayloadError};
use toolsrv_sandbox::ConfineError;
use toolsrv_sandbox::{PathContext, PolicyError};
use toolsrv_sandbox::{WorkDir, WorkDirError};
use toolsrv_validate::{RateLimited, Refusal, ValidateError};

use super::cache::Same;
use super::env::{compose, EnvParts};
use super::plan::{Namespaces, RunPlan, Secrets, Stdio};
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
    /// The run's network (`network.domains`) cannot be had.
    #[error(transparent)]
    Network(#[from] super::network::NetError),
    /// A secret of the policy cannot be had.
    #[error(transparent)]
    Secret(#[from] super::secrets::SecretError),
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

/// Refuses an environment variable longer than Linux passes in one string,
/// and an argv and environment longer together than it passes to a program,
/// naming the largest argument.
fn check_sizes(
    env: &BTreeMap<String, String>,
    secrets: &Secrets,
    payload: &Payload,
    args: &serde_json::Map<String, serde_json::Value>,
    inv: &toolsrv_metadata::Invocation,
    tool: &Tool,
) -> Result<(), Refused> {
    for (k, v) in env {
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
    let ptr = std::mem::size_of::<usize>();
    let bytes = exec_size(&inv.argv, env)
        + secrets
            .0
            .iter()
            .map(|(k, v)| k.len() + v.len() + 2 + ptr)
            .sum::<usize>();
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
    Ok(())
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
    /// Parse, authorize, resolve and validate a payload into a plan.
    pub(crate) async fn plan(&self, served: &Served<'_>, bytes: &[u8]) -> Result<RunPlan, Refused> {
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
        // A policy file a tool just planted goes to quarantine before it can
        // be read (`crate::guard`).
        let guard = self.protection.guard();
        let compiled = self
            .policies
            .for_request(payload.sandbox.as_deref(), generation, || {
                if let Some(g) = guard {
                    g.catch_up();
                }
            })?;
        let policy = &compiled.policy;
        let view = match sandboxed {
            true => self.protection.view_for(policy).await?,
            false => None,
        };
        // `{CWD}` in the policy is the request's directory: a sandboxed request
        // must not widen its own sandbox by naming `/` or another tree. In a
        // view it is opened inside the view, where the child will be.
        let base = self
            .protection
            .workspace(view.as_ref(), &self.host.base_cwd);
        let workdir = open_cwd(base, payload.cwd.as_deref(), sandboxed)?;
        let cwd = workdir.path().to_path_buf();
        if sandboxed {
            self.protection.check_cwd(&cwd, view.as_deref())?;
        }
        // The request's `env.NAME` values reach the tool like string arguments
        // (a script may `eval "$FOO"`), so they are checked like them (docs/protocol.md, "Requests and results").
        let strings: Vec<&str> = args
            .values()
            .filter_map(|v| v.as_str())
            .chain(payload.env.iter().map(|(_, v)| v.as_str()))
            .collect();
        if let Err(refusal) = compiled.validator()?.check(&inv.display, &strings) {
            self.rate.record_refusal(agent, Instant::now());
            tracing::warn!(agent, tool = %payload.tool, rule = %refusal.rule, "command refused by validation");
            return Err(refusal.into());
        }
        // Built only when a cache below misses (it copies toolsrv's environment).
        let ctx = || PathContext {
            cwd: cwd.clone(),
            workdir: Some(workdir.clone()),
            workspace: Some(base.clone()),
            env: self.host.own_env.clone(),
        };
        let tmpdir = self.host.tmpdir.get_or((), || ctx().private_tmpdir());
        // The run's own network, after every check that may refuse the
        // request: a namespace is made only for a run that goes ahead.
        let (net, run_secrets) = match (sandboxed, compiled.network()) {
            (true, Some(supply)) => {
                let run_secrets = match policy.secrets.is_empty() {
                    true => None,
                    false => Some(super::secrets::for_run(
                        policy,
                        &ctx(),
                        &self.host.own_env,
                        &self.policies.networks.tls,
                    )?),
                };
                let net = supply
                    .run_net(policy.general.best_effort, run_secrets.as_ref())
                    .await?;
                (Some(net), run_secrets)
            }
            _ => (None, None),
        };
        let fallback_port = net.as_ref().and_then(|n| n.fallback_port());
        let confinement = if !sandboxed {
            None
        } else {
            let exec = exec_paths(&tool, &inv.program);
            self.protection.expose(view.as_ref(), policy, &exec).await?;
            // The working directory is keyed by what was opened, never by
            // its path. The view is part of the key: its copy-on-write
            // caches are its own files, which the rules are made from.
            let in_view = view.as_ref().map_or(0, |v| Arc::as_ptr(v) as usize);
            let key = (workdir.id(), Same(tool.clone()), exec.clone(), in_view);
            // A resolution made while paths could not be looked at (out of
            // descriptors) is used once, never kept: it may lack rules.
            let rules = compiled.rules.get_or_keep(
                key,
                || {
                    let mut rules = self
                        .protection
                        .resolve(policy, &ctx(), &exec, view.as_deref());
                    if let Some(port) = fallback_port {
                        // The fallback of network.domains: the shared
                        // proxy's port alone, by plain TCP.
                        rules.network.connect_tcp = vec![port];
                        rules.network.stream_only = true;
                    }
                    Arc::new(rules)
                },
                |r| !r.degraded,
            );
            Some(self.policies.confinement(&rules)?)
        };
        let secrets = Secrets(
            net.as_ref()
                .map_or_else(Vec::new, |n| n.variables().to_vec()),
        );
        let env = compose(EnvParts {
            passthrough: policy.env_passthrough(&self.host.own_env),
            agent,
            session: payload.session.as_deref(),
            cwd: &cwd,
            tmpdir: tmpdir.as_deref(),
            tool: &inv.env,
            request: &payload.env,
        });
        let mut env = env;
        // Placeholders and the CA bundle over what came through: a
        // passed-through variable of a secret's name never carries the value.
        if let Some(s) = &run_secrets {
            for name in &s.withheld {
                env.remove(name);
            }
            for (k, v) in &s.variables {
                env.insert(k.clone(), v.clone());
            }
        }
        check_sizes(&env, &secrets, &payload, &args, &inv, &tool)?;
        let timeout = payload
            .timeout
            .or(tool.timeout)
            .unwrap_or(served.default_timeout);
        let limits = policy.limits.tightened_by(&tool.limits);
        Ok(RunPlan {
            limits,
            program: inv.program,
            argv: inv.argv,
            display: inv.display,
            files: inv.files,
            env,
            secrets,
            cwd,
            workdir,
            stdio: Stdio::default(),
            namespaces: Namespaces {
                view,
                net: net.map(Arc::new),
            },
            timeout,
            confinement,
            tool,
            request: payload,
        })
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
