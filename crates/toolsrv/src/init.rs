//! `toolsrv init [--dir D]`: write the built-in policy and tools, never overwriting.
//!
//! A file that is already there is kept, and never silently: one that differs
//! from the built-in it stands for, a symbolic link where a file would go, and
//! a file in the tools directory that is not a built-in tool (which the server
//! would serve) are each reported on standard error, so a file planted there
//! (by a tool, by anyone who could write the directory) is seen before the
//! server trusts it.

use std::path::{Path, PathBuf};
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
    if let Some(p) = toolsrv_sandbox::write_default(&dir)
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
    for p in &wrote {
        outln!("wrote {}", p.display())?;
    }
    for line in not_written(&dir, &tools, &wrote) {
        crate::logwriter::say!("toolsrv: {line}");
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

/// What init found and kept without having written it, one line each: files
/// that differ from their built-in, symbolic links, and files in `tools` that
/// are no built-in tool.
fn not_written(dir: &Path, tools: &Path, wrote: &[PathBuf]) -> Vec<String> {
    let mut found = Vec::new();
    let policy = dir.join("sandbox.yaml");
    if !wrote.contains(&policy) {
        found.extend(kept(
            &policy,
            toolsrv_sandbox::DEFAULT_POLICY.as_bytes(),
            "the built-in policy",
        ));
    }
    let builtin = toolsrv_metadata::builtin_files();
    let Ok(entries) = std::fs::read_dir(tools) else {
        return found;
    };
    let mut names: Vec<_> = entries.flatten().map(|e| e.file_name()).collect();
    names.sort();
    for name in names {
        let path = tools.join(&name);
        if wrote.contains(&path) {
            continue;
        }
        match builtin.iter().find(|f| std::ffi::OsStr::new(f.name) == name) {
            Some(f) => found.extend(kept(&path, f.bytes, &format!("the built-in {}", f.name))),
            None => found.push(format!(
                "found {}: not a built-in tool, not written by toolsrv init; `toolsrv serve` serves it (check it, or remove it)",
                path.display()
            )),
        }
    }
    found
}

/// A line about `path`, kept in place of `builtin` (described as `what`),
/// unless it holds exactly those bytes.
fn kept(path: &Path, builtin: &[u8], what: &str) -> Option<String> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if meta.file_type().is_symlink() {
        let to = std::fs::read_link(path).unwrap_or_default();
        return Some(format!(
            "kept {}: a symbolic link to {}, not written by toolsrv init (check it)",
            path.display(),
            to.display()
        ));
    }
    let same = meta.is_file() && std::fs::read(path).is_ok_and(|b| b == builtin);
    (!same).then(|| {
        format!(
            "kept {}: it differs from {what} and was not written by toolsrv init (check it)",
            path.display()
        )
    })
}
