//! `remote`: the cost of the SSH hop. `toolsrv remote up localhost` against
//! a loopback sshd, then the same server is measured twice in one run,
//! interleaved: through the local socket the SSH master forwards, and through
//! its own Unix socket (the baseline). Figures: a sync call of a trivial tool
//! (`shell command=true`, sandboxed), and `read_file("info")`.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use toolsrv_client::{Auth, CallRequest, Client};

use crate::benches::{runtime, Ctx};
use crate::report::{baseline_line, line, Figure};
use crate::stats::Summary;
use toolsrv_testkit::Sshd;

/// Measured calls per figure unless `--iters` says otherwise.
pub const DEFAULT_ITERS: usize = 500;
/// Interleaving block.
const BLOCK: usize = 25;

/// Run it.
pub fn run(ctx: &Ctx) -> Result<()> {
    let sshd = Sshd::start().context("the remote bench needs OpenSSH")?;
    let out = sshd
        .toolsrv(&ctx.bin)
        .args(["remote", "up", "--print-socket", "localhost"])
        .output()
        .context("cannot run toolsrv remote up")?;
    ensure!(
        out.status.success(),
        "toolsrv remote up failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let forwarded = String::from_utf8_lossy(&out.stdout).trim().to_string();
    // The remote server's default socket, in the remote state directory.
    let direct = sshd.path("rrun/toolsrv/remote/toolsrv.sock");
    let iters = ctx.iters.unwrap_or(DEFAULT_ITERS);
    let res = (|| {
        let rt = runtime(crate::args::Flavour::CurrentThread)?;
        rt.block_on(measure(Path::new(&forwarded), &direct, iters))
    })();
    // Always bring it down, whatever happened.
    let _ = sshd
        .toolsrv(&ctx.bin)
        .args(["remote", "down", "localhost"])
        .output();
    let figs = res?;
    println!(
        "\n== remote: one server, through the SSH-forwarded socket vs its own socket, {iters} iterations per figure, interleaved in blocks of {BLOCK}"
    );
    println!("{}", baseline_line(&figs[1]));
    println!("{}", line(&figs[0], &figs[1], None));
    println!("{}", baseline_line(&figs[3]));
    println!("{}", line(&figs[2], &figs[3], None));
    Ok(())
}

async fn connect(socket: &Path, secret: &str) -> Result<Client> {
    Client::connect(socket, Auth::Secret(secret.to_string()))
        .await
        .with_context(|| format!("cannot connect to {}", socket.display()))
}

/// [call via ssh, call direct, info via ssh, info direct].
async fn measure(forwarded: &Path, direct: &Path, iters: usize) -> Result<Vec<Figure>> {
    let secret = toolsrv_client::secret::socket_secret(forwarded)?;
    let via = connect(forwarded, &secret).await?;
    let own = connect(direct, &secret).await?;
    via.load("bench", &["shell"]).await?;
    let mut req = CallRequest::new("shell", "bench");
    req.args.push(("command".into(), "true".into()));
    for _ in 0..20.min(iters) {
        for c in [&via, &own] {
            let r = c.call(&req).await?;
            ensure!(!r.is_error, "the call failed: {}", r.joined_text());
            c.read_file("info").await?;
        }
    }
    let mut s: [Vec<Duration>; 4] = Default::default();
    let mut done = 0;
    while done < iters {
        let n = BLOCK.min(iters - done);
        for (i, c) in [(0, &via), (1, &own)] {
            for _ in 0..n {
                let t = Instant::now();
                c.call(&req).await?;
                s[i].push(t.elapsed());
            }
            for _ in 0..n {
                let t = Instant::now();
                c.read_file("info").await?;
                s[i + 2].push(t.elapsed());
            }
        }
        done += n;
    }
    let names = [
        "call shell true (ssh forward)",
        "call shell true (own socket)",
        "read_file info (ssh forward)",
        "read_file info (own socket)",
    ];
    names
        .iter()
        .zip(s.iter())
        .map(|(name, samples)| {
            Ok(Figure {
                name: (*name).to_string(),
                summary: Summary::of(samples).context("no samples")?,
            })
        })
        .collect()
}
