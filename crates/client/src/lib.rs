//! Async Rust client for toolsrv: 9P2000 over a Unix socket (docs/protocol.md;
//! docs/cli.md, "The client"; docs/client.md).
//!
//! It is not on crates.io: depend on it by path or by git, with tokio:
//!
//! ```toml
//! [dependencies]
//! toolsrv-client = { path = "../toolsrv/crates/client" }   # or { git = "<this repository>" }
//! tokio = { version = "1", features = ["rt", "macros"] }
//! ```
//!
//! The types a result needs are re-exported: [`ToolResult`], [`Content`],
//! [`ProcState`] (and [`ProcStat`]). A call, a background run, and a cancel:
//!
//! ```no_run
//! use std::path::Path;
//! use std::time::Duration;
//! use toolsrv_client::{resolve_secret, Auth, CallRequest, Client, ClientError, Content, ProcState};
//!
//! # async fn demo() -> Result<(), ClientError> {
//! let socket = Path::new("/run/user/1000/toolsrv.sock");
//! let secret = resolve_secret(socket, None)?; // $TOOLSRV_SECRET, else <socket>.secret
//! let client = Client::connect(socket, Auth::Secret(secret)).await?;
//! client.load("my-agent", &["shell"]).await?;
//!
//! // A call: its result, text and image items.
//! let mut req = CallRequest::new("shell", "my-agent");
//! req.args.push(("command".into(), "ls -l".into()));
//! let result = client.call(&req).await?;
//! for item in &result.content {
//!     match item {
//!         Content::Text { text } => print!("{text}"),
//!         Content::Image { mime_type, .. } => println!("[an image, {mime_type}]"),
//!     }
//! }
//! assert!(!result.is_error, "the tool failed: {}", result.joined_text());
//!
//! // A background run: its pid, its state, its output once it ended.
//! let mut req = CallRequest::new("shell", "my-agent");
//! req.args.push(("command".into(), "make test".into()));
//! let pid = client.spawn(&req).await?;
//! let code = client.wait(pid).await?;
//! let stat = client.proc_stat(pid).await?;
//! assert_eq!(stat.state, ProcState::Exited, "exit code {code}");
//! let output = client.output(pid).await?;
//! # let _ = output;
//!
//! // A cancel: a background run is killed by its pid; a call is cancelled
//! // by dropping its future (here, at the timeout).
//! let pid = client.spawn(&req).await?;
//! client.kill(pid).await?;
//! let call = client.call(&req);
//! if tokio::time::timeout(Duration::from_secs(5), call).await.is_err() {
//!     // Dropped: every process of the run is killed.
//! }
//! # Ok(()) }
//! ```
//!
//! Cancellation: dropping the future of a call abandons it; an outstanding
//! read is flushed (`Tflush`) and the call's fid clunked, which cancels a
//! running tool.
//!
//! Reconnect: after the server restarts, the same [`Client`] (and every clone)
//! reconnects on its next request and authenticates again with its saved
//! secret; requests that were in flight fail with [`ClientError::Disconnected`].
//!
//! Remote servers: [`Client::connect_address`] also takes
//! `ssh://[user@]host[:port][/remote/socket]` (docs/remote.md).

pub mod address;
mod alloc;
mod auth;
mod client;
mod conn;
mod error;
mod file;
pub mod remote;
mod reply;
pub mod secret;
pub mod secret_store;
mod session;
mod sys;
mod tools;
mod walk;

pub use address::{Address, AddressError, SshAddress};
pub use auth::Auth;
pub use client::Client;
pub use error::ClientError;
pub use file::RemoteFile;
pub use secret::resolve_secret;
pub use tools::{CallRequest, PendingWatch};
pub use toolsrv_protocol::{Content, ProcStat, ProcState, ToolResult};
pub use toolsrv_wire::{Body, Qid, Stat};
