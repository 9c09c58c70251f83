//! The 9P2000 server core: serves a tree of synthetic files over any byte stream.
//!
//! - [`node`]: what a tree is made of: [`Node`]s that are directories ([`Dir`]) or
//!   files ([`File`]), and the per-open [`Handle`] whose `read`/`write` may block.
//! - [`tree`]: builders for declaring a tree in one place ([`tree::dir`], [`tree::file`]).
//! - [`auth`]: the [`Auth`] hook for `Tauth`/`Tattach`.
//! - [`conn`]: [`serve_connection`], the per-connection loop over any byte stream
//!   (`AsyncRead + AsyncWrite`): reads frames, writes the queued replies.
//! - `dispatch`: each request against the connection's fid table and tree:
//!   version/msize negotiation, walks, concurrent reads and writes, `Tflush`,
//!   clunk-on-close.
//! - [`conninfo`]: [`ConnInfo`], what handlers know of the connection.
//! - [`error`]: [`Error`], the `ename` of an `Rerror`.
//! - [`limits`]: what one connection may hold ([`Limits`]): fids, unsent replies
//!   (back-pressure), unanswered request data ([`RequestBudget`]), time to attach.
//!
//! Requests on one connection are handled in arrival order as far as they complete
//! at once (walk, open, stat, clunk, and reads/writes that do not block), so a
//! client may pipeline `Twalk`+`Topen`+`Tread`+`Tclunk`. A read or write whose
//! handler would block is moved to its own task; it never delays other requests,
//! can be abandoned with `Tflush`, and completes with `cancelled` when its fid is
//! clunked. When a batch of requests ends with such a read, the replies before it
//! are held back (at most 20 ms) to leave in one write with the read's reply.

#![forbid(unsafe_code)]

pub mod auth;
pub mod conn;
pub mod conninfo;
mod dirread;
mod dispatch;
pub mod error;
mod fids;
mod inflight;
pub mod limits;
pub mod node;
mod outbox;
pub mod preauth;
mod replies;
pub mod tree;
mod writer;

pub use auth::{Auth, AuthHandle, NoAuth};
pub use conn::{serve_connection, serve_connection_with};
pub use conninfo::ConnInfo;
pub use dispatch::MAX_MSIZE;
pub use error::Error;
pub use limits::{Limits, RequestBudget, Reservation};
pub use node::{Dir, File, Handle, Node, NodeKind, OpenMode};
