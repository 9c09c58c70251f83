//! The files a server keeps beside its socket, named in one place:
//! `<socket>.secret`, `<socket>.mcp-token`, `<socket>.state`,
//! `<socket>.runs`.

use std::path::{Path, PathBuf};

/// A file beside a server's socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sibling {
    /// `<socket>.secret`: where clients before issue 33 kept the secret,
    /// and where `toolsrv remote` pins a forwarded socket's.
    Secret,
    /// `<socket>.mcp-token`: the MCP bridge's default token file.
    McpToken,
    /// `<socket>.state`: the server's own state (the quarantine among it).
    State,
    /// `<socket>.runs`: the record of the server's run leaders.
    Runs,
}

impl Sibling {
    /// The siblings hidden from every tool with the socket, whichever
    /// server's it is (the per-user registry hides these of each live
    /// entry).
    pub const HIDDEN_WITH_SOCKET: [Sibling; 2] = [Sibling::Secret, Sibling::McpToken];

    /// What is appended to the socket's path.
    pub fn suffix(self) -> &'static str {
        match self {
            Sibling::Secret => ".secret",
            Sibling::McpToken => ".mcp-token",
            Sibling::State => ".state",
            Sibling::Runs => ".runs",
        }
    }

    /// This sibling of `socket`: its path with [`Sibling::suffix`] appended
    /// (not a new extension: `s.sock` gives `s.sock.secret`).
    pub fn of(self, socket: &Path) -> PathBuf {
        let mut p = socket.as_os_str().to_owned();
        p.push(self.suffix());
        PathBuf::from(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sibling_appends_to_the_whole_socket_name() {
        let s = Path::new("/p/.run/a.sock");
        assert_eq!(Sibling::Secret.of(s), Path::new("/p/.run/a.sock.secret"));
        assert_eq!(
            Sibling::McpToken.of(s),
            Path::new("/p/.run/a.sock.mcp-token")
        );
        assert_eq!(Sibling::State.of(s), Path::new("/p/.run/a.sock.state"));
        assert_eq!(Sibling::Runs.of(Path::new("x")), Path::new("x.runs"));
    }
}
