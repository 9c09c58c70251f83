//! The command line (docs/cli.md; docs/cli.md, "The client"). Parsing only; `serve` and the client
//! commands validate and resolve what they get.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use toolsrv_server::Config;

/// toolsrv: runs an AI agent's tools confined, observable and cancellable, served as
/// a 9P2000 filesystem on a Unix socket. The same binary is the client.
#[derive(Debug, Parser)]
#[command(name = "toolsrv", version = VERSION, about, after_help = CONFIG_HELP)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Where the configuration lives, said under the top-level help and `serve`'s.
pub const CONFIG_HELP: &str = "\
Configuration: the sandbox policy (sandbox.yaml) and the tools directory are read
from the Ollie configuration directory, shared with Ollie, the agent host that
toolsrv serves tools to: $OLLIE_CFG_PATH, else $XDG_CONFIG_HOME/ollie, else
~/.config/ollie. Nothing there is required: without it the built-in policy and
tools are used (`toolsrv init` writes them out to edit).";

/// The version line: the crate version and the git revision it was built from.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("TOOLSRV_GIT_REV"),
    ")"
);

/// Flags every client command takes, before or after the subcommand (the
/// commands that do not talk to a server neither show nor take them; see
/// `help.rs`).
#[derive(Debug, Args, Clone)]
pub struct Global {
    /// The server's socket [env: TOOLSRV_SOCKET].
    #[arg(long, global = true, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// A file holding the shared secret (default: <socket>.secret).
    #[arg(long, global = true, value_name = "FILE")]
    pub secret_file: Option<PathBuf>,
    /// Print raw JSON for commands that read JSON.
    #[arg(long, global = true)]
    pub json: bool,
}

/// An agent ID as the server takes it, or why not (which characters are).
fn agent_id(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Err(format!(
            "the agent ID is empty: {}",
            toolsrv_protocol::AGENT_ID_RULE
        ));
    }
    toolsrv_protocol::validate_agent_id(s)
        .map(|()| s.to_string())
        .map_err(|e| e.to_string())
}

fn duration(s: &str) -> Result<Duration, String> {
    toolsrv_protocol::parse_duration(s).map_err(|e| e.to_string())
}

fn size(s: &str) -> Result<u64, String> {
    toolsrv_protocol::parse_size(s).map_err(|e| e.to_string())
}

