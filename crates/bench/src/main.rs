//! `toolsrv-bench`: every toolsrv benchmark in one program. Each figure is
//! printed beside a baseline measured in the same run, as a ratio.
//!
//! `toolsrv-bench [NAME...] [--iters N] [--runtime current|multi|both]
//! [--stream-size S] [--before PATH]`

mod agent;
mod args;
mod bare;
mod benches;
mod echo;
mod machine;
mod raw9p;
mod report;
mod sched;
mod server;
mod stats;
mod sys;
mod tooldir;

use std::process::ExitCode;

use args::{Args, USAGE};
use benches::{Bench, Ctx, ALL, PARTS};

fn main() -> ExitCode {
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("toolsrv-bench: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if args.help {
        print!("{USAGE}\nbenches:\n");
        for b in ALL {
            println!("  {:<16} {}", b.name, b.about);
        }
        println!("parts (run by their bench, or alone by name):");
        for b in PARTS {
            println!("  {:<16} {}", b.name, b.about);
        }
        return ExitCode::SUCCESS;
    }
    let selected = match select(&args.names) {
        Ok(s) => s,
        Err(name) => {
            let known: Vec<&str> = ALL.iter().chain(PARTS).map(|b| b.name).collect();
            eprintln!(
                "toolsrv-bench: unknown bench {name:?}; known: {}",
                known.join(", ")
            );
            return ExitCode::from(2);
        }
    };
    let before = match args
        .before
        .as_deref()
        .map(|p| server::executable("--before", p))
    {
        None => None,
        Some(Ok(p)) => Some(p),
        Some(Err(e)) => {
            eprintln!("toolsrv-bench: {e}");
            return ExitCode::from(2);
        }
    };
    if before.is_some()
        && !selected
            .iter()
            .any(|b| b.name == "call-cpu" || b.name == "startup")
    {
        eprintln!("toolsrv-bench: note: --before is used by call-cpu and startup only, neither of which is selected");
    }
    let bin = match server::locate_binary() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("toolsrv-bench: {e}");
            return ExitCode::from(1);
        }
    };
    println!("toolsrv-bench");
    for f in machine::facts() {
        println!("  {f}");
    }
    println!("  server: {}", bin.display());
    if let Some(b) = &before {
        println!("  before: {}", b.display());
    }
    if cfg!(debug_assertions) {
        println!("  WARNING: this is a debug build of the bench; use --release for figures");
    }
    let ctx = Ctx {
        bin,
        iters: args.iters,
        flavours: args.flavours,
        stream_size: args.stream_size,
        before,
    };
    let mut failed = false;
    for b in selected {
        if let Err(e) = (b.run)(&ctx) {
            eprintln!("toolsrv-bench: {} failed: {e:#}", b.name);
            failed = true;
        }
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// The benches named (all when none are), or the first unknown name.
fn select(names: &[String]) -> Result<Vec<&'static Bench>, String> {
    if names.is_empty() {
        return Ok(ALL.iter().collect());
    }
    names
        .iter()
        .map(|n| {
            ALL.iter()
                .chain(PARTS)
                .find(|b| b.name == n)
                .ok_or_else(|| n.clone())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn select_all_by_default_and_by_name() {
        assert_eq!(select(&[]).expect("all").len(), ALL.len());
        let one = select(&["rtt".to_string()]).expect("rtt");
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].name, "rtt");
        assert_eq!(select(&["nope".to_string()]).unwrap_err(), "nope");
        let part = select(&["call-stream".to_string()]).expect("part");
        assert_eq!(part[0].name, "call-stream");
        assert!(select(&[])
            .expect("all")
            .iter()
            .all(|b| !b.name.contains('-')));
    }
}
