//! `toolsrv init [--dir D]`: write the built-in policy and tools, never overwriting.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::output::{is_stdout_closed, outln};
use crate::paths::{config_dir, expand_tilde};

/// Write `<dir>/sandbox.yaml` and `<dir>/tools/*`, listing what was written.
pub fn main(dir: Option<PathBuf>) -> ExitCode {
    match run(dir) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_stdout_closed(&e) => ExitCode::SUCCESS,
        Err(e) => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "toolsrv: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run(dir: Option<PathBuf>) -> Result<()> {
    let dir = dir.map(|d| expand_tilde(&d)).unwrap_or_else(config_dir);
    let is_default = dir == config_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut wrote = Vec::new();
    if let Some(p) = toolsrv_sandbox::policy::write_default(&dir)
        .with_context(|| format!("cannot write {}", dir.join("sandbox.yaml").display()))?
    {
        wrote.push(p);
    }
    let tools = dir.join("tools");
    wrote.extend(
        toolsrv_metadata::write_builtin(&tools)
            .with_context(|| format!("cannot write the built-in tools to {}", tools.display()))?,
    );
    if wrote.is_empty() {
        outln!(
            "nothing written: every file already exists in {}",
            dir.display()
        )?;
    }
    for p in wrote {
        outln!("wrote {}", p.display())?;
    }
    if is_default {
        outln!(
            "`toolsrv serve --listen SOCKET` reads these by default (edit them; the policy is re-read when it changes)"
        )
    } else {
        outln!(
            "serve them with: toolsrv serve --listen SOCKET --sandbox {} --tools {}",
            dir.join("sandbox.yaml").display(),
            tools.display()
        )
    }
}
