//! `sandbox`: what the Landlock sandbox costs.
//!
//! 1. The sync call round trip of `true_exec` (`/bin/true`) on a sandboxed
//!    (default) server vs a `--yolo` one, and vs `bwrap --ro-bind / / --tmpfs
//!    /tmp --dev /dev --proc /proc /bin/true` run by the bench process (bwrap
//!    is installed with apt-get when missing; when it cannot run, the report
//!    says why). Goals: sandboxed at most 1.15x `--yolo`; bwrap at least 3x
//!    the sandboxed call.
//!    And the same call on a server without the filesystem view
//!    (`TOOLSRV_VIEW=off`): the view's cost. Goal: at most 1.05x. And on a
//!    root server whose tools run as root (`TOOLSRV_USERNS=root`): the cost
//!    of the tools' own user namespace. Goal: at most 1.05x.
//! 2. The sandboxed spawn rate (calls/s of `true_exec`, 2 concurrent agents)
//!    of a server holding at least 256 MiB of retained output (40 finished,
//!    undismissed background tools that each printed 8 MiB; its VmRSS is
//!    checked), vs an idle server, rounds interleaved. Goal: at least 0.8x.
//! 3. The view's build time at startup (the log's `filesystem view built
//!    ... took_ms`), on the built-in policy and on one with `/proc` and `/usr`
//!    under read rules, with the tools' user namespace and with
//!    `TOOLSRV_USERNS=root` (tools run as root, and each build scans the read
//!    rules for root-only files), a fresh server per build, interleaved.

use std::process::Command;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use toolsrv_client::CallRequest;

use crate::agent::connect;
use crate::bare::{bwrap_argv, vm_rss};
use crate::benches::call::{interleaved, Op};
use crate::benches::call_throughput::agents_round;
use crate::benches::fixtures::{Servers, TOOLS};
use crate::benches::{runtime, Ctx};
use crate::report::{baseline_line, median_f64, rate_line, time_line, Figure, Target};
use crate::server::{ServerOpts, ServerProcess};
use crate::stats::Summary;
use crate::tooldir::{bench_tools_dir, TRUE_EXEC, ZEROS};

/// Measured calls per figure unless `--iters` says otherwise.
pub const DEFAULT_ITERS: usize = 1_000;
/// Sandboxed vs `--yolo`.
pub const GOAL_YOLO: Target = Target::AtMost(1.15);
/// bwrap vs sandboxed: bwrap at least this many times slower.
pub const GOAL_BWRAP: Target = Target::AtLeast(3.0);
/// Sandboxed with the filesystem view vs without it (`TOOLSRV_VIEW=off`).
pub const GOAL_VIEW: Target = Target::AtMost(1.05);
/// Spawn rate under retained output vs idle.
pub const GOAL_LOADED: Target = Target::AtLeast(0.8);
/// Sandboxed with the tools' user namespace vs tools run as root.
pub const GOAL_USERNS: Target = Target::AtMost(1.05);
/// Servers started per view-build figure.
const BUILDS: usize = 7;
/// Background tools that retain output.
pub const HOLDERS: usize = 40;
/// What each prints: the default `--max-output`, all of it retained.
pub const HOLDER_BYTES: u64 = 8 << 20;
/// The retained output the loaded server must hold at least.
pub const MIN_RSS: u64 = 256 << 20;
/// Rounds per spawn-rate figure.
const ROUNDS: usize = 5;
/// Concurrent agents for the spawn rate.
const WORKERS: usize = 2;

