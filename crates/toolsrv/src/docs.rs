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
