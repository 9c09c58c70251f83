//! `mcp`: a `tools/call` round trip through the MCP bridge (`toolsrv mcp`
//! over stdio, newline-delimited JSON-RPC written and read by the bench
//! itself) vs the same call over 9P (`Client::call` on `proc/new`) to the
//! same sandboxed server, interleaved in blocks in the same run. The tool is
//! `/bin/true` (`true_exec`), so the figures are the transports' cost plus a
//! spawn. Goal: the MCP round trip at most 1.2x the 9P one.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use toolsrv_client::CallRequest;

use crate::agent::{call_ok, connect};
use crate::benches::{runtime, Ctx};
use crate::report::{baseline_line, time_line, Figure, Target};
use crate::server::{ServerProcess, SECRET};
use crate::stats::Summary;
use crate::tooldir::{bench_tools_dir, TRUE_EXEC};

/// Measured calls per figure unless `--iters` says otherwise.
pub const DEFAULT_ITERS: usize = 1_000;
const WARMUP: usize = 50;
const BLOCK: usize = 50;
/// MCP `tools/call` vs the same call over 9P.
pub const GOAL: Target = Target::AtMost(1.2);

/// `toolsrv mcp` as a child, spoken to over its stdin and stdout.
struct Bridge {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
    line: String,
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Bridge {
    fn start(ctx: &Ctx, srv: &ServerProcess, agent: &str) -> Result<Bridge> {
        let mut child = Command::new(&ctx.bin)
            .arg("--socket")
            .arg(srv.socket())
            .args(["mcp", "--agent", agent, "--load", TRUE_EXEC])
            .env("TOOLSRV_SECRET", SECRET)
            .env_remove("RUST_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot start toolsrv mcp")?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            bail!("toolsrv mcp has no pipes");
        };
        let mut b = Bridge {
            child,
            stdin,
            stdout: BufReader::new(stdout),
            next_id: 1,
            line: String::new(),
        };
        b.request(
            "initialize",
            r#"{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"toolsrv-bench","version":"0"}}"#,
        )?;
        b.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)?;
        Ok(b)
    }

    fn send(&mut self, msg: &str) -> Result<()> {
        self.stdin.write_all(msg.as_bytes())?;
        self.stdin.write_all(b"\n")?;
        self.stdin.flush()?;
        Ok(())
    }

    /// Sends a request and reads lines until its response; returns it.
    fn request(&mut self, method: &str, params: &str) -> Result<&str> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#
        ))?;
        let want = format!(r#""id":{id}"#);
        loop {
            self.line.clear();
            if self.stdout.read_line(&mut self.line)? == 0 {
                bail!("toolsrv mcp closed its stdout");
            }
            if self.line.contains(&want) {
                ensure!(
                    !self.line.contains(r#""error":"#),
                    "{method}: {}",
                    self.line
                );
                return Ok(&self.line);
            }
        }
    }

    fn call(&mut self) -> Result<Duration> {
        let t = Instant::now();
        let params = format!(r#"{{"name":"{TRUE_EXEC}","arguments":{{}}}}"#);
        let r = self.request("tools/call", &params)?;
        ensure!(r.contains(r#""isError":false"#), "tools/call: {r}");
        Ok(t.elapsed())
    }
}

pub fn run(ctx: &Ctx) -> Result<()> {
    let iters = ctx.iters.unwrap_or(DEFAULT_ITERS);
    let warmup = WARMUP.min(iters);
    let tools = bench_tools_dir("toolsrv-bench-tools")?;
    let srv = ServerProcess::authed_with_tools(&ctx.bin, tools.path())?;
    println!(
        "\n== mcp: tools/call of /bin/true through `toolsrv mcp` (stdio) vs the same call over 9P; sandboxed server (pid {}), auth on; {iters} calls per figure after {warmup} warm-up, interleaved in blocks of {BLOCK}",
        srv.pid()
    );
    let mut bridge = Bridge::start(ctx, &srv, "bench-mcp")?;
    let rt = runtime(crate::args::Flavour::CurrentThread).context("tokio runtime")?;
    let (nine, mcp) = rt.block_on(async {
        let client = connect(&srv, true, "bench-9p", &[TRUE_EXEC]).await?;
        let req = CallRequest::new(TRUE_EXEC, "bench-9p");
        let mut nine = Vec::with_capacity(iters);
        let mut mcp = Vec::with_capacity(iters);
        for _ in 0..warmup {
            call_ok(&client, &req).await?;
            bridge.call()?;
        }
        while nine.len() < iters {
            let n = BLOCK.min(iters - nine.len());
            for _ in 0..n {
                let t = Instant::now();
                call_ok(&client, &req).await?;
                nine.push(t.elapsed());
            }
            for _ in 0..n {
                mcp.push(bridge.call()?);
            }
        }
        anyhow::Ok((nine, mcp))
    })?;
    let fig = |name: &str, v: &[Duration]| -> Result<Figure> {
        Ok(Figure {
            name: name.into(),
            summary: Summary::of(v).context("no samples")?,
        })
    };
    let nine = fig("9p call /bin/true", &nine)?;
    let mcp = fig("mcp tools/call /bin/true", &mcp)?;
    println!("{}", baseline_line(&nine));
    println!("{}", time_line(&mcp, &nine, Some(GOAL)));
    Ok(())
}