/// Run `sandbox`.
pub fn run(ctx: &Ctx) -> Result<()> {
    let iters = ctx.iters.unwrap_or(DEFAULT_ITERS);
    let bwrap = find_bwrap();
    let servers = Servers::start(ctx)?;
    let tools = bench_tools_dir("toolsrv-bench-tools")?;
    let no_view = ServerProcess::start_with(
        &ctx.bin,
        &ServerOpts {
            auth: true,
            yolo: false,
            tools: Some(tools.path().to_path_buf()),
            containment: None,
            extra: Vec::new(),
            view_off: true,
            tools_pidns_off: false,
            userns: None,
        },
    )?;
    let as_root = ServerProcess::start_with(
        &ctx.bin,
        &ServerOpts {
            auth: true,
            tools: Some(tools.path().to_path_buf()),
            userns: Some("root"),
            ..ServerOpts::default()
        },
    )?;
    let flavour = ctx.flavours[0];
    let rt = runtime(flavour).context("cannot start the tokio runtime")?;
    println!(
        "\n== sandbox: call {TRUE_EXEC} (/bin/true), sandboxed (pid {}) vs --yolo (pid {}) vs bwrap; client runtime {}; {iters} calls per figure after 100 warm-up, interleaved in blocks of 50",
        servers.sandboxed.pid(),
        servers.yolo.pid(),
        flavour.name()
    );
    rt.block_on(latency(&servers, &no_view, &as_root, bwrap.as_ref(), iters))?;
    drop(servers);
    drop(no_view);
    drop(as_root);
    let calls = ctx.iters.unwrap_or(512);
    rt.block_on(loaded_rate(ctx, calls))?;
    view_build(ctx)
}

/// The bwrap program if it runs here (installing it when missing); else prints why not.
fn find_bwrap() -> Option<String> {
    let works = || {
        Command::new("bwrap")
            .args(
                bwrap_argv("bwrap", &["/bin/true"])
                    .get(1..)
                    .unwrap_or_default(),
            )
            .output()
    };
    match works() {
        Ok(o) if o.status.success() => return Some("bwrap".into()),
        Ok(o) => {
            println!(
                "   bwrap cannot run here ({}): {}",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            );
            return None;
        }
        Err(e) => println!("   bwrap is not installed ({e}); trying apt-get install -y bubblewrap"),
    }
    let apt = Command::new("sh")
        .args([
            "-c",
            "apt-get update -qq && apt-get install -y -qq bubblewrap",
        ])
        .output();
    match apt {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            println!(
                "   installing bubblewrap failed ({}): {}",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            );
            return None;
        }
        Err(e) => {
            println!("   cannot run apt-get: {e}");
            return None;
        }
    }
    match works() {
        Ok(o) if o.status.success() => Some("bwrap".into()),
        Ok(o) => {
            println!(
                "   bwrap cannot run here ({}): {}",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            );
            None
        }
        Err(e) => {
            println!("   bwrap still cannot start after installing: {e}");
            None
        }
    }
}

async fn latency(
    s: &Servers,
    no_view: &ServerProcess,
    as_root: &ServerProcess,
    bwrap: Option<&String>,
    iters: usize,
) -> Result<()> {
    const AGENT: &str = "bench-sandbox";
    let yolo = connect(&s.yolo, true, AGENT, TOOLS).await?;
    let sand = connect(&s.sandboxed, true, AGENT, TOOLS).await?;
    let carved = connect(no_view, true, AGENT, TOOLS).await?;
    let root_tools = connect(as_root, true, AGENT, TOOLS).await?;
    let req = CallRequest::new(TRUE_EXEC, AGENT);
    let true_argv: &[&str] = &["/bin/true"];
    let bw_argv = bwrap.map(|b| bwrap_argv(b, true_argv));
    let mut ops = vec![
        ("bare Command /bin/true", Op::Command(true_argv)),
        ("call true_exec (--yolo)", Op::Call(&yolo, &req)),
        ("call true_exec (sandboxed)", Op::Call(&sand, &req)),
        (
            "call true_exec (sandboxed, TOOLSRV_VIEW=off)",
            Op::Call(&carved, &req),
        ),
        (
            "call true_exec (sandboxed, TOOLSRV_USERNS=root)",
            Op::Call(&root_tools, &req),
        ),
    ];
    if let Some(a) = &bw_argv {
        ops.push(("bwrap /bin/true", Op::Command(a)));
    }
    let figs = interleaved(&ops, 100.min(iters), iters, 50).await?;
    println!("{}", baseline_line(&figs[0]));
    println!("{}", time_line(&figs[1], &figs[0], None));
    println!("{}", time_line(&figs[2], &figs[1], Some(GOAL_YOLO)));
    println!("{}", time_line(&figs[3], &figs[1], None));
    println!(
        "{}   [ratio = with the filesystem view / without it]",
        time_line(&figs[2], &figs[3], Some(GOAL_VIEW))
    );
    println!("{}", time_line(&figs[4], &figs[1], None));
    println!(
        "{}   [ratio = tools in their own user namespace / tools run as root]",
        time_line(&figs[2], &figs[4], Some(GOAL_USERNS))
    );
    if let Some(bw) = figs.get(5) {
        println!("{}", time_line(bw, &figs[0], None));
        println!(
            "{}   [ratio = bwrap / sandboxed call: how many times faster the call is]",
            time_line(bw, &figs[2], Some(GOAL_BWRAP))
        );
    } else {
        println!("   bwrap figures skipped: bwrap cannot run here (see above)");
    }
    Ok(())
}

