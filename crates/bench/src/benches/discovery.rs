//! `discovery`: the server's tool discovery over a tools directory of 1,000
//! generated tools (a third metadata-only `NAME.yaml`, a third executable
//! scripts with a sidecar, a third scripts with a header block):
//!
//! - `read_file("all")` as a whole, with the server's parse cache warm (the
//!   steady state: nothing changed since the last read), and cold (every
//!   file's ctime changed before each read, so each is parsed again);
//! - one `ctl load` of one tool (a different tool each time);
//!
//! beside the floor of any discovery: a bare `readdir` + `stat` of every
//! entry of the same directory in the bench process. Goal: warm `all` under
//! 20 ms (absolute), with the ratio to the baseline shown.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use toolsrv_client::Client;

use crate::agent::connect;
use crate::benches::call::figure;
use crate::benches::{runtime, Ctx};
use crate::report::{baseline_line, human, time_line};
use crate::server::{ServerOpts, ServerProcess};
use crate::tooldir::{generate, generated_name, readdir_stat, touch_all};

/// How many tools are generated.
pub const TOOLS: usize = 1_000;
/// Measured iterations per figure unless `--iters` says otherwise.
pub const DEFAULT_ITERS: usize = 200;
/// Cold reads (each preceded by touching every file).
const COLD: usize = 10;
/// The goal for a warm `all`, absolute.
pub const GOAL_ALL: Duration = Duration::from_millis(20);
/// Figures are measured interleaved in blocks of this many.
const BLOCK: usize = 20;

/// Run `discovery`.
pub fn run(ctx: &Ctx) -> Result<()> {
    let iters = ctx.iters.unwrap_or(DEFAULT_ITERS);
    let dir = tempfile::Builder::new()
        .prefix("toolsrv-bench-discovery")
        .tempdir()
        .context("cannot create the tools directory")?;
    let files = generate(dir.path(), TOOLS).context("cannot generate the tools")?;
    let srv = ServerProcess::start_with(
        &ctx.bin,
        &ServerOpts {
            auth: true,
            yolo: false,
            tools: Some(dir.path().to_path_buf()),
            containment: None,
            extra: Vec::new(),
            view_off: false,
            tools_pidns_off: false,
            userns: None,
        },
    )?;
    for &flavour in &ctx.flavours {
        println!(
            "\n== discovery: {TOOLS} tools in {files} files ({}), server pid {}, client runtime {}; {iters} iterations per figure, interleaved in blocks of {BLOCK}; {COLD} cold reads",
            dir.path().display(),
            srv.pid(),
            flavour.name()
        );
        let rt = runtime(flavour).context("cannot start the tokio runtime")?;
        rt.block_on(measure(&srv, dir.path(), files, iters))?;
    }
    Ok(())
}

async fn measure(srv: &ServerProcess, dir: &Path, files: usize, iters: usize) -> Result<()> {
    let client = connect(srv, true, "bench-discovery", &[]).await?;
    let first = Instant::now();
    check_all(&client).await?;
    let first = first.elapsed();
    ensure!(
        readdir_stat(dir)? == files,
        "the baseline does not see the {files} files"
    );
    // Warm-up.
    for i in 0..BLOCK.min(iters) {
        client.read_file("all").await?;
        client
            .load("bench-discovery", &[&generated_name(i)])
            .await?;
        readdir_stat(dir)?;
    }
    let (mut s_all, mut s_load, mut s_base) = (Vec::new(), Vec::new(), Vec::new());
    let mut done = 0;
    let mut tool = 0;
    while done < iters {
        let n = BLOCK.min(iters - done);
        for _ in 0..n {
            let t = Instant::now();
            readdir_stat(dir)?;
            s_base.push(t.elapsed());
        }
        for _ in 0..n {
            let t = Instant::now();
            client.read_file("all").await?;
            s_all.push(t.elapsed());
        }
        for _ in 0..n {
            // A fresh agent per block keeps the registry small; every load is a new tool.
            let name = generated_name(tool % TOOLS);
            tool += 1;
            let agent = format!("bench-discovery-{}", done / BLOCK);
            let t = Instant::now();
            client
                .load(&agent, &[&name])
                .await
                .with_context(|| format!("load {name}"))?;
            s_load.push(t.elapsed());
        }
        done += n;
    }
    let mut s_cold = Vec::new();
    for _ in 0..COLD {
        touch_all(dir)?;
        let t = Instant::now();
        client.read_file("all").await?;
        s_cold.push(t.elapsed());
    }
    let base = figure("readdir + stat (bench process)", &s_base)?;
    let all = figure("read all (warm)", &s_all)?;
    let cold = figure("read all (cold: files changed)", &s_cold)?;
    let load = figure("ctl load of one tool", &s_load)?;
    println!("{}", baseline_line(&base));
    let verdict = if all.summary.median < GOAL_ALL {
        "met"
    } else {
        "MISSED"
    };
    println!(
        "{} (goal < {}: {verdict})",
        time_line(&all, &base, None),
        human(GOAL_ALL)
    );
    println!("{}", time_line(&cold, &base, None));
    println!("{}", time_line(&load, &base, None));
    println!("   first read of all after server start: {}", human(first));
    Ok(())
}

/// `all` lists every generated tool.
async fn check_all(client: &Client) -> Result<()> {
    let all = client.all().await.context("reading all")?;
    ensure!(
        all.len() == TOOLS,
        "all lists {} tools, not {TOOLS}",
        all.len()
    );
    ensure!(
        all.iter()
            .all(|t| t.description.starts_with("generated tool")),
        "all has a tool without its generated description"
    );
    Ok(())
}
