//! Rough latency check: `read_file` round trips against a running server
//! versus a raw Unix-socket echo round trip (tokio client, echo thread).
//!
//! Usage: `cargo run -p toolsrv-client --example latency -- <socket> [iterations]`
//! against `toolsrv serve --listen <socket> --no-auth`.

// An example program: an unexpected failure is a panic that names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toolsrv_client::{Auth, Client};

/// The same four-message pipeline with a blocking socket and no client library:
/// what the server alone costs.
fn raw_pipeline(
    socket: &std::path::Path,
    n: usize,
) -> Result<Vec<Duration>, Box<dyn std::error::Error>> {
    use toolsrv_wire::{decode, encode, read_frame, Body, Frame, NOFID, NOTAG};
    let mut s = std::os::unix::net::UnixStream::connect(socket)?;
    let recv = |s: &mut std::os::unix::net::UnixStream| -> std::io::Result<Frame> {
        let buf = read_frame(s, 1 << 20)?;
        decode(&buf).map_err(|e| std::io::Error::other(e.to_string()))
    };
    let mut out = Vec::new();
    let setup = [
        (
            NOTAG,
            Body::Tversion {
                msize: 1 << 20,
                version: "9P2000".into(),
            },
        ),
        (
            1,
            Body::Tattach {
                fid: 0,
                afid: NOFID,
                uname: "agent".into(),
                aname: String::new(),
            },
        ),
    ];
    for (tag, body) in setup {
        out.clear();
        encode(&Frame { tag, body }, &mut out);
        s.write_all(&out)?;
        recv(&mut s)?;
    }
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        out.clear();
        for (tag, body) in [
            (
                1,
                Body::Twalk {
                    fid: 0,
                    newfid: 1,
                    wnames: vec!["info".into()],
                },
            ),
            (2, Body::Topen { fid: 1, mode: 0 }),
            (
                3,
                Body::Tread {
                    fid: 1,
                    offset: 0,
                    count: (1 << 20) - 24,
                },
            ),
            (4, Body::Tclunk { fid: 1 }),
        ] {
            encode(&Frame { tag, body }, &mut out);
        }
        s.write_all(&out)?;
        for _ in 0..4 {
            recv(&mut s)?;
        }
        times.push(t.elapsed());
    }
    Ok(times)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let socket = PathBuf::from(args.next().ok_or("usage: latency <socket> [iterations]")?);
    let n: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(2000);

    // Raw echo baseline.
    let (a, mut b) = std::os::unix::net::UnixStream::pair()?;
    std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        while let Ok(k) = b.read(&mut buf) {
            if k == 0 || b.write_all(&buf[..k]).is_err() {
                break;
            }
        }
    });
    a.set_nonblocking(true)?;
    let mut a = tokio::net::UnixStream::from_std(a)?;
    let msg = [7u8; 40];
    let mut back = [0u8; 40];
    let mut echo = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        a.write_all(&msg).await?;
        a.read_exact(&mut back).await?;
        echo.push(t.elapsed());
    }

    let client = Client::connect(&socket, Auth::None).await?;
    let mut reads = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let data = client.read_file("info").await?;
        reads.push(t.elapsed());
        assert!(!data.is_empty());
    }
    let floor = median(raw_pipeline(&socket, n)?);
    let (e, r) = (median(echo), median(reads));
    println!(
        "echo median {e:?}, read_file median {r:?}, ratio {:.2}; \
         blocking raw 9P pipeline (server floor) {floor:?}",
        r.as_secs_f64() / e.as_secs_f64()
    );
    Ok(())
}
