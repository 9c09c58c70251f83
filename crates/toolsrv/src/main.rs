//! `toolsrv`: the daemon (`serve`) and its client, in one binary.
//!
//! - [`cli`]: the command line (clap): global flags and every subcommand.
//! - [`serve`]: `toolsrv serve`: the flags into a `Config`, logging, then the `Daemon`.
//! - [`client_cmd`]: the client subcommands, over the client library.
//! - [`connect`]: which server the client commands talk to, and connecting to it.
//! - [`mcp_cmd`]: `toolsrv mcp`: the MCP bridge (crate `toolsrv-mcp`).
//! - [`doctor_cmd`]: `toolsrv doctor`: what this host and a running server enforce.
//! - [`init`]: `toolsrv init`: write out the built-in policy and tools.
//! - [`help`]: the command as users see it (which flags each subcommand shows), and parsing.
//! - [`docs`]: `toolsrv completions <shell>` and `toolsrv man`, from the clap definitions.
//! - [`stream`], [`describe`]: `call` with streamed output; `describe <tool>`.
//! - [`interrupt`]: Ctrl-C, SIGTERM and SIGHUP, which cancel a `call`.
//! - [`approval`]: the hint `call` prints while its run awaits approval.
//! - [`proc_cmd`]: `call`, `bg`, `ps`, `stat`, `out`, `wait`, `kill`, `dismiss`.
//! - [`request`]: what `call`, `bg` and `describe` do before a tool runs (the
//!   request, loading the tool, the working-directory retry).
//! - [`output`]: printing that survives a closed stdout; escaping for the terminal.
//! - [`remote_cmd`]: `toolsrv remote up|status|down` and `ssh://` sockets.
//! - [`paths`]: `~` expansion and the Ollie configuration directory.

mod approval;
mod audit_cmd;
// The doc comments in cli.rs are clap's help text (`<socket>.secret`,
// `[::1]:PORT`), not rustdoc markup.
#[allow(rustdoc::invalid_html_tags, rustdoc::broken_intra_doc_links)]
mod cli;
mod client_cmd;
mod connect;
mod describe;
mod docs;
mod doctor_cmd;
mod help;
mod init;
mod interrupt;
mod logwriter;
mod mcp_cmd;
mod output;
mod paths;
mod proc_cmd;
mod remote_cmd;
mod request;
mod runtime;
mod serve;
mod stream;
mod tool_args;

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = help::parse();
    if let Err(e) = help::refuse_flags_not_taken(&cli.global, &cli.command) {
        logwriter::say!("toolsrv: {e:#}");
        return ExitCode::from(2);
    }
    match cli.command {
        cli::Command::Serve(args) => serve::main(*args, cli.global.secret_file),
        cli::Command::Init { dir } => init::main(dir),
        cli::Command::Completions { shell } => docs::completions(shell),
        cli::Command::Man { command, out } => docs::man(command, out),
        cli::Command::Remote(cmd) => remote_cmd::main(&cli.global, cmd),
        cli::Command::Mcp(args) => mcp_cmd::main(&cli.global, args),
        cli::Command::Doctor { sandbox } => doctor_cmd::main(&cli.global, sandbox),
        cli::Command::Audit(args) => audit_cmd::main(args),
        other => client_cmd::main(&cli.global, other),
    }
}
