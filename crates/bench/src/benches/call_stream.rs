//! `call-stream` (part (c) of `call`): following `proc/<pid>/out` of a
//! background tool that prints `--stream-size` bytes (default 1 GiB:
//! `head -c 1073741824 /dev/zero`), with reads as large as msize allows, in
//! MB/s of bytes delivered, beside reading the same command's stdout from a
//! pipe in the bench process (and, for reference, `head | cat > /dev/null`
//! run by `/bin/sh`). Goal: at least 0.5x the pipe.
//!
//! The server keeps at most `--max-output` (8 MiB) per process: a follower
//! that falls behind gets `\n[toolsrv: N bytes omitted]\n` in place of the
//! bytes it missed. Every marker is parsed and the omitted bytes counted;
//! a run that omitted anything is flagged in the report.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use toolsrv_client::{Auth, CallRequest, Client};

use crate::agent::connect;
use crate::bare::cpu_time;
use crate::benches::fixtures::{Servers, TOOLS};
use crate::benches::{runtime, Ctx};
use crate::report::{human, median_f64, rate_line, Target};
use crate::server::{ServerProcess, SECRET};
use crate::tooldir::ZEROS;

/// The msize of the extra small-read follower.
pub const SMALL_MSIZE: u32 = 64 << 10;
/// Runs per figure.
pub const RUNS: usize = 3;
/// Goal: delivered MB/s at least this fraction of the pipe's.
pub const GOAL: Target = Target::AtLeast(0.5);
/// The marker's text before the count.
const MARKER_START: &[u8] = b"\n[toolsrv: ";
/// The marker's text after the count.
const MARKER_END: &[u8] = b" bytes omitted]\n";

/// What one follow of `out` saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Followed {
    /// Output bytes delivered (zero bytes; markers not counted).
    pub delivered: u64,
    /// Bytes the markers say were omitted.
    pub omitted: u64,
    /// How many markers there were.
    pub markers: usize,
    /// Reads that returned data.
    pub reads: u64,
    /// The largest read.
    pub max_read: usize,
}

/// Account for one chunk of `out` of a tool that prints only zero bytes:
/// zeros are delivered bytes, anything else is marker text, kept in `text`.
pub fn account(f: &mut Followed, text: &mut Vec<u8>, chunk: &[u8]) {
    f.reads += 1;
    f.max_read = f.max_read.max(chunk.len());
    // The common case, a chunk of zeros only, is checked with an OR-reduction
    // the compiler vectorizes (a per-byte count of zeros cost 14 % of the
    // machine's samples during the follow, more than the client library).
    if chunk.iter().fold(0u8, |acc, &b| acc | b) == 0 {
        f.delivered += chunk.len() as u64;
        return;
    }
    let zeros = chunk.iter().filter(|&&b| b == 0).count();
    f.delivered += zeros as u64;
    if zeros != chunk.len() {
        text.extend(chunk.iter().filter(|&&b| b != 0));
    }
}

/// Parse the concatenated marker text into `f.markers` and `f.omitted`;
/// fails on anything that is not a sequence of markers.
pub fn parse_markers(f: &mut Followed, mut text: &[u8]) -> Result<()> {
    while !text.is_empty() {
        let Some(rest) = text.strip_prefix(MARKER_START) else {
            bail!(
                "unexpected non-zero output {:?}",
                String::from_utf8_lossy(&text[..text.len().min(80)])
            );
        };
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        let n: u64 = std::str::from_utf8(&rest[..digits])
            .ok()
            .and_then(|d| d.parse().ok())
            .with_context(|| {
                format!(
                    "marker without a count: {:?}",
                    String::from_utf8_lossy(rest)
                )
            })?;
        let Some(after) = rest[digits..].strip_prefix(MARKER_END) else {
            bail!("malformed marker {:?}", String::from_utf8_lossy(text));
        };
        f.markers += 1;
        f.omitted += n;
        text = after;
    }
    Ok(())
}

