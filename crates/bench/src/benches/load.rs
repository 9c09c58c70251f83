//! `load`: 32 agents, each making 1,000 mixed calls (70 % synchronous, 10 %
//! background then waited for, 10 % cancelled after 20 ms, 10 % timed out
//! after 50 ms) against the sandboxed server while a hostile client keeps 100
//! idle, never-authenticated connections open (reopening those the server
//! closes at its auth timeout). Prints the failures, the zombies left, the
//! server's descriptors against its idle baseline once everyone has left,
//! and its peak RSS beside the idle server's. Goal: 0 failures, 0 zombies,
//! descriptors back to baseline. `--iters N`: N calls per agent.

use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use toolsrv_client::{CallRequest, Client};

use crate::agent::connect;
use crate::bare::vm_rss;
use crate::benches::{runtime, Ctx};
use crate::server::ServerProcess;
use crate::tooldir::{bench_tools_dir, TRUE_EXEC};

/// Agents.
pub const AGENTS: usize = 32;
/// Calls per agent unless `--iters` says otherwise.
pub const DEFAULT_CALLS: usize = 1_000;
/// Idle connections the hostile client keeps open.
pub const HOSTILE: usize = 100;
/// A tool that sleeps ten seconds (cancelled or timed out before then).
const NAP: &str = "nap";
/// How long a cancelled call runs before its future is dropped.
const CANCEL_AFTER: Duration = Duration::from_millis(20);
/// The timeout of a timed-out call.
const TIMEOUT: Duration = Duration::from_millis(50);

/// What one agent's calls came to.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    calls: u64,
    failures: u64,
}

/// Run the load scenario.
pub fn run(ctx: &Ctx) -> Result<()> {
    let per = ctx.iters.unwrap_or(DEFAULT_CALLS);
    let tools = bench_tools_dir("toolsrv-bench-load")?;
    std::fs::write(
        tools.path().join(format!("{NAP}.yaml")),
        "description: sleeps ten seconds\ncommand: \"sleep 10\"\n",
    )
    .context("cannot write the nap tool")?;
    let srv = ServerProcess::authed_with_tools(&ctx.bin, tools.path())?;
    let pid = srv.pid();
    println!(
        "\n== load: {AGENTS} agents x {per} mixed calls (70 % sync, 10 % background, 10 % cancelled after {} ms, 10 % timed out after {} ms), {HOSTILE} hostile idle connections",
        CANCEL_AFTER.as_millis(),
        TIMEOUT.as_millis()
    );
    // The idle server, once it served one client (so its lazy state exists).
    let rt = runtime(crate::args::Flavour::MultiThread).context("cannot start the runtime")?;
    rt.block_on(async {
        let c = connect(&srv, true, "warmup", &[TRUE_EXEC]).await?;
        c.call(&CallRequest::new(TRUE_EXEC, "warmup")).await?;
        Ok::<(), anyhow::Error>(())
    })?;
    settle(pid);
    let idle_rss = vm_rss(pid)?;
    let base_fds = fd_count(pid);

    let stop = Arc::new(AtomicBool::new(false));
    let reopened = Arc::new(AtomicU64::new(0));
    let hostile = {
        let (socket, stop, reopened) = (srv.socket().to_path_buf(), stop.clone(), reopened.clone());
        std::thread::spawn(move || hold_idle(&socket, &stop, &reopened))
    };
    let start = Instant::now();
    let tallies = rt.block_on(agents(&srv, per))?;
    let took = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    let held = hostile.join().unwrap_or(0);
    let peak = vm_hwm(pid)?;

    let calls: u64 = tallies.iter().map(|t| t.calls).sum();
    let failures: u64 = tallies.iter().map(|t| t.failures).sum();
    println!(
        "{:<22} {calls} calls in {:.1} s ({:.0} calls/s); failures {failures} (goal 0: {})",
        "load calls",
        took.as_secs_f64(),
        calls as f64 / took.as_secs_f64(),
        met(failures == 0)
    );
    println!(
        "{:<22} {held} idle connections held; {} closed by the server (auth timeout) and reopened",
        "load hostile",
        reopened.load(Ordering::Relaxed)
    );
    // Everyone has left: the server reaps and closes what it held.
    let mut zombies = zombie_children(pid);
    let mut fds = fd_count(pid);
    let deadline = Instant::now() + Duration::from_secs(15);
    while (zombies > 0 || fds > base_fds) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        zombies = zombie_children(pid);
        fds = fd_count(pid);
    }
    println!(
        "{:<22} {zombies} (goal 0: {})",
        "load zombies",
        met(zombies == 0)
    );
    println!(
        "{:<22} baseline {base_fds}, after {fds} (goal: back to baseline: {})",
        "load descriptors",
        met(fds <= base_fds)
    );
    println!(
        "{:<22} {:.1} MiB | idle server {:.1} MiB",
        "load peak RSS",
        peak as f64 / (1 << 20) as f64,
        idle_rss as f64 / (1 << 20) as f64
    );
    Ok(())
}

fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "MISSED"
    }
}

/// Every agent on its own connection, making `per` calls, all at once.
async fn agents(srv: &ServerProcess, per: usize) -> Result<Vec<Tally>> {
    let mut set = tokio::task::JoinSet::new();
    for k in 0..AGENTS {
        let agent = format!("load-agent-{k}");
        let client = connect(srv, true, &agent, &[TRUE_EXEC, NAP]).await?;
        set.spawn(async move {
            let mut t = Tally::default();
            for i in 0..per {
                t.calls += 1;
                if let Err(e) = one_call(&client, &agent, i).await {
                    t.failures += 1;
                    if t.failures <= 3 {
                        eprintln!("load: {agent} call {i}: {e:#}");
                    }
                }
            }
            t
        });
    }
    let mut out = Vec::with_capacity(AGENTS);
    while let Some(r) = set.join_next().await {
        out.push(r.context("an agent task failed")?);
    }
    Ok(out)
}

/// Call `i` of an agent: its kind by `i % 10`.
async fn one_call(c: &Client, agent: &str, i: usize) -> Result<()> {
    match i % 10 {
        7 => {
            let pid = c.spawn(&CallRequest::new(TRUE_EXEC, agent)).await?;
            let code = c.wait(pid).await?;
            anyhow::ensure!(code == 0, "background run {pid} exited {code}");
        }
        8 => {
            let req = CallRequest::new(NAP, agent);
            let r = tokio::time::timeout(CANCEL_AFTER, c.call(&req)).await;
            anyhow::ensure!(r.is_err(), "a 10 s nap ended within {CANCEL_AFTER:?}");
        }
        9 => {
            let mut req = CallRequest::new(NAP, agent);
            req.timeout = Some(TIMEOUT);
            let r = c.call(&req).await?;
            anyhow::ensure!(
                r.is_error && r.joined_text().contains("timed out"),
                "expected a timeout, got {:?}",
                r.joined_text()
            );
        }
        _ => {
            let r = c.call(&CallRequest::new(TRUE_EXEC, agent)).await?;
            anyhow::ensure!(!r.is_error, "error result: {:?}", r.joined_text());
        }
    }
    Ok(())
}

/// Keep [`HOSTILE`] idle connections open until `stop`, reopening those the
/// server closes; returns how many were open at the end.
fn hold_idle(socket: &Path, stop: &AtomicBool, reopened: &AtomicU64) -> usize {
    let mut conns: Vec<Option<UnixStream>> = (0..HOSTILE).map(|_| open_idle(socket)).collect();
    while !stop.load(Ordering::Relaxed) {
        for c in conns.iter_mut() {
            let closed = match c {
                Some(s) => {
                    let mut b = [0u8; 1];
                    matches!(std::io::Read::read(s, &mut b), Ok(0))
                }
                None => true,
            };
            if closed {
                *c = open_idle(socket);
                reopened.fetch_add(1, Ordering::Relaxed);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    conns.iter().filter(|c| c.is_some()).count()
}

fn open_idle(socket: &Path) -> Option<UnixStream> {
    let s = UnixStream::connect(socket).ok()?;
    s.set_nonblocking(true).ok()?;
    Some(s)
}

/// Wait a moment for the server to go quiet (descriptors of the last
/// connection closed).
fn settle(pid: u32) {
    let mut last = fd_count(pid);
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(25));
        let now = fd_count(pid);
        if now == last {
            return;
        }
        last = now;
    }
}

/// Descriptors `pid` has open.
fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// The peak resident set size (`VmHWM`) of `pid`, in bytes.
fn vm_hwm(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .with_context(|| format!("no VmHWM line in /proc/{pid}/status"))
}

/// Children of `ppid` that are zombies.
fn zombie_children(ppid: u32) -> usize {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return 0;
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
                return false;
            };
            let mut f = rest.split_whitespace();
            let state = f.next();
            let parent = f.next().and_then(|p| p.parse::<u32>().ok());
            state == Some("Z") && parent == Some(ppid)
        })
        .count()
}
