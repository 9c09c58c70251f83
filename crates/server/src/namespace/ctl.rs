//! The line-command file kind of the namespace's `ctl` files (the root's
//! `load`/`unload`, a process's `signal`/`kill`/`dismiss`): each write is
//! UTF-8 text, one command per line, applied in order; a `\r` before the
//! newline is dropped and blank lines are skipped. The first command that
//! fails ends the write with its error.

use std::sync::Arc;

use async_trait::async_trait;
use toolsrv_vfs::{ConnInfo, Error, File, Handle, OpenMode};

/// What a `ctl` file does with its commands.
pub(crate) trait Commands: Send + Sync + 'static {
    /// What an open of the file holds until it is closed.
    type Open: Send + Sync + 'static;
    /// Whether commands touch the filesystem: they run on the blocking pool.
    const BLOCKING: bool;

    /// Called at each open; the value lives as long as the open file.
    fn opened(&self) -> Self::Open;

    /// Applies one command line (trimmed, never blank).
    fn apply(&self, line: &str) -> Result<(), Error>;
}

/// A `ctl` file applying its writes' lines with `C`.
pub(crate) struct LineCommands<C>(pub(crate) Arc<C>);

impl<C: Commands> File for LineCommands<C> {
    fn open(&self, _mode: OpenMode, _conn: &ConnInfo) -> Result<Arc<dyn Handle>, Error> {
        Ok(Arc::new(LineHandle {
            _open: self.0.opened(),
            commands: self.0.clone(),
        }))
    }
}

struct LineHandle<C: Commands> {
    commands: Arc<C>,
    _open: C::Open,
}

#[async_trait]
impl<C: Commands> Handle for LineHandle<C> {
    async fn write(&self, _offset: u64, data: Vec<u8>) -> Result<u32, Error> {
        let (n, lines) = parse(data)?;
        let commands = self.commands.clone();
        let apply = move || {
            lines
                .iter()
                .try_for_each(|line| commands.apply(line.trim()))
        };
        if C::BLOCKING {
            tokio::task::spawn_blocking(apply)
                .await
                .map_err(|e| Error::new(format!("internal error: {e}")))??;
        } else {
            apply()?;
        }
        Ok(n)
    }
}

/// One write: the byte count to answer with and its command lines.
fn parse(data: Vec<u8>) -> Result<(u32, Vec<String>), Error> {
    let n = u32::try_from(data.len()).map_err(|_| Error::new("ctl: the write is too large"))?;
    let text =
        String::from_utf8(data).map_err(|_| Error::new("ctl: command is not valid UTF-8"))?;
    let lines = text
        .lines()
        .map(|line| line.trim_end_matches('\r'))
        .filter(|line| !line.trim().is_empty())
        .map(str::to_string)
        .collect();
    Ok((n, lines))
}