/// Part 2: spawn rate with retained output vs idle.
async fn loaded_rate(ctx: &Ctx, calls: usize) -> Result<()> {
    let tools = bench_tools_dir("toolsrv-bench-tools")?;
    // Room for all the holders' output: by default finished processes keep
    // at most 128 MiB of it (the oldest are dismissed beyond).
    let opts = ServerOpts {
        auth: true,
        yolo: false,
        tools: Some(tools.path().to_path_buf()),
        containment: None,
        extra: vec!["--max-finished-output", "1GiB"],
        view_off: false,
        tools_pidns_off: false,
        userns: None,
    };
    let idle = ServerProcess::start_with(&ctx.bin, &opts)?;
    let loaded = ServerProcess::start_with(&ctx.bin, &opts)?;
    let holder = connect(&loaded, true, "bench-holder", TOOLS).await?;
    let rss_before = vm_rss(loaded.pid())?;
    let mut held = 0;
    let req = CallRequest::new(ZEROS, "bench-holder").arg("bytes", HOLDER_BYTES.to_string());
    let mut pids = Vec::new();
    for _ in 0..HOLDERS {
        pids.push(
            holder
                .spawn(&req)
                .await
                .context("starting an output holder")?,
        );
    }
    for pid in &pids {
        let code = holder.wait(*pid).await.context("waiting for a holder")?;
        ensure!(code == 0, "holder {pid} exited {code}");
        held += HOLDER_BYTES;
    }
    let rss_loaded = vm_rss(loaded.pid())?;
    let rss_idle = vm_rss(idle.pid())?;
    let per = calls.div_ceil(WORKERS);
    println!(
        "\n== sandbox-loaded: spawn rate of {TRUE_EXEC}, {WORKERS} concurrent agents, {} calls per round, {ROUNDS} rounds per figure, interleaved; loaded server (pid {}) holds {HOLDERS} finished undismissed processes x {} MiB = {} MiB of output: VmRSS {} MiB (was {} MiB before), idle server (pid {}) VmRSS {} MiB",
        per * WORKERS,
        loaded.pid(),
        HOLDER_BYTES >> 20,
        held >> 20,
        rss_loaded >> 20,
        rss_before >> 20,
        idle.pid(),
        rss_idle >> 20
    );
    if rss_loaded < MIN_RSS {
        println!(
            "   WARNING: the loaded server's VmRSS {} MiB is under {} MiB",
            rss_loaded >> 20,
            MIN_RSS >> 20
        );
    }
    let mut agents_idle = Vec::new();
    let mut agents_loaded = Vec::new();
    for k in 0..WORKERS {
        let agent = format!("bench-worker-{k}");
        agents_idle.push((
            connect(&idle, true, &agent, TOOLS).await?,
            CallRequest::new(TRUE_EXEC, &agent),
        ));
        agents_loaded.push((
            connect(&loaded, true, &agent, TOOLS).await?,
            CallRequest::new(TRUE_EXEC, &agent),
        ));
    }
    agents_round(&agents_idle, 10).await?;
    agents_round(&agents_loaded, 10).await?;
    let total = (per * WORKERS) as f64;
    let (mut ri, mut rl) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        ri.push(total / agents_round(&agents_idle, per).await?.as_secs_f64());
        rl.push(total / agents_round(&agents_loaded, per).await?.as_secs_f64());
    }
    let ri = median_f64(&ri).context("no rounds")?;
    let rl = median_f64(&rl).context("no rounds")?;
    println!("{:<34} {ri:>10.1} calls/s", "spawn rate x2 (idle server)");
    println!(
        "{}",
        rate_line(
            &format!("spawn rate x2 ({} MiB RSS)", rss_loaded >> 20),
            rl,
            "idle",
            ri,
            "calls/s",
            Some(GOAL_LOADED)
        )
    );
    println!(
        "   loaded server VmRSS after the rounds: {} MiB",
        vm_rss(loaded.pid())? >> 20
    );
    Ok(())
}

