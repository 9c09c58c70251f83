//! The error a handler returns: it becomes the `ename` of an `Rerror`.

use std::fmt;

/// An `Rerror` message: a short lowercase sentence naming the problem and the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

impl Error {
    /// An error with this message.
    pub fn new(msg: impl Into<String>) -> Error {
        Error(msg.into())
    }
    /// `permission denied`.
    pub fn permission_denied() -> Error {
        Error::new("permission denied")
    }
    /// `cancelled`: the request's fid was clunked while it waited.
    pub fn cancelled() -> Error {
        Error::new("cancelled")
    }
    /// The message text.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl From<String> for Error {
    fn from(s: String) -> Error {
        Error(s)
    }
}

impl From<&str> for Error {
    fn from(s: &str) -> Error {
        Error(s.to_string())
    }
}
