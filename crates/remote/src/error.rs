//! The crate's error type.

/// Why a remote operation failed.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// A local file or process operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// ssh failed or a remote command reported an error.
    #[error("{0}")]
    Ssh(String),
    /// The remote host cannot run this binary, or something else on the
    /// remote side stops the deployment.
    #[error("{0}")]
    Remote(String),
    /// Bad local configuration or input (a path that cannot be sent, ...).
    #[error("{0}")]
    Config(String),
    /// The remote is not up (no state for this address).
    #[error("{0} is not up (run `toolsrv remote up {0}`)")]
    NotUp(String),
}

impl RemoteError {
    /// An [`RemoteError::Io`] with a context sentence.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> RemoteError {
        RemoteError::Io {
            context: context.into(),
            source,
        }
    }
}
