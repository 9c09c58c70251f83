//! `toolsrv audit [-f] [--json] FILE` and `toolsrv audit verify FILE`
//! (docs/audit.md): the audit log of `serve --audit`, read from its file
//! (it is the server host's; the client names it).

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::ExitCode;

use crate::cli::{AuditArgs, AuditCommand};

/// How often `-f` looks for new records.
const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// Runs the command: exit 0, or 1 with the reason on stderr (a broken
/// chain, an unreadable file), 2 for a usage error.
pub fn main(args: AuditArgs) -> ExitCode {
    match (args.verify, args.file) {
        (Some(AuditCommand::Verify { file }), _) => verify(&file),
        (None, Some(file)) => show(&file, args.follow, args.json),
        (None, None) => {
            eprintln!("toolsrv audit: name the audit log: toolsrv audit [-f] [--json] FILE, or toolsrv audit verify FILE");
            ExitCode::from(2)
        }
    }
}

fn verify(file: &Path) -> ExitCode {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("toolsrv audit verify: {}: {e}", file.display());
            return ExitCode::FAILURE;
        }
    };
    match toolsrv_audit::verify(&text) {
        Ok(n) => {
            println!("{}: {n} records, the chain holds", file.display());
            ExitCode::SUCCESS
        }
        Err(b) => {
            println!(
                "{}: the chain breaks at seq {} (line {}): {}",
                file.display(),
                b.seq,
                b.line,
                b.why
            );
            ExitCode::FAILURE
        }
    }
}

fn show(file: &Path, follow: bool, json: bool) -> ExitCode {
    let f = match std::fs::File::open(file) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("toolsrv audit: {}: {e}", file.display());
            return ExitCode::FAILURE;
        }
    };
    let mut reader = std::io::BufReader::new(f);
    let mut out = std::io::stdout().lock();
    let mut line = String::new();
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) if follow => {
                let _ = out.flush();
                std::thread::sleep(FOLLOW_EVERY);
            }
            Ok(0) => return ExitCode::SUCCESS,
            Ok(_) if !line.ends_with('\n') && follow => {
                // A record being written: wait for the rest of it.
                std::thread::sleep(FOLLOW_EVERY);
                let mut rest = String::new();
                let _ = reader.read_line(&mut rest);
                line.push_str(&rest);
                print(&mut out, &line, json);
            }
            Ok(_) => print(&mut out, &line, json),
            Err(e) => {
                eprintln!("toolsrv audit: {}: {e}", file.display());
                return ExitCode::FAILURE;
            }
        }
    }
}

fn print(out: &mut impl Write, line: &str, json: bool) {
    let line = line.trim_end_matches('\n');
    if line.is_empty() {
        return;
    }
    let text = if json {
        line.to_string()
    } else {
        toolsrv_audit::human(line)
    };
    let _ = writeln!(out, "{text}");
}
