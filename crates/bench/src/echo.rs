//! The baseline: a raw Unix-socket echo round trip (16 bytes out, 16 back)
//! against a tokio echo server task on a temp socket in this process.

use std::path::PathBuf;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

/// The size of one echo message.
pub const ECHO_LEN: usize = 16;

/// An echo server listening on a temp socket; stops when dropped.
#[derive(Debug)]
pub struct EchoServer {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    stop: Stop,
}

/// How an echo server is stopped.
#[derive(Debug)]
enum Stop {
    /// A task on the caller's runtime: abort it.
    Task(tokio::task::JoinHandle<()>),
    /// A thread with its own runtime: dropping the sender ends it.
    Thread(Option<tokio::sync::oneshot::Sender<()>>),
}

impl EchoServer {
    /// Bind a temp socket and spawn the accept loop on the current runtime.
    pub fn start() -> std::io::Result<EchoServer> {
        let dir = tempfile::Builder::new()
            .prefix("toolsrv-bench-echo")
            .tempdir()?;
        let socket = dir.path().join("echo.sock");
        let listener = UnixListener::bind(&socket)?;
        let task = tokio::spawn(accept_loop(listener));
        Ok(EchoServer {
            _dir: dir,
            socket,
            stop: Stop::Task(task),
        })
    }

    /// Bind a temp socket and serve it from a thread of its own with its own
    /// current-thread runtime, so that every round trip wakes another thread
    /// (as a round trip to the server process does).
    pub fn start_on_thread() -> std::io::Result<EchoServer> {
        let dir = tempfile::Builder::new()
            .prefix("toolsrv-bench-echo")
            .tempdir()?;
        let socket = dir.path().join("echo.sock");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let listener = {
            let _entered = rt.enter();
            UnixListener::bind(&socket)?
        };
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("echo-server".into())
            .spawn(move || {
                rt.block_on(async move {
                    tokio::select! {
                        _ = accept_loop(listener) => {}
                        _ = rx => {}
                    }
                })
            })?;
        Ok(EchoServer {
            _dir: dir,
            socket,
            stop: Stop::Thread(Some(tx)),
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
        match &mut self.stop {
            Stop::Task(t) => t.abort(),
            Stop::Thread(tx) => drop(tx.take()),
        }
    }
}

/// Accept connections and echo on each until the listener fails.
async fn accept_loop(listener: UnixListener) {
    while let Ok((conn, _)) = listener.accept().await {
        tokio::spawn(echo(conn));
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

    #[tokio::test]
    async fn echo_on_a_thread_round_trips() {
        let srv = EchoServer::start_on_thread().expect("echo server");
        let mut c = srv.connect().await.expect("connect");
        for i in 0..100 {
            c.round_trip(i).await.expect("round trip");
        }
    }
}
