//! What the `call` parts and `sandbox` share: the servers they run against
//! and the tools their agents load.

use anyhow::Result;

use crate::benches::Ctx;
use crate::server::{ServerOpts, ServerProcess};
use crate::tooldir::{bench_tools_dir, TRUE_EXEC, TRUE_SH, ZEROS};

/// The servers every `call` part (and `sandbox`) runs against, sharing one
/// tools directory.
pub struct Servers {
    /// The tools directory (kept alive while the servers run).
    _tools: tempfile::TempDir,
    /// `--yolo`.
    pub yolo: ServerProcess,
    /// The default: Landlock sandbox on.
    pub sandboxed: ServerProcess,
    /// Sandboxed, without containment (`TOOLSRV_CONTAINMENT=none`).
    pub uncontained: ServerProcess,
    /// Sandboxed, without the tools PID namespace (`TOOLSRV_TOOLS_PIDNS=off`).
    pub no_tools_ns: ServerProcess,
}

impl Servers {
    /// Write the bench tools and start the three servers (authenticated).
    pub fn start(ctx: &Ctx) -> Result<Servers> {
        let tools = bench_tools_dir("toolsrv-bench-tools")?;
        let opts = |yolo, containment, tools_pidns_off| ServerOpts {
            auth: true,
            yolo,
            tools: Some(tools.path().to_path_buf()),
            containment,
            extra: Vec::new(),
            view_off: false,
            tools_pidns_off,
            userns: None,
        };
        let yolo = ServerProcess::start_with(&ctx.bin, &opts(true, None, false))?;
        let sandboxed = ServerProcess::start_with(&ctx.bin, &opts(false, None, false))?;
        let uncontained = ServerProcess::start_with(&ctx.bin, &opts(false, Some("none"), false))?;
        let no_tools_ns = ServerProcess::start_with(&ctx.bin, &opts(false, None, true))?;
        Ok(Servers {
            _tools: tools,
            yolo,
            sandboxed,
            uncontained,
            no_tools_ns,
        })
    }
}

/// The tools every agent of these benches loads.
pub const TOOLS: &[&str] = &[TRUE_SH, TRUE_EXEC, ZEROS];
