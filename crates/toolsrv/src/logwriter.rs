//! Where the daemon's log goes: [`init`], and a writer that never fails.
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

/// Send the daemon's log to `file` (created 0600: the log names sockets,
/// paths and commands of every run; an existing file keeps the mode its
/// owner gave it), else to stderr; `RUST_LOG` filters it (default `info`).
pub fn init(file: Option<&std::path::Path>) -> anyhow::Result<()> {
    use anyhow::Context;
    use std::os::unix::fs::OpenOptionsExt;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match file {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(path)
                .with_context(|| format!("--log {}: cannot open", path.display()))?;
            builder
                .with_ansi(false)
                .with_writer(LogWriter::File(Arc::new(file)))
                .init();
        }
        None => {
            use std::io::IsTerminal;
            // Colours only for a person reading a terminal, never in a pipe or a file.
            builder
                .with_ansi(io::stderr().is_terminal())
                .with_writer(LogWriter::Stderr)
                .init()
        }
    }
    Ok(())
}
