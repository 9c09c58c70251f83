//! `domains`: what `network.domains` costs a call (docs/network.md): the
//! sync call round trip of `true_exec` (`/bin/true`) on a server whose
//! policy is the built-in one plus `network.domains: [pypi.org,
//! github.com:22]` (each run in a network namespace of its own, its proxy,
//! capture listeners and DNS stub served), beside the same server policy
//! without `domains`, interleaved, and bare `fork`+`exec` of `/bin/true`.
//! Goal: at most 1.05x (issue 37).

use std::path::Path;
use std::process::Command;

use anyhow::{ensure, Context, Result};
use toolsrv_client::CallRequest;

use crate::agent::connect;
use crate::benches::call::{interleaved, Op};
use crate::benches::fixtures::TOOLS;
use crate::benches::{runtime, Ctx};
use crate::report::{baseline_line, time_line, Target};
use crate::server::{ServerOpts, ServerProcess};
use crate::tooldir::{bench_tools_dir, TRUE_EXEC};

/// Measured calls per figure unless `--iters` says otherwise.
pub const DEFAULT_ITERS: usize = 1_000;
/// Under `domains` vs without.
pub const GOAL: Target = Target::AtMost(1.05);

/// Run `domains`.
pub fn run(ctx: &Ctx) -> Result<()> {
    let iters = ctx.iters.unwrap_or(DEFAULT_ITERS);
    let dir = tempfile::tempdir()?;
    let plain = policy(&ctx.bin, dir.path(), "plain", None)?;
    let listed = policy(
        &ctx.bin,
        dir.path(),
        "domains",
        Some("[pypi.org, \"github.com:22\"]"),
    )?;
    let tools = bench_tools_dir("toolsrv-bench-tools")?;
    let start = |file: String| {
        ServerProcess::start_with(
            &ctx.bin,
            &ServerOpts {
                auth: true,
                tools: Some(tools.path().to_path_buf()),
                extra: vec!["--sandbox", Box::leak(file.into_boxed_str())],
                ..ServerOpts::default()
            },
        )
    };
    let without = start(plain)?;
    let with = start(listed)?;
    let rt = runtime(ctx.flavours[0]).context("cannot start the tokio runtime")?;
    println!(
        "\n== domains: call {TRUE_EXEC} (/bin/true) under network.domains (pid {}) vs the same policy without (pid {}); {iters} calls per figure after 100 warm-up, interleaved in blocks of 50",
        with.pid(),
        without.pid()
    );
    rt.block_on(async {
        const AGENT: &str = "bench-domains";
        let a = connect(&without, true, AGENT, TOOLS).await?;
        let b = connect(&with, true, AGENT, TOOLS).await?;
        let req = CallRequest::new(TRUE_EXEC, AGENT);
        let argv: &[&str] = &["/bin/true"];
        let ops = [
            ("bare Command /bin/true", Op::Command(argv)),
            ("call true_exec (no domains)", Op::Call(&a, &req)),
            ("call true_exec (network.domains)", Op::Call(&b, &req)),
        ];
        let figs = interleaved(&ops, 100.min(iters), iters, 50).await?;
        println!("{}", baseline_line(&figs[0]));
        println!("{}", time_line(&figs[1], &figs[0], None));
        println!("{}", time_line(&figs[2], &figs[0], None));
        println!(
            "{}   [ratio = under network.domains / without]",
            time_line(&figs[2], &figs[1], Some(GOAL))
        );
        Ok(())
    })
}

/// The built-in policy (as `toolsrv init` writes it), with `domains` when
/// given, written to `<dir>/<name>/sandbox.yaml`; its path.
fn policy(bin: &Path, dir: &Path, name: &str, domains: Option<&str>) -> Result<String> {
    let at = dir.join(name);
    let out = Command::new(bin)
        .args(["init", "--dir"])
        .arg(&at)
        .output()
        .context("toolsrv init")?;
    ensure!(out.status.success(), "toolsrv init failed: {out:?}");
    let file = at.join("sandbox.yaml");
    let text = std::fs::read_to_string(&file)?;
    let text = match domains {
        Some(d) => {
            let marker = "\n  domains: []";
            ensure!(
                text.contains(marker),
                "no \"domains: []\" line in the built-in policy"
            );
            text.replacen(marker, &format!("\n  domains: {d}"), 1)
        }
        None => text,
    };
    std::fs::write(&file, text)?;
    Ok(file.display().to_string())
}