/// `toolsrv serve` flags (docs/cli.md).
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The Unix socket to listen on.
    #[arg(long, value_name = "SOCKET")]
    pub listen: PathBuf,
    /// The default working directory of tools (default: the current directory).
    #[arg(long, value_name = "PATH")]
    pub cwd: Option<PathBuf>,
    /// Run tools without the Landlock sandbox (development only).
    #[arg(long)]
    pub yolo: bool,
    /// Disable authentication (debugging only).
    #[arg(long)]
    pub no_auth: bool,
    /// Exit after this long without connections or running processes.
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub idle_timeout: Option<Duration>,
    /// The tools directory (default: first of $OLLIE_TOOLS_PATH, else <config>/tools).
    #[arg(long, value_name = "DIR")]
    pub tools: Option<PathBuf>,
    /// The sandbox policy (default: <config>/sandbox.yaml).
    #[arg(long, value_name = "FILE")]
    pub sandbox: Option<PathBuf>,
    /// Where completion messages of background runs go: the 9P socket of Ollie,
    /// the agent host, whose `s/<session>/prompt` gets one line when a run
    /// started with a session ends (default: $NAMESPACE/ollie; without
    /// either, no messages are sent).
    #[arg(long, value_name = "SOCKET")]
    pub ollie: Option<PathBuf>,
    /// Write logs to this file instead of stderr.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// A tool's timeout when neither its metadata nor the request sets one.
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = Config::DEFAULT_TIMEOUT)]
    pub default_timeout: Duration,
    /// Dismiss finished processes this long after they end.
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = Config::GC_AGE)]
    pub gc_age: Duration,
    /// Reject unresolved bypass requests after this long.
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = Config::BYPASS_TIMEOUT)]
    pub bypass_timeout: Duration,
    /// With --idle-timeout: exit if no client connects within this long of startup.
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = Config::IDLE_GRACE)]
    pub idle_grace: Duration,
    /// The per-process output safety limit (bytes, or KiB/MiB/GiB).
    #[arg(long, value_name = "BYTES", value_parser = size, default_value = Config::MAX_OUTPUT)]
    pub max_output: u64,
    /// Serve at most this many connections at once; beyond it a new connection is closed at once.
    #[arg(long, value_name = "N", default_value_t = Config::MAX_CONNECTIONS, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// Close a connection that has not attached within this long (0: never).
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = Config::AUTH_TIMEOUT)]
    pub auth_timeout: Duration,
    /// The output kept by all finished processes together (bytes, or KiB/MiB/GiB); the oldest finished are dismissed beyond it.
    #[arg(long, value_name = "BYTES", value_parser = size, default_value = Config::MAX_FINISHED_OUTPUT)]
    pub max_finished_output: u64,
    /// Finished processes kept; the oldest finished are dismissed beyond it.
    #[arg(long, value_name = "N", default_value_t = Config::MAX_FINISHED)]
    pub max_finished: usize,
    /// Background processes one agent may have running (or awaiting approval) at once.
    #[arg(long, value_name = "N", default_value_t = Config::MAX_BACKGROUND, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_background: u32,
    /// Append a tamper-evident record of every run, approval and denial to
    /// this file (mode 0600, hash-chained; `toolsrv audit verify FILE`).
    #[arg(long, value_name = "FILE")]
    pub audit: Option<PathBuf>,
    /// Test hook: pretend the kernel supports at most this Landlock ABI.
    #[arg(long, hide = true, value_name = "N")]
    pub landlock_abi_limit: Option<i32>,
}

/// `toolsrv audit`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AuditArgs {
    /// `verify FILE`: check the chain.
    #[command(subcommand)]
    pub verify: Option<AuditCommand>,
    /// The audit log.
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Keep printing records as they are appended.
    #[arg(short = 'f', long)]
    pub follow: bool,
    /// Print the records as written (JSON lines).
    #[arg(long)]
    pub json: bool,
}

/// `toolsrv audit verify`.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check that no record was edited, removed, inserted or reordered:
    /// print the number of records (exit 0), or the first bad one (exit 1).
    Verify {
        /// The audit log.
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
}

/// How a tool is run by `call` and `bg`.
#[derive(Debug, Args)]
pub struct CallArgs {
    /// The agent ID the call runs for (the tool is loaded for it if it is not yet).
    #[arg(long, default_value = "cli", value_parser = agent_id)]
    pub agent: String,
    /// A session ID (for completion messages of background runs).
    #[arg(long)]
    pub session: Option<String>,
    /// The working directory (relative paths resolve against the server's --cwd).
    #[arg(long)]
    pub cwd: Option<String>,
    /// Ask a human observer to approve an unsandboxed run.
    #[arg(long)]
    pub bypass: bool,
    /// Override the tool's timeout (Go duration, or seconds).
    #[arg(long, value_parser = duration)]
    pub timeout: Option<Duration>,
    /// A sandbox profile (`sandbox/<name>.yaml` beside the policy).
    #[arg(long)]
    pub sandbox: Option<String>,
    /// `call`: print the output as the tool writes it (the default when stdout
    /// is a terminal); Ctrl-C then keeps what was printed.
    #[arg(long)]
    pub stream: bool,
    /// `call`: wait for the whole result before printing (the default when
    /// stdout is not a terminal).
    #[arg(long, conflicts_with = "stream")]
    pub no_stream: bool,
    /// The tool name.
    pub tool: String,
    /// Arguments as key=value (values may contain anything, including `=`);
    /// key=@FILE takes the value from FILE, key=@- from standard input, and
    /// key=@@text is the value @text.
    #[arg(value_name = "KEY=VALUE", value_parser = clap::value_parser!(std::ffi::OsString))]
    pub args: Vec<std::ffi::OsString>,
}

