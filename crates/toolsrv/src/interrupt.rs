//! The signals that cancel a `call`: Ctrl-C (SIGINT), SIGTERM (a supervisor
//! or `kill`) and SIGHUP (the terminal went away). Each is caught from the
//! moment a call starts, so none of them can end the client while the tool
//! keeps running on the server or a bypass request stays pending.

use std::process::ExitCode;

use anyhow::{Context, Result};
use tokio::signal::unix::{signal, Signal, SignalKind};

/// The three signals, listened for.
pub(crate) struct Interrupts {
    int: Signal,
    term: Signal,
    hup: Signal,
}

/// The signal that arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Interrupt {
    /// SIGINT (Ctrl-C).
    Int,
    /// SIGTERM.
    Term,
    /// SIGHUP.
    Hup,
}

impl Interrupt {
    /// The exit code a shell reports for a command ended by this signal
    /// (128 + its number): 130, 143 or 129.
    pub(crate) fn exit_code(self) -> ExitCode {
        let number = match self {
            Interrupt::Int => libc::SIGINT,
            Interrupt::Term => libc::SIGTERM,
            Interrupt::Hup => libc::SIGHUP,
        };
        ExitCode::from(128 + number as u8)
    }
}

impl Interrupts {
    /// Starts listening (inside the runtime); from now on these signals no
    /// longer end the process but are reported by [`Interrupts::recv`].
    pub(crate) fn listen() -> Result<Interrupts> {
        let on = |kind: SignalKind, name: &str| {
            signal(kind).with_context(|| format!("cannot catch {name}"))
        };
        Ok(Interrupts {
            int: on(SignalKind::interrupt(), "SIGINT")?,
            term: on(SignalKind::terminate(), "SIGTERM")?,
            hup: on(SignalKind::hangup(), "SIGHUP")?,
        })
    }

    /// The next of the three signals to arrive (one that arrived since
    /// [`Interrupts::listen`] is reported at once).
    pub(crate) async fn recv(&mut self) -> Interrupt {
        tokio::select! {
            _ = self.int.recv() => Interrupt::Int,
            _ = self.term.recv() => Interrupt::Term,
            _ = self.hup.recv() => Interrupt::Hup,
        }
    }
}
