//! Steps 1–4 of `exec.ExecuteTool`: from a payload to everything needed to spawn,
//! or a refusal whose text becomes the error result.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use toolsrv_metadata::{OutputMode, Tool, ToolKind};
use toolsrv_protocol::{convert_args, parse_payload, Payload};
use toolsrv_sandbox::confine::Confinement;
use toolsrv_sandbox::policy::PathContext;
use toolsrv_sandbox::workdir::WorkDir;

use super::cache::Same;
use super::env::{compose, EnvParts};
use super::Executor;
use crate::registry::Lookup;
use crate::server::Server;

/// A request refused before anything ran; the text is the error result's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

impl<E: std::fmt::Display> From<E> for Refused {
    fn from(e: E) -> Refused {
        Refused(e.to_string())
    }
}

/// A request ready to run.
pub struct Prepared {
    /// The parsed payload.
    pub payload: Payload,
    /// The loaded tool.
    pub tool: Arc<Tool>,
    /// The program (absolute).
    pub program: PathBuf,
    /// argv, `argv[0]` first.
    pub argv: Vec<String>,
    /// The command line, for display and validation.
    pub display: String,
    /// The complete environment.
    pub env: BTreeMap<String, String>,
    /// The working directory's path when it was opened (for `PWD` and
    /// messages; the child `fchdir`s to [`Prepared::workdir`]).
    pub cwd: PathBuf,
    /// The working directory, opened once: the child's working directory and
    /// the sandbox's `{CWD}` rule are both this descriptor.
    pub workdir: Arc<WorkDir>,
    /// The timeout.
    pub timeout: Duration,
    /// The confinement (`None` under `--yolo`).
    pub confinement: Option<Arc<Confinement>>,
    /// The run's limits: the policy's, tightened by the tool's.
    pub limits: toolsrv_protocol::Limits,
}

impl Prepared {
    /// How the output is returned.
    pub fn output_mode(&self) -> OutputMode {
        self.tool.output
    }

    /// The C strings for the spawn.
    pub fn c_strings(&self) -> Result<(CString, Vec<CString>, Vec<CString>, CString), Refused> {
        let nul = |what: &str| Refused(format!("{what} contains a NUL byte"));
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

impl Executor {
    /// The loaded tool `name` of `agent`. A tool whose metadata file changed
    /// since it was loaded is loaded again first (the agent's revision moves,
    /// as for `load`); one that no longer loads is refused with the reason and
    /// the command that loads it again.
    fn current_tool(&self, server: &Server, agent: &str, name: &str) -> Result<Arc<Tool>, Refused> {
        match server.registry.lookup_checked(agent, name) {
            None => Err(Refused(format!(
                "tool {name:?} is not loaded for agent {agent:?}"
            ))),
            Some(Lookup::Current(tool)) => Ok(tool),
            Some(Lookup::Changed(old)) => match server.catalog.resolve(name) {
                Ok(new) => {
                    let rev = server.registry.load(agent, new);
                    tracing::info!(agent, tool = name, rev, source = %old.source.display(), "tool file changed since it was loaded; reloaded");
                    server.registry.lookup(agent, name).ok_or_else(|| {
                        Refused(format!("tool {name:?} is not loaded for agent {agent:?}"))
                    })
                }
                Err(e) => Err(Refused(format!(
                    "tool {name:?} changed since it was loaded and no longer loads: {e} (fix {} and run `toolsrv load {agent} {name}`)",
                    old.source.display()
                ))),
            },
        }
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
    pub fn prepare(&self, server: &Server, bytes: &[u8]) -> Result<Prepared, Refused> {
        let payload = parse_payload(bytes)?;
        if let Some(token) = server.token_required() {
            if !payload.token_matches(&token) {
                return Err(Refused("invalid token".into()));
            }
        }
        let agent = payload.agent.as_str();
        self.rate.check(agent, Instant::now())?;
        let tool = self.current_tool(server, agent, &payload.tool)?;
        let args = convert_args(&payload.args, &tool.input_schema)?;
        let inv = tool.invocation(&args)?;
        let sandboxed = !server.config.yolo && !payload.bypass;
        // `{CWD}` in the policy is the request's directory: a sandboxed request
        // must not widen its own sandbox by naming `/` or another tree.
        let workdir = open_cwd(&self.base_cwd, payload.cwd.as_deref(), sandboxed)?;
        let cwd = workdir.path().to_path_buf();
        let policy = match payload.sandbox.as_deref() {
            None | Some("default") => self.policy.current(),
            Some(name) => self.policy.profile(name)?,
        };
        // The request's `env.NAME` values reach the tool like string arguments
        // (a script may `eval "$FOO"`), so they are checked like them (CONTRACT §6).
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
            env: self.own_env.clone(),
        };
        let tmpdir = self.tmpdir.get_or((), || ctx().private_tmpdir());
        let confinement = if !sandboxed {
            None
        } else {
            let exec = exec_paths(&tool, &inv.program);
            // A reloaded policy is a new Arc, so a new key; the working
            // directory is keyed by what was opened, never by its path.
            let key = (Same(policy.clone()), workdir.id(), exec.clone());
            let rules = self.rules.get_or(key, || {
                Arc::new(policy.resolve_carving(&ctx(), &exec, &self.carve))
            });
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
        let timeout = payload
            .timeout
            .or(tool.timeout)
            .unwrap_or(server.config.default_timeout);
        let limits = policy.limits.tightened_by(&tool.limits);
        Ok(Prepared {
            limits,
            program: inv.program,
            argv: inv.argv,
            display: inv.display,
            env,
            cwd,
            workdir,
            timeout,
            confinement,
            tool,
            payload,
        })
    }
}
