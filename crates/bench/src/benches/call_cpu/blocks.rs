//! The interleaved blocks of `call-cpu`: bare spawns and calls to each
//! server in turn, the server's CPU read around each of its blocks.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, ensure, Context, Result};

use crate::bare::{cpu_time, PosixSpawn};
use crate::raw9p::Raw9p;
use crate::sched::process_cpu;

/// How one mode is measured.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Concurrent callers (each its own connection, or bare thread).
    pub callers: usize,
    /// Calls per caller in one block.
    pub per_caller: usize,
    /// Blocks per subject.
    pub blocks: usize,
    /// Unmeasured calls per caller first.
    pub warmup: usize,
}

impl Plan {
    /// Calls in one block.
    pub fn block_calls(&self) -> usize {
        self.callers * self.per_caller
    }
}

/// A server under measurement: its pid and one connection per caller.
pub struct Subject {
    /// The server's pid (its threads' CPU is read around each block).
    pub pid: u32,
    /// One connection per caller.
    pub conns: Vec<Raw9p>,
}

/// One measured block.
#[derive(Debug, Clone, Copy)]
pub struct Block {
    /// Calls made.
    pub calls: usize,
    /// Wall time of the whole block.
    pub wall: Duration,
    /// The server's CPU time during the block (`None` for bare spawns).
    pub cpu: Option<Duration>,
}

impl Block {
    /// Calls per second.
    pub fn rate(&self) -> f64 {
        self.calls as f64 / self.wall.as_secs_f64().max(1e-9)
    }

    /// The server's CPU per call, if this was a server's block.
    pub fn cpu_per_call(&self) -> Option<Duration> {
        self.cpu.map(|c| c / self.calls.max(1) as u32)
    }
}

/// What one subject's blocks measured.
#[derive(Debug, Default)]
pub struct Tally {
    /// Every call's latency.
    pub latencies: Vec<Duration>,
    /// The blocks, in round order.
    pub blocks: Vec<Block>,
    /// From before the first block to after the last (all subjects' blocks
    /// in between): the server's utime + stime (`/proc/<pid>/stat`, clock
    /// ticks) and its live threads' CPU (`schedstat`), for a cross-check.
    pub span: Option<Span>,
}

/// A server's CPU over the whole measurement, read two ways.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    /// utime + stime from `/proc/<pid>/stat` (10 ms ticks; exited threads counted).
    pub stat: Duration,
    /// The sum over `/proc/<pid>/task/*/schedstat` (nanoseconds; live threads only).
    pub schedstat: Duration,
}

/// The bare baseline's tally and each server's, in the order given.
pub struct Measured {
    /// Bare `posix_spawn`.
    pub bare: Tally,
    /// One per server.
    pub servers: Vec<Tally>,
}

/// Warm every subject up, then run `plan.blocks` rounds; each round runs a
/// block of the bare spawn and of each server, starting with a different
/// subject each round.
pub async fn measure(
    bare: &PosixSpawn,
    servers: &mut [Subject],
    payload: &[u8],
    plan: &Plan,
) -> Result<Measured> {
    let payload: Arc<[u8]> = payload.into();
    bare_block(bare, plan.callers, plan.warmup)?;
    for s in servers.iter_mut() {
        call_block(s, &payload, plan.callers, plan.warmup).await?;
    }
    let start = servers
        .iter()
        .map(|s| span_now(s.pid))
        .collect::<Result<Vec<_>>>()?;
    let mut m = Measured {
        bare: Tally::default(),
        servers: servers.iter().map(|_| Tally::default()).collect(),
    };
    let subjects = servers.len() + 1;
    for round in 0..plan.blocks {
        for k in 0..subjects {
            match (round + k) % subjects {
                0 => {
                    let t = Instant::now();
                    let lat = bare_block(bare, plan.callers, plan.per_caller)?;
                    m.bare.blocks.push(Block {
                        calls: lat.len(),
                        wall: t.elapsed(),
                        cpu: None,
                    });
                    m.bare.latencies.extend(lat);
                }
                i => {
                    let s = &mut servers[i - 1];
                    let cpu0 = server_cpu(s.pid)?;
                    let t = Instant::now();
                    let lat = call_block(s, &payload, plan.callers, plan.per_caller).await?;
                    let wall = t.elapsed();
                    let cpu = server_cpu(s.pid)?.saturating_sub(cpu0);
                    let tally = &mut m.servers[i - 1];
                    tally.blocks.push(Block {
                        calls: lat.len(),
                        wall,
                        cpu: Some(cpu),
                    });
                    tally.latencies.extend(lat);
                }
            }
        }
    }
    for ((s, t), (stat0, sched0)) in servers.iter().zip(&mut m.servers).zip(start) {
        let (stat1, sched1) = span_now(s.pid)?;
        t.span = Some(Span {
            stat: stat1.saturating_sub(stat0),
            schedstat: sched1.saturating_sub(sched0),
        });
    }
    Ok(m)
}

