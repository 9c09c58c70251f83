//! The client's error type.

/// Why a client operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// A local I/O operation (socket, secret file) failed. The Display is the
    /// context; the OS error is the [`std::error::Error::source`] (print the
    /// chain, e.g. anyhow's `{:#}`, to see both, each once).
    #[error("{context}")]
    Io {
        /// What was being done, naming the path involved.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The connection to the server is closed; outstanding and later requests fail.
    #[error("disconnected from the server")]
    Disconnected,
    /// The server answered `Rerror`; the Display is the server's `ename` verbatim.
    #[error("{0}")]
    Server(String),
    /// The server's reply did not follow 9P2000 (wrong reply type, bad frame, ...).
    #[error("protocol error: {0}")]
    Protocol(String),
    /// Authentication failed or could not be attempted (the server refused the
    /// secret, the secret file is unusable, ...). The Display is the message
    /// verbatim, e.g. the server's `authentication failed`.
    #[error("{0}")]
    Auth(String),
}

impl ClientError {
    /// An [`ClientError::Io`] with a context sentence.
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        ClientError::Io {
            context: context.into(),
            source,
        }
    }

    /// The server's error string, if this is a [`ClientError::Server`].
    pub fn server_message(&self) -> Option<&str> {
        match self {
            ClientError::Server(s) => Some(s),
            _ => None,
        }
    }
}
