//! `proxy`: what the filtering network proxy (`crates/netproxy`,
//! docs/network.md) costs a download, beside the same download straight
//! from the upstream, both on loopback in the same run.
//!
//! - **Rate**: 100 MiB (`--iters` rounds, default 7) through a `CONNECT`
//!   tunnel beside a direct connection. Goal: at least 0.8x (issue 37).
//! - **Time to first byte**: connect, ask, first byte of a one-byte answer,
//!   through the proxy beside direct: the time the proxy adds (the head's
//!   read and parse, the allowlist, the pinned name, the upstream's
//!   connect). Goal: at most 1 ms added (issue 37).
//! - **The proxy's CPU per MiB**: its thread's CPU time (`schedstat`) over
//!   the rate rounds.
//!
//! - **A small HTTPS request through interception** (a secret bound to
//!   the host): beside the same request straight to the upstream
//!   (`proxy_tls.rs`).
//!
//! The proxy runs on a thread and runtime of its own, as a daemon's would.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use toolsrv_netproxy::{Allowlist, Proxy};

use crate::benches::Ctx;
use crate::report::{human, median_f64, rate_line, Target};
use crate::stats::Summary;

/// Rounds of the 100 MiB download unless `--iters` says otherwise.
pub const DEFAULT_ITERS: usize = 7;
/// The download.
const SIZE: usize = 100 << 20;
/// Time-to-first-byte samples per side.
const TTFB_SAMPLES: usize = 400;
/// The proxy's goal against direct.
const GOAL_RATE: f64 = 0.8;
/// The most the proxy may add to the first byte.
const GOAL_TTFB: Duration = Duration::from_millis(1);

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// Run `proxy`.
pub fn run(ctx: &Ctx) -> Result<()> {
    let rounds = ctx.iters.unwrap_or(DEFAULT_ITERS).max(1);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (up, small) =
        rt.block_on(async { Ok::<_, anyhow::Error>((upstream(SIZE).await?, upstream(1).await?)) })?;
    let (proxy, tid) = start_proxy(&[up, small])?;
    println!(
        "proxy: {rounds} rounds of {} MiB, loopback, CONNECT tunnel vs direct",
        SIZE >> 20
    );
    let (mut direct, mut through) = (Vec::new(), Vec::new());
    let cpu_before = thread_cpu(tid);
    let mut proxied_time = Duration::ZERO;
    for _ in 0..rounds {
        direct.push(rt.block_on(download(up, None))?);
        let t = rt.block_on(download(up, Some(proxy)))?;
        proxied_time += t;
        through.push(t);
    }
    let cpu = thread_cpu(tid)
        .zip(cpu_before)
        .map(|(a, b)| a.saturating_sub(b));
    let mib_s = |d: &Duration| (SIZE as f64 / f64::from(1 << 20)) / d.as_secs_f64();
    let direct_rate = median_f64(&direct.iter().map(mib_s).collect::<Vec<_>>()).unwrap_or(0.0);
    let proxy_rate = median_f64(&through.iter().map(mib_s).collect::<Vec<_>>()).unwrap_or(0.0);
    println!(
        "{}",
        rate_line(
            "download through the proxy",
            proxy_rate,
            "direct",
            direct_rate,
            "MiB/s",
            Some(Target::AtLeast(GOAL_RATE))
        )
    );
    if let Some(cpu) = cpu {
        let mib = (SIZE >> 20) as f64 * rounds as f64;
        println!(
            "proxy CPU per MiB: {:.1} µs ({} over {} s of proxied downloads)",
            cpu.as_secs_f64() * 1e6 / mib,
            human(cpu),
            format_args!("{:.2}", proxied_time.as_secs_f64())
        );
    }
    let (mut d, mut p) = (Vec::new(), Vec::new());
    for _ in 0..TTFB_SAMPLES {
        d.push(rt.block_on(first_byte(small, None))?);
        p.push(rt.block_on(first_byte(small, Some(proxy)))?);
    }
    let (d, p) = (
        Summary::of(&d).context("no samples")?,
        Summary::of(&p).context("no samples")?,
    );
    let added = p.median.saturating_sub(d.median);
    println!(
        "time to first byte: direct median {} (p90 {}), through the proxy {} (p90 {}): +{} (goal <= {}: {})",
        human(d.median),
        human(d.p90),
        human(p.median),
        human(p.p90),
        human(added),
        human(GOAL_TTFB),
        if added <= GOAL_TTFB { "met" } else { "MISSED" }
    );
    rt.block_on(crate::benches::proxy_tls::run())
}

