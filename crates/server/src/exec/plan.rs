//! A run's plan: plain data saying everything about one run of a tool,
//! made by the planner (`planner.rs`) from a request and carried out by
//! the runner (`runner/`). Nothing here does anything: adding a stdio kind
//! or a namespace is one field here and one step in `runner/start.rs`
//! (docs/architecture.md, "A call through the plan").

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use toolsrv_protocol::{Limits, Payload, ToolResult};
use toolsrv_sandbox::{Confinement, View, WorkDir};

use super::planner::Refused;
use super::runner::RunError;
use crate::procs::Proc;

/// One run, planned.
pub(crate) struct RunPlan {
    /// The request as parsed (agent, session, bypass, the request's `env`).
    pub(crate) request: Payload,
    /// The loaded tool.
    pub(crate) tool: Arc<toolsrv_metadata::Tool>,
    /// The program (absolute).
    pub(crate) program: PathBuf,
    /// argv, `argv[0]` first.
    pub(crate) argv: Vec<String>,
    /// The command line, for display and validation.
    pub(crate) display: String,
    /// The environment the tool gets and anyone may see (a bypass
    /// request shows it to the human who approves it).
    pub(crate) env: BTreeMap<String, String>,
    /// Variables the tool gets besides [`RunPlan::env`] that nothing shows:
    /// not a bypass request, not a log line, not a process listing.
    pub(crate) secrets: Secrets,
    /// The `file: true` arguments, passed as the tool's descriptors 3, 4, ….
    pub(crate) files: Vec<toolsrv_metadata::ArgFile>,
    /// The working directory's path when it was opened (for `PWD` and
    /// messages; the child `fchdir`s to [`RunPlan::workdir`]).
    pub(crate) cwd: PathBuf,
    /// The working directory, opened once: the child's working directory and
    /// the sandbox's `{CWD}` rule are both this descriptor.
    pub(crate) workdir: Arc<WorkDir>,
    /// Where the standard descriptors come from and go.
    pub(crate) stdio: Stdio,
    /// The namespaces the child enters.
    pub(crate) namespaces: Namespaces,
    /// The confinement (`None`: unconfined, under `--yolo` or an approved
    /// bypass).
    pub(crate) confinement: Option<Arc<Confinement>>,
    /// The run's limits: the policy's, tightened by the tool's.
    pub(crate) limits: Limits,
    /// How long the run may take.
    pub(crate) timeout: Duration,
}

/// Where a run's standard descriptors come from and go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Stdio {
    /// What the tool reads on descriptor 0.
    pub(crate) stdin: Stdin,
    /// Where descriptors 1 and 2 go.
    pub(crate) output: Output,
}

/// A run's standard input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Stdin {
    /// `/dev/null`: an open stdin changes what some programs do (they wait
    /// for input, or take it for a terminal's).
    #[default]
    Null,
}

/// A run's standard output and error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Output {
    /// Both into one pipe, pumped into the process's output in the order
    /// written.
    #[default]
    Merged,
}

/// The namespaces a run's child enters.
#[derive(Default)]
pub(crate) struct Namespaces {
    /// The filesystem view (a mount namespace, with the tools' user
    /// namespace of a root server): `None` where the run is unconfined or
    /// the host carves instead. [`RunPlan::workdir`] was opened inside it.
    pub(crate) view: Option<Arc<View>>,
    /// The run's own network (`network.domains`): `None` where the policy
    /// lists no domains or the run is unconfined.
    pub(crate) net: Option<Arc<super::network::RunNet>>,
}

/// Variables kept apart from a plan's environment: passed to the tool,
/// never shown. Their values are not printed by `Debug`.
#[derive(Default)]
pub(crate) struct Secrets(pub(crate) Vec<(String, String)>);

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|(k, _)| format!("{k}=…")))
            .finish()
    }
}

/// A plan's program, argv, environment and working directory as the spawn
/// passes them to the kernel.
pub(crate) struct ExecStrings {
    /// The program's path.
    pub(crate) program: CString,
    /// argv.
    pub(crate) argv: Vec<CString>,
    /// `NAME=value`, the environment then the secrets.
    pub(crate) envp: Vec<CString>,
    /// The working directory's path (for messages).
    pub(crate) cwd: CString,
}

impl RunPlan {
    /// The plan's strings for the spawn; a NUL byte in one is refused.
    pub(crate) fn exec_strings(&self) -> Result<ExecStrings, Refused> {
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
            .chain(self.secrets.0.iter().map(|(k, v)| (k, v)))
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
        Ok(ExecStrings {
            program,
            argv,
            envp,
            cwd,
        })
    }

    /// The argument files, each a new anonymous file holding its value.
    pub(crate) fn arg_files(&self) -> Result<Vec<OwnedFd>, RunError> {
        self.files
            .iter()
            .map(|f| {
                let name = CString::new(format!("toolsrv-arg-{}", f.name))
                    .map_err(|_| Refused::Nul("an argument name"))?;
                crate::sys::memfd_with(&name, f.value.as_bytes()).map_err(|source| {
                    RunError::ArgFile {
                        name: f.name.clone(),
                        source,
                    }
                })
            })
            .collect()
    }

    /// Whether the run is confined.
    pub(crate) fn confined(&self) -> bool {
        self.confinement.is_some()
    }

    /// The result of `proc`, a run of this plan that ended (docs/protocol.md,
    /// "Requests and results"), with the lines the run's end added.
    pub(crate) fn result(&self, proc: &Proc) -> ToolResult {
        let (state, code) = proc.outcome();
        super::result::build(
            state,
            code.unwrap_or(-1),
            &proc.output.snapshot(),
            self.tool.output,
            self.timeout,
        )
        .with_last_lines(&proc.limits_reached())
    }
}
