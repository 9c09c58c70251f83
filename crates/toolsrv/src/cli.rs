//! The command line (CONTRACT §1 and §10). Parsing only; `serve` and the client
//! commands validate and resolve what they get.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// toolsrv: runs an AI agent's tools confined, observable and cancellable, served as
/// a 9P2000 filesystem on a Unix socket. The same binary is the client.
#[derive(Debug, Parser)]
#[command(name = "toolsrv", version, about, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every client command takes, before or after the subcommand.
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

fn duration(s: &str) -> Result<Duration, String> {
    toolsrv_protocol::parse_duration(s).map_err(|e| e.to_string())
}

fn size(s: &str) -> Result<u64, String> {
    toolsrv_protocol::parse_size(s).map_err(|e| e.to_string())
}

/// `toolsrv serve` flags (CONTRACT §1).
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
    /// The Ollie namespace socket for completion messages (default: $NAMESPACE/ollie).
    #[arg(long, value_name = "SOCKET")]
    pub ollie: Option<PathBuf>,
    /// Write logs to this file instead of stderr.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// A tool's timeout when neither its metadata nor the request sets one.
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = "120s")]
    pub default_timeout: Duration,
    /// Dismiss finished processes this long after they end.
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = "30m")]
    pub gc_age: Duration,
    /// Reject unresolved bypass requests after this long.
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = "10m")]
    pub bypass_timeout: Duration,
    /// With --idle-timeout: exit if no client connects within this long of startup.
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = "60s")]
    pub idle_grace: Duration,
    /// The per-process output safety limit (bytes, or KiB/MiB/GiB).
    #[arg(long, value_name = "BYTES", value_parser = size, default_value = "8MiB")]
    pub max_output: u64,
}

/// Every subcommand.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon.
    Serve(Box<ServeArgs>),
    /// Write the built-in policy and tools to a directory (never overwriting).
    Init {
        /// Where to write `sandbox.yaml` and `tools/` (default: the config directory).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Show the server's platform and architecture.
    Info,
    /// List every tool available on the server's host.
    All,
    /// List the tools loaded for an agent.
    Tools {
        /// The agent ID.
        agent: String,
    },
    /// Show an agent's registry revision.
    Rev {
        /// The agent ID.
        agent: String,
    },
    /// Load tools for an agent.
    Load {
        /// The agent ID.
        agent: String,
        /// Tool names.
        #[arg(required = true)]
        tools: Vec<String>,
    },
    /// Unload tools for an agent.
    Unload {
        /// The agent ID.
        agent: String,
        /// Tool names.
        #[arg(required = true)]
        tools: Vec<String>,
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
