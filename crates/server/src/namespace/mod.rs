//! The namespace of docs/protocol.md, "Namespace", declared in one place: [`spec`] builds the tree
//! from the server's state, as the architecture's `BuildTree(Spec(server))`.
//!
//! - [`bypassfs`]: `bypass/pending`, `bypass/resolve`.
//! - [`discovery`]: `ctl`, `tools`, `all`, `info`, `doctor`, `tools_rev`.
//! - [`procfs`]: `proc/list`, `proc/new`, `proc/new.bg`, `proc/{pid}/`.

mod bypassfs;
mod discovery;
mod procfs;

use std::sync::Arc;

use toolsrv_vfs::tree::{dir, dir_with, file};
use toolsrv_vfs::Node;

use crate::files::WriteThenRead;
use crate::server::Server;

/// A server error as the `Rerror` a client reads: its text.
pub(crate) fn rerror(e: impl std::error::Error) -> toolsrv_vfs::Error {
    toolsrv_vfs::Error::new(e.to_string())
}

/// One write to a `ctl` file (the root's or a process's): the byte count to
/// answer with and its commands. The write is UTF-8 text, one command per
/// line; a `\r` before the newline is dropped and blank lines are skipped.
pub(crate) fn ctl_commands(data: Vec<u8>) -> Result<(u32, Vec<String>), toolsrv_vfs::Error> {
    let n = data.len() as u32;
    let text = String::from_utf8(data)
        .map_err(|_| toolsrv_vfs::Error::new("ctl: command is not valid UTF-8"))?;
    let commands = text
        .lines()
        .map(|line| line.trim_end_matches('\r'))
        .filter(|line| !line.trim().is_empty())
        .map(str::to_string)
        .collect();
    Ok((n, commands))
}

/// The whole tree.
pub(crate) fn spec(server: &Arc<Server>) -> Node {
    dir(
        "/",
        0o555,
        vec![
            file("ctl", 0o200, discovery::CtlFile(server.clone())),
            file(
                "tools",
                0o600,
                WriteThenRead(Arc::new(discovery::ToolsRequest(server.clone()))),
            ),
            file("all", 0o444, discovery::AllFile(server.clone())),
            file("info", 0o444, discovery::info_file(server)),
            file("doctor", 0o444, discovery::doctor_file(server)),
            file(
                "tools_rev",
                0o600,
                WriteThenRead(Arc::new(discovery::RevRequest(server.clone()))),
            ),
            dir(
                "bypass",
                0o555,
                vec![
                    file("pending", 0o444, bypassfs::PendingFile(server.clone())),
                    file("resolve", 0o200, bypassfs::ResolveFile(server.clone())),
                ],
            ),
            dir_with(
                "proc",
                0o555,
                Arc::new(procfs::ProcDir::new(
                    server.clone(),
                    vec![
                        file(
                            "list",
                            0o600,
                            WriteThenRead(Arc::new(procfs::ListRequest(server.clone()))),
                        ),
                        file(
                            "new",
                            0o600,
                            WriteThenRead(Arc::new(procfs::NewRequest {
                                server: server.clone(),
                                background: false,
                            })),
                        ),
                        file(
                            "new.bg",
                            0o600,
                            WriteThenRead(Arc::new(procfs::NewRequest {
                                server: server.clone(),
                                background: true,
                            })),
                        ),
                    ],
                )),
            ),
        ],
    )
}