/// `toolsrv remote up` flags.
#[derive(Debug, Args, Clone)]
pub struct RemoteUpArgs {
    /// The host: `[user@]host[:port]` or `ssh://[user@]host[:port][/remote/socket]`.
    pub host: String,
    /// The configuration directory to send (its `sandbox.yaml`, `sandbox/` and
    /// `tools/`; default: the local Ollie config directory when it exists).
    #[arg(long, value_name = "DIR")]
    pub config: Option<PathBuf>,
    /// The remote server's --idle-timeout.
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = "30m")]
    pub idle_timeout: Duration,
    /// The remote server's --cwd (default: ~/toolsrv-workspace on the remote, created by `up`) [env: TOOLSRV_REMOTE_CWD].
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<String>,
    /// Set NAME=VALUE for every remote command (repeatable; also
    /// $TOOLSRV_REMOTE_ENV, whitespace-separated), e.g. HOME for a shared account.
    #[arg(long, value_name = "NAME=VALUE")]
    pub env: Vec<String>,
    /// Do nothing when the forward already answers.
    #[arg(long)]
    pub if_needed: bool,
    /// Print only the local socket's path.
    #[arg(long)]
    pub print_socket: bool,
}

/// `toolsrv remote` subcommands.
#[derive(Debug, Subcommand)]
pub enum RemoteCommand {
    /// Install (if needed), configure and start toolsrv on a host, and forward a
    /// local socket to it.
    Up(RemoteUpArgs),
    /// Show host, version, sockets, uptime, running processes and the last
    /// recovery step.
    Status {
        /// The host, as given to `up`.
        host: String,
    },
    /// Stop the forward and the remote server, and remove what `up` made.
    Down {
        /// The host, as given to `up`.
        host: String,
    },
    /// The supervisor `up` starts (internal).
    #[command(hide = true)]
    Supervise {
        /// Its local directory.
        #[arg(long)]
        dir: PathBuf,
        /// The address.
        host: String,
    },
}

/// `toolsrv mcp` flags (docs/mcp.md).
#[derive(Debug, Args)]
pub struct McpArgs {
    /// The agent ID whose loaded tools are served. Without --load, only the
    /// tools already loaded for it (`toolsrv load A TOOL...`) are listed: none
    /// for a new agent.
    #[arg(long, value_parser = agent_id)]
    pub agent: String,
    /// A session ID sent with every call.
    #[arg(long)]
    pub session: Option<String>,
    /// Tools to load for the agent at startup (comma-separated).
    #[arg(long, value_name = "TOOL,...", value_delimiter = ',')]
    pub load: Vec<String>,
    /// The working directory of calls (default: this directory when it lies
    /// under the server's --cwd, else the server's --cwd).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<String>,
    /// Serve Streamable HTTP instead of stdio: 127.0.0.1:PORT, [::1]:PORT or a
    /// Unix socket path. Every request needs the bearer token.
    #[arg(long, value_name = "ADDR|PATH")]
    pub http: Option<String>,
    /// With --http: where the generated bearer token is written, mode 0600
    /// (default: <socket>.mcp-token). $TOOLSRV_MCP_TOKEN sets the token instead.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// How often the agent's tools_rev is read for list_changed notifications.
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = "250ms")]
    pub poll: Duration,
}