/// Run part (c) on its own sandboxed server.
pub fn run(ctx: &Ctx) -> Result<()> {
    let size = ctx.stream_size;
    let servers = Servers::start(ctx)?;
    let rt = runtime(ctx.flavours[0]).context("cannot start the tokio runtime")?;
    println!(
        "\n== call-stream: follow proc/<pid>/out of `head -c {size} /dev/zero` run in the background by the sandboxed server (pid {}), {RUNS} runs per figure, interleaved; client runtime {}",
        servers.sandboxed.pid(),
        ctx.flavours[0].name()
    );
    let client = rt.block_on(connect(&servers.sandboxed, true, "bench-stream", TOOLS))?;
    println!(
        "   msize {} (largest read {} bytes)",
        client.msize(),
        client.msize().saturating_sub(24)
    );
    let (mut pipe, mut sh, mut follow) = (Vec::new(), Vec::new(), Vec::new());
    let mut seen = Vec::new();
    let mut cpu_srv = Duration::ZERO;
    let mut cpu_me = Duration::ZERO;
    for run in 0..RUNS {
        let t = pipe_read(size)?;
        pipe.push(mb_s(size, t));
        sh.push(mb_s(size, sh_pipe(size)?));
        let (s0, m0) = (
            cpu_time(servers.sandboxed.pid())?.0,
            cpu_time(std::process::id())?.0,
        );
        let (t, f) = rt.block_on(follow_out(&client, &servers.sandboxed, size))?;
        cpu_srv += cpu_time(servers.sandboxed.pid())?.0.saturating_sub(s0);
        cpu_me += cpu_time(std::process::id())?.0.saturating_sub(m0);
        follow.push(mb_s(f.delivered, t));
        println!(
            "   run {}: {} in {}: delivered {} bytes ({:.1} MB/s), omitted {} bytes in {} marker(s), {} reads (largest {} bytes, mean {} bytes), production rate {:.1} MB/s",
            run + 1,
            size,
            human(t),
            f.delivered,
            mb_s(f.delivered, t),
            f.omitted,
            f.markers,
            f.reads,
            f.max_read,
            f.delivered.checked_div(f.reads).unwrap_or(0),
            mb_s(f.delivered + f.omitted, t)
        );
        seen.push(f);
    }
    let med = |v: &[f64]| median_f64(v).unwrap_or(0.0);
    println!(
        "{:<34} {:>10.1} MB/s",
        "bare pipe read (in-process)",
        med(&pipe)
    );
    println!(
        "{}",
        rate_line(
            "sh: head | cat > /dev/null",
            med(&sh),
            "pipe read",
            med(&pipe),
            "MB/s",
            None
        )
    );
    println!(
        "{}",
        rate_line(
            "follow out (delivered)",
            med(&follow),
            "pipe read",
            med(&pipe),
            "MB/s",
            Some(GOAL)
        )
    );
    let gib = (size * RUNS as u64) as f64 / (1u64 << 30) as f64;
    println!(
        "   split: CPU per GiB followed: server {:.2} s, bench (client library) {:.2} s; the tool's own writes are not counted",
        cpu_srv.as_secs_f64() / gib,
        cpu_me.as_secs_f64() / gib
    );
    let small = rt.block_on(async {
        let c = Client::connect_with_msize(
            servers.sandboxed.socket(),
            Auth::Secret(SECRET.into()),
            SMALL_MSIZE,
        )
        .await
        .context("connecting with a small msize")?;
        c.load("bench-stream", TOOLS).await?;
        follow_out(&c, &servers.sandboxed, size).await
    })?;
    let (t, f) = small;
    println!(
        "{:<34} {:>10.1} MB/s delivered, omitted {} bytes in {} marker(s), {} reads (largest {} bytes), production rate {:.1} MB/s",
        format!("follow out, msize {} KiB (1 run)", SMALL_MSIZE >> 10),
        mb_s(f.delivered, t),
        f.omitted,
        f.markers,
        f.reads,
        f.max_read,
        mb_s(f.delivered + f.omitted, t)
    );
    seen.push(f);
    let omitted: u64 = seen.iter().map(|f| f.omitted).sum();
    if omitted > 0 {
        println!(
            "   FINDING: the follower fell behind and the server omitted output: {} of {} bytes over {} runs ({:.1} %); the delivered rate counts only the bytes that arrived",
            omitted,
            size * seen.len() as u64,
            seen.len(),
            100.0 * omitted as f64 / (size * seen.len() as u64) as f64
        );
    } else {
        println!("   nothing was omitted: every byte arrived");
    }
    Ok(())
}