/// The `took_ms` of the first `filesystem view built` line of `log`.
fn view_took(log: &str) -> Option<Duration> {
    let line = log.lines().find(|l| l.contains("filesystem view built"))?;
    let ms = line.split("took_ms=").nth(1)?.split_whitespace().next()?;
    Some(Duration::from_millis(ms.parse().ok()?))
}

/// Part 3: the view's build time at startup, per policy and identity.
fn view_build(ctx: &Ctx) -> Result<()> {
    let dir = tempfile::tempdir().context("a directory for the policy")?;
    let proc_usr = dir.path().join("proc-usr.yaml");
    std::fs::write(
        &proc_usr,
        "filesystem:\n  ro: [/proc, /etc]\n  rox: [/usr, /bin, /sbin, /lib, /lib64]\n  rw: [/dev/null]\n  rwx: [\"{CWD}\"]\n",
    )
    .context("writing the policy")?;
    // `ServerOpts::extra` holds `'static` flags: the path lives as long as
    // the bench process (one string).
    let p: &'static str = Box::leak(proc_usr.display().to_string().into_boxed_str());
    let configs: [(&str, Option<&'static str>, Option<&'static str>); 4] = [
        ("view build (built-in policy)", None, None),
        (
            "view build (built-in policy, TOOLSRV_USERNS=root)",
            None,
            Some("root"),
        ),
        ("view build (ro /proc, rox /usr)", Some(p), None),
        (
            "view build (ro /proc, rox /usr, TOOLSRV_USERNS=root)",
            Some(p),
            Some("root"),
        ),
    ];
    println!(
        "\n== sandbox-view-build: the main policy's view built at startup (the log's took_ms: sources, the root-only scan where tools run as root, the mounts), {BUILDS} fresh servers per figure, interleaved"
    );
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); configs.len()];
    for _ in 0..BUILDS {
        for (i, (_, policy, userns)) in configs.iter().enumerate() {
            let extra = policy.map_or_else(Vec::new, |p| vec!["--sandbox", p]);
            let srv = ServerProcess::start_with(
                &ctx.bin,
                &ServerOpts {
                    auth: true,
                    extra,
                    userns: *userns,
                    ..ServerOpts::default()
                },
            )?;
            let start = std::time::Instant::now();
            let took = loop {
                if let Some(t) = view_took(&srv.log_text()) {
                    break t;
                }
                ensure!(
                    start.elapsed() < Duration::from_secs(30),
                    "no view was built: {}",
                    srv.log_text()
                );
                std::thread::sleep(Duration::from_millis(20));
            };
            samples[i].push(took);
        }
    }
    let figs: Vec<Figure> = configs
        .iter()
        .zip(&samples)
        .map(|((name, _, _), s)| {
            Ok(Figure {
                name: name.to_string(),
                summary: Summary::of(s).context("no builds")?,
            })
        })
        .collect::<Result<_>>()?;
    println!("{}", baseline_line(&figs[1]));
    println!(
        "{}   [ratio = tools in their own user namespace / tools run as root]",
        time_line(&figs[0], &figs[1], None)
    );
    println!("{}", baseline_line(&figs[3]));
    println!(
        "{}   [ratio = tools in their own user namespace / tools run as root]",
        time_line(&figs[2], &figs[3], None)
    );
    Ok(())
}
