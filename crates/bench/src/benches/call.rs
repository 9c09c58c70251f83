//! `call` (a): the sync round trip of a trivial tool through the client
//! library (`Client::call` on `proc/new`), against a `--yolo` server and a
//! sandboxed (default) one, beside a bare fork+exec+wait of the same command
//! in the bench process, all measured interleaved in the same run:
//!
//! - `true_sh`: a metadata-only tool `command: "true"`, which runs `/bin/sh -c true`;
//! - `true_exec`: a tool whose program is `/bin/true` (`executable: /bin/true`).
//!
//! Baselines: `std::process::Command` (output captured through pipes, as the
//! server does) and `posix_spawn` with stdio inherited. Goals: the `--yolo`
//! call at most 1.3x the bare `Command` run; sandboxed at most 1.15x `--yolo`.
//! The `call` bench runs this part (`call-rtt`), then `call-throughput` and
//! `call-stream` (see [`crate::benches`]).

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use toolsrv_client::{CallRequest, Client};

use crate::agent::{call_ok, connect};
use crate::bare::{command, cpu_time, PosixSpawn};
use crate::benches::fixtures::{Servers, TOOLS};
use crate::benches::{runtime, Ctx};
use crate::report::{baseline_line, human, time_line, Figure, Target};
use crate::stats::Summary;
use crate::tooldir::{TRUE_EXEC, TRUE_SH};

/// Measured calls per figure unless `--iters` says otherwise.
pub const DEFAULT_ITERS: usize = 2_000;
/// Unmeasured calls per figure first (fewer when fewer are measured).
const WARMUP: usize = 100;
/// Figures are measured interleaved in blocks of this many calls.
const BLOCK: usize = 50;
/// `--yolo` call vs bare fork+exec+wait.
pub const GOAL_VS_BARE: Target = Target::AtMost(1.3);
/// Sandboxed call vs `--yolo` call.
pub const GOAL_SANDBOX: Target = Target::AtMost(1.15);
/// Sandboxed call vs the same without containment (kernel groups, limits).
pub const GOAL_CONTAINMENT: Target = Target::AtMost(1.15);
/// Sandboxed call vs the same without the tools PID namespace.
pub const GOAL_TOOLS_NS: Target = Target::AtMost(1.05);
/// Sandboxed (and contained) call vs bare fork+exec+wait.
pub const GOAL_SANDBOXED_VS_BARE: Target = Target::AtMost(1.3);

/// Part (a): sync call round trips.
pub fn run(ctx: &Ctx) -> Result<()> {
    let iters = ctx.iters.unwrap_or(DEFAULT_ITERS);
    let warmup = WARMUP.min(iters);
    let servers = Servers::start(ctx)?;
    for &flavour in &ctx.flavours {
        println!(
            "\n== call: sync round trip of a trivial tool; servers --yolo (pid {}) and sandboxed (pid {}), auth on; client runtime {}; {iters} calls per figure after {warmup} warm-up, interleaved in blocks of {BLOCK}",
            servers.yolo.pid(),
            servers.sandboxed.pid(),
            flavour.name()
        );
        let rt = runtime(flavour).context("cannot start the tokio runtime")?;
        let cpu0 = [
            cpu_time(servers.yolo.pid())?,
            cpu_time(servers.sandboxed.pid())?,
        ];
        let f = rt.block_on(measure(&servers, warmup, iters))?;
        let cpu1 = [
            cpu_time(servers.yolo.pid())?,
            cpu_time(servers.sandboxed.pid())?,
        ];
        for (label, k) in [("/bin/sh -c true", &f.sh), ("/bin/true", &f.exec)] {
            println!("-- {label}");
            println!("{}", baseline_line(&k.command));
            println!("{}", time_line(&k.posix, &k.command, None));
            println!("{}", time_line(&k.yolo, &k.command, Some(GOAL_VS_BARE)));
            println!("{}", time_line(&k.yolo, &k.posix, None));
            println!("{}", time_line(&k.sandboxed, &k.yolo, Some(GOAL_SANDBOX)));
            println!(
                "{}",
                time_line(&k.sandboxed, &k.command, Some(GOAL_SANDBOXED_VS_BARE))
            );
            println!(
                "{}",
                time_line(&k.sandboxed, &k.uncontained, Some(GOAL_CONTAINMENT))
            );
            println!(
                "{}   [ratio = with the tools PID namespace / without it]",
                time_line(&k.sandboxed, &k.no_tools_ns, Some(GOAL_TOOLS_NS))
            );
        }
        print_splits(&cpu0, &cpu1, 2 * (warmup + iters))?;
    }
    Ok(())
}

/// Where a call's time goes, as far as the outside can tell: the servers' CPU
/// per call (own, and their reaped children's, i.e. the tools').
fn print_splits(
    cpu0: &[(Duration, Duration); 2],
    cpu1: &[(Duration, Duration); 2],
    calls: usize,
) -> Result<()> {
    let per = |a: Duration, b: Duration| human(b.saturating_sub(a) / calls.max(1) as u32);
    for (i, name) in ["--yolo", "sandboxed"].iter().enumerate() {
        println!(
            "   split: {name} server CPU per call {} own + {} in its tools (over {calls} calls; 10 ms ticks)",
            per(cpu0[i].0, cpu1[i].0),
            per(cpu0[i].1, cpu1[i].1)
        );
    }
    Ok(())
}