/// The server's CPU so far, from its threads' `schedstat`.
fn server_cpu(pid: u32) -> Result<Duration> {
    process_cpu(pid).with_context(|| format!("cannot read /proc/{pid}/task/*/schedstat"))
}

/// The server's utime + stime and its threads' `schedstat` CPU so far.
fn span_now(pid: u32) -> Result<(Duration, Duration)> {
    let (own, _) = cpu_time(pid).with_context(|| format!("cannot read /proc/{pid}/stat"))?;
    Ok((own, server_cpu(pid)?))
}

/// `callers` threads (or this one, for one) each `posix_spawn` and wait for
/// the program `per` times; every run's latency.
fn bare_block(bare: &PosixSpawn, callers: usize, per: usize) -> Result<Vec<Duration>> {
    let one = || -> Result<Vec<Duration>> {
        let mut lat = Vec::with_capacity(per);
        for _ in 0..per {
            let t = Instant::now();
            bare.run()?;
            lat.push(t.elapsed());
        }
        Ok(lat)
    };
    if callers == 1 {
        return one();
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..callers).map(|_| scope.spawn(one)).collect();
        let mut all = Vec::with_capacity(callers * per);
        for h in handles {
            all.extend(
                h.join()
                    .map_err(|_| anyhow!("a bare spawn thread panicked"))??,
            );
        }
        Ok(all)
    })
}

/// Each of `s`'s first `callers` connections makes `per` sequential calls,
/// each connection its own task, all at once; every call's latency.
async fn call_block(
    s: &mut Subject,
    payload: &Arc<[u8]>,
    callers: usize,
    per: usize,
) -> Result<Vec<Duration>> {
    ensure!(s.conns.len() >= callers, "fewer connections than callers");
    if callers == 1 {
        return calls(&mut s.conns[0], payload, per).await;
    }
    let mut set = tokio::task::JoinSet::new();
    for (i, mut conn) in s.conns.drain(..callers).enumerate() {
        let payload = payload.clone();
        set.spawn(async move {
            let lat = calls(&mut conn, &payload, per).await;
            (i, conn, lat)
        });
    }
    let mut back: Vec<Option<Raw9p>> = (0..callers).map(|_| None).collect();
    let mut all = Vec::with_capacity(callers * per);
    let mut failed = None;
    while let Some(r) = set.join_next().await {
        let (i, conn, lat) = r.context("a caller task failed")?;
        back[i] = Some(conn);
        match lat {
            Ok(l) => all.extend(l),
            Err(e) => failed = Some(e),
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    let mut conns: Vec<Raw9p> = back.into_iter().flatten().collect();
    conns.append(&mut s.conns);
    s.conns = conns;
    Ok(all)
}

/// `per` sequential calls on `conn`, each checked; their latencies.
async fn calls(conn: &mut Raw9p, payload: &[u8], per: usize) -> Result<Vec<Duration>> {
    let mut lat = Vec::with_capacity(per);
    for _ in 0..per {
        let t = Instant::now();
        let result = conn.call_tool(payload).await?;
        lat.push(t.elapsed());
        check_result(&result)?;
    }
    Ok(lat)
}

/// A call's result must be a success: JSON with `content`, not `isError: true`.
fn check_result(result: &[u8]) -> Result<()> {
    let text = String::from_utf8_lossy(result);
    ensure!(
        text.contains("\"content\"") && !text.contains("\"isError\":true"),
        "the call did not succeed: {text}"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_must_be_a_success() {
        check_result(br#"{"content":[],"isError":false}"#).expect("success");
        check_result(br#"{"content":[]}"#).expect("success");
        assert!(check_result(br#"{"content":[],"isError":true}"#).is_err());
        assert!(check_result(b"").is_err());
    }

    #[test]
    fn a_block_gives_rate_and_cpu_per_call() {
        let b = Block {
            calls: 200,
            wall: Duration::from_millis(100),
            cpu: Some(Duration::from_millis(30)),
        };
        assert!((b.rate() - 2000.0).abs() < 1e-6);
        assert_eq!(b.cpu_per_call(), Some(Duration::from_micros(150)));
        let bare = Block { cpu: None, ..b };
        assert_eq!(bare.cpu_per_call(), None);
        let plan = Plan {
            callers: 8,
            per_caller: 50,
            blocks: 20,
            warmup: 50,
        };
        assert_eq!(plan.block_calls(), 400);
    }
}
