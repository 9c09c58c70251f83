//! Shell completions and the manual page, generated from the clap definitions
//! so they never drift from the command line.

use std::io::Write;
use std::process::ExitCode;

use clap::CommandFactory;

use crate::cli::Cli;

/// `toolsrv completions <shell>`: the completion script on stdout.
pub fn completions(shell: clap_complete::Shell) -> ExitCode {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "toolsrv", &mut out);
    emit(&out)
}

/// `toolsrv man`: the manual page (roff) on stdout.
pub fn man() -> ExitCode {
    let mut out = Vec::new();
    if let Err(e) = clap_mangen::Man::new(Cli::command()).render(&mut out) {
        crate::logwriter::say!("toolsrv: cannot render the manual page: {e}");
        return ExitCode::from(1);
    }
    emit(&out)
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

/// Whether the command line asks for `serve`'s help (`toolsrv serve --help`).
///
/// clap shows a global flag in every subcommand's help; `serve` takes none of
/// the client's (`--socket`, `--json`) and gives `--secret-file` its own
/// meaning, so its help is built from its own flags only.
pub fn serve_help_requested() -> bool {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    args.first().is_some_and(|a| a == "serve")
        && args[1..].iter().any(|a| a == "--help" || a == "-h")
}

/// Prints `serve`'s help: its own flags, and `--secret-file` as `serve` reads it.
pub fn serve_help() -> ExitCode {
    use clap::Args;
    let cmd = crate::cli::ServeArgs::augment_args(clap::Command::new("serve"))
        .bin_name("toolsrv serve")
        .about("Run the daemon: serve the tool namespace on a Unix socket")
        .arg(
        clap::Arg::new("secret_file")
            .long("secret-file")
            .value_name("FILE")
            .help("Accept only the secret in FILE (owned by this user, no group/other access), from the first client on"),
    );
    let help = cmd.clone().render_help().to_string();
    emit(help.as_bytes())
}