/// The figures for one command.
struct Kind {
    command: Figure,
    posix: Figure,
    yolo: Figure,
    sandboxed: Figure,
    uncontained: Figure,
    no_tools_ns: Figure,
}

struct Figures {
    sh: Kind,
    exec: Kind,
}

/// One measured operation: a bare run or a call.
pub enum Op<'a> {
    /// A bare `Command` run of an argv.
    Command(&'a [&'a str]),
    /// A bare `posix_spawn` run.
    Posix(&'a PosixSpawn),
    /// A sync call that must succeed.
    Call(&'a Client, &'a CallRequest),
}

impl Op<'_> {
    /// Run it once; how long it took.
    pub async fn once(&self) -> Result<Duration> {
        let t = Instant::now();
        match self {
            Op::Command(argv) => command(argv)?,
            Op::Posix(p) => p.run()?,
            Op::Call(c, r) => call_ok(c, r).await?,
        }
        Ok(t.elapsed())
    }
}

async fn measure(s: &Servers, warmup: usize, iters: usize) -> Result<Figures> {
    const AGENT: &str = "bench-call";
    let yolo = connect(&s.yolo, true, AGENT, TOOLS).await?;
    let sand = connect(&s.sandboxed, true, AGENT, TOOLS).await?;
    let bare_sand = connect(&s.uncontained, true, AGENT, TOOLS).await?;
    let no_ns = connect(&s.no_tools_ns, true, AGENT, TOOLS).await?;
    let sh_argv: &[&str] = &["/bin/sh", "-c", "true"];
    let true_argv: &[&str] = &["/bin/true"];
    let sh_posix = PosixSpawn::new(sh_argv)?;
    let true_posix = PosixSpawn::new(true_argv)?;
    let sh_req = CallRequest::new(TRUE_SH, AGENT);
    let exec_req = CallRequest::new(TRUE_EXEC, AGENT);
    let ops = [
        ("bare Command /bin/sh -c true", Op::Command(sh_argv)),
        ("bare posix_spawn /bin/sh -c true", Op::Posix(&sh_posix)),
        ("call true_sh (--yolo)", Op::Call(&yolo, &sh_req)),
        ("call true_sh (sandboxed)", Op::Call(&sand, &sh_req)),
        (
            "call true_sh (sandboxed, no containment)",
            Op::Call(&bare_sand, &sh_req),
        ),
        (
            "call true_sh (sandboxed, no tools PID namespace)",
            Op::Call(&no_ns, &sh_req),
        ),
        ("bare Command /bin/true", Op::Command(true_argv)),
        ("bare posix_spawn /bin/true", Op::Posix(&true_posix)),
        ("call true_exec (--yolo)", Op::Call(&yolo, &exec_req)),
        ("call true_exec (sandboxed)", Op::Call(&sand, &exec_req)),
        (
            "call true_exec (sandboxed, no containment)",
            Op::Call(&bare_sand, &exec_req),
        ),
        (
            "call true_exec (sandboxed, no tools PID namespace)",
            Op::Call(&no_ns, &exec_req),
        ),
    ];
    let mut figs = interleaved(&ops, warmup, iters, BLOCK).await?.into_iter();
    let mut next = || figs.next().context("a figure is missing");
    Ok(Figures {
        sh: Kind {
            command: next()?,
            posix: next()?,
            yolo: next()?,
            sandboxed: next()?,
            uncontained: next()?,
            no_tools_ns: next()?,
        },
        exec: Kind {
            command: next()?,
            posix: next()?,
            yolo: next()?,
            sandboxed: next()?,
            uncontained: next()?,
            no_tools_ns: next()?,
        },
    })
}

/// Warm each op up, then time each `iters` times, interleaved in blocks of
/// `block`; one figure per op, in order.
pub async fn interleaved(
    ops: &[(&str, Op<'_>)],
    warmup: usize,
    iters: usize,
    block: usize,
) -> Result<Vec<Figure>> {
    for (_, op) in ops {
        for _ in 0..warmup {
            op.once().await?;
        }
    }
    let mut samples: Vec<Vec<Duration>> = ops.iter().map(|_| Vec::with_capacity(iters)).collect();
    let mut done = 0;
    while done < iters {
        let n = block.min(iters - done);
        for ((_, op), s) in ops.iter().zip(samples.iter_mut()) {
            for _ in 0..n {
                s.push(op.once().await?);
            }
        }
        done += n;
    }
    ops.iter()
        .zip(samples)
        .map(|((name, _), s)| figure(name, &s))
        .collect()
}

/// A figure from samples.
pub fn figure(name: &str, samples: &[Duration]) -> Result<Figure> {
    let summary = Summary::of(samples).with_context(|| format!("no samples for {name}"))?;
    Ok(Figure {
        name: name.into(),
        summary,
    })
}