fn mb_s(bytes: u64, t: Duration) -> f64 {
    let s = t.as_secs_f64();
    if s == 0.0 {
        return 0.0;
    }
    bytes as f64 / 1e6 / s
}

/// Read `head -c size /dev/zero`'s stdout through a pipe with 1 MiB reads.
fn pipe_read(size: u64) -> Result<Duration> {
    let t = Instant::now();
    let mut child = Command::new("head")
        .args(["-c", &size.to_string(), "/dev/zero"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot start head")?;
    let mut out = child.stdout.take().context("no stdout pipe")?;
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = out.read(&mut buf).context("reading the pipe")?;
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    let st = child.wait().context("waiting for head")?;
    ensure!(
        st.success() && total == size,
        "head: {st}, {total} of {size} bytes"
    );
    Ok(t.elapsed())
}

/// `head -c size /dev/zero | cat > /dev/null` by `/bin/sh`, timed.
fn sh_pipe(size: u64) -> Result<Duration> {
    let t = Instant::now();
    let st = Command::new("/bin/sh")
        .args(["-c", &format!("head -c {size} /dev/zero | cat > /dev/null")])
        .status()
        .context("cannot start /bin/sh")?;
    ensure!(st.success(), "head | cat: {st}");
    Ok(t.elapsed())
}

/// Start `zeros` in the background and follow its `out` to the end; the time
/// from the spawn request to the end, and what was seen. Dismisses it after.
async fn follow_out(
    client: &Client,
    srv: &ServerProcess,
    size: u64,
) -> Result<(Duration, Followed)> {
    let req = CallRequest::new(ZEROS, "bench-stream").arg("bytes", size.to_string());
    let t = Instant::now();
    let pid = client.spawn(&req).await.context("proc/new.bg")?;
    let out = client
        .open(&format!("proc/{pid}/out"), toolsrv_wire::OREAD)
        .await
        .with_context(|| format!("opening proc/{pid}/out on {}", srv.socket().display()))?;
    let mut f = Followed::default();
    let mut text = Vec::new();
    let mut offset = 0u64;
    loop {
        let chunk = out
            .read_at(offset, out.max_io())
            .await
            .context("reading out")?;
        if chunk.is_empty() {
            break;
        }
        offset += chunk.len() as u64;
        account(&mut f, &mut text, &chunk);
    }
    let elapsed = t.elapsed();
    parse_markers(&mut f, &text)?;
    let code = client.wait(pid).await.context("wait")?;
    ensure!(code == 0, "zeros exited {code}");
    client.dismiss(pid).await.context("dismiss")?;
    ensure!(
        f.delivered + f.omitted == size,
        "delivered {} + omitted {} != {size} printed",
        f.delivered,
        f.omitted
    );
    Ok((elapsed, f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_counted_and_zeros_delivered() {
        let mut f = Followed::default();
        let mut text = Vec::new();
        account(&mut f, &mut text, &[0; 10]);
        let mut c = vec![0u8; 3];
        c.extend_from_slice(b"\n[toolsrv: 1234 bytes omitted]\n");
        c.extend_from_slice(&[0; 5]);
        account(&mut f, &mut text, &c);
        account(&mut f, &mut text, b"\n[toolsrv: 6 bytes omitted]\n");
        parse_markers(&mut f, &text).expect("markers");
        assert_eq!(
            f,
            Followed {
                delivered: 18,
                omitted: 1240,
                markers: 2,
                reads: 3,
                max_read: c.len(),
            }
        );
    }

    #[test]
    fn other_text_is_refused() {
        let mut f = Followed::default();
        let e = parse_markers(&mut f, b"hello").unwrap_err();
        assert!(
            e.to_string()
                .contains("unexpected non-zero output \"hello\""),
            "{e}"
        );
        let e = parse_markers(&mut f, b"\n[toolsrv: x bytes omitted]\n").unwrap_err();
        assert!(e.to_string().contains("marker without a count"), "{e}");
    }
}
