//! The command line as users see it: which flags each subcommand shows.
//!
//! The client's flags (`--socket`, `--secret-file`, `--json`) are global in
//! [`Cli`] so that they work before or after a client subcommand. clap would
//! then list them under every subcommand; the commands that never talk to a
//! server (`init`, `completions`, `man`, `serve`) get hidden stand-ins of the
//! same ids instead (clap does not propagate a global to a subcommand that
//! has an argument of its id), and [`refuse_flags_not_taken`] turns their use into
//! an error. `serve` shows its own `--secret-file`, which pins the server's
//! secret. `bg` hides `call`'s `--stream`/`--no-stream`.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::{Arg, ArgAction, CommandFactory, FromArgMatches};

use crate::cli::{Cli, Command, Global};

/// The subcommands that do not connect to a server.
const LOCAL_COMMANDS: [&str; 3] = ["init", "completions", "man"];

/// The full clap command, with the help adjustments above. Parsing, the
/// completions and the manual pages all use it.
pub fn command() -> clap::Command {
    let mut cmd = Cli::command();
    for name in LOCAL_COMMANDS {
        cmd = cmd.mut_subcommand(name, |sc| {
            sc.arg(hidden_socket())
                .arg(hidden_secret_file())
                .arg(hidden_json())
        });
    }
    cmd = cmd.mut_subcommand("serve", |sc| {
        sc.arg(hidden_socket())
            .arg(hidden_json())
            .arg(serve_secret_file())
    });
    cmd.mut_subcommand("bg", |sc| {
        sc.mut_arg("stream", |a| a.hide(true))
            .mut_arg("no_stream", |a| a.hide(true))
    })
}

/// Parse the process's arguments (exits with clap's usage error, code 2, or
/// prints help/version and exits 0).
pub fn parse() -> Cli {
    let mut matches = command().try_get_matches().unwrap_or_else(|e| {
        if e.kind() == clap::error::ErrorKind::InvalidUtf8 {
            if let Some(text) = not_utf8_argument() {
                crate::logwriter::say!("toolsrv: {text}");
                std::process::exit(2);
            }
        }
        e.exit()
    });
    Cli::from_arg_matches_mut(&mut matches).unwrap_or_else(|e| e.exit())
}

/// Which command-line argument is not UTF-8, said so (clap says only that
/// one is): `argument 3 (--cwd) is not valid UTF-8: ...`.
fn not_utf8_argument() -> Option<String> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let (i, arg) = args
        .iter()
        .enumerate()
        .skip(1)
        .find(|(_, a)| a.to_str().is_none())?;
    let before = args
        .get(i - 1)
        .and_then(|a| a.to_str())
        .filter(|a| a.starts_with('-'));
    let after = before
        .map(|f| format!(", the value of {f}"))
        .unwrap_or_default();
    Some(format!(
        "argument {i} ({}{after}) is not valid UTF-8: toolsrv takes text (tool arguments excepted, which are checked one by one)",
        crate::output::for_terminal(&arg.to_string_lossy())
    ))
}

/// Refuse flags given to a command that does not take them (the parser
/// accepts them only so that they stay out of its help): the client's flags
/// on the local commands and `serve`, `call`'s streaming flags on `bg`.
pub fn refuse_flags_not_taken(global: &Global, cmd: &Command) -> Result<()> {
    let (name, takes_secret_file) = match cmd {
        Command::Init { .. } => ("init", false),
        Command::Completions { .. } => ("completions", false),
        Command::Man { .. } => ("man", false),
        Command::Serve(_) => ("serve", true),
        Command::Bg(a) if a.stream || a.no_stream => {
            bail!("`bg` prints only the pid; --stream and --no-stream are for `call` (follow the output with `toolsrv out -f PID`)")
        }
        _ => return Ok(()),
    };
    let given = [
        ("--socket", global.socket.is_some()),
        (
            "--secret-file",
            global.secret_file.is_some() && !takes_secret_file,
        ),
        ("--json", global.json),
    ];
    if let Some((flag, _)) = given.iter().find(|(_, set)| *set) {
        if name == "serve" && *flag == "--socket" {
            bail!("`serve` does not take --socket: it listens on --listen SOCKET");
        }
        bail!("`{name}` does not take {flag}: it does not talk to a server");
    }
    Ok(())
}

fn hidden_socket() -> Arg {
    Arg::new("socket")
        .long("socket")
        .value_name("PATH")
        .value_parser(clap::value_parser!(PathBuf))
        .hide(true)
}

fn hidden_secret_file() -> Arg {
    Arg::new("secret_file")
        .long("secret-file")
        .value_name("FILE")
        .value_parser(clap::value_parser!(PathBuf))
        .hide(true)
}

fn hidden_json() -> Arg {
    Arg::new("json")
        .long("json")
        .action(ArgAction::SetTrue)
        .hide(true)
}

/// `serve --secret-file`: what it means to the server.
fn serve_secret_file() -> Arg {
    Arg::new("secret_file")
        .long("secret-file")
        .value_name("FILE")
        .value_parser(clap::value_parser!(PathBuf))
        .help("Accept only the secret in FILE (owned by this user, no group/other access), from the first client on")
}
