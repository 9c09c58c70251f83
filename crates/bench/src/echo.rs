//! The baseline: a raw Unix-socket echo round trip (16 bytes out, 16 back)
//! against a tokio echo server task on a temp socket in this process.

use std::path::PathBuf;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

/// The size of one echo message.
pub const ECHO_LEN: usize = 16;

/// An echo server task listening on a temp socket; stops when dropped.
#[derive(Debug)]
pub struct EchoServer {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

impl EchoServer {
    /// Bind a temp socket and spawn the accept loop on the current runtime.
    pub fn start() -> std::io::Result<EchoServer> {
        let dir = tempfile::Builder::new()
            .prefix("toolsrv-bench-echo")
            .tempdir()?;
        let socket = dir.path().join("echo.sock");
        let listener = UnixListener::bind(&socket)?;
        let task = tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                tokio::spawn(echo(conn));
            }
        });
        Ok(EchoServer {
            _dir: dir,
            socket,
            task,
        })
    }

    /// Connect a client.
    pub async fn connect(&self) -> std::io::Result<EchoClient> {
        Ok(EchoClient {
            s: UnixStream::connect(&self.socket).await?,
        })
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Echo fixed-size messages back until the peer closes.
async fn echo(mut conn: UnixStream) {
    let mut buf = [0u8; ECHO_LEN];
    while conn.read_exact(&mut buf).await.is_ok() {
        if conn.write_all(&buf).await.is_err() {
            return;
        }
    }
}

/// A connection to the echo server.
#[derive(Debug)]
pub struct EchoClient {
    s: UnixStream,
}

impl EchoClient {
    /// One round trip: write 16 bytes, read 16 back, and check they match.
    pub async fn round_trip(&mut self, seq: u64) -> std::io::Result<()> {
        let mut out = [0u8; ECHO_LEN];
        out[..8].copy_from_slice(&seq.to_le_bytes());
        self.s.write_all(&out).await?;
        let mut back = [0u8; ECHO_LEN];
        self.s.read_exact(&mut back).await?;
        if back != out {
            return Err(std::io::Error::other(format!(
                "echo of message {seq} came back altered"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn echo_round_trips() {
        let srv = EchoServer::start().expect("echo server");
        let mut c = srv.connect().await.expect("connect");
        for i in 0..100 {
            c.round_trip(i).await.expect("round trip");
        }
    }
}
