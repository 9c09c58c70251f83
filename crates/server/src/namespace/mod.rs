//! The namespace of docs/protocol.md, "Namespace", declared in one place: [`spec`] builds the tree
//! from the server's state, as the architecture's `BuildTree(Spec(server))`.
//!
//! - [`bypassfs`]: `bypass/pending`, `bypass/resolve`.
//! - [`ctl`]: the line-command file kind of both `ctl` files.
//! - [`discovery`]: `ctl`'s commands, `tools`, `all`, `info`, `doctor`, `tools_rev`.
//! - [`procfs`]: `proc/list`, `proc/new`, `proc/new.bg`, `proc/{pid}/`.

mod bypassfs;
mod ctl;
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

/// The whole tree.
pub(crate) fn spec(server: &Arc<Server>) -> Node {
    dir(
        "/",
        0o555,
        vec![
            file(
                "ctl",
                0o200,
                ctl::LineCommands(Arc::new(discovery::RootCommands(server.clone()))),
            ),
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