/// Every subcommand.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon: serve the tool namespace on a Unix socket.
    #[command(after_help = CONFIG_HELP)]
    Serve(Box<ServeArgs>),
    /// Write the built-in policy and tools to a directory (never overwriting).
    Init {
        /// Where to write `sandbox.yaml` and `tools/` (default: the config directory).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print a manual page (roff), e.g. `toolsrv man | man -l -`, or write them
    /// all with --out.
    Man {
        /// The subcommand whose page to print, e.g. `serve` or `remote up`
        /// (default: the page of toolsrv itself).
        #[arg(value_name = "SUBCOMMAND")]
        command: Vec<String>,
        /// Write every page (toolsrv.1, toolsrv-serve.1, ...) to this directory
        /// and print their paths, e.g. ~/.local/share/man/man1.
        #[arg(long, value_name = "DIR", conflicts_with = "command")]
        out: Option<PathBuf>,
    },
    /// Run toolsrv on another host over SSH (`up`, `status`, `down`).
    #[command(subcommand)]
    Remote(RemoteCommand),
    /// Serve the agent's tools to MCP clients (stdio, or Streamable HTTP with --http).
    Mcp(McpArgs),
    /// Show what this host (and, with --socket, the running server) enforces
    /// of the policy, what is missing and what to change; exit 1 unless
    /// everything the policy asks for is enforced.
    Doctor {
        /// The policy to judge against (default: the config directory's
        /// sandbox.yaml, else the built-in policy).
        #[arg(long, value_name = "FILE")]
        sandbox: Option<PathBuf>,
    },
    /// Print an audit log (`serve --audit FILE`) readably, or check its
    /// chain (`audit verify FILE`).
    Audit(AuditArgs),
    /// Show the server's platform and architecture.
    Info,
    /// List every tool available on the server's host.
    All,
    /// List the tools loaded for an agent.
    Tools {
        /// The agent ID.
        #[arg(value_parser = agent_id)]
        agent: String,
    },
    /// Show a tool's description and parameters (loading it for the agent if needed).
    Describe {
        /// The agent ID the tool is loaded for.
        #[arg(long, default_value = "cli", value_parser = agent_id)]
        agent: String,
        /// The tool name.
        tool: String,
    },
    /// Show an agent's registry revision.
    Rev {
        /// The agent ID.
        #[arg(value_parser = agent_id)]
        agent: String,
    },
    /// Load tools for an agent.
    Load {
        /// The agent ID.
        #[arg(value_parser = agent_id)]
        agent: String,
        /// Tool names.
        #[arg(required = true)]
        tools: Vec<String>,
    },
    /// Unload tools for an agent.
    Unload {
        /// The agent ID.
        #[arg(value_parser = agent_id)]
        agent: String,
        /// Tool names.
        #[arg(required = true)]
        tools: Vec<String>,
    },
    /// Run a tool and print its result (exit 1 when it is an error). Ctrl-C cancels it.
    Call(CallArgs),
    /// Start a tool in the background and print its pid.
    Bg(CallArgs),
    /// List processes (all, or one agent's).
    Ps {
        /// Only this agent's processes.
        #[arg(long, value_parser = agent_id)]
        agent: Option<String>,
        /// Only processes still running (or awaiting approval).
        #[arg(long)]
        running: bool,
    },
    /// Show a process's state.
    Stat {
        /// The toolsrv pid.
        pid: u64,
    },
    /// Print a process's output (`-f`: follow until it ends).
    Out {
        /// Keep printing new output until the process ends.
        #[arg(short = 'f', long)]
        follow: bool,
        /// The toolsrv pid.
        pid: u64,
    },
    /// Wait for a process to end and print its exit code.
    Wait {
        /// The toolsrv pid.
        pid: u64,
    },
    /// Signal a process's group (default KILL).
    Kill {
        /// The toolsrv pid.
        pid: u64,
        /// A signal number or name (`TERM`, `SIGINT`, `9`).
        signal: Option<String>,
    },
    /// Remove a finished process.
    Dismiss {
        /// The toolsrv pid.
        pid: u64,
    },
    /// Print the pending bypass requests (`-f`: keep waiting for new ones).
    Pending {
        /// Keep waiting and print each new request.
        #[arg(short = 'f', long)]
        follow: bool,
    },
    /// Approve a bypass request: the tool runs without the sandbox.
    Approve {
        /// The request id (e.g. `b7`).
        id: String,
    },
    /// Reject a bypass request.
    Reject {
        /// The request id.
        id: String,
        /// Why (shown to the agent).
        reason: Vec<String>,
    },
    /// List a directory of the namespace (default: the root).
    Ls {
        /// A path inside the namespace, e.g. `proc`.
        path: Option<String>,
    },
    /// Print a file of the namespace.
    Cat {
        /// A path inside the namespace, e.g. `info`.
        path: String,
    },
}
