//! Calls the kit's skip helpers as a test would, for `tests/skip.rs`:
//! `skip_probe missing WHAT` or `skip_probe cannot WHY`.

// Test code: an unexpected failure is a panic that names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("missing") => toolsrv_testkit::skip::missing_prerequisite(&args[1..].join(" ")),
        Some("cannot") => toolsrv_testkit::skip::cannot_run_here(&args[1..].join(" ")),
        _ => {
            eprintln!("usage: skip_probe missing WHAT | skip_probe cannot WHY");
            std::process::exit(2);
        }
    }
}
