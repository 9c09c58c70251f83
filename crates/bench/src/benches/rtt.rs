//! `rtt`: the client library's `read_file("info")` against the real server,
//! beside a raw Unix-socket echo round trip (16 bytes each way, to a tokio
//! echo task on the same runtime) measured in the same run. To show where the
//! time goes it also measures:
//! - `raw-echo (server thread)`: the same echo, served from another thread, so
//!   every round trip wakes a sleeping thread as a trip to the server does;
//! - `9p-read-info (bare codec)`: Twalk+Topen+Tread+Tclunk in one write with
//!   the wire codec and no client library (the server's floor);
//! - `9p-read-info (bare, clunk after)`: the library's wire pattern without
//!   the library: Twalk+Topen+Tread in one write, then a Tclunk whose reply is
//!   not waited for;
//! - `9p-tstat (one rpc)`: one sequential `Tstat` through `Client::rpc`.

use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use toolsrv_client::{Body, Client};
use toolsrv_wire::DMDIR;

use crate::agent::connect_client;
use crate::benches::{runtime, Ctx};
use crate::echo::EchoServer;
use crate::raw9p::Raw9p;
use crate::report::{baseline_line, line, Figure, Goal};
use crate::server::{ServerProcess, SECRET};
use crate::stats::Summary;

/// Measured iterations per figure unless `--iters` says otherwise.
pub const DEFAULT_ITERS: usize = 10_000;
/// Unmeasured iterations per figure before measuring (fewer when fewer are measured).
const WARMUP: usize = 1_000;
/// Figures are measured in interleaved blocks of this many iterations, so
/// that load from elsewhere on the machine hits all of them alike.
const BLOCK: usize = 100;
/// The goal: `read_file` within this many echo round trips.
const GOAL: Goal = Goal { max_ratio: 4.0 };
/// The root fid of a [`Client`]: the first fid it allocates (fids count up from 0).
const CLIENT_ROOT_FID: u32 = 0;

/// Run `rtt` for each runtime flavour, against a `--no-auth` server and an authenticated one.
pub fn run(ctx: &Ctx) -> Result<()> {
    let iters = ctx.iters.unwrap_or(DEFAULT_ITERS);
    let warmup = WARMUP.min(iters);
    for &flavour in &ctx.flavours {
        for auth in [false, true] {
            let srv = ServerProcess::start(&ctx.bin, auth)?;
            let mode = if auth { "auth" } else { "--no-auth" };
            println!(
                "\n== rtt: server {mode} (pid {}), client runtime {}, {iters} iterations per figure after {warmup} warm-up, interleaved in blocks of {BLOCK}",
                srv.pid(),
                flavour.name()
            );
            let rt = runtime(flavour).context("cannot start the tokio runtime")?;
            let figs = rt
                .block_on(measure(&srv, auth, warmup, iters))
                .with_context(|| format!("rtt against the {mode} server on {}", flavour.name()))?;
            print(&figs);
        }
    }
    Ok(())
}

/// The figures of one configuration.
struct Figures {
    echo: Figure,
    echo_thread: Figure,
    read_info: Figure,
    raw_read_info: Figure,
    raw_clunk_after: Figure,
    rpc_stat: Figure,
}

fn print(f: &Figures) {
    println!("{}", baseline_line(&f.echo));
    println!("{}", line(&f.echo_thread, &f.echo, None));
    println!("{}", line(&f.read_info, &f.echo, Some(GOAL)));
    println!("{}", line(&f.raw_read_info, &f.echo, None));
    println!("{}", line(&f.raw_clunk_after, &f.echo, None));
    println!("{}", line(&f.rpc_stat, &f.echo, None));
}

