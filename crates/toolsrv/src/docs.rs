//! Shell completions and the manual page, generated from the clap definitions
//! so they never drift from the command line.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

/// `toolsrv completions <shell>`: the completion script on stdout.
pub fn completions(shell: clap_complete::Shell) -> ExitCode {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut crate::help::command(), "toolsrv", &mut out);
    emit(&out)
}

/// `toolsrv man [SUBCOMMAND...]`: one manual page (roff) on stdout; with
/// `--out DIR`, every page (`toolsrv.1`, `toolsrv-serve.1`, `toolsrv-remote-up.1`,
/// ...) written to `DIR`, so that every page a page refers to exists.
pub fn man(command: Vec<String>, out: Option<PathBuf>) -> ExitCode {
    let text = match out {
        Some(dir) => write_pages(&dir),
        None => page(&command),
    };
    match text {
        Ok(bytes) => emit(&bytes),
        Err(e) => {
            crate::logwriter::say!("toolsrv: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// The command tree the pages are made from: built, without clap's `help`
/// subcommand (it has no page of its own).
fn man_command() -> clap::Command {
    let mut cmd = crate::help::command().disable_help_subcommand(true);
    cmd.build();
    cmd
}

/// A page (its file name and roff) with toolsrv's version as its source (a
/// subcommand has none of its own). The text after the help (where the
/// configuration is) becomes a CONFIGURATION section, not clap_mangen's EXTRA.
fn render(cmd: clap::Command) -> anyhow::Result<(String, Vec<u8>)> {
    let after = cmd.get_after_help().map(ToString::to_string);
    let values = option_values(&cmd);
    let man = clap_mangen::Man::new(cmd.after_help(None::<&str>))
        .source(format!("toolsrv {}", crate::cli::VERSION));
    let mut out = Vec::new();
    man.render(&mut out)
        .context("cannot render the manual page")?;
    let mut out = with_synopsis_values(&out, &values);
    if let Some(text) = after {
        out.extend_from_slice(b".SH CONFIGURATION\n");
        for line in text.lines() {
            // roff: a backslash is an escape, and a line starting with `.`
            // or `'` a request.
            let line = line.replace('\\', "\\e");
            if line.starts_with(['.', '\'']) {
                out.extend_from_slice(b"\\&");
            }
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
        }
    }
    Ok((man.get_filename(), out))
}

/// Each option of `cmd` that takes a value, as its roff name in the
/// synopsis (`\fB\-\-cwd\fR`) and its value's name (`PATH`).
fn option_values(cmd: &clap::Command) -> Vec<(String, String)> {
    cmd.get_arguments()
        .filter(|a| a.get_action().takes_values() && a.get_long().is_some())
        .map(|a| {
            let long = a.get_long().unwrap_or_default().replace('-', "\\-");
            let value = a
                .get_value_names()
                .and_then(|v| v.first())
                .map_or_else(|| a.get_id().as_str().to_uppercase(), ToString::to_string);
            (format!("\\fB\\-\\-{long}\\fR"), value)
        })
        .collect()
}

/// The page with each option's value in its SYNOPSIS line (clap_mangen
/// writes `[--cwd]` for `--cwd <PATH>`): `[--cwd PATH]`.
fn with_synopsis_values(roff: &[u8], values: &[(String, String)]) -> Vec<u8> {
    let text = String::from_utf8_lossy(roff);
    let mut out = String::with_capacity(text.len() + 256);
    let mut in_synopsis = false;
    for line in text.split_inclusive('\n') {
        if line.starts_with(".SH") {
            in_synopsis = line.starts_with(".SH SYNOPSIS");
            out.push_str(line);
            continue;
        }
        if !in_synopsis {
            out.push_str(line);
            continue;
        }
        let mut l = line.to_string();
        for (flag, value) in values {
            for (open, close) in [("[", "]"), ("<", ">")] {
                let bare = format!("{open}{flag}{close}");
                let with = format!("{open}{flag} \\fI{value}\\fR{close}");
                l = l.replace(&bare, &with);
            }
        }
        out.push_str(&l);
    }
    out.into_bytes()
}

/// The page of `path` (e.g. `["remote", "up"]`; empty: toolsrv itself).
fn page(path: &[String]) -> anyhow::Result<Vec<u8>> {
    let mut cmd = man_command();
    for (i, name) in path.iter().enumerate() {
        let Some(sub) = cmd.find_subcommand(name).filter(|s| !s.is_hide_set()) else {
            let parent = std::iter::once("toolsrv")
                .chain(path[..i].iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" ");
            let known: Vec<&str> = cmd
                .get_subcommands()
                .filter(|s| !s.is_hide_set())
                .map(|s| s.get_name())
                .collect();
            anyhow::bail!(
                "no manual page for `{parent} {name}`: {}",
                if known.is_empty() {
                    format!("`{parent}` has no subcommands")
                } else {
                    format!("its subcommands are {}", known.join(", "))
                }
            );
        };
        cmd = sub.clone();
    }
    Ok(render(cmd)?.1)
}

/// Writes every page into `dir` (created if needed); returns their paths,
/// one a line.
fn write_pages(dir: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut written = Vec::new();
    let mut todo = vec![man_command()];
    while let Some(cmd) = todo.pop() {
        todo.extend(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
        let (name, roff) = render(cmd)?;
        let path = dir.join(name);
        std::fs::write(&path, roff).with_context(|| format!("cannot write {}", path.display()))?;
        written.push(path);
    }
    written.sort();
    Ok(written
        .iter()
        .map(|p| format!("{}\n", p.display()))
        .collect::<String>()
        .into_bytes())
}

/// Writes `bytes` to stdout; a closed stdout ends quietly.
fn emit(bytes: &[u8]) -> ExitCode {
    let mut o = std::io::stdout().lock();
    match o.write_all(bytes).and_then(|()| o.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            crate::logwriter::say!("toolsrv: cannot write to stdout: {e}");
            ExitCode::from(1)
        }
    }
}
