//! Where the daemon's log goes: a writer that never fails.
//!
//! A daemon must survive its log going away (`toolsrv serve 2>&1 | head -3`):
//! tracing-subscriber reports a failed write with `eprintln!`, which panics on
//! a closed stderr and takes down the task that was logging (the signal
//! watcher included). This writer swallows write errors instead: a log line
//! that cannot be written is lost, nothing else is.

use std::io::{self, Write};
use std::sync::Arc;

/// Writes log lines to stderr or a file, and reports every write as done.
#[derive(Clone)]
pub enum LogWriter {
    /// Standard error.
    Stderr,
    /// The `--log` file.
    File(Arc<std::fs::File>),
}

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let _ = match self {
            LogWriter::Stderr => io::stderr().write_all(buf),
            LogWriter::File(f) => (&**f).write_all(buf),
        };
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogWriter;

    fn make_writer(&'a self) -> LogWriter {
        self.clone()
    }
}

/// `eprintln!` that never panics (a closed stderr loses the line).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
pub(crate) use say;
