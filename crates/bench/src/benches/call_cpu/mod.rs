//! `call-cpu`: the server's own CPU time per sync call, and the call's
//! latency, of two `toolsrv` binaries in the same run: the one under test
//! ([`Ctx::bin`], "after") and an older one given with `--before` ("before"),
//! beside a bare `posix_spawn` of the same program in the bench process.
//!
//! Each binary runs a sandboxed and a `--yolo` server (`--no-auth`, the
//! built-in policy) whose agent has loaded `true_exec` (`executable:
//! /bin/true`). Each call is pipelined as the independent C bench sends it
//! ([`crate::raw9p::Raw9p::call_tool`]). The subjects (bare, before, after) run in
//! interleaved blocks; around each of a server's blocks the CPU time of all
//! its threads is read from `/proc/<pid>/task/*/schedstat` (nanoseconds), so
//! every block gives a CPU per call, and the paired blocks of a round give a
//! ratio after/before that the machine's load moves much less than either
//! figure. Modes: one caller (sequential calls on one connection), then
//! [`CALLERS`] concurrent callers. Without `--before` only the current
//! binary is measured.

mod blocks;
mod print;

use std::path::Path;

use anyhow::{Context, Result};
use toolsrv_client::CallRequest;

use crate::agent::connect;
use crate::bare::PosixSpawn;
use crate::benches::{runtime, Ctx};
use crate::raw9p::Raw9p;
use crate::server::{ServerOpts, ServerProcess};
use crate::tooldir::{bench_tools_dir, TRUE_EXEC};

use blocks::{Plan, Subject};

/// Measured calls per figure at one caller unless `--iters` says otherwise.
pub const DEFAULT_ITERS: usize = 4_000;
/// Blocks per figure (fewer when fewer calls are measured).
pub const BLOCKS: usize = 20;
/// Unmeasured calls per caller and subject before the first block.
const WARMUP: usize = 50;
/// Concurrent callers of the second mode.
pub const CALLERS: usize = 8;
/// A block of the concurrent mode: each caller makes the one-caller block
/// divided by this (8 × 50 calls at the defaults).
const CONCURRENT_SHARE: usize = 4;
/// The agent every call runs as.
const AGENT: &str = "bench-cpu";
/// The program of the tool, and of the bare baseline.
const PROGRAM: &str = "/bin/true";

/// One binary under measurement: its label and path.
#[derive(Debug, Clone, Copy)]
pub struct Build<'a> {
    /// `before` or `after` (`current` when there is no `--before`).
    pub label: &'static str,
    /// The `toolsrv` binary.
    pub bin: &'a Path,
}

/// Run `call-cpu`.
pub fn run(ctx: &Ctx) -> Result<()> {
    let iters = ctx.iters.unwrap_or(DEFAULT_ITERS);
    let blocks = BLOCKS.min(iters);
    let block = iters / blocks;
    let builds: Vec<Build> = match &ctx.before {
        Some(b) => vec![
            Build {
                label: "before",
                bin: b,
            },
            Build {
                label: "after",
                bin: &ctx.bin,
            },
        ],
        None => vec![Build {
            label: "current",
            bin: &ctx.bin,
        }],
    };
    let tools = bench_tools_dir("toolsrv-bench-tools")?;
    let bare = PosixSpawn::new(&[PROGRAM])?;
    let payload = CallRequest::new(TRUE_EXEC, AGENT).encode().into_bytes();
    for yolo in [false, true] {
        let servers = builds
            .iter()
            .map(|b| start(b, tools.path(), yolo))
            .collect::<Result<Vec<_>>>()?;
        let mode = if yolo { "--yolo" } else { "sandboxed" };
        for &flavour in &ctx.flavours {
            let rt = runtime(flavour).context("cannot start the tokio runtime")?;
            for callers in [1, CALLERS] {
                let plan = Plan {
                    callers,
                    per_caller: if callers == 1 {
                        block
                    } else {
                        (block / CONCURRENT_SHARE).max(1)
                    },
                    blocks,
                    warmup: WARMUP.min(iters),
                };
                print::header(mode, &builds, &servers, &plan, flavour);
                let measured = rt.block_on(async {
                    let mut subjects = Vec::with_capacity(servers.len());
                    for (b, s) in builds.iter().zip(&servers) {
                        subjects.push(Subject {
                            pid: s.pid(),
                            conns: dial(s, callers, b.label).await?,
                        });
                    }
                    blocks::measure(&bare, &mut subjects, &payload, &plan).await
                })?;
                print::mode(mode, &builds, &plan, &measured)?;
            }
        }
    }
    if ctx.before.is_none() {
        println!(
            "\n   no --before: pass --before <path-to-an-older-toolsrv-binary> to measure it beside this one, block by block"
        );
    }
    Ok(())
}

/// Start `build`'s server (`--no-auth`, sandboxed unless `yolo`) on the
/// tools in `tools`, and load `true_exec` for the bench's agent.
fn start(build: &Build, tools: &Path, yolo: bool) -> Result<ServerProcess> {
    let opts = ServerOpts {
        auth: false,
        yolo,
        tools: Some(tools.to_path_buf()),
        ..ServerOpts::default()
    };
    let srv = ServerProcess::start_with(build.bin, &opts).with_context(|| {
        format!(
            "cannot start the {} server ({})",
            build.label,
            build.bin.display()
        )
    })?;
    let rt =
        runtime(crate::args::Flavour::CurrentThread).context("cannot start the tokio runtime")?;
    rt.block_on(connect(&srv, false, AGENT, &[TRUE_EXEC]))
        .with_context(|| format!("cannot load {TRUE_EXEC} on the {} server", build.label))?;
    Ok(srv)
}

/// `n` raw connections to `srv`.
async fn dial(srv: &ServerProcess, n: usize, label: &str) -> Result<Vec<Raw9p>> {
    let mut conns = Vec::with_capacity(n);
    for _ in 0..n {
        conns.push(
            Raw9p::connect(srv.socket(), None)
                .await
                .with_context(|| format!("cannot connect to the {label} server"))?,
        );
    }
    Ok(conns)
}
