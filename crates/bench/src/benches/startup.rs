//! `startup`: the first sandboxed call a freshly started server answers.
//!
//! A sandboxed call runs in the policy's filesystem view, which a root
//! server builds with a scan for root-only files (docs/sandbox-policy.md,
//! "When views are built"). Each round starts a server (built-in policy,
//! auth on, the bench tools) and times its first call of `true_exec`
//! (`/bin/true`) made as soon as the socket answered ("at once") and, on a
//! second fresh server, 500 ms after it answered ("after 500 ms"), then warm
//! calls of the first server. With `--before <binary>`, the same rounds for
//! that binary, alternating. Baselines from the same run: the warm call, and
//! a bare `posix_spawn` of `/bin/true`.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use toolsrv_client::CallRequest;

use crate::agent::{call_ok, connect};
use crate::bare::PosixSpawn;
use crate::benches::call::{figure, Op};
use crate::benches::{runtime, Ctx};
use crate::report::{time_line, Target};
use crate::server::{ServerOpts, ServerProcess};
use crate::tooldir::{bench_tools_dir, TRUE_EXEC};

/// Rounds (fresh servers per kind) unless `--iters` says otherwise.
pub const DEFAULT_ROUNDS: usize = 7;
/// Warm calls per round.
const WARM: usize = 20;
/// How long the late first call waits after the socket answered.
const LATE: Duration = Duration::from_millis(500);
/// The late first call against the warm call: the view and the validator
/// are ready by then; what a tool's first call still builds (its rules
/// resolved, its Landlock ruleset) is about a millisecond.
pub const GOAL_LATE: Target = Target::AtMost(4.0);

/// The samples of one binary.
#[derive(Default)]
struct Samples {
    at_once: Vec<Duration>,
    late: Vec<Duration>,
    warm: Vec<Duration>,
}

/// Run `startup`.
pub fn run(ctx: &Ctx) -> Result<()> {
    let rounds = ctx.iters.unwrap_or(DEFAULT_ROUNDS).max(1);
    let tools = bench_tools_dir("toolsrv-bench-first")?;
    let rt = runtime(ctx.flavours[0]).context("cannot start the tokio runtime")?;
    let mut bins: Vec<(&str, &Path)> = vec![("", &ctx.bin)];
    if let Some(b) = &ctx.before {
        bins.push(("before ", b));
    }
    println!(
        "\n== startup: the first sandboxed call of {TRUE_EXEC} (/bin/true) on a fresh server, at once and {} ms after its socket answered, vs {WARM} warm calls; {rounds} rounds{}",
        LATE.as_millis(),
        if ctx.before.is_some() { ", this binary and --before alternating" } else { "" }
    );
    let spawn = PosixSpawn::new(&["/bin/true"])?;
    let mut bare = Vec::new();
    let mut samples: Vec<Samples> = bins.iter().map(|_| Samples::default()).collect();
    for _ in 0..rounds {
        for ((_, bin), s) in bins.iter().zip(samples.iter_mut()) {
            rt.block_on(round(bin, tools.path(), s))?;
            for _ in 0..WARM {
                bare.push(rt.block_on(Op::Posix(&spawn).once())?);
            }
        }
    }
    let bare = figure("bare posix_spawn /bin/true", &bare)?;
    for ((label, _), s) in bins.iter().zip(&samples) {
        let warm = figure(&format!("{label}warm call"), &s.warm)?;
        let at_once = figure(&format!("{label}first call, at once"), &s.at_once)?;
        let late = figure(&format!("{label}first call, after 500 ms"), &s.late)?;
        println!("{}", time_line(&warm, &bare, None));
        println!("{}", time_line(&at_once, &warm, None));
        println!("{}", time_line(&late, &warm, Some(GOAL_LATE)));
    }
    if let [now, before] = samples.as_slice() {
        let now = figure("first call after 500 ms, this", &now.late)?;
        let before = figure("before", &before.late)?;
        println!("{}", time_line(&now, &before, None));
    }
    Ok(())
}

/// One round for `bin`: a server called at once (then warm), and one called
/// after [`LATE`].
async fn round(bin: &Path, tools: &Path, s: &mut Samples) -> Result<()> {
    let opts = ServerOpts {
        auth: true,
        tools: Some(tools.to_path_buf()),
        ..ServerOpts::default()
    };
    const AGENT: &str = "bench-first";
    let req = CallRequest::new(TRUE_EXEC, AGENT);
    let srv = ServerProcess::start_with(bin, &opts)?;
    let client = connect(&srv, true, AGENT, &[TRUE_EXEC]).await?;
    s.at_once.push(timed(&client, &req).await?);
    for _ in 0..WARM {
        s.warm.push(timed(&client, &req).await?);
    }
    drop(client);
    drop(srv);
    let srv = ServerProcess::start_with(bin, &opts)?;
    let answered = Instant::now();
    let client = connect(&srv, true, AGENT, &[TRUE_EXEC]).await?;
    tokio::time::sleep(LATE.saturating_sub(answered.elapsed())).await;
    s.late.push(timed(&client, &req).await?);
    Ok(())
}

/// One call that must succeed; how long it took.
async fn timed(client: &toolsrv_client::Client, req: &CallRequest) -> Result<Duration> {
    let t = Instant::now();
    call_ok(client, req).await?;
    Ok(t.elapsed())
}
