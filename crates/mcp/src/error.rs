//! The bridge's errors.

use thiserror::Error;

/// An argument of `tools/call` that cannot become a payload field. Shown to
/// the caller as an error result (`isError: true`).
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ArgError {
    /// A reserved payload key that the bridge sets itself.
    #[error("argument {0:?} is reserved: the bridge sets it (see docs/mcp.md)")]
    Reserved(String),
    /// `bypass` given as an argument.
    #[error(
        "argument \"bypass\" is reserved: ask for a bypass with _meta {{\"toolsrv/bypass\": true}}"
    )]
    Bypass,
    /// A name that a payload line cannot carry.
    #[error("argument name {0:?} cannot be sent (empty, or holds '=' or a newline)")]
    BadName(String),
    /// A `timeout` that is not a duration.
    #[error("argument \"timeout\" must be a duration such as 30s or 5m, got {0:?}")]
    Timeout(String),
}

/// Errors starting or running the bridge.
#[derive(Debug, Error)]
pub enum BridgeError {
    /// The toolsrv client failed.
    #[error(transparent)]
    Client(#[from] toolsrv_client::ClientError),
    /// An I/O error, with what was being done.
    #[error("{what}: {source}")]
    Io {
        /// What failed.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A bad `--http` address or configuration.
    #[error("{0}")]
    Config(String),
    /// The MCP session failed.
    #[error("MCP: {0}")]
    Mcp(String),
}

impl BridgeError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        BridgeError::Io {
            what: what.into(),
            source,
        }
    }
}