async fn measure(srv: &ServerProcess, auth: bool, warmup: usize, iters: usize) -> Result<Figures> {
    let echo_srv = EchoServer::start().context("cannot start the echo server")?;
    let mut echo = echo_srv
        .connect()
        .await
        .context("cannot connect to the echo server")?;
    let echo_thread_srv =
        EchoServer::start_on_thread().context("cannot start the threaded echo server")?;
    let mut echo_t = echo_thread_srv
        .connect()
        .await
        .context("cannot connect to the threaded echo server")?;
    let client = connect_client(srv, auth)
        .await
        .context("the client library cannot connect")?;
    ensure!(
        client.token().is_some() == auth,
        "authenticated={auth} but the client's token is {:?}",
        client.token().map(|_| "present")
    );
    let mut raw = Raw9p::connect(srv.socket(), auth.then_some(SECRET)).await?;
    let mut raw2 = Raw9p::connect(srv.socket(), auth.then_some(SECRET)).await?;
    check_replies(&client, &mut raw).await?;
    ensure!(
        raw2.read_file_clunk_after("info").await? == raw.read_file("info").await?,
        "the clunk-after read of info differs from the pipelined one"
    );

    let mut seq = 0u64;
    for _ in 0..warmup {
        echo.round_trip(seq).await?;
        echo_t.round_trip(seq).await?;
        seq += 1;
        client.read_file("info").await?;
        raw.read_file("info").await?;
        raw2.read_file_clunk_after("info").await?;
        client
            .rpc(Body::Tstat {
                fid: CLIENT_ROOT_FID,
            })
            .await?;
    }
    let mut s_echo = Vec::with_capacity(iters);
    let mut s_echo_t = Vec::with_capacity(iters);
    let mut s_read = Vec::with_capacity(iters);
    let mut s_raw = Vec::with_capacity(iters);
    let mut s_raw2 = Vec::with_capacity(iters);
    let mut s_stat = Vec::with_capacity(iters);
    let mut done = 0;
    while done < iters {
        let n = BLOCK.min(iters - done);
        for _ in 0..n {
            let t = Instant::now();
            echo.round_trip(seq).await?;
            s_echo.push(t.elapsed());
            seq += 1;
        }
        for _ in 0..n {
            let t = Instant::now();
            echo_t.round_trip(seq).await?;
            s_echo_t.push(t.elapsed());
            seq += 1;
        }
        for _ in 0..n {
            let t = Instant::now();
            client.read_file("info").await?;
            s_read.push(t.elapsed());
        }
        for _ in 0..n {
            let t = Instant::now();
            raw.read_file("info").await?;
            s_raw.push(t.elapsed());
        }
        for _ in 0..n {
            let t = Instant::now();
            raw2.read_file_clunk_after("info").await?;
            s_raw2.push(t.elapsed());
        }
        for _ in 0..n {
            let t = Instant::now();
            client
                .rpc(Body::Tstat {
                    fid: CLIENT_ROOT_FID,
                })
                .await?;
            s_stat.push(t.elapsed());
        }
        done += n;
    }
    Ok(Figures {
        echo: figure("raw-echo", &s_echo)?,
        echo_thread: figure("raw-echo (server thread)", &s_echo_t)?,
        read_info: figure("9p-read-info", &s_read)?,
        raw_read_info: figure("9p-read-info (bare codec)", &s_raw)?,
        raw_clunk_after: figure("9p-read-info (bare, clunk after)", &s_raw2)?,
        rpc_stat: figure("9p-tstat (one rpc)", &s_stat)?,
    })
}

/// Before timing anything, check every measured operation gets the right answer.
async fn check_replies(client: &Client, raw: &mut Raw9p) -> Result<()> {
    let info = client.read_file("info").await?;
    ensure!(
        String::from_utf8_lossy(&info).contains("\"platform\""),
        "info read by the client library is not the platform JSON: {:?}",
        String::from_utf8_lossy(&info)
    );
    let raw_info = raw.read_file("info").await?;
    ensure!(
        raw_info == info,
        "the bare-codec read of info differs from the library's"
    );
    match client
        .rpc(Body::Tstat {
            fid: CLIENT_ROOT_FID,
        })
        .await?
    {
        Body::Rstat { stat } if stat.mode & DMDIR != 0 => Ok(()),
        b => bail!(
            "Tstat of the client's root fid {CLIENT_ROOT_FID} got {b:?}, not the root directory"
        ),
    }
}

fn figure(name: &str, samples: &[Duration]) -> Result<Figure> {
    let summary = Summary::of(samples).with_context(|| format!("no samples for {name}"))?;
    Ok(Figure {
        name: name.into(),
        summary,
    })
}
