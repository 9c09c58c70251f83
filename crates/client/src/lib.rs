//! Async Rust client for toolsrv: 9P2000 over a Unix socket (CONTRACT §2–§4, §10).
//!
//! ```no_run
//! # async fn demo() -> Result<(), toolsrv_client::ClientError> {
//! use std::path::Path;
//! use toolsrv_client::{resolve_secret, Auth, Client};
//! let socket = Path::new("/run/user/1000/toolsrv.sock");
//! let secret = resolve_secret(socket, None)?;
//! let client = Client::connect(socket, Auth::Secret(secret)).await?;
//! let info = client.read_file("info").await?;
//! # let _ = info; Ok(()) }
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
pub use toolsrv_wire::{Body, Qid, Stat};