/// A loopback server that answers each request head with `size` bytes.
async fn upstream(size: usize) -> Result<SocketAddr> {
    let l = TcpListener::bind((LOOPBACK, 0)).await?;
    let addr = l.local_addr()?;
    std::thread::Builder::new()
        .name("bench-upstream".into())
        .spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            let l = match rt.block_on(async { TcpListener::from_std(l.into_std()?) }) {
                Ok(l) => l,
                Err(_) => return,
            };
            rt.block_on(async move {
                let body = vec![b'x'; 1 << 20];
                while let Ok((mut c, _)) = l.accept().await {
                    let _ = c.set_nodelay(true);
                    let body = body.clone();
                    tokio::spawn(async move {
                        let mut got = Vec::new();
                        let mut b = [0u8; 4096];
                        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                            match c.read(&mut b).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => got.extend_from_slice(&b[..n]),
                            }
                        }
                        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n\r\n");
                        if c.write_all(head.as_bytes()).await.is_err() {
                            return;
                        }
                        let mut left = size;
                        while left > 0 {
                            let n = left.min(body.len());
                            if c.write_all(&body[..n]).await.is_err() {
                                return;
                            }
                            left -= n;
                        }
                        let _ = c.shutdown().await;
                    });
                }
            });
        })?;
    Ok(addr)
}

/// The proxy on a thread of its own, allowing `up.test` (pinned to
/// loopback) on each upstream's port; its address and its thread id.
fn start_proxy(upstreams: &[SocketAddr]) -> Result<(SocketAddr, i32)> {
    let lines: Vec<String> = upstreams
        .iter()
        .map(|a| format!("up.test:{}", a.port()))
        .collect();
    let allow = Allowlist::new(&lines, &[("up.test".into(), vec![LOOPBACK])])?;
    let listener = std::net::TcpListener::bind((LOOPBACK, 0))?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("bench-proxy".into())
        .spawn(move || {
            // Safety: gettid has no arguments and cannot fail.
            let _ = tx.send(unsafe { libc::gettid() });
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                let Ok(l) = TcpListener::from_std(listener) else {
                    return;
                };
                Proxy::new(l, allow).serve().await;
            });
        })?;
    let tid = rx.recv_timeout(Duration::from_secs(5))?;
    Ok((addr, tid))
}

/// Opens a connection to `up`, straight or through a `CONNECT` of `proxy`,
/// and sends the request.
async fn ask(up: SocketAddr, proxy: Option<SocketAddr>) -> Result<TcpStream> {
    let mut c = TcpStream::connect(proxy.unwrap_or(up)).await?;
    c.set_nodelay(true)?;
    if proxy.is_some() {
        c.write_all(format!("CONNECT up.test:{} HTTP/1.1\r\n\r\n", up.port()).as_bytes())
            .await?;
        let want = b"HTTP/1.1 200 Connection established\r\n\r\n";
        let mut got = vec![0u8; want.len()];
        c.read_exact(&mut got).await?;
        anyhow::ensure!(
            got == want,
            "the proxy refused: {}",
            String::from_utf8_lossy(&got)
        );
    }
    c.write_all(b"GET / HTTP/1.1\r\nHost: up.test\r\n\r\n")
        .await?;
    Ok(c)
}

/// Downloads the whole answer; how long it took.
async fn download(up: SocketAddr, proxy: Option<SocketAddr>) -> Result<Duration> {
    let start = Instant::now();
    let mut c = ask(up, proxy).await?;
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0usize;
    loop {
        let n = c.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        total += n;
    }
    anyhow::ensure!(total > SIZE, "short download: {total} bytes");
    Ok(start.elapsed())
}

/// From connecting to the first byte of the answer.
async fn first_byte(up: SocketAddr, proxy: Option<SocketAddr>) -> Result<Duration> {
    let start = Instant::now();
    let mut c = ask(up, proxy).await?;
    let mut b = [0u8; 1];
    c.read_exact(&mut b).await?;
    let t = start.elapsed();
    let mut rest = Vec::new();
    let _ = c.read_to_end(&mut rest).await;
    Ok(t)
}

/// CPU time of this process's thread `tid` so far (`schedstat`).
fn thread_cpu(tid: i32) -> Option<Duration> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    s.split_whitespace()
        .next()?
        .parse()
        .ok()
        .map(Duration::from_nanos)
}
