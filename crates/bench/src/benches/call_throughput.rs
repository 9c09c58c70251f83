//! `call-throughput` (part (b) of `call`): calls per second of `true_exec`
//! (`/bin/true`) with 2, 8 and 32 concurrent agents, each a task with its own
//! agent ID and connection, against the `--yolo` and the sandboxed server,
//! beside a bare spawn loop (`std::process::Command` of `/bin/true`) on as
//! many threads. Each round makes a fixed number of calls; the rounds of the
//! three figures are interleaved and each figure's median rate is reported,
//! with the servers' CPU per call, the time client, server and bare threads
//! spent waiting for a CPU, and how idle the machine was (see `sched`).
//! Goal: at least 0.8x the bare rate.

use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use toolsrv_client::{CallRequest, Client};

use crate::agent::{call_ok, connect};
use crate::bare::{command, cpu_time};
use crate::benches::fixtures::{Servers, TOOLS};
use crate::benches::{runtime, Ctx};
use crate::report::{human, median_f64, rate_line, Target};
use crate::sched::{process_wait, thread_wait, CpuTicks};
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
            let m = rt.block_on(measure(&servers, level, per))?;
            let cpu1 = [
                cpu_time(servers.yolo.pid())?,
                cpu_time(servers.sandboxed.pid())?,
            ];
            let bare_name = format!("bare Command x{level}");
            let bare = m.bare.rate()?;
            println!(
                "{:<34} {bare:>10.1} calls/s",
                format!("{bare_name} /bin/true")
            );
            for (name, t) in [
                (format!("call x{level} (--yolo)"), &m.yolo),
                (format!("call x{level} (sandboxed)"), &m.sandboxed),
            ] {
                println!(
                    "{}",
                    rate_line(&name, t.rate()?, &bare_name, bare, "calls/s", Some(GOAL))
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
            println!(
                "   waiting for a CPU, per call: bare threads {}; --yolo client {} + server {}; sandboxed client {} + server {}",
                human(m.bare.client_wait_per_call()),
                human(m.yolo.client_wait_per_call()),
                human(m.yolo.server_wait_per_call()),
                human(m.sandboxed.client_wait_per_call()),
                human(m.sandboxed.server_wait_per_call()),
            );
            println!(
                "   CPUs idle during the rounds: bare {:.0} %, --yolo {:.0} %, sandboxed {:.0} %",
                m.bare.idle.idle_percent(),
                m.yolo.idle.idle_percent(),
                m.sandboxed.idle.idle_percent(),
            );
        }
    }
    Ok(())
}

/// What the rounds of one figure measured.
#[derive(Debug, Default)]
struct Tally {
    /// Calls per second of each round.
    rates: Vec<f64>,
    /// Calls made in all rounds.
    calls: u32,
    /// Time the client threads (bare: the spawning threads) waited on a run queue.
    client_wait: Duration,
    /// Time the server's threads waited on a run queue (bare: none).
    server_wait: Duration,
    /// The machine's CPU time during the rounds, and how much of it was idle.
    idle: CpuTicks,
}

impl Tally {
    fn rate(&self) -> Result<f64> {
        median_f64(&self.rates).ok_or_else(|| anyhow!("no rounds"))
    }

    fn client_wait_per_call(&self) -> Duration {
        self.client_wait / self.calls.max(1)
    }

    fn server_wait_per_call(&self) -> Duration {
        self.server_wait / self.calls.max(1)
    }
}

/// The three figures of one concurrency level.
struct Measured {
    bare: Tally,
    yolo: Tally,
    sandboxed: Tally,
}

/// Rounds of bare, `--yolo` and sandboxed calls, interleaved.
async fn measure(s: &Servers, level: usize, per: usize) -> Result<Measured> {
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
    let calls = level * per;
    let mut m = Measured {
        bare: Tally::default(),
        yolo: Tally::default(),
        sandboxed: Tally::default(),
    };
    for _ in 0..ROUNDS {
        let idle0 = CpuTicks::now()?;
        let (took, wait) = bare_round(level, per)?;
        m.bare.idle.add(CpuTicks::now()?.since(idle0));
        m.bare.client_wait += wait;
        m.bare.rates.push(calls as f64 / took.as_secs_f64());
        m.bare.calls += calls as u32;
        for (agents, srv, t) in [
            (&yolo, &s.yolo, &mut m.yolo),
            (&sand, &s.sandboxed, &mut m.sandboxed),
        ] {
            let (client0, server0) = (process_wait(None)?, process_wait(Some(srv.pid()))?);
            let idle0 = CpuTicks::now()?;
            let took = agents_round(agents, per).await?;
            t.idle.add(CpuTicks::now()?.since(idle0));
            t.client_wait += process_wait(None)?.saturating_sub(client0);
            t.server_wait += process_wait(Some(srv.pid()))?.saturating_sub(server0);
            t.rates.push(calls as f64 / took.as_secs_f64());
            t.calls += calls as u32;
        }
    }
    Ok(m)
}

/// `level` threads each run `/bin/true` `per` times; the wall time of all,
/// and how long those threads waited on a run queue in total.
pub fn bare_round(level: usize, per: usize) -> Result<(Duration, Duration)> {
    let t = Instant::now();
    let waited = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..level)
            .map(|_| {
                scope.spawn(move || -> Result<Duration> {
                    let w0 = thread_wait()?;
                    for _ in 0..per {
                        command(&["/bin/true"])?;
                    }
                    Ok(thread_wait()?.saturating_sub(w0))
                })
            })
            .collect();
        let mut waited = Duration::ZERO;
        for h in handles {
            waited += h
                .join()
                .map_err(|_| anyhow!("a bare spawn thread panicked"))??;
        }
        Ok::<Duration, anyhow::Error>(waited)
    })?;
    Ok((t.elapsed(), waited))
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
