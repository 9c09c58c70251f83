//! `guard`: how soon what a sandboxed tool must not leave behind is gone,
//! through a real server (`crates/server/src/guard/`, docs/sandbox-policy.md
//! "What a tool leaves behind"). Needs root for exact attribution.
//!
//! One sync call of the built-in `shell` tool runs a Python loop in the
//! sandbox: it creates `.mcp.json` in the workspace (a protected path that
//! does not exist), stamps `perf_counter_ns` just before the `open`, and
//! spins on `stat` until the file is gone (moved to quarantine by the
//! server): **create → gone**, p50 and p99. The baseline, from the same
//! loop in the same run: the tool creates an ordinary file and removes it
//! itself (`create + unlink`), what the loop costs without the guard. Goal:
//! create → gone p99 under 50 ms (issue 34).

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use toolsrv_client::CallRequest;

use crate::agent::connect;
use crate::benches::{runtime, Ctx};
use crate::report::{baseline_line, time_line, Figure};
use crate::server::{ServerOpts, ServerProcess};
use crate::stats::{percentile_of, Summary};

/// Measured creations unless `--iters` says otherwise.
pub const DEFAULT_ITERS: usize = 500;
/// The bound on create → gone (p99).
pub const GOAL_P99: Duration = Duration::from_millis(50);

const AGENT: &str = "bench-guard";

/// The loops the tool runs, the baseline's first (so the server's work on
/// one quarantine does not land in a baseline round): `@ITERS@` rounds of
/// each, after 20 of warm-up; prints
/// one line per round, `guard <ns>` or `plain <ns>`. A round whose file is
/// still there after 5 s prints `stuck` and ends the loop.
const SCRIPT: &str = r#"python3 - <<'PY'
import os, time, sys
for i in range(20 + @ITERS@):
    t0 = time.perf_counter_ns()
    open("plain.txt", "w").close()
    os.unlink("plain.txt")
    t1 = time.perf_counter_ns()
    if i >= 20: print("plain", t1 - t0)
for i in range(20 + @ITERS@):
    t0 = time.perf_counter_ns()
    open(".mcp.json", "w").close()
    while True:
        try:
            os.stat(".mcp.json")
        except FileNotFoundError:
            break
        if time.perf_counter_ns() - t0 > 5_000_000_000:
            print("stuck"); sys.exit(1)
    t1 = time.perf_counter_ns()
    if i >= 20: print("guard", t1 - t0)
PY"#;

/// Run `guard`.
pub fn run(ctx: &Ctx) -> Result<()> {
    let iters = ctx.iters.unwrap_or(DEFAULT_ITERS);
    let srv = ServerProcess::start_with(&ctx.bin, &ServerOpts::default())?;
    println!(
        "\n== guard: a sandboxed tool creates .mcp.json (a missing protected path) in {} and waits until the server moved it to quarantine; {iters} rounds after 20 of warm-up, beside the same tool creating and removing an ordinary file",
        srv.cwd().display()
    );
    let rt = runtime(crate::args::Flavour::CurrentThread)?;
    let ran = rt.block_on(async {
        let c = connect(&srv, false, AGENT, &["shell"]).await?;
        let script = SCRIPT.replace("@ITERS@", &iters.to_string());
        let req = CallRequest::new("shell", AGENT).arg("command", script);
        let r = c.call(&req).await.context("the shell call")?;
        let text: String = r
            .content
            .iter()
            .filter_map(|c| match c {
                toolsrv_client::Content::Text { text } => Some(text.clone()),
                _ => None,
            })
            .collect();
        ensure!(
            !r.is_error,
            "the tool failed: {}",
            text.lines()
                .rev()
                .find(|l| !l.starts_with("[toolsrv"))
                .unwrap_or_default()
        );
        Ok::<_, anyhow::Error>(text)
    });
    let text = match ran {
        Ok(t) => t,
        Err(e) => {
            let log = srv.log_text();
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            for l in tail.iter().rev() {
                eprintln!("  log: {l}");
            }
            return Err(e);
        }
    };
    let (mut guard, mut plain) = (Vec::new(), Vec::new());
    for line in text.lines() {
        let mut w = line.split_whitespace();
        match (w.next(), w.next().and_then(|n| n.parse::<u64>().ok())) {
            (Some("guard"), Some(ns)) => guard.push(Duration::from_nanos(ns)),
            (Some("plain"), Some(ns)) => plain.push(Duration::from_nanos(ns)),
            _ => {}
        }
    }
    ensure!(
        guard.len() == iters && plain.len() == iters,
        "the tool's loop ended early: {}",
        text.lines().last().unwrap_or_default()
    );
    let base = Figure {
        name: "tool: create + unlink (baseline)".into(),
        summary: Summary::of(&plain).context("no samples")?,
    };
    let fig = Figure {
        name: "tool: create -> gone (guard)".into(),
        summary: Summary::of(&guard).context("no samples")?,
    };
    println!("{}", baseline_line(&base));
    println!("{}", time_line(&fig, &base, None));
    let p99 = percentile_of(&guard, 99).unwrap_or_default();
    println!(
        "  create -> gone p99 {:?} (goal p99 < {:?}: {})",
        p99,
        GOAL_P99,
        if p99 < GOAL_P99 { "met" } else { "not met" }
    );
    let quarantined = srv
        .log_text()
        .matches("moved what a tool made to quarantine")
        .count();
    println!("  quarantine log lines: {quarantined}");
    Ok(())
}
