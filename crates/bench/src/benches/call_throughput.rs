//! `call-throughput` (part (b) of `call`): calls per second of `true_exec`
//! (`/bin/true`) with 2, 8 and 32 concurrent agents, each a task with its own
//! agent ID and connection, against the `--yolo` and the sandboxed server,
//! beside a bare spawn loop (`std::process::Command` of `/bin/true`) on as
//! many threads. Each round makes a fixed number of calls; the rounds of the
//! three figures are interleaved and each figure's median rate is reported.
//! Goal: at least 0.8x the bare rate.

use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use toolsrv_client::{CallRequest, Client};

use crate::agent::{call_ok, connect};
use crate::bare::{command, cpu_time};
use crate::benches::call::{Servers, TOOLS};
use crate::benches::{runtime, Ctx};
use crate::report::{human, median_f64, rate_line, Target};
use crate::tooldir::TRUE_EXEC;

/// Concurrency levels.
pub const LEVELS: &[usize] = &[2, 8, 32];
/// Calls per round unless `--iters` says otherwise.
pub const DEFAULT_CALLS: usize = 1_024;
/// Rounds per figure.
pub const ROUNDS: usize = 11;
/// Goal: the toolsrv rate at least this fraction of the bare rate.
pub const GOAL: Target = Target::AtLeast(0.8);

/// Run part (b) on its own servers.
pub fn run(ctx: &Ctx) -> Result<()> {
    let calls = ctx.iters.unwrap_or(DEFAULT_CALLS);
    let servers = Servers::start(ctx)?;
    for &flavour in &ctx.flavours {
        let rt = runtime(flavour).context("cannot start the tokio runtime")?;
        for &level in LEVELS {
            let per = calls.div_ceil(level);
            println!(
                "\n== call-throughput: {level} concurrent agents, {} calls of {TRUE_EXEC} per round ({per} each), {ROUNDS} rounds per figure, interleaved; client runtime {}",
                per * level,
                flavour.name()
            );
            let cpu0 = [
                cpu_time(servers.yolo.pid())?,
                cpu_time(servers.sandboxed.pid())?,
            ];
            let (bare, yolo, sand) = rt.block_on(measure(&servers, level, per))?;
            let cpu1 = [
                cpu_time(servers.yolo.pid())?,
                cpu_time(servers.sandboxed.pid())?,
            ];
            let bare_name = format!("bare Command x{level}");
            println!(
                "{:<34} {bare:>10.1} calls/s",
                format!("{bare_name} /bin/true")
            );
            for (name, rate) in [
                (format!("call x{level} (--yolo)"), yolo),
                (format!("call x{level} (sandboxed)"), sand),
            ] {
                println!(
                    "{}",
                    rate_line(&name, rate, &bare_name, bare, "calls/s", Some(GOAL))
                );
            }
            let calls = (ROUNDS * per + 2) * level;
            for (i, name) in ["--yolo", "sandboxed"].iter().enumerate() {
                let own = cpu1[i].0.saturating_sub(cpu0[i].0);
                let kids = cpu1[i].1.saturating_sub(cpu0[i].1);
                println!(
                    "   split: {name} server CPU per call {} own + {} in its tools (over {calls} calls)",
                    human(own / calls as u32),
                    human(kids / calls as u32)
                );
            }
        }
    }
    Ok(())
}

/// Median rates (calls/s) of bare, `--yolo` and sandboxed rounds.
async fn measure(s: &Servers, level: usize, per: usize) -> Result<(f64, f64, f64)> {
    let mut yolo = Vec::with_capacity(level);
    let mut sand = Vec::with_capacity(level);
    for k in 0..level {
        let agent = format!("bench-agent-{k}");
        yolo.push((
            connect(&s.yolo, true, &agent, TOOLS).await?,
            CallRequest::new(TRUE_EXEC, &agent),
        ));
        sand.push((
            connect(&s.sandboxed, true, &agent, TOOLS).await?,
            CallRequest::new(TRUE_EXEC, &agent),
        ));
    }
    // Warm up: one short round each.
    bare_round(level, 2)?;
    agents_round(&yolo, 2).await?;
    agents_round(&sand, 2).await?;
    let total = (level * per) as f64;
    let (mut rb, mut ry, mut rs) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        rb.push(total / bare_round(level, per)?.as_secs_f64());
        ry.push(total / agents_round(&yolo, per).await?.as_secs_f64());
        rs.push(total / agents_round(&sand, per).await?.as_secs_f64());
    }
    let m = |v: &[f64]| median_f64(v).ok_or_else(|| anyhow!("no rounds"));
    Ok((m(&rb)?, m(&ry)?, m(&rs)?))
}

/// `level` threads each run `/bin/true` `per` times; the wall time of all.
pub fn bare_round(level: usize, per: usize) -> Result<Duration> {
    let t = Instant::now();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..level)
            .map(|_| {
                scope.spawn(move || -> Result<()> {
                    for _ in 0..per {
                        command(&["/bin/true"])?;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join()
                .map_err(|_| anyhow!("a bare spawn thread panicked"))??;
        }
        Ok::<(), anyhow::Error>(())
    })?;
    Ok(t.elapsed())
}

/// Every agent makes `per` sequential calls, each agent its own tokio task,
/// all concurrently; the wall time of all.
pub async fn agents_round(agents: &[(Client, CallRequest)], per: usize) -> Result<Duration> {
    let t = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for (c, r) in agents {
        let (c, r) = (c.clone(), r.clone());
        set.spawn(async move {
            for _ in 0..per {
                call_ok(&c, &r).await?;
            }
            Ok::<(), anyhow::Error>(())
        });
    }
    while let Some(r) = set.join_next().await {
        r.context("an agent task failed")??;
    }
    Ok(t.elapsed())
}
